"""Where a gradient is judged at all, and where finite differences have a say.

Part of ``check_function``'s step 3 (:mod:`._values`). Two sources of truth
are not equally trusted everywhere:

- where the reference's own output is NaN or inf (``torch.log`` at -89, a probe outside
  the function's domain), its gradient means nothing: an elementwise output's element
  leaves its input's element unjudged (:func:`domain_masks`);
- finite differences of the learner's forward have a truncation error (the step 1e-6 is
  10% of ``x`` = 1e-5 under a square root) and turn NaN wherever forward is: they decide
  only where the answer and the reference's gradient disagree (:func:`settled`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from autograd_helpers.checks._core.trial import Trial

__all__ = ["domain_masks", "settled"]


def domain_masks(trial: Trial, outputs: Sequence[Tensor]) -> list[Tensor | None]:
    """For each input of ``wrt``: where the reference's (one, elementwise) output is finite
    (``None``: everywhere judged, as for any function that is not elementwise)."""
    carriers = [outputs[k] for k in trial.differentiable if k < len(outputs)]
    if len(carriers) != 1:
        return [None for _ in trial.wrt]
    (out,) = carriers
    finite = out.detach().isfinite()
    return [
        finite if leaf.shape == out.shape and not bool(finite.all()) else None
        for leaf in trial.wrt_leaves
    ]


def settled(
    trial: Trial,
    truth: Sequence[Tensor],
    masks: Sequence[Tensor | None],
    reference: Sequence[Tensor] | None = None,
    tolerances: tuple[float, float] = (0.0, 0.0),
) -> list[Tensor]:
    """``truth`` with the answer's own gradient put in where it is not to be judged:
    outside ``masks`` and, given the ``reference``'s gradient, where the answer matches it
    to ``tolerances`` (absolute, relative)."""
    atol, rtol = tolerances
    fair = []
    for k, want in enumerate(truth):
        got = trial.grads[k] if k < len(trial.grads) else None
        if not isinstance(got, Tensor) or got.shape != want.shape:
            fair.append(want)
            continue
        got = got.detach()
        mask = masks[k]
        keep = torch.ones(want.shape, dtype=torch.bool) if mask is None else mask
        if reference is not None:
            ref = reference[k].detach()
            same = (got == ref) | (got.isnan() & ref.isnan())  # inf as the reference's too
            keep = keep & ~(same | ((got - ref).abs() <= atol + rtol * ref.abs()))
        fair.append(torch.where(keep, want, got.to(want.dtype)))
    return fair
