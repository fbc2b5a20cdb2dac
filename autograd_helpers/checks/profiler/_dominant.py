"""``check_dominant_op`` as named checks: why an answer is not backward's dominant operator.

:class:`Backward` reads the profiles once: each row's self and total CPU time under the
``backward`` region, summed over its calls, and the rows of the whole reports. Given several
runs of the same computation (a report of several runs, ``profile_ops(..., runs=5)``, or
several reports), each row's time is its fastest over them, as the notebook's table shows
it: on a busy machine one run can credit any row with milliseconds it spent waiting for a
core, and another program can only add time (``_margin``). The answer
passes when it names an operator within :data:`NEAR_TIE` of the largest self time. Else the
checks of :data:`WHY_NOT`, one small function per kind of wrong answer, run in order, and
the first that recognises the answer explains it.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autograd_helpers._profile_events import descendants
from autograd_helpers.checks.profiler._margin import NEAR_TIE, fastest
from autograd_helpers.profiling import ProfileReport

__all__ = ["NEAR_TIE", "WHY_NOT", "Backward", "backward_runs"]

_NODE_SUFFIXES = ("Backward0", "Backward1", "AccumulateGrad")


@dataclass(frozen=True)
class Backward:
    """Self and total CPU time (µs) of each row under the ``backward`` region."""

    self_times: dict[str, float]
    total_times: dict[str, float]
    rows: frozenset[str]  # every row of the reports, forward's included
    runs: int = 1  # how many runs each time is the fastest of

    @classmethod
    def read(cls, reports: Sequence[ProfileReport]) -> Backward:
        """Each row's fastest time over the runs of ``reports`` (of one computation)."""
        runs = [run for report in reports for run in backward_runs(report)]
        self_times = fastest(own for own, _ in runs)
        total_times = fastest(total for _, total in runs)
        rows = frozenset(str(row["name"]) for report in reports for row in report.rows)
        return cls(self_times, total_times, rows, len(runs))

    @property
    def operators(self) -> dict[str, float]:
        return {op: t for op, t in self.self_times.items() if op.startswith("aten::")}

    @property
    def top(self) -> str:
        return max(self.operators, key=lambda op: self.operators[op])

    def dominates(self, name: str) -> bool:
        ops = self.operators
        return name in ops and ops[name] >= NEAR_TIE * ops[self.top]

    def spelled(self, name: str) -> str:
        """``name`` as the profile spells it: the ``aten::`` prefix and the case put right."""
        known = {row.casefold(): row for row in (*self.self_times, *self.rows)}
        for candidate in (name, f"aten::{name}"):
            if candidate.casefold() in known:
                return known[candidate.casefold()]
        return name


Times = dict[str, float]


def backward_runs(report: ProfileReport) -> list[tuple[Times, Times]]:
    """Self and total CPU time (µs) of each row under each of the report's ``backward``
    regions: one pair per run, in the order they ran."""
    runs = []
    regions = [e for e in report.profiler.events() if e.name == "backward" and not e.cpu_parent]
    for region in sorted(regions, key=lambda e: e.time_range.start):
        self_times: Times = defaultdict(float)
        total_times: Times = defaultdict(float)
        for child in descendants(region):
            self_times[str(child.name)] += float(child.self_cpu_time_total)
            total_times[str(child.name)] += float(child.cpu_time_total)
        runs.append((dict(self_times), dict(total_times)))
    return runs


WhyNot = Callable[[str, Backward], str | None]


def _several(name: str, profile: Backward) -> str | None:
    if not any(sep in name for sep in (",", " or ", " and ", ";")):
        return None
    return "name one operator: the question asks for the one with the most self time."


def _a_label(name: str, profile: Backward) -> str | None:
    if name not in ("forward", "backward"):
        return None
    return "that is a label (a region), not an operator: look at the rows inside backward."


def _a_backward_node(name: str, profile: Backward) -> str | None:
    if not (
        name.startswith("autograd::engine::evaluate_function") or name.endswith(_NODE_SUFFIXES)
    ):
        return None
    return (
        "that is a backward node (the step autograd runs), not an operator: its total "
        "includes the operators it calls. Which `aten::` operator has the most *self* time?"
    )


def _not_an_operator(name: str, profile: Backward) -> str | None:
    if name.startswith("aten::") or name not in profile.rows | profile.self_times.keys():
        return None
    return (
        f"`{name}` is a row of the table, but not an operator: operators are the rows whose "
        "names start with `aten::`."
    )


def _large_total(name: str, profile: Backward) -> str | None:
    ops = profile.operators
    if name not in ops or profile.total_times[name] < NEAR_TIE * ops[profile.top]:
        return None
    return (
        f"`{name}` has a large *total* ({profile.total_times[name] / 1000:.2f} ms), but most of "
        f"it is spent in operators it calls (its self time is {ops[name] / 1000:.2f} ms). "
        "Sort by self time: which operator does the work?"
    )


def _small(name: str, profile: Backward) -> str | None:
    ops = profile.operators
    if name not in ops:
        return None
    return (
        f"`{name}` runs in backward, but with {ops[name] / 1000:.2f} ms of self time it is not "
        "the largest. Sort the rows by self CPU time."
    )


def _forward_only(name: str, profile: Backward) -> str | None:
    if name not in profile.rows:
        return None
    return f"`{name}` runs in forward only: the question is about backward."


def _unknown(name: str, profile: Backward) -> str:
    close = difflib.get_close_matches(name, sorted(profile.operators), n=1, cutoff=0.75)
    maybe = f" Did you mean `{close[0]}`?" if close else ""
    return (
        f"there is no operator called {name!r} in this profile: copy a name from the Name "
        f"column (operators start with `aten::`).{maybe}"
    )


WHY_NOT: tuple[WhyNot, ...] = (
    _several,
    _a_label,
    _a_backward_node,
    _not_an_operator,
    _large_total,
    _small,
    _forward_only,
    _unknown,
)
