"""Is the gradient finite differences? A backward that evaluates forward at nudged points.

Part of ``check_function``'s step 3 (:mod:`._values`). The exercise is to write
the derivative; a backward that computes ``(f(x + h) - f(x - h)) / (2 h)`` instead is off
by the difference quotient's truncation error (``h**2`` for a cube), a number that alone
says nothing of the cause. :func:`nudged_note` compares the answer with central
differences of the reference at steps from 1e-2 to 1e-10: when one matches it far more
closely than the reference's gradient does, that is what backward computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves
from autograd_helpers.checks._core.numeric import (
    finite_difference_vjp,
    format_number,
    worst_mismatch,
)
from autograd_helpers.checks._core.trial import Trial

__all__ = ["nudged_note"]

STEPS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)
_LIMIT = 256  # input elements: beyond, thousands of reference calls for a note


def _closer(got: Tensor, differences: Tensor, want: Tensor) -> bool:
    """``got`` is ``differences`` (to 1e-6) and not the reference's ``want``, or is both."""
    if worst_mismatch(got, want, atol=1e-15, rtol=1e-9) is None:
        return True
    return worst_mismatch(got, differences, atol=1e-15, rtol=1e-6) is None and (
        worst_mismatch(got, want, atol=1e-15, rtol=1e-6) is not None
    )


def nudged_note(
    trial: Trial, reference: Callable[..., Any], expected: Sequence[Tensor]
) -> str | None:
    """The sentence for a gradient that is the reference's central differences at some
    step (``None``: it is not, or the inputs are too large to tell). ``reference`` returns
    the reference's outputs that carry gradients, as a tuple."""
    if sum(t.numel() for t in trial.wrt_leaves) > _LIMIT:
        return None
    got = [g.detach() for g in trial.grads if isinstance(g, Tensor)]
    if len(got) != len(trial.grads):
        return None
    copies = fresh_leaves(trial.inputs, torch.float64)
    leaves = [x.detach() if isinstance(x, Tensor) else x for x in copies]
    for step in STEPS:
        try:
            differences = finite_difference_vjp(
                reference, leaves, trial.grad_outputs, trial.wrt, eps=step
            )
        except Exception:  # the reference is trusted only where the check runs it
            return None
        if all(_closer(g, d, want) for g, d, want in zip(got, differences, expected, strict=True)):
            return (
                "Hint: your backward approximates the derivative with finite differences "
                f"(it matches `(f(x + h) - f(x - h)) / (2 h)` with h = {format_number(step)}): "
                "write the derivative's formula instead; a difference quotient is off by its "
                "step (and by rounding, in float32)."
            )
    return None
