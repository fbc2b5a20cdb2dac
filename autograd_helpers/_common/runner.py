"""Run a learner's code so that no mistake in it can crash or hang a checker.

Used by :mod:`autograd_helpers.checks`. :func:`run_learner_code` calls a function and returns
what happened (its value, or the exception with the learner's own line) instead of raising.
While learner code runs:

- what it prints is captured, up to a limit (a print in a loop cannot flood the notebook);
- backward passes nested inside a backward are stopped at
  :data:`~autograd_helpers.guards.MAX_NESTED_BACKWARD` levels
  (:func:`~autograd_helpers.guards.nested_backward_limit`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import linecache
import re
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autograd_helpers._common.globals import GlobalState
from autograd_helpers._common.nesting import nested_backward_limit
from autograd_helpers._common.validate import require_option

__all__ = ["LearnerError", "Outcome", "OutputLimitError", "is_learner_file", "run_learner_code"]

OUTPUT_LIMIT = 100_000  # characters a learner's code may print during one check

# Frames from these folders are library code; any other frame is the learner's.
_LIBRARY_DIRS = tuple(
    Path(folder).resolve()
    for folder in (
        str(Path(torch.__file__).parent),
        str(Path(__file__).parent.parent),  # autograd_helpers itself
        *(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")),
    )
)
# `raise NotImplementedError`, anywhere on a line (`def backward(ctx, g): raise ...` too).
_STUB_LINE = re.compile(r"(^|[:;]\s*)raise\s+NotImplementedError\b")


class OutputLimitError(Exception):
    """Raised inside learner code that prints more than :data:`OUTPUT_LIMIT` characters."""


@dataclass(frozen=True)
class LearnerError:
    """An exception raised while learner code ran, located in the learner's own code.

    ``function``, ``line`` and ``code`` describe the innermost frame of learner code on the
    traceback (``""``, ``None`` and ``""`` when there is none).
    """

    exception: BaseException
    function: str = ""
    line: int | None = None
    code: str = ""

    @classmethod
    def from_exception(cls, exception: BaseException) -> LearnerError:
        for frame in reversed(traceback.extract_tb(exception.__traceback__)):
            if is_learner_file(frame.filename):
                code = frame.line or linecache.getline(frame.filename, frame.lineno or 0)
                return cls(exception, frame.name, frame.lineno, code.strip())
        return cls(exception)

    @property
    def where(self) -> str:
        """``"in backward, line 9: return grad * 3 * x**2"``, or ``""``."""
        if not self.function:
            return ""
        where = f"in {self.function}, line {self.line}"
        return f"{where}: {self.code}" if self.code else where

    @property
    def is_stub(self) -> bool:
        """True for an exercise's ``raise NotImplementedError``, written in the learner's code.

        A ``NotImplementedError`` from inside torch (an op a device lacks) is a real error.
        """
        if not isinstance(self.exception, NotImplementedError):
            return False
        frames = traceback.extract_tb(self.exception.__traceback__)
        if not frames or not is_learner_file(frames[-1].filename):
            return False
        last = frames[-1]
        line = last.line or linecache.getline(last.filename, last.lineno or 0)
        return not line or bool(_STUB_LINE.search(line.strip()))  # no source: trust it

    def describe(self) -> str:
        """``"TypeError: message"``, one line, long messages cut."""
        text = _first_line(str(self.exception))
        name = type(self.exception).__name__
        return f"{name}: {text}" if text else name


@dataclass(frozen=True)
class Outcome:
    """What :func:`run_learner_code` saw: ``value`` if the call returned, else ``error``.

    ``side_effects`` names, in plain words, each global setting the call would have left
    changed (grad mode, anomaly mode, the default dtype, the thread count); the runner has
    already put them back.
    """

    value: Any = None
    error: LearnerError | None = None
    printed: str = ""
    side_effects: tuple[str, ...] = ()


@functools.lru_cache(maxsize=4096)
def is_learner_file(filename: str) -> bool:
    """Is ``filename`` the learner's (a notebook cell, a script), not the library's (torch,
    Python's own, installed packages, ``autograd_helpers``)? Cached: profile functions and
    the containment's attribute watch ask it for every frame they see."""
    if filename.startswith("<"):
        return not filename.startswith("<frozen")  # <string> (python -c), <stdin>: the learner's
    try:
        resolved = Path(filename).resolve()
    except OSError:
        return False
    return not any(resolved.is_relative_to(folder) for folder in _LIBRARY_DIRS)


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _CappedText(io.StringIO):
    """A text stream that raises :class:`OutputLimitError` once ``limit`` is passed."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.size = 0

    def write(self, text: str) -> int:
        self.size += len(text)
        if self.size > self.limit:
            raise OutputLimitError(
                f"your code printed more than {self.limit:,} characters, so the checker "
                "stopped it; remove the print (or print less) and run the check again"
            )
        return super().write(text)


def run_learner_code(
    function: Callable[..., Any], *args: Any, output_limit: int = OUTPUT_LIMIT, **kwargs: Any
) -> Outcome:
    """Call ``function(*args, **kwargs)``, returning an :class:`Outcome` instead of raising.

    Whatever the call prints (stdout and stderr) is captured into ``Outcome.printed``. Any
    ``Exception`` (a ``RecursionError`` included) becomes ``Outcome.error``; ``KeyboardInterrupt``
    and ``SystemExit`` still propagate so that the learner can stop a cell. torch's global
    settings and random state are put back afterwards (:class:`GlobalState`); what the call
    would have left changed is in ``Outcome.side_effects``.

    Args:
        function: the learner's code to call.
        output_limit: characters the call may print before it is stopped.

    Example::

        >>> outcome = run_learner_code(lambda: 1 / 0)
        >>> outcome.error.describe()
        'ZeroDivisionError: division by zero'
    """
    if not callable(function):
        raise TypeError(
            f"run_learner_code(): function must be callable, got {type(function).__name__}"
        )
    require_option(
        "run_learner_code",
        "output_limit",
        output_limit,
        "a positive int",
        lambda v: v >= 1,
        integer=True,
    )
    stream = _CappedText(output_limit)
    before = GlobalState.take()
    try:
        with (
            nested_backward_limit(),
            contextlib.redirect_stdout(stream),
            contextlib.redirect_stderr(stream),
        ):
            value = function(*args, **kwargs)
    except Exception as exc:
        error = LearnerError.from_exception(exc)
        return Outcome(error=error, printed=stream.getvalue(), side_effects=_undo(before))
    return Outcome(value=value, printed=stream.getvalue(), side_effects=_undo(before))


def _undo(before: GlobalState) -> tuple[str, ...]:
    return tuple(before.undo())
