"""tools.workspace: the learner's files are never overwritten; course updates go beside them."""

from __future__ import annotations

import json

import pytest

from tools.workspace import MANIFEST, main, sync_workspace


@pytest.fixture
def dirs(tmp_path):
    student, workspace = tmp_path / "student", tmp_path / "workspace"
    student.mkdir()
    (student / "00_start.ipynb").write_text('{"course": 1}')
    (student / "01_next.ipynb").write_text('{"course": 1, "chapter": 1}')
    return student, workspace


def test_first_run_copies_every_notebook(dirs):
    student, workspace = dirs
    report = sync_workspace(student, workspace)
    assert report == ["added 00_start.ipynb", "added 01_next.ipynb"]
    assert (workspace / "00_start.ipynb").read_text() == '{"course": 1}'
    assert (workspace / MANIFEST).is_file()


def test_second_run_leaves_a_learners_edited_file_alone(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (workspace / "00_start.ipynb").write_text('{"my": "work"}')
    assert sync_workspace(student, workspace) == []
    assert (workspace / "00_start.ipynb").read_text() == '{"my": "work"}'
    assert sorted(p.name for p in workspace.iterdir()) == [
        MANIFEST,
        "00_start.ipynb",
        "01_next.ipynb",
    ]


def test_a_deleted_copy_comes_back_fresh(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (workspace / "00_start.ipynb").unlink()
    assert sync_workspace(student, workspace) == ["added 00_start.ipynb"]


def test_a_course_update_is_written_beside_the_learners_copy(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (workspace / "00_start.ipynb").write_text('{"my": "work"}')
    (student / "00_start.ipynb").write_text('{"course": 2}')
    report = sync_workspace(student, workspace)
    assert len(report) == 1 and "kept your 00_start.ipynb" in report[0]
    assert "00_start.new.ipynb" in report[0]
    assert (workspace / "00_start.ipynb").read_text() == '{"my": "work"}'
    assert (workspace / "00_start.new.ipynb").read_text() == '{"course": 2}'

    # Another update refreshes the untouched .new file.
    (student / "00_start.ipynb").write_text('{"course": 3}')
    sync_workspace(student, workspace)
    assert (workspace / "00_start.new.ipynb").read_text() == '{"course": 3}'

    # A .new file the learner edited is kept too; the next update goes to .new-2.
    (workspace / "00_start.new.ipynb").write_text('{"my": "notes"}')
    (student / "00_start.ipynb").write_text('{"course": 4}')
    report = sync_workspace(student, workspace)
    assert "00_start.new-2.ipynb" in report[0]
    assert (workspace / "00_start.new.ipynb").read_text() == '{"my": "notes"}'
    assert (workspace / "00_start.new-2.ipynb").read_text() == '{"course": 4}'
    assert (workspace / "00_start.ipynb").read_text() == '{"my": "work"}'


def test_adopting_the_new_version_ends_the_notices(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (student / "00_start.ipynb").write_text('{"course": 2}')
    (workspace / "00_start.ipynb").write_text('{"my": "work"}')
    sync_workspace(student, workspace)
    (workspace / "00_start.new.ipynb").replace(workspace / "00_start.ipynb")
    assert sync_workspace(student, workspace) == []


def test_an_unedited_copy_of_an_old_version_is_still_not_overwritten(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (student / "01_next.ipynb").write_text('{"course": 2}')
    report = sync_workspace(student, workspace)
    assert "01_next.new.ipynb" in report[0]
    assert (workspace / "01_next.ipynb").read_text() == '{"course": 1, "chapter": 1}'


def test_a_damaged_or_missing_record_never_costs_the_learners_file(dirs):
    student, workspace = dirs
    sync_workspace(student, workspace)
    (workspace / "00_start.ipynb").write_text('{"my": "work"}')
    (workspace / MANIFEST).write_text("{not json")
    report = sync_workspace(student, workspace)
    assert (workspace / "00_start.ipynb").read_text() == '{"my": "work"}'
    assert "00_start.new.ipynb" in report[0]
    assert json.loads((workspace / MANIFEST).read_text())["00_start.ipynb"]["new"]


def test_missing_student_build_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="make student"):
        sync_workspace(tmp_path / "nope", tmp_path / "workspace")
    (tmp_path / "empty").mkdir()
    assert main(["--student", str(tmp_path / "empty"), "--workspace", str(tmp_path / "w")]) == 1
    assert "has no notebooks" in capsys.readouterr().err


@pytest.fixture
def references(tmp_path):
    folder = tmp_path / "reference"
    folder.mkdir()
    (folder / "00_start.ipynb").write_text('{"solution": 1}')
    return folder


def test_solutions_are_copied_read_only(dirs, references):
    student, workspace = dirs
    report = sync_workspace(student, workspace, references)
    assert "added solutions/00_start.ipynb (read-only)" in report
    solution = workspace / "solutions" / "00_start.ipynb"
    assert solution.read_text() == '{"solution": 1}'
    assert solution.stat().st_mode & 0o777 == 0o444


def test_an_untouched_solution_is_updated_a_changed_one_kept(dirs, references):
    student, workspace = dirs
    sync_workspace(student, workspace, references)
    (references / "00_start.ipynb").write_text('{"solution": 2}')
    assert "updated solutions/00_start.ipynb" in sync_workspace(student, workspace, references)
    solution = workspace / "solutions" / "00_start.ipynb"
    assert solution.read_text() == '{"solution": 2}'

    solution.chmod(0o644)  # a learner who insists on writing into it
    solution.write_text('{"my": "notes"}')
    (references / "00_start.ipynb").write_text('{"solution": 3}')
    report = sync_workspace(student, workspace, references)
    assert any("kept your changed solutions/00_start.ipynb" in line for line in report)
    assert solution.read_text() == '{"my": "notes"}'
    assert (workspace / "solutions" / "00_start.new.ipynb").read_text() == '{"solution": 3}'
