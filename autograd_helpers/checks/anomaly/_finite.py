"""``check_finite_gradients`` as named checks, run in order at every point it judges.

At each point (the example's two and the probes of :mod:`._points`) the learner's
loss runs once, forward and backward, on copies of the point's tensors, under
:func:`~autograd_helpers.checks._contain.watch.run_watched` and
:class:`~autograd_helpers.checks._contain.contained.Contained`. Then :data:`POINT_CHECKS` judge
it, one property each, in order: it ran; it hid no NaN with ``nan_to_num`` or a selection on a
NaN test (:mod:`._hidden`); it left nothing behind (reseeding, random draws and
``torch.set_num_threads`` included, :mod:`autograd_helpers.checks._contain.global_calls`); it
hooked no gradient; it ran no backward of its own; it returned a loss; it did not write into its
input; its value is the original's; its backward ran; its gradient is finite; its gradient is
the original's wherever that one is finite. A loss that computed in a less precise dtype than
its input on the way is told so where a value or a gradient is off (:mod:`._loss`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.nodes import graph_nodes, is_custom_function
from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.watch import Usage, run_watched
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    failed,
    lasting_change,
    raised_verdict,
)
from autograd_helpers.checks._core.numeric import same_values
from autograd_helpers.checks.anomaly._hidden import NanHiding, hidden_nan_verdict
from autograd_helpers.checks.anomaly._loss import computed_in, loss_problem, precision_hint
from autograd_helpers.checks.anomaly._points import Point, Truth
from autograd_helpers.checks.anomaly._values import same_gradient, same_value

__all__ = ["POINT_CHECKS", "Trial", "run_trial"]

INPLACE_HINT = (
    "Hint: backward needs a tensor that your loss changed in place after computing it: {what} "
    "was saved for backward, then changed (an indexed assignment such as "
    "`radii[squared == 0] = 0`, or `+=`). Compute a new tensor instead. A `torch.where` "
    "after the root is no fix either: the branch not taken still gets a zero gradient, and "
    "0 × ∞ is NaN. Give the root a safe input (the double `torch.where`), or use "
    "`torch.linalg.vector_norm`."
)
_SAVED = re.compile(r"output (\d+) of (\w+)")
GRAD_SENTINEL = 0.25  # what the inputs' `.grad` holds as the loss runs: a caller's gradient


@dataclass
class Trial:
    """The learner's loss at one point: what it returned, its gradients, what it did."""

    label: str
    point: Point
    truth: Truth
    leaves: list[Tensor]
    outcome: Outcome
    watch: Usage
    lasting: list[str] = field(default_factory=list)
    backward: Outcome | None = None
    grads: list[Tensor] | None = None
    custom: bool = False  # the loss uses a custom autograd Function
    hid: str = ""  # where a NaN was replaced: "in its forward", "in its backward"...
    how: str = ""  # by what: "nan_to_num", "a NaN test" (NanHiding.how)
    lower: torch.dtype | None = None  # a less precise dtype than the input's, on the way
    grad_kept: bool = True  # the inputs' `.grad` (a caller's gradient) left as it was
    switched_on: bool = False  # it made an input that did not require grad require it

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.label, f"{self.point.where} {title}", *details)


def _gradients(value: Tensor, leaves: list[Tensor]) -> list[Tensor]:
    grads = torch.autograd.grad(value.reshape(()), leaves, allow_unused=True)
    return [
        torch.zeros_like(x) if g is None else g.to_dense() if g.layout != torch.strided else g
        for g, x in zip(grads, leaves, strict=True)
    ]


def _is_loss(value: object) -> bool:
    return isinstance(value, Tensor) and value.numel() == 1 and value.requires_grad


def run_trial(
    fn: Callable[..., Any],
    label: str,
    point: Point,
    truth: Truth,
    contained: Contained,
    *,
    plain: bool = False,
) -> Trial:
    """Run the loss and its backward at ``point`` on copies; note and undo what it left.

    The copies hold a gradient in ``.grad``, as a caller's tensors in the middle of training
    do; with ``plain``, the loss also runs once on copies that do not require grad.
    """
    leaves = [fresh_leaf(x) for x in point.inputs]
    held = [torch.full_like(x, GRAD_SENTINEL) for x in leaves]
    for leaf, grad in zip(leaves, held, strict=True):
        leaf.grad = grad
    calls = GlobalCalls()
    with NanHiding() as in_forward:
        outcome, watch = run_watched(calls.around(fn), *leaves)
    trial = Trial(label, point, truth, leaves, outcome, watch, [*outcome.side_effects])
    if in_forward.ran:
        trial.hid, trial.how = "in its forward", in_forward.how
    value = outcome.value
    if outcome.error is None and _is_loss(value) and value.is_floating_point():
        roots = [value.grad_fn] if value.grad_fn is not None else []
        trial.custom = any(is_custom_function(n) for n in graph_nodes(roots))
        trial.lower = computed_in(value, point.inputs)
        with NanHiding() as in_backward:
            trial.backward = run_learner_code(calls.around(_gradients), value, leaves)
        if in_backward.ran and not trial.hid:
            trial.hid = "in a gradient hook" if watch.hooked else "in its backward"
            trial.how = in_backward.how
        trial.lasting += trial.backward.side_effects
        trial.grads = trial.backward.value if trial.backward.error is None else None
    trial.grad_kept = all(
        x.grad is g and bool((g == GRAD_SENTINEL).all()) for x, g in zip(leaves, held, strict=True)
    )
    trial.lasting += contained.changes()
    trial.lasting += calls.said(trial.lasting)
    contained.restore()
    if plain:  # what the first call left is said: this one is only for requires_grad
        unrecorded = [x.detach().clone() for x in point.inputs]
        run_learner_code(fn, *unrecorded)
        trial.switched_on = any(x.requires_grad for x in unrecorded)
        contained.restore()
    return trial


def _ran(trial: Trial) -> CheckResult | None:
    return raised_verdict(trial.label, f"your loss ({trial.point.where})", trial.outcome)


def _no_nan_hidden(trial: Trial) -> CheckResult | None:
    return hidden_nan_verdict(trial.label, trial.hid, trial.how) if trial.hid else None


def _left_nothing(trial: Trial) -> CheckResult | None:
    if not trial.lasting:
        return None
    return lasting_change(
        trial.label,
        "your loss changed something that outlives the call.",
        trial.lasting,
        "what runs after: keep a function's work inside the function",
    )


def _no_hook_left(trial: Trial) -> CheckResult | None:
    if not any(t._backward_hooks or t._post_accumulate_grad_hooks for t in trial.leaves):
        return None
    return failed(
        trial.label,
        "it registers a hook on its input, and the hook stays on the tensor after the call.",
        "Every later gradient of the caller's tensor goes through it: a `nan_to_num` there "
        "also hides a NaN from an unrelated bug, long after this loss ran. Fix the forward "
        "computation instead, so that its backward makes no NaN.",
    )


def _no_gradient_hook(trial: Trial) -> CheckResult | None:
    if not trial.watch.hooked:
        return None
    return failed(
        trial.label,
        "it edits its gradient with a hook.",
        "A hook that cleans the gradient hides the NaN rather than removing its cause, and "
        "hides any other NaN with it. Fix the forward computation so that its backward makes "
        "no NaN (the double `torch.where`, or `torch.linalg.vector_norm`).",
    )


def _no_backward_inside(trial: Trial) -> CheckResult | None:
    if not trial.watch.backward_passes:
        return None
    return failed(
        trial.label,
        "it runs a backward pass itself (`.backward()` or `torch.autograd.grad`).",
        "Return the loss and leave differentiating it to the caller: a backward inside the "
        "loss runs at every call, and fills the `.grad` of the caller's tensors.",
    )


def _a_loss(trial: Trial) -> CheckResult | None:
    """A tensor of one element, floating point and as precise as the input, connected to it."""
    problem = loss_problem(trial.outcome.value, trial.point.inputs)
    return trial.fail(*problem) if problem is not None else None


def _input_unchanged(trial: Trial) -> CheckResult | None:
    for leaf, x in zip(trial.leaves, trial.point.inputs, strict=True):
        if not same_values(leaf.detach(), x.detach()):
            return trial.fail(
                "it changed its input in place.",
                "The caller's points are the caller's: compute new tensors "
                "(`torch.where(...)`, `points + ...`) instead of writing into them, under "
                "`torch.no_grad()` or not.",
            )
    return None


def _backward_ran(trial: Trial) -> CheckResult | None:
    if trial.backward is None or trial.backward.error is None:
        return None
    stage = f"the backward of your loss ({trial.point.where})"
    text = str(trial.backward.error.exception)
    hint = None
    if "modified by an inplace operation" in text:
        saved = _SAVED.search(text)
        what = f"the output of `{saved.group(2)}`" if saved else "a result"
        hint = INPLACE_HINT.format(what=what)
    return raised_verdict(trial.label, stage, trial.backward, hint=hint)


def _grad_left_alone(trial: Trial) -> CheckResult | None:
    if trial.grad_kept:
        return None
    return trial.fail(
        "it changed the `.grad` of its input (the caller's tensor), which held a gradient.",
        "A loss only computes: the caller's `.grad` holds what earlier backward passes "
        "accumulated, and is the caller's to fill (`backward()`) and to clear "
        "(`optimizer.zero_grad()`). Leave it alone.",
    )


def _requires_grad_left_alone(trial: Trial) -> CheckResult | None:
    if not trial.switched_on:
        return None
    return trial.fail(
        "it switches `requires_grad` on for its input, and the caller's tensor keeps it after "
        "the call.",
        "Whether a tensor requires grad is the caller's choice (the original loss leaves it "
        "alone): every later operation on it would record a graph. Drop the "
        "`requires_grad_()`.",
    )


def _finite_gradient(trial: Trial) -> CheckResult | None:
    if trial.grads is None or all(bool(g.isfinite().all()) for g in trial.grads):
        return None
    lower, given = trial.lower, trial.point.inputs[0].dtype
    precision = () if lower is None else (precision_hint(lower, given),)
    return trial.fail(
        "its gradient still contains NaN or inf.",
        "Run `ah.anomaly.find_nan_origin` on it to see which operation makes it.",
        *precision,
    )


# The named checks, in order: each returns a verdict, or None when its property holds.
POINT_CHECKS: tuple[Callable[[Trial], CheckResult | None], ...] = (
    _ran,
    _no_nan_hidden,
    _left_nothing,
    _no_hook_left,
    _no_gradient_hook,
    _no_backward_inside,
    _a_loss,
    _input_unchanged,
    _grad_left_alone,
    _requires_grad_left_alone,
    same_value,
    _backward_ran,
    _finite_gradient,
    same_gradient,
)
