"""The student notebooks, as a learner first opens them, run top to bottom without an error.

Every untouched exercise must make its checker say "not implemented yet" instead of raising.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools.course import REPO
from tools.kernels import execute_notebook
from tools.student import build_student_notebook

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
pytestmark = pytest.mark.slow


def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        parts.append(str(output.get("data", {}).get("text/plain", "")))
        if output["output_type"] == "error":
            parts.append(f"{output['ename']}: {output['evalue']}")
    return "\n".join(parts)


@pytest.mark.parametrize("reference", NOTEBOOKS, ids=lambda p: p.name)
def test_student_notebook_runs_and_says_not_implemented(reference, tmp_path):
    student = tmp_path / reference.name
    build_student_notebook(reference, student)
    executed = execute_notebook(student)  # raises on any error in an untagged cell

    cells = executed.cells
    exercises = [
        i for i, c in enumerate(reference_cells(reference)) if "### BEGIN SOLUTION" in c.source
    ]
    assert len(exercises) >= 1, f"{reference.name} has no exercise"
    for index in exercises:
        assert "YOUR CODE HERE" in cells[index].source
        checker = next(c for c in cells[index + 1 :] if c.cell_type == "code")
        assert "not implemented yet" in _text(checker).lower(), (
            f"{reference.name}: the checker after exercise cell {index} does not say "
            f"'not implemented yet'; it printed:\n{_text(checker)}"
        )


def reference_cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells
