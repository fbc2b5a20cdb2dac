"""Small parts: no module over 300 lines, no function over 60 (its docstring aside).

In the library and the course's tools; split by idea, not by size (CONTRIBUTING.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.course import REPO

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60
SOURCES = sorted(
    path for folder in ("autograd_helpers", "tools") for path in (REPO / folder).rglob("*.py")
)


def _function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines, less its docstring's."""
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if ast.get_docstring(node, clean=False) is not None and first.end_lineno is not None:
        lines -= first.end_lineno - first.lineno + 1
    return lines


def long_parts(path: Path) -> list[str]:
    """What in ``path`` is over the limits, one line each."""
    text = path.read_text(encoding="utf-8")
    found = []
    if (count := len(text.splitlines())) > MAX_MODULE_LINES:
        found.append(f"the module has {count} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if (lines := _function_lines(node)) > MAX_FUNCTION_LINES:
            found.append(
                f"{node.name}() at line {node.lineno} has {lines} lines "
                f"(limit {MAX_FUNCTION_LINES}, docstring aside)"
            )
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_modules_and_functions_are_small(path: Path) -> None:
    found = long_parts(path)
    assert not found, f"{path.relative_to(REPO)}: " + "; ".join(found) + ": split it by idea"


def test_the_measure_sees_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(60))  # with its def line: 61
    path = tmp_path / "long.py"
    path.write_text(f'def f():\n    """Doc."""\n{body}\n' + "\n" * 240, encoding="utf-8")
    found = long_parts(path)
    assert len(found) == 2 and "f() at line 1 has 61 lines" in found[1], found
    path.write_text(f'def f():\n    """Doc\n    more."""\n{body[: body.rindex(chr(10))]}\n')
    assert long_parts(path) == []
