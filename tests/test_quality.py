"""Lint, format and types are tests too: ruff over everything, strict mypy on the library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.course import REPO


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    "command",
    [("ruff", "check", "."), ("ruff", "format", "--check", ".")],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff(command):
    result = _run(*command)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_library():
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
