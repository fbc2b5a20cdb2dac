"""What learner code reaches beyond its own names: its helpers, objects, arrays, modules.

Part of the checkers' containment (:mod:`.contained`), for ``check_function``. A cache
outside ``ctx`` need not be a global list the Function names: it can be an attribute of
another class of the notebook (``Store.y = y``), of a plain object (``box.last = x``), a
NumPy array written into (``buf[0] = ...``), a new attribute of a module (``torch._x = x``),
or any of these in a helper function the Function calls (``remember(x)``).
:func:`reached_functions` finds the helpers, :func:`object_spaces` the classes and objects
and the objects inside them, two levels deep (``box.inner.last = x``, ``pair[0].last``,
``Outer.Inner.calls``), attributes set on the notebook's functions and on ``torch.Tensor``
(for :class:`~.names.Names`); :class:`Arrays`, :class:`ModuleAttributes` and
:class:`LruCaches` (``functools.lru_cache``) snapshot the rest; each says what changed and
puts it back.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from torch import Tensor, nn
from torch.optim import Optimizer

from autograd_helpers._common.code import closure_items, named_globals
from autograd_helpers.checks._contain.names import code_owners
from autograd_helpers.checks._contain.writers import set_by_learner, writes_watched

__all__ = ["Arrays", "LruCaches", "ModuleAttributes", "object_spaces", "reached_functions"]

_FUNCTIONS = 32  # helper functions followed from one learner's Function
_ARRAY_ELEMENTS = 1 << 20  # a larger global array is not copied for each check
_MISSING = object()
_SKIP = (Tensor, nn.Module, Optimizer, type)  # contained elsewhere, or not a plain object
_DEPTH = 3  # levels of attributes and items followed from a name (`T[1][0]`, `box.inner`)
_ITEMS = 64  # attributes or items of one object looked into


def _named(owner: Any) -> list[tuple[str, Any]]:
    return [*named_globals(owner), *closure_items(owner)]


def reached_functions(fn: object) -> list[Any]:
    """``fn``'s code owners and the notebook's functions they call by name, transitively."""
    found: dict[int, Any] = {id(owner): owner for owner in code_owners(fn)}
    queue = list(found.values())
    while queue and len(found) < _FUNCTIONS:
        owner = queue.pop()
        space = getattr(owner, "__globals__", None)
        for _, value in _named(owner):
            value = getattr(value, "__func__", value)
            if (
                isinstance(value, types.FunctionType)
                and value.__globals__ is space
                and id(value) not in found
            ):
                found[id(value)] = value
                queue.append(value)
    return list(found.values())


def _is_notebook_object(value: object, notebook: object) -> bool:
    """An instance of a class the notebook defined (or a ``SimpleNamespace``)."""
    if isinstance(value, _SKIP) or not isinstance(getattr(value, "__dict__", None), dict):
        return False
    return isinstance(value, types.SimpleNamespace) or type(value).__module__ == notebook


def _objects_in(label: str, value: Any, notebook: object, depth: int) -> list[tuple[str, Any]]:
    """``(label, class or object)`` at ``value`` and inside it: a notebook class's or
    object's attributes (``box.inner``, ``Outer.Inner``), a tuple's or list's items
    (``pair[0]``), :data:`_DEPTH` levels deep."""
    if depth > _DEPTH:
        return []
    if (isinstance(value, type) and value.__module__ == notebook) or _is_notebook_object(
        value, notebook
    ):
        found = [(f"`{label}.{{}}`", value)]
        for name, item in list(vars(value).items())[:_ITEMS]:
            if not name.startswith("__"):
                found += _objects_in(f"{label}.{name}", item, notebook, depth + 1)
        return found
    if isinstance(value, tuple | list):
        return [
            found
            for i, item in enumerate(value[:_ITEMS])
            for found in _objects_in(f"{label}[{i}]", item, notebook, depth + 1)
        ]
    if (
        isinstance(value, types.FunctionType)
        and value.__module__ == notebook
        and isinstance(getattr(value, "__dict__", None), dict)
    ):
        return [(f"`{label}.{{}}`", value)]  # an attribute set on a notebook function
    return []


def object_spaces(owners: list[Any], known: list[Any]) -> list[tuple[str, Any]]:
    """``(label, class or object)`` for the notebook's classes, plain objects and functions
    ``owners`` name, and those inside them (not those in ``known``), and ``torch.Tensor``:
    where a cache set as an attribute would live."""
    seen = {id(k) for k in known}
    found: list[tuple[str, Any]] = []
    for owner in owners:
        notebook = getattr(owner, "__globals__", {}).get("__name__")
        for name, value in _named(owner):
            for label, space in _objects_in(name, value, notebook, 0):
                if id(space) not in seen:
                    seen.add(id(space))
                    found.append((label, space))
    if owners and id(Tensor) not in seen:
        found.append(("`torch.Tensor.{}`", Tensor))
    return found


def _is_cached(value: object) -> bool:
    return callable(getattr(value, "cache_info", None)) and hasattr(value, "cache_clear")


class LruCaches:
    """The ``functools.lru_cache`` functions ``owners`` name, and ``fn`` itself when it is
    one: which cached more calls (a cache outside ``ctx`` too, or state kept between calls
    of the learner's function). Entries cannot be taken out one by one: a cache that was
    empty is cleared again."""

    def __init__(self, owners: list[Any], fn: object = None) -> None:
        found: dict[int, tuple[str, Any]] = {}
        if _is_cached(fn):
            found[id(fn)] = (str(getattr(fn, "__name__", "your function")), fn)
        for owner in owners:
            for name, value in _named(owner):
                if _is_cached(value):
                    found.setdefault(id(value), (name, value))
        self.kept = [(name, f, _size(f)) for name, f in found.values()]

    def changed(self) -> list[str]:
        """``"the functools.lru_cache of `sq`"`` for each cache that grew."""
        return [
            f"the functools.lru_cache of `{name}`" for name, f, size in self.kept if _size(f) > size
        ]

    def restore(self) -> None:
        for _, f, size in self.kept:
            if size == 0 and _size(f) > 0:
                f.cache_clear()


def _size(cached: Any) -> int:
    try:
        return int(cached.cache_info().currsize)
    except Exception:
        return 0


class Arrays:
    """The NumPy arrays ``owners`` name: which were written into, and their values back."""

    def __init__(self, owners: list[Any]) -> None:
        numpy = sys.modules.get("numpy")
        self.kept: list[tuple[str, Any, Any]] = []
        if numpy is None:
            return
        seen: set[int] = set()
        for owner in owners:
            for name, value in _named(owner):
                inside = (
                    [(f"{name}[{i}]", v) for i, v in enumerate(value[:_ITEMS])]
                    if isinstance(value, tuple | list)
                    else []
                )  # an array in a tuple or list: `pair[0][...] = ...`
                for label, array in [(name, value), *inside]:
                    if (
                        isinstance(array, numpy.ndarray)
                        and id(array) not in seen
                        and array.size <= _ARRAY_ELEMENTS
                    ):
                        seen.add(id(array))
                        self.kept.append((label, array, array.copy()))

    def changed(self) -> list[str]:
        """``"the global NumPy array `buf`"`` for each array whose values changed."""
        return [
            f"the global NumPy array `{name}`"
            for name, now, before in self.kept
            if now.shape != before.shape or now.tobytes() != before.tobytes()
        ]

    def restore(self) -> None:
        for _, now, before in self.kept:
            if now.shape == before.shape and now.tobytes() != before.tobytes():
                now[...] = before


class ModuleAttributes:
    """Attributes of the modules ``owners`` name, set, added or deleted by learner code
    (``torch._last_x = x``, ``torch.pi = 3``): to say, and to put back. What the library
    changes by itself (``torch._dynamo``, imported by the first ``torch.func`` call, rebinds
    ``torch.manual_seed``) is neither said nor undone (:mod:`.writers`)."""

    def __init__(self, owners: list[Any]) -> None:
        modules: dict[int, tuple[str, types.ModuleType]] = {}
        for owner in owners:
            for name, value in _named(owner):
                if isinstance(value, types.ModuleType):
                    modules.setdefault(id(value), (name, value))
        self.kept = [(name, module, dict(vars(module))) for name, module in modules.values()]
        self.watch = writes_watched(module for _, module, _ in self.kept)

    def _set(self) -> list[tuple[str, types.ModuleType, str, Any]]:
        """``(name, module, attribute, old value or _MISSING)`` (a submodule imported is not)."""
        found = []
        for name, module, before in self.kept:
            now = dict(vars(module))
            for attribute in [*now, *(a for a in before if a not in now)]:
                old, value = before.get(attribute, _MISSING), now.get(attribute, _MISSING)
                if (
                    old is not value
                    and not isinstance(value, types.ModuleType)
                    and set_by_learner(module, attribute)
                ):
                    found.append((name, module, attribute, old))
        return found

    def changed(self) -> list[str]:
        """``"`torch._last_x`"`` for each attribute set."""
        return [f"`{name}.{attribute}`" for name, _, attribute, _ in self._set()]

    def restore(self) -> None:
        for _, module, attribute, old in self._set():
            if old is _MISSING:
                vars(module).pop(attribute, None)
            else:
                vars(module)[attribute] = old
        self.watch.release()
