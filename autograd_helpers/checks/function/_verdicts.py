"""The individual judgements behind :func:`autograd_helpers.checks.check_function`, gathered.

Each looks at one thing the learner's code produced, in the light of the
:class:`~autograd_helpers.checks._core.trial.Trial`, and returns a :class:`Verdict` (what is
wrong, in words a learner can act on) or ``None`` when it is fine. They live by what they
judge: forward's return value (:mod:`._forward_output`), what ``backward`` returned before the
engine touches it (:mod:`._returned_gradients`), the gradients' values against expected ones
(:mod:`._gradient_match`), all in the shared words of :mod:`._wording`. The steps
(:mod:`._steps`, :mod:`._values`) take them from here.
"""

from __future__ import annotations

from autograd_helpers.checks.function._forward_output import inspect_outputs
from autograd_helpers.checks.function._gradient_match import compare_gradients
from autograd_helpers.checks.function._returned_gradients import (
    broadcast_notes,
    inspect_raw_gradients,
)
from autograd_helpers.checks.function._wording import MISMATCH, Verdict

__all__ = [
    "MISMATCH",
    "Verdict",
    "broadcast_notes",
    "compare_gradients",
    "inspect_outputs",
    "inspect_raw_gradients",
]
