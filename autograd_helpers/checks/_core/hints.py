"""Hints: the likely mistake behind a wrong result, named when the numbers give it away.

Each function returns one line starting with ``"Hint: "``, or ``None`` when the pattern is
not there. A hint is only given when it explains the whole tensor, never a guess from one
element.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from autograd_helpers.checks._core.numeric import format_number

__all__ = ["dtype_hint", "sum_to", "swap_hint", "transposed_hint", "value_hint"]


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-3, atol=1e-6))


def sum_to(gradient: Tensor, shape: torch.Size) -> Tensor | None:
    """``gradient`` summed over the dimensions ``shape`` was broadcast along, as autograd
    does for a backward's result; ``None`` when ``shape`` does not broadcast to it."""
    try:
        broadcast = torch.broadcast_shapes(shape, gradient.shape)
    except RuntimeError:
        return None
    return gradient.sum_to_size(shape) if broadcast == gradient.shape else None


def value_hint(got: Tensor, expected: Tensor, grad_output: Tensor | None) -> str | None:
    """Sign flipped, all zeros, the chain rule forgotten, or a constant factor off."""
    if not bool(expected.abs().max() > 1e-6):
        return None
    if _close(got, -expected):
        return "Hint: the sign is flipped."
    if bool(got.abs().max() <= 1e-12):
        return "Hint: your gradient is zero everywhere."
    if (
        grad_output is not None
        and grad_output.shape == got.shape
        and _close(got * grad_output, expected)
    ):
        return (
            "Hint: it looks like backward returned the local derivative without multiplying "
            "it by `grad_output` (the chain rule)."
        )
    scale = float((got * expected).sum() / (expected * expected).sum())
    if abs(scale) > 1e-6 and abs(scale - 1) > 1e-3 and _close(got, scale * expected):
        return f"Hint: your gradient is {format_number(scale)} times the right one."
    return None


def swap_hint(
    returned: Sequence[object],
    names: Sequence[str],
    shapes: Sequence[torch.Size],
    expected: Sequence[Tensor] | None = None,
) -> str | None:
    """Two gradients returned in each other's place (by their shapes, or their values).

    ``returned[k]`` is what backward gave for input ``k`` (of shape ``shapes[k]``);
    ``expected``, when known, holds the right gradients.
    """
    for k in range(len(returned)):
        for j in range(k + 1, len(returned)):
            a, b = returned[k], returned[j]
            if not isinstance(a, Tensor) or not isinstance(b, Tensor):
                continue
            a_as_j, b_as_k = sum_to(a.detach(), shapes[j]), sum_to(b.detach(), shapes[k])
            if a_as_j is None or b_as_k is None:
                continue
            if expected is None:
                fits_own = sum_to(a, shapes[k]) is not None and sum_to(b, shapes[j]) is not None
                swapped = not fits_own
            else:
                swapped = _close(a_as_j, expected[j]) and _close(b_as_k, expected[k])
            if swapped:
                return (
                    f"Hint: the gradients for `{names[k]}` and `{names[j]}` look swapped: "
                    "return them in the order of forward's inputs."
                )
    return None


def transposed_hint(gradient: Tensor, shape: torch.Size) -> str | None:
    """A matrix gradient with its input's shape reversed."""
    if gradient.dim() == 2 and len(shape) == 2 and gradient.shape == shape[::-1]:
        return (
            "Hint: it has the transposed shape: check the order of the matrix product "
            "(`a.T @ b` versus `b.T @ a`)."
        )
    return None


def dtype_hint(dtype: torch.dtype) -> str:
    """What to do about a result of the wrong ``dtype``."""
    if dtype.is_complex:
        return (
            f"Hint: a complex tensor ({dtype}) for a real function: keep the result real, "
            "in the input's dtype (no `.to(torch.complex128)`; `torch.tanh(x)` of a real "
            "`x` is already real)."
        )
    if not dtype.is_floating_point:
        return (
            f"Hint: an integer tensor ({dtype}) cannot carry a gradient: keep the result "
            "floating-point (no `.long()` or `.int()`; `torch.round(x)` is already a float)."
        )
    return (
        "Hint: do not convert the result; let its dtype follow the inputs (no `.float()`, "
        "`torch.zeros_like(x)` rather than `torch.zeros(n)`)."
    )
