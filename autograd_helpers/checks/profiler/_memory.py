"""What a Function keeps alive between forward and backward, by any route.

Used by ``check_saved_bytes``. Counting ``ctx.save_for_backward`` alone misses a learner
who keeps an intermediate on the class, in a global, in a closure, as an attribute of the
input or the output, in a NumPy array, or written into a tensor that existed before
forward (a global buffer filled in place): the memory is held all the same.
:func:`measure` runs forward once (:class:`~._forward.WatchedForward`) and sees every
storage its operators allocate
(:class:`~autograd_helpers.checks._contain.watch.Allocations` keeps a weak reference to each),
every NumPy buffer (``tracemalloc``, NumPy's own domain), and every tensor the code reaches by
name whose version counter forward moved. Whatever is still alive after forward returned, other than
the output, is held for backward: the storages saved with ``save_for_backward`` (a copy of
the input, ``x.clone()``, is extra memory, not the input) and the rest, which
``_routes`` then looks for by name. Writes into an existing tensor are found by
content, not only by version counter (``.data``, a NumPy view and ``inference_mode`` write
without moving it); numbers kept as Python data (``t.tolist()`` on ``ctx``) count by their
size, and so do a long ``str``, a dict of numbers, a ``BytesIO``, a file object or an ``mmap``
(``_python``), new or rewritten in place; Python objects kept alive that no route
names are counted from ``tracemalloc`` (Python's own domain); files forward writes by path
are named (and removed if forward created them). The part of the output's storage that is
not the output counts too (``stack([y, t])[0]`` keeps ``t`` alive in ``out._base``). A
sparse tensor counts its values and its indices. Everything forward wrote by name is put
back (:class:`~autograd_helpers.checks._contain.contained.Contained`).
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd import Function
from torch.utils._pytree import tree_leaves

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._core.submission import forward_parameter_names
from autograd_helpers.checks.profiler._forward import WatchedForward
from autograd_helpers.checks.profiler._python import digest, storage_kind
from autograd_helpers.checks.profiler._routes import ctx_attributes, number_bytes, routes
from autograd_helpers.checks.profiler._written import versions, written

__all__ = ["SCALAR", "Held", "Memory", "measure"]


SCALAR = "a 0-dim tensor (a scalar)"


@dataclass(frozen=True)
class Held:
    """One storage alive between forward and backward: its bytes, what it is, where."""

    nbytes: int
    what: str  # "an input", "a copy of an input", "an intermediate", "the output"...
    route: str = ""  # where the checker found it, if not in save_for_backward


@dataclass
class Memory:
    """What one forward kept alive for its backward."""

    output: Any = None
    saved: list[Held] = field(default_factory=list)  # save_for_backward's, each storage once
    elsewhere: list[Held] = field(default_factory=list)  # alive, neither saved nor the output
    numpy_bytes: int = 0  # NumPy buffers forward allocated, still alive
    numpy_route: str = ""  # where the checker found a new NumPy array
    ctx_attributes: list[str] = field(default_factory=list)  # holding tensors or arrays
    backward_records: bool = False  # backward builds a graph of its own (autograd inside)
    side_effects: tuple[str, ...] = ()  # global settings forward left changed (put back)
    python_bytes: int = 0  # Python objects forward allocated, still alive (tracemalloc)
    files: list[str] = field(default_factory=list)  # paths forward wrote
    input_bytes: int = 0

    @property
    def saved_bytes(self) -> int:
        return sum(h.nbytes for h in self.saved)

    @property
    def counted_bytes(self) -> int:
        """Saved bytes against the budget: a 0-dim tensor (a hyperparameter) is free."""
        return sum(h.nbytes for h in self.saved if h.what != SCALAR)


def _parts(tensor: Tensor) -> list[Tensor]:
    """The strided tensors that hold ``tensor``'s numbers: itself, or a sparse tensor's
    values and indices."""
    if tensor.layout == torch.strided:
        return [tensor]
    found = []
    for part in ("_values", "_indices", "crow_indices", "col_indices", "ccol_indices",
                 "row_indices", "values"):  # fmt: skip
        try:
            found.append(getattr(tensor, part)())
        except Exception:  # not a part of this layout
            continue
    unique = {int(t.untyped_storage().data_ptr()): t for t in found if t.layout == torch.strided}
    return list(unique.values())


def _key(tensor: Tensor) -> int:
    parts = _parts(tensor)
    if not parts:  # a layout whose numbers cannot be read: known by the object
        return id(tensor)
    return int(parts[0].untyped_storage().data_ptr())


def _alive(refs: list[weakref.ref[torch.UntypedStorage]]) -> dict[int, int]:
    found = {}
    for ref in refs:
        storage = ref()
        if storage is not None and storage.nbytes():
            found[int(storage.data_ptr())] = int(storage.nbytes())
    return found


def _what(tensor: Tensor, inputs: list[Tensor], output_keys: set[int]) -> str:
    if any(_key(tensor) == _key(x) for x in inputs):
        return "an input"
    if _key(tensor) in output_keys:
        return "the output"
    if tensor.dim() == 0 and tensor.layout == torch.strided:
        return SCALAR
    dense = tensor.detach()
    if tensor.layout != torch.strided:
        try:
            dense = dense.to_dense()
        except Exception:
            return "an intermediate"
    for x in inputs:
        if tensor.shape == x.shape and torch.equal(dense.to(x.dtype), x.detach()):
            kind = "" if tensor.dtype == x.dtype else f"{str(tensor.dtype).removeprefix('torch.')} "
            return f"a {kind}copy of an input"
    return "an intermediate"


def measure(fn: type[Function], inputs: tuple[Tensor, ...]) -> Memory | Outcome:
    """Run ``fn`` on copies of ``inputs``: what stays alive (the outcome if forward raised).

    What forward changes by name (a global tensor written, a list appended to) is put back.
    """
    kept = Contained(fn)  # the shared containment; kept_by_name adds this chapter's routes
    try:
        return _measure(fn, inputs)
    finally:
        kept.restore()


def _measure(fn: type[Function], inputs: tuple[Tensor, ...]) -> Memory | Outcome:
    leaves = [fresh_leaf(x) for x in inputs]
    names = forward_parameter_names(fn, len(leaves))
    before = list(routes(fn, None, leaves, names))
    arrays_before = {id(v) for _, v in before if isinstance(v, np.ndarray)}
    numbers_before = {id(v): (n, digest(v)) for _, v in before if (n := number_bytes(v))}
    existing = versions(before)
    forward = WatchedForward(fn, leaves)
    outcome = forward.run()
    if outcome.error is not None:
        return outcome
    outputs = [t for t in tree_leaves(outcome.value) if isinstance(t, Tensor)]
    output_keys = {_key(t) for t in outputs}
    saved: dict[int, Held] = {}
    for tensor in forward.packed:
        saved.setdefault(_key(tensor), Held(_nbytes(tensor), _what(tensor, leaves, output_keys)))
    parts = {_key(part) for tensor in forward.packed for part in _parts(tensor)}
    known = output_keys | set(saved) | parts | {_key(x) for x in leaves}
    storages = forward.allocations.storages
    alive = {k: n for k, n in _alive(storages).items() if k not in known}
    if alive:  # an intermediate in a reference cycle is garbage, not held: collect, look again
        gc.collect(1)  # the young generations, where forward's garbage is: a full one is slow
        alive = {k: n for k, n in _alive(storages).items() if k not in known}
    node = getattr(outputs[0], "grad_fn", None) if outputs else None
    reached = list(routes(fn, node, leaves, names, outputs))
    memory = Memory(outcome.value, list(saved.values()), ctx_attributes=ctx_attributes(node))
    memory.side_effects = (*outcome.side_effects, *forward.drawn)
    memory.input_bytes = sum(_nbytes(x) for x in leaves)
    memory.files = forward.files.paths
    forward.files.remove_created()
    for key, nbytes in sorted(alive.items()):
        route = next((r for r, v in reached if _within(v, key, nbytes)), "")
        memory.elsewhere.append(Held(nbytes, "an intermediate", route))
    memory.elsewhere += [h for key, h in _written(existing) if key not in alive]
    memory.elsewhere += _beyond_the_output(outputs, {_key(x) for x in leaves})
    memory.elsewhere += _numbers(reached, numbers_before)
    memory.backward_records = _backward_records(outputs, leaves)
    if (traced := forward.traced_bytes()) is not None:
        memory.numpy_bytes, memory.python_bytes = traced
        memory.numpy_route = next(
            (r for r, v in reached if isinstance(v, np.ndarray) and id(v) not in arrays_before),
            "",
        )
    return memory


def _written(existing: list[tuple[str, Tensor, int, Tensor]]) -> list[tuple[int, Held]]:
    """Tensors that existed before forward and that forward wrote into: a cache in place
    (each put back as it was: the check leaves the notebook's tensors alone)."""
    what = "an intermediate written into an existing tensor"
    return [(_key(t), Held(_nbytes(t), what, route)) for route, t in written(existing)]


def _beyond_the_output(outputs: list[Tensor], inputs: set[int]) -> list[Held]:
    """The part of each output's storage that is not the output: a view of a larger tensor
    (``torch.stack([y, t])[0]``) keeps the rest alive, reachable through ``._base``."""
    found = []
    for output in outputs:
        if output.layout != torch.strided or _key(output) in inputs:
            continue
        extra = _nbytes(output) - output.numel() * output.element_size()
        if extra > 0:
            what = "more of the output's storage than the output"
            route = "the output's storage (the output is a view of a larger tensor, `._base`)"
            found.append(Held(extra, what, route))
    return found


def _numbers(
    reached: list[tuple[str, object]], before: dict[int, tuple[int, object]]
) -> list[Held]:
    """Numbers forward kept as Python data (a list from ``t.tolist()``, ``bytes``, a
    ``BytesIO``): new objects, the growth of ones that were there before, or the whole of
    one rewritten in place."""
    found, seen = [], set()
    for route, value in reached:
        if id(value) in seen or not (size := number_bytes(value)):
            continue
        seen.add(id(value))
        was, held = before.get(id(value), (0, None))
        grown = size if was and digest(value) != held else size - was
        if grown > 0:
            found.append(Held(grown, storage_kind(value), route))
    return found


def _backward_records(outputs: list[Tensor], leaves: list[Tensor]) -> bool:
    """Does backward save tensors for a graph of its own (forward recomputed under autograd)?"""
    carriers = [t for t in outputs if t.requires_grad]
    packed: list[Tensor] = []

    def pack(tensor: Tensor) -> Tensor:
        packed.append(tensor)
        return tensor

    def backward() -> None:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            grads = [torch.ones_like(t) for t in carriers]
            torch.autograd.grad(carriers, leaves, grads, allow_unused=True)

    return bool(carriers) and run_learner_code(backward).error is None and bool(packed)


def _within(value: object, key: int, nbytes: int) -> bool:
    """Does ``value`` (a tensor or an array) live in the storage at ``key``?"""
    if isinstance(value, Tensor):
        return _key(value) == key
    if isinstance(value, np.ndarray):
        return key <= int(value.__array_interface__["data"][0]) < key + nbytes
    return False


def _nbytes(tensor: Tensor) -> int:
    """The bytes of ``tensor``'s storage (a sparse tensor's: its values and its indices)."""
    parts = _parts(tensor)
    return sum(int(t.untyped_storage().nbytes()) for t in parts)
