"""Committed notebooks look like one clean top-to-bottom run of `make outputs`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.course import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# A path that only exists on the machine that produced the output. Jupyter's per-cell temp
# files (ipykernel_NNN/NNN.py) are not: they are sanitized by nbval and mean "your cell".
MACHINE_PATH = re.compile(
    r"(/(home|root|Users|work|opt|usr|tmp|var)/(?!ipykernel_)\S+|site-packages|[A-Z]:\\\\)"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _output_texts(output: dict) -> list[str]:
    texts = []
    if output["output_type"] == "stream":
        texts.append("".join(output["text"]))
    if output["output_type"] == "error":
        texts += [output["evalue"], *output["traceback"]]
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/") or mime == "application/json":
            texts.append(value if isinstance(value, str) else "".join(value))
    return [ANSI.sub("", t) for t in texts]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_were_executed_once_in_order(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert None not in counts, f"{path.name}: unexecuted code cells; run `make outputs`"
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: execution counts {counts} are not 1..{len(code)}: the notebook was not "
        "run top to bottom in a fresh kernel; run `make outputs`"
    )
    for cell in code:
        assert "".join(cell["source"]).strip(), f"{path.name}: empty code cell"
        for output in cell["outputs"]:
            if output["output_type"] == "execute_result":
                assert output["execution_count"] == cell["execution_count"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_relies_on_a_trailing_semicolon(path):
    # nbval runs cells with store_history=False, and then IPython ignores a final `;`
    # (nbval#194, ipython#14162): the value is displayed and strict comparison fails.
    for index, cell in enumerate(_cells(path)):
        lines = "".join(cell["source"]).rstrip().splitlines()
        if cell["cell_type"] == "code" and lines and lines[-1].split("#")[0].rstrip().endswith(";"):
            pytest.fail(
                f"{path.name}, cell {index}: ends with ';' to hide a value, which nbval ignores; "
                "assign it (`_ = ...`) or end a plot with `plt.show()`"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_show_no_machine_paths(path):
    for index, cell in enumerate(_cells(path)):
        for output in cell.get("outputs", []):
            for text in _output_texts(output):
                match = MACHINE_PATH.search(text)
                assert match is None, f"{path.name}, cell {index}: output shows {match.group()!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_only_tagged_cells_raise_and_tagged_cells_do_raise(path):
    for index, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        raised = any(o["output_type"] == "error" for o in cell["outputs"])
        tagged = "raises-exception" in cell["metadata"].get("tags", [])
        assert raised == tagged, f"{path.name}, cell {index}: " + (
            "raises but is not tagged raises-exception"
            if raised
            else "is tagged raises-exception but did not raise"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_shape(path):
    cells = _cells(path)
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown" and first.startswith("# "), "title first"
    for heading in ("What you will learn", "Prerequisites", "Time"):
        assert heading in first, f"{path.name}: the title cell should say {heading!r}"
    code = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    assert "setup_notebook(" in code, f"{path.name}: the first code cell calls setup_notebook()"
    assert any("## Summary" in "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_valid_nbformat_with_unique_cell_ids(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # raises on a schema violation
    ids = [cell.id for cell in nb.cells]
    assert len(ids) == len(set(ids)), f"{path.name}: duplicate cell ids"


VERDICT_ICONS = ("✅", "❌", "📝")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_checker_passes_on_the_reference_solution(path):
    # A checker that fails on the course's own solution blames learners for the course's
    # mistake (a wrong reference, a bad option): the recorded verdict must be a pass.
    cells = _cells(path)
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or "### BEGIN SOLUTION" not in "".join(cell["source"]):
            continue
        verdict = next(
            (
                (later, text)
                for later, after in enumerate(cells[index:], start=index)
                if after["cell_type"] == "code"
                for output in after["outputs"]
                for text in _output_texts(output)
                if any(icon in text for icon in VERDICT_ICONS)
            ),
            None,
        )
        assert verdict is not None, f"{path.name}, cell {index}: no checker after the solution"
        later, text = verdict
        assert "✅" in text and "❌" not in text and "📝" not in text, (
            f"{path.name}, cell {later}: the checker does not pass the reference solution:\n{text}"
        )


PRIVATE_NAME = re.compile(r"\b(?:ah|autograd_helpers)(?:\.\w+)*\._\w+")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_uses_a_private_name_of_the_library(path):
    # What a notebook shows, learners copy: it must be public (no `ah.wrap._Thing`).
    for index, cell in enumerate(_cells(path)):
        source = "".join(cell["source"])
        match = PRIVATE_NAME.search(source)
        assert match is None, f"{path.name}, cell {index}: uses the private {match.group()!r}"


def test_each_chapters_time_is_the_readmes():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        row = re.search(rf"^\| {path.name[:2]} \|.*\| (\d+) min \|$", readme, re.MULTILINE)
        assert row, f"README's chapter map has no row for {path.name}"
        title = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
        stated = re.search(r"\*\*Time:\*\* about (\d+) minutes", title)
        assert stated and stated.group(1) == row.group(1), (
            f"{path.name} says {stated and stated.group(1)} minutes, the README {row.group(1)}: "
            "change the notebook's Time, README's chapter map and the chapter's time plan in "
            "deploy/INSTRUCTOR-NOTES.md together"
        )
