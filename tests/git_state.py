"""What git sees in the working tree: tests compare it before and after running things."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def git_status(root: Path) -> str | None:
    """``git status --porcelain`` (untracked files listed), or ``None`` outside a git checkout."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    result = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return result.stdout if result.returncode == 0 else None
