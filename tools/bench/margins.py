"""How far chapter 06's right answers lead on a busy machine: the timing exercises' margins.

Chapter 06 asks two questions about time: the slowest region of a training step
(``06-regions``, right: ``"data"``) and the operator with the most self time in backward
(``06-dominant-op``, right: ``"aten::fill_"``). No right answer may fail because the machine
is busy, and a workshop puts 40 learners on one host. So the workloads must give the right
answer a lead of at least :data:`~autograd_helpers.checks.profiler._margin.DECISIVE` (3×)
over the runner-up at load 8, measured as the checker measures: each row's fastest of several
runs. This runs the notebook's own cells (its setup, then the exercises' code), starts
``busy`` processes that spin on the CPU, and measures the lead ``runs`` times; it also says
how the one-run view fares, which is why the checkers read the fastest of several.

``python -m tools.bench.margins [--runs 10] [--busy 8]`` runs it alone (a script, not a
timed test: no test asserts on wall time); ``make bench`` runs it too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from autograd_helpers._profile_events import raw_events, regions_named
from autograd_helpers.checks.profiler._dominant import Backward, backward_runs
from autograd_helpers.checks.profiler._margin import fastest
from autograd_helpers.checks.profiler._regions import LABELS, StepProfile, profile_steps
from autograd_helpers.profiling import cpu_profile, profile_ops
from tools.bench.results import MARGIN_GOAL, MarginRow
from tools.course import NOTEBOOKS
from tools.exercises import course_exercises

__all__ = ["busy", "exercise_namespace", "measure_margins"]

CHAPTER = NOTEBOOKS / "06_profiler.ipynb"
RUNS = 5  # the notebook profiles the bag-of-words loss five times, in one profile


def _spin() -> None:  # pragma: no cover - runs in the busy processes
    while True:
        pass


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` processes that keep a core busy each, for as long as the block runs."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join()


def exercise_namespace() -> dict[str, Any]:
    """Notebook 06's setup cell and the code of its exercises, run here.

    From the exercises' section up to its last checker cell, leaving out the checker cells
    and the cells that print timings (tagged ``nbval-ignore-output``); what the cells print
    is swallowed. The names the exercises use (``labelled_step``, ``net``, ``sgd``,
    ``samples``, ``bag_loss``, ``indices``) come from the notebook itself, so what is
    measured is what learners run.
    """
    cells = json.loads(CHAPTER.read_text())["cells"]
    checks = {e.check for e in course_exercises([CHAPTER])}
    start = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## 6."))
    chosen = [next(c for c in cells if c["cell_type"] == "code")] + [
        c
        for i, c in enumerate(cells[: max(checks)])
        if i >= start
        and c["cell_type"] == "code"
        and i not in checks
        and "nbval-ignore-output" not in c["metadata"].get("tags", [])
    ]
    namespace: dict[str, Any] = {"__name__": "chapter06"}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in chosen:
            exec(compile("".join(cell["source"]), str(CHAPTER), "exec"), namespace)
    return namespace


def _lead(times: dict[str, float], right: str) -> float:
    """How many times the right row's time is the runner-up's (below 1: another leads)."""
    others = max(t for row, t in times.items() if row != right)
    return times[right] / others


Times = dict[str, float]
TABLE_STEPS = 3  # the notebook's table cell profiles three steps


def _region_times(ns: dict[str, Any]) -> tuple[Times, Times, Times]:
    """The checker's measurement, the notebook's table, and one step alone."""
    profile = profile_steps(ns["labelled_step"], ns["net"], ns["sgd"], ns["samples"])
    if not isinstance(profile, StepProfile):
        raise RuntimeError(f"the notebook's labelled_step raised: {profile.error}")
    measured = fastest({label.name: label.cpu_time_total} for label in profile.labels)
    with cpu_profile() as table:
        for _ in range(TABLE_STEPS):
            ns["labelled_step"](ns["net"], ns["sgd"], ns["samples"])
    labels = [
        {label.name: label.cpu_time_total} for label in regions_named(raw_events(table), LABELS)
    ]
    first = {name: total for run in labels[: len(LABELS)] for name, total in run.items()}
    return measured, fastest(labels), first


def _operator_times(ns: dict[str, Any]) -> tuple[Times, Times, Times]:
    """Backward's operators, each its fastest of the notebook's five runs (what the checker
    and the notebook's table read), and one run alone."""
    report = profile_ops(ns["bag_loss"], ns["indices"], runs=RUNS)
    both = Backward.read([report]).operators
    first, _ = backward_runs(report)[0]
    return both, both, {op: t for op, t in first.items() if op.startswith("aten::")}


def measure_margins(runs: int = 10, processes: int = 8) -> tuple[MarginRow, ...]:
    """Each timing exercise's lead, over ``runs`` runs with ``processes`` busy processes."""
    if runs < 1 or processes < 0:
        raise ValueError(f"runs must be ≥ 1 and processes ≥ 0, got {runs} and {processes}")
    torch.set_num_threads(1)  # as the notebooks run
    ns = exercise_namespace()
    exercises: tuple[tuple[str, str, Callable[[dict[str, Any]], tuple[Times, ...]]], ...] = (
        ("06-regions", "data", _region_times),
        ("06-dominant-op", "aten::fill_", _operator_times),
    )
    leads: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in exercises}
    with busy(processes):
        for _ in range(runs):
            for name, right, times in exercises:
                checker, table, one = (_lead(t, right) for t in times(ns))
                leads[name].append((checker, table, one))
        load = os.getloadavg()[0]
    return tuple(
        MarginRow(
            exercise=name,
            right=right,
            runs=runs,
            busy=processes,
            load=round(load, 1),
            smallest=round(min(lead[0] for lead in leads[name]), 2),
            median=round(statistics.median(lead[0] for lead in leads[name]), 2),
            table_smallest=round(min(lead[1] for lead in leads[name]), 2),
            one_profile_below=sum(lead[2] < MARGIN_GOAL for lead in leads[name]),
        )
        for name, right, _ in exercises
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.margins", description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", type=int, default=8, help="processes that spin on the CPU")
    args = parser.parse_args(argv)
    for row in measure_margins(args.runs, args.busy):
        print(
            f"{row.exercise}: '{row.right}' leads the runner-up by {row.smallest}× at the "
            f"least, {row.median}× in the median of {row.runs} runs, as the checker reads it "
            f"(each row's fastest of several runs); in the notebook's table by "
            f"{row.table_smallest}× at the least; one run alone: under 3× in "
            f"{row.one_profile_below} of {row.runs}. {row.busy} busy processes, load {row.load}."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
