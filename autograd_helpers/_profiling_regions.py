"""Each labelled region's fastest run in a finished profile, read from its raw records.

Public as ``ah.profiling.region_times``. It gives what a loop over ``profiler.events()``
gives for a few ``record_function`` labels, without building a Python object of forty
fields for every recorded operator: a training step with a per-sample loop records
thousands of operators, which ``events()`` reads in a second or more and this in a tenth
of one. Chapter 06's table cell prints it, and its checker reads the learner's profile
with it, so the table the learner reads and the table the checker asks are one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from autograd_helpers._profile_events import flat_events, raw_events, regions_named

__all__ = ["RegionTime", "region_times"]


class RegionTime(NamedTuple):
    """One region's times in µs, as ``profiler.events()`` shows them."""

    total_us: float  # ``cpu_time_total``: from the region's start to its end
    self_us: float  # ``self_cpu_time_total``: the total less what ran inside it


def _label_names(labels: object) -> tuple[str, ...]:
    if isinstance(labels, str) or not isinstance(labels, Iterable):
        raise TypeError(
            "region_times(): labels must be a list of record_function names, such as "
            f'["data", "forward"], got {labels!r}'
        )
    names = list(labels)
    if not names or not all(isinstance(name, str) for name in names):
        raise TypeError(f"region_times(): labels must be one or more strings, got {names!r}")
    return tuple(dict.fromkeys(names))  # in order, each once


def _raw_records(profile: object) -> list[Any]:
    from torch.profiler import profile as torch_profile

    if not isinstance(profile, torch_profile):
        raise TypeError(
            "region_times(): profile must be a torch.profiler.profile, got "
            f"{type(profile).__name__}"
        )
    if getattr(profile.profiler, "kineto_results", None) is None:
        raise ValueError(
            "region_times(): the profile has not finished: read it after its `with` block"
        )
    return raw_events(profile)


def region_times(profile: object, labels: Iterable[str]) -> dict[str, RegionTime]:
    """Each of ``labels``' fastest run in ``profile``: its CPU total and self time, in µs.

    A label that ran several times (a loop of labelled steps) counts its fastest run, by
    CPU total: another program on a busy machine can only add time. A region inside one of
    the same name counts as part of it, and a label the profile does not hold is left out.

    Args:
        profile: a finished :class:`torch.profiler.profile` (read after its ``with`` block).
        labels: the ``record_function`` names to read, such as ``["data", "forward"]``.

    Returns:
        a dict from each label found to its :class:`RegionTime`, in the order of ``labels``.

    Example::

        >>> from torch.profiler import ProfilerActivity, profile, record_function
        >>> with profile(activities=[ProfilerActivity.CPU]) as prof:
        ...     for _ in range(3):
        ...         with record_function("step"):
        ...             _ = torch.ones(1000).exp().sum()
        >>> times = region_times(prof, ["step", "never ran"])
        >>> list(times), 0 <= times["step"].self_us <= times["step"].total_us
        (['step'], True)
    """
    names = _label_names(labels)
    raw = _raw_records(profile)
    spans = regions_named(raw, frozenset(names))
    table = flat_events(raw, within=spans)
    inside_ns = [0] * len(table.names)  # the time of each event's direct children
    for start, end, parent in zip(table.start_ns, table.end_ns, table.parents, strict=True):
        if parent >= 0:
            inside_ns[parent] += end - start
    index = {
        (thread, start, name): i
        for i, (thread, start, name) in enumerate(
            zip(table.threads, table.start_ns, table.names, strict=True)
        )
    }
    fastest: dict[str, RegionTime] = {}
    for span in spans:
        i = index.get((span.thread, span.start_ns, span.name))
        own = span.end_ns - span.start_ns - (inside_ns[i] if i is not None else 0)
        time = RegionTime(span.cpu_time_total, own / 1000)
        if span.name not in fastest or time < fastest[span.name]:
            fastest[span.name] = time
    return {name: fastest[name] for name in names if name in fastest}
