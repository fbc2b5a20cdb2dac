"""NumPy's global random state, read and put back in full.

Used by :class:`~autograd_helpers._common.globals.GlobalState`, which takes the random states
before each call into learner code and puts them back after it. Only the legacy
``RandomState``'s own ``get_state``/``set_state`` see all of it: a cached Gaussian
(``np.random.randn`` draws two normals and keeps one) lies outside the generator's words, and
``np.random.set_state`` can add one without moving them, so a cheaper fingerprint of the words
alone would miss it (an audit found learner code that replays a saved state doing so). The
state is put back only where it differs, which spares the ``set_state`` for the many calls
that draw nothing from NumPy.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["NumpyRandom", "numpy_random_state"]


@dataclass(frozen=True)
class NumpyRandom:
    """NumPy's global state as ``np.random.get_state()`` gives it."""

    state: Any  # the legacy tuple ('MT19937', key, pos, has_gauss, cached_gaussian)

    def moved(self) -> bool:
        """Does NumPy's global state now differ from :attr:`state`?"""
        return not _same(_global_generator().get_state(), self.state)

    def restore(self) -> None:
        """Put :attr:`state` back, unless it is still there."""
        if self.moved():
            _global_generator().set_state(self.state)


def _global_generator() -> Any:
    """The ``RandomState`` behind ``np.random.rand``, ``seed``, ``get_state``..."""
    return sys.modules["numpy"].random.mtrand._rand


def _same(a: Any, b: Any) -> bool:
    numpy = sys.modules["numpy"]
    return bool(a[0] == b[0] and a[2:] == b[2:] and numpy.array_equal(a[1], b[1]))


def numpy_random_state() -> NumpyRandom | None:
    """NumPy's global random state (``None`` when NumPy was never imported: not here either).

    Example::

        >>> import numpy as np
        >>> before = numpy_random_state()
        >>> _ = np.random.rand(3)
        >>> before.moved()
        True
        >>> before.restore()
        >>> before.moved()
        False
    """
    if "numpy" not in sys.modules:
        return None
    return NumpyRandom(_global_generator().get_state())
