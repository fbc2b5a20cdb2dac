"""``explain_inplace_error``: which saved tensor an in-place operation changed, and where."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from autograd_helpers._common.validate import require_callable
from autograd_helpers.anomaly._advice import (
    CARRIED,
    VIEW_UNCHANGED,
    Changer,
    inplace_fix,
    reused_fix,
    running_statistics_fix,
    silent_fix,
)
from autograd_helpers.anomaly._culprit import (
    carried_across_iterations,
    changer_of,
    changing_record,
    describe,
    is_parameter,
    stale_saved_tensor,
    unchanged_view,
)
from autograd_helpers.anomaly._error_text import VERSION, dtype_name, named
from autograd_helpers.anomaly._forward import InPlace
from autograd_helpers.anomaly._frames import learner_frame_in
from autograd_helpers.anomaly._tensors import storage_of
from autograd_helpers.anomaly._tracing import Report, Run, reported

__all__ = ["InplaceReport", "dtype_name", "explain_inplace_error"]

LEAF_HINT = (
    "A leaf that requires grad (a parameter, or an input given with `requires_grad=True`) "
    "cannot be changed in place while autograd records: if it is an update, make it inside "
    "`torch.no_grad()` and after backward (as an optimizer does); otherwise compute a new "
    "tensor (`w2 = w * mask`) instead."
)


@dataclass(frozen=True, repr=False)
class InplaceReport(Report):
    """Which saved tensor an in-place operation changed, and where.

    Attributes:
        found: whether a saved tensor was changed in place: backward failed, or (``silent``)
            the change bypassed autograd and backward ran on the changed values.
        tensor: ``"float32 tensor of shape (3,)"`` (``", a leaf"`` added for a leaf).
        saved_version, found_version: the version autograd saved, and the one it found
            (the same, for a silent change).
        saved_by: the forward line whose node saved the tensor.
        changed_by: the in-place line that changed it (``""`` when it cannot be found).
        changer: who changed it: ``"computed"`` (fn changed a tensor it computed),
            ``"input"`` (fn's own input), ``"parameter"`` or ``"optimizer"`` (a parameter,
            by hand or by an optimizer's ``step()``), ``"forward"`` (a parameter, changed
            by an op of the forward pass as its side effect: ``nn.Embedding`` with
            ``max_norm``); ``""`` when nothing was found, or not who changed it.
        silent: the change went through ``.data`` (no version bump): no error, and a wrong
            gradient.
        message: one paragraph: what, where, and the fix.
    """

    tensor: str = ""
    saved_version: int = -1
    found_version: int = -1
    saved_by: str = ""
    changed_by: str = ""
    changer: str = ""
    silent: bool = False


def _shape_and_dtype(tensor: Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} tensor of shape {tuple(tensor.shape)}"


def _silent(run: Run) -> InplaceReport:
    """A saved tensor whose values changed without its version: through `.data`."""
    snapshot = run.silent[0]
    tensor = _shape_and_dtype(snapshot.tensor)
    node = type(snapshot.node).__name__
    saved_by = learner_frame_in("".join(snapshot.node.metadata.get("traceback_", [])))
    storage = storage_of(snapshot.tensor)
    later = run.watch.inplace[snapshot.after :]
    record = next((r for r in later if storage_of(r.target) == storage), None)
    changed_by = "" if record is None else describe(record)
    version = snapshot.version
    parameter = is_parameter(snapshot.tensor)
    on_input = run.inputs.position_of(snapshot.tensor) is not None
    how = (
        running_statistics_fix(snapshot.name.removeprefix("_saved_"))
        if snapshot.name.startswith("_saved_running_")
        else "a change through `.data` (or a NumPy array sharing its memory). "
        + silent_fix(parameter)
    )
    message = (
        f"A {tensor} was saved for backward at version {version}"
        + (f" by the line {saved_by}" if saved_by else "")
        + f" (`{node}`), then its values were changed"
        + (f" by the line {changed_by}" if changed_by else "")
        + f" while its version stayed {version}: {how}"
    )
    return InplaceReport(
        True,
        message,
        f"a saved tensor was changed behind autograd's back ({tensor})",
        (message,),
        tensor=tensor,
        saved_version=version,
        found_version=version,
        saved_by=saved_by,
        changed_by=changed_by,
        changer="parameter" if parameter else "input" if on_input else "computed",
        silent=True,
    )


def _nothing_changed(run: Run) -> InplaceReport:
    if run.freed and not run.own:
        message = (
            "Backward could not be checked: the graph of what fn returned was already freed "
            "by an earlier backward. Return a loss computed inside fn."
        )
        return InplaceReport(False, message, "backward not checked", (message,))
    where = next((f" ({own.line})" for own in run.own if own.line), "")
    ran = f"fn's own backward pass{where} ran" if run.own else "Backward ran"
    message = f"{ran}: nothing it needed was changed in place."
    inputs = ((run.inputs.position_of(r.target), r) for r in run.watch.inplace)
    changed = next(((k, r) for k, r in inputs if k is not None), None)
    if changed is not None:
        position, record = changed
        message += (
            f" Note that fn changed its input {run.inputs.names[position]} in place, by "
            f"the line {describe(record)}: that changes the caller's tensor too."
        )
    return InplaceReport(False, message, "no in-place error", (message,))


def explain_inplace_error(fn: Callable[..., Any], *inputs: Any) -> InplaceReport:
    """Run ``fn(*inputs)`` and its backward; explain an "modified by an inplace operation" error.

    The report names the tensor (shape, dtype, the node that made it), the version autograd
    saved and the one it found, the forward line whose node saved it (from anomaly mode's
    traceback) and the in-place line that changed it, and the fix. The changing line is
    found from the version counters forward changed: an op on that very tensor, through a
    view or a slice of it too (``y[:, 0].mul_(2)``, ``F.relu(y, inplace=True)``), never an
    in-place op on some other tensor. ``fn`` may return a tensor, or a tuple or list of them.

    The fix depends on who changed the tensor: fn, on a tensor it computed or on its own
    input (inputs are given as :func:`find_nan_origin` gives them: as a layer's output, so
    that ``x.relu_()`` on an input is legal, as in a model), or an optimizer's ``step()``
    (or a hand-written update) on a parameter between forward and backward, where a copy
    does not help and the order of the calls is the fix, or a forward op that changes a
    parameter as its side effect (``nn.Embedding(max_norm=...)`` renormalises its weight),
    where a copy for the other use is the fix. A change through ``.data``, which
    autograd cannot see, is found too: each saved tensor is copied as forward saves it and
    compared before backward; the report then has ``silent`` set.

    ``fn`` may run backward itself, as a training step does (``d_loss.backward();
    opt_d.step(); g_loss.backward()``): its backward passes are watched as the tool's own
    is, and really run (they fill ``.grad``, and its optimizer steps update parameters). It
    may then return nothing; what it returns is not differentiated again where its own
    backward freed the graph. The tool's own backward leaves every ``.grad`` as found, as
    :func:`find_nan_origin`'s does (and runs with ``backward()`` where a Function refuses
    ``torch.autograd.grad``).

    The modules ``fn`` reaches run on copies of their buffers: batch norm's running
    statistics and ``num_batches_tracked`` are left as found, and so are the modules'
    train/eval flags and other attributes (a call counter, a hook ``fn`` registered, an
    attribute set on a parameter), their submodules' too. So are their parameters, unless
    ``fn`` runs backward itself (a training step, whose updates are real): a forward that
    writes them (normflows' ``ActNorm`` initialises its scale and shift from the first
    batch through ``.data``) leaves them as found.

    Example::

        >>> def scaled(x):
        ...     y = x.exp()  # exp saves its result for backward
        ...     y.add_(1)  # and this changes it
        ...     return y.sum()
        >>> report = explain_inplace_error(scaled, torch.ones(3))
        >>> report.found, report.saved_version, report.found_version
        (True, 0, 1)
    """
    require_callable("explain_inplace_error", "fn", fn)
    return reported(fn, inputs, _from_run, keep_saved=True)


def _fix(
    run: Run, changer: Changer, stale: Tensor | None, record: InPlace | None, saved: int
) -> str:
    """What to do about it: by who changed the tensor, a view whose saved part did not
    change, and a loop whose backward reached back into an earlier iteration's graph."""
    base = (
        unchanged_view(run, stale, record, saved) if changer.kind in ("computed", "input") else None
    )
    if base is not None:
        return VIEW_UNCHANGED.format(base=base)
    fix = inplace_fix(changer)
    loop = carried_across_iterations(run) if changer.kind == "optimizer" else None
    if loop is not None and loop.kind == "reused":  # detaching it would lose its gradient
        return reused_fix(changer, loop.line, loop.cut)
    if loop is not None:
        return CARRIED + "In detail: " + fix[:1].lower() + fix[1:]
    return fix


def _from_run(run: Run) -> InplaceReport:
    """The report on what :func:`run_watched` saw."""
    error = run.outcome.error
    text = "" if error is None else str(error.exception)
    match = VERSION.search(text)
    if error is not None and ("inplace operation" not in text or match is None):
        message = f"fn raised {error.describe()} {error.where}".strip()
        if "leaf Variable that requires grad" in text:
            message += " " + LEAF_HINT
        return InplaceReport(False, message, "fn raised another exception", (message,), raised=True)
    if run.returned:
        message = (
            f"fn returned {run.returned}: explain_inplace_error needs fn to return a tensor (a "
            "loss), or a tuple or list of tensors."
        )
        return InplaceReport(False, message, "fn did not return a tensor", (message,), raised=True)
    if match is None:
        return _silent(run) if run.silent else _nothing_changed(run)
    kind, dims, output, op, found, saved = match.groups()
    shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    stale = stale_saved_tensor(run, shape, int(found))
    dtype = str(stale.dtype).removeprefix("torch.") if stale is not None else dtype_name(kind)
    tensor = f"{dtype} tensor of shape {shape}" + ("" if op else ", a leaf")
    saved_by = learner_frame_in(run.trace)
    record = changing_record(run, stale, shape, dtype, int(saved))
    changed_by = "" if record is None else describe(record)
    changer = changer_of(run, stale, record, leaf=not op)
    parts = [
        f"A {tensor} was saved for backward at version {saved}"
        + (f" by the line {saved_by}" if saved_by else ""),
        f"then changed in place, to version {found}"
        + (f", by the line {changed_by}" if changed_by else ""),
    ]
    failed = next((own for own in run.own if own.raised), None)
    if failed is not None:
        where = f", {failed.line}," if failed.line else ""
        parts.append(f"then the backward pass fn ran itself{where} needed the old values")
    name = named(output, op.split("::")[-1]) if op else ""
    if changer.kind == "input":
        name = ""  # PyTorch names the op that made the input: here, the copy standing for it
    fix = _fix(run, changer, stale, record, int(saved))
    message = "; ".join(parts) + f"{name}. " + fix
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
        changer=changer.kind,
    )
