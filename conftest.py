"""Root conftest: the environment every test and notebook kernel gets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.git_state import git_status
from tools.kernels import QUIET_ENV

# Each notebook's kernel (nbval's) runs with the network blocked, loopback allowed: the
# notebooks must work on a machine without network. The guard is a sitecustomize that a
# Python process loads from PYTHONPATH (tests/network_guard).
NETWORK_GUARD = Path(__file__).resolve().parent / "tests" / "network_guard"
OFFLINE = {"PYTHONPATH": str(NETWORK_GUARD), "COURSE_BLOCK_NETWORK": "1"}

# Set before any kernel starts, so nbval's kernels and the tests' own inherit it.
for key, value in QUIET_ENV.items():
    os.environ.setdefault(key, value)


def pytest_configure(config: pytest.Config) -> None:
    # `make test` runs two workers on two cores: one compute thread each, as the notebooks
    # run (setup_notebook). With torch's default of a thread per core the threads contend,
    # and chapter 06's checker tests ran three times slower. Processes a test starts inherit it.
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@contextmanager
def offline_kernel_environment() -> Iterator[None]:
    """``os.environ`` as a kernel started now should get it: the network guard on."""
    saved = {key: os.environ.get(key) for key in OFFLINE}
    os.environ.update(OFFLINE)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    # nbval starts a notebook's kernel while its first cell is set up: start it offline
    if type(item.parent).__name__ == "IPyNbFile" and getattr(item.parent, "kernel", None) is None:
        with offline_kernel_environment():
            yield
    else:
        yield


# --- the whole test run must leave the repository as it found it ---------------------------------


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller, not an xdist worker
        session.config.stash_git_status = git_status(session.config.rootpath)


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "stash_git_status", None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    after = git_status(session.config.rootpath)
    if after is not None and after != before:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "ERROR: the tests changed the repository outside git-ignored folders:\n  "
                + "\n  ".join(changed),
                red=True,
            )
        session.exitstatus = 1
