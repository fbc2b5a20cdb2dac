"""``check_finite_gradients``'s numbers: the loss's value and gradient against the original's.

Used by :mod:`._finite` at every point it judges. Each dtype is held to its own
rounding (:func:`tolerance`): float32 keeps about 7 digits, float64 about 16, so a change of
1e-8 at the singular point (a point nudged off it) is within float32's rounding and far
outside float64's. Where a number is off, the hint says why it usually is at that kind of
point: near the singular one an epsilon or a clamp, beside it a fix that treats too much as
singular, with more coordinates than the example a function written for two of them, and
anywhere a computation in a less precise dtype than the input's (:mod:`._loss`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.numeric import format_pair, worst_mismatch
from autograd_helpers.checks.anomaly._loss import precision_hint

if TYPE_CHECKING:
    from autograd_helpers.checks.anomaly._finite import Trial

__all__ = ["same_gradient", "same_value", "tolerance"]

# Relative tolerances: float32 keeps about 7 digits, float64 about 16; a few operations
# (a sum, a root, a mean) stay well inside these. The absolute one lets 0 equal 0.
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
ATOL = 1e-12

NEAR_HINT = (
    "Hint: near the singular point the original is still exact, and a fix must be too. An "
    "epsilon added under the root, a clamp, a shift or a threshold changes the loss wherever "
    "the input is small but not zero. Keep the exact formula everywhere but at the singular "
    "point itself: give it a safe input only there (the double `torch.where`), or use a "
    "function that handles that point (`torch.linalg.vector_norm`)."
)
TOO_MUCH = (
    "Hint: only one entry is 0 here, and the original is finite: does your fix treat too "
    "much as the singular point (each zero entry, or any zero in a row)?"
)
AT_IT_HINT = (
    "Hint: at the singular point itself a fix chooses only the gradient (0 is the usual "
    "choice): the value is the original's, 0 for a point at the origin. Moving the point "
    "off it (by 1e-8, say) changes the value there; give the root a safe input only for its "
    "gradient (the double `torch.where`), or use `torch.linalg.vector_norm`."
)
WIDER_HINT = (
    "Hint: these points have one coordinate more than the example's: does your function "
    "assume two (`points[:, 0]`, `points[:, 1]`, `torch.hypot`)? Use every coordinate, as "
    "the original does (`.sum(dim=1)`, `torch.linalg.vector_norm(points, dim=1)`)."
)
VALUE_HINT = (
    "A fix may change the value by a rounding error at most: pick the safe branch with "
    "the double `torch.where`, but compute the same loss."
)
GRADIENT_HINT = (
    "Hint: a fix must keep the gradient where it was fine; did something `.detach()` or zero it?"
)


def tolerance(trial: Trial) -> float:
    """The relative tolerance of the point's dtype (float32's for a less precise one)."""
    return RTOL.get(trial.point.inputs[0].dtype, RTOL[torch.float32])


def _hint(trial: Trial, general: str) -> str:
    """A float32 computation for float64 input first: near 0 it shows as an epsilon would."""
    if trial.lower is not None:
        return precision_hint(trial.lower, trial.point.inputs[0].dtype)
    by_kind = {"near": NEAR_HINT, "beside": TOO_MUCH, "wider": WIDER_HINT, "alone": AT_IT_HINT}
    return by_kind.get(trial.point.kind, general)


def same_value(trial: Trial) -> CheckResult | None:
    value = trial.outcome.value
    assert isinstance(value, Tensor)
    got, want = value.detach().double().reshape(()), trial.truth.value
    if bool((got - want).abs() <= tolerance(trial) * want.abs() + ATOL):
        return None
    shown, original = format_pair(float(got), float(want))
    return trial.fail(
        f"its value is {shown}, the original loss's {original}.",
        _hint(trial, VALUE_HINT),
    )


def same_gradient(trial: Trial) -> CheckResult | None:
    assert trial.grads is not None
    several = len(trial.grads) > 1
    rtol = tolerance(trial)
    for k, (grad, want) in enumerate(zip(trial.grads, trial.truth.grads, strict=True)):
        finite = want.isfinite()
        kept = torch.where(finite, want, 0.0)
        scale = float(kept.abs().max()) if kept.numel() else 0.0
        got = torch.where(finite, grad.detach().double(), 0.0)
        mismatch = worst_mismatch(got, kept, atol=rtol * scale + 1e-30, rtol=rtol)
        if mismatch is not None:
            name = f"grad of input {k}" if several else "grad"
            return trial.fail(
                "its gradient differs from the original loss's, which is finite there.",
                mismatch.describe(name, "yours", "original"),
                _hint(trial, GRADIENT_HINT),
            )
    return None
