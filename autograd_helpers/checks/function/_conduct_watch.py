"""The watch on a stage of learner code: what it called, seen as it calls it.

Part of ``check_function``'s conduct (:mod:`._conduct` turns what is seen here into verdicts
and notes). :func:`conduct` sets a profile function for the stage, chained to any Python
profiler already on (as :func:`~autograd_helpers.checks._contain.watch.watching` sets one),
which sees, called by the learner's code:

- a reseed of a global random number generator (``torch.manual_seed``,
  ``torch.set_rng_state``, ``np.random.seed``, ``random.seed``), judged when the runner puts
  the states back (:class:`~autograd_helpers._common.globals.GlobalState`'s ``restore``): a
  state set back, or ``torch.random.fork_rng``, is no reseed (:mod:`._seeding`);
- ``nan_to_num``, ``isnan`` and ``torch.where``/``masked_fill`` (a NaN patched by hand);
- autograd run by hand (``torch.autograd.grad``, ``.backward()``, ``torch.func``'s transforms);
- ``ctx.mark_dirty``.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
from torch.autograd.function import FunctionCtx

from autograd_helpers._common.globals import GlobalState
from autograd_helpers.checks.function._seeding import (
    TorchSeeding,
    announced,
    by_learner,
    numpy_reseeded,
)

__all__ = ["Conduct", "conduct"]

# Methods of torch's global generator that reseed it or set its state, as the learner calls them.
_SEEDING = {
    "manual_seed": "`torch.manual_seed`",
    "seed": "`torch.seed`",
    "set_state": "`torch.set_rng_state`",
}
_PYTHON_SEED, _PYTHON_SETSTATE = random.Random.seed.__code__, random.Random.setstate.__code__
_NUMPY_SEEDING = {"seed": "`np.random.seed`", "set_state": "`np.random.set_state`"}
# torch.func's transforms that differentiate (reverse mode, and forward mode: jvp, linearize)
_FUNC = ("grad", "grad_and_value", "vjp", "jacrev", "hessian", "jvp", "linearize", "jacfwd")
_NAN_TO_NUM = frozenset({"nan_to_num", "nan_to_num_"})
_MASKING = frozenset({"where", "masked_fill", "masked_fill_"})  # with isnan: a NaN patched


def _code_of(function: Any) -> CodeType:
    code = getattr(inspect.unwrap(function), "__code__", None)
    assert isinstance(code, CodeType)
    return code


@dataclass
class Conduct:
    """What a stage of learner code called, as :func:`conduct` saw it."""

    reseeded: bool = False  # a global generator reseeded or its state set, and left so
    reseeded_by: str = ""  # the call, as the learner wrote it: "`torch.manual_seed`"
    nan_to_num: bool = False
    isnan: bool = False  # torch.isnan / Tensor.isnan
    masked: bool = False  # torch.where / masked_fill: with isnan, a NaN patched by hand
    passes: int = 0  # torch.autograd.grad / backward / torch.func calls by learner code
    engines: list[str] = field(default_factory=list)  # those calls, as the learner wrote them
    marked_dirty: bool = False


class _Watch:
    """The profile function :func:`conduct` sets, and the calls it tells apart by code."""

    def __init__(self, seen: Conduct) -> None:
        self.seen = seen
        self.engines = {
            _code_of(torch.autograd.grad): "`torch.autograd.grad`",
            _code_of(torch.autograd.backward): "`.backward()`",
            **{_code_of(getattr(torch.func, n)): f"`torch.func.{n}`" for n in _FUNC},
        }
        self.dirty = _code_of(FunctionCtx.mark_dirty)
        self.forked = _code_of(torch.random.fork_rng)  # sets the state back: no reseed
        self.restore = _code_of(GlobalState.restore)
        self.torch_seeding = TorchSeeding()
        self.numpy_calls: list[str] = []  # np.random.seed / set_state as the learner named them
        previous = sys.getprofile()
        self.previous = previous
        callable_previous = inspect.isfunction(previous) or inspect.ismethod(previous)
        self.chained: Any = previous if callable_previous else None

    def reseeded(self, call: str) -> None:
        self.seen.reseeded, self.seen.reseeded_by = True, self.seen.reseeded_by or call

    def torch_state_call(self, frame: FrameType, name: str) -> None:
        """torch's generator reseeded or set: by the learner, or put back by the runner."""
        caller = frame.f_back
        seeding = self.torch_seeding
        if caller is not None and caller.f_code is self.restore:
            # the runner puts the state back: the learner's call has ended here
            kept = caller.f_locals.get("self")
            if not isinstance(kept, GlobalState):
                return
            if seeding.call and seeding.left_changed(kept.rng):
                self.reseeded(seeding.call)
            numpy_kept = kept.numpy_random
            if numpy_kept is not None and numpy_kept.moved() and numpy_reseeded(numpy_kept.state):
                self.reseeded(self.numpy_calls[0] if self.numpy_calls else "`np.random.seed`")
            seeding.call, seeding.states = "", []
        elif by_learner(frame, self.forked):
            seeding.call = seeding.call or _SEEDING[name]
            seeding.states.append(torch.get_rng_state())

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.chained is not None:
            self.chained(frame, event, arg)
        seen, forked = self.seen, self.forked
        if event == "c_call":
            name = getattr(arg, "__name__", None)
            if name in _SEEDING and getattr(arg, "__self__", None) is torch.default_generator:
                self.torch_state_call(frame, name)
            elif name in _NAN_TO_NUM:
                seen.nan_to_num = seen.nan_to_num or by_learner(frame, forked)
            elif name == "isnan":
                seen.isnan = seen.isnan or by_learner(frame, forked)
            elif name in _MASKING:
                seen.masked = seen.masked or by_learner(frame, forked)
        elif event == "call":
            code = frame.f_code
            engine = self.engines.get(code)
            if engine is not None and by_learner(frame.f_back, forked):
                seen.passes += 1
                seen.engines.append(engine)
            elif code is self.dirty:
                seen.marked_dirty = True
            elif code is forked and frame not in self.torch_seeding.entered:
                self.torch_seeding.entered.append(frame)  # the state it will set back
                self.torch_seeding.states.append(torch.get_rng_state())
            elif (
                (code is _PYTHON_SEED or code is _PYTHON_SETSTATE)
                and frame.f_locals.get("self") is getattr(random, "_inst", None)
                and by_learner(frame.f_back, forked)
            ):
                self.reseeded("`random.seed`" if code is _PYTHON_SEED else "`random.setstate`")


@contextlib.contextmanager
def _numpy_seeding_announced(watch: _Watch) -> Iterator[None]:
    """``np.random.seed`` and ``set_state`` tell the watch when the learner calls them (they
    are Cython functions: no profile event), and NumPy's state moves on for the block."""
    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    if numpy_random is None:
        yield
        return
    originals = {name: getattr(numpy_random, name, None) for name in _NUMPY_SEEDING}
    numpy_state = numpy_random.get_state()
    numpy_random.random_sample(3)
    try:
        for name, original in originals.items():
            if original is not None:
                told = announced(original, _NUMPY_SEEDING[name], watch.numpy_calls.append)
                setattr(numpy_random, name, told)
        yield
    finally:
        for name, original in originals.items():
            if original is not None:
                setattr(numpy_random, name, original)
        numpy_random.set_state(numpy_state)


@contextlib.contextmanager
def conduct() -> Iterator[Conduct]:
    """Watch a block for reseeding, ``nan_to_num``, backward passes and ``mark_dirty``.

    Example::

        >>> from autograd_helpers._common.runner import run_learner_code
        >>> with conduct() as seen:
        ...     _ = run_learner_code(lambda: torch.manual_seed(3))
        >>> seen.reseeded
        True
    """
    seen = Conduct()
    watch = _Watch(seen)
    # torch's state moved on for the stage (and put back after it): a state the notebook
    # saved before (`torch.set_rng_state(STATE0)`) is then a change, not a coincidence
    notebook_state = torch.get_rng_state()
    torch.rand(7)  # not deterministic_verdict's one draw: forward's second run differs
    try:
        with _numpy_seeding_announced(watch):
            sys.setprofile(watch.profile)
            try:
                yield seen
            finally:
                _put_back(watch.previous)
    finally:
        torch.set_rng_state(notebook_state)


def _put_back(previous: Any) -> None:
    """The profile function that was on before (a C one, cProfile's, cannot be: none)."""
    try:
        sys.setprofile(previous)
    except TypeError:
        sys.setprofile(None)
