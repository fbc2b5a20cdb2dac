"""``check_safe_backward`` near the singular point, relative to the gradient's own size.

Near 0, sinc's derivative is about -x/3: tiny. ``check_function`` compares gradients with an
absolute tolerance as well as a relative one, so there a gradient of 0 passes where the
truth is -3.3e-9 (x = 1e-8, float64) or -6.7e-5 (x = 2e-4, float32). That is what the
formula gives where its numerator, x·cos x − sin x ≈ −x³/3, cancels: an epsilon in the
denominator, or a guard at 0 or at ``finfo.eps``, passes the absolute comparison and is
wrong. :data:`NEAR_PROBES` are points in that range, in both dtypes, where the gradient is
held to its own size; the truth there is the reference's derivative from a five-point
central difference in float64 with a wide step (:data:`STEP`: its rounding error, about
1e-14, is far below the gradients compared, and sinc is smooth on that scale).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult, failed
from autograd_helpers.checks._core.numeric import format_number, format_pair

__all__ = ["NEAR_PROBES", "near_verdict", "true_derivative"]

# (dtype, points, relative tolerance): where the formula cancels in that dtype (in float32
# it is 0 at 2e-4, 220% off at 3e-4, 4% at 2e-3; in float64 0 at 1e-8, 0.008% off at 1e-6)
# and, in float64, where one Taylor term is off (by x²/10: 2.5e-6 at 5e-3). The tolerances
# are each dtype's rounding with room (a few operations lose a digit or two).
NEAR_PROBES: tuple[tuple[torch.dtype, tuple[float, ...], float], ...] = (
    (torch.float64, (1e-8, -1e-6, 5e-3), 1e-6),
    (torch.float32, (2e-4, -3e-4, 1e-3, -2e-3), 1e-3),
)
STEP = 1e-2  # the central difference's step: wide, so that rounding stays far below 1e-9

CANCELS_HINT = (
    "Hint: near 0 the formula's numerator, x·cos x − sin x ≈ −x³/3, is the difference of "
    "two nearly equal numbers and cancels, long before x² reaches 0: in float32 the formula "
    "is 0 up to about 2e-4, 223% off at 3e-4 and 4% at 2e-3; in float64 it is 0 at 1e-8 "
    "and 0.008% off at 1e-6. An epsilon in the denominator, or a guard at 0 or at "
    "`finfo.eps`, does not reach that far. Guard an interval (`small = x.abs() < 0.05`), "
    "give the formula a safe input there (the double `torch.where`), and use the Taylor "
    "expansion inside it: −x/3 + x³/30."
)
ONE_TERM_HINT = (
    "Hint: your gradient there is −x/3, the Taylor expansion's first term alone, which is "
    "off by about x²/10 of itself (2.5e-6 at 5e-3): float64 shows it. Add the next term, "
    "−x/3 + x³/30 (off by about x⁴/280), or use −x/3 only over a smaller interval."
)


def true_derivative(reference: Callable[[Tensor], Tensor], points: Tensor) -> Tensor | None:
    """The reference's derivative at ``points`` (float64), from its values: a five-point
    central difference with the step :data:`STEP`; ``None`` where the reference fails.

    Example::

        >>> true_derivative(torch.sin, torch.tensor([0.0, 1.0], dtype=torch.float64))
        tensor([1.0000, 0.5403], dtype=torch.float64)
    """
    x = points.detach().to(torch.float64)
    h = STEP
    try:
        with torch.no_grad():
            f = [reference(x + k * h) for k in (-2, -1, 1, 2)]
            if not all(isinstance(v, Tensor) and v.shape == x.shape for v in f):
                return None
            derivative = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
    except Exception:  # the reference cannot run there: nothing to compare with
        return None
    return derivative.double() if bool(derivative.isfinite().all()) else None


def _gradient(fn: type[Function], points: Tensor) -> Tensor | None:
    """The Function's gradient at ``points``; ``None`` where it does not run (check_function
    judged those calls already)."""
    leaf = fresh_leaf(points)
    out = run_learner_code(fn.apply, leaf)
    value = out.value
    if out.error is not None or not isinstance(value, Tensor) or not value.requires_grad:
        return None
    grads = run_learner_code(lambda: torch.autograd.grad(value.sum(), leaf))
    if grads.error is not None or not isinstance(grads.value, tuple):
        return None
    (got,) = grads.value
    return got.detach().double() if isinstance(got, Tensor) and got.shape == leaf.shape else None


def _off(relative: float) -> str:
    if relative >= 0.01:
        return f"{relative:.0%} off"
    return f"off by {format_number(relative)} of itself"


def near_verdict(
    fn: type[Function], label: str, reference: Callable[[Tensor], Tensor]
) -> CheckResult | None:
    """A verdict when the gradient at :data:`NEAR_PROBES` is off relative to its own size;
    ``None`` when it is right there (or nothing can be compared)."""
    for dtype, values, tolerance in NEAR_PROBES:
        points = torch.tensor(values, dtype=dtype)
        want = true_derivative(reference, points)
        got = _gradient(fn, points)
        if want is None or got is None:
            continue
        relative = (got - want).abs() / want.abs()
        bad = ~(relative <= tolerance)  # NaN counts as off
        if not bool(bad.any()):
            continue
        k = int(torch.where(bad, relative.nan_to_num(float("inf")), -1.0).argmax())
        x = float(points[k])
        one_term = abs(float(got[k]) + x / 3) <= 1e-9 * abs(x)
        shown, truth = format_pair(float(got[k]), float(want[k]))
        return failed(
            label,
            f"in {str(dtype).removeprefix('torch.')}, its gradient at x = {format_number(x)} "
            f"is {shown}, where the derivative is {truth} ({_off(float(relative[k]))}: a probe "
            "near 0, where the gradient is tiny and is compared with its own size).",
            ONE_TERM_HINT if one_term else CANCELS_HINT,
        )
    return None
