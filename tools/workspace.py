"""``make workspace``: give the learner a copy of each student notebook, never overwriting one.

``workspace/`` (git-ignored) is the learner's. For each notebook in ``build/student/``:

- no copy in the workspace yet: copy it in;
- the learner's copy came from the current course version: leave it alone;
- the course changed the notebook since the learner's copy was made: leave the learner's
  copy alone and write the new version beside it as ``NAME.new.ipynb`` (or ``NAME.new-2.ipynb``
  and so on, when the learner has edited an earlier ``.new`` file), and say so.

The reference notebooks, solutions and outputs included, go to ``workspace/solutions/``,
read-only, so that JupyterLab (which serves only the workspace) can show them. They are the
course's, not the learner's: a newer version replaces one the learner has not changed; a
changed one is kept and the new version written beside it.

Which course version each copy came from is kept in ``workspace/.course-versions.json``.
Files are created with exclusive mode, so even a file that appears between the check and
the write is never overwritten.

Usage: ``python -m tools.workspace [--student build/student] [--workspace workspace]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from tools.course import REPO

MANIFEST = ".course-versions.json"

__all__ = ["MANIFEST", "sync_workspace"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _create(path: Path, data: bytes) -> bool:
    """Write ``data`` to a new file ``path``; ``False`` (and nothing written) if it exists."""
    try:
        with path.open("xb") as file:
            file.write(data)
    except FileExistsError:
        return False
    return True


def _replace_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _load_manifest(workspace: Path) -> dict[str, dict[str, str]]:
    path = workspace / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}  # a lost record costs a redundant NAME.new.ipynb, never the learner's file
    return data if isinstance(data, dict) else {}


def _place_new_version(
    workspace: Path, name: str, data: bytes, digest: str, record: dict[str, str]
) -> str:
    """Write the course's new version beside the learner's copy; return its file name."""
    stem = name.removesuffix(".ipynb")
    for attempt in range(1, 100):
        suffix = ".new" if attempt == 1 else f".new-{attempt}"
        candidate = workspace / f"{stem}{suffix}.ipynb"
        if _create(candidate, data):
            break
        current = _digest(candidate)
        if current == digest:
            break  # already there
        if current == record.get("new"):  # ours and untouched by the learner: refresh it
            _replace_atomically(candidate, data)
            break
    else:
        raise RuntimeError(f"too many {stem}.new-*.ipynb files in {workspace}; remove some")
    record["new"] = digest
    return candidate.name


SOLUTIONS = "solutions"
READ_ONLY = 0o444


def _sync_solution(source: Path, folder: Path, manifest: dict[str, dict[str, str]]) -> str | None:
    """Put a read-only copy of the reference notebook ``source`` in ``folder``."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    record = manifest.setdefault(f"{SOLUTIONS}/{source.name}", {})
    target = folder / source.name
    if _create(target, data):
        target.chmod(READ_ONLY)
        record["base"] = digest
        return f"added {SOLUTIONS}/{source.name} (read-only)"
    current = _digest(target)
    if current == digest:
        record["base"] = digest
        return None
    if current == record.get("base"):  # our previous version, untouched: replace it
        _replace_atomically(target, data)
        target.chmod(READ_ONLY)
        record["base"] = digest
        return f"updated {SOLUTIONS}/{source.name}"
    new_name = _place_new_version(folder, source.name, data, digest, record)
    (folder / new_name).chmod(READ_ONLY)
    return f"kept your changed {SOLUTIONS}/{source.name}; the course's is beside it as {new_name}"


def sync_workspace(
    student_dir: Path, workspace: Path, reference_dir: Path | None = None
) -> list[str]:
    """Bring ``workspace`` up to date with ``student_dir``; return one line per action.

    Never modifies or deletes a file that exists in ``workspace`` except its own records
    (the manifest, and a ``.new`` file it wrote that the learner has not edited) and the
    read-only reference copies in ``solutions/`` that the learner has not changed.

    Args:
        student_dir: the student notebooks (``make student`` builds them).
        workspace: the learner's folder.
        reference_dir: the reference notebooks to copy into ``workspace/solutions/``;
            ``None`` leaves ``solutions/`` alone.
    """
    if not student_dir.is_dir():
        raise FileNotFoundError(f"{student_dir} does not exist; run `make student` first")
    notebooks = sorted(student_dir.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"{student_dir} has no notebooks; run `make student` first")
    workspace.mkdir(parents=True, exist_ok=True)
    manifest = _load_manifest(workspace)
    report = []
    for source in notebooks:
        name, data = source.name, source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        record = manifest.setdefault(name, {})
        target = workspace / name
        if _create(target, data):
            record.clear()
            record["base"] = digest
            report.append(f"added {name}")
            continue
        if _digest(target) == digest or record.get("base") == digest:
            record["base"] = digest
            record.pop("new", None)
            continue  # the learner's copy is from the current course version
        new_name = _place_new_version(workspace, name, data, digest, record)
        report.append(
            f"kept your {name}; the course has a newer version of it, written beside it as "
            f"{new_name} (compare them and copy over what you want)"
        )
    if reference_dir is not None:
        (workspace / SOLUTIONS).mkdir(exist_ok=True)
        for source in sorted(reference_dir.glob("*.ipynb")):
            line = _sync_solution(source, workspace / SOLUTIONS, manifest)
            if line is not None:
                report.append(line)
    _replace_atomically(
        workspace / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.workspace", description=__doc__)
    parser.add_argument("--student", type=Path, default=REPO / "build" / "student")
    parser.add_argument("--workspace", type=Path, default=REPO / "workspace")
    parser.add_argument("--reference", type=Path, default=REPO / "notebooks")
    args = parser.parse_args(argv)
    try:
        report = sync_workspace(args.student, args.workspace, args.reference)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in report:
        print(line)
    print(f"workspace ready: {args.workspace} ({len(report)} change(s); your files are untouched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
