"""The checkers of ``04_anomaly_mode.ipynb``'s exercises (public in ``ah.checks``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._checking.feedback import (
    CheckResult,
    failed,
    from_learner_error,
    not_implemented,
)
from autograd_helpers._checking.numeric import worst_mismatch
from autograd_helpers._checking.problems import label_of
from autograd_helpers._checking.runner import run_learner_code
from autograd_helpers._checking.submission import STUB_HINT

__all__ = ["check_finite_gradients", "check_training_step"]

INPLACE_HINT = (
    "Hint: a tensor that backward needs was changed in place. "
    "`ah.anomaly.explain_inplace_error` names it and the line that changed it; compute a new "
    "tensor instead (`h = h + 1`, not `h += 1`)."
)


def _value_and_gradient(
    fn: Callable[..., Any], inputs: Sequence[Tensor]
) -> tuple[Tensor, list[Tensor]]:
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    value = fn(*leaves)
    if not isinstance(value, Tensor) or value.numel() != 1:
        raise TypeError(f"the loss must be a one-element tensor, got {type(value).__name__}")
    grads = torch.autograd.grad(value, leaves, allow_unused=True)
    return value.detach(), [
        torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True)
    ]


def check_finite_gradients(
    fn: object,
    *inputs: Tensor,
    reference: Callable[..., Tensor],
    regular: Sequence[Tensor],
    name: str | None = None,
) -> CheckResult:
    """Check a learner's NaN-free version of a loss: same values, finite gradients.

    ``fn`` must agree with ``reference`` in value at ``inputs`` (where the reference's
    gradient is NaN) and at ``regular`` (where it is not), have finite gradients at
    ``inputs``, and the reference's gradients at ``regular``: the fix may not simply cut the
    gradient off.

    Args:
        fn: the learner's loss function; ``...`` means "not implemented yet".
        *inputs: the inputs at which the reference's gradient is NaN.
        reference: the original loss.
        regular: inputs at which the reference is well behaved.
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Example::

        >>> def distance(x):
        ...     return torch.sqrt((x**2).sum())
        >>> def safe(x):
        ...     return torch.sqrt((x**2).sum() + 1e-12)
        >>> check_finite_gradients(safe, torch.zeros(3), reference=distance,
        ...                        regular=[torch.ones(3)]).passed
        True
    """
    label = label_of(fn, name, "check_finite_gradients")
    if not callable(reference):
        raise TypeError("check_finite_gradients(): reference must be callable")
    if fn is Ellipsis:
        return not_implemented(label, STUB_HINT)
    if not callable(fn):
        return failed(label, f"expected a function, got {type(fn).__name__}.")
    for where, points in (
        ("at the singular point", inputs),
        ("at a regular point", tuple(regular)),
    ):
        outcome = run_learner_code(_value_and_gradient, fn, points)
        if outcome.error is not None:
            return from_learner_error(label, f"your loss ({where})", outcome)
        value, grads = outcome.value
        want_value, want_grads = _value_and_gradient(reference, points)
        if not torch.allclose(value, want_value, rtol=1e-4, atol=1e-5, equal_nan=True):
            return failed(
                label,
                f"{where} its value is {float(value):.6g}, the original loss's "
                f"{float(want_value):.6g}.",
                "A fix may change the value by a rounding error at most: add a tiny epsilon, or "
                "pick the safe branch with torch.where, but compute the same loss.",
            )
        for k, grad in enumerate(grads):
            if not bool(grad.isfinite().all()):
                return failed(
                    label,
                    f"{where} its gradient still contains NaN or inf.",
                    "Run `ah.anomaly.find_nan_origin` on it to see which operation makes it.",
                )
            if where == "at a regular point":
                mismatch = worst_mismatch(grad, want_grads[k], atol=1e-6, rtol=1e-4)
                if mismatch is not None:
                    return failed(
                        label,
                        f"{where} its gradient differs from the original loss's.",
                        mismatch.describe("grad", "yours", "original"),
                        "Hint: a fix must keep the gradient where it was fine; did something "
                        "`.detach()` or zero it?",
                    )
    return CheckResult(
        "passed",
        f"{label} passed: the same loss, a finite gradient at the singular point, and the "
        "original gradient elsewhere.",
    )


def _as_meant(reference: Callable[..., Tensor], inputs: Sequence[Tensor]) -> Tensor:
    """Run ``reference`` with copies of what it saves: in-place changes cannot reach them."""
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        return reference(*inputs)


def check_training_step(
    step: object,
    *,
    reference: Callable[..., Tensor],
    make_inputs: Callable[[], tuple[Tensor, ...]],
    steps: int = 3,
    name: str | None = None,
) -> CheckResult:
    """Check a learner's training step against a reference over a few steps.

    ``make_inputs()`` returns fresh ``(parameters..., data...)``; each step function takes
    them, updates the parameters in place (as an optimizer does) and returns the loss.
    The losses and the final parameters must match the reference's.

    The reference may be the broken step itself: it runs with every tensor it saves for
    backward copied (:func:`torch.autograd.graph.saved_tensors_hooks`), so that a later
    in-place change cannot touch them, which gives the gradients its code means.

    Example::

        >>> def step(w, x):
        ...     loss = (x @ w).pow(2).mean()
        ...     loss.backward()
        ...     with torch.no_grad():
        ...         w -= 0.1 * w.grad
        ...     w.grad = None
        ...     return loss
        >>> make = lambda: (torch.ones(3, requires_grad=True), torch.eye(3))
        >>> check_training_step(step, reference=step, make_inputs=make).passed
        True
    """
    label = label_of(step, name, "check_training_step")
    if not callable(reference) or not callable(make_inputs):
        raise TypeError("check_training_step(): reference and make_inputs must be callable")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"check_training_step(): steps must be a positive int, got {steps!r}")
    if step is Ellipsis:
        return not_implemented(label, STUB_HINT)
    if not callable(step):
        return failed(label, f"expected a function, got {type(step).__name__}.")
    mine, theirs = make_inputs(), make_inputs()
    for number in range(1, steps + 1):
        outcome = run_learner_code(step, *mine)
        if outcome.error is not None:
            result = from_learner_error(label, f"step {number}", outcome)
            if "inplace operation" in str(outcome.error.exception):
                return CheckResult(result.status, result.title, (*result.details, INPLACE_HINT))
            return result
        loss, want = outcome.value, _as_meant(reference, theirs)
        if not isinstance(loss, Tensor):
            return failed(label, f"step {number} returned a {type(loss).__name__}, not the loss.")
        if not torch.allclose(loss.detach(), want.detach(), rtol=1e-5, atol=1e-7):
            return failed(
                label,
                f"after step {number} the loss is {float(loss.detach()):.6g}, expected "
                f"{float(want.detach()):.6g}.",
            )
    for k, (got, want) in enumerate(zip(mine, theirs, strict=True)):
        if got.requires_grad:
            mismatch = worst_mismatch(got, want, atol=1e-6, rtol=1e-5)
            if mismatch is not None:
                return failed(
                    label,
                    f"after {steps} steps parameter {k} differs from the reference's.",
                    mismatch.describe(f"parameter {k}", "yours", "expected"),
                )
    return CheckResult(
        "passed",
        f"{label} passed: {steps} steps with the reference's losses and parameters, and no error.",
    )
