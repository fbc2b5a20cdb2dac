"""Forward's return value judged, for :func:`autograd_helpers.checks.check_function`.

:func:`inspect_outputs` looks at what forward returned before any gradient is asked for: the
inputs left as they were (unless marked dirty), the structure (a tensor or a tuple of them),
each output's device, layout, shape, dtype, finiteness and values against the reference, and
whether the outputs that should carry a gradient do. Apart from the judgements of backward
(:mod:`._returned_gradients`, :mod:`._gradient_match`): it needs only forward's result.
"""

from __future__ import annotations

import torch
from torch import Tensor

from autograd_helpers.checks._core.hints import dtype_hint
from autograd_helpers.checks._core.numeric import located, same_values, worst_mismatch
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._wording import (
    GRAPH_CUT,
    MISMATCH,
    Verdict,
    first_non_finite,
    kind_of,
    shape_text,
)

__all__ = ["inspect_outputs"]

# A Function's floating-point output always requires grad when an input does, unless marked.
_MARKED = (
    "forward marked it with `ctx.mark_non_differentiable(...)`: mark only outputs that carry no "
    "gradient (masks, indices), never the result."
)


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
            return Verdict(f"{which} returned a {kind_of(out)}, not a torch.Tensor.", hint)
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
            f"{which} has shape {shape_text(out)}, but the reference's has shape "
            f"{shape_text(want)}.",
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
    bad = first_non_finite(out, None if want is None else want.isfinite())
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
        cause = _MARKED if trial.is_function else GRAPH_CUT
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
