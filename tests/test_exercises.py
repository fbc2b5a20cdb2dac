"""tools.exercises: the course's exercises read from the notebooks' cell metadata, and
metadata that cannot be meant refused with the notebook, the cell and the problem named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.exercises import ExerciseMetadataError, course_exercises, exercises_of

CHAPTER = Path("01_demo.ipynb")


def markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text: str = "x = 1", exercise: str | None = None, role: str = "") -> dict[str, Any]:
    metadata = {"exercise": {"id": exercise, "role": role}} if exercise else {}
    return {"cell_type": "code", "metadata": metadata, "source": text, "outputs": []}


def notebook(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": [markdown("# 01 · A demo chapter"), *cells]}


def test_an_exercise_has_its_cells_by_role_title_and_key():
    nb = notebook(
        markdown("### Exercise 1: the first"),
        code("a", "01-first", "solution"),
        code("b"),  # run on the way
        code("c", "01-first", "solution"),
        code("check", "01-first", "check"),
        markdown("### Exercise 2: the second"),
        code("d", "01-second", "solution"),
        code("check", "01-second", "check"),
    )
    first, second = exercises_of(nb, CHAPTER)
    assert (first.id, first.chapter, first.chapter_title) == (
        "01-first",
        "01_demo",
        "01 · A demo chapter",
    )
    assert (first.title, first.key, first.notebook) == ("Exercise 1: the first", "1.1", CHAPTER)
    assert (first.solutions, first.between, first.check) == ((2, 4), (3,), 5)
    assert (second.title, second.key, second.solutions, second.check) == (
        "Exercise 2: the second",
        "1.2",
        (7,),
        8,
    )


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        (
            [code("x", "01-first", "check")],
            "cell 1: the check of '01-first' comes without a solution cell before it",
        ),
        (
            [code("x", "01-first", "solution"), code("y", "01-first", "checker")],
            "cell 2: exercise '01-first' has role 'checker'; a role is one of",
        ),
        (
            [code("x", "02-first", "solution"), code("y", "02-first", "check")],
            "cell 1: exercise id '02-first' must start with its chapter's number '01'",
        ),
        (
            [
                code("x", "01-first", "solution"),
                code("y", "01-first", "check"),
                code("z", "01-first", "solution"),
            ],
            "cell 3: duplicate exercise id '01-first': its check is cell 2 already",
        ),
        (
            [code("x", "01-first", "solution")],
            "cell 1: exercise '01-first' has no check cell after its solution",
        ),
        (
            [code("x", "01 First", "solution")],
            "cell 1: exercise id '01 First' is not like '01-tanh'",
        ),
        (
            [markdown("text") | {"metadata": {"exercise": {"id": "01-a", "role": "check"}}}],
            "cell 1: exercise '01-a' marks a non-code cell",
        ),
    ],
    ids=[
        "check without solution",
        "unknown role",
        "id of another chapter",
        "duplicate id",
        "solution without check",
        "malformed id",
        "markdown cell",
    ],
)
def test_metadata_that_cannot_be_meant_is_an_error_naming_notebook_and_cell(cells, problem):
    with pytest.raises(ExerciseMetadataError) as raised:
        exercises_of(notebook(*cells), CHAPTER)
    assert str(raised.value).startswith(f"01_demo.ipynb, {problem}"), str(raised.value)


def test_an_id_used_in_two_notebooks_is_an_error(tmp_path):
    for name in ("01_one.ipynb", "01_two.ipynb"):
        nb = notebook(code("x", "01-same", "solution"), code("y", "01-same", "check"))
        (tmp_path / name).write_text(json.dumps(nb))
    with pytest.raises(
        ExerciseMetadataError,
        match=r"01_two.ipynb, cell 1: duplicate exercise id "
        r"'01-same', already used in 01_one.ipynb",
    ):
        course_exercises(sorted(tmp_path.glob("*.ipynb")))


def test_the_course_reads_without_errors_and_every_exercise_is_whole():
    exercises = course_exercises()
    assert exercises, "no exercise found in notebooks/"
    for e in exercises:
        assert e.id.startswith(e.chapter[:2] + "-")
        assert e.solutions and max(e.solutions) < e.check, e
        assert e.notebook.stem == e.chapter
