"""``explain_inplace_error``: which saved tensor an in-place operation changed, and where."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autograd_helpers._checking.validate import check_callable
from autograd_helpers.anomaly._tracing import Report, Watch, learner_frame_in, run_watched

__all__ = ["InplaceReport", "explain_inplace_error"]

VERSION = re.compile(
    r"\[torch\.(\w+) \[([\d, ]*)\]\](?:, which is output (\d+) of ([\w:]+),)? is at version (\d+); "
    r"expected version (\d+)"
)

# Where a NaN appears in backward, the usual cause, and the usual fix.


@dataclass(frozen=True, repr=False)
class InplaceReport(Report):
    """Which saved tensor an in-place operation changed, and where.

    Attributes:
        found: whether backward failed because a saved tensor was changed in place.
        tensor: ``"float32 tensor of shape (3,)"`` (``", a leaf"`` added for a leaf).
        saved_version, found_version: the version autograd saved, and the one it found.
        saved_by: the forward line whose node saved the tensor.
        changed_by: the in-place line that changed it (``""`` when it cannot be found).
        message: one paragraph: what, where, and the fix.
    """

    tensor: str = ""
    saved_version: int = -1
    found_version: int = -1
    saved_by: str = ""
    changed_by: str = ""


def _changed_by(watch: Watch, shape: tuple[int, ...], saved_version: int) -> str:
    """The first in-place operation on a tensor of this shape at the version autograd saved."""
    candidates = [
        record
        for record in watch.inplace
        if record["shape"] == shape and record["version"] == saved_version
    ]
    if not candidates:
        return ""
    record = candidates[0]
    return f"{record['line']} (`{record['op']}`)" if record["line"] else f"`{record['op']}`"


def explain_inplace_error(fn: Callable[..., Any], *inputs: Any) -> InplaceReport:
    """Run ``fn(*inputs)`` and its backward; explain an "modified by an inplace operation" error.

    The report names the tensor (shape, dtype, the node that made it), the version autograd
    saved and the one it found, the forward line whose node saved it (from anomaly mode's
    traceback) and the in-place line that changed it (watched during forward), and the fix.

    Example::

        >>> def scaled(x):
        ...     y = x.exp()  # exp saves its result for backward
        ...     y.add_(1)  # and this changes it
        ...     return y.sum()
        >>> report = explain_inplace_error(scaled, torch.ones(3))
        >>> report.found, report.saved_version, report.found_version
        (True, 0, 1)
    """
    check_callable("explain_inplace_error", "fn", fn)
    outcome, watch, _, trace = run_watched(fn, inputs, check_nan=False)
    error = outcome.error
    text = "" if error is None else str(error.exception)
    match = VERSION.search(text)
    if error is not None and ("inplace operation" not in text or match is None):
        message = f"fn raised {error.describe()} {error.where}".strip()
        return InplaceReport(False, message, "fn raised another exception", (message,), raised=True)
    if match is None:
        message = "Backward ran: nothing it needed was changed in place."
        return InplaceReport(False, message, "no in-place error", (message,))
    kind, dims, output, op, found, saved = match.groups()
    shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    dtype = {"FloatTensor": "float32", "DoubleTensor": "float64"}.get(kind, kind)
    tensor = f"{dtype} tensor of shape {shape}" + ("" if op else ", a leaf")
    saved_by, changed_by = learner_frame_in(trace), _changed_by(watch, shape, int(saved))
    parts = [
        f"A {tensor} was saved for backward at version {saved}"
        + (f" by the line {saved_by}" if saved_by else ""),
        f"then changed in place, to version {found}"
        + (f", by the line {changed_by}" if changed_by else ""),
    ]
    named = f" (PyTorch's error calls it output {output} of {op.split('::')[-1]})" if op else ""
    message = (
        "; ".join(parts)
        + f"{named}. Backward needs the values it saved. Fix: compute a new tensor instead "
        "of changing this one (`y = y + 1`, not `y.add_(1)` or `y += 1`), or change a copy "
        "(`y = y.clone()` before the in-place line)."
    )
    return InplaceReport(
        True,
        message,
        f"a saved tensor was changed in place ({tensor})",
        (message,),
        tensor=tensor,
        saved_version=int(saved),
        found_version=int(found),
        saved_by=saved_by,
        changed_by=changed_by,
    )
