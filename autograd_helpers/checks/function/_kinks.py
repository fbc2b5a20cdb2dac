"""Kinks: where finite differences straddle a point the function is not differentiable at.

Part of ``check_function``'s gradient values (:mod:`._values`). A central
difference at ``x`` with step ``eps`` averages the slopes on both sides of ``x``: at a kink
(ReLU at 0, ``abs`` at 0, HardSigmoid at ±3) within ``eps`` of ``x`` it gives a blend that
is neither one-sided derivative (ReLU at 2e-30: 1/2), and cannot judge. So where a
gradient disagrees with finite differences or the reference, :func:`find_kinks` looks at
the one-sided differences there: a kink is where the slopes from the left and from the
right differ, and keep differing with a four times smaller step (a smooth function's
curvature makes them differ too, by an amount that shrinks with the step). At a kink,
any gradient from one one-sided derivative to the other is a convention (torch's
HardSigmoid says 0 at 3, timm's 1/6): it passes, with a note where it is not the
reference's; a gradient outside them fails, and says so, never "off".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers.checks._core.numeric import format_number
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.finite_differences import evaluate_copied

__all__ = ["Kinks", "find_kinks", "kink_notes", "kink_verdict"]

_SHRINK = 4  # the second, smaller step: eps / 4
_LIMIT = 256  # elements looked at (a few per probe row; the rest is judged as before)


@dataclass
class Kinks:
    """Per input of ``wrt``: which elements are at a kink, and the one-sided range there
    (``grad_output`` times the derivative, as the gradients are)."""

    at: list[Tensor]  # bool, the input's shape
    low: list[Tensor]
    high: list[Tensor]
    atol: float  # the check's tolerances: how far outside the range still counts as in it
    rtol: float

    def accepts(self, k: int, got: Tensor) -> Tensor:
        """Elements of input ``k`` at a kink where ``got`` lies within the one-sided range."""
        slack = self.atol + self.rtol * torch.maximum(self.low[k].abs(), self.high[k].abs())
        inside = (got >= self.low[k] - slack) & (got <= self.high[k] + slack)
        return self.at[k] & inside

    @classmethod
    def none(cls, trial: Trial) -> Kinks:
        """No kink anywhere."""
        zeros = [torch.zeros(leaf.shape, dtype=torch.float64) for leaf in trial.wrt_leaves]
        return cls([z.bool() for z in zeros], zeros, zeros, 0.0, 0.0)

    def substituted(self, trial: Trial, expected: Sequence[Tensor]) -> list[Tensor]:
        """``expected`` with the trial's own gradient in its place at every kink: judged
        there by :func:`kink_verdict`, not by a value that cannot judge."""
        return [
            torch.where(self.at[k], got.detach().to(want.dtype), want)
            if isinstance(got, Tensor) and got.shape == want.shape and bool(self.at[k].any())
            else want
            for k, (got, want) in enumerate(zip(trial.grads, expected, strict=True))
        ]


def _weighted(outputs: Sequence[Tensor], base: Sequence[Tensor], vs: Sequence[Tensor]) -> float:
    return sum(
        float(((o.double() - b.double()) * v.double()).sum())
        for o, b, v in zip(outputs, base, vs, strict=True)
    )


def _one_sided(
    call: Callable[..., Any],
    trial: Trial,
    base: Sequence[Tensor],
    where: tuple[int, int],
    step: float,
) -> tuple[float, float]:
    """``(from the left, from the right)``: the ``grad_output``-weighted one-sided slopes
    along element ``j`` of input ``position`` (``where``), from ``base``, the outputs at x."""
    position, j = where
    sides = []
    for sign in (-1.0, 1.0):
        moved = list(trial.leaves)
        x = moved[position]
        assert isinstance(x, Tensor)
        nudged = x.detach().clone()
        nudged.view(-1)[j] += sign * step
        moved[position] = nudged
        sides.append(_weighted(evaluate_copied(call, moved), base, trial.grad_outputs) / step)
    return -sides[0], sides[1]


def find_kinks(trial: Trial, call: Callable[..., Any], suspects: Sequence[Tensor]) -> Kinks:
    """The kinks among ``suspects`` (a bool mask per input of ``wrt``: the elements whose
    gradient disagrees with finite differences or the reference); ``call`` (learner code:
    run it through the runner) returns the outputs that carry gradients."""
    eps, atol, rtol = trial.options.eps, trial.options.atol, trial.options.rtol
    kinks = Kinks([], [], [], atol, rtol)
    looked = 0
    with torch.no_grad():
        base = evaluate_copied(call, list(trial.leaves))
        for position, mask in zip(trial.wrt, suspects, strict=True):
            kink = torch.zeros(mask.numel(), dtype=torch.bool)
            low = torch.zeros(mask.numel(), dtype=torch.float64)
            high = torch.zeros(mask.numel(), dtype=torch.float64)
            for j in mask.reshape(-1).nonzero().reshape(-1).tolist()[: _LIMIT - looked]:
                looked += 1
                left, right = _one_sided(call, trial, base, (position, j), eps)
                near = _one_sided(call, trial, base, (position, j), eps / _SHRINK)
                gap, near_gap = abs(right - left), abs(near[1] - near[0])
                slopes = (left, right, *near)
                if (
                    all(math.isfinite(s) for s in slopes)
                    and gap > atol + rtol * max(abs(left), abs(right))
                    and near_gap >= gap / 2  # curvature would shrink it to a quarter
                ):
                    kink[j], low[j], high[j] = True, min(slopes), max(slopes)
            kinks.at.append(kink.reshape(mask.shape))
            kinks.low.append(low.reshape(mask.shape))
            kinks.high.append(high.reshape(mask.shape))
    return kinks


def _derivative(trial: Trial, k: int, value: float, flat: int) -> str:
    """``value`` as a derivative (over ``grad_output`` there, for an elementwise look)."""
    vs = trial.grad_outputs
    leaf = trial.wrt_leaves[k]
    if len(vs) == 1 and vs[0].shape == leaf.shape and float(vs[0].reshape(-1)[flat]) != 0:
        return format_number(value / float(vs[0].reshape(-1)[flat]))
    return f"{format_number(value)} (times `grad_output`)"


def _where(trial: Trial, k: int, flat: int) -> str:
    leaf = trial.wrt_leaves[k]
    return f"`{trial.wrt_names[k]}` = {format_number(float(leaf.detach().reshape(-1)[flat]))}"


def kink_verdict(trial: Trial, kinks: Kinks) -> tuple[str, str] | None:
    """Title and detail for the first kink where the gradient is outside the one-sided
    derivatives (``None``: every kink's gradient is a convention)."""
    for k, got in enumerate(trial.grads):
        if got is None or not bool(kinks.at[k].any()):
            continue
        outside = kinks.at[k] & ~kinks.accepts(k, got.detach().double())
        if bool(outside.any()):
            flat = int(outside.reshape(-1).nonzero()[0, 0])
            mine = float(got.detach().reshape(-1)[flat])
            lo, hi = (float(t.reshape(-1)[flat]) for t in (kinks.low[k], kinks.high[k]))
            return (
                f"at {_where(trial, k, flat)} the function has a kink, and your gradient "
                f"for `{trial.wrt_names[k]}` there is not between its one-sided derivatives.",
                f"There the derivative from one side is {_derivative(trial, k, lo, flat)}, "
                f"from the other {_derivative(trial, k, hi, flat)}; yours gives "
                f"{_derivative(trial, k, mine, flat)}. Finite differences cannot judge at a "
                "kink, but any value between the two is a convention; yours is none.",
            )
    return None


def kink_notes(trial: Trial, kinks: Kinks, reference: Sequence[Tensor] | None) -> list[str]:
    """A note for the kinks where a gradient passed as a convention: those where it is not
    the reference's (every one, without a reference)."""
    notes = []
    for k, got in enumerate(trial.grads):
        if got is None:
            continue
        at = kinks.at[k]
        if reference is not None:
            want = reference[k].detach().double()
            at = at & ((got.detach().double() - want).abs() > 1e-12 + 1e-7 * want.abs())
        if not bool(at.any()):
            continue
        flat = int(at.reshape(-1).nonzero()[0, 0])
        more = int(at.sum()) - 1
        others = f" (and {more} more point{'s' * (more != 1)} near a kink)" if more else ""
        mine = _derivative(trial, k, float(got.detach().reshape(-1)[flat]), flat)
        theirs = (
            f", the reference {_derivative(trial, k, float(reference[k].reshape(-1)[flat]), flat)}"
            if reference is not None
            else ""
        )
        notes.append(
            f"Note: at {_where(trial, k, flat)}{others} the function has a kink, where finite "
            f"differences cannot judge: there your gradient gives {mine}{theirs}. Any value "
            "between the one-sided derivatives is a convention, so yours passes."
        )
    return notes
