"""Module functions replaced for a while by ones that note each call (a reseed, a file saved).

:class:`Patched` is the one way the checkers watch a call they cannot see otherwise: a
learner's ``np.random.seed(0)`` or ``torch.save(t, path)`` runs as written, after a note.

torch may import a module of its own while the wrappers are in place (the first
``torch.func`` call imports ``torch._dynamo``), and that module may test or rebind what is
wrapped (``if torch.manual_seed is torch.random.manual_seed: torch.manual_seed =
disable(torch.manual_seed)``). So one function under two names gets one wrapper (the test
holds as without the checker), a name that torch rebound meanwhile keeps torch's binding
when the wrappers are taken away (one the learner's code rebound does not: who wrote it is
known from :mod:`.writers`), and a wrapper left inside it only passes calls on.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from autograd_helpers.checks._contain.writers import WritesWatched, set_by_learner, writes_watched

__all__ = ["Patched"]


class Patched:
    """``wrap(owner, name, note)`` makes ``owner.name(...)`` call ``note(...)`` first;
    ``restore()`` puts every original back, in reverse order.

    Example::

        >>> import math
        >>> seen = []
        >>> patched = Patched()
        >>> patched.wrap(math, "floor", lambda x: seen.append(x))
        >>> math.floor(2.5), seen
        (2, [2.5])
        >>> patched.restore()
        >>> math.floor(3.5), seen
        (3, [2.5])
    """

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, Any]] = []  # owner, name, original, wrapper
        self._on = [True]  # the wrappers of this round note calls while it holds True
        self._watches: list[WritesWatched] = []

    def wrap(self, owner: Any, name: str, note: Callable[..., object]) -> None:
        original = getattr(owner, name)
        wrapper = next((w for _, _, o, w in self._saved if o is original), None)
        if wrapper is None:
            on = self._on

            @functools.wraps(original)
            def noted(*args: Any, **kwargs: Any) -> Any:
                if on[0]:
                    note(*args, **kwargs)
                return original(*args, **kwargs)

            wrapper = noted
        if isinstance(owner, types.ModuleType):
            self._watches.append(writes_watched([owner]))
        self._saved.append((owner, name, original, wrapper))
        setattr(owner, name, wrapper)

    def restore(self) -> None:
        self._on[0] = False
        self._on = [True]
        for owner, name, original, wrapper in reversed(self._saved):
            now = getattr(owner, name, None)
            if now is wrapper or (now is not original and _rebound_by_learner(owner, name)):
                setattr(owner, name, original)  # else torch rebound it: its doing, kept
        self._saved.clear()
        for watch in self._watches:
            watch.release()
        self._watches.clear()


def _rebound_by_learner(owner: Any, name: str) -> bool:
    return not isinstance(owner, types.ModuleType) or set_by_learner(owner, name)
