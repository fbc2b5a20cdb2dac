"""The course to take away (``tools/site_bundle.py``): the bundle holds the course's files,
the same bytes from two builds, and a bundle is itself a course ``make site`` can bundle."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.git_state import git_status
from tools.course import REPO
from tools.site_bundle import NAME, course_files, write_bundle

# What the README's two commands need, at the bundle's top level.
NEEDED = {"Makefile", "pyproject.toml", "README.md", "conftest.py", "LICENSE"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_bundle(tmp_path_factory.mktemp("bundle"))


def _names(archive: Path) -> list[str]:
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as opened:
            return opened.namelist()
    with tarfile.open(archive) as opened:
        return opened.getnames()


def test_both_archives_hold_the_course_in_one_folder(bundle: list[Path]) -> None:
    expected = {f"{NAME}/{name.as_posix()}" for name in course_files()}
    for archive in bundle:
        names = _names(archive)
        assert set(names) == expected, archive.name
        top = {name.split("/")[1] for name in names if name.count("/") == 1}
        assert top >= NEEDED, f"{archive.name} lacks {NEEDED - top}"
        assert any(n.startswith(f"{NAME}/notebooks/") and n.endswith(".ipynb") for n in names)
        assert not any("/.git/" in n or "/.venv/" in n or "/build/" in n for n in names)


def test_the_tracked_files_are_the_bundle_when_there_is_git() -> None:
    if git_status(REPO) is None:
        pytest.skip("not a git checkout")
    files = {name.as_posix() for name in course_files()}
    assert "autograd_helpers/__init__.py" in files and "Makefile" in files
    assert not any(name.startswith(("build/", ".venv/", "workspace/")) for name in files)


def test_two_builds_give_the_same_bytes_and_scripts_stay_executable(
    bundle: list[Path], tmp_path: Path
) -> None:
    again = write_bundle(tmp_path)
    for first, second in zip(bundle, again, strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name
    with tarfile.open(bundle[0]) as opened:
        modes = {member.name: member.mode for member in opened.getmembers()}
    assert modes[f"{NAME}/deploy/course-start"] & 0o111, "course-start must stay executable"
    assert not modes[f"{NAME}/Makefile"] & 0o111


def test_an_unpacked_bundle_is_a_course_the_site_can_bundle_again(
    bundle: list[Path], tmp_path: Path
) -> None:
    with tarfile.open(bundle[0]) as opened:
        opened.extractall(tmp_path, filter="data")
    unpacked = tmp_path / NAME
    (unpacked / ".venv" / "bin").mkdir(parents=True)  # what make and the tools write there
    (unpacked / ".venv" / "bin" / "python").write_text("")
    (unpacked / "build" / "site").mkdir(parents=True)
    (unpacked / "autograd_helpers" / "__pycache__").mkdir()
    (unpacked / "autograd_helpers.egg-info").mkdir()
    (unpacked / "autograd_helpers.egg-info" / "PKG-INFO").write_text("")
    assert course_files(unpacked) == course_files()
