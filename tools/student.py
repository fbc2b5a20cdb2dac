"""``make student``: build the learner's copy of each notebook into ``build/student/``.

In a reference notebook an exercise's solution sits between two marker lines::

    ### BEGIN SOLUTION
    return grad_output * 3 * x**2
    ### END SOLUTION

The student copy replaces each span with a stub that keeps the cell runnable, so that an
untouched exercise makes its checker say "not implemented yet" instead of crashing:

- inside a function: ``# YOUR CODE HERE`` and ``raise NotImplementedError(...)``;
- at the top level of a cell: every name the solution defines is set to ``...``
  (``answer = ...``), which checkers read as "not implemented yet".

Outputs and execution counts are cleared. Unbalanced or misplaced markers are a build error
that names the notebook and the cell.

Usage: ``python -m tools.student [--out build/student] [NOTEBOOK ...]``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

from tools.course import REPO, reference_notebooks

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB_MESSAGE = "Exercise: replace this line with your code"
YOUR_COPY_NOTE = (
    "\n\n> **Your copy.** This notebook is yours: write the exercises here. Stuck? The "
    "reference, with every solution, is `solutions/{name}` beside it (read-only)."
)

__all__ = ["BEGIN", "END", "StudentBuildError", "build_student_notebook", "student_source"]


class StudentBuildError(ValueError):
    """A reference notebook whose solution markers cannot be turned into a student copy."""


def _python(source: str) -> str:
    # IPython syntax (%magic, !shell) becomes plain Python on the same lines, so ast can read it.
    return str(TransformerManager().transform_cell(source))


def _enclosing_scope(tree: ast.Module, line: int) -> ast.AST | None:
    """The innermost function or class whose lines include ``line`` (1-based), if any."""
    best: ast.AST | None = None
    best_start = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno or node.lineno
            if start <= line <= end and start >= best_start:  # a later start is further in
                best, best_start = node, start
    return best


def _names_bound(code: str) -> list[str]:
    """Names a top-level solution defines (assignments, functions, classes), in order."""
    names: list[str] = []
    for statement in ast.parse(code).body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
            targets = [statement.target]
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(statement.name)
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and node.id not in names:
                    names.append(node.id)
    return names


def student_source(source: str, where: str) -> str:
    """Return ``source`` with every solution span replaced by its stub.

    Args:
        source: a code cell's source.
        where: ``"NAME.ipynb, cell 7"``, for error messages.

    Raises:
        StudentBuildError: on unbalanced, nested or misplaced markers, or when the student
            cell would not parse.
    """
    lines = source.splitlines()
    markers = [(i, line.strip()) for i, line in enumerate(lines) if line.strip() in (BEGIN, END)]
    if not markers:
        return source
    try:
        tree = ast.parse(_python(source))
    except SyntaxError as exc:
        raise StudentBuildError(f"{where}: the reference cell does not parse: {exc.msg}") from exc
    out: list[str] = []
    position = 0
    pairs = list(zip(markers[::2], markers[1::2], strict=False))
    if len(markers) % 2 or any(b[1] != BEGIN or e[1] != END for b, e in pairs):
        kinds = ", ".join(f"line {i + 1}: {text}" for i, text in markers)
        raise StudentBuildError(
            f"{where}: unbalanced solution markers ({kinds}); every {BEGIN!r} needs its own "
            f"{END!r} after it, and spans may not nest"
        )
    for (begin, _), (end, _) in pairs:
        indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
        solution = lines[begin + 1 : end]
        scope = _enclosing_scope(tree, begin + 1)
        if isinstance(scope, ast.ClassDef):
            raise StudentBuildError(
                f"{where}: line {begin + 1}: a solution span directly in a class body; put the "
                "markers inside a method (the stub must be a statement in a function)"
            )
        stub = [f"{indent}# YOUR CODE HERE"]
        if scope is not None:
            stub.append(f'{indent}raise NotImplementedError("{STUB_MESSAGE}")')
        else:
            dedented = "\n".join(line[len(indent) :] for line in solution)
            try:
                names = _names_bound(_python(dedented))
            except SyntaxError as exc:
                raise StudentBuildError(
                    f"{where}: line {begin + 1}: the solution span does not parse on its own"
                ) from exc
            stub += [f"{indent}{name} = ..." for name in names] or [f"{indent}..."]
        out += lines[position:begin] + stub
        position = end + 1
    out += lines[position:]
    result = "\n".join(out)
    try:
        ast.parse(_python(result))
    except SyntaxError as exc:
        raise StudentBuildError(f"{where}: the student cell would not parse: {exc.msg}") from exc
    return result


def build_student_notebook(reference: Path, destination: Path) -> None:
    """Write the student copy of the notebook ``reference`` to ``destination``.

    Raises:
        StudentBuildError: naming the notebook and cell with bad solution markers.
    """
    nb = nbformat.read(reference, as_version=4)
    for index, cell in enumerate(nb.cells):
        where = f"{reference.name}, cell {index}"
        if cell.cell_type != "code":
            if BEGIN in cell.source or END in cell.source:
                raise StudentBuildError(f"{where}: solution markers belong in code cells only")
            continue
        cell.source = student_source(cell.source, where)
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
    if nb.cells and nb.cells[0].cell_type == "markdown":
        nb.cells[0].source += YOUR_COPY_NOTE.format(name=reference.name)
    nb.metadata["autograd_course"] = {"reference": f"notebooks/{reference.name}"}
    destination.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, destination)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.student", description=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "student")
    args = parser.parse_args(argv)
    try:
        paths = reference_notebooks(args.notebooks)
        for path in paths:
            build_student_notebook(path, args.out / path.name)
    except ValueError as exc:  # StudentBuildError is a ValueError too
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"built {len(paths)} student notebook(s) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
