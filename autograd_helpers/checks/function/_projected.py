"""Finite differences for inputs too large to nudge one element at a time.

Used by ``check_function``'s third step. Element by element, finite differences cost two
forward calls per input element: a 256 × 256 Linear (65,792 elements) took minutes. Beyond
:data:`ELEMENTWISE_LIMIT` elements, each input is cut into :data:`BLOCKS` runs of
consecutive elements, and the gradient is compared along one random unit direction ``u``
inside each run: backward's ``<grad, u>`` against the central difference of
``<grad_output, f(x ± eps·u)>``. That is gradcheck's fast mode, one direction per run
instead of one per input, so that a wrong element shows unless it is off by less than
about ``√(run length) × 1e-7`` of the run's gradient, and its run says where to look.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult, from_learner_error
from autograd_helpers.checks._core.numeric import format_number, index_text, projected_difference
from autograd_helpers.checks._core.trial import Trial

__all__ = ["BLOCKS", "ELEMENTWISE_LIMIT", "check_along_directions"]

# Above this many input elements in all (about a quarter of a second of forward calls for
# a small function), the gradients are checked along random directions.
ELEMENTWISE_LIMIT = 1024
# Its own seed, far from grad_output's: a direction equal to grad_output over a run is
# orthogonal to exactly the mistakes that matter (a missing transpose, v(Wᵀ − W), is).
DIRECTION_SEED = 104_729
# Runs per input: two forward calls each, so a check costs at most 2 × BLOCKS calls per
# input, whatever its size.
BLOCKS = 32
# Along a unit direction u, float64 central differences land within about 1e-10 of |grad|
# (measured: linear, tanh, softmax, layer norm, exp, relu; 1,600 to 16,384 elements), so
# 1e-7 · |grad over the run| is a margin of a thousand; one element off by δ moves
# <grad, u> by about δ / √(run length).
PROJECTED_RTOL = 1e-7


def _runs(numel: int) -> list[Tensor]:
    return [run for run in torch.arange(numel).tensor_split(min(BLOCKS, numel)) if run.numel()]


def check_along_directions(trial: Trial, plain_call: Callable[..., Any]) -> CheckResult | None:
    """Each gradient of ``trial`` against finite differences along random directions.

    ``plain_call`` computes the differentiable outputs (no recording backward). Returns the
    first problem found, or ``None`` when every run agrees.
    """
    generator = torch.Generator().manual_seed(DIRECTION_SEED)
    for k, (position, leaf) in enumerate(zip(trial.wrt, trial.wrt_leaves, strict=True)):
        grad = trial.grads[k]
        flat_grad = (
            torch.zeros(leaf.numel(), dtype=torch.float64)
            if grad is None
            else grad.detach().double().reshape(-1)
        )
        runs = _runs(leaf.numel())
        for run in runs:
            u = torch.zeros(leaf.numel(), dtype=leaf.dtype)
            u[run] = torch.randn(run.numel(), generator=generator, dtype=leaf.dtype)
            u /= u.norm()
            numerical = run_learner_code(
                projected_difference,
                plain_call,
                trial.leaves,
                trial.grad_outputs,
                position,
                u.reshape(leaf.shape),
                eps=trial.options.eps,
            )
            if numerical.error is not None:
                return from_learner_error(
                    trial.label, "forward (during finite differences)", numerical
                )
            expected, rounding = numerical.value
            yours = float((flat_grad * u).sum())
            limit = PROJECTED_RTOL * float(flat_grad[run].norm()) + 10 * rounding
            if not abs(yours - expected) <= limit:
                return _verdict(trial, position, leaf, run, len(runs), yours, expected)
    return None


def _verdict(
    trial: Trial,
    position: int,
    leaf: Tensor,
    run: Tensor,
    count: int,
    yours: float,
    expected: float,
) -> CheckResult:
    name = trial.names[position]
    first = index_text(int(run[0]), leaf.shape)
    last = index_text(int(run[-1]), leaf.shape)
    where = f"`{name}{first}`" if run.numel() == 1 else f"`{name}{first}` to `{name}{last}`"
    return trial.fail(
        f"the gradient for `{name}` is off compared with finite differences.",
        f"`{name}` has {leaf.numel():,} elements, too many to nudge one by one, so the check "
        f"nudges it in {count} runs of consecutive elements, each along a random direction "
        f"`u`. In the run from {where}: your gradient · u = {yours:.10g}, finite "
        f"differences {expected:.10g} (off by {format_number(abs(yours - expected))}).",
        "Check it on a smaller example to see which elements are off.",
    )
