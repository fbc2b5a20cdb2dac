"""Who reseeded a global random number generator, and whether it was left so.

Part of ``check_function``'s conduct (watched in :mod:`._conduct_watch`). A reseed is a verdict
only if the generator's state at the end of the learner's call is not what it was before,
moved on by draws: ``torch.random.fork_rng()``, or a state saved and set back, leaves the
notebook's random numbers alone. torch's state is compared with the states the learner's
code could set back (:class:`TorchSeeding`); NumPy's global one with its state before,
moved on by any number of draws (:func:`numpy_reseeded`), whatever the route of the
reseed (``from numpy.random import seed``, ``np.random.mtrand._rand.seed``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common import nesting
from autograd_helpers._common.runner import is_learner_file

__all__ = ["TorchSeeding", "announced", "by_learner", "numpy_reseeded"]


@dataclass
class TorchSeeding:
    """torch's generator reseeded by learner code, judged when the runner puts it back.

    A reseed is a verdict only if the state at the end of the learner's call is neither
    the state before it nor one the learner code had before a reseed or entering
    ``fork_rng``: a state saved and set back (``torch.set_rng_state(s)``), or a
    ``torch.random.fork_rng()`` block, leaves the notebook's random numbers alone.
    """

    call: str = ""  # the first reseed seen since the runner took its snapshot
    states: list[Tensor] = field(default_factory=list)  # states it may have set back
    entered: list[FrameType] = field(default_factory=list)  # fork_rng frames seen

    def left_changed(self, before: Tensor) -> bool:
        now = torch.get_rng_state()
        return not any(torch.equal(now, s) for s in (before, *self.states))


_TORCH_DIR = str(Path(torch.__file__).parent)
# Frames passed through on the way up to the caller: torch's, and the runner's wrapper that
# counts nested backward passes (it stands in for torch.autograd.grad and .backward).
_PASSED_THROUGH = (_TORCH_DIR, nesting.__file__)


def by_learner(frame: FrameType | None, forked: CodeType) -> bool:
    """Is this call torch's on behalf of learner code (not the runner's, not fork_rng's)?"""
    while frame is not None and frame.f_code.co_filename.startswith(_PASSED_THROUGH):
        if frame.f_code is forked:
            return False
        frame = frame.f_back
    return frame is not None and is_learner_file(frame.f_code.co_filename)


_TWISTS = 256  # NumPy's global generator may draw 256 x 624 numbers and be "the same"


def numpy_reseeded(before: Any) -> bool:
    """Is NumPy's global state now not ``before`` moved on by draws? (Draws advance its
    position, and refill its key every 624 numbers; a seed or a state set replaces it.)"""
    numpy = sys.modules["numpy"]
    now = numpy.random.get_state()
    if now[0] != "MT19937" or before[0] != "MT19937":
        return False
    key = before[1]
    if numpy.array_equal(now[1], key):
        return False
    generator = numpy.random.MT19937()
    for _ in range(_TWISTS):
        state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 624}}
        generator.state = state
        generator.random_raw(1)  # refills the key
        key = generator.state["state"]["key"]
        if numpy.array_equal(now[1], key):
            return False
    return True


def announced(
    original: Callable[..., Any], call: str, seen: Callable[[str], None]
) -> Callable[..., Any]:
    """``original``, telling ``seen`` each time learner code calls it."""

    def told(*args: Any, **kwargs: Any) -> Any:
        if is_learner_file(sys._getframe(1).f_code.co_filename):
            seen(call)
        return original(*args, **kwargs)

    return told
