"""``check_regions``, part 3: the region the learner named as the slowest.

Judged against the checker's own profile of the step, robustly on a busy machine: each
region's fastest of the profiled steps counts (another process can only add time). Where
that measurement is decisive it decides; where two regions are too close for timing on a
busy machine to tell apart, the table the learner read decides (``_margin.rule``).
The answer may be spelled any way that names the label (another capitalisation, spaces, the
profiler's row itself).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autograd_helpers.checks._core.feedback import CheckResult, failed, stub_verdict
from autograd_helpers.checks.profiler._answers import read_name
from autograd_helpers.checks.profiler._margin import DECISIVE, NEAR_TIE, Ruling, fastest, rule
from autograd_helpers.checks.profiler._regions import LABELS, STEPS, StepProfile
from autograd_helpers.profiling import region_times

__all__ = ["READ_THE_TABLE", "read_regions", "slowest_verdict"]

READ_THE_TABLE = (
    "Your four regions are right. Now read the profile's table and set `slowest` to the "
    "label with the largest CPU total."
)
_TOTALS = (
    "Read the 'CPU total' column of your labels: a label's *self* time is only the "
    "Python between its operators; its total includes everything it ran."
)


def read_regions(profile: Any) -> dict[str, float] | None:
    """Each label's fastest CPU total (µs) in the learner's own profile, as its table shows.

    ``None`` when the profile holds none of the four labels (a stub's table cell, or another
    profile altogether) or is not a finished profile.
    """
    try:  # as the notebook's table cell prints them
        read = {label: time.total_us for label, time in region_times(profile, LABELS).items()}
    except Exception:  # not a finished torch.profiler.profile: there is no table to ask
        return None
    return read if set(read) == set(LABELS) else None


def _ms(times: dict[str, float]) -> str:
    return ", ".join(f"'{r}' {t / 1000:.2f} ms" for r, t in times.items())


Read = dict[str, float] | None


def slowest_verdict(
    label: str, slowest: object, profile: StepProfile, read: Read | Callable[[], Read] = None
) -> CheckResult:
    """The verdict on the region named as the slowest (the regions are right).

    ``read``: the label's times in the table the learner read (:func:`read_regions`), which
    decide where the checker's own are too close to call; or a function that reads them,
    called only then (reading a profile of every operator takes a tenth of a second).
    """
    per_step = fastest({label.name: label.cpu_time_total} for label in profile.labels)
    per_step = {region: per_step[region] for region in LABELS}
    if (stub := stub_verdict(label, slowest, hint=READ_THE_TABLE)) is not None:
        return stub
    answer = read_name(slowest)
    name = answer[0].casefold() if answer is not None else None
    if name not in LABELS:
        return failed(
            label,
            f"slowest must be one of the labels {', '.join(map(repr, LABELS))}, got {slowest!r}.",
        )
    assert name is not None and answer is not None
    leads = per_step[name] >= NEAR_TIE * max(per_step.values())
    if callable(read):
        read = None if leads else read()
    ruling = rule(name, per_step, read)
    measured = f"Per step (the fastest of {STEPS}), the checker measured: {_ms(per_step)}."
    if not ruling.passed:
        return failed(label, *_why_not(name, ruling, measured, read))
    notes = [] if answer[0] == name and not answer[1] else [f"(Read as the label '{name}'.)"]
    notes += _close_call(name, ruling, per_step)
    if None in profile.where(lambda n: n.startswith("Optimizer.zero_grad#")):
        notes.append(
            "(`optimizer.zero_grad()` runs outside the four regions: fine, it takes a few "
            "microseconds; inside 'backward' it would count with backward, as the exercise "
            "suggests.)"
        )
    return CheckResult(
        "passed",
        f"{label} passed: it trains as specified, with four regions, each once per step and "
        f"holding its own work; '{name}' is the slowest.",
        tuple(notes),
    )


def _why_not(
    name: str, ruling: Ruling, measured: str, read: dict[str, float] | None
) -> tuple[str, ...]:
    if ruling.kind == "unread":
        return (
            f"your regions are right, but '{name}' is not clearly the slowest, and there is no "
            "table of yours to settle it.",
            f"{measured} Those are close enough for a busy machine to swap them. Run the cell "
            "that profiles three steps of your `labelled_step` (below it), then set `slowest` "
            "from its table and run this check again.",
        )
    if ruling.kind == "read otherwise":
        assert read is not None and ruling.read_top is not None
        return (
            f"your regions are right, but '{name}' is not the slowest in your own table: "
            f"'{ruling.read_top}' is ({_ms(read)}).",
            f"{measured} Those two are close enough for a busy machine to swap them, so your "
            "table decides.",
            _TOTALS,
        )
    details = [measured, _TOTALS]
    if ruling.read_top == name:
        details.append(
            f"Your table shows '{name}' first, but the checker's steps put '{ruling.top}' "
            f"{DECISIVE:g} times or more ahead of it: other programs held the CPU while your "
            "profile ran. Run the table cell again."
        )
    return (f"your regions are right, but '{name}' is not the slowest.", *details)


def _close_call(name: str, ruling: Ruling, per_step: dict[str, float]) -> list[str]:
    if ruling.kind == "as read":
        return [
            f"(The checker's steps put '{ruling.top}' ahead of '{name}', by less than a busy "
            "machine's noise can tell apart: your table, which shows "
            f"'{name}' first, decides.)"
        ]
    return []
