"""NaN reports that blame no operation of the model: a NaN made inside backward that never
reaches a gradient backward returns, and a NaN, of forward or of backward, made from a
parameter that an optimizer's step made infinite (the learning rate too high)."""

from __future__ import annotations

from torch import Tensor, nn

from autograd_helpers._common.reach import reachable
from autograd_helpers.anomaly._backward import NodeEvent
from autograd_helpers.anomaly._causes import nan_form
from autograd_helpers.anomaly._nan_other import lines, loop_iteration
from autograd_helpers.anomaly._origin import NanOrigin
from autograd_helpers.anomaly._records import InPlace, Made
from autograd_helpers.anomaly._tensors import kind_of, storage_of
from autograd_helpers.anomaly._tracing import Run

__all__ = ["removed_origin", "stepped_backward", "stepped_origin"]


def _parameter(run: Run, tensor: Tensor) -> str:
    """How fn's code names the parameter ``tensor`` is (```2.bias`` of ``net```), or ``""``."""
    storage = storage_of(tensor)
    for label, module in reachable(run.fn, *run.inputs.given, kinds=(nn.Module,)):
        for name, parameter in module.named_parameters():
            if storage_of(parameter) == storage:
                return f"`{name}` of {label}" if label else f"`{name}`"
    return ""


def _step_story(step: InPlace, run: Run) -> str:
    """What the optimizer's step did, how, and what that means."""
    at = f" ({step.line})" if step.line else ""
    after = step.backwards_before
    passes = f"backward pass {after}" if after else "a backward pass"
    dtype = str(step.dtype).removeprefix("torch.")
    record = run.own[after - 1].record if 0 < after <= len(run.own) else None
    infinite = record is not None and any(kind == "inf" for _, kind in record.leaves)
    how = (
        "from gradients that were already infinite (the loss overflowed)"
        if infinite
        else f"from finite gradients: the update itself overflowed {dtype}"
    )
    parameter = _parameter(run, step.target)
    into = f"the parameter {parameter}" if parameter else "the parameters"
    first = run.watch.first("inf")  # an overflow of forward before the step: divergence
    before = ""
    if first is not None and first.step is None and first.backwards_before < after:
        where = f" ({first.line})" if first.line else ""
        number = loop_iteration(first.backwards_before, lines(run))
        since = f" from iteration {number} on" if number else " before that"
        before = f"; here `{first.op}`{where} was already inf{since}"
    return (
        f"The optimizer's `step()`{at} put {step.kind_after} into {into}, after {passes} "
        f"that fn ran itself, {how}. The learning rate is too high, or training diverged "
        f"(the loss grows from step to step until it is inf{before})."
    )


def _fix(step: InPlace, run: Run) -> str:
    after = step.backwards_before
    number = loop_iteration(max(after - 1, 0), lines(run)) if after else None
    when = f" In a training loop, that is the step of iteration {number}." if number else ""
    now = "NaN" if kind_of(step.target) == "nan" else step.kind_after  # later steps spread it
    return (
        "Fix: lower the learning rate, clip the gradients (`torch.nn.utils.clip_grad_norm_`), "
        "and normalise the inputs and targets; re-create (or reload) the model before "
        f"running fn again: its parameters now hold {now}.{when}"
    )


def _passed_on(made: Made) -> str:
    """```linear``` (its line) passed that infinity on (-inf)", or ``""`` for an op that met
    the parameter itself."""
    source = made if made.from_step is not None and made.kind == "inf" else made.from_op
    if source is None or source.from_step is None:
        return ""
    where = f" ({source.line})" if source.line else ""
    return f"`{source.op}`{where} passed that infinity on ({source.value})"


def stepped_origin(made: Made, run: Run) -> NanOrigin:
    """A NaN of forward made from a parameter that an optimizer's step had made infinite
    (``made.step``): met there, or passed on by an op before."""
    step = made.step
    assert step is not None
    where = f" ({made.line})" if made.line else ""
    passed = _passed_on(made)
    met = f"{passed}, and " if passed else ""
    meeting = "made NaN of it" if passed else "met that infinite parameter and made NaN"
    message = (
        f"{_step_story(step, run)} Then, in the next forward pass, {met}`{made.op}`{where} "
        f"{meeting} ({nan_form(made.op)} is NaN). {_fix(step, run)}"
    )
    title = "NaN in forward, from parameters an optimizer step made infinite"
    return NanOrigin(
        True, message, title, (message,), stage="forward", node="optimizer step", source=step.line
    )


def stepped_backward(source: Made, nan_at: NodeEvent, run: Run) -> NanOrigin:
    """A NaN of backward made from an infinity of forward that started in a parameter an
    optimizer's step had made infinite (``source.step``)."""
    step = source.step
    assert step is not None
    passed = _passed_on(source) or "forward used that infinite parameter"
    at = f" ({nan_at.line})" if nan_at.line else ""
    message = (
        f"{_step_story(step, run)} Then, in the next forward pass, {passed}, and backward "
        f"turned it into NaN at `{nan_at.name}`{at} (0 × ∞ or ∞ − ∞ is NaN). "
        f"{_fix(step, run)}"
    )
    title = "NaN in backward, from parameters an optimizer step made infinite"
    return NanOrigin(
        True, message, title, (message,), stage="backward", node="optimizer step", source=step.line
    )


def removed_origin(origin: NanOrigin) -> NanOrigin:
    """A NaN made inside backward that no gradient backward returned holds."""
    at = f"`{origin.node}`" if origin.node and origin.node != "hook" else "a hook"
    where = f" ({origin.source})" if origin.source else ""
    message = (
        f"No NaN reaches the gradients: an intermediate NaN appears in backward, at {at}"
        f"{where}, but it is removed before it reaches the inputs (a mask, a "
        "`torch.where`, or a hook such as `torch.nan_to_num` drops it), and every gradient "
        "backward returned is free of NaN (the NaN is not where a gradient's NaN comes "
        "from). Nothing to fix for these inputs; it would reach the gradients if what "
        "removes it changed."
    )
    return NanOrigin(
        False,
        message,
        "no NaN in the gradients (an intermediate NaN in backward is removed)",
        (message,),
        stage="backward",
        node=origin.node,
        source=origin.source,
        removed=True,
    )
