"""Does backward read ``.grad``? Backward run once more with its input's ``.grad`` filled.

Part of ``check_function`` (:mod:`._steps`). The checker hands forward copies of its leaves
that are not leaves themselves (so that a Function that writes into its input can be
checked); their ``.grad`` is always ``None``. A backward that adds what ``.grad`` holds
(``if x.grad is not None: g = g + x.grad``) then looks right, yet in real use, with a leaf
``x``, its second backward pass gives ``x.grad`` three times the gradient instead of
twice: autograd adds into ``.grad`` itself. :func:`grad_read_verdict` runs forward on real
leaves, fills one leaf's ``.grad`` and asks for the gradients again: they must not change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.trial import GRAD_OUTPUT_SEED, Trial
from autograd_helpers.checks.function._replays import same_gradient

__all__ = ["grad_read_verdict"]


def _gradient_with_grad_held(
    call: Callable[..., Any], trial: Trial, position: int
) -> Tensor | bool | None:
    """The gradient for input ``position`` when its leaf's ``.grad`` already holds a value
    (``False`` when the run fails: judged elsewhere)."""
    leaves = fresh_leaves(trial.inputs, torch.float64, trial.wrt)
    outcome = run_learner_code(call, *leaves)  # the leaves themselves: what ctx saves
    if outcome.error is not None or outcome.side_effects:
        return False
    value = outcome.value
    outputs = [
        o for o in (value if isinstance(value, tuple) else (value,))
        if isinstance(o, Tensor) and o.requires_grad
    ]  # fmt: skip
    leaf = leaves[position]
    if not isinstance(leaf, Tensor) or [o.shape for o in outputs] != [
        v.shape for v in trial.grad_outputs
    ]:
        return False
    generator = torch.Generator().manual_seed(GRAD_OUTPUT_SEED + 1)
    leaf.grad = torch.randn(leaf.shape, generator=generator, dtype=leaf.dtype)
    again = run_learner_code(
        torch.autograd.grad, outputs, [leaf], trial.grad_outputs, allow_unused=True
    )
    if again.error is not None or again.side_effects:
        return False
    (grad,) = again.value
    return grad if isinstance(grad, Tensor) else None


def grad_read_verdict(trial: Trial, call: Callable[..., Any]) -> CheckResult | None:
    """Backward gives another gradient when its input's ``.grad`` holds one: it reads it."""
    for k, i in enumerate(trial.wrt):
        grad = _gradient_with_grad_held(call, trial, i)
        if grad is False or same_gradient(grad, trial.grads[k]):  # type: ignore[arg-type]
            continue
        name = trial.names[i]
        return trial.fail(
            f"backward read `.grad` of its input `{name}`: autograd adds gradients into "
            "`.grad` itself.",
            f"With `{name}.grad` already holding a gradient (an earlier backward pass, "
            "gradients accumulated over batches), your backward returned another gradient "
            f"than with `{name}.grad` empty. Autograd adds what backward returns to "
            f"`{name}.grad`: adding `{name}.grad` yourself counts it twice (two passes "
            "give three times the gradient). Return only `grad_output` times the derivative.",
        )
    return None
