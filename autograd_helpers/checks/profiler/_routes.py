"""Where a Function's code can keep a tensor: the routes a checker looks along, by name.

Used by ``check_saved_bytes`` to say where memory held between forward and backward is:
``ctx``'s attributes, the class's attributes, the inputs' attributes, the closures of
forward and backward, and the globals their code names (and the closures of the global
functions they call, the attributes of the classes they name, the attributes their code
reads off a module, ``torch.cache``). Containers (lists, dicts, deques, plain objects) are
followed several levels deep, the newest entries of a growing cache included. Besides
tensors and arrays, a walk finds numbers kept as Python data (``t.tolist()``, ``bytes``,
``array.array``): memory all the same.
"""

from __future__ import annotations

import array
import collections
import sys
import types
from collections.abc import Iterator
from numbers import Number

import numpy as np
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.code import closure_items, code_names, named_globals
from autograd_helpers.checks.profiler._python import stored_bytes

__all__ = ["ctx_attributes", "number_bytes", "routes"]

_WALK_DEPTH = 8  # global -> dict -> dict -> list -> list -> dict -> tensor, and more
_NUMBERS = 16  # a list or tuple of at least this many numbers is data, not a setting
_WALK_OBJECTS = 2_000
_WALK_ITEMS = 64  # of one container


def ctx_attributes(node: object) -> list[str]:
    """Names of the ``ctx`` attributes that hold tensors or arrays (inside containers too)."""
    found = []
    for name, value in getattr(node, "__dict__", {}).items():
        if any(isinstance(v, Tensor | np.ndarray) for v in _walk(value, 0, set())):
            found.append(f"ctx.{name}")
    return found


def number_bytes(value: object) -> int:
    """The bytes of numbers ``value`` holds as Python data (0 for anything else).

    A list or tuple of at least 16 numbers (each a Python object of its own), ``bytes``,
    ``bytearray``, ``array.array``, a ``memoryview``; and what
    :func:`~._python.stored_bytes` sizes (a long ``str``, a dict of numbers, an
    ``io.BytesIO``, a file object, an ``mmap``).

    Example::

        >>> number_bytes([0.5] * 100) > 800
        True
        >>> number_bytes((1, 2)), number_bytes("text")
        (0, 0)
    """
    if isinstance(value, bytes | bytearray | array.array | memoryview):
        return int(value.nbytes) if isinstance(value, memoryview) else sys.getsizeof(value)
    if stored := stored_bytes(value):
        return stored
    if not isinstance(value, list | tuple | collections.deque) or len(value) < _NUMBERS:
        return 0
    items = list(value)
    if not all(isinstance(item, Number) and not isinstance(item, bool) for item in items):
        if not all(isinstance(item, list | tuple) for item in items):
            return 0
        nested = [number_bytes(item) for item in items]  # t.tolist() of a matrix
        return sys.getsizeof(value) + sum(nested) if all(nested) else 0
    return sys.getsizeof(value) + sum(sys.getsizeof(item) for item in items)


def _walk(value: object, depth: int, seen: set[int]) -> Iterator[object]:
    """The tensors, arrays and numbers kept as Python data in ``value``: itself, or inside
    containers and plain objects."""
    if id(value) in seen or len(seen) > _WALK_OBJECTS:
        return
    seen.add(id(value))
    if isinstance(value, Tensor | np.ndarray) or number_bytes(value):
        yield value
        return
    if depth >= _WALK_DEPTH or isinstance(value, type | types.ModuleType | str | bytes):
        return
    if isinstance(value, dict):
        items: list[object] = list(value.values())
    elif isinstance(value, list | tuple | set | frozenset | collections.deque):
        items = list(value)
    elif isinstance(value, types.FunctionType):  # its closure, and its defaults (`cache=[]`)
        items = [contents for _, contents in closure_items(value)]
        items += [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
    else:
        try:  # a proxy's __getattr__ may raise anything: a walk that finds nothing is fine
            attributes = getattr(value, "__dict__", None)
        except Exception:
            attributes = None
        items = list(attributes.values()) if isinstance(attributes, dict) else []
    if len(items) > _WALK_ITEMS:  # a cache that grows: the newest entries are at its end
        items = items[: _WALK_ITEMS // 2] + items[-_WALK_ITEMS // 2 :]
    for item in items:
        yield from _walk(item, depth + 1, seen)


def routes(
    fn: type[Function],
    node: object,
    leaves: list[Tensor],
    names: list[str],
    outputs: list[Tensor] = (),  # type: ignore[assignment]
) -> Iterator[tuple[str, object]]:
    """Each tensor or array the Function's code can reach by name, and the route to it.

    The routes: ``ctx``'s attributes (``node``, the output's ``grad_fn``), the class's
    attributes, the inputs' attributes and ``.grad``, the outputs' attributes, and the
    closures and default arguments of forward and backward and the globals their code names
    (closures and defaults of the global functions they call included).
    """
    for name in getattr(node, "__dict__", {}):
        for value in _walk(getattr(node, name), 0, set()):
            yield f"the ctx attribute `ctx.{name}`", value
    for klass in fn.__mro__:
        if klass in (Function, object) or klass.__module__.startswith("torch"):
            continue
        for name, value in vars(klass).items():
            for found in _walk(value, 0, set()):
                yield f"the class attribute `{klass.__name__}.{name}`", found
    for leaf, input_name in zip(leaves, names, strict=True):
        for name, value in [*getattr(leaf, "__dict__", {}).items(), ("grad", leaf.grad)]:
            for found in _walk(value, 0, set()):
                yield f"an attribute of the input (`{input_name}.{name}`)", found
    for output in outputs:
        for name, value in getattr(output, "__dict__", {}).items():
            for found in _walk(value, 0, set()):
                yield f"an attribute of the output (`.{name}`)", found
    for method in ("forward", "setup_context", "backward"):
        function = getattr(fn, method, None)
        if not isinstance(function, types.FunctionType):
            continue
        for found in _walk(function, 0, set()):
            yield f"the closure of `{method}`", found
        attributes = code_names(function.__code__)
        for name, value in named_globals(function):
            if isinstance(value, types.FunctionType):
                for found in _walk(value, 0, set()):
                    yield f"the closure of `{name}`", found
            elif isinstance(value, type | types.ModuleType):
                yield from _attributes_of(name, value, attributes)
            elif value is not None:
                for found in _walk(value, 0, set()):
                    yield f"the global `{name}`", found


def _attributes_of(
    name: str, owner: type | types.ModuleType, attributes: set[str]
) -> Iterator[tuple[str, object]]:
    """What a class or module the code names holds in its attributes: a class's own (not
    torch's or Python's), a module's only those the code reads (``torch.cache``)."""
    if isinstance(owner, type):
        module = getattr(owner, "__module__", "") or ""
        if module.startswith("torch") or module == "builtins":
            return
        chosen = [(n, v) for n, v in vars(owner).items() if not n.startswith("__")]
    else:
        space = vars(owner)
        chosen = [(n, space[n]) for n in sorted(attributes) if n in space]
    for attribute, value in chosen:
        if isinstance(value, types.FunctionType | types.ModuleType | type):
            continue
        for found in _walk(value, 0, set()):
            yield f"the attribute `{name}.{attribute}`", found
