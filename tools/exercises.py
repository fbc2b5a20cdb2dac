"""The course's exercises, read from the notebooks' cell metadata: the one registry.

An exercise's cells carry ``{"exercise": {"id": "01-tanh", "role": "solution"}}`` (one or
more solution cells) and ``{"exercise": {"id": "01-tanh", "role": "check"}}`` (its checker
cell, after them). Everything that needs the list of exercises reads it here: the progress
table (``tools.progress``), the answer banks' kernel (``tests/banks/kernel.py``), the site
(``tools/site_notebooks.py``), the benchmark of chapter 06's timing exercises and the tests
that hold the instructor notes to the course. Nothing else lists or counts exercises by
hand, so adding one means writing its cells and its answer bank (CONTRIBUTING.md, "Add an
exercise").

Metadata that cannot be meant is an :class:`ExerciseMetadataError` naming the notebook, the
cell and the problem: an unknown role, a check without a solution (or the reverse), an id
used twice, an id that does not start with its chapter's number.

Example::

    >>> from tools.exercises import course_exercises
    >>> first = course_exercises()[0]
    >>> first.id, first.key, first.chapter
    ('00-cube', '0.1', '00_start_here')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.course import NOTEBOOKS

__all__ = [
    "ROLES",
    "Exercise",
    "ExerciseMetadataError",
    "course_exercises",
    "exercises_of",
]

ROLES = ("solution", "check")
_EXERCISE_HEADING = re.compile(r"^#+\s+(.*\bexercise\b.*)$", re.IGNORECASE)
_ID = re.compile(r"^\d\d-[a-z0-9]+(?:-[a-z0-9]+)*$")


class ExerciseMetadataError(ValueError):
    """A notebook's ``exercise`` cell metadata that cannot be meant (names cell and problem)."""


@dataclass(frozen=True)
class Exercise:
    """One exercise of the course, and where its cells are in its notebook.

    Attributes:
        id: from the cells' metadata, e.g. ``"01-tanh"``; starts with the chapter's number.
        chapter: the notebook's stem, e.g. ``"01_custom_function"``.
        chapter_title: the notebook's ``# `` title, e.g. ``"01 · Custom autograd Functions"``.
        title: the heading above it, e.g. ``"Exercise 1: Tanh from its derivative"``.
        key: short, for the class table's columns: ``"1.1"`` is chapter 01's first.
        notebook: the notebook's path.
        solutions: the indices of its solution cells, in order.
        check: the index of its checker cell.
        between: the code cells between its first solution and its check that are neither
            (a learner runs them on the way: 06's table cell).
    """

    id: str
    chapter: str
    chapter_title: str
    title: str
    key: str
    notebook: Path
    solutions: tuple[int, ...]
    check: int
    between: tuple[int, ...] = ()


@dataclass
class _Found:
    """An exercise while its notebook is read: its title so far and its cells."""

    title: str
    solutions: list[int] = field(default_factory=list)
    check: int | None = None


def _marker(cell: Mapping[str, Any], where: str) -> tuple[str, str] | None:
    """The (id, role) a cell's metadata gives, validated on its own; ``None`` if none."""
    marker = cell.get("metadata", {}).get("exercise")
    if marker is None:
        return None
    if not isinstance(marker, Mapping):
        raise ExerciseMetadataError(f"{where}: 'exercise' metadata must be a mapping with id, role")
    exercise, role = marker.get("id"), marker.get("role")
    if not isinstance(exercise, str) or not _ID.match(exercise):
        raise ExerciseMetadataError(
            f"{where}: exercise id {exercise!r} is not like '01-tanh' (chapter number, "
            "a dash, lowercase words joined by dashes)"
        )
    if role not in ROLES:
        raise ExerciseMetadataError(
            f"{where}: exercise {exercise!r} has role {role!r}; a role is one of {ROLES}"
        )
    if cell.get("cell_type") != "code":
        raise ExerciseMetadataError(f"{where}: exercise {exercise!r} marks a non-code cell")
    return exercise, role


def _chapter_title(cells: Sequence[Mapping[str, Any]], stem: str) -> str:
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].replace("`", "").strip()
    return stem


def _read_cells(cells: Sequence[Mapping[str, Any]], name: str, stem: str) -> dict[str, _Found]:
    """Each exercise's cells in one notebook, in order of first appearance, validated."""
    found: dict[str, _Found] = {}
    heading = ""
    for index, cell in enumerate(cells):
        where = f"{name}, cell {index}"
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if match := _EXERCISE_HEADING.match(line):
                    heading = match.group(1).replace("`", "").strip()
        marker = _marker(cell, where)
        if marker is None:
            continue
        exercise, role = marker
        if stem[:2].isdigit() and exercise[:2] != stem[:2]:
            raise ExerciseMetadataError(
                f"{where}: exercise id {exercise!r} must start with its chapter's number "
                f"{stem[:2]!r}"
            )
        entry = found.get(exercise)
        if entry is not None and entry.check is not None:
            raise ExerciseMetadataError(
                f"{where}: duplicate exercise id {exercise!r}: its check is cell "
                f"{entry.check} already; give each exercise its own id"
            )
        if role == "solution":
            found.setdefault(exercise, _Found(heading or exercise)).solutions.append(index)
        elif entry is None:
            raise ExerciseMetadataError(
                f"{where}: the check of {exercise!r} comes without a solution cell before it; "
                f"mark the exercise's cell(s) with role 'solution' and this id"
            )
        else:
            entry.check = index
    for exercise, entry in found.items():
        if entry.check is None:
            raise ExerciseMetadataError(
                f"{name}, cell {entry.solutions[0]}: exercise {exercise!r} has no check cell "
                "after its solution; mark its checker cell with role 'check' and this id"
            )
    return found


def exercises_of(nb: Mapping[str, Any], notebook: Path) -> list[Exercise]:
    """The exercises of one notebook (a JSON dict or an ``nbformat`` node), in order.

    Args:
        nb: the notebook as read; its cells' ``exercise`` metadata say where exercises are.
        notebook: its path, for the exercises' ``notebook`` and the errors' messages (the
            stem's first two characters are the chapter's number).

    Raises:
        ExerciseMetadataError: naming the notebook, the cell and what is wrong.
    """
    cells: Sequence[Mapping[str, Any]] = nb["cells"]
    stem = notebook.stem
    found = _read_cells(cells, notebook.name, stem)
    title = _chapter_title(cells, stem)
    exercises = []
    for number, (exercise, entry) in enumerate(found.items(), start=1):
        assert entry.check is not None  # _read_cells made sure
        between = tuple(
            index
            for index in range(entry.solutions[0], entry.check)
            if cells[index].get("cell_type") == "code" and index not in entry.solutions
        )
        key = f"{int(stem[:2])}.{number}" if stem[:2].isdigit() else ""
        exercises.append(
            Exercise(
                exercise,
                stem,
                title,
                entry.title,
                key,
                notebook,
                tuple(entry.solutions),
                entry.check,
                between,
            )
        )
    return exercises


def course_exercises(notebooks: Sequence[Path] | None = None) -> list[Exercise]:
    """Every exercise of the course notebooks (default: ``notebooks/*.ipynb``), in order.

    Raises:
        ExerciseMetadataError: for metadata that cannot be meant, and for an id that two
            notebooks use.
    """
    exercises: list[Exercise] = []
    for path in sorted(notebooks or NOTEBOOKS.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for exercise in exercises_of(nb, path):
            twin = next((e for e in exercises if e.id == exercise.id), None)
            if twin is not None:
                raise ExerciseMetadataError(
                    f"{path.name}, cell {exercise.solutions[0]}: duplicate exercise id "
                    f"{exercise.id!r}, already used in {twin.notebook.name}"
                )
            exercises.append(exercise)
    return exercises
