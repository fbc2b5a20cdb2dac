"""Where check_function meets a Function it cannot judge as usual, and says so.

Part of ``check_function`` (:mod:`._steps`):

- a Function that refuses float64 on purpose (pytorch3d's ``_PackedToPadded`` raises unless
  its input is float32): the checks run in float64, a limit of the check, said as such
  (:func:`float64_refused`);
- a forward that gives another output for the same input (random numbers, state): finite
  differences cannot judge it; with only a ``grad_reference`` its gradient still can
  (:func:`deterministic_verdict`);
- an empty output, as the reference's (detectron2's ``_NewEmptyTensorOp``): nothing to
  compare but the gradient, which must be exactly zero (:func:`empty_verdict`).
"""

from __future__ import annotations

import linecache
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import working_copies
from autograd_helpers._common.runner import LearnerError, run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.numeric import same_values
from autograd_helpers.checks._core.trial import Trial

__all__ = ["deterministic_verdict", "empty_verdict", "float64_refused"]

_TORCH = os.sep + "torch" + os.sep


def _raised_by_the_code(error: LearnerError) -> bool:
    """The exception comes from a ``raise`` in the code's own line, not from torch (a
    float32 tensor mixed into float64 ones is the code's mistake, not a refusal)."""
    tb = error.exception.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    line = linecache.getline(filename, tb.tb_lineno).strip()
    return _TORCH not in filename and line.startswith("raise ")


def float64_refused(trial: Trial, plain: Callable[..., Any], error: LearnerError) -> str | None:
    """The limit of the check, for a forward that raised in float64 but runs in float32
    (pytorch3d's ``_PackedToPadded`` accepts float32 only)."""
    if not _raised_by_the_code(error):
        return None  # torch's own error (a dtype mixed up): the code's mistake
    narrow = [
        x.detach().float() if isinstance(x, Tensor) and x.dtype == torch.float64 else x
        for x in trial.args
    ]
    if not any(isinstance(x, Tensor) and x.dtype == torch.float32 for x in narrow):
        return None
    with torch.no_grad():
        again = run_learner_code(plain, *narrow)
    if again.error is not None:
        return None
    return (
        "The same forward runs on float32 copies of the inputs: this Function refuses "
        "float64. check_function runs every check in float64 (float32's rounding would "
        "hide a wrong gradient among finite differences' noise), so it cannot check this "
        "Function as it is: that is a limit of the check, not a mistake in the Function. "
        "To check it, let it accept float64 (the dtype test widened to `x.is_floating_point()`)."
    )


def empty_verdict(trial: Trial) -> CheckResult | None:
    """An empty output (as the reference's) has a gradient of exactly zero: nothing flows."""
    if any(o.numel() for o in trial.outputs):
        return None
    for name, grad in zip(trial.wrt_names, trial.grads, strict=True):
        if grad is not None and bool(grad.detach().ne(0).any()):
            return trial.fail(
                f"the output is empty, yet backward's gradient for `{name}` is not zero.",
                "No element of the output depends on the input, so the gradient is zeros. "
                "Values such as 6.9e-310 are whatever the memory held: `torch.empty`, "
                "`new_empty` and `empty_like` do not clear it; use `torch.zeros_like(x)`.",
            )
    return None


def deterministic_verdict(trial: Trial, plain_call: Callable[..., Any]) -> CheckResult | None:
    """The same inputs give the same outputs: finite differences rely on it."""

    def with_other_random_numbers(*args: Any) -> Any:
        torch.rand(1)  # the runner put the random state back: move it on
        return plain_call(*args)

    with torch.no_grad():
        again = run_learner_code(with_other_random_numbers, *working_copies(trial.leaves))
    if again.error is not None or again.side_effects:
        return None  # judged when finite differences call forward again
    outputs = again.value if isinstance(again.value, tuple) else (again.value,)
    if len(outputs) == len(trial.outputs) and all(
        isinstance(a, Tensor) and same_values(a, b)
        for a, b in zip(outputs, trial.outputs, strict=True)
    ):
        return None
    if trial.options.grad_reference is not None and trial.options.reference is None:
        trial.notes.append(_RANDOM_NOTE)  # no finite differences, no output compared
        return None
    compared = (
        "The check compares its output with the reference's, one output for one input"
        if trial.options.grad_reference is not None
        else "The check compares with finite differences, which need the same output "
        "for the same input"
    )
    return trial.fail(
        "forward gives different outputs for the same input.",
        "It draws random numbers (dropout, noise) or depends on state that changes between "
        f"calls. {compared}: check a random Function with its randomness fixed (a "
        "`torch.Generator` with a fixed seed inside forward, or p = 0).",
    )


_RANDOM_NOTE = (
    "Note: forward gives different outputs for the same input (it draws random numbers): "
    "its output was not checked, only its gradient against `grad_reference`."
)
