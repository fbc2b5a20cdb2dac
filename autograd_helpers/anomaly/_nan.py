"""``find_nan_origin``: where the NaN of a forward and backward pass comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from autograd_helpers._common.nodes import is_custom_function
from autograd_helpers._common.validate import require_callable
from autograd_helpers.anomaly._backward import NanStory, NodeEvent, nan_story
from autograd_helpers.anomaly._causes import (
    backward_cause,
    empty_row_backward,
    value_cause,
)
from autograd_helpers.anomaly._forward import Made, Watch
from autograd_helpers.anomaly._forward_origin import in_forward
from autograd_helpers.anomaly._nan_other import (
    cast_overflow,
    in_a_hook,
    lines,
    loop_iteration,
    nan_in_input,
    no_nan,
    ordinal,
    special_node,
)
from autograd_helpers.anomaly._order import first_backward_nan, forward_nan_time
from autograd_helpers.anomaly._origin import NanOrigin
from autograd_helpers.anomaly._quiet import removed_origin, stepped_backward
from autograd_helpers.anomaly._tensors import infinity_in, kind_of
from autograd_helpers.anomaly._tracing import Run, reported

__all__ = ["NanOrigin", "find_nan_origin"]


def _line(line: str) -> str:
    return f" ({line})" if line else ""


def _at(event: NodeEvent | None) -> str:
    return _line(event.line) if event is not None else ""


def _used(event: NodeEvent, watch: Watch) -> tuple[str, Made | None] | None:
    """The non-finite value of forward a node used (``"NaN"``, ``"-inf"``...), and the op
    where it started; ``None`` when the node used finite values only."""
    if event.saved is None:
        return None
    kind = "nan" if bool(event.saved.isnan().any()) else "inf"
    value = "NaN" if kind == "nan" else infinity_in(event.saved)
    return value, watch.made_for(event.saved, kind) or watch.first(kind)


def _empty_row(event: NodeEvent) -> bool:
    """Whether ``event`` is a ``logsumexp`` node over a row of only -inf (its result -inf)."""
    if not event.name.startswith("LogsumexpBackward"):
        return False
    try:
        result = event.node._saved_result
    except (RuntimeError, AttributeError):
        return False
    return bool((result == float("-inf")).any())


# Nodes whose gradient sums products (a matrix product, a convolution): an infinity becomes
# NaN there by 0 × ∞ or by ∞ − ∞ in the sum.
_SUMMING = ("Addmm", "Mm", "Bmm", "Baddbmm", "Addmv", "Mv", "Dot", "Convolution", "Linear")


def _in_backward(story: NanStory, run: Run, scale: float | None = None) -> NanOrigin:
    if story.hooked:
        return in_a_hook(story, run)
    origin, nan_at = story.origin, story.nan_at
    if origin is None:  # infinities summed, none of them made by a node we watched
        message = (
            "No operation made the NaN: infinite gradients of opposite sign were added where "
            "two paths of the graph meet (∞ − ∞ is NaN)."
        )
        return NanOrigin(True, message, "NaN in backward", (message,), stage="backward")
    made = f", created by the line {origin.line}" if origin.line else ""
    use = _used(origin, run.watch)
    value, source = use if use is not None else ("", None)
    if source is not None and source.step is not None:  # an optimizer step made it infinite
        return stepped_backward(source, nan_at or origin, run)
    start = f", which started in `{source.op}`{_line(source.line)}" if source else ""
    used = f"a value that forward computed as {value}{start}" if use else ""
    if special_node(origin):
        cause = special_node(origin)
    elif cast_overflow(origin, scale):
        cause = cast_overflow(origin, scale)
    elif use is not None:
        cause = value_cause(source, "where" in run.watch.ops)
    else:
        cause = backward_cause(origin.name, is_custom_function(origin.node))
    if not story.summed and nan_at in (origin, None) and _empty_row(origin):
        parts = [f"The NaN comes from `{origin.name}`{made}.", empty_row_backward(source)]
        return _origin_in_backward(" ".join(parts), origin)
    if story.summed:
        meet = f", at the input of `{nan_at.name}`{_at(nan_at)}" if nan_at else ""
        sources = " and ".join(f"`{e.name}`{_at(e)}" for e in (origin, *story.others[:2]))
        parts = [
            "No operation made the NaN: infinite gradients of opposite sign were added where "
            f"two paths of the graph meet{meet}, and ∞ − ∞ is NaN. The infinities come from "
            f"{sources}."
        ]
    elif nan_at is origin or nan_at is None:
        parts = [f"The NaN comes from `{origin.name}`{made}."]
        if used:
            form = "0 × NaN" if value == "NaN" else "0 × ∞"
            parts.append(f"It uses {used}, so even a zero gradient comes out NaN ({form} is NaN).")
    else:
        because = f" (it uses {used})" if used else ""
        parts = [
            f"The NaN comes from `{origin.name}`{made}.",
            f"It was infinite there{because}; the NaN appears in `{nan_at.name}`{_at(nan_at)}, "
            + (
                "whose products and sums turned it into NaN: an infinity times a zero (0 × ∞) "
                "or infinities of both signs added (∞ − ∞), both NaN."
                if nan_at.name.startswith(_SUMMING)
                else "where that infinity met a zero (0 × ∞ is NaN)."
            ),
        ]
    if story.others and not story.summed:
        others = ", ".join(f"`{e.name}`{_at(e)}" for e in story.others[:2])
        parts.append(f"Not the cause: {others} also made an infinite gradient, never NaN.")
    parts.extend(_discarded(run.watch.first_nan, source))
    parts.append(cause)
    return _origin_in_backward(" ".join(parts), origin)


def _discarded(first: Made | None, source: Made | None) -> list[str]:
    """What to say of ``first``, a NaN forward made though its output is finite: it made one
    and threw it away (``torch.where``'s branch not taken)."""
    if first is not None and first is source:
        return [
            "Forward made that NaN and discarded it, as `torch.where` does with the branch "
            "not taken, but backward still used it."
        ]
    if first is not None:
        return [
            f"Forward also made a NaN with `{first.op}` ({first.line}) and then discarded it, "
            "as `torch.where` does with the branch not taken."
        ]
    return []


def _origin_in_backward(message: str, origin: NodeEvent) -> NanOrigin:
    return NanOrigin(
        True,
        message,
        f"NaN in backward, from `{origin.name}`",
        (message,),
        stage="backward",
        node=origin.name,
        source=origin.line,
    )


def find_nan_origin(fn: Callable[..., Any], *inputs: Any) -> NanOrigin:
    """Run ``fn(*inputs)`` and its backward and report where the NaN comes from.

    Floating-point tensor inputs are copied: ``fn`` gets each as a layer's output would be,
    a tensor that requires grad and may be changed in place (a copy of a fresh leaf; an
    input that is a leaf requiring grad, a parameter, stays a leaf). The backward pass
    starts from a gradient of ones (for each output, when ``fn`` returns a tuple or list of
    tensors). It runs with :func:`torch.autograd.grad`, or, where a Function refuses that
    ("please use .backward()", as memcnn's invertible blocks and a reentrant checkpoint
    say), with ``backward()`` as fn's user runs it. No ``.grad`` is left changed, a model's
    parameters' included, and the caller's inputs are left alone; a Function whose
    backward writes ``.grad`` itself (revtorch's reversible blocks) has it put back, and
    the report says so.

    A training step that runs backward itself (``loss.backward(); opt.step()``) is traced
    through its own backward passes, watched node by node; they really run (they fill
    ``.grad``, and its optimizer steps update the parameters). It may return the loss, a
    detached loss or nothing: what its backward freed is not differentiated again.

    The modules ``fn`` reaches run on copies of their buffers: batch norm's running
    statistics and ``num_batches_tracked`` are left as found, and so are the modules'
    train/eval flags and other attributes (a call counter, a hook ``fn`` registered, an
    attribute set on a parameter), their submodules' too. So are their parameters, unless
    ``fn`` runs backward itself (a training step, whose updates are real): a forward that
    writes them (normflows' ``ActNorm`` initialises its scale and shift from the first
    batch through ``.data``) leaves them as found.

    - An input that already holds NaN is named, with the position of its first NaN.
    - A NaN made in forward is traced to the op that made it from NaN-free arguments, and
      when that op met an infinity (``0 × ∞``), to the op that made the infinity.
    - A NaN made in backward is traced to the node where it starts: the node that made it
      from finite gradients, or, when it received an infinity that met a zero, back to the
      node that made that infinity (an infinite gradient that never becomes NaN is not
      blamed). Through the forward traceback anomaly mode recorded, the report names the
      line of ``fn`` that created that node, and from the values the node used, the cause.
    - A NaN made inside backward that no gradient backward returned holds (a mask, or a hook
      such as ``torch.nan_to_num``, removed it on the way) is no NaN origin: ``found`` is
      ``False`` and ``removed`` is set, with the node where it appeared.
    - A hook that received an infinity and returned NaN is named, not the node before it.
    - In a training loop: a parameter that an optimizer's step made infinite (the learning
      rate too high) is named as the cause of the next forward's NaN, and a float16
      gradient that overflowed under ``torch.amp.GradScaler`` is said to be the scaler's
      normal behaviour. Iterations are counted from the lines that run backward (a GAN
      runs two passes per iteration).

    Args:
        fn: the computation, returning a tensor (a loss, say), or a tuple or list of tensors.
        *inputs: its inputs.

    Returns:
        A :class:`NanOrigin`; it displays itself in Jupyter.

    Example::

        >>> def distance(x):
        ...     return torch.sqrt((x**2).sum())
        >>> origin = find_nan_origin(distance, torch.zeros(3))
        >>> origin.found, origin.stage, origin.node
        (True, 'backward', 'SqrtBackward0')
    """
    require_callable("find_nan_origin", "fn", fn)
    in_input = nan_in_input(fn, inputs)
    if in_input is not None:
        return in_input
    return reported(fn, inputs, _from_run)


def _from_run(run: Run) -> NanOrigin:
    """The report on what :func:`run_watched` saw."""
    error = run.outcome.error
    if error is not None:
        message = f"fn raised {error.describe()} {error.where}".strip()
        if "inplace operation" in str(error.exception):
            message += (
                " `ah.anomaly.explain_inplace_error` names the changed tensor and the line "
                "that changed it."
            )
        return NanOrigin(False, message, "fn raised an exception", (message,), raised=True)
    if run.returned:
        message = (
            f"fn returned {run.returned}: find_nan_origin needs fn to return a tensor (a loss), "
            "or a tuple or list of tensors."
        )
        return NanOrigin(False, message, "fn did not return a tensor", (message,), raised=True)
    # What fn returned, or what its own backward started from, holds a NaN: forward made it,
    # unless one of fn's own backward passes made a NaN before that forward ran.
    forward = forward_nan_time(run)
    if forward is not None and forward <= first_backward_nan(run):
        return in_forward(run)
    removed: NanOrigin | None = None
    for record, own in run.records:
        story = nan_story(record)
        if story is None:
            continue
        origin = _in_backward(story, run, own.scale if own is not None else None)
        if not story.reaches:
            removed = removed or removed_origin(origin)
            continue  # the gradients backward returned hold no NaN
        if own is None:
            return origin
        where = f" ({own.line})" if own.line else ""
        message = f"The NaN appears in the backward pass fn ran itself{where}. {origin.message}"
        index = run.own.index(own)
        if len(run.own) > 1:
            number = loop_iteration(index, lines(run))
            per = len(set(lines(run)))
            each = f", {per} backward passes per iteration" if per > 1 else ""
            loop = (
                f": in a training loop{each}, iteration {number} (step {number - 1}, counting "
                "from 0)"
                if number is not None
                else ""
            )
            message += (
                f" That is the {ordinal(index + 1)} of the {len(run.own)} backward passes fn "
                f"ran{loop}; the ones before it made no NaN."
            )
        stepped = origin.node == "optimizer step"  # its message says what the steps did
        if not stepped and any(
            r.by_optimizer and kind_of(r.target) == "nan" for r in run.watch.inplace
        ):
            message += (
                " Note: the optimizer's `step()` that fn took has really run and put NaN into "
                "the parameters: re-create (or reload) the model before running fn again."
            )
        return replace(origin, message=message, details=(message,))
    return removed or no_nan(run)
