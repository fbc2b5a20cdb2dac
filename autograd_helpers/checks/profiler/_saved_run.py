"""``check_saved_bytes``'s run: its arguments, then what it judges of a Function, in order.

The public checker hands over here. :func:`require_saved_arguments` says what is wrong with
the notebook's arguments. :func:`run_saved_bytes` judges the Function while what it reaches
by name is kept (``_written``) and the files it writes by path are noted (``_python``,
removed after): first the precision of what it saves (``_saved.lowered_precision``), then
``check_function``'s values and gradients (a failure there is said in this chapter's words
first where memory kept outside ``ctx`` explains it), then one forward measured
(``_memory``) and judged by ``_saved``'s named checks in order. The passing verdict notes a
backward that recomputes forward under autograd, and a 0-dim tensor saved (not counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.runner import Outcome
from autograd_helpers._common.validate import require_callable
from autograd_helpers.checks._core.feedback import CheckResult, failed, from_learner_error
from autograd_helpers.checks._core.problems import label_of
from autograd_helpers.checks.function import check_function
from autograd_helpers.checks.profiler import _saved as saved_checks
from autograd_helpers.checks.profiler._memory import Memory, measure
from autograd_helpers.checks.profiler._python import FilesWritten
from autograd_helpers.checks.profiler._written import kept_by_name

__all__ = ["require_saved_arguments", "run_saved_bytes"]

_CALLER = "check_saved_bytes"


def require_saved_arguments(
    inputs: tuple[Tensor, ...],
    reference: Callable[..., Any],
    max_bytes: int,
    gradient_inputs: tuple[Tensor, ...] | None,
) -> None:
    """A ``TypeError`` or ``ValueError`` naming what is wrong with the notebook's arguments."""
    me = _CALLER
    if not inputs or not all(isinstance(x, Tensor) and x.is_floating_point() for x in inputs):
        raise TypeError(f"{me}(): inputs must be one or more floating-point tensors")
    require_callable(me, "reference", reference)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"{me}(): max_bytes must be a non-negative int, got {max_bytes!r}")
    if gradient_inputs is not None and (
        not isinstance(gradient_inputs, tuple)
        or len(gradient_inputs) != len(inputs)
        or not all(isinstance(x, Tensor) and x.is_floating_point() for x in gradient_inputs)
    ):
        raise TypeError(
            f"{me}(): gradient_inputs must be a tuple of {len(inputs)} floating-point tensor(s), "
            "one per input"
        )


def run_saved_bytes(
    fn: object,
    inputs: tuple[Tensor, ...],
    reference: Callable[..., Any],
    max_bytes: int,
    gradient_inputs: tuple[Tensor, ...] | None,
    name: str | None,
) -> CheckResult:
    """``fn`` judged, with what it reaches by name kept and the files it creates removed."""
    files = FilesWritten()  # files forward writes by path, in every run: removed after
    try:
        with kept_by_name(fn, inputs), files:  # beside check_function's containment
            return _judged(
                fn, inputs, reference, max_bytes, gradient_inputs, label_of(fn, name, _CALLER)
            )
    finally:
        files.remove_created()


def _judged(
    fn: object,
    inputs: tuple[Tensor, ...],
    reference: Callable[..., Any],
    max_bytes: int,
    gradient_inputs: tuple[Tensor, ...] | None,
    label: str,
) -> CheckResult:
    lowered = saved_checks.lowered_precision(fn, inputs)
    if lowered is not None:
        return failed(label, *lowered)
    first = check_function(
        fn,
        *(gradient_inputs or inputs),
        reference=reference,
        name=label,
        probes="edges" if len(inputs) == 1 else None,
    )
    if first.status == "failed":
        return _kept_outside_ctx(fn, inputs, label) or first
    if not first.passed:
        return first
    assert isinstance(fn, type) and issubclass(fn, Function)
    memory = measure(fn, inputs)
    if isinstance(memory, Outcome):
        return from_learner_error(label, "forward", memory)
    budget = saved_checks.Budget(max_bytes, _reference_dtype(reference, inputs))
    for check in saved_checks.CHECKS:
        problem = check(memory, budget)
        if problem is not None:
            return failed(label, *problem)
    note = (
        "(Its backward recomputes forward under autograd and differentiates that: right, "
        "and it saves as little; writing the derivative out is cheaper, with no graph to "
        "build in backward.)",
    )
    return CheckResult(
        "passed",
        f"{label} passed: right gradients (probes at the edges included), and "
        f"{memory.counted_bytes:,} bytes kept for backward, all saved with "
        f"`ctx.save_for_backward` (the budget is {max_bytes:,}).",
        (*(note if memory.backward_records else ()), *_scalar_note(memory)),
    )


def _scalar_note(memory: Memory) -> tuple[str, ...]:
    extra = memory.saved_bytes - memory.counted_bytes
    if not extra:
        return ()
    return (
        f"(It also saves a 0-dim tensor ({extra} bytes), not counted: a hyperparameter. A "
        "Python number on `ctx` (`ctx.beta = 1.0`) says the same more simply.)",
    )


def _reference_dtype(
    reference: Callable[..., Any], inputs: tuple[Tensor, ...]
) -> torch.dtype | None:
    """The dtype of the reference's output on copies of ``inputs`` (``None`` if not a tensor)."""
    with torch.no_grad():
        output = reference(*(x.detach().clone() for x in inputs))
    return output.dtype if isinstance(output, Tensor) else None


def _kept_outside_ctx(fn: object, inputs: tuple[Tensor, ...], label: str) -> CheckResult | None:
    """Memory kept outside ``ctx`` (a global, the class, a closure, a NumPy array) in this
    chapter's words, before ``check_function``'s for the same cache (a global it changed, a
    second backward pass that gives another gradient)."""
    if not (isinstance(fn, type) and issubclass(fn, Function)):
        return None
    memory = measure(fn, inputs)
    if isinstance(memory, Outcome):
        return None
    outside = ("_nothing_elsewhere", "_no_numpy_copy", "_no_files", "_no_python_objects")
    for check in (c for c in saved_checks.CHECKS if c.__name__ in outside):
        problem = check(memory, saved_checks.Budget(0))
        if problem is not None:
            return failed(label, *problem)
    return None
