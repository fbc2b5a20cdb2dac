"""One forward of a learner's Function, run under every watch ``_memory`` reads after it.

Used by :func:`~._memory.measure` (``check_saved_bytes``). :class:`WatchedForward` calls
``fn.apply`` on the leaves through the runner while ``saved_tensors_hooks`` collect what it
saves for backward, :class:`~autograd_helpers.checks._contain.watch.Allocations` keeps a weak
reference to every storage its operators allocate, ``tracemalloc`` snapshots the NumPy
buffers and Python objects it leaves alive (unless someone else traces already: then they go
uncounted), :class:`~._python.FilesWritten` notes the files it writes by path, and NumPy's
and Python's random states tell what it drew. A warm-up call runs first (the first call
under the watch fills torch's caches, Python objects); an operator that refuses a dispatch
mode runs it once more, without the allocations' watch. Apart from ``_memory`` because this
is how forward runs, and that module is how what it left is read.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gc
import tracemalloc
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.watch import Allocations
from autograd_helpers.checks.profiler._left import random_changes, random_states
from autograd_helpers.checks.profiler._python import FilesWritten

__all__ = ["WatchedForward"]

_NUMPY_DOMAIN = int(np.lib.tracemalloc_domain)
_PYTHON_DOMAIN = 0
_OURS = "*/autograd_helpers/*"  # the checker's own bookkeeping (the innermost frame)
_WATCH = "*/autograd_helpers/checks/_contain/watch.py"  # its dispatch mode (any frame)
_FRAMES = 64


class WatchedForward:
    """``fn.apply(*leaves)``, watched: :meth:`run` it, then read what it left."""

    def __init__(self, fn: type[Function], leaves: list[Tensor]) -> None:
        self.fn, self.leaves = fn, leaves
        self.packed: list[Tensor] = []  # what it saved for backward, as saved
        self.allocations = Allocations()
        self.tracing = tracemalloc.is_tracing()  # if someone else traces, NumPy's go uncounted
        self.snapshots: list[tracemalloc.Snapshot] = []
        self.files = FilesWritten()
        self.drawn: list[str] = []  # NumPy's or Python's random state changed by forward

    def _pack(self, tensor: Tensor) -> Tensor:
        self.packed.append(tensor)
        return tensor

    def _forward(self, watched: bool) -> Any:
        with (
            torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t),
            self.allocations if watched else contextlib.nullcontext(),
            self.files,
        ):
            rng = random_states()  # before the trace: its arrays are the checker's
            if not self.tracing:
                gc.collect(1)
                tracemalloc.start(_FRAMES)
            try:
                return self.fn.apply(*self.leaves)
            finally:
                if not self.tracing:
                    gc.collect(1)  # forward's garbage in reference cycles is not held
                    self.snapshots.append(tracemalloc.take_snapshot())
                    tracemalloc.stop()
                self.drawn[:] = random_changes(rng)

    def _again(self, watched: bool) -> Outcome:
        self.packed.clear()
        self.snapshots.clear()
        self.allocations.storages.clear()
        return run_learner_code(self._forward, watched)

    def run(self) -> Outcome:
        """The warm-up, then the watched call (unwatched by allocations if it refuses)."""
        # a warm-up first: the first call under the watch fills torch's caches (Python objects)
        outcome = run_learner_code(self._forward, True)
        if outcome.error is None:
            outcome = self._again(True)
        if outcome.error is not None:  # an operator that refuses a dispatch mode? Not watched
            outcome = self._again(False)
        return outcome

    def traced_bytes(self) -> tuple[int, int] | None:
        """Bytes of NumPy buffers and of Python objects forward left alive (``None`` when
        someone else was tracing): the Python ones less the checker's own (innermost frame
        in this package) and its dispatch watch's (any frame). Each distinct traceback is
        judged once: a filter on all frames of every trace walks, for a dict of 10,000
        numbers, over a million frames."""
        if not self.snapshots:
            return None
        snapshot = self.snapshots[0]
        traces = snapshot.filter_traces([tracemalloc.DomainFilter(True, _NUMPY_DOMAIN)]).traces
        python = snapshot.filter_traces(
            [tracemalloc.DomainFilter(True, _PYTHON_DOMAIN), tracemalloc.Filter(False, _OURS)]
        )
        python_bytes = sum(
            found.size
            for found in python.statistics("traceback")
            if not any(fnmatch.fnmatch(frame.filename, _WATCH) for frame in found.traceback)
        )
        return sum(trace.size for trace in traces), python_bytes
