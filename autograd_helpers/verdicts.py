"""The individual judgements behind :func:`autograd_helpers.checks.check_function`.

Each function looks at one thing the learner's code produced and returns a :class:`Verdict`
(what is wrong, in words a learner can act on) or ``None`` when it is fine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from autograd_helpers.numeric import first_mismatch, format_number, index_text, same_values

__all__ = ["Verdict", "compare_gradients", "inspect_outputs", "inspect_raw_gradients"]

_GRAPH_CUT = "Something cut the graph: `.detach()`, `.item()`, `.numpy()` or `torch.no_grad()`."


@dataclass(frozen=True)
class Verdict:
    """What is wrong: a one-sentence ``title`` and lines of ``details``."""

    title: str
    details: tuple[str, ...] = ()


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape))


def _first_non_finite(t: Tensor, where: Tensor | None = None) -> tuple[str, str] | None:
    """``("nan", "[2]")`` for the first NaN/inf element (only where ``where`` is True)."""
    bad = ~t.detach().isfinite()
    if where is not None:
        bad &= where
    if not bool(bad.any()):
        return None
    flat = int(bad.reshape(-1).nonzero()[0, 0])
    value = float(t.detach().reshape(-1)[flat])
    return ("nan" if value != value else "inf"), index_text(flat, t.shape)


def _kind(value: object) -> str:
    module = type(value).__module__
    return f"{module}.{type(value).__name__}" if module != "builtins" else type(value).__name__


def inspect_outputs(
    value: object,
    leaves: Sequence[object],
    originals: Sequence[object],
    names: Sequence[str],
    wrt: Sequence[int],
    expected: tuple[Tensor, ...] | None,
) -> Verdict | None:
    """Judge forward's return value (and whether it changed its inputs)."""
    for i, (now, before) in enumerate(zip(leaves, originals, strict=True)):
        if not isinstance(now, Tensor) or not isinstance(before, Tensor):
            continue
        if not same_values(now, before):
            return Verdict(
                f"forward changed its input `{names[i]}` in place.",
                (
                    "Compute a new tensor instead (`x * 2`, not `x.mul_(2)` or "
                    "`x[...] = ...`): autograd and the caller still need the original.",
                ),
            )
    if isinstance(value, tuple) and expected is not None and len(expected) == 1:
        return Verdict(
            f"forward returned a tuple of {len(value)} values, but one tensor is expected.",
            ("Return just the result (`return out`, not `return out, something`).",),
        )
    outputs = value if isinstance(value, tuple) else (value,)
    if isinstance(value, list):
        return Verdict("forward returned a list; return a tensor (or a tuple of tensors).")
    for k, out in enumerate(outputs):
        which = "forward" if len(outputs) == 1 else f"forward's output {k}"
        if not isinstance(out, Tensor):
            hint: tuple[str, ...] = ()
            if type(out).__module__.startswith("numpy"):
                hint = ("Turn a NumPy result back into a tensor with `torch.from_numpy(...)`.",)
            return Verdict(f"{which} returned a {_kind(out)}, not a torch.Tensor.", hint)
    tensors = tuple(o for o in outputs if isinstance(o, Tensor))
    if expected is not None and len(tensors) != len(expected):
        return Verdict(
            f"forward returned {len(tensors)} outputs, but {len(expected)} are expected."
        )
    float_dtype = next(x.dtype for x in leaves if isinstance(x, Tensor) and x.is_floating_point())
    for k, out in enumerate(tensors):
        which = "the output" if len(tensors) == 1 else f"output {k}"
        want = expected[k] if expected is not None else None
        if out.device.type != "cpu":
            return Verdict(f"{which} is on device `{out.device}`, but the inputs are on `cpu`.")
        if want is not None and out.shape != want.shape:
            return Verdict(f"{which} has shape {_shape(out)}, expected {_shape(want)}.")
        want_dtype = want.dtype if want is not None else float_dtype
        if out.dtype != want_dtype:
            return Verdict(
                f"{which} has dtype {out.dtype}, expected {want_dtype}.",
                ("Do not hard-code a dtype: compute from the inputs (`torch.zeros_like(x)`).",),
            )
        bad = _first_non_finite(out, None if want is None else want.isfinite())
        if bad is not None:
            at = f" (first at index {bad[1]})" if bad[1] else ""
            return Verdict(f"{which} contains {bad[0]}{at}.")
        if want is not None:
            mismatch = first_mismatch(out, want, atol=1e-7, rtol=1e-5)
            if mismatch is not None:
                return Verdict(
                    f"{which} does not match the reference.",
                    (
                        mismatch.describe(
                            "output" if len(tensors) == 1 else f"output {k}", "yours", "reference"
                        ),
                    ),
                )
        if wrt and not out.requires_grad:
            return Verdict(
                f"{which} does not require grad: autograd cannot reach the inputs from it.",
                (_GRAPH_CUT,),
            )
    return None


def inspect_raw_gradients(
    raw: object,
    inputs: Sequence[object],
    leaves: Sequence[object],
    names: Sequence[str],
    wrt: Sequence[int],
) -> Verdict | None:
    """Judge exactly what a Function's ``backward`` returned, before the engine touches it."""
    if isinstance(raw, list):
        return Verdict(
            "backward returned a list; return a tuple (or, for one input, just the tensor)."
        )
    grads = raw if isinstance(raw, tuple) else (raw,)
    count = len(inputs)
    non_tensors = [names[i] for i, x in enumerate(inputs) if not isinstance(x, Tensor)]
    extra = grads[count:]
    if len(grads) < count or any(g is not None for g in extra):
        ins = ", ".join(f"`{n}`" for n in names)
        details = [f"Return one gradient per forward input ({ins}), in the same order."]
        if non_tensors:
            details.append(
                "Inputs that are not tensors get `None`: "
                + ", ".join(f"`{n}`" for n in non_tensors)
                + "."
            )
        return Verdict(
            f"backward returned {len(grads)} gradient{'s' * (len(grads) != 1)}, but forward "
            f"takes {count} input{'s' * (count != 1)}.",
            tuple(details),
        )
    for i, grad in enumerate(grads[:count]):
        name = names[i]
        leaf = leaves[i]
        if not isinstance(leaf, Tensor):
            if grad is not None:
                return Verdict(
                    f"backward returned a gradient for `{name}`, but `{name}` is not a tensor "
                    f"(it is a {_kind(inputs[i])}).",
                    ("Return `None` in its place: only tensors get gradients.",),
                )
            continue
        if i not in wrt or grad is None:
            continue  # None for an input that needs a gradient is judged by its values
        if not isinstance(grad, Tensor):
            return Verdict(f"the gradient for `{name}` is a {_kind(grad)}, not a tensor.")
        if grad.shape != leaf.shape:
            return Verdict(
                f"the gradient for `{name}` has shape {_shape(grad)}, but `{name}` has shape "
                f"{_shape(leaf)}.",
                ("Each gradient has the shape of its input (sum over broadcast dimensions).",),
            )
        if grad.dtype != leaf.dtype:
            return Verdict(
                f"the gradient for `{name}` has dtype {grad.dtype}, but `{name}` is {leaf.dtype}.",
                ("Build gradients from `grad_output` or the saved tensors, not a fixed dtype.",),
            )
        if grad.device != leaf.device:
            return Verdict(f"the gradient for `{name}` is on `{grad.device}`, not `{leaf.device}`.")
    return None


def _hint(got: Tensor, expected: Tensor, grad_output: Tensor | None) -> str | None:
    def close(a: Tensor, b: Tensor) -> bool:
        return bool(torch.allclose(a, b, rtol=1e-3, atol=1e-6))

    if not bool(expected.abs().max() > 1e-6):
        return None
    if close(got, -expected):
        return "Hint: the sign is flipped."
    if bool(got.abs().max() <= 1e-12):
        return "Hint: your gradient is zero everywhere."
    if (
        grad_output is not None
        and got.shape == grad_output.shape
        and close(got * grad_output, expected)
    ):
        return (
            "Hint: it looks like backward returned the local derivative without multiplying "
            "it by `grad_output` (the chain rule)."
        )
    scale = float((got * expected).sum() / (expected * expected).sum())
    if abs(scale) > 1e-6 and close(got, scale * expected):
        return f"Hint: your gradient is {format_number(scale)} times the right one."
    return None


def compare_gradients(
    got: Sequence[Tensor | None],
    expected: Sequence[Tensor],
    names: Sequence[str],
    grad_outputs: Sequence[Tensor],
    source: str,
    *,
    inputs: Sequence[Tensor],
    atol: float,
    rtol: float,
    is_function: bool,
) -> Verdict | None:
    """Judge the gradients' values against ``expected`` (from ``source``).

    ``inputs`` are the tensors the gradients belong to, in the same order: for an
    elementwise function the verdict quotes the input and ``grad_output`` at the worst
    element, so the learner can redo the arithmetic by hand.
    """
    only_output = grad_outputs[0] if len(grad_outputs) == 1 else None
    for grad, want, name, value in zip(got, expected, names, inputs, strict=True):
        if grad is None:
            if bool((want == 0).all()):
                continue
            if is_function:
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
            return Verdict(
                f"the gradient for `{name}` contains {bad[0]} (first at `{name}{bad[1]}`)."
            )
        mismatch = first_mismatch(grad, want, atol=atol, rtol=rtol)
        if mismatch is not None:
            details = [mismatch.describe(name, "yours", source)]
            if only_output is not None and value.shape == grad.shape == only_output.shape:
                at = mismatch.flat_index
                details.append(
                    f"There `{name}` = {format_number(float(value.detach().reshape(-1)[at]))} "
                    f"and `grad_output` = {format_number(float(only_output.reshape(-1)[at]))}."
                )
            details.append(
                "(The check backpropagates a random `grad_output`, so these are "
                "`grad_output` times the derivative, not the derivative alone.)"
            )
            hint = _hint(grad.detach(), want, only_output)
            if hint:
                details.append(hint)
            return Verdict(
                f"the gradient for `{name}` is off compared with {source}.", tuple(details)
            )
    return None
