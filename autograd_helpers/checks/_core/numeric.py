"""Numbers for the checkers: finite-difference gradients and "how far off, and where".

Used by :mod:`autograd_helpers.checks`. :func:`finite_difference_vjp` estimates the gradient
of :math:`L = \\langle v, f(x) \\rangle` (``v`` is the ``grad_output``) from the central
differences of :func:`autograd_helpers.finite_differences.central_columns`, the one place the
formula lives; chapter 03 (gradcheck) explains it. In float64 with
:math:`\\varepsilon = 10^{-6}` it is accurate to about :math:`10^{-9}` for smooth functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.tensors import freed
from autograd_helpers._common.validate import require_option
from autograd_helpers.finite_differences import central_columns, evaluate_copied

__all__ = [
    "Mismatch",
    "dense",
    "finite_difference_vjp",
    "format_number",
    "format_pair",
    "index_text",
    "projected_difference",
    "same_values",
    "worst_mismatch",
]


def format_number(value: float) -> str:
    """Four significant digits, the same on every machine (``-0`` prints as ``0``)."""
    text = f"{value:.4g}"
    return "0" if text == "-0" else text


def format_pair(value: float, other: float) -> tuple[str, str]:
    """Both numbers with four significant digits, or with as many more as it takes for
    two different numbers to read differently (``6.18750``, ``6.18752``; up to 17).

    Example::

        >>> format_pair(9.389123, 9.389132)
        ('9.38912', '9.38913')
        >>> format_pair(1.5, 0.5)
        ('1.5', '0.5')
    """
    shown = format_number(value), format_number(other)
    for digits in range(5, 18):
        if shown[0] != shown[1] or value == other or value != value or other != other:
            break
        # as many digits on both sides (`#` keeps trailing zeros: 9.38950, not 9.3895)
        shown = f"{value:#.{digits}g}".rstrip("."), f"{other:#.{digits}g}".rstrip(".")
    return shown


def index_text(flat_index: int, shape: torch.Size) -> str:
    """``"[1, 2]"``: element ``flat_index`` of a tensor of ``shape`` (``""`` for a scalar)."""
    if not shape:
        return ""
    coords = []
    for size in reversed(shape):  # plain arithmetic: torch.unravel_index's first call costs 0.6 s
        flat_index, coordinate = divmod(flat_index, size)
        coords.append(coordinate)
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"


def located(flat_index: int, shape: torch.Size, inputs: Sequence[tuple[str, object]]) -> str:
    """Where element ``flat_index`` of a result of ``shape`` is, in the inputs' terms:
    ``"at `x` = 0 (element [0])"``: each named input of the same shape gives its value there,
    so a learner sees the point rather than a position in a list of probes.

    Example::

        >>> located(2, torch.Size([4]), [("x", torch.tensor([-1.0, 0.5, 0.0, 2.0]))])
        'at `x` = 0 (element [2])'
    """
    element = index_text(flat_index, shape)
    values = [
        f"`{name}` = {format_number(float(value.detach().reshape(-1)[flat_index]))}"
        for name, value in inputs
        if isinstance(value, Tensor)
        and value.shape == shape
        and not value.is_complex()
        and not freed(value)
    ]
    if not values:
        return f"at element {element}" if element else ""
    return f"at {', '.join(values)}" + (f" (element {element})" if element else "")


def same_values(a: Tensor, b: Tensor) -> bool:
    """Exactly equal, NaN counting as equal to NaN (``torch.equal`` says NaN differs)."""
    if freed(a) or freed(b):
        return False  # a freed tensor holds no values: never read (it would crash)
    a, b = dense(a.detach()), dense(b.detach())
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def dense(value: Any) -> Any:
    """A sparse gradient for a dense input (``nn.Embedding(sparse=True)``'s, ``.to_sparse()``)
    as dense values, inside a tuple too: autograd accepts it, and the checks compare values."""
    if isinstance(value, tuple):
        return tuple(dense(v) for v in value)
    return (
        value.to_dense() if isinstance(value, Tensor) and value.layout != torch.strided else value
    )


@dataclass(frozen=True)
class Mismatch:
    """The worst element where ``got`` and ``expected`` differ beyond the tolerance."""

    flat_index: int
    shape: torch.Size
    got: float
    expected: float
    count: int  # how many elements are off

    @property
    def index(self) -> str:
        """``"[1, 2]"``, or ``""`` for a scalar."""
        return index_text(self.flat_index, self.shape)

    @property
    def numel(self) -> int:
        return self.shape.numel()

    def describe(self, name: str, got_label: str, expected_label: str) -> str:
        """One line: ``worst element `x[3]`: yours 1.5, finite differences 0.5 (off by 1)``."""
        off_by = format_number(abs(self.got - self.expected))
        many = "" if self.count == 1 else f" ({self.count} of {self.numel} elements are off)"
        element = f"`{name}{self.index}`" if name else (self.index or "the value")
        head = "worst element " if self.numel > 1 else ""
        got, expected = format_pair(self.got, self.expected)
        return (
            f"{head}{element}: {got_label} {got}, {expected_label} {expected} "
            f"(off by {off_by}){many}"
        )


def worst_mismatch(got: Tensor, expected: Tensor, *, atol: float, rtol: float) -> Mismatch | None:
    """Compare like :func:`torch.allclose` (NaNs equal where both are NaN); report the worst.

    Both tensors must have the same shape. Returns ``None`` when every element is close.
    """
    got64, expected64 = got.detach().double().cpu(), expected.detach().double().cpu()
    both_nan = got64.isnan() & expected64.isnan()
    same_inf = got64.isinf() & (got64 == expected64)
    error = (got64 - expected64).abs()
    allowed = atol + rtol * expected64.abs()
    bad = ~(both_nan | same_inf) & ~(error <= allowed)  # NaN errors count as bad
    if not bool(bad.any()):
        return None
    # The worst element is the one furthest beyond its tolerance; a NaN is worst of all.
    badness = torch.where(bad, (error / allowed).nan_to_num(nan=float("inf")), -1.0)
    worst = int(badness.reshape(-1).argmax())
    return Mismatch(
        flat_index=worst,
        shape=got.shape,
        got=float(got64.reshape(-1)[worst]),
        expected=float(expected64.reshape(-1)[worst]),
        count=int(bad.sum()),
    )


def finite_difference_vjp(
    function: Callable[..., object],
    inputs: Sequence[object],
    grad_outputs: Sequence[Tensor],
    wrt: Sequence[int],
    *,
    eps: float,
) -> list[Tensor]:
    """Estimate :math:`v^\\top J` of ``function`` at ``inputs``, for each input index in ``wrt``.

    ``function(*inputs)`` must return a tensor or a tuple of tensors shaped like
    ``grad_outputs``. It is called twice per element of every input in ``wrt``, under
    :func:`torch.no_grad`, on copies: ``inputs`` are not changed.

    Example::

        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> ones = torch.ones(2, dtype=x.dtype)
        >>> finite_difference_vjp(lambda x: x**2, [x], [ones], [0], eps=1e-6)
        [tensor([2.0000, 4.0000], dtype=torch.float64)]
    """
    if not callable(function):
        raise TypeError(
            f"finite_difference_vjp(): function must be callable, got {type(function).__name__}"
        )
    require_option("finite_difference_vjp", "eps", eps, "a positive number", lambda v: v > 0)
    for i in wrt:
        x = inputs[i]
        if not isinstance(x, Tensor) or not x.is_floating_point():
            kind = x.dtype if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(
                f"finite_difference_vjp(): input {i} must be a floating-point tensor (a step "
                f"of eps cannot be added to {kind})"
            )

    estimates = [torch.zeros(x.numel(), dtype=torch.float64) for x in _tensors_at(inputs, wrt)]
    slot = {position: k for k, position in enumerate(wrt)}
    for position, j, columns in central_columns(function, inputs, wrt, eps):
        estimates[slot[position]][j] = sum(
            float((column.double() * weight.double()).sum())
            for column, weight in zip(columns, grad_outputs, strict=True)
        )
    return [
        estimate.reshape(x.shape).to(x.dtype)
        for estimate, x in zip(estimates, _tensors_at(inputs, wrt), strict=True)
    ]


def _tensors_at(inputs: Sequence[object], wrt: Sequence[int]) -> list[Tensor]:
    return [x for i in wrt if isinstance(x := inputs[i], Tensor)]


def projected_difference(
    function: Callable[..., object],
    inputs: Sequence[object],
    grad_outputs: Sequence[Tensor],
    position: int,
    direction: Tensor,
    *,
    eps: float,
) -> tuple[float, float]:
    """Estimate :math:`v^\\top J u` of ``function`` for input ``position`` along ``direction``.

    Two calls of ``function`` (at ``x ± eps·u``) instead of two per element: how gradcheck's
    fast mode checks a gradient too large to check element by element. A gradient that is
    off anywhere is off along a random direction, with probability 1.

    Returns:
        ``(estimate, rounding)``: the estimate, and the rounding error its subtraction can
        carry (machine epsilon of the outputs' dtype times :math:`\\sum |v| |f|`, over
        :math:`\\varepsilon`), so that a caller can tell noise from a wrong gradient.

    Example::

        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> u = torch.tensor([0.6, 0.8], dtype=torch.float64)
        >>> v = [torch.ones(2, dtype=x.dtype)]
        >>> estimate, _ = projected_difference(lambda x: x**2, [x], v, 0, u, eps=1e-6)
        >>> round(estimate, 6)  # 2x · u
        4.4
    """
    with torch.no_grad():
        base = [t.detach() if isinstance(t, Tensor) else t for t in inputs]
        x = base[position]
        assert isinstance(x, Tensor)
        plus, minus = list(base), list(base)
        plus[position] = x + eps * direction
        minus[position] = x - eps * direction
        high, low = evaluate_copied(function, plus), evaluate_copied(function, minus)
        estimate = rounding = 0.0
        for a, b, v in zip(high, low, grad_outputs, strict=True):
            weight = v.double()
            estimate += float((((a - b) / (2 * eps)).double() * weight).sum())
            size = (a.double().abs() + b.double().abs()) * weight.abs()
            rounding += torch.finfo(a.dtype).eps * float(size.sum()) / (2 * eps)
        return estimate, rounding
