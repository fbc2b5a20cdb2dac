"""``explain_inplace_error``: which saved tensor an in-place operation changed, and where."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from autograd_helpers._checking.validate import check_callable
from autograd_helpers._graph_walk import graph_nodes
from autograd_helpers.anomaly._forward import InPlace, storage_of
from autograd_helpers.anomaly._frames import learner_frame_in
from autograd_helpers.anomaly._tracing import Report, Run, run_watched

__all__ = ["InplaceReport", "explain_inplace_error"]

# "[torch.FloatTensor [3]]", "[torch.cuda.HalfTensor [2, 3]]", "[CPUBFloat16Type [3]]"...
VERSION = re.compile(
    r"\[([\w.]+) \[([\d, ]*)\]\](?:, which is output (\d+) of ([\w:]+),)? is at version (\d+); "
    r"expected version (\d+)"
)
_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
}


def dtype_name(kind: str) -> str:
    """``"float32"`` for ``"torch.FloatTensor"``, ``"bfloat16"`` for ``"CPUBFloat16Type"``."""
    base = re.sub(r"^(torch\.)?(cuda\.|mps\.|xpu\.)?(CPU|CUDA|MPS|XPU)?", "", kind)
    base = re.sub(r"(Tensor|Type)$", "", base)
    return _DTYPES.get(base, base.lower() or kind)


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


def _changed_in_place(node: Any, name: str) -> bool:
    """Whether reading the saved attribute ``name`` of ``node`` raises the in-place error."""
    try:
        getattr(node, name)
    except RuntimeError as error:
        return "inplace operation" in str(error)
    except AttributeError:
        return False
    return False


def _unchecked(saved: Any) -> Tensor | None:
    """The tensor a raw ``SavedTensor`` holds, handed over by its pack hook, unchecked."""
    caught: list[Tensor] = []

    def pack(tensor: Tensor) -> Tensor:
        caught.append(tensor)
        return tensor

    try:
        saved.register_hooks(pack, lambda tensor: tensor)
    except (RuntimeError, AttributeError, TypeError):  # freed, or hooks already set
        return None
    return caught[0] if caught else None


def _stale_saved_tensor(run: Run, shape: tuple[int, ...], found: int) -> Tensor | None:
    """The tensor autograd complained about, read from the node that saved it.

    Reading a changed saved tensor raises, so the node is the one whose saved attribute
    raises the in-place error (the one anomaly mode's traceback names, if several do).
    ``register_hooks`` on its raw saved tensor hands over the tensor itself (sharing its
    memory and version counter) without that check.
    """
    named = re.search(r"Error detected in (\w+)", run.trace)
    roots = [o.grad_fn for o in run.outputs if o.grad_fn is not None]
    nodes = [n for n in graph_nodes(roots) if not hasattr(n, "variable")]
    if named:  # the node anomaly mode names first, then the others
        nodes.sort(key=lambda n: type(n).__name__ != named.group(1))
    for node in nodes:
        for name in [a for a in dir(node) if a.startswith("_saved_")] + ["saved_tensors"]:
            if not _changed_in_place(node, name):
                continue
            raw = getattr(
                node, "_raw" + name if name.startswith("_saved") else "_raw_saved_tensors"
            )
            for saved in raw if isinstance(raw, list | tuple) else [raw]:
                tensor = _unchecked(saved)
                if tensor is not None and tuple(tensor.shape) == shape and tensor._version == found:
                    return tensor
    return None


def _describe(record: InPlace) -> str:
    return f"{record.line} (`{record.op}`)" if record.line else f"`{record.op}`"


def _changed_by(
    run: Run, stale: Tensor | None, shape: tuple[int, ...], dtype: str, saved: int
) -> str:
    """The first in-place op that changed the saved tensor itself, at the version saved.

    Without the tensor, a guess from shape and dtype is only given when it is the only
    candidate: an in-place op on another tensor of the same shape is never blamed.
    """
    at_version = [record for record in run.watch.inplace if record.version == saved]
    if stale is not None:
        record = next((r for r in at_version if r.changed(stale)), None)
        return "" if record is None else _describe(record)
    candidates = [
        r for r in at_version if r.shape == shape and str(r.dtype).removeprefix("torch.") == dtype
    ]
    if len({storage_of(r.target) for r in candidates}) != 1:
        return ""
    return _describe(candidates[0])


def explain_inplace_error(fn: Callable[..., Any], *inputs: Any) -> InplaceReport:
    """Run ``fn(*inputs)`` and its backward; explain an "modified by an inplace operation" error.

    The report names the tensor (shape, dtype, the node that made it), the version autograd
    saved and the one it found, the forward line whose node saved it (from anomaly mode's
    traceback) and the in-place line that changed it, and the fix. The changing line is
    found from the version counters forward changed: an op on that very tensor, through a
    view or a slice of it too (``y[:, 0].mul_(2)``, ``F.relu(y, inplace=True)``), never an
    in-place op on some other tensor. ``fn`` may return a tensor, or a tuple or list of them.

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
    run = run_watched(fn, inputs)
    error = run.outcome.error
    text = "" if error is None else str(error.exception)
    match = VERSION.search(text)
    if error is not None and ("inplace operation" not in text or match is None):
        message = f"fn raised {error.describe()} {error.where}".strip()
        return InplaceReport(False, message, "fn raised another exception", (message,), raised=True)
    if run.returned:
        message = (
            f"fn returned {run.returned}: explain_inplace_error needs fn to return a tensor (a "
            "loss), or a tuple or list of tensors."
        )
        return InplaceReport(False, message, "fn did not return a tensor", (message,), raised=True)
    if match is None:
        message = "Backward ran: nothing it needed was changed in place."
        return InplaceReport(False, message, "no in-place error", (message,))
    kind, dims, output, op, found, saved = match.groups()
    shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    stale = _stale_saved_tensor(run, shape, int(found))
    dtype = str(stale.dtype).removeprefix("torch.") if stale is not None else dtype_name(kind)
    tensor = f"{dtype} tensor of shape {shape}" + ("" if op else ", a leaf")
    saved_by = learner_frame_in(run.trace)
    changed_by = _changed_by(run, stale, shape, dtype, int(saved))
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
