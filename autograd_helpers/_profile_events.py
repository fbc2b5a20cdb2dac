"""Reading a profile's event tree: how ``ah.profiling`` and chapter 06's checkers see it.

A profiler event knows its parent (``cpu_parent``) and its children (``cpu_children``): a
region's work is what lies under it, and an operator's region is the nearest labelled
ancestor. :func:`flat_events` reads that tree straight from the profiler's raw records,
some thirty times faster than ``profiler.events()`` (which builds a Python object of many
fields per event), as columns of plain values that name each event's parent by index: a
training step with a per-sample loop records thousands of events, and a checker answers in
a fraction of a second without handing thousands of objects to the garbage collector.
:func:`light_events` makes the same tree of objects, for code that walks it;
:func:`regions_named` reads a few regions without the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Event",
    "EventTable",
    "Span",
    "ancestors",
    "descendants",
    "flat_events",
    "is_operator",
    "light_events",
    "places",
    "raw_events",
    "region_of",
    "regions_named",
]


# Rows that ``profiler.events()`` leaves out too: the profiler's own bookkeeping.
_UTILITY = frozenset(
    (
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    )
)


_OPERATORS = ("cpu_op", "user_annotation")
_WITH_PYTHON = (*_OPERATORS, "python_function")  # recorded with `with_stack=True`


@dataclass(eq=False)
class Event:
    """One recorded event, with the attributes of ``torch.autograd.profiler_util.FunctionEvent``
    that the checkers read (times in µs)."""

    name: str
    start_ns: int
    end_ns: int
    thread: int
    is_user_annotation: bool
    cpu_parent: Event | None = None
    cpu_children: list[Event] = field(default_factory=list)

    @property
    def cpu_time_total(self) -> float:
        return (self.end_ns - self.start_ns) / 1000

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)


@dataclass(frozen=True)
class EventTable:
    """The events of :func:`flat_events` as columns, one entry per event, sorted by thread
    and start (a parent before its children); times in ns. Plain lists of numbers and
    names: a handful of objects for the garbage collector, however many events there are."""

    names: list[str]
    start_ns: list[int]
    end_ns: list[int]
    threads: list[int]
    annotations: list[bool]  # a `record_function` region, not an operator
    parents: list[int]  # the index of the event around it, -1 for none


class Span(NamedTuple):
    """A ``record_function`` region of :func:`regions_named` (times in ns)."""

    name: str
    thread: int
    start_ns: int
    end_ns: int

    @property
    def cpu_time_total(self) -> float:  # µs, as the profiler's tables show it
        return (self.end_ns - self.start_ns) / 1000

    def holds(self, other: Span) -> bool:
        """Whether ``other`` ran inside this region (in the same thread)."""
        return (
            self.thread == other.thread
            and self.start_ns <= other.start_ns
            and other.end_ns <= self.end_ns
        )


def raw_events(profiler: Any) -> list[Any]:
    """The raw records of a finished ``torch.profiler.profile``, fetched once for the readers
    below (each fetch builds a Python object per record)."""
    return list(profiler.profiler.kineto_results.events())


def _cpu_events(
    raw: list[Any],
    names: frozenset[str] | None = None,
    within: Sequence[Span] = (),
    python: bool = False,
) -> list[Any]:
    """The raw CPU events a table shows (of ``names``, or inside the regions ``within``,
    only, if given), in no order."""
    if names is not None:  # a name first: one call per event where most are left out
        raw = [e for e in raw if e.name() in names]
    if within:
        raw = [e for e in raw if _starts_inside(e, within)]
    return [
        e
        for e in raw
        if e.activity_type() in (_WITH_PYTHON if python else _OPERATORS)
        and not (e.is_async() or e.is_hidden_event() or e.name() in _UTILITY)
        and e.start_thread_id() == e.end_thread_id()
    ]


def _starts_inside(event: Any, regions: Sequence[Span]) -> bool:
    """Whether ``event`` started inside one of ``regions`` (and so runs inside it)."""
    start = event.start_ns()
    for region in regions:
        if region.start_ns <= start <= region.end_ns and event.start_thread_id() == region.thread:
            return True
    return False


def flat_events(raw: list[Any], within: Sequence[Span] = (), *, python: bool = False) -> EventTable:
    """The CPU events of a finished profile's :func:`raw_events`, each knowing its parent.

    The same events and the same tree as ``profiler.events()``: hidden events, asynchronous
    ones, the profiler's own bookkeeping and an operator's redispatch to itself left out; an
    event's parent is the innermost event of the same thread whose time contains it. Given
    regions ``within`` (:func:`regions_named`), only the events inside them, the regions
    themselves included. With ``python``, the Python functions of a profile made with
    ``with_stack=True`` too, as ``events()`` has them (they are children of their region).

    Example::

        >>> from torch.profiler import ProfilerActivity, profile, record_function
        >>> with profile(activities=[ProfilerActivity.CPU]) as prof:
        ...     with record_function("region"):
        ...         _ = torch.ones(3).sum()
        >>> table = flat_events(raw_events(prof))
        >>> region = table.names.index("region")
        >>> [name for name, parent in zip(table.names, table.parents) if parent == region]
        ['aten::ones', 'aten::sum']
    """
    rows = [  # plain tuples of numbers and names: the garbage collector stops watching them
        (e.start_thread_id(), e.start_ns(), -e.end_ns(), e.name(), e.is_user_annotation())
        for e in _cpu_events(raw, within=within, python=python)
    ]
    rows.sort(key=lambda row: row[:3])  # by thread, start and the longest first; ties as recorded
    parents, children = [-1] * len(rows), [0] * len(rows)
    stack: list[int] = []
    for i, (thread, _, minus_end, _, _) in enumerate(rows):
        while stack and (rows[stack[-1]][0] != thread or rows[stack[-1]][2] > minus_end):
            stack.pop()
        if stack:
            parents[i] = stack[-1]
            children[stack[-1]] += 1
        stack.append(i)
    # As profiler.events() does: an operator whose only child is itself again (a redispatch)
    # is one row, which takes the inner one's children.
    merged_into: dict[int, int] = {}
    for i, row in enumerate(rows):
        parent = merged_into.get(parents[i], parents[i])
        parents[i] = parent
        if parent >= 0 and rows[parent][3] == row[3] and children[parent] == 1:
            merged_into[i] = parent
            children[parent] = children[i]
    kept = [i for i in range(len(rows)) if i not in merged_into]
    index = {i: n for n, i in enumerate(kept)}
    return EventTable(
        [rows[i][3] for i in kept],
        [rows[i][1] for i in kept],
        [-rows[i][2] for i in kept],
        [rows[i][0] for i in kept],
        [rows[i][4] for i in kept],
        [index.get(parents[i], -1) for i in kept],
    )


def light_events(profiler: Any) -> list[Event]:
    """:func:`flat_events` as a tree of :class:`Event` objects (``cpu_parent``,
    ``cpu_children``), as ``profiler.events()`` has it, some thirty times faster.

    Example::

        >>> from torch.profiler import ProfilerActivity, profile, record_function
        >>> with profile(activities=[ProfilerActivity.CPU]) as prof:
        ...     with record_function("region"):
        ...         _ = torch.ones(3).sum()
        >>> region = next(e for e in light_events(prof) if e.name == "region")
        >>> sorted(child.name for child in region.cpu_children)
        ['aten::ones', 'aten::sum']
    """
    table = flat_events(raw_events(profiler))
    columns = (table.names, table.start_ns, table.end_ns, table.threads, table.annotations)
    events = [Event(*values) for values in zip(*columns, strict=True)]
    for event, parent in zip(events, table.parents, strict=True):
        if parent >= 0:
            event.cpu_parent = events[parent]
            events[parent].cpu_children.append(event)
    return events


def regions_named(raw: list[Any], names: Iterable[str]) -> list[Span]:
    """The ``record_function`` regions called one of ``names`` in a profile's
    :func:`raw_events`, in the order they started, read without the rest of the profile.

    A region inside one of the same name is read as part of it (``profiler.events()`` shows
    the two as one row when nothing else is inside).

    Example::

        >>> from torch.profiler import ProfilerActivity, profile, record_function
        >>> with profile(activities=[ProfilerActivity.CPU]) as prof:
        ...     for label in ("data", "forward", "data"):
        ...         with record_function(label):
        ...             _ = torch.ones(3).sum()
        >>> [span.name for span in regions_named(raw_events(prof), ("data", "update"))]
        ['data', 'data']
    """
    found = sorted(
        (e.start_thread_id(), e.start_ns(), -e.end_ns(), e.name())
        for e in _cpu_events(raw, names=frozenset(names))
    )
    spans: list[Span] = []
    around: dict[tuple[int, str], Span] = {}  # the last region of each name, in each thread
    for thread, start, minus_end, name in found:
        span = Span(name, thread, start, -minus_end)
        if (last := around.get((thread, name))) is not None and last.holds(span):
            continue  # inside the region of the same name that it started in
        spans.append(span)
        around[thread, name] = span
    return sorted(spans, key=lambda span: span.start_ns)


def ancestors(event: Any) -> Iterator[Any]:
    """The events around ``event``, innermost first."""
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def descendants(event: Any) -> Iterator[Any]:
    """Every event under ``event``, at any depth."""
    stack = list(event.cpu_children)
    while stack:
        child = stack.pop()
        yield child
        stack.extend(child.cpu_children)


def region_of(event: Any, labels: tuple[str, ...]) -> str | None:
    """The innermost of ``labels`` around ``event`` (``None`` if outside all of them)."""
    for ancestor in ancestors(event):
        if ancestor.name in labels:
            return str(ancestor.name)
    return None


def is_operator(event: Any) -> bool:
    """An ``aten::`` row: one of PyTorch's operators."""
    return str(event.name).startswith("aten::")


def places(regions: set[str | None]) -> str:
    """``"in 'data' and 'update' and outside every region"`` for ``{"data", "update", None}``.

    Example::

        >>> places({"update", None, "data"})
        "in 'data' and 'update' and outside every region"
    """
    inside = [f"'{r}'" for r in sorted(r for r in regions if r is not None)]
    where = [f"in {' and '.join(inside)}"] if inside else []
    return " and ".join(where + (["outside every region"] if None in regions else []))
