"""What a tensor holds under ``torch.func.vmap``: its batch, point by point.

Used by :mod:`.watch`. Inside ``vmap`` a function sees a batched tensor that looks like one
point; finite differences evaluated there, or a Hessian's rows computed as one batched
pass, hide behind it. :func:`plain` unwraps functorch's wrappers (batched and grad-tracking
tensors) to the physical tensor, every batch dimension first; :func:`logical_points` and
:func:`vmap_batch` read the points and their number from it.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils._python_dispatch import _disable_current_modes

__all__ = ["first_tensor", "logical_points", "plain", "vmap_batch"]


def first_tensor(value: object) -> Tensor | None:
    """``value`` if a tensor, else the first item of a list or tuple if that is one."""
    first = value[0] if isinstance(value, list | tuple) and value else value
    return first if isinstance(first, Tensor) else None


def plain(t: Tensor) -> Tensor:
    """The plain tensor under functorch's wrappers, every batch dimension first."""
    from torch._C import _functorch as functorch

    if not functorch.is_functorch_wrapped_tensor(t):
        return t
    inner = functorch.get_unwrapped(t)
    below = plain(inner)
    if functorch.is_batchedtensor(t):
        bdim = functorch.maybe_get_bdim(t)
        below = below.movedim(below.dim() - inner.dim() + bdim, 0)
    return below


def logical_points(t: Tensor, shape: tuple[int, ...]) -> list[Tensor]:
    """The points of ``shape`` a tensor holds: itself, or each point of a ``vmap`` batch.

    Example::

        >>> x = torch.zeros(2)
        >>> seen = []
        >>> _ = torch.func.vmap(lambda t: seen.extend(logical_points(t, (2,))) or t)(torch.eye(2))
        >>> [p.tolist() for p in seen]
        [[1.0, 0.0], [0.0, 1.0]]
    """
    try:
        held = plain(t).detach()
        if tuple(held.shape) == shape:
            return [held]
        batch = held.shape[: held.dim() - len(shape)]
        if tuple(held.shape[len(batch) :]) != shape or not len(batch):
            return []
        return list(held.reshape(-1, *shape))
    except Exception:  # a dual or fake tensor's quirks: no points known
        return []


def vmap_batch(value: object) -> int:
    """How many points a ``vmap`` batch holds in ``value`` (its first tensor), else 0."""
    first = first_tensor(value)
    if first is None:
        return 0
    try:
        with _disable_current_modes():
            held = plain(first)
    except Exception:
        return 0
    extra = held.dim() - first.dim()
    return int(torch.Size(held.shape[:extra]).numel()) if extra > 0 else 0
