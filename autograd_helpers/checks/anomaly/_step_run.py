"""One training step of the learner's and of the reference, run side by side: :class:`StepRun`.

:func:`run_step` runs the learner's step once through the runner, watched (what it calls,
each backward pass's loss, the optimizers' settings it stepped with) and contained (what it
changed that outlives the call, put back), and the reference's step from the same values;
:class:`StepRun` holds both, as the named checks of :mod:`._step` read them. Apart from those
checks because both they and :mod:`._training`, which runs the steps in turn, stand on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers._common.tensors import TensorState
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.watch import Usage, watching
from autograd_helpers.checks._core.feedback import CheckResult, failed
from autograd_helpers.checks.anomaly._settings import Setting, argument_names, as_meant
from autograd_helpers.checks.anomaly._updates import OTHER_RULES, optimizer_rules

__all__ = ["StepRun", "run_step"]


@dataclass
class StepRun:
    """One step of the learner's and of the reference, from the same values."""

    label: str
    setting: Setting
    number: int
    names: list[str]
    step: object
    reference: Callable[..., Any]
    mine: list[Tensor]  # the learner's tensors, after the step
    before: list[TensorState]  # and as they were before it
    theirs: list[Tensor]  # the reference's, after its step
    theirs_before: list[Tensor]
    earlier: list[list[Tensor]]  # the reference's updates at the steps before
    outcome: Outcome
    watch: Usage
    lasting: list[str]
    want: Tensor  # the specified loss, float64
    rules: list[str]  # optimizer settings other than plain SGD its steps used, in words

    @property
    def trained(self) -> list[int]:
        return [k for k, t in enumerate(self.theirs) if t.requires_grad]

    @property
    def when(self) -> str:
        """``step 2``, or ``step 1, in float64 (a probe: ...)`` at a probe."""
        return f"step {self.number}{self.setting.where}"

    @property
    def after(self) -> str:
        """``after step 2``, or ``after step 1, in float64 (...),``: to start a sentence."""
        return f"after {self.when}{',' if self.setting.where else ''}"

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.label, title, *details)


def run_step(
    step: Callable[..., Any],
    label: str,
    reference: Callable[..., Tensor],
    setting: Setting,
    state: tuple[list[Tensor], list[Tensor], list[list[Tensor]], int],
    contained: Contained,
) -> StepRun:
    """Step ``number`` at ``setting``: the learner's ``step`` on its tensors and ``reference``
    on its own, both as ``state`` holds them (``mine``, ``theirs``, the reference's earlier
    updates, the step's number); what the step left changed is put back."""
    mine, theirs, earlier, number = state
    before = [TensorState.take(t) for t in mine]
    theirs_before = [t.detach().clone() for t in theirs]
    calls = GlobalCalls()
    # what it calls and each backward pass's loss; the optimizers' settings at each step
    with watching(tuple(OTHER_RULES), keep_outputs=True) as watch, optimizer_rules() as rules:
        outcome = run_learner_code(calls.around(step), *mine)
    lasting = [*outcome.side_effects, *contained.changes()]
    lasting += calls.said(lasting)
    contained.restore()
    want = as_meant(reference, theirs)
    names = argument_names(step, len(mine))
    return StepRun(
        label, setting, number, names, step, reference, mine, before, theirs, theirs_before,
        earlier, outcome, watch, lasting, want, rules,
    )  # fmt: skip
