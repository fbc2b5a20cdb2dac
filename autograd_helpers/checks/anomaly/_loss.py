"""What a loss returned to ``check_finite_gradients``, and the precision it computed in.

Used by :mod:`._finite`. A loss is a tensor of one element and shape ``()``,
floating point, as precise as its input, connected to it (:func:`loss_problem`). A loss
that went through a less precise dtype on the way (``points.float()``, converted back or
not) is seen in its graph, whose nodes record the dtype of each result they differentiate
(:func:`computed_in`): near a singular point float32's squares underflow to 0 where
float64's are still numbers, so a verdict there must name float32, not an epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from autograd_helpers._common.nodes import graph_nodes

__all__ = ["computed_in", "loss_problem", "precision_hint"]


def _less_precise(dtype: torch.dtype, than: torch.dtype) -> bool:
    if not (dtype.is_floating_point and than.is_floating_point):
        return False
    return torch.finfo(dtype).eps > torch.finfo(than).eps


def computed_in(value: Tensor, inputs: Sequence[Tensor]) -> torch.dtype | None:
    """The least precise dtype ``value``'s graph computed a result in, where it is less
    precise than ``inputs``' most precise; ``None`` when it kept their precision.

    Example::

        >>> points = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
        >>> computed_in(torch.linalg.vector_norm(points.float()).double(), [points])
        torch.float32
        >>> computed_in(torch.linalg.vector_norm(points), [points]) is None
        True
    """
    floats = [x.dtype for x in inputs if x.is_floating_point()]
    if not floats:
        return None
    precise = min(floats, key=lambda d: torch.finfo(d).eps)
    dtypes = [value.dtype] if value.is_floating_point() else []
    roots = [value.grad_fn] if value.grad_fn is not None else []
    for node in graph_nodes(roots):
        dtypes += [meta.dtype for meta in getattr(node, "_input_metadata", ())]
    lower = [d for d in dtypes if _less_precise(d, precise)]
    return max(lower, key=lambda d: torch.finfo(d).eps) if lower else None


def precision_hint(low: torch.dtype, high: torch.dtype) -> str:
    """The hint for a loss that computed in ``low`` for an input in ``high``.

    Example::

        >>> precision_hint(torch.float32, torch.float64)[:58]
        'Hint: your loss computes in float32 for float64 input (a `'
    """
    low_name, high_name = (str(d).removeprefix("torch.") for d in (low, high))
    digits = [round(-math.log10(torch.finfo(d).eps)) for d in (low, high)]
    squares = (
        " (1e-30 squared is 0 in float32; in float64 it is 1e-60, as it should be)"
        if (low, high) == (torch.float32, torch.float64)
        else ""
    )
    return (
        f"Hint: your loss computes in {low_name} for {high_name} input (a `.float()`, or a "
        f"tensor made without a dtype, on the way): {low_name} keeps about {digits[0]} "
        f"digits where {high_name} keeps {digits[1]}, and its small numbers underflow to 0 "
        f"far sooner{squares}. The original computes in its input's dtype, and so must the "
        "fix: drop the conversion."
    )


def loss_problem(value: object, inputs: Sequence[Tensor]) -> tuple[str, ...] | None:
    """``(title, details...)`` when ``value`` is no loss for ``inputs``; ``None`` if it is:
    a tensor of one element and shape ``()``, floating point and as precise as the input,
    connected to it."""
    if not isinstance(value, Tensor):
        kind = type(value).__name__
        if type(value).__module__ == "numpy":
            return (
                f"it returned a NumPy {kind}, not a tensor: NumPy values carry no gradient.",
                "Hint: compute with torch operations and return the tensor.",
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (
                f"it returned a Python {kind}, not a tensor.",
                "Hint: `float(...)` and `.item()` turn the loss into a plain number, which "
                "autograd cannot differentiate: return the tensor.",
            )
        return (f"it returned a {kind}, not a tensor (the loss).",)
    if value.numel() != 1:
        return (
            f"it returned a tensor of shape {tuple(value.shape)}; the loss is one number "
            "(the original's shape is ()).",
            "Hint: reduce it as the original loss does: did you leave out the `.mean()` (or "
            "`.sum()`) at the end?",
        )
    if value.dim() != 0:
        return (
            f"it returned a tensor of shape {tuple(value.shape)}; the original loss is a "
            "0-dim tensor, shape ().",
            "Hint: the loss is one number, a 0-dim tensor, as `.mean()` returns it; one of "
            "shape (1,) turns every sum it joins into shape (1,) too. Reduce as the original "
            "does (`.mean()` over all of it), or drop the extra dimension (`.squeeze()`).",
        )
    given = inputs[0].dtype
    if not value.is_floating_point() or value.dtype.itemsize < 4:
        why = (
            "a loss is a real number"
            if value.is_complex()
            else "a loss needs the precision of its input (float16 keeps about 3 digits, an "
            "integer none)"
        )
        return (
            f"it returned its loss as {value.dtype}, for {given} input.",
            f"Hint: {why}: compute in the input's dtype, or in float64.",
        )
    if _less_precise(value.dtype, given):
        return (
            f"it returned its loss as {value.dtype}, for {given} input.",
            precision_hint(value.dtype, given),
        )
    if not value.requires_grad:
        return (
            "its value does not require grad: it is not connected to the input, so it has no "
            "gradient at all.",
            "Hint: something cut it off from the graph: `.detach()`, `torch.no_grad()`, "
            "`.item()` or `float()`, or a new tensor made with `torch.tensor(...)`.",
        )
    return None
