"""The models, loaders and expected losses ``check_evaluate`` tries a learner's loop on.

Everything here is data: :data:`NETWORKS` (the chapter's model, and one with two outputs
whose train-mode layers are of other kinds), :data:`CASES` (which model, in which mode,
on batches of which sizes), :func:`expected` (what a right loop returns on a case, and what
the usual wrong loops return) and :data:`WRONG_LOOPS` (the hint for each of those).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograd_helpers.checks.modes._grads import with_gradients

__all__ = [
    "CASES",
    "FEATURES",
    "NETWORKS",
    "WRONG_LOOPS",
    "Case",
    "Expected",
    "chapter_model",
    "expected",
    "loader_for",
]

Loader = list[tuple[Tensor, Tensor]]
FEATURES = 4  # every network here takes 4 features; a batch of 5 makes it raise


def chapter_model() -> nn.Sequential:
    """The chapter's model (exercise 1's): Linear, BatchNorm1d, ReLU, Dropout, Linear."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1)
    )


def _other_kinds() -> nn.Sequential:
    # Train mode changes these too, and they are neither nn.Dropout nor nn.BatchNorm1d: a loop
    # that switches only those two kinds to eval fails here. Two outputs: `F.mse_loss`
    # averages over them too, so a loss summed over each row and divided by the rows is off.
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Linear(FEATURES, 6),
        nn.Unflatten(1, (2, 3)),
        nn.InstanceNorm1d(2, track_running_stats=True),
        nn.Flatten(),
        nn.RReLU(),
        nn.Linear(6, 2),
    )


# name -> (how the feedback calls it, how to build it, its number of outputs)
NETWORKS: dict[str, tuple[str, Callable[[], nn.Sequential], int]] = {
    "chapter": ("the chapter's model", chapter_model, 1),
    "other kinds": (
        "a model with instance norm (running statistics), RReLU and two outputs",
        _other_kinds,
        2,
    ),
}


@dataclass(frozen=True)
class Case:
    """One call of the learner's loop: a fresh model in a mode, and a loader.

    Attributes:
        network: a key of :data:`NETWORKS`.
        start: the mode the model is in when the loop gets it, ``"train"`` or ``"eval"``.
        sizes: the rows of each batch (uneven on purpose: a mean over samples differs).
        dtype: the model's and the data's dtype.
        frozen: parameters frozen before the call, as in fine-tuning.
            Every parameter, frozen or not, holds a ``.grad`` as in the middle of training.
        raises: the last batch has the wrong width, so that the model raises on it.
    """

    network: str
    start: str
    sizes: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    frozen: tuple[str, ...] = ()
    raises: bool = False

    @property
    def description(self) -> str:
        """``"the chapter's model in train mode, on batches of 8, 8 and 5 rows"``."""
        rows = [str(n) for n in self.sizes]
        batches = (
            f"one batch of {rows[0]} rows"
            if len(rows) == 1
            else f"batches of {', '.join(rows[:-1])} and {rows[-1]} rows"
        )
        dtype = (
            f" ({str(self.dtype).removeprefix('torch.')})" if self.dtype != torch.float32 else ""
        )
        return f"{NETWORKS[self.network][0]}{dtype} in {self.start} mode, on {batches}"

    def model(self) -> nn.Sequential:
        model = NETWORKS[self.network][1]().to(self.dtype).train(self.start == "train")
        parameters = dict(model.named_parameters())
        for name in self.frozen:
            parameters[name].requires_grad_(False)
        return with_gradients(model)


CASES = (
    Case("chapter", "train", (8, 8, 5), frozen=("0.weight", "0.bias")),
    Case("chapter", "eval", (8, 8, 5)),
    Case("other kinds", "train", (7, 3, 5)),
    Case("chapter", "eval", (6,)),
    Case("chapter", "train", (4, 9, 2), dtype=torch.float64),
    Case("chapter", "train", (8, 5), raises=True),
)


def loader_for(case: Case, seed: int) -> Loader:
    """The case's batches; with ``raises``, the last one has a feature too many."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for index, rows in enumerate(case.sizes):
        width = FEATURES + (case.raises and index == len(case.sizes) - 1)
        x = torch.randn(rows, width, generator=generator, dtype=case.dtype)
        outputs = NETWORKS[case.network][2]
        batches.append((x, torch.randn(rows, outputs, generator=generator, dtype=case.dtype)))
    return batches


@dataclass(frozen=True)
class Expected:
    """What loops return on one case: the right one, and the usual wrong ones."""

    right: float  # the mean over batches of the eval-mode loss
    train_mode: float  # the same in train mode, dropout drawn from seed 0
    per_sample: float  # every sample weighing the same: batches weighted by their size
    total: float  # the sum of the batch losses
    per_row: float  # each row's squared error summed over the outputs, as `reduction="sum"`/rows
    last: float  # the last batch's loss alone
    first: float  # the first batch's loss alone


def _losses(model: nn.Module, loader: Loader) -> list[float]:
    return [float(F.mse_loss(model(x), y)) for x, y in loader]


def expected(case: Case, loader: Loader) -> Expected:
    """Computed on a fresh model like the case's own: the learner's never runs here."""
    model = case.model().eval()
    with torch.inference_mode():
        losses = _losses(model, loader)
    model.train()
    with torch.no_grad():
        torch.manual_seed(0)  # the learner's loop runs from seed 0 too
        train_losses = _losses(model, loader)
    sizes = [len(x) for x, _ in loader]
    return Expected(
        right=sum(losses) / len(losses),
        train_mode=sum(train_losses) / len(train_losses),
        per_sample=sum(n * loss for n, loss in zip(sizes, losses, strict=True)) / sum(sizes),
        total=sum(losses),
        per_row=sum(losses) / len(losses) * NETWORKS[case.network][2],
        last=losses[-1],
        first=losses[0],
    )


# (which wrong loop returns this, the hint) for the value a wrong loop returns.
WRONG_LOOPS: tuple[tuple[Callable[[Expected], float], str], ...] = (
    (
        lambda e: e.train_mode,
        "Hint: that is the train-mode loss (dropout on, batch statistics of each batch, and "
        "so on for every layer that reads `training`): call `model.eval()`, which switches "
        "every submodule, before the loop.",
    ),
    (
        lambda e: e.per_sample,
        "Hint: that is the mean over samples, each batch weighted by its size. The exercise "
        "asks for the mean over batches, as the chapter's `evaluate` computes it: add up each "
        "batch's loss and divide by the number of batches.",
    ),
    (
        lambda e: e.total,
        "Hint: that is the sum of the batch losses: divide by the number of batches.",
    ),
    (
        lambda e: e.per_row,
        "Hint: that is each row's squared error summed over the model's outputs: "
        "`F.mse_loss` averages over every element, rows and outputs (a sum divided by the "
        "rows is the same only for a model with one output).",
    ),
    (
        lambda e: e.last,
        "Hint: that is the last batch's loss alone: keep every batch's loss (a list, or "
        "`total += ...`), not only the latest.",
    ),
    (
        lambda e: e.first,
        "Hint: that is the first batch's loss alone: is there a `return` inside the loop?",
    ),
    (
        lambda e: 0.0,
        "Hint: 0 is what a loop returns that saw no batch at all: is the loader read twice, "
        "once to count the batches (`sum(1 for _ in loader)`) and once for the losses? An "
        "iterator is used up by the first pass; count the batches in the same pass.",
    ),
)
