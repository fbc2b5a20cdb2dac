"""deploy/INSTRUCTOR-NOTES.md held to the course: a section of common mistakes for every
exercise of the registry (tools/exercises.py), quoting its answer bank, and chapter plans
that split exactly the README's chapter times.

Each failure says in one sentence which file to update and how (CONTRIBUTING.md, "Add an
exercise"), so that a contributor who adds an exercise or changes a chapter's time learns
from the test what else to write.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest

from tests.banks import banks_of
from tools.course import REPO
from tools.exercises import Exercise, course_exercises

NOTES_PATH = "deploy/INSTRUCTOR-NOTES.md"
NOTES = (REPO / NOTES_PATH).read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
EXERCISES = course_exercises()
HOW_TO = "(CONTRIBUTING.md, 'Add an exercise')"
SECTION = re.compile(r"^#### (\S+?): (.*)$", re.MULTILINE)
PLAN = re.compile(
    r"^### Time plan: (\d+) minutes \((\d+) teaching, (\d+) exercises, (\d+) break\)$",
    re.MULTILINE,
)


def chapters_of_notes() -> dict[str, str]:
    """Each chapter's part of the notes ("## 01 · ..." up to the next "## "), by number."""
    parts = re.split(r"^(?=## )", NOTES, flags=re.MULTILINE)
    return {part[3:5]: part for part in parts if re.match(r"## \d\d · ", part)}


def readme_times() -> dict[str, int]:
    """The README's chapter map: each chapter's time in minutes, by number."""
    rows = re.findall(r"^\| (\d\d) \|.*\| (\d+) min \|$", README, re.MULTILINE)
    assert rows, "README.md's chapter map has no '| NN | ... | T min |' rows"
    return {number: int(minutes) for number, minutes in rows}


def exercise_id(exercise: Exercise) -> str:
    return exercise.id


# --- a section of common mistakes per exercise -------------------------------------------------


@pytest.mark.parametrize("exercise", EXERCISES, ids=exercise_id)
def test_every_exercise_has_one_section_in_its_chapter(exercise):
    heading = f"#### {exercise.id}: {exercise.title}"
    number = exercise.id[:2]
    chapter = chapters_of_notes().get(number, "")
    found = [m for m in SECTION.finditer(NOTES) if m.group(1) == exercise.id]
    assert found, (
        f"{NOTES_PATH} has no section for {exercise.id}: add '{heading}' under chapter "
        f"{number}'s 'Common mistakes', with its table of what learners write, what the checker "
        f"says and what you can say {HOW_TO}"
    )
    assert len(found) == 1, f"{NOTES_PATH} has {len(found)} sections for {exercise.id}: keep one"
    assert found[0].group(0) == heading, (
        f"{NOTES_PATH}: the section of {exercise.id} is '{found[0].group(0)}': make it "
        f"'{heading}', the exercise's heading in {exercise.notebook.name}"
    )
    mistakes = chapter.split("### Common mistakes", 1)[-1].split("\n### ", 1)[0]
    assert "### Common mistakes" in chapter and heading in mistakes, (
        f"{NOTES_PATH}: move '{heading}' under chapter {number}'s '### Common mistakes'"
    )


def test_no_section_names_an_exercise_the_course_does_not_have():
    known = {e.id for e in EXERCISES}
    unknown = [m.group(0) for m in SECTION.finditer(NOTES) if m.group(1) not in known]
    assert not unknown, (
        f"{NOTES_PATH} has sections for exercises no notebook has: {unknown}; rename them to "
        "the id in the exercise cells' metadata, or remove them"
    )


def _table_rows(exercise: Exercise) -> list[list[str]]:
    """The rows of the exercise's table: learners write | the checker says | you can say."""
    body = NOTES.split(f"#### {exercise.id}: ", 1)[-1]
    body = re.split(r"^#{2,4} ", body, maxsplit=1, flags=re.MULTILINE)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ")]
    return [line.strip("| ").split(" | ") for line in lines[1:]]


@pytest.mark.parametrize("exercise", EXERCISES, ids=exercise_id)
def test_every_section_quotes_its_exercises_answer_bank(exercise):
    # The tables quote the verdicts the checker gives the bank's wrong answers: a table under
    # the wrong heading, or one whose bank changed entirely, quotes none of its phrases.
    if f"#### {exercise.id}: " not in NOTES:
        pytest.skip(f"no section for {exercise.id}: the test of sections says what to add")
    rows = _table_rows(exercise)
    assert rows, (
        f"{NOTES_PATH}: the section of {exercise.id} has no table: add '| learners write | the "
        f"checker says | you can say |' rows, quoting its answer bank {HOW_TO}"
    )
    (bank,) = [b for b in banks_of(exercise.id[:2]) if b.exercise == exercise.id] or [None]
    assert bank is not None, (
        f"{exercise.id} has no answer bank: add tests/banks/ex_{exercise.id.replace('-', '_')}.py "
        f"{HOW_TO}"
    )
    phrases = {a.phrase for a in bank.answers if a.phrase}
    quoted = [row[1] for row in rows if len(row) == 3 and any(p in row[1] for p in phrases)]
    assert quoted, (
        f"{NOTES_PATH}: no row of {exercise.id}'s table quotes a phrase of its answer bank "
        f"(tests/banks/ex_{exercise.id.replace('-', '_')}.py): quote the verdicts of its wrong "
        "answers in 'the checker says'"
    )


# --- the chapters' times -----------------------------------------------------------------------


@pytest.mark.parametrize("number", sorted(readme_times()))
def test_each_chapters_plan_splits_the_readmes_time(number):
    minutes = readme_times()[number]
    chapter = chapters_of_notes().get(number)
    assert chapter, f"{NOTES_PATH} has no '## {number} · ...' chapter: add its notes"
    plan = PLAN.search(chapter)
    assert plan, f"{NOTES_PATH}: chapter {number} has no '### Time plan: T minutes (...)' line"
    total, teaching, exercises, pause = map(int, plan.groups())
    assert total == minutes, (
        f"{NOTES_PATH}: chapter {number}'s time plan says {total} minutes, README.md's chapter "
        f"map {minutes}: make the plan (its line, its table, 'All the plans at a glance', 'How "
        "to use these notes' and the schedules) fit README's time"
    )
    assert teaching + exercises + pause == total, (
        f"{NOTES_PATH}: chapter {number}'s plan splits {teaching}+{exercises}+{pause} minutes, "
        f"not its {total}: fix the split"
    )
    table = chapter[plan.end() :].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d+)–(\d+) \|.*\| (\w+) \|$", table, re.MULTILINE)
    spans = [(int(start), int(end)) for start, end, _ in rows]
    assert spans and spans[0][0] == 0 and spans[-1][1] == total, (
        f"{NOTES_PATH}: chapter {number}'s plan table must run from 0 to {total} minutes"
    )
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), (
        f"{NOTES_PATH}: chapter {number}'s plan table has a gap or an overlap: {spans}"
    )
    kinds: Counter[str] = Counter()
    for (start, end), (_, _, kind) in zip(spans, rows, strict=True):
        kinds[kind.removesuffix("s")] += end - start
    assert dict(kinds) == {
        k: n for k, n in (("teaching", teaching), ("exercise", exercises), ("break", pause)) if n
    }, f"{NOTES_PATH}: chapter {number}'s plan table adds up to {dict(kinds)}, not its line"
    glance = re.search(
        rf"^\| {number} · [^|]+ \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", NOTES, re.MULTILINE
    )
    assert glance and tuple(map(int, glance.groups())) == (total, teaching, exercises, pause), (
        f"{NOTES_PATH}: 'All the plans at a glance' must say {total} | {teaching} | "
        f"{exercises} | {pause} for chapter {number}"
    )


@pytest.mark.parametrize("number", sorted(readme_times()))
def test_each_chapters_plan_gives_every_numbered_exercise_its_minutes(number):
    # The plan's exercise rows name the exercises: "Exercises 1 (`Tanh`, 7 min), 2 (...)".
    chapter = chapters_of_notes().get(number, "")
    plan = chapter.split("### Time plan", 1)[-1].split("\n### ", 1)[0]
    rows = re.findall(r"^\|.*\| exercises? \|$", plan, re.MULTILINE)
    named = {
        int(n) for row in rows for n in re.findall(r"(?:Exercises?|,|and) (\d+)\b(?! min)", row)
    }
    for exercise in (e for e in EXERCISES if e.id[:2] == number):
        numbered = re.match(r"Exercise (\d+)\b", exercise.title)
        assert numbered is None or int(numbered.group(1)) in named, (
            f"{NOTES_PATH}: chapter {number}'s time plan gives {exercise.title.split(':')[0]} "
            f"({exercise.id}) no minutes: name it in the plan's exercise rows and fit the plan "
            "to README's chapter time, or change README's chapter map, the notebook's Time and "
            f"the plan together {HOW_TO}"
        )


def test_the_notes_total_is_the_readmes():
    times = readme_times()
    listed = ", ".join(
        f"{n}: {m} min" if i == 0 else f"{n}: {m}" for i, (n, m) in enumerate(sorted(times.items()))
    )
    summary = f"({listed}; {sum(times.values())} minutes in all)"
    assert summary in " ".join(NOTES.split()), (
        f"{NOTES_PATH}: 'How to use these notes' must list the README's times as '{summary}'"
    )
    total = sum(times.values())
    assert re.search(rf"^\| \*\*total\*\* \| \*\*{total}\*\* \|", NOTES, re.MULTILINE), (
        f"{NOTES_PATH}: the total row of 'All the plans at a glance' must say {total}"
    )
