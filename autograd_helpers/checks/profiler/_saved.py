"""``check_saved_bytes`` as named checks, run in order from :data:`CHECKS`.

Before them, the precision of what is saved is judged (:func:`lowered_precision`), then
``check_function`` judges the values and gradients, with probes at the edges of the domain
in float64 and float32. Then one forward is measured (:func:`~._memory.measure`):
every storage it keeps alive for backward, by any route. Each check below judges one
property of that :class:`~._memory.Memory`; the first that finds a problem gives
the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks.profiler._memory import Held, Memory
from autograd_helpers.checks.profiler._python import FilesWritten

__all__ = ["CHECKS", "Budget", "Check", "describe", "lowered_precision"]


@dataclass(frozen=True)
class Budget:
    """What the exercise allows: ``max_bytes`` saved for backward, and an output of
    ``dtype`` (the reference's on the same inputs; ``None``: not judged)."""

    max_bytes: int
    dtype: torch.dtype | None = None


Check = Callable[[Memory, Budget], tuple[str, ...] | None]


def describe(held: list[Held]) -> str:
    """``"an input (4,000 bytes) and an intermediate (4,000 bytes)"``.

    Example::

        >>> describe([Held(400, "an input"), Held(400, "a copy of an input")])
        'an input (400 bytes) and a copy of an input (400 bytes)'
    """
    parts = [f"{h.what} ({h.nbytes:,} bytes)" for h in held]
    if not parts:
        return "nothing"
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def lowered_precision(fn: object, inputs: tuple[Tensor, ...]) -> tuple[str, ...] | None:
    """The problem if ``fn`` saves a tensor less precise than its inputs (float32 and float64)."""
    if not (isinstance(fn, type) and issubclass(fn, Function)):
        return None  # check_function explains what is wrong with it
    kept = Contained(fn)  # forward runs here: what it writes by name is put back
    try:
        return _lowered(fn, inputs)
    finally:
        kept.restore()


def _lowered(fn: type[Function], inputs: tuple[Tensor, ...]) -> tuple[str, ...] | None:
    for dtype in (torch.float32, torch.float64):
        leaves = [fresh_leaf(x, dtype) for x in inputs]  # never the caller's tensor itself
        outcome = run_learner_code(fn.apply, *leaves)
        node = getattr(outcome.value, "grad_fn", None)
        try:
            saved: list[Tensor | None] = list(getattr(node, "saved_tensors", ()))
        except RuntimeError:
            return None
        for tensor in saved:
            if (
                tensor is not None
                and tensor.dim() > 0  # a 0-dim hyperparameter (`torch.tensor(1.0)`) loses nothing
                and tensor.is_floating_point()
                and torch.finfo(tensor.dtype).eps > torch.finfo(dtype).eps
            ):
                lower, given = (str(d).removeprefix("torch.") for d in (tensor.dtype, dtype))
                copy = any(tensor.shape == x.shape for x in leaves)
                what = (
                    f"a {lower} copy"
                    if copy
                    else f"a {lower} tensor of shape {tuple(tensor.shape)}"
                )
                return (
                    f"on {given} inputs it saves {what} (the check runs it on float32 "
                    "and on float64 inputs).",
                    "A lower-precision copy saves bytes by losing digits of the gradient. Here "
                    "the exact saving is possible: save the input as it is, without converting "
                    "it, and recompute the rest in backward.",
                )
    return None


# --- the checks, in order -------------------------------------------------------------------


def _global_settings(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if not memory.side_effects:
        return None
    first, *more = memory.side_effects
    return (f"forward {first.removeprefix('it ')}.", *more, "The checker put it back.")


def _output_dtype(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    output = memory.output
    if budget.dtype is None or not isinstance(output, Tensor) or output.dtype == budget.dtype:
        return None
    given, wanted = (str(d).removeprefix("torch.") for d in (output.dtype, budget.dtype))
    return (
        f"forward returns {given} where the reference returns {wanted} (on the same inputs).",
        "The output's dtype is part of the answer: every layer after it would compute in "
        f"{given}, and its memory too. Return the result in the input's dtype.",
    )


def _no_ctx_tensors(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if not memory.ctx_attributes:
        return None
    return (
        f"it keeps tensors as ctx attributes ({', '.join(memory.ctx_attributes)}).",
        "Autograd cannot see those: they escape its version check (an in-place change goes "
        "unnoticed) and any count of saved memory. Save tensors with "
        "`ctx.save_for_backward` and read them back with `ctx.saved_tensors`.",
    )


_OUTSIDE_HINT = (
    "Memory held outside `ctx` lives as long as that name does, not as long as the graph, and "
    "every call shares it: a second forward overwrites what the first one's backward still "
    "needs. Save only the input with `ctx.save_for_backward(x)`, and recompute the rest in "
    "backward."
)


def _nothing_elsewhere(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if not memory.elsewhere:
        return None
    total = sum(h.nbytes for h in memory.elsewhere)
    named = sorted(
        {
            h.route + (f" ({h.what})" if h.what.startswith(("numbers", "bytes")) else "")
            for h in memory.elsewhere
            if h.route
        }
    )
    where = (
        f"The checker found it in {' and '.join(named)}."
        if named
        else "The checker could not name where (a global container, a closure, an attribute "
        "of a tensor?), but the memory is alive after forward returned."
    )
    return (
        f"it keeps {total:,} bytes alive between forward and backward outside "
        "`ctx.save_for_backward`.",
        where,
        _OUTSIDE_HINT,
    )


def _no_numpy_copy(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if memory.numpy_bytes < 1024:  # NumPy's own small bookkeeping is no intermediate
        return None
    where = f" in {memory.numpy_route}" if memory.numpy_route else ""
    return (
        f"it keeps {memory.numpy_bytes:,} bytes of NumPy arrays{where} alive between "
        "forward and backward.",
        _OUTSIDE_HINT,
    )


def _no_files(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if not memory.files:
        return None
    shown = ", ".join(f"`{FilesWritten.shown(p)}`" for p in memory.files[:3])
    return (
        f"forward writes to a file ({shown}) for backward to read back.",
        "A file is memory kept outside `ctx.save_for_backward` too, and slower: every call "
        "shares it, so a second forward overwrites what the first one's backward needs. "
        "Save only the input with `ctx.save_for_backward(x)`, and recompute the rest in "
        "backward. (The checker removed the file it made.)",
    )


# Python objects kept beyond a quarter of the input's bytes (at least 2 KiB: the output's
# and ctx's own objects are some hundreds) are an intermediate
PYTHON_SHARE = 4


def _no_python_objects(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if memory.python_bytes * PYTHON_SHARE <= max(memory.input_bytes, 8192):
        return None
    return (
        f"it keeps {memory.python_bytes:,} bytes of Python objects alive between forward and "
        "backward (text, a dict or list of numbers, a `BytesIO`, a file object...).",
        "The checker could not name where, but the memory is alive after forward returned "
        "and was made by it. " + _OUTSIDE_HINT,
    )


def _within_budget(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    if memory.counted_bytes <= budget.max_bytes:
        return None
    return (
        f"its gradients are right, but it saves {memory.counted_bytes:,} bytes; the budget is "
        f"{budget.max_bytes:,}.",
        f"It saves {describe(memory.saved)}.",
        "Save only what backward cannot recompute cheaply (here, the input), and compute "
        "the intermediates again in backward from it.",
    )


def _the_input_not_a_copy(memory: Memory, budget: Budget) -> tuple[str, ...] | None:
    copies = [h for h in memory.saved if "copy of an input" in h.what]
    if not copies:
        return None
    return (
        f"it saves {describe(copies)}: a copy is memory of its own, the input is not.",
        "The input is alive anyway (its caller holds it); a copy (`x.clone()`, "
        "`x.detach().clone()`, `x.double()`) is as large again. Save the input itself: "
        "`ctx.save_for_backward(x)`.",
    )


CHECKS: tuple[Check, ...] = (
    _global_settings,
    _output_dtype,
    _no_ctx_tensors,
    _nothing_elsewhere,
    _no_numpy_copy,
    _no_files,
    _no_python_objects,
    _within_budget,
    _the_input_not_a_copy,
)
