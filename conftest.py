"""Root conftest: the environment every test and notebook kernel gets."""

from __future__ import annotations

import os

from tests.git_state import git_status
from tools.kernels import QUIET_ENV

# Set before any kernel starts, so nbval's kernels and the tests' own inherit it.
for key, value in QUIET_ENV.items():
    os.environ.setdefault(key, value)


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
