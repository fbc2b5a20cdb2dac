"""One call of a learner's evaluation loop, watched: what ``check_evaluate`` judges.

:func:`attempt` builds a fresh model and loader for a case (``_cases``), records the
model as it was (``_contain.modules``), and calls the learner's loop through the runner, counting
the tensors it saves for backward and every forward call of the model (and of copies of it).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from autograd_helpers._common.runner import Outcome
from autograd_helpers.checks._contain.modules import ModelRecord, NotebookModels
from autograd_helpers.checks._core.feedback import CheckResult, failed
from autograd_helpers.checks.modes._cases import Case, Expected, expected, loader_for
from autograd_helpers.checks.modes._contain import Kept, contained_call
from autograd_helpers.checks.modes._kept import Layout

__all__ = ["Attempt", "as_number", "attempt", "copy_note"]


@dataclass
class Attempt:
    """One call of the learner's loop on one case, and what it did."""

    case: Case
    label: str
    model: nn.Module
    loader: list[tuple[Tensor, Tensor]]
    expected: Expected | None
    record: ModelRecord
    notebook: NotebookModels  # the notebook's models that the loop reaches by name
    data: list[tuple[Tensor, Tensor]]  # copies of the loader, as handed over
    batches: list[tuple[Tensor, Tensor]]  # the loader's own items, as handed over
    outcome: Outcome = field(default_factory=Outcome)
    outside: list[str] = field(default_factory=list)  # what it changed by name, in words
    contained: Kept | None = None  # to put that back, once judged
    layout: Layout | None = None  # the model's attributes, buffers... before the call
    saved: int = 0  # tensors saved for backward during the call
    recorded: int = 0  # forward passes of the model whose output has a grad_fn
    calls: list[bool] = field(default_factory=list)  # one per forward: on the model itself?
    value: float = math.nan

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.label, title, *details)


def attempt(
    fn: Callable[..., object], case: Case, seed: int, label: str, notebook: NotebookModels
) -> Attempt:
    """Call ``fn(model, loader)`` on a fresh model and loader for ``case``."""
    model, loader = case.model(), loader_for(case, seed)
    right = None if case.raises else expected(case, loader)
    data = [(x.clone(), y.clone()) for x, y in loader]
    batches = list(loader)
    run = Attempt(case, label, model, loader, right, ModelRecord(model), notebook, data, batches)
    run.layout = Layout(model)

    def pack(tensor: Tensor) -> Tensor:
        run.saved += 1
        return tensor

    def called(module: nn.Module, args: object) -> None:
        run.calls.append(module is model)  # a copy (copy.deepcopy) carries this hook along

    def returned(module: nn.Module, args: object, output: object) -> None:
        # The learner's own saved_tensors_hooks would hide the saves from `pack`; a
        # grad_fn on the output cannot be hidden.
        run.recorded += isinstance(output, Tensor) and output.grad_fn is not None

    handles = [model.register_forward_pre_hook(called), model.register_forward_hook(returned)]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            torch.manual_seed(0)
            run.outcome, run.outside, run.contained = contained_call(fn, model, loader)
    finally:
        for handle in handles:
            handle.remove()
    return run


def as_number(value: object) -> float | str:
    """The returned value as a float, or what it is instead (for the verdict)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            return f"a tensor of shape {tuple(value.shape)}"
        value = value.detach().item()
    elif isinstance(value, np.ndarray):
        if value.size != 1:
            return f"an array of shape {value.shape}"
        value = value.item()
    if isinstance(value, bool | np.bool_):
        return f"a bool ({value})"
    if isinstance(value, numbers.Real):
        return float(value)
    if value is None:
        return "None"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def copy_note(run: Attempt) -> str | None:
    """A note when the loop ran a copy of the model, never the model itself (allowed)."""
    if not run.calls or any(run.calls):
        return None
    return (
        "Note: it evaluated a copy of the model (`copy.deepcopy`), never the model itself. "
        "That is right too, and leaves the model untouched by construction, at the cost of a "
        "copy of every parameter and buffer; the chapter's way switches the mode and puts it "
        "back."
    )
