"""The individual judgements behind :func:`autograd_helpers.checks.check_function`.

Each function looks at one thing the learner's code produced, in the light of the
:class:`~autograd_helpers.checks._core.trial.Trial`, and returns a :class:`Verdict` (what is
wrong, in words a learner can act on) or ``None`` when it is fine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from autograd_helpers.checks._core.hints import (
    dtype_hint,
    sum_to,
    swap_hint,
    transposed_hint,
    value_hint,
)
from autograd_helpers.checks._core.numeric import (
    format_number,
    index_text,
    located,
    same_values,
    worst_mismatch,
)
from autograd_helpers.checks._core.trial import Trial

__all__ = [
    "MISMATCH",
    "Verdict",
    "broadcast_notes",
    "compare_gradients",
    "inspect_outputs",
    "inspect_raw_gradients",
]

_GRAPH_CUT = "Something cut the graph: `.detach()`, `.item()`, `.numpy()` or `torch.no_grad()`."
# A Function's floating-point output always requires grad when an input does, unless marked.
_MARKED = (
    "forward marked it with `ctx.mark_non_differentiable(...)`: mark only outputs that carry no "
    "gradient (masks, indices), never the result."
)

MISMATCH = "does not match the reference."


@dataclass(frozen=True)
class Verdict:
    """What is wrong: a one-sentence ``title`` and lines of ``details``."""

    title: str
    details: tuple[str, ...] = ()


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape))


def _first_non_finite(t: Tensor, where: Tensor | None = None) -> tuple[str, int] | None:
    """``("nan", 2)``: the first NaN/inf element and its flat index (only where ``where``)."""
    bad = ~t.detach().isfinite()
    if where is not None:
        bad &= where
    if not bool(bad.any()):
        return None
    flat = int(bad.reshape(-1).nonzero()[0, 0])
    value = float(t.detach().reshape(-1)[flat])
    return ("nan" if value != value else "inf"), flat


def _kind(value: object) -> str:
    module = type(value).__module__
    return f"{module}.{type(value).__name__}" if module != "builtins" else type(value).__name__


def _changed_input(trial: Trial, value: object) -> Verdict | None:
    returned = value if isinstance(value, tuple) else (value,)
    for i, (now, before) in enumerate(zip(trial.args, trial.originals, strict=True)):
        if not (isinstance(now, Tensor) and isinstance(before, Tensor)):
            continue
        if any(out is now for out in returned):
            continue  # marked dirty: apply hands back the input itself, written in place
        if not same_values(now, before):
            return Verdict(
                f"forward changed its input `{trial.names[i]}` in place.",
                (
                    "Compute a new tensor instead (`x * 2`, not `x.mul_(2)` or "
                    "`x[...] = ...`): autograd and the caller still need the original. "
                    "(A Function that means to write into its input says so with "
                    "`ctx.mark_dirty(x)` and returns it.)",
                ),
            )
    return None


def _structure(value: object, expected: tuple[Tensor, ...] | None) -> Verdict | None:
    if isinstance(value, tuple) and expected is not None and len(expected) == 1:
        return Verdict(
            f"forward returned a tuple of {len(value)} values, but one tensor is expected.",
            ("Return just the result (`return out`, not `return out, something`).",),
        )
    if isinstance(value, list):
        return Verdict("forward returned a list; return a tensor (or a tuple of tensors).")
    outputs = value if isinstance(value, tuple) else (value,)
    for k, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            which = "forward" if len(outputs) == 1 else f"forward's output {k}"
            hint: tuple[str, ...] = ()
            if type(out).__module__.startswith("numpy"):
                hint = ("Turn a NumPy result back into a tensor with `torch.from_numpy(...)`.",)
            return Verdict(f"{which} returned a {_kind(out)}, not a torch.Tensor.", hint)
    if expected is not None and len(outputs) != len(expected):
        return Verdict(
            f"forward returned {len(outputs)} outputs, but {len(expected)} are expected."
        )
    return None


def inspect_outputs(
    value: object, trial: Trial, expected: tuple[Tensor, ...] | None
) -> Verdict | None:
    """Judge forward's return value (and whether it changed its inputs in place).

    ``expected`` holds the reference's outputs, when the notebook gave a reference.
    """
    verdict = _changed_input(trial, value) or _structure(value, expected)
    if verdict is not None:
        return verdict
    tensors: tuple[Tensor, ...] = value if isinstance(value, tuple) else (value,)
    float_dtype = next(
        x.dtype for x in trial.leaves if isinstance(x, Tensor) and x.is_floating_point()
    )
    for k, out in enumerate(tensors):
        which = "the output" if len(tensors) == 1 else f"output {k}"
        want = expected[k] if expected is not None else None
        close = (trial.options.reference_atol, trial.options.reference_rtol)
        verdict = _output_verdict(out, want, which, float_dtype, _named_inputs(trial), close)
        if verdict is not None:
            return verdict
    return _gradient_carriers(tensors, trial, expected)


def _named_inputs(trial: Trial) -> list[tuple[str, object]]:
    """The example inputs with forward's names for them, to say where a value went wrong."""
    return list(zip(trial.names, trial.inputs, strict=False))


def _output_verdict(
    out: Tensor,
    want: Tensor | None,
    which: str,
    float_dtype: torch.dtype,
    inputs: list[tuple[str, object]],
    close: tuple[float, float],
) -> Verdict | None:
    """One output's device, shape, dtype and values (an index or mask output included).

    Values against the reference's to ``close`` (atol, rtol): float64's rounding unless the
    notebook gave tolerances (a formula with e written as 2.71828 is off by 3e-7 and fails).
    """
    if out.device.type != "cpu":
        return Verdict(f"{which} is on device `{out.device}`, but the inputs are on `cpu`.")
    if out.layout != torch.strided:
        return Verdict(
            f"{which} is a sparse tensor ({out.layout}); return a dense (strided) one.",
            (
                "Return the result as computed (`torch.tanh(x)`, not `.to_sparse()` of it): "
                "the caller's operations and autograd expect a dense tensor.",
            ),
        )
    if want is not None and out.shape != want.shape:
        return Verdict(
            f"{which} has shape {_shape(out)}, but the reference's has shape {_shape(want)}.",
            (
                "Compute the function the exercise describes, element for element. (If "
                "yours does, and the shapes still differ, the check itself is set up "
                "wrong: its reference computes something else.)",
            ),
        )
    # Without a reference, an integer or boolean output (indices, a mask) is fine as it is.
    want_dtype = want.dtype if want is not None else float_dtype
    if out.dtype != want_dtype and (want is not None or out.is_floating_point()):
        return Verdict(
            f"{which} has dtype {out.dtype}, expected {want_dtype}.", (dtype_hint(out.dtype),)
        )
    bad = _first_non_finite(out, None if want is None else want.isfinite())
    if bad is not None:
        where = located(bad[1], out.shape, inputs)
        return Verdict(f"{which} contains {bad[0]}" + (f", first {where}." if where else "."))
    if want is not None:
        mismatch = worst_mismatch(out, want, atol=close[0], rtol=close[1])
        if mismatch is not None:
            name = "output" if which == "the output" else which
            return Verdict(
                f"{which} {MISMATCH}",
                (mismatch.describe(name, "yours", "reference"),),
            )
    return None


def _gradient_carriers(
    outputs: tuple[Tensor, ...], trial: Trial, expected: tuple[Tensor, ...] | None
) -> Verdict | None:
    """Every output that should carry a gradient does.

    Integer and boolean outputs never do. A floating-point output that does not require
    grad is right where the reference's does not either (marked non-differentiable, like
    ``torch.sort``'s indices), and, without a reference, as long as another output carries
    the gradient; it is then compared by value only.
    """
    if not trial.wrt:
        return None
    carriers = [o for o in outputs if o.is_floating_point() and o.requires_grad]
    for k, out in enumerate(outputs):
        if out.requires_grad or not out.is_floating_point():
            continue
        want = expected[k] if expected is not None else None
        if want is None and carriers:
            continue
        if want is not None and not want.requires_grad:
            continue
        which = "the output" if len(outputs) == 1 else f"output {k}"
        cause = _MARKED if trial.is_function else _GRAPH_CUT
        return Verdict(
            f"{which} does not require grad: autograd cannot reach the inputs from it.",
            (cause,),
        )
    if not carriers:
        return Verdict(
            "no output is differentiable: every output is an integer or boolean tensor.",
            ("Return the floating-point result that the gradient flows through.",),
        )
    return None


def _count(grads: tuple[object, ...], trial: Trial) -> Verdict | None:
    count = len(trial.inputs)
    if len(grads) >= count and all(g is None for g in grads[count:]):
        return None
    ins = ", ".join(f"`{n}`" for n in trial.names)
    details = [f"Return one gradient per forward input ({ins}), in the same order."]
    non_tensors = [
        f"`{trial.names[i]}`" for i, x in enumerate(trial.inputs) if not isinstance(x, Tensor)
    ]
    if non_tensors:
        details.append("Inputs that are not tensors get `None`: " + ", ".join(non_tensors) + ".")
    return Verdict(
        f"backward returned {len(grads)} gradient{'s' * (len(grads) != 1)}, but forward "
        f"takes {count} input{'s' * (count != 1)}.",
        tuple(details),
    )


def inspect_raw_gradients(raw: object, trial: Trial) -> Verdict | None:
    """Judge exactly what a Function's ``backward`` returned, before the engine touches it.

    A gradient whose shape is its input's broadcast up (``(3, 4)`` for a ``(4,)`` input) is
    fine: autograd sums it down, as for its own operations (see :func:`broadcast_notes`).
    """
    if isinstance(raw, list):
        return Verdict(
            "backward returned a list; return a tuple (or, for one input, just the tensor)."
        )
    grads = raw if isinstance(raw, tuple) else (raw,)
    verdict = _count(grads, trial)
    if verdict is not None:
        return verdict
    shapes = [x.shape if isinstance(x, Tensor) else None for x in trial.leaves]
    for i, grad in enumerate(grads[: len(trial.inputs)]):
        name, leaf = trial.names[i], trial.leaves[i]
        if not isinstance(leaf, Tensor):
            if grad is not None:
                return Verdict(
                    f"backward returned a gradient for `{name}`, but `{name}` is not a tensor "
                    f"(it is a {_kind(trial.inputs[i])}).",
                    ("Return `None` in its place: only tensors get gradients.",),
                )
            continue
        if i not in trial.wrt or grad is None:
            continue  # None for an input that needs a gradient is judged by its values
        if not isinstance(grad, Tensor):
            return Verdict(f"the gradient for `{name}` is a {_kind(grad)}, not a tensor.")
        if grad.shape != leaf.shape and sum_to(grad.detach(), leaf.shape) is None:
            tensor_shapes = [s for s in shapes if s is not None]
            hint = (
                swap_hint(grads, trial.names, shapes)  # type: ignore[arg-type]
                if len(tensor_shapes) == len(shapes)
                else None
            ) or transposed_hint(grad, leaf.shape)
            return Verdict(
                f"the gradient for `{name}` has shape {_shape(grad)}, but `{name}` has shape "
                f"{_shape(leaf)}.",
                (hint or "Each gradient has the shape of its input.",),
            )
        if grad.dtype != leaf.dtype:
            hint = (
                "Build gradients from `grad_output` or the saved tensors, not a fixed dtype."
                if grad.is_floating_point()
                else dtype_hint(grad.dtype)
            )
            return Verdict(
                f"the gradient for `{name}` has dtype {grad.dtype}, but `{name}` is {leaf.dtype}.",
                (hint,),
            )
        if grad.device != leaf.device:
            return Verdict(f"the gradient for `{name}` is on `{grad.device}`, not `{leaf.device}`.")
    return None


def broadcast_notes(raw: object, trial: Trial) -> list[str]:
    """A note for each gradient that autograd had to sum down to its input's shape."""
    grads = raw if isinstance(raw, tuple) else (raw,)
    notes = []
    for i, (grad, leaf) in enumerate(zip(grads, trial.leaves, strict=False)):
        if isinstance(grad, Tensor) and isinstance(leaf, Tensor) and grad.shape != leaf.shape:
            notes.append(
                f"Note: backward returned a gradient of shape {_shape(grad)} for "
                f"`{trial.names[i]}`, which has shape {_shape(leaf)}. Autograd summed it over "
                "the broadcast dimensions, as it does for its own operations, so that is fine."
            )
    return notes


def compare_gradients(
    trial: Trial,
    expected: Sequence[Tensor],
    source: str,
    *,
    derivative: bool,
    atol: float | None = None,
    rtol: float | None = None,
) -> Verdict | None:
    """Judge the gradients' values against ``expected`` (from ``source``).

    ``derivative`` says that ``expected`` is ``grad_output`` times the derivative (not so for
    a ``grad_reference``); ``atol`` and ``rtol`` replace the notebook's tolerances. For an
    elementwise function the verdict quotes the input and ``grad_output`` at the worst
    element, so the learner can redo the arithmetic by hand.
    """
    only_output = trial.grad_outputs[0] if len(trial.grad_outputs) == 1 else None
    names = trial.wrt_names
    got = trial.grads
    for k, (grad, want, value) in enumerate(zip(got, expected, trial.wrt_leaves, strict=True)):
        name = names[k]
        if grad is None:
            if bool((want == 0).all()):
                continue
            if trial.is_function:
                return Verdict(
                    f"backward returned None for `{name}`, which needs a gradient.",
                    ("Return a tensor for every input that requires grad.",),
                )
            return Verdict(
                f"`{name}` gets no gradient: the output does not depend on it through autograd.",
                (_GRAPH_CUT,),
            )
        bad = _first_non_finite(grad, want.isfinite())
        if bad is not None:
            element = index_text(bad[1], grad.shape)
            there = ""
            if value.shape == grad.shape and value.numel():
                there = (
                    f", where `{name}` = {format_number(float(value.detach().reshape(-1)[bad[1]]))}"
                )
            return Verdict(
                f"the gradient for `{name}` contains {bad[0]} (first at `{name}{element}`{there}).",
                ("Look for a division by zero or a 0 × ∞ in backward at that value.",),
            )
        tolerance = trial.options.atol if atol is None else atol
        relative = trial.options.rtol if rtol is None else rtol
        mismatch = worst_mismatch(grad, want, atol=tolerance, rtol=relative)
        if mismatch is None:
            continue
        details = [mismatch.describe(name, "yours", source)]
        if only_output is not None and value.shape == grad.shape == only_output.shape:
            at = mismatch.flat_index
            details.append(
                f"There `{name}` = {format_number(float(value.detach().reshape(-1)[at]))} "
                f"and `grad_output` = {format_number(float(only_output.reshape(-1)[at]))}."
            )
        details.append(
            "(The check backpropagates a random `grad_output`, so these are `grad_output` "
            "times the derivative, not the derivative alone.)"
            if derivative
            else "(The check backpropagates a random `grad_output`; these are the gradients "
            "for it, not for `grad_output` = 1.)"
        )
        returned = (
            [trial.raw_gradients[i] for i in trial.wrt]
            if trial.raw_gradients is not None
            else list(got)
        )
        shapes = [s.shape for s in trial.wrt_leaves]
        hint = swap_hint(returned, names, shapes, expected) or value_hint(
            grad.detach(), want, only_output
        )
        if hint:
            details.append(hint)
        return Verdict(f"the gradient for `{name}` is off compared with {source}.", tuple(details))
    return None
