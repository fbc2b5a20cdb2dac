"""The package's layers point one way: core <- public modules <- checks' shared machinery <-
the chapters' checkers <- the ``checks`` facade.

- ``_common/`` is the private core (validation, the learner-code runner, report boxes,
  tables, the graph's vocabulary, state snapshots): it imports nothing else of ours, so
  anything may stand on it.
- The public modules, named by concept (``graph``, ``anomaly``, ``profiling``...), stand on
  the core and on each other, never on the exercise checkers.
- ``checks._core`` (the attempt and its verdict) and ``checks._contain`` (containment, the
  watcher) are the checkers' shared machinery: they stand on the core, the public modules
  and each other, never on a chapter's package.
- A chapter's package (``checks.function``, ``checks.jacobians``, ``checks.gradcheck``,
  ``checks.anomaly``, ``checks.modes``, ``checks.profiler``) stands on all of the above and
  on its own modules. Of another chapter it may import the public ``__init__`` only, and
  only public names from it (``profiler`` uses ``checks.function.check_function``), never
  that chapter's private modules or names.
- ``checks/__init__.py`` (the facade notebooks call as ``ah.checks``) and its
  ``checks.explain`` alias may use everything; nothing inside ``checks`` imports them.
- ``autograd_helpers/__init__.py``, the root, names the public modules and ``checks``.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "autograd_helpers"
MODULES = sorted(PACKAGE.rglob("*.py"))
CHAPTERS = ("function", "jacobians", "gradcheck", "anomaly", "modes", "profiler")
CHECKS = "autograd_helpers.checks"


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULE_NAMES = {_name(path) for path in MODULES}


def _imports(path: Path) -> set[tuple[str, str | None]]:
    """Each import of ours as (the module it loads, the name it takes from it or None)."""
    found: set[tuple[str, str | None]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in MODULE_NAMES:
                    found.add((submodule, None))
                else:
                    found.add((node.module, alias.name))
        elif isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
    return {(module, name) for module, name in found if module.startswith("autograd_helpers")}


def _layer(module: str) -> str:
    if module == "autograd_helpers":
        return "root"  # the facade: names every public module, lazily
    if module.startswith("autograd_helpers._common"):
        return "core"
    if module in (CHECKS, f"{CHECKS}.explain"):
        return "checks"
    for shared in ("_core", "_contain"):
        if module == f"{CHECKS}.{shared}" or module.startswith(f"{CHECKS}.{shared}."):
            return "checks-shared"
    for chapter in CHAPTERS:
        if module == f"{CHECKS}.{chapter}" or module.startswith(f"{CHECKS}.{chapter}."):
            return f"chapter:{chapter}"
    assert not module.startswith(CHECKS), (
        f"{module}: in no layer of checks/: a new chapter package goes into CHAPTERS above"
    )
    return "public"


ALLOWED = {
    "core": {"core"},
    "public": {"core", "public"},
    "checks-shared": {"core", "public", "checks-shared"},
    "checks": {"core", "public", "checks-shared", *(f"chapter:{c}" for c in CHAPTERS)},
    "root": {"core", "public", "checks"},
}


def _allowed(importer: str, module: str, name: str | None) -> bool:
    layer, target = _layer(importer), _layer(module)
    if not layer.startswith("chapter:"):
        return target in ALLOWED[layer]
    if target == layer or target in ALLOWED["checks-shared"]:
        return True
    # Another chapter: its package's public names only (not its modules, not `_names`).
    return (
        target.startswith("chapter:")
        and module == f"{CHECKS}.{target.removeprefix('chapter:')}"
        and name is not None
        and not name.startswith("_")
    )


def _wrong_imports(path: Path) -> list[str]:
    importer = _name(path)
    return sorted(
        module + (f".{name}" if name else "")
        for module, name in _imports(path)
        if module != "autograd_helpers" and not _allowed(importer, module, name)
    )


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_imports_point_down_the_layers(path):
    wrong = _wrong_imports(path)
    assert not wrong, f"{_name(path)} ({_layer(_name(path))}) imports {wrong}"


@pytest.mark.parametrize(
    ("importer", "line"),
    [
        ("checks/profiler/_memory.py", "from autograd_helpers.checks.function import _steps"),
        ("checks/profiler/_memory.py", "from autograd_helpers.checks.function._values import x"),
        ("checks/profiler/_memory.py", "from autograd_helpers.checks.function import _name_of"),
        ("checks/profiler/_memory.py", "import autograd_helpers.checks.modes._cases"),
        ("checks/profiler/_memory.py", "from autograd_helpers.checks import check_function"),
        ("checks/_core/problems.py", "from autograd_helpers.checks.function import check_function"),
        ("checks/_contain/watch.py", "from autograd_helpers.checks.jacobians._loop import x"),
        ("graph.py", "from autograd_helpers.checks._core.feedback import CheckResult"),
        ("_common/runner.py", "from autograd_helpers.graph import x"),
    ],
)
def test_a_planted_bad_import_is_caught(tmp_path, monkeypatch, importer, line):
    # The same rules read a copy of a real module with one wrong import added.
    planted = PACKAGE / importer
    copy = tmp_path / "autograd_helpers" / importer
    copy.parent.mkdir(parents=True)
    copy.write_text(planted.read_text() + f"\n{line}\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path / "autograd_helpers")
    assert _wrong_imports(copy)


def test_a_chapter_may_use_another_chapters_public_checker():
    # from autograd_helpers.checks.function import check_function, in checks/profiler/
    assert _allowed(f"{CHECKS}.profiler", f"{CHECKS}.function", "check_function")


def test_the_core_does_not_import_the_package_root():
    # `import autograd_helpers` would pull in every public module's names lazily; the core
    # must stand alone.
    offenders = [
        _name(path)
        for path in MODULES
        if _layer(_name(path)) == "core"
        and any(module == "autograd_helpers" for module, _ in _imports(path))
    ]
    assert not offenders
