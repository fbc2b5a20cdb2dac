"""Every teaching Function in one list, for the unit tests and for ``make bench``.

A :class:`FunctionCase` names a Function's wrapper (with its non-tensor arguments fixed),
the composition of built-ins it must equal, the fused built-in that does the same in one
kernel (where there is one), and how to make example inputs of about ``numel`` elements.
``tests/test_functions.py`` runs gradcheck, gradgradcheck and the comparisons over it;
``make bench`` times it. A new Function gets both by adding one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from autograd_helpers import functions as fns

__all__ = ["FUNCTION_CASES", "FunctionCase", "case_named"]

Inputs = Callable[[int, torch.Generator, torch.dtype], tuple[Tensor, ...]]


@dataclass(frozen=True)
class FunctionCase:
    """A teaching Function, what it must equal, and example inputs of about ``numel``."""

    name: str  # unique; starts with the Function class's name
    function: type[torch.autograd.Function]
    call: Callable[..., Tensor]
    builtin: Callable[..., Tensor]  # the composition of built-ins it replaces
    make_inputs: Inputs
    fused: Callable[..., Tensor] | None = None  # one built-in doing it all, if any
    forward_ad: bool = False  # has a jvp: forward mode and torch.func work
    is_derivative: bool = True  # False: the gradient is deliberately not the derivative

    def inputs(
        self, numel: int = 12, *, dtype: torch.dtype = torch.float64, seed: int = 0
    ) -> tuple[Tensor, ...]:
        """Fresh example inputs (leaves, not requiring grad) of about ``numel`` elements."""
        return self.make_inputs(numel, torch.Generator().manual_seed(seed), dtype)


def _rows_of_4(numel: int, generator: torch.Generator, dtype: torch.dtype) -> tuple[Tensor, ...]:
    return (torch.randn(max(1, numel // 4), 4, generator=generator, dtype=dtype),)


def _batched_layer(
    numel: int, generator: torch.Generator, dtype: torch.dtype
) -> tuple[Tensor, ...]:
    # (2, rows, features): leading batch dimensions exercise the folding in backward.
    features = 4 if numel < 4096 else 64
    rows = max(1, numel // (2 * features))

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator, dtype=dtype)

    return randn(2, rows, features), randn(features - 1, features), randn(features - 1)


def _channels(numel: int, generator: torch.Generator, dtype: torch.dtype) -> tuple[Tensor, ...]:
    return (torch.randn(2, 4, max(11, numel // 8), generator=generator, dtype=dtype),)


FUNCTION_CASES = (
    FunctionCase("Exp", fns.Exp, fns.exp, torch.exp, _rows_of_4, forward_ad=True),
    FunctionCase(
        "Sigmoid",
        fns.Sigmoid,
        fns.sigmoid,
        lambda x: 1 / (1 + torch.exp(-x)),
        _rows_of_4,
        fused=torch.sigmoid,
        forward_ad=True,
    ),
    FunctionCase(
        "Swish",
        fns.Swish,
        fns.swish,
        lambda x: x * torch.sigmoid(x),
        _rows_of_4,
        fused=F.silu,
    ),
    FunctionCase(
        "ReLU", fns.ReLU, fns.relu, lambda x: x.clamp(min=0), _rows_of_4, fused=torch.relu
    ),
    FunctionCase(
        "MulConstant",
        fns.MulConstant,
        lambda x: fns.mul_constant(x, -2.5),
        lambda x: x * -2.5,
        _rows_of_4,
    ),
    FunctionCase(
        "LinearFunction",
        fns.LinearFunction,
        fns.linear,
        lambda x, w, b: x @ w.T + b,
        _batched_layer,
        fused=F.linear,
    ),
    FunctionCase(
        "ScaleGrad",
        fns.ScaleGrad,
        lambda x: fns.scale_grad(x, -1.0),
        lambda x: x * -1.0 + (x * 2.0).detach(),  # value x, gradient -1: the detach trick
        _rows_of_4,
        is_derivative=False,  # gradcheck would rightly fail: see test_functions.py
    ),
    FunctionCase(
        "SquareAndMaxPool1d (overlapping)",
        fns.SquareAndMaxPool1d,
        lambda x: fns.square_and_max_pool1d(x, 3, stride=1, padding=1),
        lambda x: F.max_pool1d(x * x, 3, 1, 1),
        _channels,
    ),
    FunctionCase(
        "SquareAndMaxPool1d (dilated, ceil)",
        fns.SquareAndMaxPool1d,
        lambda x: fns.square_and_max_pool1d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True),
        lambda x: F.max_pool1d(x * x, 3, 2, 1, 2, ceil_mode=True),
        _channels,
    ),
)


def case_named(name: str) -> FunctionCase:
    """The case called ``name`` (``KeyError`` naming the known ones otherwise)."""
    for case in FUNCTION_CASES:
        if case.name == name:
            return case
    raise KeyError(f"no case {name!r}; known: {[c.name for c in FUNCTION_CASES]}")
