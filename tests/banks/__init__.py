"""Answer banks: every exercise worked as learners work it, wrong and right.

Each exercise has a module here named after its id (``ex_01_tanh.py`` for ``01-tanh``),
holding ``BANK = bank(id, wrong(...), ..., right(...), ...)``: at least twelve wrong answers
spread over the categories below, each with the phrase its verdict must contain, and at
least five right answers written differently from the solution, each of which must pass. ``tests/test_bank_<chapter>.py``
runs them in a real kernel, in the state the student notebook has after Run All: the
answer replaces the exercise cell(s), then the checker cell runs, and nothing the checker
was handed may change (``tests/banks/kernel.py``).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from textwrap import dedent

__all__ = ["CATEGORIES", "Answer", "bank", "banks_of", "right", "wrong"]

# The kinds of wrong answer learners write (CONTRIBUTING.md, "Answer banks").
CATEGORIES = (
    "wrong formula",
    "right only at the example",
    "symptom fix",
    "side effect",
    "bypassed mechanism",
    "wrong type or shape",
)


@dataclass(frozen=True)
class Answer:
    """One answer to one exercise.

    Attributes:
        category: one of :data:`CATEGORIES` for a wrong answer, ``"right"`` for a right one.
        label: what the answer does, in a few words (the test's id).
        cells: the source of each solution cell of the exercise, as the learner wrote it.
        phrase: a phrase the verdict must contain (a wrong answer's fitting hint).
    """

    category: str
    label: str
    cells: tuple[str, ...]
    phrase: str = ""

    @property
    def is_right(self) -> bool:
        return self.category == "right"


def _cells(source: str | tuple[str, ...]) -> tuple[str, ...]:
    sources = (source,) if isinstance(source, str) else source
    return tuple(dedent(s).strip("\n") + "\n" for s in sources)


def wrong(category: str, label: str, source: str | tuple[str, ...], phrase: str) -> Answer:
    """A wrong answer: its verdict must fail and contain ``phrase``."""
    if category not in CATEGORIES:
        raise ValueError(f"wrong(): category must be one of {CATEGORIES}, got {category!r}")
    if not phrase:
        raise ValueError("wrong(): give the phrase the verdict must contain")
    return Answer(category, label, _cells(source), phrase)


def right(label: str, source: str | tuple[str, ...], phrase: str = "") -> Answer:
    """A right answer, written differently from the solution: its verdict must pass."""
    return Answer("right", label, _cells(source), phrase)


@dataclass(frozen=True)
class Bank:
    """The answers to one exercise."""

    exercise: str  # the id in the exercise cells' metadata, e.g. "01-tanh"
    answers: tuple[Answer, ...]

    @property
    def chapter(self) -> str:
        return self.exercise[:2]


def bank(exercise: str, *answers: Answer) -> Bank:
    return Bank(exercise, answers)


def banks_of(chapter: str) -> list[Bank]:
    """Every bank of a chapter (``"01"``), from the modules ``ex_<chapter>_*.py`` here."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith(f"ex_{chapter}_"):
            found.append(importlib.import_module(f"{__name__}.{info.name}").BANK)
    return sorted(found, key=lambda b: b.exercise)
