"""Where the course's files are, for the command-line tools."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def reference_notebooks(paths: list[Path] | None = None) -> list[Path]:
    """``paths`` if given (each must be an ``.ipynb`` file), else every reference notebook.

    Raises:
        ValueError: naming the first path that is not a notebook file.
    """
    chosen = paths or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in chosen:
        if not path.is_file() or path.suffix != ".ipynb":
            raise ValueError(f"{path} is not a notebook file")
    return chosen
