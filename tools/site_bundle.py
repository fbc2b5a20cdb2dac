"""The course to take away, published by ``make site`` under ``downloads/``.

- ``autograd-inside-out.tar.gz`` and ``.zip``: the course's files (the repository's tracked
  files), in a folder ``autograd-inside-out/``, from which the README's two commands work:
  ``make lab`` and ``make test``. Outside a git checkout (in a bundle itself), every file
  but those that the tools, ``make`` and Python write.
- ``notebooks/NN_*.ipynb``: each chapter as committed, solutions and outputs included.
- the library's wheel, ``autograd_helpers-<version>-py3-none-any.whl``, for a notebook
  downloaded alone (``pip install`` it beside ``torch==2.13.0``).

The archives hold each file with a fixed date, owner and mode (executable or not), in
sorted order, so that two builds of the same files give the same bytes.
"""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from tools.course import NOTEBOOKS, REPO

NAME = "autograd-inside-out"
DATE = (1980, 1, 1, 0, 0, 0)  # zip's earliest date, for both archives
MTIME = 315532800  # DATE as a Unix time
# What the tools, make and Python write: never part of the course's files. Folders at the
# top (``bench/`` is make bench's results; ``tools/bench/`` is the course's), then anywhere.
WRITTEN_AT_TOP = frozenset({".git", ".venv", "build", "workspace", "bench"})
WRITTEN = frozenset(
    {"__pycache__", "node_modules", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    | {".hypothesis", ".ipynb_checkpoints"}
)


def _written(name: Path) -> bool:
    parts = name.parts
    return (
        parts[0] in WRITTEN_AT_TOP
        or bool(WRITTEN.intersection(parts))
        or any(part.endswith(".egg-info") for part in parts)
    )


def course_files(repo: Path = REPO) -> list[Path]:
    """The course's files, relative to ``repo``, sorted."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=False)
    if listed.returncode == 0 and listed.stdout:
        names = [Path(n) for n in listed.stdout.decode().split("\0") if n]
        return sorted(n for n in names if (repo / n).is_file())
    found = (path.relative_to(repo) for path in repo.rglob("*") if path.is_file())
    return sorted(name for name in found if not _written(name))


def _mode(path: Path) -> int:
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def write_bundle(folder: Path, repo: Path = REPO) -> list[Path]:
    """Write the course's files as ``NAME.tar.gz`` and ``NAME.zip`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = course_files(repo)
    tar_path, zip_path = folder / f"{NAME}.tar.gz", folder / f"{NAME}.zip"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in files:
            data = (repo / name).read_bytes()
            info = tarfile.TarInfo(f"{NAME}/{name.as_posix()}")
            info.size, info.mtime, info.mode = len(data), MTIME, _mode(repo / name)
            archive.addfile(info, io.BytesIO(data))
    with tar_path.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as packed:
        packed.write(buffer.getvalue())
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in files:
            entry = zipfile.ZipInfo(f"{NAME}/{name.as_posix()}", DATE)
            entry.external_attr = _mode(repo / name) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, (repo / name).read_bytes())
    return [tar_path, zip_path]


def write_wheel(folder: Path, repo: Path = REPO) -> Path:
    """Build the library's wheel from a copy of its sources into ``folder``; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "wheel-source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(repo / name, source / name)
    shutil.copytree(
        repo / "autograd_helpers",
        source / "autograd_helpers",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*command, "-q", "-w", str(folder), str(source)], check=True, capture_output=True
    )
    shutil.rmtree(source)
    (wheel,) = folder.glob("autograd_helpers-*.whl")
    return wheel


def write_downloads(folder: Path, *, wheel: bool = True) -> None:
    """Everything above into ``folder`` (the wheel only if ``wheel``)."""
    shutil.rmtree(folder, ignore_errors=True)
    write_bundle(folder)
    (folder / "notebooks").mkdir()
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        shutil.copyfile(notebook, folder / "notebooks" / notebook.name)
    if wheel:
        write_wheel(folder)
