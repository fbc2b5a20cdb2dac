"""Exercises that ask for the long way round: notice a learner who took the library's shortcut.

While :func:`shortcuts_refused` is active, each named library function (say
``torch.autograd.functional.jacobian``) is replaced by a stub that raises
:class:`ShortcutTakenError`; the checker turns that into "write it yourself" feedback.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

__all__ = ["ShortcutTakenError", "shortcuts_refused"]


class ShortcutTakenError(Exception):
    """The learner's code called a function the exercise asks them to write themselves."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is what this exercise asks you to write yourself")
        self.name = name


@contextlib.contextmanager
def shortcuts_refused(*names: str) -> Iterator[None]:
    """Replace each dotted ``module.function`` name with a stub raising :class:`ShortcutTakenError`.

    Code that looks the function up when it runs (``torch.func.jacrev(f)``) meets the stub;
    everything is restored on exit.
    """
    originals: list[tuple[Any, str, Any]] = []

    def stub(name: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise ShortcutTakenError(name)

        return refused

    try:
        for name in names:
            module_name, attribute = name.rsplit(".", 1)
            owner = importlib.import_module(module_name)
            originals.append((owner, attribute, getattr(owner, attribute)))
            setattr(owner, attribute, stub(name))
        yield
    finally:
        for owner, attribute, original in reversed(originals):
            setattr(owner, attribute, original)
