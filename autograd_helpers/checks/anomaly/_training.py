"""``check_training_step``'s run: the settings in turn, a step at a time, judged after each.

The public checker validates its arguments and hands over here. :func:`run_training_step`
runs the learner's step and the reference side by side on copies of the same inputs (the
example for a few steps, then each probe of :mod:`._settings` the reference itself can run,
for one), each step watched (what it calls, each backward pass's loss, the optimizers'
settings) and contained; :data:`~._step.STEP_CHECKS` judge every step, and the first
problem is the verdict. A step that passes without any backward pass passes with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from autograd_helpers.checks._core.feedback import CheckResult, first_found
from autograd_helpers.checks.anomaly._backward import chapter_contained
from autograd_helpers.checks.anomaly._settings import (
    Setting,
    argument_names,
    as_meant,
    copies,
    example_inputs,
    probe_settings,
)
from autograd_helpers.checks.anomaly._step import STEP_CHECKS
from autograd_helpers.checks.anomaly._step_run import run_step

__all__ = ["NO_BACKWARD_NOTE", "run_training_step"]

NO_BACKWARD_NOTE = (
    "Note: the checker saw no backward pass in your step (no `backward()` or "
    "`torch.autograd.grad`), yet its updates are right: a gradient computed another way "
    "(by hand, for example) is fine."
)


def _reference_runs(reference: Callable[..., Tensor], setting: Setting) -> bool:
    """Whether the reference runs at a probe: where it cannot, there is nothing to compare."""
    try:
        as_meant(reference, copies(setting.inputs))
    except (TypeError, ValueError):
        return False
    return True


def run_training_step(
    step: Callable[..., Any],
    label: str,
    reference: Callable[..., Tensor],
    make_inputs: Callable[[], tuple[Tensor, ...]],
    steps: int,
) -> CheckResult:
    """``step`` against ``reference``: ``steps`` steps from the example, then one at each
    probe; the first problem :data:`~._step.STEP_CHECKS` find, or the passing verdict."""
    example = example_inputs(make_inputs)
    probes = [s for s in probe_settings(example) if _reference_runs(reference, s)]
    settings = [Setting("", example, steps, "example"), *probes]
    names = argument_names(step, len(example))
    contained = chapter_contained(
        step, {f"`{names[k]}` from make_inputs()": t for k, t in enumerate(example)}
    )
    passes = 0
    for setting in settings:
        mine, theirs = copies(setting.inputs), copies(setting.inputs)
        earlier: list[list[Tensor]] = []
        for number in range(1, setting.steps + 1):
            run = run_step(
                step, label, reference, setting, (mine, theirs, earlier, number), contained
            )
            if (verdict := first_found(STEP_CHECKS, run)) is not None:
                return verdict
            passes += run.watch.backward_passes
            earlier.append([theirs[k].detach() - run.theirs_before[k] for k in run.trained])
    each = ", one backward pass each," if passes else ""
    return CheckResult(
        "passed",
        f"{label} passed: {steps} steps with the reference's losses and parameters{each} "
        f"and the same at {len(settings) - 1} probes (other batch sizes, a large gradient, "
        "float64).",
        () if passes else (NO_BACKWARD_NOTE,),
    )
