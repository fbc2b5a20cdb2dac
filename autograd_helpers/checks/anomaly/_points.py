"""Where ``check_finite_gradients`` judges a loss: the example's points and the probes.

The notebook gives a singular point (the original loss's gradient is NaN there) and a
regular one. One point each is not enough: an epsilon under a root, a clamp or a threshold
fixes the singular point and changes the loss near it; a fix that treats each zero
coordinate as singular is wrong beside it. :func:`probe_points` adds, as data:

- the regular point with one element set to 0 (of its first eight), where the original is
  still finite;
- points near the singular one: its NaN entries moved off it by 1e-6, -1e-8 and 1e-20 (in
  the inputs' dtype: in float32, 1e-20 squared is subnormal, below ``finfo.tiny``, where a
  clamp at ``tiny`` changes the gradient) and by ±1e-30 (in float64, where its square is
  still a number);
- the rows at the singular point alone (in the inputs' dtype and in float64), where a value
  moved off it is not lost in a mean;
- for 2-d inputs (points by coordinates), the example with one coordinate more, where a
  function written for two of them shows;
- the regular and the singular inputs as one batch, in a longer shape, in the inputs' dtype
  and in float64;
- the singular point in float64.

The original loss's value and gradient at each point (:class:`Truth`) are computed in
float64, and only where they are finite is an answer held to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers.checks._core.numeric import format_number

__all__ = ["NEAR", "Point", "Truth", "probe_points", "show", "truth_at"]

# (offset, dtype: None for the inputs' own, pattern): "first" moves the first NaN entry of
# each input, "all" moves every NaN entry, with alternating signs.
NEAR: tuple[tuple[float, torch.dtype | None, str], ...] = (
    (1e-6, None, "first"),
    (-1e-8, None, "all"),
    (1e-20, None, "first"),
    (1e-30, torch.float64, "first"),
    (-1e-30, torch.float64, "all"),
)
BESIDE_LIMIT = 8  # elements of a regular input set to 0, one at a time


@dataclass(frozen=True)
class Point:
    """One place a loss is judged: ``where`` in words, the inputs, what kind of point."""

    where: str
    inputs: tuple[Tensor, ...]
    kind: str  # "singular", "regular", "beside", "near", "alone", "wider" or "batch"


@dataclass(frozen=True)
class Truth:
    """The original loss at a point, in float64: its value and its gradients."""

    value: Tensor
    grads: tuple[Tensor, ...]

    @property
    def finite(self) -> bool:
        return bool(self.value.isfinite()) and all(bool(g.isfinite().all()) for g in self.grads)


def truth_at(reference: Callable[..., Any], inputs: Sequence[Tensor], role: str) -> Truth:
    """The reference's value and gradients at float64 copies of ``inputs``.

    Raises ``ValueError`` (naming ``role``, the argument the point came from) when the
    reference fails there: the check is set up wrong, not the learner's code.
    """
    leaves = [fresh_leaf(x, torch.float64) for x in inputs]
    caller = "check_finite_gradients()"
    try:
        value = reference(*leaves)
    except Exception as exc:
        raise ValueError(
            f"{caller}: the reference raised {type(exc).__name__}: {exc} (at {role}). The "
            "check is set up wrong, not the code it checks."
        ) from exc
    if not isinstance(value, Tensor) or value.numel() != 1 or not value.is_floating_point():
        shown = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(
            f"{caller}: the reference must return the loss, a floating-point tensor of one "
            f"element; at {role} it returned {shown}"
        )
    if not value.requires_grad:
        raise ValueError(f"{caller}: the reference's loss does not depend on {role}")
    grads = torch.autograd.grad(value.reshape(()), leaves, allow_unused=True)
    return Truth(
        value.detach().reshape(()).double(),
        tuple(
            torch.zeros_like(x) if g is None else g.detach().double()
            for g, x in zip(grads, leaves, strict=True)
        ),
    )


def show(inputs: Sequence[Tensor]) -> str:
    """``[[0, 2], [3, -4]]``: a point, short, as a learner would type it."""

    def text(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(text(v) for v in value) + "]"
        return format_number(float(value))

    return ", ".join(text(x.tolist()) for x in inputs)


def _in64(dtype: torch.dtype, words: str = " in float64,") -> str:
    return words if dtype == torch.float64 else ""


def _beside(
    reference: Callable[..., Any], regular: tuple[Tensor, ...]
) -> list[tuple[Point, Truth]]:
    found = []
    for j, x in enumerate(regular):
        flat = x.detach().reshape(-1)
        for k in range(min(flat.numel(), BESIDE_LIMIT)):
            if float(flat[k]) == 0:
                continue
            changed = flat.clone()
            changed[k] = 0
            inputs = tuple(changed.reshape(x.shape) if i == j else t for i, t in enumerate(regular))
            truth = _probe_truth(reference, inputs)
            if truth is not None and truth.finite:
                found.append(
                    (Point(f"at the regular point {show(inputs)}", inputs, "beside"), truth)
                )
    return found


def _moved(
    inputs: tuple[Tensor, ...],
    singular: Truth,
    offset: float,
    pattern: str,
    dtype: torch.dtype | None,
) -> tuple[Tensor, ...]:
    moved = []
    for x, grad in zip(inputs, singular.grads, strict=True):
        flat = x.detach().to(dtype or x.dtype).clone().reshape(-1)
        where = (~grad.isfinite()).reshape(-1).nonzero().reshape(-1)
        chosen = where[:1] if pattern == "first" else where
        signs = torch.ones(len(chosen), dtype=flat.dtype)
        signs[1::2] = -1
        flat[chosen] = offset * signs
        moved.append(flat.reshape(x.shape))
    return tuple(moved)


def _near(
    reference: Callable[..., Any], inputs: tuple[Tensor, ...], singular: Truth
) -> list[tuple[Point, Truth]]:
    points = [_moved(inputs, singular, offset, pattern, dtype) for offset, dtype, pattern in NEAR]
    return _where_finite(
        reference,
        [(f"near the singular point,{_in64(p[0].dtype)} at {show(p)}", p) for p in points],
        "near",
    )


def _batch(
    reference: Callable[..., Any], inputs: tuple[Tensor, ...], regular: tuple[Tensor, ...]
) -> list[tuple[Point, Truth]]:
    try:
        joined = tuple(
            torch.cat([r.detach(), x.detach().to(r.dtype)])
            for r, x in zip(regular, inputs, strict=True)
        )
    except (RuntimeError, ValueError, IndexError):
        return []  # 0-d inputs, or shapes that do not stack: no batch to probe
    points = (joined, tuple(t.double() for t in joined))
    return _where_finite(
        reference,
        [
            (
                f"at {show(p)}{_in64(p[0].dtype, ' in float64')} (the regular and the singular "
                "inputs as one)",
                p,
            )
            for p in points
        ],
        "batch",
    )


def _where_finite(
    reference: Callable[..., Any], points: list[tuple[str, tuple[Tensor, ...]]], kind: str
) -> list[tuple[Point, Truth]]:
    """The probes ``(where, inputs)`` at which the reference is finite, as ``kind`` points."""
    found = []
    for where, point in points:
        truth = _probe_truth(reference, point)
        if truth is not None:
            found.append((Point(where, point, kind), truth))
    return found


def _probe_truth(reference: Callable[..., Any], inputs: tuple[Tensor, ...]) -> Truth | None:
    """The reference at a probe, or ``None`` where it fails or is not finite: no probe there."""
    try:
        truth = truth_at(reference, inputs, "a probe")
    except (TypeError, ValueError):
        return None
    return truth if bool(truth.value.isfinite()) else None


def _singular_rows(x: Tensor, grad: Tensor) -> Tensor | None:
    """Which rows of a batch ``x`` hold the singular point (a non-finite gradient), when some
    do and some do not; ``None`` for a 0-d input, or when every row or none does."""
    if x.dim() == 0:
        return None
    rows = (~grad.isfinite()).reshape(len(x), -1).any(dim=1)
    return rows if 0 < int(rows.sum()) < len(x) else None


def _alone(
    reference: Callable[..., Any], inputs: tuple[Tensor, ...], singular: Truth
) -> list[tuple[Point, Truth]]:
    """The rows at the singular point, alone: where it is the whole batch, a value moved off
    it (to 1e-8) is no longer lost in a mean of larger ones."""
    rows = [_singular_rows(x, g) for x, g in zip(inputs, singular.grads, strict=True)]
    if any(r is None for r in rows):
        return []
    point = tuple(x.detach()[r] for x, r in zip(inputs, rows, strict=True) if r is not None)
    points = (point, tuple(t.double() for t in point))
    return _where_finite(
        reference,
        [(f"at the singular point alone,{_in64(p[0].dtype)} at {show(p)}", p) for p in points],
        "alone",
    )


def _wider(
    reference: Callable[..., Any], inputs: tuple[Tensor, ...], singular: Truth
) -> list[tuple[Point, Truth]]:
    """The example's points with one coordinate more (2-d inputs): 0 in the rows at the
    singular point, which stay there, and 2, 4, 6... in the others."""
    if any(x.dim() != 2 for x in inputs):
        return []
    wider = []
    for x, grad in zip(inputs, singular.grads, strict=True):
        at = (~grad.isfinite()).all(dim=1)
        extra = torch.where(at, 0.0, 2.0 * torch.arange(1, len(x) + 1, dtype=torch.float64))
        wider.append(torch.cat([x.detach(), extra[:, None].to(x.dtype)], dim=1))
    point = tuple(wider)
    truth = _probe_truth(reference, point)
    if truth is None:
        return []
    where = f"with {point[0].shape[1]} coordinates, at {show(point)}"
    return [(Point(where, point, "wider"), truth)]


def probe_points(
    reference: Callable[..., Any],
    inputs: tuple[Tensor, ...],
    regular: tuple[Tensor, ...],
    singular: Truth,
) -> list[tuple[Point, Truth]]:
    """The probes beyond the example's two points, each with the original loss there."""
    in64 = tuple(x.detach().double() for x in inputs)
    return [
        *_beside(reference, regular),
        *_near(reference, inputs, singular),
        *_alone(reference, inputs, singular),
        *_wider(reference, inputs, singular),
        *_batch(reference, inputs, regular),
        (Point("at the singular point, in float64", in64, "singular"), singular),
    ]
