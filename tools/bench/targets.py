"""The one table of ``make bench``'s targets, and the verdict on a run's figures.

Each :class:`Target` says what it reads from the :class:`~tools.bench.results.Results`, its
limit, and how the report writes it: the checks, ``results.json`` and ``results.md`` all read
the same table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools.bench.results import (
    CHECK_LIMIT_S,
    CONTAINMENT_BASELINE_MS,
    MARGIN_GOAL,
    NOTEBOOK_PEAK_LIMIT_MB,
    WORKSHOP_GOAL,
    Results,
)

__all__ = ["TARGETS", "Target", "judge"]


@dataclass(frozen=True)
class Target:
    """A figure, read from the results by ``value``, that must stay below ``limit``.

    ``value`` returns ``None`` when this run did not measure the figure (``--skip-tests``);
    such a target is left out of the verdicts. With ``at_least`` the figure must reach the
    limit instead (a count of learners).
    """

    key: str
    figure: str  # the report's row label
    limit: float
    limit_text: str  # "< 3", "≤ 1.5×"
    value: Callable[[Results], float | None]
    value_text: Callable[[Results], str]
    inclusive: bool = False
    at_least: bool = False

    def met(self, results: Results) -> bool | None:
        value = self.value(results)
        if value is None:
            return None
        if self.at_least:
            return value >= self.limit
        return value <= self.limit if self.inclusive else value < self.limit


def _ratio_at_a_million(results: Results) -> float | None:
    worst = results.worst_function_at_a_million()
    return None if worst is None else worst.ratio_vs_builtin


def _ratio_text(results: Results) -> str:
    worst = results.worst_function_at_a_million()
    if worst is None:
        return "–"
    unsure = "" if worst.trusted else ", unsure: its rounds spread widely"
    return f"{worst.ratio_vs_builtin}× ({worst.name}{unsure})"


def _slowest_share(results: Results) -> float | None:
    run = results.slowest_notebook()
    return None if run is None else run.wall_s / run.wall_limit_s


def _slowest_text(results: Results) -> str:
    run = results.slowest_notebook()
    return "–" if run is None else f"{run.wall_s} s ({run.name}, limit {run.wall_limit_s:g} s)"


def _slowest_check(results: Results) -> float | None:
    cell = results.slowest_check()
    return None if cell is None else cell[1]


def _slowest_check_text(results: Results) -> str:
    cell = results.slowest_check()
    return "–" if cell is None else f"{cell[1] * 1e3:.0f} ms ({cell[0]})"


def _containment_text(results: Results) -> str:
    c = results.containment
    if c is None:
        return "–"
    return f"{c.containment_ms:g} ms ({c.share:.0%} of a {c.check_ms:g} ms call)"


def _heaviest(results: Results) -> float | None:
    run = results.heaviest_notebook()
    return None if run is None else run.peak_rss_mb


def _heaviest_text(results: Results) -> str:
    run = results.heaviest_notebook()
    return "–" if run is None else f"{run.peak_rss_mb} MB ({run.name})"


def _seconds(value: float) -> str:
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def _test_seconds(results: Results) -> float | None:
    if results.tests is None:
        return None
    return results.tests.seconds if results.tests.passed else float("inf")


def _test_text(results: Results) -> str:
    if results.tests is None:
        return "–"
    return f"{results.tests.seconds} s" + ("" if results.tests.passed else " (FAILED)")


def _workshop_text(results: Results) -> str:
    w = results.workshop
    if w is None:
        return "–"
    return (
        f"{w.learners_on_16_gb} ({w.per_learner_mb:.0f} MB a learner, {w.learners} at once "
        f"in {w.wall_s} s)"
    )


def _margin(results: Results) -> float | None:
    row = results.narrowest_margin()
    return None if row is None else row.smallest


def _margin_text(results: Results) -> str:
    row = results.narrowest_margin()
    if row is None:
        return "–"
    return f"{row.smallest}× ({row.exercise}, {row.busy} busy processes, load {row.load})"


TARGETS = (
    Target(
        "course_over_floor",
        "course / (floor × notebooks)",
        3.0,
        "< 3",
        lambda r: None if r.notebooks is None else r.notebooks.course_over_floor,
        lambda r: "–" if r.notebooks is None else str(r.notebooks.course_over_floor),
    ),
    Target(
        "notebook_wall",
        "slowest notebook against its own limit",
        1.0,
        "each under its limit",
        _slowest_share,
        _slowest_text,
    ),
    Target(
        "notebook_peak_rss_mb",
        "largest peak memory of a notebook's kernel",
        NOTEBOOK_PEAK_LIMIT_MB,
        f"< {NOTEBOOK_PEAK_LIMIT_MB:g} MB",
        _heaviest,
        _heaviest_text,
    ),
    Target(
        "check_call_s",
        "slowest checker call, probes included (a notebook's check cell)",
        CHECK_LIMIT_S,
        f"< {CHECK_LIMIT_S * 1e3:g} ms",
        _slowest_check,
        _slowest_check_text,
    ),
    Target(
        "containment_ms",
        "containment in a `check_function` call (chapter 00's `Cube`, after Run All)",
        CONTAINMENT_BASELINE_MS / 2,
        f"< {CONTAINMENT_BASELINE_MS / 2:g} ms (half of the baseline)",
        lambda r: None if r.containment is None else r.containment.containment_ms,
        _containment_text,
    ),
    Target(
        "import_overhead_s",
        "`import autograd_helpers` on top of torch (best of 15 processes)",
        0.3,
        "< 0.3 s",
        lambda r: None if r.imports is None else r.imports.import_overhead_s,
        lambda r: "–" if r.imports is None else _seconds(r.imports.import_overhead_s),
    ),
    Target(
        "ratio_vs_builtin_at_1e6",
        "worst Function / built-in composition at 10⁶ elements",
        1.5,
        "≤ 1.5×",
        _ratio_at_a_million,
        _ratio_text,
        inclusive=True,
    ),
    Target(
        "widget_update_s",
        "gradcheck explorer: redraw after a change (median)",
        0.1,
        "< 100 ms",
        lambda r: r.widget_update_s,
        lambda r: "–" if r.widget_update_s is None else _seconds(r.widget_update_s),
    ),
    Target(
        "timing_margin",
        "chapter 06: the right answer's smallest lead under load (fastest of several runs)",
        MARGIN_GOAL,
        f"≥ {MARGIN_GOAL:g}×",
        _margin,
        _margin_text,
        at_least=True,
    ),
    Target(
        "make_test_s",
        "`make test`, installed",
        300.0,
        "< 300 s",
        _test_seconds,
        _test_text,
    ),
    Target(
        "workshop_learners_on_16_gb",
        "workshop: learners a 16 GB host holds (chapter 01 through the hub)",
        WORKSHOP_GOAL,
        f"≥ {WORKSHOP_GOAL}",
        lambda r: None if r.workshop is None else r.workshop.learners_on_16_gb,
        _workshop_text,
        at_least=True,
    ),
)


def judge(results: Results) -> dict[str, bool]:
    """``{target key: met}`` for every target this run measured; stored in ``results.met``."""
    verdicts = {target.key: target.met(results) for target in TARGETS}
    return {key: met for key, met in verdicts.items() if met is not None}
