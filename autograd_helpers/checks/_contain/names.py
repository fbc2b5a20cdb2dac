"""The notebook's names that learner code could change for good, as they were found.

Part of the checkers' containment (:mod:`.contained`). A forward that caches a tensor in a
global variable or on its Function class (``Tanh.cache = y``), or appends it to a global
list, passes every number, yet keeps tensors, and their graphs, alive after the call, and
shares them between calls. :class:`Names` notices names set (globals rebound or added, class
attributes), :class:`Containers` the lists, dicts, sets and deques whose items changed (the
notebook's, an enclosing function's, a default argument's); each says which, and puts them back.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.code import closure_items, named_globals

__all__ = ["Container", "Containers", "Names", "code_owners"]

_MISSING = object()
_BASES = set(Function.__mro__)
_KINDS = (list, dict, set, deque)  # and their subclasses: defaultdict, Counter, OrderedDict
_ITEMS = 64  # items of one container looked into for containers inside it
_METHODS = ("forward", "setup_context", "backward", "jvp")


def code_owners(fn: object) -> list[Any]:
    """The functions whose code runs when ``fn`` is called: a Function's methods, or ``fn``."""
    if isinstance(fn, type) and issubclass(fn, Function):
        methods = [getattr(fn, name, None) for name in _METHODS]
        return [getattr(m, "__func__", m) for m in methods if m is not None]
    return [fn]


def _spaces(fn: object) -> list[tuple[str, Any]]:
    """``(how to name an entry, the object whose attributes or items hold it)``."""
    found: list[tuple[str, Any]] = []
    if isinstance(fn, type) and issubclass(fn, Function):
        found += [(f"`{cls.__name__}.{{}}`", cls) for cls in fn.__mro__ if cls not in _BASES]
        space = getattr(fn.forward, "__globals__", None)
    else:
        space = getattr(fn, "__globals__", None)
    if isinstance(space, dict):
        found.append(("the global variable `{}`", space))
    return found


def _entries(space: Any) -> dict[str, Any]:
    items = space if isinstance(space, dict) else vars(space)
    return {name: value for name, value in items.items() if not name.startswith("__")}


class Names:
    """A snapshot of the names ``fn``'s code can set: to compare with, and to restore.

    Example::

        >>> class Counted(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         Counted.last = x  # a cache on the class
        ...         return x * 2
        >>> def cached_names():  # locals: no global of the example's own changes
        ...     names = Names(Counted)
        ...     Counted.apply(torch.ones(1))
        ...     changed = names.changes()
        ...     names.restore()
        ...     return changed, hasattr(Counted, "last")
        >>> cached_names()
        (['`Counted.last`'], False)
    """

    def __init__(self, fn: object, extra: Sequence[tuple[str, Any]] = ()) -> None:
        self._spaces = _spaces(fn)
        known = {id(space) for _, space in self._spaces}
        self._spaces += [(label, space) for label, space in extra if id(space) not in known]
        self._before = [_entries(space) for _, space in self._spaces]

    def changes(self) -> list[str]:
        """Each name that was added or now holds another object, as the learner reads it."""
        found = []
        for (label, space), before in zip(self._spaces, self._before, strict=True):
            for name, value in _entries(space).items():
                if before.get(name, _MISSING) is not value:
                    found.append(label.format(name))
        return found

    def restore(self) -> None:
        """Remove the names added and put back the objects replaced."""
        for (_, space), before in zip(self._spaces, self._before, strict=True):
            for name, value in _entries(space).items():
                old = before.get(name, _MISSING)
                if old is value:
                    continue
                if isinstance(space, dict):
                    if old is _MISSING:
                        del space[name]
                    else:
                        space[name] = old
                elif old is _MISSING:
                    delattr(space, name)
                else:
                    setattr(space, name, old)


def _kind(value: object) -> str:
    """``list``, ``dict``, ``set`` or ``deque``, as a learner says it (a defaultdict is a dict)."""
    return next((k.__name__ for k in _KINDS if isinstance(value, k)), type(value).__name__)


def _snapshot(value: Any) -> Any:
    """A shallow copy that compares with ``value`` item by item (any subclass's too)."""
    try:
        return copy.copy(value)
    except Exception:  # a subclass that cannot be copied: its items, in the base kind
        base = next(k for k in _KINDS if isinstance(value, k))
        return base(value.items() if isinstance(value, dict) else value)


@dataclass
class Container:
    """One list, dict, set or deque, where it lives, and a copy of its items as they were.

    ``where`` says where it lives, ``{kind}`` and ``{name}`` filled in: ``"the global {kind}
    `{name}`"``.
    """

    name: str
    enclosing: bool  # a cell of an enclosing function's, not a global
    value: Any
    before: Any
    where: str = ""

    @property
    def kind(self) -> str:
        return _kind(self.value)

    @property
    def label(self) -> str:
        """``the global list `stash```, or ``the list `seen` of an enclosing function``."""
        if self.where:
            return self.where.format(kind=self.kind, name=self.name)
        if self.enclosing:
            return f"the {self.kind} `{self.name}` of an enclosing function"
        return f"the global {self.kind} `{self.name}`"

    def changed(self) -> bool:
        """Items added, removed or replaced (the objects themselves; a set's by equality)."""
        now, before = self.value, self.before
        if len(now) != len(before):
            return True
        if isinstance(now, dict):
            return now.keys() != before.keys() or any(now[k] is not before[k] for k in now)
        if isinstance(now, set):
            return bool(now != before)
        return any(a is not b for a, b in zip(now, before, strict=True))

    def gained_tensors(self) -> bool:
        """Does it hold a tensor (alone, or in a tuple or list) that it did not hold?"""
        now = self.value.values() if isinstance(self.value, dict) else self.value
        old = self.before.values() if isinstance(self.before, dict) else self.before
        known = {id(v) for v in old}
        for item in now:
            parts = item if isinstance(item, tuple | list) else (item,)
            if id(item) not in known and any(isinstance(part, Tensor) for part in parts):
                return True
        return False

    def restore(self) -> None:
        if not self.changed():
            return
        if isinstance(self.value, list):
            self.value[:] = self.before
        elif isinstance(self.value, deque):
            self.value.clear()
            self.value.extend(self.before)
        else:
            self.value.clear()
            self.value.update(self.before)


def _inside(name: str, value: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """The containers inside a container or tuple: ``("memo['xs']", the list)``, through
    tuples (``T[1][0]``) up to three levels; the list behind a bound method (``push =
    cache.append``)."""
    if depth > 2:
        return []
    owner = getattr(value, "__self__", None)
    if depth == 0 and isinstance(owner, _KINDS) and callable(value):
        return [(f"{name}.__self__", owner)]
    if isinstance(value, dict):
        pairs = [(f"{name}[{k!r}]", v) for k, v in list(value.items())[:_ITEMS]]
    elif isinstance(value, list | deque | tuple):
        pairs = [(f"{name}[{i}]", v) for i, v in enumerate(list(value)[:_ITEMS])]
    else:
        return []
    found = [(label, v) for label, v in pairs if isinstance(v, _KINDS)]
    for label, v in pairs:
        if isinstance(v, tuple):
            found += _inside(label, v, depth + 1)
    return found


def _defaults(owner: Any) -> list[tuple[str, Any]]:
    """``(parameter, value)`` of each default argument of a function (``_cache=[]``)."""
    code = getattr(owner, "__code__", None)
    defaults = getattr(owner, "__defaults__", None) or ()
    found: list[tuple[str, Any]] = []
    if code is not None and defaults:
        positional = code.co_varnames[: code.co_argcount]
        found += zip(positional[len(positional) - len(defaults) :], defaults, strict=True)
    found += (getattr(owner, "__kwdefaults__", None) or {}).items()
    return found


class Containers:
    """Lists, dicts and sets learner code can reach, to tell which it changed and undo it.

    ``fn``'s code names them (for a Function, its methods' code does), among its globals or
    in its closure; with ``every_global``, every global of ``fn``'s notebook counts.

    Example::

        >>> rows = []
        >>> def stash(x):
        ...     rows.append(x)
        >>> def stashed():  # in a function: the doctest's own globals are the notebook here
        ...     held = Containers(stash)
        ...     stash(torch.ones(1))
        ...     found = [(c.label, len(c.before), len(c.value)) for c in held.changed()]
        ...     held.restore()
        ...     return found, rows
        >>> stashed()
        ([('the global list `rows`', 0, 1)], [])
    """

    def __init__(
        self, fn: object, *, every_global: bool = False, owners: list[Any] | None = None
    ) -> None:
        found: dict[int, Container] = {}

        def add(name: str, enclosing: bool, value: Any, where: str = "") -> None:
            if isinstance(value, _KINDS) and id(value) not in found:
                found[id(value)] = Container(name, enclosing, value, _snapshot(value), where)

        deep = owners is not None  # helpers, default arguments, containers in containers
        for owner in code_owners(fn) if owners is None else owners:
            space = getattr(owner, "__globals__", None)
            named = (
                [(n, v) for n, v in space.items() if not n.startswith("_")]
                if every_global and isinstance(space, dict)
                else named_globals(owner)
            )
            for enclosing, pairs in ((False, named), (True, closure_items(owner))):
                for name, value in pairs:
                    add(name, enclosing, value)
                    for label, item in _inside(name, value) if deep else ():
                        behind = label.endswith(".__self__")  # `push = cache.append`
                        add(label, enclosing, item, f"the {{kind}} behind `{name}`" * behind)
            function = getattr(owner, "__name__", "?")
            for name, value in _defaults(owner) if deep else ():
                add(name, False, value, f"the default {{kind}} `{{name}}` of {function}")
        self.all: list[Container] = list(found.values())

    def changed(self) -> list[Container]:
        """The containers whose items changed, in the order they were found."""
        return [container for container in self.all if container.changed()]

    def restore(self) -> None:
        for container in self.all:
            container.restore()
