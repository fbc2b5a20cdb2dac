"""Who set a module's attribute: the learner's code, or the library's own.

Part of the checkers' containment (:mod:`.reach`). torch changes its own modules
by itself: the first ``torch.func`` call imports ``torch._dynamo``, which rebinds
``torch.manual_seed``; a lazy initialisation sets a module's flag (``global LOADED``). None
of that is the learner's doing, so none of it may be judged as theirs, nor undone by the
checker. While :func:`writes_watched` watches a module, an attribute set or deleted through
it (``torch._last_x = x``, ``setattr(torch, ...)``, ``del torch.pi``) is noted with the file
of the code that did it; a module's own code writing its globals (``STORE_GLOBAL``) goes
around the watch, and is the library's. :func:`set_by_learner` then says whose it was.

The watch swaps the module's class for a subclass that notes each write (Python allows a
module's ``__class__`` to be assigned), and swaps it back when the last watcher is done.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Iterable
from typing import Any

from autograd_helpers._common.runner import is_learner_file

__all__ = ["WritesWatched", "set_by_learner", "writes_watched"]

# id(module) -> [module, its own class, watchers]; id(module) -> attributes the learner set
_WATCHED: dict[int, list[Any]] = {}
_BY_LEARNER: dict[int, set[str]] = {}
_SUBCLASSES: dict[type, type] = {}


def _note(module: object, name: str) -> None:
    written = _BY_LEARNER.get(id(module))
    if written is None:
        return
    caller = sys._getframe(2)  # past __setattr__ / __delattr__: the code that wrote
    if is_learner_file(caller.f_code.co_filename):
        written.add(name)
    else:
        written.discard(name)  # the library's own write replaces the learner's


def _watching_class(own: type) -> type:
    """A subclass of a module's class that notes every attribute written through it."""
    if own not in _SUBCLASSES:
        base: Any = own  # its own __setattr__ (a module class may define one)

        def noted_set(self: types.ModuleType, name: str, value: Any) -> None:
            _note(self, name)
            base.__setattr__(self, name, value)

        def noted_delete(self: types.ModuleType, name: str) -> None:
            _note(self, name)
            base.__delattr__(self, name)

        namespace = {"__setattr__": noted_set, "__delattr__": noted_delete, "__slots__": ()}
        _SUBCLASSES[own] = type(f"Watched{own.__name__.capitalize()}", (own,), namespace)
    return _SUBCLASSES[own]


def _watch(module: types.ModuleType) -> bool:
    entry = _WATCHED.get(id(module))
    if entry is not None:
        entry[2] += 1
        return True
    own = type(module)
    try:
        module.__class__ = _watching_class(own)
    except TypeError:  # a module class whose layout forbids it: its writes stay unknown
        return False
    _WATCHED[id(module)] = [module, own, 1]
    _BY_LEARNER[id(module)] = set()
    return True


def _release(module: types.ModuleType) -> None:
    entry = _WATCHED.get(id(module))
    if entry is None:
        return
    entry[2] -= 1
    if entry[2] == 0:
        module.__class__ = entry[1]
        del _WATCHED[id(module)]
        del _BY_LEARNER[id(module)]


class WritesWatched:
    """The watch on some modules, held until :meth:`release` (or until it is collected)."""

    def __init__(self, modules: Iterable[types.ModuleType]) -> None:
        self.modules = [m for m in {id(m): m for m in modules}.values() if _watch(m)]
        self._finalizer = weakref.finalize(self, _release_all, list(self.modules))

    def release(self) -> None:
        """End this watch (idempotent); the modules get their own class back with the last."""
        self._finalizer()


def _release_all(modules: list[types.ModuleType]) -> None:
    for module in modules:
        _release(module)


def writes_watched(modules: Iterable[types.ModuleType]) -> WritesWatched:
    """Watch who writes the attributes of ``modules`` until the result's ``release()``.

    Example::

        >>> import math
        >>> watch = writes_watched([math])
        >>> math.tau_twice = 2 * math.tau  # a doctest's line is the learner's own code
        >>> set_by_learner(math, "tau_twice")
        True
        >>> del math.tau_twice
        >>> watch.release()
        >>> type(math).__name__
        'module'
    """
    return WritesWatched(modules)


def set_by_learner(module: types.ModuleType, name: str) -> bool:
    """Was ``module.name`` last written by learner code, while watched?

    An attribute of a module nobody watched is taken as the learner's (the cautious
    answer: a change is then judged and put back, as before the watch existed).
    """
    written = _BY_LEARNER.get(id(module))
    return True if written is None else name in written
