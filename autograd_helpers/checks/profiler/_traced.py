"""``check_regions``' checks on the traced call of the step (:class:`~._trace.Trace`).

Run from ``_regions``' table, in its order: regions never closed, the batch
preparation (the work on ``samples``) outside 'data', the loss (found by its value) outside
'forward', part of the preparation outside 'data'. Each takes ``None`` (a step that could
not be traced) as nothing to say.
"""

from __future__ import annotations

from collections.abc import Callable

from autograd_helpers._profile_events import places
from autograd_helpers.checks.profiler._trace import Trace

__all__ = ["TRACED"]


def _regions_closed(trace: Trace | None) -> tuple[str, ...] | None:
    if trace is None or not trace.unclosed:
        return None
    names = ", ".join(f"'{r}'" for r in dict.fromkeys(trace.unclosed))
    return (
        f"the step opened {names} and never closed {'them' if ',' in names else 'it'}: "
        "`record_function(...).__enter__()` without its `__exit__`.",
        "An unclosed region has no end, so no time of its own, and the next region opens "
        'inside it. Use `with record_function("data"):` around each part: the block closes '
        "it, even when the code inside raises.",
    )


def _preparation_in_data(trace: Trace | None) -> tuple[str, ...] | None:
    """None of the work on ``samples`` in 'data' (a region around a copy of a batch
    prepared before it, say): the preparation is elsewhere."""
    if trace is None or not trace.samples_read:
        return None
    ops, where = trace.preparation_outside("data")
    if not ops or "data" in _read_in(trace):
        return None
    return (
        f"the batch preparation (the work on `samples`: {_listed(ops)}) ran {places(where)}, "
        "not in 'data'.",
        "Move the line that prepares the batch from `samples` into the "
        '`record_function("data")` block. A region around a copy of a batch prepared before '
        "it holds none of the work: 'data' must be where `samples` are read.",
    )


def _preparation_whole(trace: Trace | None) -> tuple[str, ...] | None:
    """Part of the work on ``samples`` outside 'data', part in it: split, or done twice."""
    if trace is None:
        return None
    ops, where = trace.preparation_outside("data")
    if not ops:
        return None
    return (
        f"part of the batch preparation (the work on `samples`: {_listed(ops)}) ran "
        f"{places(where)} as well as in 'data'.",
        "Prepare the whole batch inside the 'data' region, once: a line before the regions "
        "that still reads `samples` is work done twice, or a preparation split in two.",
    )


def _read_in(trace: Trace | None) -> set[str | None]:
    return {where for _, where in trace.samples_read} if trace else set()


def _listed(ops: list[str]) -> str:
    return ", ".join(f"`{op}`" for op in ops[:4]) + ("…" if len(ops) > 4 else "")


def _loss_by_value(trace: Trace | None) -> tuple[str, ...] | None:
    loss = trace.loss if trace is not None else None
    if loss is None or loss[1] in ("data", "forward"):
        return None
    op, where = loss
    return (
        f"the loss (`{op}`, the value `backward` starts from) ran {places({where})}, "
        "not in 'forward'.",
        "The loss belongs to forward: compute it in the same region as the model, whole "
        "(a term added to it on the `.backward()` line is loss computed in 'backward'), and "
        "call `loss.backward()` on it.",
    )


TRACED: dict[str, Callable[[Trace | None], tuple[str, ...] | None]] = {
    check.__name__: check
    for check in (_regions_closed, _preparation_in_data, _loss_by_value, _preparation_whole)
}
