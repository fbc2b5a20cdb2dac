"""``check_gradcheck_settings`` as named checks, run in order from :data:`SETTINGS_CHECKS`.

A choice of ``dtype`` and ``eps`` is read first (each spelling torch accepts for the same
thing passes; anything else gets a verdict that says what was given and what to write),
then judged: the notebook's own settings are as the chapter left them, the right
derivative passes gradcheck, one 1% off fails it, and the right one still passes on a
denser grid of points across the example's range (a step whose rounding error passes 7
points by luck fails there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult, failed, first_found, stub_verdict
from autograd_helpers.checks.gradcheck._errors import (
    PROBE_POINTS,
    dtype_name,
    error_causes,
    one_percent_off,
    passes,
    probe_points,
)
from autograd_helpers.checks.gradcheck._spelling import (
    as_dtype,
    dtype_problem,
    eps_problem,
    is_number,
)

__all__ = [
    "PROBE_POINTS",
    "SETTINGS_CHECKS",
    "Choice",
    "notebook_settings",
    "probe_points",
    "run_settings_checks",
]

HALF_PRECISION = (torch.float16, torch.bfloat16)  # run, and explained by their results


@dataclass
class Choice:
    """The learner's ``dtype`` and ``eps`` as given, as read, and what was found."""

    given_dtype: object
    given_eps: object
    fn: Callable[[Tensor], Tensor]
    x: Tensor
    name: str
    dtype: torch.dtype = torch.float64
    eps: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def points(self) -> str:
        """``"your 7 points"``, or ``"your point"``."""
        count = self.x.numel()
        return "your point" if count == 1 else f"your {count} points"

    @property
    def setting(self) -> str:
        return f"{dtype_name(self.dtype)} and eps={self.eps:g}"

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.name, title, *details, *self.notes)


def _not_a_stub(choice: Choice) -> CheckResult | None:
    return stub_verdict(choice.name, choice.given_dtype, choice.given_eps)


def _not_swapped(choice: Choice) -> CheckResult | None:
    if as_dtype(choice.given_eps) is not None and is_number(choice.given_dtype):
        return choice.fail(
            f"dtype is the number {choice.given_dtype!r} and eps is {choice.given_eps!r}: "
            "the two look swapped.",
            "Write `dtype, eps = torch.float64, 1e-6` (the dtype first, then the step), as "
            "the checker is called: `check_gradcheck_settings(dtype, eps, ...)`.",
        )
    return None


def _dtype_is_a_real_float(choice: Choice) -> CheckResult | None:
    problem = dtype_problem(choice.given_dtype)
    if problem is not None:
        what, advice = problem
        return choice.fail(f"dtype is {what}, which cannot make a meaningful check.", advice)
    dtype = as_dtype(choice.given_dtype)
    assert dtype is not None
    choice.dtype = dtype
    if choice.given_dtype is float:
        choice.notes.append(
            "Note: you wrote Python's `float`, which torch reads as torch.float64; "
            "`torch.float64` says the same in torch's own words."
        )
    return None


def _eps_is_a_small_step(choice: Choice) -> CheckResult | None:
    read = eps_problem(choice.given_eps)
    if isinstance(read, tuple):
        what, advice = read
        return choice.fail(f"eps is {what}; it must be a positive number below 1.", advice)
    choice.eps = read
    return None


def notebook_settings() -> tuple[str, str] | None:
    """``(title, advice)`` for a global setting a learner's cell changed for the rest of the
    notebook (grad mode off, another default dtype); ``None`` when they are as set."""
    if not torch.is_grad_enabled():
        return (
            "grad mode is off in your notebook: `torch.set_grad_enabled(False)` ran and was "
            "never undone.",
            "Every later cell would build no graph. Switch it back with "
            "`torch.set_grad_enabled(True)`; choosing gradcheck's settings needs no global "
            "switch.",
        )
    default = torch.get_default_dtype()
    if default != torch.float32:
        return (
            f"torch's default dtype is {dtype_name(default)}, not float32: it was changed for "
            "the whole notebook.",
            "The dtype belongs to this check only: `dtype = torch.float64` is enough (the "
            "checker converts the points to it). Put the default back with "
            "`torch.set_default_dtype(torch.float32)`, then run the cell that sets up the "
            "exercise again (tensors made meanwhile took the changed default).",
        )
    return None


def _notebook_left_as_set(choice: Choice) -> CheckResult | None:
    """Global settings that a learner's cell changed for the rest of the notebook."""
    found = notebook_settings()
    return choice.fail(*found) if found is not None else None


def _runs_in_dtype(choice: Choice) -> CheckResult | None:
    point = fresh_leaf(choice.x, choice.dtype)
    outcome = run_learner_code(lambda: torch.autograd.grad(choice.fn(point).sum(), point))
    if outcome.error is not None:
        return choice.fail(
            f"the function cannot even run in {dtype_name(choice.dtype)}: "
            f"{outcome.error.describe()}",
            "Not every operation has a kernel for every dtype; check in `torch.float64`.",
        )
    return None


def _right_derivative_passes(choice: Choice) -> CheckResult | None:
    if passes(choice.fn, choice.x, choice.dtype, choice.eps):
        return None
    details = error_causes(choice.fn, choice.x, choice.dtype, choice.eps)
    if choice.dtype in HALF_PRECISION:
        details.append(_few_digits(choice))
    return choice.fail(f"with {choice.setting} the right derivative fails gradcheck.", *details)


def _few_digits(choice: Choice) -> str:
    """How coarsely a half-precision dtype stores the function's values."""
    finfo = torch.finfo(choice.dtype)
    digits = max(1, round(-math.log10(finfo.eps)))
    values = run_learner_code(choice.fn, choice.x.detach().double())
    largest = float(values.value.abs().max()) if values.error is None else 1.0
    return (
        f"{dtype_name(choice.dtype)} keeps about {digits} significant digits: values as "
        f"large as {largest:.3g} are stored only to within about {finfo.eps * largest:.1g}, "
        "so the difference of the function at x ± eps is mostly rounding."
    )


def _wrong_derivative_fails(choice: Choice) -> CheckResult | None:
    if not passes(one_percent_off(choice.fn), choice.x, choice.dtype, choice.eps):
        return None
    return choice.fail(
        f"with {choice.setting} a derivative 1% off passes too: the check cannot see the bug.",
        "Hint: gradcheck allows atol + rtol·|numerical| (1e-5 + 1e-3·|numerical|) per entry; "
        "where 1% of the derivative is smaller than that, a wrong derivative hides inside the "
        "allowance. A step that adds truncation or rounding error of its own widens the gap: "
        "try a step where the error is smallest, in float64.",
    )


def _holds_beyond_the_example(choice: Choice) -> CheckResult | None:
    grid = probe_points(choice.x)
    if passes(choice.fn, grid, choice.dtype, choice.eps):
        return None
    return choice.fail(
        f"with {choice.setting} the right derivative passes at {choice.points} but fails "
        f"beyond them, on {PROBE_POINTS} points across [{float(grid[0]):g}, "
        f"{float(grid[-1]):g}].",
        "A meaningful setting works wherever the function is checked, not only where its "
        "errors happen to stay inside the tolerance.",
        *error_causes(choice.fn, grid, choice.dtype, choice.eps),
    )


SETTINGS_CHECKS: tuple[Callable[[Choice], CheckResult | None], ...] = (
    _not_a_stub,
    _not_swapped,
    _dtype_is_a_real_float,
    _eps_is_a_small_step,
    _notebook_left_as_set,
    _runs_in_dtype,
    _right_derivative_passes,
    _wrong_derivative_fails,
    _holds_beyond_the_example,
)


def run_settings_checks(choice: Choice) -> CheckResult:
    """Each check of :data:`SETTINGS_CHECKS` in order: the first verdict, or a pass."""
    if (result := first_found(SETTINGS_CHECKS, choice)) is not None:
        return result
    return CheckResult(
        "passed",
        f"{choice.name} passed: with {choice.setting} the right derivative passes (at "
        f"{choice.points} and at {PROBE_POINTS} across their range) and one that is 1% off "
        "is caught.",
        tuple(choice.notes),
    )
