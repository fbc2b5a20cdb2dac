"""A NaN replaced by chapter 02's learner code: ``nan_to_num``, or a selection on ``isnan``.

Used by :mod:`autograd_helpers.checks._core.problems` around each call into learner code, and by
the exercises' notes (:func:`~autograd_helpers.checks.jacobians._notes.nan_patched`): a right
result that replaced a NaN passes, with a note that says the replacement hides every NaN, a real
bug's too. Only the learner's own
calls count (their code's frames, :func:`~autograd_helpers._common.runner.is_learner_file`):
torch's functions replace NaN for their own reasons.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from autograd_helpers._common.runner import is_learner_file
from autograd_helpers.checks._contain.watch import put_back_profile

__all__ = ["NanPatching", "nan_patching"]

_NAN_TO_NUM = frozenset({"nan_to_num", "nan_to_num_"})
_SELECTS = frozenset({"where", "masked_fill", "masked_fill_"})  # after isnan: a NaN patched


@dataclass
class NanPatching:
    """What the learner's code called: ``nan_to_num``, ``isnan``, a selection."""

    nan_to_num: bool = False
    isnan: bool = False
    selected: bool = False

    @property
    def how(self) -> str:
        """``"calls `nan_to_num`"``, ``"replaces NaN (`isnan`)"``, or ``""``."""
        if self.nan_to_num:
            return "calls `nan_to_num`"
        return "replaces NaN (`isnan`)" if self.isnan and self.selected else ""


@contextlib.contextmanager
def nan_patching() -> Iterator[NanPatching]:
    """Watch a block for a NaN replaced by learner code; the profile function that was on
    before (the watcher's) keeps seeing every event.

    Example::

        >>> import torch
        >>> with nan_patching() as seen:
        ...     _ = torch.nan_to_num(torch.zeros(1))
        >>> seen.how
        'calls `nan_to_num`'
    """
    seen = NanPatching()
    previous = sys.getprofile()
    chained = previous if inspect.isfunction(previous) or inspect.ismethod(previous) else None

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if chained is not None:
            chained(frame, event, arg)
        if event != "c_call":
            return
        name = getattr(arg, "__name__", None)
        if name in _NAN_TO_NUM or name == "isnan" or name in _SELECTS:
            if not is_learner_file(frame.f_code.co_filename):
                return
            seen.nan_to_num |= name in _NAN_TO_NUM
            seen.isnan |= name == "isnan"
            seen.selected |= name in _SELECTS

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        put_back_profile(previous)
