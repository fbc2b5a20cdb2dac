"""The teaching Functions of chapter 01 (``01_custom_function.ipynb``).

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

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._checking.validate import (
    check_bool,
    check_float_tensor,
    check_int,
    check_real,
)

__all__ = [
    "Exp",
    "LinearFunction",
    "MulConstant",
    "ReLU",
    "ScaleGrad",
    "Sigmoid",
    "SquareAndMaxPool1d",
    "exp",
    "linear",
    "mul_constant",
    "relu",
    "scale_grad",
    "sigmoid",
    "square_and_max_pool1d",
]


def _apply(function: type[Function], *args: Any) -> Tensor:
    return cast(Tensor, function.apply(*args))


# --- modern form: forward(inputs) + setup_context; jvp and vmap for torch.func ----------------


class Exp(Function):
    r"""``exp(x)``, saving its *output*: :math:`\frac{d}{dx} e^x = e^x`.

    Saving the output, not the input, spares backward a second ``exp``. And because the
    saved tensor is this Function's own output, the graph knows how it depends on ``x``:
    double backward works.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        (result,) = ctx.saved_tensors
        return grad_output * result

    # Forward mode pushes a tangent through: J v. Elementwise, J is diagonal, so J v is the
    # same product as backward's v^T J (and both read the output saved in setup_context).
    jvp = backward


class Sigmoid(Function):
    r"""The logistic sigmoid, saving its output: :math:`\sigma' = \sigma (1 - \sigma)`."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        (result,) = ctx.saved_tensors
        return grad_output * result * (1 - result)

    jvp = backward  # elementwise: forward mode is the same product (see Exp)


def exp(input: Tensor) -> Tensor:
    """Elementwise :math:`e^x` through :class:`Exp`.

    Args:
        input: a floating-point tensor.

    Example::

        >>> x = torch.zeros(2, requires_grad=True)
        >>> exp(x).sum().backward()
        >>> x.grad
        tensor([1., 1.])
    """
    return _apply(Exp, check_float_tensor("exp", "input", input))


def sigmoid(input: Tensor) -> Tensor:
    """Elementwise logistic sigmoid through :class:`Sigmoid`.

    Args:
        input: a floating-point tensor.

    Example::

        >>> sigmoid(torch.zeros(2))
        tensor([0.5000, 0.5000])
    """
    return _apply(Sigmoid, check_float_tensor("sigmoid", "input", input))


# --- classic form: forward(ctx, ...) -----------------------------------------------------------


class ReLU(Function):
    """``max(x, 0)``; the gradient at exactly 0 is 0, as for :func:`torch.relu`."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0).to(grad_output.dtype)


def relu(input: Tensor) -> Tensor:
    """Elementwise ``max(x, 0)`` through :class:`ReLU`.

    Args:
        input: a floating-point tensor.

    Example::

        >>> relu(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0., 0., 2.])
    """
    return _apply(ReLU, check_float_tensor("relu", "input", input))


class MulConstant(Function):
    """``x * c`` for a Python number ``c``: backward returns ``None`` for the non-tensor."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, constant: float) -> Tensor:
        ctx.constant = constant  # a plain number: an attribute on ctx, not save_for_backward
        return x * constant

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, None]:
        return grad_output * ctx.constant, None


def mul_constant(input: Tensor, constant: float) -> Tensor:
    """Multiply by a Python number through :class:`MulConstant`.

    Args:
        input: a floating-point tensor.
        constant: a finite Python ``int`` or ``float`` (not a tensor: it gets no gradient).

    Example::

        >>> mul_constant(torch.ones(2), 3.0)
        tensor([3., 3.])
    """
    check_float_tensor("mul_constant", "input", input)
    return _apply(MulConstant, input, check_real("mul_constant", "constant", constant))


class LinearFunction(Function):
    """``input @ weight.T + bias``; backward computes only the gradients asked for.

    ``ctx.needs_input_grad[i]`` is ``True`` when input ``i`` needs a gradient: a frozen weight
    or an input that is data costs no matrix product.
    """

    @staticmethod
    def forward(ctx: Any, input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(input, weight, bias)
        output = input @ weight.T
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(
        ctx: Any, grad_output: Tensor
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        # Leading batch dimensions fold into one: weight and bias get the sum over every row.
        # (The row count is spelled out: reshape(-1, 0) is ambiguous for an empty layer.)
        count = math.prod(grad_output.shape[:-1])
        rows = grad_output.reshape(count, grad_output.shape[-1])
        if ctx.needs_input_grad[0]:
            grad_input = grad_output @ weight
        if ctx.needs_input_grad[1]:
            grad_weight = rows.T @ input.reshape(count, input.shape[-1])
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = rows.sum(0)
        return grad_input, grad_weight, grad_bias


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Affine map ``input @ weight.T + bias`` through :class:`LinearFunction`.

    Args:
        input: ``(*, in_features)`` floating-point tensor.
        weight: ``(out_features, in_features)``, same dtype as ``input``.
        bias: optional ``(out_features,)``, same dtype.

    Example::

        >>> linear(torch.ones(4, 3), torch.ones(2, 3), torch.zeros(2)).shape
        torch.Size([4, 2])
    """
    check_float_tensor("linear", "input", input)
    check_float_tensor("linear", "weight", weight)
    if input.dim() < 1:
        raise ValueError("linear(): input must have at least 1 dimension, got a scalar")
    if weight.dim() != 2:
        raise ValueError(f"linear(): weight must be 2-D (out, in), got shape {tuple(weight.shape)}")
    if weight.shape[1] != input.shape[-1]:
        raise ValueError(
            f"linear(): weight has {weight.shape[1]} input features but input's last dimension "
            f"is {input.shape[-1]} (input {tuple(input.shape)}, weight {tuple(weight.shape)})"
        )
    if weight.dtype != input.dtype:
        raise TypeError(f"linear(): weight dtype {weight.dtype} differs from input {input.dtype}")
    if weight.device != input.device:
        raise ValueError(
            f"linear(): weight is on {weight.device} but input is on {input.device}; "
            "move both to one device"
        )
    if bias is not None:
        check_float_tensor("linear", "bias", bias)
        if bias.device != input.device:
            raise ValueError(
                f"linear(): bias is on {bias.device} but input is on {input.device}; "
                "move both to one device"
            )
        if bias.shape != (weight.shape[0],):
            raise ValueError(
                f"linear(): bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}"
            )
        if bias.dtype != input.dtype:
            raise TypeError(f"linear(): bias dtype {bias.dtype} differs from input {input.dtype}")
    return _apply(LinearFunction, input, weight, bias)


class ScaleGrad(Function):
    """Identity forward; backward multiplies the gradient by ``coeff``.

    A negative ``coeff`` is gradient reversal (domain-adversarial training): the layers
    before it are pushed to *increase* the loss that the layers after it decrease.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, coeff: float) -> Tensor:
        ctx.coeff = coeff
        return x.view_as(x)  # a new tensor object sharing x's memory: no copy

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, None]:
        return grad_output * ctx.coeff, None


def scale_grad(input: Tensor, coeff: float) -> Tensor:
    """Return ``input`` unchanged, with its gradient scaled by ``coeff`` (:class:`ScaleGrad`).

    Args:
        input: a floating-point tensor.
        coeff: a finite Python number; ``-1.0`` reverses the gradient.

    Example::

        >>> x = torch.ones(2, requires_grad=True)
        >>> scale_grad(x, -1.0).sum().backward()
        >>> x.grad
        tensor([-1., -1.])
    """
    check_float_tensor("scale_grad", "input", input)
    return _apply(ScaleGrad, input, check_real("scale_grad", "coeff", coeff))


# --- wrapping a built-in: square, then max_pool1d, with a hand-written backward ---------------


class SquareAndMaxPool1d(Function):
    """``max_pool1d(input**2, ...)`` with a backward written from the pooling indices.

    Each output element *is* one input element, its window's winner, so the gradient of the
    squares is ``grad_output`` sent back to the winners' positions. Windows overlap when
    ``stride < kernel_size``, and one element can then win several of them: it must receive
    the *sum* of their gradients, hence ``scatter_add_``; ``scatter_`` would keep only one.
    """

    @staticmethod
    def forward(
        ctx: Any,
        input: Tensor,
        kernel_size: int,
        stride: int,
        padding: int,
        dilation: int,
        ceil_mode: bool,
    ) -> Tensor:
        output, indices = F.max_pool1d(
            input * input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True
        )
        ctx.save_for_backward(input, indices)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        input, indices = ctx.saved_tensors
        # 1. route each output's gradient to the input position that won its window,
        #    adding up where one position won several windows. The zeros come from
        #    grad_output so that under vmap they are batched like it, which makes the
        #    in-place add safe (and much faster than an out-of-place scatter_add);
        grad_squares = grad_output.new_zeros(input.shape).scatter_add_(-1, indices, grad_output)
        # 2. chain rule through the square: d(x^2)/dx = 2x.
        return grad_squares * 2 * input, None, None, None, None, None


def square_and_max_pool1d(
    input: Tensor,
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    dilation: int = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """Square, then 1-D max pooling (:class:`SquareAndMaxPool1d`).

    The arguments are those of :func:`torch.nn.functional.max_pool1d`.

    Args:
        input: ``(C, L)`` or ``(N, C, L)`` floating-point tensor.
        kernel_size: window length, at least 1.
        stride: step between windows. ``None`` (the default) means ``kernel_size``:
            windows side by side, not overlapping. It is *not* 1.
        padding: implicit ``-inf`` padding on both sides, at most ``kernel_size // 2``.
        dilation: spacing between a window's elements, at least 1.
        ceil_mode: round the output length up instead of down.

    Example::

        >>> square_and_max_pool1d(torch.tensor([[1.0, -3.0, 2.0, 0.5]]), 2)
        tensor([[9., 4.]])
    """
    fn = "square_and_max_pool1d"
    check_float_tensor(fn, "input", input)
    if input.dim() not in (2, 3):
        raise ValueError(f"{fn}(): input must be (C, L) or (N, C, L), got {tuple(input.shape)}")
    if input.shape[-2] == 0:
        raise ValueError(
            f"{fn}(): input has no channels (shape {tuple(input.shape)}); only the batch "
            "dimension N of an (N, C, L) input may be 0"
        )
    check_int(fn, "kernel_size", kernel_size, minimum=1)
    stride = kernel_size if stride is None else check_int(fn, "stride", stride, minimum=1)
    check_int(fn, "padding", padding, minimum=0)
    check_int(fn, "dilation", dilation, minimum=1)
    check_bool(fn, "ceil_mode", ceil_mode)
    if padding > kernel_size // 2:
        raise ValueError(
            f"{fn}(): padding must be at most kernel_size // 2 = {kernel_size // 2}, got {padding}"
        )
    span = dilation * (kernel_size - 1) + 1
    if input.shape[-1] + 2 * padding < span:
        raise ValueError(
            f"{fn}(): input length {input.shape[-1]} (+ padding 2*{padding}) is shorter than "
            f"the window span {span} (kernel_size={kernel_size}, dilation={dilation})"
        )
    empty = _window_of_only_padding(
        input.shape[-1], kernel_size, stride, padding, dilation, ceil_mode
    )
    if empty is not None:
        raise ValueError(
            f"{fn}(): window {empty} covers only padding (length {input.shape[-1]}, "
            f"kernel_size={kernel_size}, stride={stride}, padding={padding}, dilation={dilation}): "
            "its maximum would be -inf with no input position to send a gradient to; "
            "use less padding or dilation"
        )
    return _apply(SquareAndMaxPool1d, input, kernel_size, stride, padding, dilation, ceil_mode)


def _window_of_only_padding(
    length: int, kernel_size: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> int | None:
    """The first pooling window that holds no input element, or ``None`` (sizes as in PyTorch).

    A window that starts inside the input holds its first element, so only windows that
    start in the left or right padding need looking at: a few, however long the input.
    """
    span = dilation * (kernel_size - 1) + 1
    extra = stride - 1 if ceil_mode else 0
    windows = (length + 2 * padding - span + extra) // stride + 1
    if ceil_mode and (windows - 1) * stride >= length + padding:
        windows -= 1  # PyTorch drops a last window that would start in the right padding
    starts_left = min(windows, -(-padding // stride))  # windows starting before position 0
    starts_right = max(starts_left, -(-(length + padding) // stride))  # at or after `length`
    for window in [*range(starts_left), *range(starts_right, windows)]:
        start = window * stride - padding
        if not any(0 <= start + k * dilation < length for k in range(kernel_size)):
            return window
    return None
