"""The course survives how it is really used: any order, no network, nothing left behind.

- Each notebook runs alone in a fresh kernel, in ``notebooks/`` as a learner's kernel runs
  it, with network access blocked for the kernel, and writes nothing into the repository
  outside git-ignored folders: that is the strict nbval run itself, whose kernels the root
  conftest starts offline, and whose whole session must leave ``git status`` as it was.
- Each chapter's student copy also runs alone in a folder of its own (so none needs a file
  beside it), in its answer bank's kernel, and must leave torch's global modes (grad mode,
  inference mode, default dtype, anomaly mode) as it found them (``tests/banks/suite.py``,
  with :data:`tests.banks.kernel.STATE_CHECK`, whose failing is tested here). A run of
  every notebook in one kernel would only repeat these at the cost of a minute.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import urllib.request

import nbformat
import pytest
import torch

from tests.banks.kernel import STATE_CHECK
from tests.git_state import git_status
from tests.network_guard.sitecustomize import block_network
from tools.course import REPO
from tools.kernels import execute_notebook, kernel_env

GUARD = REPO / "tests" / "network_guard"
pytestmark = pytest.mark.slow

OFFLINE_ENV = {"PYTHONPATH": str(GUARD), "COURSE_BLOCK_NETWORK": "1"}


def _offline_env() -> dict[str, str]:
    return kernel_env(OFFLINE_ENV)


@pytest.fixture
def no_network():
    undo = block_network()
    yield
    undo()


def test_the_guard_blocks_the_network_but_not_loopback(no_network):
    with pytest.raises(OSError, match="network access is blocked"):
        urllib.request.urlopen("http://example.com", timeout=5)
    with pytest.raises(OSError, match="network access is blocked"):
        socket.create_connection(("93.184.216.34", 80), timeout=5)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=5):
            pass  # loopback still works


def test_the_guard_is_active_inside_a_kernel(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(
        "import urllib.request\nurllib.request.urlopen('http://example.com')"
    )
    cell.metadata["tags"] = ["raises-exception"]
    nb.cells = [cell]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    executed = execute_notebook(path, env=_offline_env())
    (error,) = executed.cells[0].outputs
    assert "network access is blocked" in error["evalue"]


def test_nbval_starts_each_notebooks_kernel_offline(tmp_path):
    """The root conftest's environment for nbval's kernels has the guard on."""
    from conftest import offline_kernel_environment

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(
        "import urllib.request\nurllib.request.urlopen('http://example.com')"
    )
    cell.metadata["tags"] = ["raises-exception"]
    nb.cells = [cell]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    with offline_kernel_environment():
        env = kernel_env(dict(os.environ))
    executed = execute_notebook(path, env=env)
    (error,) = executed.cells[0].outputs
    assert "network access is blocked" in error["evalue"]
    assert "COURSE_BLOCK_NETWORK" not in os.environ  # put back after the kernel started


def _float64_by_default(stack: contextlib.ExitStack) -> None:
    stack.callback(torch.set_default_dtype, torch.get_default_dtype())
    torch.set_default_dtype(torch.float64)


@pytest.mark.parametrize(
    ("leave", "said"),
    [
        (lambda stack: stack.enter_context(torch.no_grad()), "left grad mode off"),
        (lambda stack: stack.enter_context(torch.inference_mode()), "left inference mode on"),
        (_float64_by_default, "changed the default dtype"),
        (
            lambda stack: stack.enter_context(torch.autograd.set_detect_anomaly(True)),
            "left anomaly detection on",
        ),
    ],
)
def test_the_state_check_after_a_chapters_run_all_catches_a_mode_left_on(leave, said):
    exec(STATE_CHECK.format(name="NN_chapter.ipynb"), {})  # as found: silent
    with contextlib.ExitStack() as stack:  # puts the mode back at the end
        leave(stack)
        with pytest.raises(AssertionError, match=f"NN_chapter.ipynb {said}"):
            exec(STATE_CHECK.format(name="NN_chapter.ipynb"), {})


@pytest.mark.parametrize("folder", ["build/student", "workspace", "bench", "build/screenshots"])
def test_what_make_lab_and_the_tools_write_is_git_ignored(folder):
    if git_status(REPO) is None:
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", folder + "/x"], cwd=REPO)
    assert ignored.returncode == 0, f"{folder}/ is not git-ignored"
