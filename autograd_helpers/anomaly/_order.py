"""Which came first, when fn runs backward itself (a training loop): a NaN in forward, or
one that an earlier backward pass of fn's made and a later forward then met.

Kept apart from ``_nan`` (the explanations): the order decides which explanation holds.
"""

from __future__ import annotations

from autograd_helpers.anomaly._backward import nan_story
from autograd_helpers.anomaly._tracing import Run

__all__ = ["first_backward_nan", "forward_nan_time"]


def forward_nan_time(run: Run) -> int | None:
    """How many of fn's own backward passes had run when forward first held a NaN, or
    ``None`` when forward never did."""
    times = [i for i, own in enumerate(run.own) if own.nan_root]
    if any(bool(o.isnan().any()) for o in run.outputs):
        times.append(len(run.own))
    if not times:
        return None
    watch = run.watch
    if watch.first_nan is not None:
        times.append(watch.first_nan.backwards_before)
    elif watch.nan_use is not None:
        times.append(watch.nan_use_after)
    return min(times)


def first_backward_nan(run: Run) -> int:
    """The index of fn's first own backward pass whose NaN reached a gradient it returned
    (the number of them when none did)."""
    return next(
        (
            i
            for i, own in enumerate(run.own)
            if (story := nan_story(own.record)) is not None and story.reaches
        ),
        len(run.own),
    )
