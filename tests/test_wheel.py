"""The package installs from its wheel alone: no editable checkout hiding a missing module.

An editable install (``make lab``, Binder) imports straight from the source tree, so a
subpackage left out of the wheel goes unnoticed until a workshop hub installs the package
for real. This builds the wheel from a copy of the sources, installs it into an empty folder
and imports every module of the package from there, in a process that cannot see the
repository.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tools.course import REPO
from tools.site_bundle import write_wheel

PACKAGE = REPO / "autograd_helpers"


def _source_modules() -> set[str]:
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py")
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as ``make site`` builds it for download: from a copy of the sources."""
    return write_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_the_type_marker(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    in_wheel = {
        name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for name in names
        if name.endswith(".py")
    }
    assert _source_modules() - in_wheel == set(), "modules missing from the wheel"
    assert "autograd_helpers/py.typed" in names


@pytest.mark.slow
def test_every_module_imports_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    modules = sorted(_source_modules())
    script = (
        "import importlib, os, sys\n"
        # the checkout itself is left out (an editable install may list it), nothing else:
        # the course's own folder is often called autograd-inside-out, venv included
        f"sys.path = [{str(target)!r}] + [p for p in sys.path if p and "
        f"os.path.realpath(p) != {str(REPO.resolve())!r}]\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(target)!r}), module.__file__\n"
        "print('ok', len(" + repr(modules) + "))\n"
    )
    # -I: isolated mode (no current folder, no user site, no PYTHON* variables), from a
    # folder that is not the repository, so only the wheel can provide the package.
    result = subprocess.run(
        [sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
