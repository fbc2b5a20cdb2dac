"""NumPy's global random state, read in full only when it has moved.

Used by :class:`~autograd_helpers._common.globals.GlobalState`, which takes the random states
before each call into learner code and puts them back after it. ``np.random.get_state()``
and ``set_state`` each cost about 90 µs (they copy the Mersenne Twister's 624 words through
Python), so a checker that calls learner code 60 times spent more on NumPy's state than on
anything else it snapshots, though learner code rarely draws from NumPy at all.

The generator's words and position sit in one C struct, which ``ctypes`` reads as 2,500 bytes
in about 1 µs: an exact fingerprint, not a digest. The full state is read again only when
those bytes differ from the last full reading (then it is also the new last one), and put back
only when they differ from the state taken. One part of the legacy state lies outside the
struct: a cached Gaussian (``np.random.randn`` draws two normals and keeps one, and the next
``randn`` uses it without moving the words). So a state holding a cached Gaussian is always
read and put back in full; a state without one can gain one only by drawing, which moves the
words (only ``np.random.set_state`` with the very same words could add one unseen).
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["NumpyRandom", "numpy_random_state"]

_MT_STATE_BYTES = 624 * 4 + 4  # mt19937_state: uint32_t key[624]; int pos


@dataclass(frozen=True)
class NumpyRandom:
    """NumPy's global state as ``np.random.get_state()`` gives it, and its fingerprint.

    ``fingerprint`` is ``None`` where it cannot be read (a bit generator other than
    MT19937, a NumPy without ``ctypes`` access): the state is then always read and put back in
    full, as before.
    """

    state: Any  # the legacy tuple ('MT19937', key, pos, has_gauss, cached_gaussian)
    fingerprint: bytes | None
    generator: Any  # the bit generator whose struct the fingerprint reads

    def moved(self) -> bool:
        """Does NumPy's global state now differ from :attr:`state`?"""
        if self.fingerprint is None or self.state[3]:  # a cached Gaussian: compare in full
            return not _same(_global_generator().get_state(), self.state)
        return _fingerprint(self.generator) != self.fingerprint

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


def _fingerprint(generator: Any) -> bytes | None:
    if type(generator).__name__ != "MT19937":
        return None
    try:
        address = generator.ctypes.state_address
    except (AttributeError, ImportError):
        return None
    return ctypes.string_at(address, _MT_STATE_BYTES)


_last: list[NumpyRandom] = []  # the last full reading, reused while its fingerprint holds


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
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    legacy = _global_generator()
    generator = legacy._bit_generator
    fingerprint = _fingerprint(generator)
    if fingerprint is not None and _last:
        last = _last[0]
        if last.generator is generator and last.fingerprint == fingerprint and not last.state[3]:
            return last
    found = NumpyRandom(legacy.get_state(), fingerprint, generator)
    _last[:] = [found]
    return found
