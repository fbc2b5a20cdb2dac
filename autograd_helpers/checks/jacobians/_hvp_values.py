"""What a Hessian-vector product returned, against H v: its shape and its values.

The last checks of :mod:`._hvp`'s table, once the mechanism was judged. A wrong
shape gets the reshape it needs; values off get the likely reason when the numbers give
it away: the gradient itself, ``g * v``, ``g + H v`` (``x.grad`` not reset), a special case
for a tiny ``v``, or H v at ``x`` and ``v`` rounded to float32 (a ``.float()`` on the way,
which the probe whose digits float32 cannot hold exposes). On the first problem with ``v``
times 10^6 (:data:`LARGE_V`) values off mean an H v that is not linear in ``v`` (clipped).
"""

from __future__ import annotations

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers.checks._core.problems import Finding, Problem, Run
from autograd_helpers.checks.jacobians._checks import compare, nan_hint

__all__ = ["FLOAT32_HINT", "LARGE_V", "SCALE", "in_float32", "wrong_shape", "wrong_values"]

# A probe: the first problem again with v times SCALE. H v is linear in v, so H v grows by
# SCALE too; a clipped or norm-limited H v, right where it is small, does not.
SCALE = 1e6
LARGE_V = "the first problem with v times 10^6"


def wrong_shape(run: Run) -> Finding | None:
    """``H v`` does not have ``x``'s shape."""
    assert isinstance(run.value, Tensor)
    got, want = run.value.shape, run.problem.x.shape
    if got == want:
        return None
    if run.value.numel() == 1 and run.problem.size > 1:
        hint = (
            "Hint: H v has one entry per entry of x: it is the gradient of the scalar "
            "`(g * v).sum()`, not that scalar."
        )
    elif run.value.numel() == run.problem.size:
        hint = "Hint: the right number of entries: reshape to `x.shape` (do not flatten x)."
    else:
        hint = "Hint: H v has x's shape: the gradient of a scalar with respect to x."
    return Finding(
        f"on {run.problem.description} it returned shape {tuple(got)}, expected {tuple(want)}, "
        "the shape of x.",
        (hint,),
    )


FLOAT32_HINT = (
    "Hint: that is H v for x and v rounded to float32 (about 7 digits; float64 keeps 16): "
    "something on the way is float32 (`v.float()`, `g.float()`, a tensor made without a "
    "dtype). Keep every number in x's dtype: the caller chose float64 for its digits."
)


LINEAR_HINT = (
    "Hint: on the first problem (the same x, and v / 10^6) it was right: something makes it "
    "nonlinear in v, such as clipping H v (`clamp`), limiting its norm or clamping v. H v "
    "must scale with v (a solver such as conjugate gradient relies on it): return the "
    "gradient of `(g * v).sum()` as it is."
)


def in_float32(problem: Problem) -> Tensor:
    """H v at x and v rounded to float32, computed in float64 (what float32 on the way gives)."""
    (v,) = problem.extra
    rounded = [t.float().double() for t in (problem.x, v)]
    hv: Tensor = torch.autograd.functional.hvp(problem.f, rounded[0], rounded[1])[1]
    return hv


def _value_hint(run: Run, got: Tensor) -> str | None:
    problem = run.problem
    (v,) = problem.extra
    x = fresh_leaf(problem.x, torch.float64)
    (gradient,) = torch.autograd.grad(problem.f(x), x)
    want = problem.expected
    scale = float(want.abs().max()) or 1.0

    def near(other: Tensor) -> bool:
        return torch.allclose(got, other, rtol=1e-6, atol=1e-8 * scale)

    if problem.x.dtype == torch.float64 and near(in_float32(problem)):
        return FLOAT32_HINT
    if near(gradient):
        return "Hint: that is the gradient g itself; H v is the gradient of g · v."
    if near(gradient * v.double()):
        return "Hint: that is g * v; H v is the gradient of the scalar (g * v).sum()."
    if near(gradient + want):
        return (
            "Hint: that is g + H v: `x.grad` still held g from the first backward. Reset it "
            "(`x.grad = None`) in between, or use `torch.autograd.grad`."
        )
    if not bool(v.any()) or float(v.abs().max()) < 1e-20:
        return (
            "Hint: v is 0 or tiny here. H v is linear in v: differentiate `(g * v).sum()` "
            "as it is, without normalising v, adding a step or a special case for a small v."
        )
    return None


def wrong_values(run: Run) -> Finding | None:
    """Values off ``H v``, with the likely reason."""
    mismatch = compare(run)
    if mismatch is None:
        return None
    assert isinstance(run.value, Tensor)
    details = [mismatch.describe("Hv", "yours", "autograd's")]
    if run.problem.description == LARGE_V:  # right on the first problem, with the same x
        return Finding(
            f"on {LARGE_V} the values are off: H v is linear in v, and for 10^6 · v it is not "
            "10^6 · H v.",
            (*details, LINEAR_HINT),
        )
    hint = _value_hint(run, run.value.detach().double()) or nan_hint(mismatch)
    details += [hint] if hint else []
    return Finding(f"on {run.problem.description} the values are off.", tuple(details))
