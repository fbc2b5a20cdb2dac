"""The progress log: each checker verdict in a learner's copy appends one JSON line, and
anything missing records nothing, silently.

The kernel is faked (``get_ipython().kernel.get_parent()`` returns the execute request
JupyterLab would send, ``cellId`` in its metadata) on temporary notebooks; the last test
sends such a request through a real kernel.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from queue import Empty
from typing import Any

import IPython
import nbformat
import pytest
import torch

import autograd_helpers as ah
from autograd_helpers.checks._core import progress as _progress
from tools.course import NOTEBOOKS
from tools.kernels import kernel_env, kernel_manager
from tools.student import build_student_notebook

CHECK_ID, SOLUTION_ID, OTHER_ID = "check-cell", "solution-cell", "other-cell"


class FakeKernel:
    def __init__(self, request: dict[str, Any] | None) -> None:
        self.request = request

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        assert channel == "shell"
        if self.request is None:
            raise RuntimeError("no parent")  # a broken kernel must not break the check
        return self.request


class FakeShell:
    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel


def execute_request(cell_id: str | None, kind: str = "execute_request") -> dict[str, Any]:
    """What ipykernel keeps as the parent of a JupyterLab cell run."""
    metadata: dict[str, Any] = {"deletedCells": [], "recordTiming": False}
    if cell_id is not None:
        metadata["cellId"] = cell_id
    return {"header": {"msg_type": kind}, "msg_type": kind, "metadata": metadata, "content": {}}


def write_notebook(path: Path, *, student: bool = True) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("answer = 1", id=SOLUTION_ID),
        nbformat.v4.new_code_cell("ah.checks.check_tensor(answer, ...)", id=CHECK_ID),
        nbformat.v4.new_code_cell("print('not an exercise')", id=OTHER_ID),
    ]
    nb.cells[0].metadata["exercise"] = {"id": "09-answer", "role": "solution"}
    nb.cells[1].metadata["exercise"] = {"id": "09-answer", "role": "check"}
    if student:
        nb.metadata["autograd_course"] = {"reference": "notebooks/09_answer.ipynb"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> FakeKernel:
    fake = FakeKernel(execute_request(CHECK_ID))
    monkeypatch.setattr(IPython, "get_ipython", lambda: FakeShell(fake))
    return fake


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    notebook = write_notebook(tmp_path / "workspace" / "09_answer.ipynb")
    monkeypatch.setenv("COURSE_PROGRESS_LOG", str(tmp_path / "course-progress.jsonl"))
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    _progress._NOTEBOOKS.clear()
    return tmp_path / "course-progress.jsonl"


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def passing() -> ah.checks.CheckResult:
    return ah.checks.check_tensor(torch.ones(3), torch.ones(3))


def failing() -> ah.checks.CheckResult:
    return ah.checks.check_tensor(torch.zeros(3), torch.ones(3))


def test_a_verdict_in_a_checker_cell_appends_one_line(kernel, log):
    assert passing().passed
    assert not failing().passed
    first, second = lines(log)
    assert first.keys() == {"exercise", "notebook", "passed", "status", "time"}
    assert first["exercise"] == "09-answer"
    assert first["notebook"] == "workspace/09_answer.ipynb"  # from the home folder
    assert (first["passed"], first["status"]) == (True, "passed")
    assert (second["passed"], second["status"]) == (False, "failed")
    when = datetime.fromisoformat(first["time"])
    assert when.utcoffset() == UTC.utcoffset(None)
    assert abs((datetime.now(UTC) - when).total_seconds()) < 3600
    assert log.read_text().count("\n") == 2  # one line each, newline-terminated


def test_an_untouched_stub_is_logged_as_not_implemented(kernel, log):
    ah.checks.check_tensor(..., torch.ones(3))
    (line,) = lines(log)
    assert (line["passed"], line["status"]) == (False, "not implemented")


def test_every_public_checker_logs_and_explain_gradcheck_does_not():
    for name in ah.checks.__all__:
        checker = getattr(ah.checks, name)
        if name.startswith("check_"):
            original = getattr(ah.checks, f"_{checker.__module__.rsplit('.', 1)[1]}")
            assert checker.__wrapped__ is getattr(original, name), name
            assert checker.__doc__ == checker.__wrapped__.__doc__
    assert not hasattr(ah.checks.explain_gradcheck, "__wrapped__")


def test_a_notebook_set_up_error_still_raises_and_logs_nothing(kernel, log):
    with pytest.raises(TypeError, match="expected"):
        ah.checks.check_tensor(torch.ones(3), "expected")
    assert not log.exists()


def test_nothing_is_recorded_without_the_variable(kernel, log, monkeypatch):
    monkeypatch.delenv("COURSE_PROGRESS_LOG")
    assert passing().passed
    assert not log.exists()


@pytest.mark.parametrize(
    "request_",
    [
        None,  # the kernel cannot say (get_parent raises)
        execute_request(None),  # nbclient, nbval, jupyter_client's execute(): no cellId
        execute_request(""),
        execute_request(SOLUTION_ID),  # an exercise cell, but not its checker
        execute_request(OTHER_ID),
        execute_request("a-cell-not-in-the-file"),  # e.g. a pasted copy of the checker cell
        execute_request(CHECK_ID, kind="comm_msg"),  # a widget's callback, not a cell run
    ],
    ids=["no-parent", "no-cell-id", "empty-cell-id", "solution", "other", "unknown", "comm"],
)
def test_nothing_is_recorded_outside_a_checker_cell(kernel, log, request_):
    kernel.request = request_
    assert passing().passed
    assert not log.exists()


def test_nothing_is_recorded_outside_a_kernel(log, monkeypatch):
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert passing().passed
    monkeypatch.delitem(sys.modules, "IPython")  # IPython never imported: not even looked up
    assert passing().passed
    assert not log.exists()


def test_a_reference_copy_is_not_counted(kernel, log, tmp_path, monkeypatch):
    reference = write_notebook(tmp_path / "workspace" / "solutions" / "09.ipynb", student=False)
    monkeypatch.setenv("JPY_SESSION_NAME", str(reference))
    assert passing().passed
    assert not log.exists()


@pytest.mark.parametrize("session", ["missing", "garbage", "unset", "folder"])
def test_an_unknown_or_unreadable_notebook_records_nothing(kernel, log, monkeypatch, session):
    notebook = Path(os.environ["JPY_SESSION_NAME"])
    if session == "missing":
        notebook.unlink()
    elif session == "garbage":
        notebook.write_text('{"cells": [')  # half-written: not JSON
    elif session == "unset":
        monkeypatch.delenv("JPY_SESSION_NAME")
    else:
        monkeypatch.setenv("JPY_SESSION_NAME", str(notebook.parent))
    assert passing().passed
    assert not log.exists()


@pytest.mark.parametrize("where", ["folder-missing", "is-a-folder"])
def test_a_log_that_cannot_be_written_never_raises_into_the_cell(kernel, log, monkeypatch, where):
    target = log.parent / "missing" / "log.jsonl" if where == "folder-missing" else log.parent
    monkeypatch.setenv("COURSE_PROGRESS_LOG", str(target))
    assert passing().passed


def test_a_relative_session_path_is_found_from_the_kernels_folder(kernel, log, monkeypatch):
    # Without a session name jupyter_server passes the API path, relative to its root; the
    # kernel runs in the notebook's folder below that root.
    notebook = Path(os.environ["JPY_SESSION_NAME"])
    monkeypatch.setenv("JPY_SESSION_NAME", "workspace/09_answer.ipynb")
    monkeypatch.chdir(notebook.parent)
    assert passing().passed
    assert lines(log)[0]["exercise"] == "09-answer"


def test_the_notebook_is_read_once_per_change(kernel, log, monkeypatch):
    reads = []
    real_load = _progress.json.load
    monkeypatch.setattr(_progress.json, "load", lambda file: reads.append(1) or real_load(file))
    for _ in range(5):
        passing()
    assert len(reads) == 1
    notebook = Path(os.environ["JPY_SESSION_NAME"])
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[1].metadata["exercise"]["id"] = "09-renamed"  # the file changed: read again
    nbformat.write(nb, notebook)
    passing()
    assert len(reads) == 2
    assert [line["exercise"] for line in lines(log)] == ["09-answer"] * 5 + ["09-renamed"]


def _forked_writer(log: Path, name: str, count: int, start: int) -> int:
    """Fork a process that waits for a byte on ``start``, then appends ``count`` lines."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: never back into pytest, whatever happens
        os.read(start, 1)
        for i in range(count):
            line = {"writer": name, "i": i, "pad": "x" * 300}
            _progress._append(log, json.dumps(line) + "\n")
        code = 0
    finally:
        os._exit(code)


def test_two_processes_append_at_once_without_mixing_lines(tmp_path):
    log, count = tmp_path / "course-progress.jsonl", 400
    start, go = os.pipe()
    pids = [_forked_writer(log, name, count, start) for name in ("a", "b")]
    os.write(go, b"xx")  # both start together, one byte each
    os.close(go)
    os.close(start)
    for pid in pids:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    found = lines(log)
    assert len(found) == 2 * count
    for name in ("a", "b"):
        assert [line["i"] for line in found if line["writer"] == name] == list(range(count))


# --- a real kernel, sent the execute request JupyterLab sends ----------------------------------


def _run(client: Any, code: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Send one execute_request (with ``metadata``, as JupyterLab does) and wait for its reply."""
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
    content |= {"allow_stdin": False, "stop_on_error": True}
    message = client.session.msg("execute_request", content, metadata=metadata or {})
    client.shell_channel.send(message)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            reply: dict[str, Any] = client.get_shell_msg(timeout=5)
        except Empty:
            continue
        if reply["parent_header"].get("msg_id") == message["header"]["msg_id"]:
            assert reply["content"]["status"] == "ok", reply["content"]
            return reply
    raise TimeoutError(code)


@pytest.mark.slow
def test_a_real_kernel_logs_the_checker_cell_jupyterlab_runs(tmp_path):
    reference = NOTEBOOKS / "00_start_here.ipynb"
    student = tmp_path / "workspace" / reference.name
    build_student_notebook(reference, student)
    cells = {cell.id: cell for cell in nbformat.read(reference, as_version=4).cells}
    roles = {c.metadata["exercise"]["role"]: c for c in cells.values() if "exercise" in c.metadata}
    check, solution = roles["check"], roles["solution"]
    log = tmp_path / "course-progress.jsonl"
    env = kernel_env({"COURSE_PROGRESS_LOG": str(log), "JPY_SESSION_NAME": str(student)})
    manager = kernel_manager()
    manager.start_kernel(cwd=str(student.parent), env=env)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        _run(client, cells["start-01"].source)  # the setup cell
        _run(client, solution.source, {"cellId": solution.id, **solution.metadata})
        _run(client, check.source)  # as nbclient and nbval run a cell: no cellId, no line
        assert not log.exists()
        _run(client, check.source, {"cellId": check.id, **check.metadata})  # as JupyterLab
        (line,) = lines(log)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert line["exercise"] == "00-cube"
    assert (line["passed"], line["status"]) == (True, "passed")
    assert line["notebook"].endswith("workspace/00_start_here.ipynb")
