"""``results.md``: the bench's figures as Markdown tables, the headline read from ``TARGETS``."""

from __future__ import annotations

from collections.abc import Sequence

from tools.bench.results import (
    CONTAINMENT_BASELINE_MS,
    TRUSTED_SPREAD,
    ContainmentFigures,
    FunctionRow,
    MarginRow,
    NotebookFigures,
    Results,
    Workshop,
)
from tools.bench.targets import TARGETS

__all__ = ["to_markdown"]

NOTES = f"""\
A Function's time is the median of nine interleaved rounds, a Jacobian's of five
(autograd_helpers.profiling.compare); "(unsure)" marks a figure whose rounds spread by more
than 15% of the median. A notebook's wall time is the best of two fresh kernels, the floor's
the best of three.

How to read the Function table: a backward written as several elementwise operations
allocates a temporary for each. At a million elements that allocation, not the arithmetic,
dominates, and a fused built-in does the same work in one kernel. On a virtual machine whose
first-touch page faults are expensive (the course's CI machine is one), allocation-heavy code
stalls well beyond its CPU time. Backward formulas write in place only into temporaries they
created themselves, and never where a graph is being recorded; `grad_output` itself, batched
under vmap (batched gradients, `jacrev`, `hessian`), is always multiplied out of place.

Containment is the time a `check_function` call spends taking, comparing and putting back its
snapshots (torch's and the process's settings and the random states around each call into
learner code, `GlobalState`; what the learner's code reaches by name, `Contained`), in a kernel
after Run All of chapter 00, on a right `Cube`: the median of 20 calls, each part timed where
the checker calls it. The baseline, {CONTAINMENT_BASELINE_MS:g} ms of a 333 ms call (39%; the
median of four such runs, 124 to 169 ms), was measured on 2026-11-29 on the course's 2-CPU
machine, shared and under load (load average 3.5 to 6), before issue 26 made the snapshot
cheap; the target is half of it.
"""


def _seconds(value: float) -> str:
    return f"{value * 1e3:.3f} ms" if value < 1 else f"{value:.2f} s"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(title: str, header: tuple[str, ...], rows: list[str]) -> list[str]:
    return ["", f"## {title}", "", _row(*header), _row(*["---"] * len(header)), *rows]


def _slowest_check_of(checks: tuple[tuple[str, float], ...]) -> str:
    if not checks:
        return "–"
    label, seconds = max(checks, key=lambda check: check[1])
    return f"{seconds * 1e3:.0f} ms ({label})"


def _headline(results: Results) -> list[str]:
    rows = []
    for target in TARGETS:
        met = results.met.get(target.key)
        mark = "" if met is None else (" ✓" if met else " ✗")
        rows.append(_row(target.figure, target.value_text(results), target.limit_text + mark))
    return rows


def _function_row(r: FunctionRow) -> str:
    fused = "–"
    if r.fused_median_s is not None:
        fused = f"{_seconds(r.fused_median_s)} (×{r.ratio_vs_fused})"
    return _row(
        r.name,
        f"{r.numel:,}",
        _seconds(r.median_s),
        _seconds(r.builtin_median_s),
        f"×{r.ratio_vs_builtin}" + ("" if r.trusted else " (unsure)"),
        fused,
        f"{r.saved_bytes:,} / {r.builtin_saved_bytes:,}",
    )


FUNCTION_HEADER = (
    "Function",
    "elements",
    "ours",
    "built-in composition",
    "ratio",
    "fused built-in",
    "saved bytes (ours / composition)",
)


MARGIN_HEADER = (
    "exercise",
    "right answer",
    "smallest lead",
    "median lead",
    "smallest lead in the notebook's table",
    "one profile under 3×",
    "busy processes (load)",
)


def to_markdown(results: Results) -> str:
    """The whole report: machine, headline targets, then one table per measurement."""
    machine = results.machine
    lines = [
        "# Benchmark results",
        "",
        f"{machine.date} · Python {machine.python} · torch {machine.torch} · "
        f"{machine.cpus} CPUs · {machine.threads} torch thread",
        *_table("Headline figures", ("figure", "value", "target"), _headline(results)),
    ]
    if results.notebooks is not None:
        lines += _notebook_table(results.notebooks)
    if results.functions:
        rows = [_function_row(r) for r in results.functions]
        lines += _table("Teaching Functions, forward + backward (median)", FUNCTION_HEADER, rows)
    if results.jacobians:
        rows = [
            _row(
                r.method,
                r.n,
                _seconds(r.median_s) + ("" if r.spread <= TRUSTED_SPREAD else " (unsure)"),
            )
            for r in results.jacobians
        ]
        lines += _table("Jacobian strategies (median)", ("method", "n", "time"), rows)
    if results.containment is not None:
        lines += _containment_table(results.containment)
    if results.margins:
        lines += _margin_table(results.margins)
    if results.workshop is not None:
        lines += _workshop_table(results.workshop)
    return "\n".join([*lines, "", NOTES])


def _notebook_table(figures: NotebookFigures) -> list[str]:
    rows = [
        _row(
            r.name,
            f"{r.wall_s} s",
            f"{r.wall_limit_s:g} s",
            f"{r.peak_rss_mb} MB",
            _slowest_check_of(r.checks_s),
        )
        for r in figures.runs
    ]
    floor = f"{figures.floor_s} s", "–", f"{figures.floor_peak_rss_mb} MB", "–"
    rows.append(_row("*floor: import torch + autograd_helpers*", *floor))
    header = ("notebook", "wall", "limit", "peak RSS", "slowest check cell")
    return _table("Notebooks (each in a fresh kernel)", header, rows)


def _containment_table(c: ContainmentFigures) -> list[str]:
    rows = [_row(f"`{part}`", f"{ms:g} ms", calls) for part, ms, calls in c.parts]
    rows.append(_row("*containment*", f"{c.containment_ms:g} ms ({c.share:.0%})", "–"))
    rows.append(_row("*the whole call*", f"{c.check_ms:g} ms", "–"))
    title = f"Containment in a `check_function` call (after Run All of {c.notebook})"
    return _table(title, ("part", "time in one call (median)", "calls in one call"), rows)


def _margin_table(margins: Sequence[MarginRow]) -> list[str]:
    rows = [
        _row(
            m.exercise,
            f"`{m.right}`",
            f"{m.smallest}×",
            f"{m.median}×",
            f"{m.table_smallest}×",
            f"{m.one_profile_below} of {m.runs}",
            f"{m.busy} ({m.load})",
        )
        for m in margins
    ]
    return _table("Chapter 06's timing exercises on a busy machine", MARGIN_HEADER, rows)


def _workshop_table(w: Workshop) -> list[str]:
    rows = [
        _row(f"learner {k}", f"{server} MB", f"{kernel} MB", f"{server + kernel:.1f} MB")
        for k, (server, kernel) in enumerate(zip(w.server_mb, w.kernel_mb, strict=True))
    ]
    rows.append(_row("*the hub and its proxy*", f"{w.hub_mb} MB", "–", "–"))
    title = f"Workshop: {w.learners} learners run {w.chapter} at once ({w.wall_s} s)"
    return _table(title, ("unique memory (USS)", "server", "kernel", "learner"), rows)
