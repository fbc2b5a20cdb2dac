"""``make outputs``: re-execute the reference notebooks in place with the pinned stack.

Committed outputs must come from here (never hand-edited), so that strict nbval, which
re-runs every notebook the same way, finds exactly the same text.

Usage: ``python -m tools.outputs [NOTEBOOK ...]`` (default: every ``notebooks/*.ipynb``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionError

from tools.course import reference_notebooks
from tools.kernels import execute_notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.outputs", description=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    try:
        paths = reference_notebooks(args.notebooks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        start = time.perf_counter()
        try:
            nb = execute_notebook(path.resolve())
        except CellExecutionError as exc:
            print(f"error: {path.name} failed; file left unchanged.\n{exc}", file=sys.stderr)
            return 1
        nbformat.write(nb, path)
        print(f"executed {path.name} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
