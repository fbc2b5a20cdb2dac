"""``python -m tools.progress``: which exercises are passed, tried or not started.

Every checker verdict in a learner's own notebooks is a line of their progress log when
``COURSE_PROGRESS_LOG`` is set (``make lab`` and the workshop hub set it to
``~/course-progress.jsonl``). An exercise is *passed* when a verdict passed, *tried* when
verdicts failed and none passed, and *not started* otherwise: running a checker on the
untouched stub ("not implemented yet") is not trying.

- **You**, learning on your own: ``python -m tools.progress`` prints your table, every
  exercise of the seven chapters in course order (``--log PATH`` reads another log).
- **An instructor**: ``JUPYTERHUB_URL=https://hub.example.org JUPYTERHUB_API_TOKEN=...
  python -m tools.progress`` (or ``--hub URL``) reads every learner's log through the hub's
  API, prints the learner × exercise table and writes it as CSV (``--csv progress.csv``).
  The token needs the scopes ``list:users``, ``read:users`` and ``access:servers``.

Usage: ``python -m tools.progress [--log PATH] [--hub URL] [--csv PATH]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.exercises import Exercise, course_exercises
from tools.progress_hub import HubError, read_logs

__all__ = [
    "LOG_NAME",
    "Exercise",
    "Progress",
    "class_table",
    "course_exercises",
    "learner_table",
    "main",
    "parse_log",
    "write_csv",
]

LOG_NAME = "course-progress.jsonl"  # in the learner's home: not a dotfile, Jupyter serves it
PASSED, TRIED, NOT_STARTED = "passed", "tried", "not started"
MARKS = {PASSED: "ok", TRIED: "~", NOT_STARTED: "-"}  # the class table's cells, ASCII


@dataclass
class Progress:
    """One log, read: each exercise's state, and the lines that could not be used."""

    states: dict[str, str] = field(default_factory=dict)  # exercise id -> passed or tried
    malformed: list[int] = field(default_factory=list)  # line numbers skipped
    unknown: set[str] = field(default_factory=set)  # exercise ids not in this course

    def state(self, exercise: str) -> str:
        return self.states.get(exercise, NOT_STARTED)


def parse_log(text: str, known: Iterable[str]) -> Progress:
    """Each exercise's state from a log's text; malformed lines are skipped and counted."""
    progress, course = Progress(), set(known)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            verdict = json.loads(line)
        except ValueError:
            verdict = None
        if not (
            isinstance(verdict, dict)
            and isinstance(verdict.get("exercise"), str)
            and isinstance(verdict.get("passed"), bool)
            and isinstance(verdict.get("status", ""), str)
        ):
            progress.malformed.append(number)
            continue
        exercise = verdict["exercise"]
        if exercise not in course:
            progress.unknown.add(exercise)
        elif verdict["passed"]:
            progress.states[exercise] = PASSED
        elif verdict.get("status") != "not implemented" and exercise not in progress.states:
            progress.states[exercise] = TRIED
    return progress


def _counts(states: Iterable[str]) -> dict[str, int]:
    listed = list(states)
    return {state: listed.count(state) for state in (PASSED, TRIED, NOT_STARTED)}


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in counts.items())


def learner_table(exercises: Sequence[Exercise], progress: Progress) -> str:
    """One learner's table: each chapter's exercises with their state, and the counts."""
    width = max(len(e.id) for e in exercises)
    lines: list[str] = []
    for chapter in dict.fromkeys(e.chapter_title for e in exercises):
        mine = [e for e in exercises if e.chapter_title == chapter]
        counts = _counts(progress.state(e.id) for e in mine)
        lines.append(f"{chapter}  ({counts[PASSED]} of {len(mine)} passed)")
        lines += [f"  {progress.state(e.id):<11}  {e.id:<{width}}  {e.title}" for e in mine]
    total = _counts(progress.state(e.id) for e in exercises)
    lines.append(f"\n{len(exercises)} exercises: {_summary(total)}.")
    return "\n".join(lines)


def class_table(exercises: Sequence[Exercise], learners: dict[str, tuple[Progress, str]]) -> str:
    """The learner × exercise table (``ok`` passed, ``~`` tried, ``-`` not started)."""
    name_width = max([len("learner"), *(len(name) for name in learners)])
    header = [f"{'learner':<{name_width}}", *(f"{e.key:<3}" for e in exercises), "passed  note"]
    lines = [" ".join(header)]
    for name, (progress, note) in learners.items():
        marks = [f"{MARKS[progress.state(e.id)]:<3}" for e in exercises]
        passed = _counts(progress.state(e.id) for e in exercises)[PASSED]
        lines.append(" ".join([f"{name:<{name_width}}", *marks, f"{passed:>6}  {note}"]))
    legend = ", ".join(f"{mark} {state}" for state, mark in MARKS.items())
    lines += ["", f"({legend})", *(f"{e.key:>4}  {e.id}: {e.title}" for e in exercises)]
    return "\n".join(line.rstrip() for line in lines)


def write_csv(
    path: Path, exercises: Sequence[Exercise], learners: dict[str, tuple[Progress, str]]
) -> None:
    """The learner × exercise table as CSV: a row per learner, a column per exercise id."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["learner", *(e.id for e in exercises), PASSED, TRIED, NOT_STARTED, "note"])
        for name, (progress, note) in learners.items():
            states = [progress.state(e.id) for e in exercises]
            writer.writerow([_inert(name), *states, *_counts(states).values(), _inert(note)])


def _inert(text: str) -> str:
    """``text`` that a spreadsheet will not run as a formula (a name like ``=1+1``)."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@") else text


def _skipped(progress: Progress, where: str) -> list[str]:
    notes = []
    if progress.malformed:
        first = progress.malformed[0]
        notes.append(
            f"{where}: skipped {len(progress.malformed)} malformed line(s) (first: line {first})"
        )
    if progress.unknown:
        notes.append(
            f"{where}: ignored verdicts for exercises not in this course: "
            + ", ".join(sorted(progress.unknown))
        )
    return notes


def _own(log: Path, exercises: Sequence[Exercise], csv_path: Path | None) -> int:
    try:
        text = log.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
        print(
            f"note: no progress log at {log} yet, so every exercise shows as not started. "
            "Checkers write it when COURSE_PROGRESS_LOG is set (make lab sets it).",
            file=sys.stderr,
        )
    except OSError as exc:
        print(f"error: cannot read {log}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    progress = parse_log(text, (e.id for e in exercises))
    for note in _skipped(progress, str(log)):
        print(f"note: {note}", file=sys.stderr)
    print(f"Your progress, from {log}\n")
    print(learner_table(exercises, progress))
    if csv_path is not None:
        write_csv(csv_path, exercises, {"you": (progress, "")})
        print(f"\nwrote {csv_path}")
    return 0


def _class(hub: str, token: str, exercises: Sequence[Exercise], csv_path: Path) -> int:
    try:
        logs = read_logs(hub, token, LOG_NAME)
    except HubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    learners: dict[str, tuple[Progress, str]] = {}
    for log in logs:
        progress = parse_log(log.text or "", (e.id for e in exercises))
        notes = [note for note in (log.note, *_skipped(progress, "log")) if note]
        learners[log.learner] = (progress, "; ".join(notes))
    print(f"Progress of {len(learners)} learner(s), read through {hub}\n")
    print(class_table(exercises, learners) if learners else "(the hub lists no learners)")
    write_csv(csv_path, exercises, learners)
    print(f"\nwrote {csv_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.progress",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log", type=Path, help=f"your log (default: ~/{LOG_NAME})")
    parser.add_argument("--hub", help="the hub's URL, for an instructor (or JUPYTERHUB_URL)")
    parser.add_argument("--csv", type=Path, help="write the table as CSV (hub: progress.csv)")
    args = parser.parse_args(argv)
    exercises = course_exercises()
    hub = args.hub or os.environ.get("JUPYTERHUB_URL")
    if hub:
        if args.log is not None:
            parser.error("--log reads your own log; with a hub, logs come from the hub")
        token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
        return _class(hub, token, exercises, args.csv or Path("progress.csv"))
    default = os.environ.get("COURSE_PROGRESS_LOG") or f"~/{LOG_NAME}"
    return _own((args.log or Path(default)).expanduser(), exercises, args.csv)


if __name__ == "__main__":
    sys.exit(main())
