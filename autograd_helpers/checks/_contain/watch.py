"""Watch learner code at work: what it calls, the backward passes it runs, what it builds.

The one watcher of the checkers. The numbers a learner's code returns cannot tell a
Jacobian built from backward passes from one estimated by finite differences, a training
step that ran one backward pass from one that ran two, or a loss that hooks its gradient
from one that fixes its forward; the record a :func:`watching` block keeps can:

- which of the watched functions ran (recognised by their code, under any name), and how
  many backward passes (``torch.autograd.grad``/``backward`` calls; ``.backward()`` and
  functorch's ``vjp`` make them too), how many of those were batched
  (``is_grads_batched=True``) or ``.backward()`` calls, and what each ran on;
- the tensors a gradient hook was registered on;
- how often a function (``f``) was evaluated, and how often a small step away from ``x``
  (finite differences move ``x`` by ``eps``; a derivative never needs to), each point of
  a batch ``vmap`` evaluates it at counted too (read by :mod:`.watch_vmap`), and whether
  it was evaluated in a lower precision than ``x`` (``x.float()`` for a float64 ``x``);
- how many rows batched passes computed (a ``vmap``-ed pullback, ``is_grads_batched``, a
  ``vmap``-ed ``jvp``: the batch's size, summed over calls);
- optionally, the largest tensor storage created (:class:`Allocations` sees every
  operation, those inside ``vmap`` and backward passes included).

Calls are recognised with :func:`sys.setprofile`, by code object: the runner's guard
(:func:`~autograd_helpers._common.nesting.nested_backward_limit`) wraps
``torch.autograd.grad`` and ``backward``, and the code inside the wrapper is still theirs;
a ``TorchFunctionMode`` would see neither ``torch.func.jacrev`` nor a pass nested in a
backward.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.watch_vmap import (
    first_tensor,
    logical_points,
    plain,
    vmap_batch,
)

__all__ = ["Allocations", "Usage", "put_back_profile", "run_watched", "watching"]

_STEP = 0.05  # a move of x this small (relative to x's size) is a finite-difference step
_HOOKS = (torch.Tensor.register_hook, torch.Tensor.register_post_accumulate_grad_hook)


@dataclass
class Usage:
    """What learner code did while :func:`watching` looked."""

    called: list[str] = field(default_factory=list)  # watched names, in order of first call
    backward_passes: int = 0
    batched_passes: int = 0  # of which with is_grads_batched=True
    backward_calls: int = 0  # of which `.backward()` (torch.autograd.backward)
    ran_on: list[Tensor] = field(default_factory=list)  # each pass's (first) output, copied
    hooked: list[Tensor] = field(default_factory=list)  # tensors given a gradient hook
    forwards: int = 0  # calls of f
    moved: int = 0  # calls of f a small step away from x
    lower_precision: torch.dtype | None = None  # f evaluated in a dtype less precise than x's
    batched_rows: int = 0  # rows computed by batched passes (batch sizes, summed over calls)
    largest: int = 0  # elements of the largest storage created (when measured)
    largest_shape: tuple[int, ...] = ()
    # when measured: each new storage computed inside (not a copy of data from before), by
    # the shape of the tensor that made it -> its elements
    computed: dict[tuple[int, ...], int] = field(default_factory=dict)

    def took(self, names: Sequence[str]) -> str | None:
        """The first of ``names`` that ran (the outermost: it was called first)."""
        return next((name for name in self.called if name in names), None)

    def counting(self, f: Callable[..., Any], x: Tensor) -> Callable[..., Any]:
        """``f``, counting its calls here, and those a small step away from ``x``."""
        original = x.detach().to(torch.float64).clone()

        @functools.wraps(f)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.forwards += 1
            if args and isinstance(args[0], Tensor):
                self._saw(args[0], original, x.dtype)
            return f(*args, **kwargs)

        return counted

    def _saw(self, arg: Tensor, original: Tensor, dtype: torch.dtype) -> None:
        """Judge one point ``f`` is evaluated at (each point of a ``vmap`` batch)."""
        if _less_precise(arg.dtype, dtype):
            self.lower_precision = arg.dtype
        with _disable_current_modes(), torch.no_grad():
            points = logical_points(arg, tuple(original.shape))
            for point in points:
                rounded = original.to(arg.dtype) if _less_precise(arg.dtype, dtype) else original
                if _is_a_step_away(point, rounded.to(torch.float64)):
                    self.moved += 1


def _less_precise(dtype: torch.dtype, than: torch.dtype) -> bool:
    """Whether the floating ``dtype`` holds fewer digits than ``than``."""
    if not (dtype.is_floating_point and than.is_floating_point):
        return False
    return torch.finfo(dtype).eps > torch.finfo(than).eps


@functools.cache
def _code(name: str) -> CodeType:
    module_name, attribute = name.rsplit(".", 1)
    function = inspect.unwrap(getattr(importlib.import_module(module_name), attribute))
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType):
        raise TypeError(f"watching(): {name} is not a Python function")
    return code


# Operators that copy their argument: a copy of data from before the watch (a function's
# captured tensors, lifted into a trace by `linearize`, or `.to(dtype)`) is nothing computed.
_COPIES = frozenset(
    {"aten::clone", "aten::_to_copy", "aten::lift_fresh_copy", "aten::copy", "aten::contiguous"}
)


class Allocations(TorchDispatchMode):
    """Every storage an operation returns (a weak reference), and the largest new one.

    A storage is new when no argument of the operation lives in it (a view is not new).
    ``computed`` keeps, by shape, the new storages that are not copies of data that existed
    before the block (what the code built, as opposed to data it carried along).
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else the first use imports torch._dynamo: seconds, for nothing here

    def __init__(self) -> None:
        super().__init__()
        self.storages: list[weakref.ref[torch.UntypedStorage]] = []
        self.largest = 0  # elements
        self.largest_shape: tuple[int, ...] = ()
        self.computed: dict[tuple[int, ...], int] = {}
        self._made: set[int] = set()  # addresses of the storages made inside the block

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        sources = dict(_storage(t) for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor))
        # A copy holds what its source holds: nothing computed if that is data from before,
        # and no more numbers than the source (a zero broadcast to n × n, then copied, is 1).
        copied = func.name() in _COPIES
        held = max((n for where, n in sources.items() if where in self._made), default=0)
        for t in tree_leaves(out):
            if not isinstance(t, Tensor):
                continue
            where, size = _storage(t)
            if where in sources:  # a view, not new
                continue
            if size > self.largest:
                self.largest, self.largest_shape = size, tuple(t.shape)
            computed = min(size, held) if copied else size
            if computed:
                self._made.add(where)
                shape = tuple(t.shape)
                self.computed[shape] = max(computed, self.computed.get(shape, 0))
            if t.layout == torch.strided:
                with contextlib.suppress(RuntimeError, NotImplementedError):  # no storage
                    self.storages.append(weakref.ref(t.untyped_storage()))
        return out


def _storage(t: Tensor) -> tuple[int, int]:
    """``(address, elements)`` of a tensor's storage; ``(0, 0)`` where there is none (a
    fake tensor of a trace, such as ``linearize`` makes, has no real one)."""
    if type(t).__name__ == "FakeTensor":
        return 0, 0
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.nbytes() // max(t.element_size(), 1)
    except (RuntimeError, NotImplementedError, TypeError):
        return 0, 0


def _is_a_step_away(arg: object, x: Tensor) -> bool:
    """Whether ``arg`` is ``x`` moved by a small step (all its elements, some changed).

    A finite difference evaluates ``f`` a step of ``eps`` away from ``x``; a point far from
    ``x`` (``torch.zeros_like(x)`` to learn the output's shape) is no step. Undecidable
    inside ``vmap`` (no data-dependent Python there): counted as no step.
    """
    if not isinstance(arg, Tensor) or arg.numel() != x.numel() or arg.numel() == 0:
        return False
    try:
        with _disable_current_modes(), torch.no_grad():
            arg = plain(arg)
            if arg.numel() != x.numel():  # a batch: judged point by point
                return False
            moved = (arg.detach().reshape(-1).to(torch.float64) - x.reshape(-1)).abs()
            largest = float(moved.max())
            return 0 < largest <= _STEP * (1 + float(x.abs().max()))
    except Exception:  # a batched tensor inside vmap, a dual tensor's quirks: unknown
        return False


@contextlib.contextmanager
def watching(
    names: Sequence[str] = (), *, keep_outputs: bool = False, measure_size: bool = False
) -> Iterator[Usage]:
    """Watch a block: the :class:`Usage` record of what ran inside it.

    ``names`` are the dotted names of functions to recognise; ``keep_outputs`` keeps a copy
    of what each backward pass ran on (``Usage.ran_on``); ``measure_size`` records the
    largest storage created. To count the calls of a function, hand the learner's code
    ``usage.counting(f, x)`` instead of ``f``.

    Example::

        >>> x = torch.zeros(2)
        >>> with watching(["torch.func.jacrev"]) as usage:
        ...     f = usage.counting(torch.sin, x)
        ...     _ = torch.func.jacrev(f)(torch.zeros(2))
        ...     _ = f(torch.zeros(2) + 1e-6)  # a finite-difference step
        >>> usage.called, usage.backward_passes, usage.forwards, usage.moved
        (['torch.func.jacrev'], 1, 2, 1)
    """
    usage = Usage()
    watched = {_code(name): name for name in names}
    grad, backward = _code("torch.autograd.grad"), _code("torch.autograd.backward")
    jvp = _code("torch.func.jvp")
    hooks = {hook.__code__ for hook in _HOOKS}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        name = watched.get(code)
        if name is not None and name not in usage.called:
            usage.called.append(name)
        if code is grad or code is backward:
            usage.backward_passes += 1
            if code is backward:
                usage.backward_calls += 1
            elif frame.f_locals.get("is_grads_batched"):
                usage.batched_passes += 1
                first = first_tensor(frame.f_locals.get("grad_outputs"))
                usage.batched_rows += first.shape[0] if first is not None and first.dim() else 1
            else:
                local = frame.f_locals
                outputs = local.get("tensors" if code is backward else "outputs")
                usage.batched_rows += max(
                    vmap_batch(local.get("grad_outputs")), vmap_batch(outputs)
                )
            ran_on = first_tensor(frame.f_locals.get("tensors" if code is backward else "outputs"))
            if keep_outputs and ran_on is not None:
                usage.ran_on.append(ran_on.detach().clone())
        elif code is jvp:
            usage.batched_rows += vmap_batch(frame.f_locals.get("tangents"))
        elif code in hooks and isinstance(frame.f_locals.get("self"), Tensor):
            usage.hooked.append(frame.f_locals["self"])

    previous = sys.getprofile()
    sizes = Allocations() if measure_size else contextlib.nullcontext()
    sys.setprofile(profile)
    try:
        with sizes:
            yield usage
    finally:
        put_back_profile(previous)
        if isinstance(sizes, Allocations):
            usage.largest, usage.largest_shape = sizes.largest, sizes.largest_shape
            usage.computed = sizes.computed


def run_watched(fn: Callable[..., Any], *args: Any) -> tuple[Outcome, Usage]:
    """``fn(*args)`` through the learner-code runner, watched (what each pass ran on kept)."""
    with watching(keep_outputs=True) as usage:
        outcome = run_learner_code(fn, *args)
    return outcome, usage


def put_back_profile(previous: Any) -> None:
    """Reinstate the profile function a watch replaced (``sys.getprofile()`` before it)."""
    try:
        sys.setprofile(previous)
    except TypeError:  # a C profiler (cProfile) was on: it cannot be put back from Python
        sys.setprofile(None)
