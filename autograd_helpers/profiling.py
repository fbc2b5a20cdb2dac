"""Where time and memory go: the profiler's table as plain rows, and fair timing comparisons.

Introduced in ``06_profiler.ipynb``; ``make bench`` times with :func:`compare` too, so the
course has one timing code path.

- :func:`profile_ops` runs ``fn`` (and the backward of its result) under
  :class:`torch.profiler.profile` inside ``record_function`` regions named ``forward`` and
  ``backward``, and returns one plain row per operator.
- :func:`compare` times several callables with :class:`torch.utils.benchmark.Timer`,
  interleaved over several rounds so that a slow spell of the machine hits all of them
  alike, and reports medians, their spread, and ratios to the first.
"""

from __future__ import annotations

import html
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from autograd_helpers._checking.validate import check_bool, check_callable, check_option
from autograd_helpers._graph_walk import graph_leaves
from autograd_helpers.notebook import QUIET_NATIVE_LOGS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PROFILE_COLUMNS", "Comparison", "ProfileReport", "Timing", "compare", "profile_ops"]

PROFILE_COLUMNS = ("name", "calls", "self_cpu_us", "total_cpu_us", "cpu_memory_bytes")
TRUSTED_SPREAD = 0.15  # a median whose rounds spread wider than this is marked as unsure


def _leaves(inputs: tuple[Any, ...]) -> list[Any]:
    return [
        x.detach().clone().requires_grad_()
        if isinstance(x, Tensor) and x.is_floating_point()
        else x
        for x in inputs
    ]


def _html_table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text_table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    table = [list(header), *rows]
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


def _barh(labels: list[str], values: list[float], *, title: str, xlabel: str) -> Figure:
    from autograd_helpers.plot import _new_figure

    figure = _new_figure(6.4, 0.45 * len(labels) + 1.2)
    axes = figure.add_subplot()
    positions = list(range(len(labels)))[::-1]  # the first at the top
    axes.barh(positions, values)
    axes.set_yticks(positions, labels)
    axes.set(title=title, xlabel=xlabel)
    axes.grid(alpha=0.3, axis="x")
    return figure


def cpu_profile(**options: Any) -> Any:
    """A ``torch.profiler.profile`` of the CPU, its native log lines silenced where possible.

    Not exported: the one place where the course's helpers (``profile_ops``, the chapter 06
    checkers) open a profiler. ``KINETO_LOG_LEVEL`` still takes effect when set here;
    ``TORCH_CPP_LOG_LEVEL`` only before ``import torch`` (see ``QUIET_NATIVE_LOGS``).
    """
    from torch.profiler import ProfilerActivity, profile

    for key, value in QUIET_NATIVE_LOGS.items():
        os.environ.setdefault(key, value)
    return profile(activities=[ProfilerActivity.CPU], **options)


# --- profile_ops ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileReport:
    """What :func:`profile_ops` measured.

    Attributes:
        rows: one dict per operator (and per ``record_function`` label), with the keys
            :data:`PROFILE_COLUMNS`, sorted by self CPU time, largest first.
        profiler: the :class:`torch.profiler.profile` object, for everything else
            (``profiler.key_averages().table(...)``, ``export_chrome_trace``).
    """

    rows: list[dict[str, Any]]
    profiler: Any

    def _cells(self, limit: int = 12) -> list[list[str]]:
        return [
            [
                str(r["name"]),
                str(r["calls"]),
                f"{r['self_cpu_us']:.1f}",
                f"{r['total_cpu_us']:.1f}",
                str(r["cpu_memory_bytes"]),
            ]
            for r in self.rows[:limit]
        ]

    def __repr__(self) -> str:
        return _text_table(PROFILE_COLUMNS, self._cells())

    def _repr_html_(self) -> str:
        return _html_table(PROFILE_COLUMNS, self._cells())

    def row(self, name: str) -> dict[str, Any]:
        """The row called ``name`` (``KeyError`` naming the ones there are, otherwise)."""
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(f"no row {name!r}; there are {[r['name'] for r in self.rows]}")

    def plot(self, top: int = 10) -> Figure:
        """The ``top`` operators by self CPU time, as horizontal bars (labels excluded)."""
        check_option("plot", "top", top, "a positive int", lambda v: v >= 1, integer=True)
        rows = [r for r in self.rows if r["name"] not in ("forward", "backward")][:top]
        return _barh(
            [str(r["name"]) for r in rows],
            [float(r["self_cpu_us"]) for r in rows],
            title="Operators by self CPU time",
            xlabel="self CPU time (µs)",
        )


def profile_ops(fn: Callable[..., Any], *inputs: Any, backward: bool = True) -> ProfileReport:
    """Profile ``fn(*inputs)`` and (by default) the backward of its result, operator by operator.

    Floating-point tensor inputs become fresh leaves that require grad. ``fn`` runs once
    before profiling, so that one-time costs (allocations, lazy initialisation) do not
    distort the table; the graph's leaves that are not among ``inputs`` (a module's
    parameters) get their ``.grad`` back as it was, so profiling changes nothing. The
    profile has ``record_shapes`` and ``profile_memory`` on; forward
    and backward sit in ``record_function`` regions called ``forward`` and ``backward``, which
    appear as rows, as do any labels ``fn`` adds itself. The profiler's own C++ log lines are
    silenced at the source (:data:`~autograd_helpers.notebook.QUIET_NATIVE_LOGS`, set in
    the kernels the course starts).

    Args:
        fn: the computation; it returns a tensor (for backward, one that requires grad).
        *inputs: its inputs.
        backward: also run and profile ``output.backward(ones_like(output))``.

    Returns:
        A :class:`ProfileReport`: ``.rows``, ``.profiler``, ``.plot()``; an HTML table in
        Jupyter.

    Example::

        >>> report = profile_ops(lambda x: (x * 2).sum(), torch.ones(3))
        >>> {"forward", "backward", "aten::mul"} <= {row["name"] for row in report.rows}
        True
    """
    check_callable("profile_ops", "fn", fn)
    check_bool("profile_ops", "backward", backward)
    from torch.profiler import record_function

    def forward(leaves: list[Any]) -> Any:
        with record_function("forward"):
            output = fn(*leaves)
        if backward and not (isinstance(output, Tensor) and output.requires_grad):
            raise TypeError(
                "profile_ops(): fn must return a tensor that requires grad for backward=True"
            )
        return output

    def run_backward(output: Tensor) -> None:
        with record_function("backward"):
            output.backward(torch.ones_like(output))

    warm = forward(_leaves(inputs))  # warm up: one-time costs stay out of the table
    # The graph's leaves (a module's parameters, say) keep their .grad: set aside now, put
    # back at the end, so the learner's model is unchanged and the profiled backward is a
    # first one (no `add_` into an old gradient, no old gradient freed during the profile).
    leaves_with_grad = graph_leaves(warm) if backward else []
    kept = [leaf.grad for leaf in leaves_with_grad]
    try:
        for leaf in leaves_with_grad:
            leaf.grad = None
        if backward:
            run_backward(warm)
        del warm
        for leaf in leaves_with_grad:
            leaf.grad = None
        leaves = _leaves(inputs)
        with cpu_profile(record_shapes=True, profile_memory=True) as profiler:
            output = forward(leaves)
            if backward:
                run_backward(output)
            del output
    finally:
        for leaf, grad in zip(leaves_with_grad, kept, strict=True):
            leaf.grad = grad
    rows = [
        {
            "name": event.key,
            "calls": int(event.count),
            "self_cpu_us": float(event.self_cpu_time_total),
            "total_cpu_us": float(event.cpu_time_total),
            "cpu_memory_bytes": int(event.cpu_memory_usage),
        }
        for event in profiler.key_averages()
    ]
    rows.sort(key=lambda r: -r["self_cpu_us"])
    return ProfileReport(rows, profiler)


# --- compare -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """One candidate's time: the median over rounds, how much the rounds spread, the ratio."""

    label: str
    median_s: float
    iqr_s: float  # interquartile range of the rounds' medians
    ratio: float  # median over the first candidate's median
    rounds: int

    @property
    def spread(self) -> float:
        """The interquartile range relative to the median."""
        return self.iqr_s / self.median_s if self.median_s > 0 else float("inf")

    @property
    def trusted(self) -> bool:
        """Whether the rounds agree well enough (spread under ``TRUSTED_SPREAD``)."""
        return self.spread <= TRUSTED_SPREAD


def _seconds(value: float) -> str:
    return f"{value * 1e6:.1f} µs" if value < 1e-3 else f"{value * 1e3:.3f} ms"


class Comparison(list[Timing]):
    """The result of :func:`compare`: a list of :class:`Timing` that displays as a table."""

    HEADER = ("candidate", "median", "IQR", "ratio to first", "")

    def _cells(self) -> list[list[str]]:
        return [
            [
                t.label,
                _seconds(t.median_s),
                _seconds(t.iqr_s),
                f"{t.ratio:.2f}×",
                "" if t.trusted else "unsure: rounds disagree",
            ]
            for t in self
        ]

    def __repr__(self) -> str:
        return _text_table(self.HEADER, self._cells())

    def _repr_html_(self) -> str:
        return _html_table(self.HEADER, self._cells())

    def timing(self, label: str) -> Timing:
        """The timing called ``label``."""
        for t in self:
            if t.label == label:
                return t
        raise KeyError(f"no candidate {label!r}; there are {[t.label for t in self]}")

    def plot(self) -> Figure:
        """Each candidate's median as a horizontal bar."""
        return _barh(
            [t.label for t in self],
            [t.median_s * 1e6 for t in self],
            title="Median time per call",
            xlabel="µs",
        )


def _step(fn: Callable[..., Any], inputs: tuple[Any, ...], backward: bool) -> Callable[[], Any]:
    leaves = _leaves(inputs) if backward else list(inputs)
    if not backward:

        def forward_only() -> Any:
            with torch.no_grad():
                return fn(*leaves)

        return forward_only
    sources = [x for x in leaves if isinstance(x, Tensor) and x.requires_grad]
    output = fn(*leaves)
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise TypeError("compare(): each candidate must return a tensor that requires grad")
    grad_output = torch.ones_like(output)

    def forward_and_backward() -> Any:
        result = fn(*leaves)
        return torch.autograd.grad(result, sources, grad_output, allow_unused=True)

    return forward_and_backward


def compare(
    candidates: Mapping[str, Callable[..., Any]],
    *inputs: Any,
    backward: bool = True,
    rounds: int = 5,
    min_run_time: float = 0.05,
) -> Comparison:
    """Time each candidate on ``inputs`` (forward, and backward by default), fairly.

    Every round times every candidate once, with
    :meth:`torch.utils.benchmark.Timer.blocked_autorange` (which warms up, picks a number of
    calls per measurement and runs for at least ``min_run_time``), starting each round
    with a different candidate. The result is the median of the rounds' medians, their
    interquartile range, and the ratio to the first candidate's median; a timing whose
    rounds spread more than 15% of its median is marked as unsure.

    Args:
        candidates: ``{label: callable}``, each taking ``*inputs``.
        *inputs: the inputs; floating-point tensors become leaves that require grad.
        backward: time forward and backward (``True``) or forward alone, under ``no_grad``.
        rounds: how many interleaved rounds (at least 1; 5 gives a usable spread).
        min_run_time: seconds each measurement runs at least.

    Returns:
        A :class:`Comparison`: a list of :class:`Timing`, a table in Jupyter, ``.plot()``.

    Example::

        >>> x = torch.randn(1000)
        >>> result = compare({"sigmoid": torch.sigmoid, "tanh": torch.tanh}, x, rounds=1)
        >>> [t.label for t in result], result[0].ratio
        (['sigmoid', 'tanh'], 1.0)
    """
    me = "compare"
    if not isinstance(candidates, Mapping) or not candidates:
        raise ValueError(f"{me}(): candidates must be a non-empty mapping of label -> callable")
    for label, candidate in candidates.items():
        check_callable(me, f"candidates[{label!r}]", candidate)
    check_bool(me, "backward", backward)
    check_option(me, "rounds", rounds, "a positive int", lambda v: v >= 1, integer=True)
    check_option(me, "min_run_time", min_run_time, "a positive number", lambda v: v > 0)
    from torch.utils import benchmark

    labels = list(candidates)
    steps = {label: _step(candidates[label], inputs, backward) for label in labels}
    medians: dict[str, list[float]] = {label: [] for label in labels}
    for round_number in range(rounds):
        order = labels[round_number % len(labels) :] + labels[: round_number % len(labels)]
        for label in order:
            timer = benchmark.Timer("step()", globals={"step": steps[label]})
            medians[label].append(float(timer.blocked_autorange(min_run_time=min_run_time).median))
    first = statistics.median(medians[labels[0]])
    result = Comparison()
    for label in labels:
        values = sorted(medians[label])
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [median] * 3
        result.append(Timing(label, median, quartiles[2] - quartiles[0], median / first, rounds))
    return result
