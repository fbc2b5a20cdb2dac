"""Data a Function keeps as Python objects or in files, not as tensors (``check_saved_bytes``).

``_routes`` finds tensors, arrays and lists of numbers by name; a learner can keep
an intermediate in other shapes all the same: the text of its numbers
(``str(t.tolist())``), a dict of them, a ``torch.save`` into an ``io.BytesIO``, a
``SpooledTemporaryFile`` or an open file, the bytes in an ``mmap``, or a file written in
forward and read back in backward. :func:`stored_bytes` sizes the first kinds where a
route reaches them, :func:`digest` tells whether one that existed before forward was
rewritten in place (a global ``BytesIO`` truncated and written again keeps its size), and
:class:`FilesWritten` watches forward for files it writes by path (``torch.save``,
``open``, ``numpy.save``) and removes the ones it created.
"""

from __future__ import annotations

import builtins
import io
import mmap
import os
import sys
import tempfile
from collections.abc import Callable
from numbers import Number
from types import TracebackType
from typing import Any

import numpy as np
import torch

from autograd_helpers.checks._contain.patched import Patched

__all__ = ["FilesWritten", "digest", "storage_kind", "stored_bytes"]

_TEXT = 1024  # characters: a str this long kept by forward is data, not a name or a flag
_NUMBERS = 16


def _file_bytes(value: io.IOBase) -> int:
    inner = getattr(value, "_file", None)  # a SpooledTemporaryFile: in memory, or a file
    if isinstance(inner, io.IOBase) and inner is not value:
        return _file_bytes(inner) or 1
    if isinstance(value, io.BytesIO | io.StringIO):
        return sys.getsizeof(value)
    try:
        return int(os.fstat(value.fileno()).st_size) or 1
    except Exception:  # closed, or no descriptor: still a file kept open
        return 1


def stored_bytes(value: object) -> int:
    """The bytes ``value`` keeps as data beyond tensors and lists (0 for anything else).

    A ``str`` of at least 1,024 characters, a dict of at least 16 numbers, an
    ``io.BytesIO``, a file object (its size on disk, at least 1), an ``mmap``.

    Example::

        >>> stored_bytes(str([0.5] * 1000)) > 4000, stored_bytes("lr")
        (True, 0)
        >>> stored_bytes(dict(enumerate([0.5] * 100))) > 800
        True
    """
    if isinstance(value, mmap.mmap):
        try:
            return len(value) or 1
        except ValueError:  # closed
            return 0
    if isinstance(value, io.IOBase):
        return _file_bytes(value)
    if isinstance(value, str):
        return sys.getsizeof(value) if len(value) >= _TEXT else 0
    if isinstance(value, dict) and len(value) >= _NUMBERS:
        items = [*value.keys(), *value.values()]
        if all(isinstance(i, Number) and not isinstance(i, bool) for i in items):
            return sys.getsizeof(value) + sum(sys.getsizeof(i) for i in items)
    return 0


def storage_kind(value: object) -> str:
    """How a verdict names what ``value`` keeps: ``"numbers kept as a Python str"``."""
    if isinstance(value, mmap.mmap):
        return "bytes kept in an `mmap`"
    if isinstance(value, io.BytesIO):
        return "bytes kept in an `io.BytesIO`"
    if isinstance(value, io.IOBase):
        return f"bytes kept in a file object ({type(value).__name__})"
    return f"numbers kept as a Python {type(value).__name__}"


def digest(value: object) -> object:
    """What ``value`` holds now, to compare after forward (a rewrite of the same size)."""
    try:
        if isinstance(value, io.BytesIO):
            return value.getvalue()
        if isinstance(value, mmap.mmap):
            return value[:]
        if isinstance(value, io.IOBase):
            inner = getattr(value, "_file", None)
            if isinstance(inner, io.IOBase) and inner is not value:
                return digest(inner)
            stat = os.fstat(value.fileno())
            return (stat.st_size, stat.st_mtime_ns)
        return repr(value)
    except Exception:  # closed, or unreadable: compared by size alone
        return None


def _path(target: object) -> str | None:
    if isinstance(target, str | bytes | os.PathLike):
        try:
            return os.path.abspath(os.fsdecode(target))
        except Exception:
            return None
    return None


class FilesWritten:
    """Within the block, note each path written through ``torch.save``, ``numpy.save``,
    ``numpy.savez`` or ``open`` (any writing mode); :meth:`remove_created` deletes those
    that did not exist before (the checker's run made them)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self._existed: dict[str, bool] = {}
        self._patched = Patched()

    def _note(self, target: object) -> None:
        path = _path(target)
        if path is not None and path not in self._existed:
            self._existed[path] = os.path.exists(path)
            self.paths.append(path)

    def _wrap(self, owner: Any, name: str, writes: Callable[..., object | None]) -> None:
        self._patched.wrap(owner, name, lambda *args, **kwargs: self._note(writes(*args, **kwargs)))

    def __enter__(self) -> FilesWritten:
        def by_open(file: object = None, mode: str = "r", *args: Any, **kwargs: Any) -> object:
            mode = str(kwargs.get("mode", mode))
            return file if any(c in mode for c in "wax+") else None

        self._wrap(torch, "save", lambda obj=None, f=None, *a, **k: k.get("f", f))
        self._wrap(np, "save", lambda file=None, *a, **k: k.get("file", file))
        self._wrap(np, "savez", lambda file=None, *a, **k: k.get("file", file))
        self._wrap(builtins, "open", by_open)
        self._wrap(io, "open", by_open)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._patched.restore()

    def remove_created(self) -> None:
        for path in self.paths:
            if not self._existed.get(path, True) and os.path.isfile(path):
                try:
                    os.remove(path)
                except OSError:
                    continue

    @staticmethod
    def shown(path: str) -> str:
        """The path as a verdict says it: relative to the temp dir or the working dir."""
        for base, said in ((tempfile.gettempdir(), "<tempdir>"), (os.getcwd(), ".")):
            if path.startswith(base + os.sep):
                return f"{said}/{os.path.relpath(path, base)}"
        return os.path.basename(path)
