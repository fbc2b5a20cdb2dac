"""The second derivative of a one-input Function at the edges of its domain, in both dtypes.

Used by ``check_double_backward``. gradgradcheck's finite differences are taken at the
example; beyond it, at the checker's edge probes (0, ±1e-30, ±1e-8, ±1, where float32's
``exp`` overflows, large values), a finite difference would straddle a kink such as
softsign's at 0. There the learner's double backward (one vector-Jacobian product of
backward's result, with respect to ``x`` and to ``grad_output``) is compared with the
reference's, computed by autograd. Where the reference has a kink its second derivative
jumps, and any value one of its sides takes is right: the reference is also evaluated a
hair to the left and to the right (:data:`SIDE`), and either side's value is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._core.numeric import format_number, index_text
from autograd_helpers.checks._core.probes import FLOAT32_ATOL, FLOAT32_RTOL, edge_probes
from autograd_helpers.checks._core.trial import GRAD_OUTPUT_SEED

__all__ = [
    "SIDE",
    "Mismatch",
    "describe",
    "double_backward",
    "probe_points",
    "second_derivative_mismatch",
]

SIDE = 1e-9  # relative: the reference is also evaluated at x·(1 ± SIDE) ± SIDE
FLOAT64_RTOL, FLOAT64_ATOL = 1e-3, 1e-5  # check_function's tolerances, for the same reason

Parts = tuple[Tensor, Tensor, Tensor]  # backward's result, d/dx, d/d grad_output


def double_backward(
    call: Callable[..., Any], x: Tensor, g: Tensor, v: Tensor, *, strict: bool = False
) -> Parts:
    """Backward's result at ``x`` for ``grad_output = g``, and its vector-Jacobian product
    with ``v`` with respect to ``x`` and to ``g`` (zeros where autograd sees no path; with
    ``strict``, no path from backward's result to ``g`` raises: it is not differentiable).

    Example::

        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> first, dx, dg = double_backward(torch.square, x, torch.ones(2), torch.ones(2))
        >>> first.tolist(), dx.tolist(), dg.tolist()
        ([2.0, 4.0], [2.0, 2.0], [2.0, 4.0])
    """
    with torch.enable_grad():
        leaf = fresh_leaf(x)
        grad_output = fresh_leaf(g, x.dtype)
        output = call(leaf)
        if not isinstance(output, Tensor):
            raise TypeError(
                f"forward returned {type(output).__name__}; this check is for a Function "
                "with one tensor output"
            )
        (first,) = torch.autograd.grad(
            output, leaf, grad_output.reshape(output.shape), create_graph=True
        )
        dx, dg = torch.autograd.grad(
            first, (leaf, grad_output), v.to(x.dtype).reshape(first.shape), allow_unused=True
        )
    if strict and dg is None:
        raise RuntimeError("backward's result does not depend on grad_output for autograd")
    dx = torch.zeros_like(leaf) if dx is None else dx
    dg = torch.zeros_like(grad_output) if dg is None else dg
    return first.detach(), dx.detach(), dg.detach()


@dataclass(frozen=True)
class Mismatch:
    """Where the learner's second derivative is wrong: which part, which element, how."""

    kind: str  # "nan", "inf" or "off"
    part: str  # "x" or "grad_output": what backward's result was differentiated by
    flat: int
    got: float
    want: float
    point: float
    shape: torch.Size
    dtype: torch.dtype

    @property
    def where(self) -> str:
        index = index_text(self.flat, self.shape)
        return f" (element {index})" if index else ""


def probe_points() -> list[Tensor]:
    """The edge probes' points (a row, a 3 × 7 matrix, a scalar), float64."""
    return [x for (x,) in edge_probes()]


def _directions(x: Tensor) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(GRAD_OUTPUT_SEED)
    g = torch.randn(x.shape, generator=generator, dtype=torch.float64)
    v = torch.randn(x.shape, generator=generator, dtype=torch.float64)
    return g, v


def _reference_sides(reference: Callable[..., Any], x: Tensor, g: Tensor, v: Tensor) -> list[Parts]:
    """The reference's parts at ``x`` and a hair to each side (its kinks' two values)."""
    step = SIDE * (1 + x.abs())
    sides = []
    for point in (x, x + step, x - step):
        try:
            sides.append(double_backward(reference, point, g, v, strict=True))
        except Exception as exc:
            raise ValueError(
                "check_double_backward(): reference cannot be differentiated twice at the "
                f"probes ({type(exc).__name__}: {exc}); give a reference built from torch "
                "operations"
            ) from exc
    return sides


def _first_mismatch(
    got: Tensor, wants: list[Tensor], part: str, x: Tensor, rtol: float, atol: float
) -> Mismatch | None:
    mine = got.double().reshape(-1)
    options = torch.stack([w.double().reshape(-1) for w in wants])
    judged = options[0].isfinite()  # only where the reference at x itself is finite
    close = ((mine - options).abs() <= atol + rtol * options.abs()) & options.isfinite()
    wrong = judged & ~close.any(dim=0)
    if not bool(wrong.any()):
        return None
    flat = int(wrong.nonzero()[0, 0])
    value = float(mine[flat])
    kind = "nan" if value != value else "inf" if abs(value) == float("inf") else "off"
    return Mismatch(
        kind, part, flat, value, float(options[0, flat]), float(x.reshape(-1)[flat]),
        x.shape, got.dtype,
    )  # fmt: skip


def second_derivative_mismatch(
    fn_apply: Callable[..., Any], reference: Callable[..., Any], x: Tensor, dtype: torch.dtype
) -> Mismatch | Outcome | None:
    """The learner's double backward at ``x`` in ``dtype`` against the reference's in
    float64: the first element off (or not finite), the runner's outcome when the learner's
    code raised or left a global setting changed, or ``None``.

    Example::

        >>> x = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64)
        >>> softsign = lambda t: t / (1 + t.abs())
        >>> second_derivative_mismatch(softsign, softsign, x, torch.float32) is None
        True
    """
    point = x.detach().to(dtype)
    exact = point.double()
    g, v = _directions(exact)
    outcome = run_learner_code(double_backward, fn_apply, point, g.to(dtype), v.to(dtype))
    if outcome.error is not None or outcome.side_effects:
        return outcome
    _, dx, dg = outcome.value
    sides = _reference_sides(reference, exact, g, v)
    rtol, atol = (FLOAT64_RTOL, FLOAT64_ATOL) if dtype == torch.float64 else (
        FLOAT32_RTOL, FLOAT32_ATOL,
    )  # fmt: skip
    for part, got, position in (("x", dx, 1), ("grad_output", dg, 2)):
        if got.shape != exact.shape:
            got = got.reshape(exact.shape) if got.numel() == exact.numel() else got
        if got.shape != exact.shape:
            continue  # a shape mistake: the first derivative's checks name it
        found = _first_mismatch(got, [s[position] for s in sides], part, exact, rtol, atol)
        if found is not None:
            return found
    return None


def describe(mismatch: Mismatch, name: str) -> tuple[str, str]:
    """``(the title's end, the detail with both values)`` for a verdict."""
    dtype = "" if mismatch.dtype == torch.float64 else f" in {str(mismatch.dtype)[6:]}"
    what = {"nan": "nan", "inf": "infinite", "off": "off"}[mismatch.kind]
    title = f"is {what}{dtype} at `{name}` = {format_number(mismatch.point)}{mismatch.where}"
    by = f"`{name}`" if mismatch.part == "x" else "`grad_output`"
    detail = (
        f"The derivative of backward's result with respect to {by} (for a random "
        f"`grad_output`, as gradgradcheck differentiates it): yours gives "
        f"{format_number(mismatch.got)} there, the reference's {format_number(mismatch.want)}."
    )
    return title, detail
