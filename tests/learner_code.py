"""Learner code for the checker tests: a correct Function and a way to break one method.

Each broken Function in the tests is ``variant(...)`` of :class:`Cube` with one method
replaced, so a failing test points at exactly one mistake.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

X = torch.linspace(-1.5, 1.3, 5)


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x**2


def cube(x):
    return x**3


def variant(**methods):
    """Cube with some methods replaced (each given as a plain function)."""
    return type("Cube", (Cube,), {k: staticmethod(v) for k, v in methods.items()})


def saved(ctx):
    """The tensor Cube's forward saved."""
    return ctx.saved_tensors[0]


class ScaleForgettingNone(Function):
    """``x * c`` for a Python number ``c``, whose backward forgets ``None`` for ``c``."""

    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        return x * c

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.c
