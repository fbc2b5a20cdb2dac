"""The checkers of ``05_grad_mode_vs_eval.ipynb``'s exercises (public in ``ah.checks``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograd_helpers._checking.feedback import (
    CheckResult,
    failed,
    from_learner_error,
    not_implemented,
)
from autograd_helpers._checking.problems import label_of
from autograd_helpers._checking.runner import run_learner_code
from autograd_helpers._checking.submission import STUB_HINT
from autograd_helpers.modes import MODE_COLUMNS, mode_table

__all__ = ["check_evaluate", "check_frozen", "check_mode_predictions"]


def _classifier() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1)
    )


def _loader() -> list[tuple[Tensor, Tensor]]:
    generator = torch.Generator().manual_seed(5)
    return [
        (torch.randn(8, 4, generator=generator), torch.randn(8, 1, generator=generator))
        for _ in range(3)
    ]


def _mean_loss(model: nn.Module, loader: Sequence[tuple[Tensor, Tensor]]) -> float:
    return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)


def _expected(loader: Sequence[tuple[Tensor, Tensor]]) -> tuple[float, float]:
    """(the eval-mode mean loss, the train-mode one with dropout from seed 0)."""
    model = _classifier().eval()
    with torch.inference_mode():
        right = _mean_loss(model, loader)
    model.train()
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        wrong = _mean_loss(model, loader)
    return right, wrong


def check_evaluate(fn: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's ``evaluate(model, loader)``: the eval-mode mean loss, nothing changed.

    ``evaluate`` must return the mean over the loader's batches of
    ``F.mse_loss(model(x), y)`` in eval mode, record no graph, and leave the model in the mode
    it found it (checked once starting from train mode, once from eval mode), with batch
    norm's running statistics unchanged.

    Example::

        >>> def evaluate(model, loader):
        ...     was_training = model.training
        ...     model.eval()
        ...     with torch.inference_mode():
        ...         losses = [torch.nn.functional.mse_loss(model(x), y) for x, y in loader]
        ...         total = sum(float(loss) for loss in losses)
        ...     model.train(was_training)
        ...     return total / len(loader)
        >>> check_evaluate(evaluate).passed
        True
    """
    label = label_of(fn, name, "check_evaluate")
    if fn is Ellipsis:
        return not_implemented(label, STUB_HINT)
    if not callable(fn):
        return failed(label, f"expected a function, got {type(fn).__name__}.")
    loader = _loader()
    right, wrong = _expected(loader)
    for start in ("train", "eval"):
        model = _classifier().train(start == "train")
        running_mean = model[1].running_mean
        assert isinstance(running_mean, Tensor)
        statistics = running_mean.clone()
        saved: list[int] = []

        def count(tensor: Tensor, saved: list[int] = saved) -> Tensor:
            saved.append(tensor.numel())
            return tensor

        with (
            torch.random.fork_rng(devices=[]),
            torch.autograd.graph.saved_tensors_hooks(count, lambda t: t),
        ):
            torch.manual_seed(0)
            outcome = run_learner_code(fn, model, loader)
        if outcome.error is not None:
            return from_learner_error(label, f"evaluate (on a model in {start} mode)", outcome)
        value = outcome.value
        if isinstance(value, Tensor) and value.numel() == 1:
            value = float(value.detach())
        if isinstance(value, bool) or not isinstance(value, int | float):
            return failed(label, f"it returned a {type(value).__name__}, not the mean loss.")
        if abs(value - right) > 1e-5:
            details = [f"It returned {value:.6g}; the eval-mode mean loss is {right:.6g}."]
            if abs(value - wrong) < 1e-5:
                details.append(
                    "Hint: that is the train-mode loss (dropout on, batch statistics of each "
                    "batch): call `model.eval()` before the loop."
                )
            return failed(label, f"on a model in {start} mode the value is off.", *details)
        flags = {module.training for module in model.modules()}
        if flags != {start == "train"}:
            now = "eval" if flags == {False} else "train" if flags == {True} else "a mix of both"
            return failed(
                label,
                f"the model was in {start} mode before and is in {now} mode after.",
                "Restore the mode you found: remember `was_training = model.training`, and "
                "call `model.train(was_training)` at the end (not simply `model.train()`).",
            )
        if not torch.equal(running_mean, statistics):
            return failed(
                label,
                "batch norm's running statistics changed: evaluation ran in train mode.",
            )
        if saved:
            return failed(
                label,
                f"it recorded a graph ({len(saved)} tensors saved for backward) it never uses.",
                "Wrap the loop in `torch.inference_mode()` (or `torch.no_grad()`): evaluation "
                "needs no gradients, and the graph costs memory and time.",
            )
    return CheckResult(
        "passed",
        f"{label} passed: the eval-mode loss, no graph, and the model left in the mode it "
        "was found in (tried from train and from eval).",
    )


def _network() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def check_frozen(fn: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's ``fn(model)`` that freezes every layer but the last one.

    After ``fn(model)`` on a five-module ``nn.Sequential`` (three ``Linear`` layers), only
    the last layer's parameters may require grad, and a backward pass must fill their
    ``.grad`` and no other.

    Example::

        >>> def freeze(model):
        ...     for parameter in model[:-1].parameters():
        ...         parameter.requires_grad_(False)
        >>> check_frozen(freeze).passed
        True
    """
    label = label_of(fn, name, "check_frozen")
    if fn is Ellipsis:
        return not_implemented(label, STUB_HINT)
    if not callable(fn):
        return failed(label, f"expected a function, got {type(fn).__name__}.")
    model = _network()
    outcome = run_learner_code(fn, model)
    if outcome.error is not None:
        return from_learner_error(label, "freezing", outcome)
    names = dict(model.named_parameters())
    last = {"4.weight", "4.bias"}
    still = sorted(n for n, p in names.items() if n not in last and p.requires_grad)
    frozen_last = sorted(n for n in last if not names[n].requires_grad)
    if still:
        details = [f"Still learning: {', '.join(still)}."]
        if any("requires_grad" in vars(module) for module in model.modules()):
            details.append(
                "Hint: `module.requires_grad = False` sets a new attribute that nothing reads. "
                "Call `module.requires_grad_(False)`, or set it on each parameter."
            )
        elif not model.training:
            details.append("Hint: `model.eval()` changes dropout and batch norm, not gradients.")
        return failed(label, "layers before the last one still get gradients.", *details)
    if frozen_last:
        return failed(label, f"the last layer is frozen too ({', '.join(frozen_last)}).")
    model(torch.ones(3, 4)).sum().backward()
    with_grad = sorted(n for n, p in names.items() if p.grad is not None)
    if with_grad != sorted(last):
        return failed(label, f"after backward these have a .grad: {', '.join(with_grad)}.")
    return CheckResult(
        "passed",
        f"{label} passed: after backward only 4.weight and 4.bias have a gradient; the frozen "
        "layers record no gradient of their own.",
    )


def check_mode_predictions(
    predicted: object,
    questions: Sequence[tuple[str, str, str]],
    model: nn.Module,
    x: Tensor,
    *,
    name: str = "predicted",
) -> CheckResult:
    """Check predictions of :func:`~autograd_helpers.modes.mode_table` entries, one by one.

    Args:
        predicted: a list with one answer per question (``True``/``False``, or a number).
        questions: ``(mode, grad mode, column)`` triples, such as
            ``("eval", "no_grad", "dropout active")``.
        model, x: what the table is computed for.
        name: how to call the predictions in the feedback.

    Example::

        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout())
        >>> questions = [("eval", "enabled", "dropout active")]
        >>> check_mode_predictions([False], questions, model, torch.ones(2, 3)).passed
        True
    """
    if not isinstance(questions, Sequence) or not questions:
        raise ValueError("check_mode_predictions(): questions must be a non-empty list")
    for question in questions:
        if not isinstance(question, tuple) or len(question) != 3 or question[2] not in MODE_COLUMNS:
            raise ValueError(
                f"check_mode_predictions(): each question is (mode, grad mode, column), got "
                f"{question!r}"
            )
    if predicted is Ellipsis:
        return not_implemented(name, STUB_HINT)
    if not isinstance(predicted, list | tuple):
        return failed(name, f"expected a list of answers, got {type(predicted).__name__}.")
    if len(predicted) != len(questions):
        return failed(name, f"{len(predicted)} answers for {len(questions)} questions.")
    table = {(r["mode"], r["grad mode"]): r for r in mode_table(model, x)}
    lines, wrong = [], 0
    for (mode, grad, column), answer in zip(questions, predicted, strict=True):
        truth: Any = table[mode, grad][column]
        if answer == truth and type(answer) is type(truth):
            lines.append(f"✓ {mode}, {grad}, {column}: {truth}")
        else:
            wrong += 1
            lines.append(f"✗ {mode}, {grad}, {column}: you said {answer!r}; it is {truth!r}")
    if wrong:
        return failed(name, f"{wrong} of {len(questions)} predictions are off.", *lines)
    return CheckResult(
        "passed", f"{name} passed: all {len(questions)} predictions hold.", tuple(lines)
    )
