"""The progress log: every checker verdict in a learner's own notebook, one JSON line each.

Off unless the environment variable ``COURSE_PROGRESS_LOG`` names a file (a workshop's hub
sets it to ``~/course-progress.jsonl``: not a dotfile, since Jupyter does not serve hidden
files, and ``make lab`` does the same for a self-learner). Then each verdict of a public
``check_*`` (the facade wraps them with :func:`recorded`) appends one line::

    {"exercise": "01-tanh", "notebook": "workspace/01_custom_function.ipynb",
     "passed": true, "status": "passed", "time": "2025-05-01T09:30:00+00:00"}

How a checker knows which exercise it judged: in a Jupyter kernel, ``JPY_SESSION_NAME``
(set by jupyter_server) is the notebook's path, and JupyterLab sends the running cell's id
in the execute request's metadata (``cellId``). The notebook's cell with that id carries
``{"exercise": {"id": ..., "role": "check"}}``. Only the learner's copies count: the student
build marks them with ``autograd_course`` in the notebook's metadata; the read-only reference
copies in ``solutions/`` have no such mark.

Logging is best effort by design: anything missing (no variable, no kernel, no cell id, a
cell that is no exercise's checker, a file that cannot be read or written) records nothing,
and nothing here ever raises into the learner's cell. A notebook is parsed once per change
(cached by path, modification time and size), and a line is one ``write`` to a file opened
with ``O_APPEND``, so kernels of several notebooks can log to the same file at once.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec

from autograd_helpers.checks._core.feedback import CheckResult

__all__ = ["LOG_VARIABLE", "NOTEBOOK_VARIABLE", "record", "recorded"]

LOG_VARIABLE = "COURSE_PROGRESS_LOG"
NOTEBOOK_VARIABLE = "JPY_SESSION_NAME"  # jupyter_server sets it for each notebook's kernel
CELL_ID_KEY = "cellId"  # JupyterLab 4: CodeCell.execute sends {..., cellId: the cell's id}
STUDENT_MARK = "autograd_course"  # tools/student.py puts it in a student copy's metadata

_P = ParamSpec("_P")


@dataclass(frozen=True)
class _Notebook:
    """What the log needs from one notebook file: its checker cells, and whether it counts."""

    stamp: tuple[int, int]  # modification time (ns) and size: a new stamp means re-read
    student: bool
    checks: dict[str, str]  # cell id -> exercise id, for the cells with role "check"


_NOTEBOOKS: dict[Path, _Notebook] = {}


def recorded(check: Callable[_P, CheckResult]) -> Callable[_P, CheckResult]:
    """``check``, logging each verdict it returns (see the module's docstring).

    What ``check`` raises (a notebook's wrong set-up) passes through unlogged.
    """

    @functools.wraps(check)
    def logged(*args: _P.args, **kwargs: _P.kwargs) -> CheckResult:
        result = check(*args, **kwargs)
        record(result)
        return result

    return logged


def record(result: CheckResult) -> None:
    """Append ``result`` to the progress log when it judged an exercise; never raises."""
    if not os.environ.get(LOG_VARIABLE):
        return  # the common case, first and cheap
    try:
        _record(result)
    except Exception:  # best effort: the learner's cell must get its verdict regardless
        return


def _record(result: CheckResult) -> None:
    cell_id = _cell_id()  # first: outside a kernel, this is where it ends
    notebook = _notebook_path() if cell_id is not None else None
    if cell_id is None or notebook is None:
        return
    found = _read(notebook)
    exercise = found.checks.get(cell_id) if found is not None and found.student else None
    if exercise is None:
        return
    line = {
        "exercise": exercise,
        "notebook": _shown(notebook),
        "passed": result.passed,
        "status": result.status,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _append(Path(os.environ[LOG_VARIABLE]).expanduser(), json.dumps(line) + "\n")


def _notebook_path() -> Path | None:
    """The running notebook's file, from ``JPY_SESSION_NAME``.

    jupyter_server gives an absolute path when the session has a name (JupyterLab's do), an
    API path relative to the server's root otherwise; the kernel runs in the notebook's
    folder, somewhere under that root.
    """
    name = os.environ.get(NOTEBOOK_VARIABLE)
    if not name:
        return None
    path = Path(name)
    if path.is_absolute():
        return path if path.is_file() else None
    here = Path.cwd()
    for candidate in (*(folder / path for folder in (here, *here.parents)), here / path.name):
        if candidate.is_file():
            return candidate
    return None


def _cell_id() -> str | None:
    """The id of the cell being run, from the kernel's current execute request."""
    ipython = sys.modules.get("IPython")  # not imported: no kernel, nothing to look up
    shell = getattr(ipython, "get_ipython", lambda: None)()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    parent: Any = kernel.get_parent("shell")
    if not isinstance(parent, dict) or _message_type(parent) != "execute_request":
        return None
    metadata = parent.get("metadata")
    cell_id = metadata.get(CELL_ID_KEY) if isinstance(metadata, dict) else None
    return cell_id if isinstance(cell_id, str) and cell_id else None


def _message_type(message: dict[str, Any]) -> object:
    header = message.get("header")
    return header.get("msg_type") if isinstance(header, dict) else message.get("msg_type")


def _read(path: Path) -> _Notebook | None:
    """The notebook at ``path``, parsed once per change of its modification time or size."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _NOTEBOOKS.get(path)
    if cached is not None and cached.stamp == stamp:
        return cached
    with path.open(encoding="utf-8") as file:
        nb = json.load(file)
    if not isinstance(nb, dict):
        return None
    metadata = nb.get("metadata")
    checks: dict[str, str] = {}
    for cell in nb.get("cells") or ():
        marker = cell.get("metadata", {}).get("exercise") if isinstance(cell, dict) else None
        if isinstance(marker, dict) and marker.get("role") == "check":
            cell_id, exercise = cell.get("id"), marker.get("id")
            if isinstance(cell_id, str) and isinstance(exercise, str):
                checks[cell_id] = exercise
    student = isinstance(metadata, dict) and isinstance(metadata.get(STUDENT_MARK), dict)
    found = _Notebook(stamp, student, checks)
    _NOTEBOOKS[path] = found
    return found


def _shown(notebook: Path) -> str:
    """The notebook's path as the log shows it: from the home folder when it is inside it."""
    try:
        return notebook.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return notebook.as_posix()


def _append(log: Path, line: str) -> None:
    """Append ``line`` with one ``write`` on an ``O_APPEND`` descriptor (atomic for a line)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
