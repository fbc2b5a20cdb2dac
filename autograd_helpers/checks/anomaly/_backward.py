"""``check_safe_backward``: chapter 04's own judgement around ``check_function``.

A custom Function's backward made safe at its singular point is checked for its numbers by
:func:`~autograd_helpers.checks.function.check_function` (the example and the edge probes,
float64 and float32). Two things that check does not judge are the chapter's to judge,
before and after it: a NaN hidden with ``nan_to_num`` (:mod:`._hidden`, in the same
words as :func:`~autograd_helpers.checks.anomaly.check_finite_gradients`), and what the
Function's code changed that outlives the call (a global list appended to, a dict written
into, the notebook's tensors, the random generator reseeded or drawn from), said in
:data:`CHAPTER_WORDS` and put back. A backward that runs autograd itself fails too: the
exercise is to write the derivative. After ``check_function`` passes, float64 probes where
x² underflows to 0 (:data:`UNDERFLOW_PROBES`) catch a guard at exactly 0 computed in
float64, which float32's probes cannot; then the gradient near 0 is compared with its own
size (:mod:`._near`: where the formula cancels, an absolute tolerance lets 0 pass).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._contain.contained import Contained, Words
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.names import Containers
from autograd_helpers.checks._contain.reach import reached_functions
from autograd_helpers.checks._contain.watch import run_watched
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    failed,
    from_learner_error,
    lasting_change,
)
from autograd_helpers.checks._core.numeric import format_number
from autograd_helpers.checks.anomaly._hidden import NanHiding, hidden_nan_verdict, warm_up
from autograd_helpers.checks.anomaly._near import near_verdict

__all__ = ["CHAPTER_WORDS", "chapter_contained", "run_safe_backward"]

# How chapter 04's checkers say what a call changed: every kind in words, containers and
# attributes set on the learner's function too.
CHAPTER_WORDS = Words(
    container="it changed {label} ({before} items before the call, {now} after)",
    attribute="it set the attribute `{owner}.{name}`",
)


def chapter_contained(fn: object, given: Mapping[str, Tensor]) -> Contained:
    """The chapter's containment of ``fn``: the shared one, ``deep`` (what the helpers it
    calls reach, its default arguments, containers inside containers, the notebook's
    objects, arrays and the torch module's attributes), with every list, dict and set of
    the notebook besides (one changed through an alias)."""
    warm_up()
    contained = Contained(fn, given, words=CHAPTER_WORDS, deep=True)
    contained.containers = Containers(fn, every_global=True, owners=reached_functions(fn))
    return contained


AFTER = "what runs after: keep what backward needs on `ctx`, and the function's work inside it"


# float64 points where x² underflows to 0 (below about 1.5e-154): a guard at exactly 0, or
# a computation moved to float64, still divides by 0 there.
UNDERFLOW_PROBES = (-1e-170, 1e-170, 1e-160, -1e-160)
UNDERFLOW_HINT = (
    "Hint: in float64, x² underflows to 0 below about 1.5e-154 (in float32 below about "
    "1e-23), and the formula divides by it: a guard at exactly 0 misses every x whose square "
    "is 0, and computing in float64 only moves the threshold. Switch to the Taylor "
    "expansion (sinc's derivative is about -x/3 + x³/30 near 0) for every |x| below a "
    "threshold such as 0.05, with the double `torch.where`."
)
DETOUR_HINT = (
    "Hint: its backward runs autograd itself (`torch.autograd.grad` or `.backward()`), so "
    "autograd computes the gradient, not your formula; the exercise is to write the "
    "derivative: return `grad_output` times it, with the safe branch near 0."
)


@dataclass
class Seen:
    """What one call of the Function, forward and backward, did beyond its numbers."""

    hidden: str = ""  # where a NaN was replaced: "in its forward", "in its backward"
    how: str = ""  # by what (NanHiding.how)
    detour: bool = False  # its backward ran a backward pass of its own
    calls: GlobalCalls = field(default_factory=GlobalCalls)


def _seen(fn: type[Function], example: Tensor, dtype: torch.dtype) -> Seen:
    """One call, forward and backward, watched for a NaN replaced, autograd run inside
    backward, and the random generator or the thread count touched."""
    seen = Seen()
    leaf = fresh_leaf(example, dtype)
    with NanHiding() as in_forward:
        out = run_learner_code(seen.calls.around(fn.apply), leaf)
    if in_forward.ran:
        seen.hidden, seen.how = "in its forward", in_forward.how
        return seen
    value = out.value
    if out.error is not None or not isinstance(value, Tensor) or not value.requires_grad:
        return seen  # check_function explains what is wrong with it
    with NanHiding() as in_backward:
        _, watch = run_watched(seen.calls.around(lambda: torch.autograd.grad(value.sum(), leaf)))
    if in_backward.ran:
        seen.hidden, seen.how = "in its backward", in_backward.how
    seen.detour = watch.backward_passes > 1
    return seen


def _underflow(
    fn: type[Function], label: str, reference: Callable[[Tensor], Tensor]
) -> CheckResult | None:
    """A verdict when the gradient is not finite, or is off, at float64 points whose squares
    underflow, where the reference's value is finite; ``None`` when it is right there."""
    points = torch.tensor(UNDERFLOW_PROBES, dtype=torch.float64)
    leaf = fresh_leaf(points)
    out = run_learner_code(fn.apply, leaf)
    value = out.value
    if out.error is not None or not isinstance(value, Tensor) or not value.requires_grad:
        return None  # check_function judged this call at other points already
    grads = run_learner_code(lambda: torch.autograd.grad(value.sum(), leaf))
    if grads.error is not None:
        return from_learner_error(label, "backward (in float64, where x² underflows)", grads)
    (got,) = grads.value
    try:
        want_leaf = fresh_leaf(points)
        want_value = reference(want_leaf)
        (want,) = torch.autograd.grad(want_value.sum(), want_leaf)
        finite = want_value.detach().isfinite() & want.isfinite()
        close = got.detach().isfinite() & ((got.detach().double() - want).abs() <= 1e-8)
        bad = finite & ~close
    except Exception:  # no reference gradient there, or a shape check_function judged
        return None
    if not bool(bad.any()):
        return None
    k = int(bad.nonzero()[0, 0])
    at, g = format_number(float(points[k])), format_number(float(got[k]))
    return failed(
        label,
        f"in float64, its gradient at x = {at} is {g}, where the reference's is "
        f"{format_number(float(want[k]))} (a probe where x² underflows to 0).",
        UNDERFLOW_HINT,
    )


def run_safe_backward(
    fn: object,
    example: Tensor,
    label: str,
    judge: Callable[[], CheckResult],
    reference: Callable[[Tensor], Tensor] | None = None,
) -> CheckResult:
    """No NaN replaced, no autograd inside backward, nothing left changed, then ``judge()``
    (``check_function``), then the float64 probes where x² underflows, then the gradient
    near 0 relative to its size (``reference``'s derivative there).

    One call, forward and backward, in float64 and then in float32, before ``judge``; what
    each left changed is said and put back, and so is what ``judge``'s calls left.
    """
    if not (isinstance(fn, type) and issubclass(fn, Function)):
        return judge()  # not a Function: check_function says so
    contained = chapter_contained(fn, {"the example tensor": example})
    title = "your Function changed something that outlives the call."
    for dtype in (torch.float64, torch.float32):
        try:
            seen = _seen(fn, example, dtype)
            changes = contained.changes()
        finally:
            contained.restore()
        changes += seen.calls.said(changes)
        if seen.hidden:
            return hidden_nan_verdict(label, seen.hidden, seen.how)
        if changes:
            return lasting_change(label, title, changes, AFTER)
        if seen.detour:
            return failed(label, "its backward differentiates with autograd.", DETOUR_HINT)
    try:
        result = judge()
        if result.passed and reference is not None:
            result = (
                _underflow(fn, label, reference) or near_verdict(fn, label, reference) or result
            )
        changes = contained.changes()
    finally:
        contained.restore()
    return lasting_change(label, title, changes, AFTER) if changes else result
