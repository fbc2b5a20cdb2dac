"""Run a learner's code so that no mistake in it can crash or hang a checker.

Used by :mod:`autograd_helpers.checks`. :func:`run_learner_code` calls a function and returns
what happened (its value, or the exception with the learner's own line) instead of raising.
While learner code runs:

- what it prints is captured, up to a limit (a print in a loop cannot flood the notebook);
- a ``backward()`` (or ``autograd.grad``) nested inside a backward is counted and stopped at
  :data:`MAX_NESTED_BACKWARD` levels. Calling ``output.backward()`` inside a custom
  ``backward`` otherwise recurses without end: the engine moves to new threads past about 60
  levels and memory grows, with no clean error.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import sysconfig
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autograd_helpers.validate import check_option

__all__ = [
    "MAX_NESTED_BACKWARD",
    "LearnerError",
    "NestedBackwardError",
    "Outcome",
    "OutputLimitError",
    "nested_backward_limit",
    "run_learner_code",
]

MAX_NESTED_BACKWARD = 16
OUTPUT_LIMIT = 100_000  # characters a learner's code may print during one check

# Frames from these folders are library code; any other frame is the learner's.
_LIBRARY_DIRS = tuple(
    str(Path(folder).resolve())
    for folder in (
        str(Path(torch.__file__).parent),
        str(Path(__file__).parent),
        *(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")),
    )
)


class OutputLimitError(Exception):
    """Raised inside learner code that prints more than :data:`OUTPUT_LIMIT` characters."""


class NestedBackwardError(RecursionError):
    """Raised when backward passes nest deeper than :data:`MAX_NESTED_BACKWARD`."""


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
            if _is_learner_file(frame.filename):
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
        if not frames or not _is_learner_file(frames[-1].filename):
            return False
        last = frames[-1]
        line = last.line or linecache.getline(last.filename, last.lineno or 0)
        return not line or line.lstrip().startswith("raise")  # no source to read: trust it

    def describe(self) -> str:
        """``"TypeError: message"``, one line, long messages cut."""
        text = _first_line(str(self.exception))
        name = type(self.exception).__name__
        return f"{name}: {text}" if text else name


@dataclass(frozen=True)
class Outcome:
    """What :func:`run_learner_code` saw: ``value`` if the call returned, else ``error``."""

    value: Any = None
    error: LearnerError | None = None
    printed: str = ""


def _is_learner_file(filename: str) -> bool:
    if filename.startswith("<"):
        return not filename.startswith("<frozen")  # <string> (python -c), <stdin>: the learner's
    try:
        resolved = str(Path(filename).resolve())
    except OSError:
        return False
    return not resolved.startswith(_LIBRARY_DIRS)


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


_depth = 0  # backward passes currently running, counted by the guard below


@contextlib.contextmanager
def nested_backward_limit(max_depth: int = MAX_NESTED_BACKWARD) -> Iterator[None]:
    """Stop backward passes nested more than ``max_depth`` deep with a ``RecursionError``.

    Introduced in ``01_custom_function.ipynb``: a custom ``backward`` that calls
    ``.backward()`` on its own output starts a backward pass that calls it again, without
    end. Under this context manager the ``max_depth``-th nested call raises
    :class:`NestedBackwardError` instead. Any ``torch.autograd.backward``/``grad`` counts.

    Args:
        max_depth: nested backward passes allowed (1 to 50; a plain ``backward()`` is 1).

    Example::

        >>> with nested_backward_limit(4):
        ...     y.backward()  # doctest: +SKIP
    """
    check_option(
        "nested_backward_limit",
        "max_depth",
        max_depth,
        "an int in 1..50",
        lambda v: 1 <= v <= 50,
        integer=True,
    )
    original_backward, original_grad = torch.autograd.backward, torch.autograd.grad

    def counted(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            global _depth
            if _depth >= max_depth:
                raise NestedBackwardError(
                    f"backward passes nested {max_depth} deep: does your backward "
                    "call .backward() (or autograd.grad) on an output? That starts a new "
                    "backward pass, which calls your backward again, without end"
                )
            _depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                _depth -= 1

        return wrapper

    # Tensor.backward() looks torch.autograd.backward up on each call, so this catches both.
    torch.autograd.backward = counted(original_backward)
    torch.autograd.grad = counted(original_grad)
    try:
        yield
    finally:
        torch.autograd.backward, torch.autograd.grad = original_backward, original_grad


def run_learner_code(
    function: Callable[..., Any], *args: Any, output_limit: int = OUTPUT_LIMIT, **kwargs: Any
) -> Outcome:
    """Call ``function(*args, **kwargs)``, returning an :class:`Outcome` instead of raising.

    Whatever the call prints (stdout and stderr) is captured into ``Outcome.printed``. Any
    ``Exception`` (a ``RecursionError`` included) becomes ``Outcome.error``; ``KeyboardInterrupt``
    and ``SystemExit`` still propagate so that the learner can stop a cell.

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
    check_option(
        "run_learner_code",
        "output_limit",
        output_limit,
        "a positive int",
        lambda v: v >= 1,
        integer=True,
    )
    stream = _CappedText(output_limit)
    try:
        with (
            nested_backward_limit(),
            contextlib.redirect_stdout(stream),
            contextlib.redirect_stderr(stream),
        ):
            value = function(*args, **kwargs)
    except Exception as exc:
        return Outcome(error=LearnerError.from_exception(exc), printed=stream.getvalue())
    return Outcome(value=value, printed=stream.getvalue())
