"""Why a gradcheck fails: truncation error against rounding error, measured.

Used by ``check_gradcheck_settings``. Every run of :func:`torch.autograd.gradcheck` here
goes through the learner-code runner (the function under check may not run in a dtype a
learner picked) with grad mode on and gradcheck's own float32 warning silenced: that
warning is the exercise's topic, and the verdict says it in words.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd import gradcheck

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import run_learner_code

__all__ = [
    "OFF_BY",
    "PROBE_POINTS",
    "SWEEP",
    "dtype_name",
    "error_causes",
    "largest_error",
    "meaningful_steps",
    "one_percent_off",
    "passes",
    "probe_points",
]

OFF_BY = 0.01  # the wrong derivative a meaningful check must catch: 1% off
SWEEP = tuple(10.0**-k for k in range(1, 11))  # the steps tried when none seems to work
GRADCHECK_ATOL, GRADCHECK_RTOL = 1e-5, 1e-3  # gradcheck's defaults, which the exercise keeps
PROBE_POINTS = 101  # the denser grid across the example's range that the choice must pass
DOMINATES = 3.0  # a ten times smaller (larger) step that cuts the error by this: the cause


def dtype_name(dtype: torch.dtype) -> str:
    """``"float64"`` for ``torch.float64``."""
    return str(dtype).removeprefix("torch.")


def one_percent_off(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """``fn`` with the same values and a derivative 1% too large (the detach trick).

    Example::

        >>> x = torch.tensor(2.0, requires_grad=True)
        >>> one_percent_off(lambda t: t * t)(x).backward()
        >>> x.grad
        tensor(4.0400)
    """

    def wrong(x: Tensor) -> Tensor:
        y = fn(x)
        return y + OFF_BY * (y - y.detach())

    return wrong


def _gradcheck(fn: Callable[[Tensor], Tensor], point: Tensor, eps: float) -> bool:
    with warnings.catch_warnings(), torch.enable_grad():
        warnings.simplefilter("ignore")
        return bool(gradcheck(fn, (point,), eps=eps, raise_exception=False))


def passes(fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float) -> bool:
    """Does gradcheck pass ``fn`` at ``x`` in ``dtype`` with step ``eps``? (An error: no.)"""
    point = fresh_leaf(x, dtype)
    outcome = run_learner_code(_gradcheck, fn, point, eps)
    return outcome.error is None and bool(outcome.value)


def _differences(
    fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float
) -> tuple[Tensor, Tensor]:
    """The central differences and autograd's derivatives of the elementwise ``fn`` at ``x``
    (each point moved on its own, as gradcheck moves it: ``fn`` is elementwise)."""
    point = x.detach().to(dtype)
    with torch.no_grad():
        numerical = (fn(point + eps) - fn(point - eps)) / (2 * eps)
    with torch.enable_grad():
        leaf = point.clone().requires_grad_()
        (analytical,) = torch.autograd.grad(fn(leaf).sum(), leaf)
    return numerical, analytical


def _error(fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float) -> float:
    numerical, analytical = _differences(fn, x, dtype, eps)
    return float((numerical - analytical).abs().max())


def _within_tolerance(
    fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float
) -> bool:
    """gradcheck's verdict on the elementwise ``fn`` at many points, from one vectorised
    pass: |numerical - analytical| <= atol + rtol·|numerical| at each."""
    numerical, analytical = _differences(fn, x, dtype, eps)
    allowed = GRADCHECK_ATOL + GRADCHECK_RTOL * numerical.abs()
    return bool(((numerical - analytical).abs() <= allowed).all())


def largest_error(
    fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float
) -> float:
    """The largest |central difference - autograd| over ``x`` (``nan`` if it cannot run).

    Example::

        >>> x = torch.linspace(-1, 1, 5, dtype=torch.float64)
        >>> f"{largest_error(torch.sin, x, torch.float64, 1e-3):.0e}"
        '2e-07'
    """
    outcome = run_learner_code(_error, fn, x, dtype, eps)
    return float("nan") if outcome.error is not None else float(outcome.value)


def probe_points(x: Tensor) -> Tensor:
    """:data:`PROBE_POINTS` points across ``x``'s range (a unit range around one point)."""
    low, high = float(x.detach().min()), float(x.detach().max())
    if high - low < 1:
        low, high = low - 0.5, high + 0.5
    return torch.linspace(low, high, PROBE_POINTS, dtype=torch.float64)


def meaningful_steps(fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype) -> list[float]:
    """The steps of :data:`SWEEP` at which gradcheck in ``dtype`` passes ``fn`` (at ``x``
    and across its range, :func:`probe_points`) and catches a derivative 1% off.

    Example::

        >>> x = torch.linspace(-1, 1, 5)
        >>> [f"{eps:g}" for eps in meaningful_steps(torch.sin, x, torch.float64)][:3]
        ['0.01', '0.001', '0.0001']
    """
    wrong, grid = one_percent_off(fn), probe_points(x)

    def across(step: float) -> bool:
        outcome = run_learner_code(_within_tolerance, fn, grid, dtype, step)
        return outcome.error is None and bool(outcome.value)

    return [
        step
        for step in SWEEP
        if passes(fn, x, dtype, step) and not passes(wrong, x, dtype, step) and across(step)
    ]


def _same_values(fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float) -> bool:
    """Whether ``fn`` at ``x + eps`` and ``x - eps`` is the same number everywhere in ``dtype``."""

    def same() -> bool:
        point = x.detach().to(dtype)
        with torch.no_grad():
            return bool(torch.equal(fn(point + eps), fn(point - eps)))

    outcome = run_learner_code(same)
    return outcome.error is None and bool(outcome.value)


def _far_from_working(
    fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float, nearby: str
) -> list[str]:
    """Why a ten times larger or smaller eps does not help (``nearby`` says what they give):
    the steps that work are further away (rounding that swamps the difference, so that it
    is 0; truncation), or there are none."""
    steps = meaningful_steps(fn, x, dtype)
    name = dtype_name(dtype)
    if not steps or min(steps) <= eps <= max(steps):
        return [
            f"Neither a ten times larger nor a ten times smaller eps fixes it in {name} ({nearby})."
        ]
    pick = steps[len(steps) // 2]
    span = f"from {steps[-1]:g} to {steps[0]:g}" if len(steps) > 1 else f"{steps[0]:g}"
    works = f"in {name}, eps {span} works for this function (try {pick:g})."
    if eps > max(steps):
        return [
            f"Truncation error dominates, by far ({nearby}). A meaningful check needs a much "
            f"smaller eps: {works}"
        ]
    zero = (
        f" f(x + eps) and f(x - eps) are the same {name} number at every point, so their "
        "difference is 0: eps is below the spacing of the function's values."
        if _same_values(fn, x, dtype, eps)
        else " The two values subtracted agree in all but their last digits."
    )
    return [
        f"Rounding error dominates, by far ({nearby}).{zero} A meaningful check needs a much "
        f"larger eps: {works}"
    ]


def error_causes(
    fn: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, eps: float
) -> list[str]:
    """What the error is at ``eps``, which kind dominates, and what float64 would change."""
    error = largest_error(fn, x, dtype, eps)
    smaller, larger = largest_error(fn, x, dtype, eps / 10), largest_error(fn, x, dtype, eps * 10)
    found = [f"The largest |numerical - analytical| is {error:.1e} at this eps."]
    name = dtype_name(dtype)
    if dtype != torch.float64 and not any(passes(fn, x, dtype, step) for step in SWEEP):
        found.append(
            f"No eps from 1e-1 to 1e-10 works in {name} for this function: its values keep "
            "too few digits for their difference to mean anything. Check in float64."
        )
        return found
    if smaller < error / DOMINATES:
        found.append(
            f"Truncation error dominates: at eps={eps / 10:g} it is {smaller:.1e}. The "
            "central difference ignores the Taylor terms of order eps²: use a smaller eps."
        )
    elif larger < error / DOMINATES:
        found.append(
            f"Rounding error dominates: at eps={eps * 10:g} it is {larger:.1e}. The two "
            "values subtracted agree in most digits, and dividing by a tiny eps magnifies "
            "what is left: use a larger eps."
        )
    else:
        nearby = f"at eps={eps * 10:g} the error is {larger:.1e}, at eps={eps / 10:g} {smaller:.1e}"
        found += _far_from_working(fn, x, dtype, eps, nearby)
    if dtype != torch.float64 and passes(fn, x, torch.float64, eps):
        found.append(
            f"In float64 the same eps works: {name} keeps too few digits of the function's "
            "values for their difference to be meaningful."
        )
    elif dtype != torch.float64:
        found.append("float64 would leave more room for eps, too.")
    return found
