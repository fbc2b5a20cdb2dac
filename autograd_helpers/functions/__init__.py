"""The teaching Functions of chapter 01 (``01_custom_function.ipynb``), and chapter 06's Swish.

Each is a :class:`torch.autograd.Function` subclass (PascalCase) with a lowercase functional
wrapper that validates its arguments, as :mod:`torch.nn.functional` does for the built-ins.
Call the wrapper: ``Function.apply`` takes no keyword arguments and checks nothing.

- :class:`Exp` and :class:`Sigmoid` use the modern form (``forward`` without ``ctx``, plus
  ``setup_context``), a ``jvp`` for forward mode (for an elementwise function, the same
  product as ``backward``) and ``generate_vmap_rule``, so that
  :mod:`torch.func` (``vmap``, ``jacrev``, ``jacfwd``, ``hessian``) works on them.
- The others use the classic form ``forward(ctx, ...)``, which :mod:`torch.func` refuses.
- Every backward here is built from differentiable operations on saved *inputs or outputs*,
  so double backward works (``gradgradcheck`` passes). :mod:`autograd_helpers.wrap` shows a
  Function that cannot, marked ``once_differentiable``.
"""

from __future__ import annotations

from autograd_helpers.functions._constants import MulConstant, ScaleGrad, mul_constant, scale_grad
from autograd_helpers.functions._elementwise import (
    Exp,
    ReLU,
    Sigmoid,
    Swish,
    exp,
    relu,
    sigmoid,
    swish,
)
from autograd_helpers.functions._linear import LinearFunction, linear
from autograd_helpers.functions._pooling import SquareAndMaxPool1d, square_and_max_pool1d

__all__ = [
    "Exp",
    "LinearFunction",
    "MulConstant",
    "ReLU",
    "ScaleGrad",
    "Sigmoid",
    "SquareAndMaxPool1d",
    "Swish",
    "exp",
    "linear",
    "mul_constant",
    "relu",
    "scale_grad",
    "sigmoid",
    "square_and_max_pool1d",
    "swish",
]
