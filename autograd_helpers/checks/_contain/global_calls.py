"""Calls on torch's process-wide state that the runner puts back without a word.

:func:`~autograd_helpers._common.runner.run_learner_code` puts back the random state and the
thread count after every call, and names a thread count left changed. Three things it cannot
see, because what it compares is equal again or was never a setting: random numbers drawn
where an exercise needs none (``torch.randn(1)`` in a loss, a dropout with ``p=1e-9``), a
reseed (``torch.manual_seed(0)``, which the checker's own seeding can hide), and
``torch.set_num_threads`` called with the count the notebook already has (and
``torch.set_flush_denormal``, which no setting of torch reads back). Inside a learner's
call, :class:`GlobalCalls` records the first two by the generator's state and seed and all
by the calls themselves (``torch.manual_seed``, ``torch.seed``, ``torch.set_num_threads``
and ``torch.set_flush_denormal``, under ``torch`` and ``torch.random``, are wrapped for the
call's duration), and :meth:`GlobalCalls.said` says each in a sentence of the chapter's verdicts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import torch

from autograd_helpers.checks._contain.patched import Patched

__all__ = ["GlobalCalls", "flushing_denormals"]

_SEEDS = (
    (torch, "manual_seed"),
    (torch.random, "manual_seed"),
    (torch, "seed"),
    (torch.random, "seed"),
)
_THREADS = ((torch, "set_num_threads"),)
_FLUSH = ((torch, "set_flush_denormal"),)

RESEEDED = (
    "it reseeded torch's random generator (`torch.{call}`): every later random draw "
    "of the notebook (weights, dropout, shuffling) would repeat the same numbers; leave the "
    "seed to the notebook"
)
DREW = (
    "it drew random numbers from torch's generator (`torch.rand`, `torch.randn`, dropout), "
    "which the exercise needs none of: every later random draw of the notebook shifts"
)
THREADS = (
    "it called `torch.set_num_threads`, which sets the thread count of the whole process, "
    "not of the call: leave it alone"
)
FLUSH = (
    "it called `torch.set_flush_denormal`, which makes every later operation of the process "
    "round numbers below float's smallest normal one to 0, changing results near 0: leave "
    "it alone"
)


class GlobalCalls:
    """Watch learner code for reseeding, random draws and ``torch.set_num_threads``.

    One object may watch several blocks (a forward, then its backward): what any of them
    did accumulates. Use it *inside* the runner's call (:meth:`around`), which puts the
    random state back only when the call ends.

    Example::

        >>> calls = GlobalCalls()
        >>> with torch.random.fork_rng(devices=[]):
        ...     with calls:
        ...         _ = torch.manual_seed(0)
        >>> calls.reseeded, calls.said()[0].split(":")[0]
        (True, "it reseeded torch's random generator (`torch.manual_seed`)")
    """

    def __init__(self, *, draws: bool = True) -> None:
        self.draws = draws  # whether drawing random numbers is a verdict here
        self.reseeded = False
        self.reseeded_by = "manual_seed"  # the seeding call seen (a seed changed without one)
        self.drew = False
        self.threads = False
        self.flush = False
        self._state: torch.Tensor | None = None
        self._seed = 0
        self._patched = Patched()
        self._flushing = False

    def _wrap(self, owner: Any, name: str, flag: str) -> None:
        self._patched.wrap(owner, name, lambda *args, **kwargs: setattr(self, flag, True))

    def _seen_seeding(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.reseeded, self.reseeded_by = True, name

    def __enter__(self) -> GlobalCalls:
        self._state = torch.get_rng_state()
        self._seed = torch.initial_seed()
        self._flushing = flushing_denormals()
        for owner, name in _SEEDS:
            self._patched.wrap(owner, name, functools.partial(self._seen_seeding, name))
        for owner, name in _THREADS:
            self._wrap(owner, name, "threads")
        for owner, name in _FLUSH:
            self._wrap(owner, name, "flush")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._patched.restore()
        if flushing_denormals() != self._flushing:
            torch.set_flush_denormal(self._flushing)  # the runner does not put it back
        if torch.initial_seed() != self._seed:
            self.reseeded = True
        elif self._state is not None and not torch.equal(self._state, torch.get_rng_state()):
            self.drew = True

    def around(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, watched by this object at every call (to hand to the runner)."""

        @functools.wraps(fn)
        def watched(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return watched

    def said(self, already: Sequence[str] = ()) -> list[str]:
        """Each thing seen, one sentence (a thread count ``already`` names is not repeated)."""
        found = []
        if self.reseeded:
            found.append(RESEEDED.format(call=self.reseeded_by))
        elif self.drew and self.draws:
            found.append(DREW)
        if self.threads and not any("threads" in text for text in already):
            found.append(THREADS)
        if self.flush and not any("flush_denormal" in text for text in already):
            found.append(FLUSH)
        return found


def flushing_denormals() -> bool:
    """Whether ``torch.set_flush_denormal(True)`` is on: a subnormal float32 reads as 0.

    Example::

        >>> flushing_denormals()
        False
    """
    return float(torch.tensor([1e-39], dtype=torch.float32).mul(1.0)) == 0.0
