"""Each labelled region's fastest run in a finished profile, as ``profiler.events()`` has it.

Public as ``ah.profiling.region_times``. It gives what a loop over ``profiler.events()``
gives for a few ``record_function`` labels, without building a Python object of forty
fields for every recorded operator: a training step with a per-sample loop records
thousands of operators, which ``events()`` reads in a second or more and this several
times sooner. Chapter 06's table cell prints it, and its checker reads the learner's profile
with it, so the table the learner reads and the table the checker asks are one.

Where the raw records are not what ``events()`` shows, ``events()`` itself is read (slow,
but right): a profile accumulated over a schedule's cycles (``acc_events=True``), a label
whose region ends in another thread or is still open when profiling stops, the
``ProfilerStep*`` rows a schedule makes, a profile with no raw records (``trace_only``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from autograd_helpers._profile_events import flat_events

__all__ = ["RegionTime", "region_times"]


class RegionTime(NamedTuple):
    """One region's times in µs, as ``profiler.events()`` shows them."""

    total_us: float  # ``cpu_time_total``: from the region's start to its end
    self_us: float  # ``self_cpu_time_total``: the total less what ran directly inside it


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


def _finished(profile: object) -> Any:
    """The autograd profiler holding the results of ``profile``, either class of profiler."""
    from torch.autograd.profiler import profile as autograd_profile
    from torch.profiler import profile as torch_profile

    if isinstance(profile, torch_profile):
        inner = profile.profiler
    elif isinstance(profile, autograd_profile):
        inner = profile
    else:
        kind = type(profile)
        name = kind.__qualname__  # another class called "profile" is named with its module
        name = f"{kind.__module__}.{name}" if name == "profile" else name
        raise TypeError(
            "region_times(): profile must be a torch.profiler.profile (or a "
            f"torch.autograd.profiler.profile), got {name}"
        )
    if inner is None or getattr(inner, "kineto_results", None) is None:
        raise ValueError(
            "region_times(): the profile has not finished: read it after its `with` block "
            "(with a schedule: in on_trace_ready)"
        )
    return inner


def _needs_events(inner: Any, raw: list[Any], names: tuple[str, ...]) -> bool:
    """Whether the raw records differ from what ``events()`` shows for these labels."""
    if getattr(inner, "acc_events", False) or not raw:
        return True
    if any(name.startswith("ProfilerStep") for name in names):
        return True  # events() renames "ProfilerStep#3" to "ProfilerStep*"
    return any(
        e.is_async() or e.start_thread_id() != e.end_thread_id() for e in raw if e.name() in names
    )


def _fastest(found: Iterable[tuple[str, RegionTime]]) -> dict[str, RegionTime]:
    fastest: dict[str, RegionTime] = {}
    for name, time in found:
        if name not in fastest or time < fastest[name]:
            fastest[name] = time
    return fastest


def _from_raw(raw: list[Any], names: tuple[str, ...]) -> dict[str, RegionTime]:
    table = flat_events(raw, python=True)  # Python functions are children too
    inside_ns = [0] * len(table.names)  # the time of each event's direct children
    for start, end, parent in zip(table.start_ns, table.end_ns, table.parents, strict=True):
        if parent >= 0:
            inside_ns[parent] += end - start
    return _fastest(
        (name, RegionTime((end - start) / 1000, (end - start - inside) / 1000))
        for name, start, end, inside in zip(
            table.names, table.start_ns, table.end_ns, inside_ns, strict=True
        )
        if name in names
    )


def region_times(profile: object, labels: Iterable[str]) -> dict[str, RegionTime]:
    """Each of ``labels``' fastest run in ``profile``: its CPU total and self time, in µs.

    The rows a loop over ``profile.events()`` finds by name, each label's fastest kept (by
    CPU total, then self time): another program on a busy machine can only add time. A
    label the profile does not hold is left out. The profile is left as it was.

    Args:
        profile: a finished :class:`torch.profiler.profile` (read after its ``with`` block,
            or in its ``on_trace_ready``), or a ``torch.autograd.profiler.profile``.
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
    inner = _finished(profile)
    raw = list(inner.kineto_results.events())
    if _needs_events(inner, raw, names):
        fastest = _fastest(
            (e.name, RegionTime(e.cpu_time_total, e.self_cpu_time_total))
            for e in inner.function_events  # events(), as the profiler parsed them
            if e.name in names
        )
    else:
        fastest = _from_raw(raw, names)
    return {name: fastest[name] for name in names if name in fastest}
