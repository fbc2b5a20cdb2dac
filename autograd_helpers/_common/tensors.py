"""One tensor's state, taken before a call and put back after it: the parts code can change.

Shared by :class:`~autograd_helpers._common.state.ModuleState` (a module's parameters and
buffers) and by the checkers, which also say what a learner's call changed. The parts
(:data:`PARTS`): the values (dtype and device too), ``requires_grad``, ``.grad`` (the very
tensor object, and its values), the hooks (``register_hook`` and
``register_post_accumulate_grad_hook``), and plain attributes set on the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn.parameter import is_lazy

__all__ = ["PARTS", "TensorState", "copied", "freed", "put_back", "same_values"]

PARTS = ("values", "requires_grad", "grad", "hooks", "attributes")


def _bytes_needed(t: Tensor) -> int:
    extent = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    return int((t.storage_offset() + extent + 1) * t.element_size())


def freed(t: Tensor) -> bool:
    """Has ``t``'s memory been freed under it (``t.untyped_storage().resize_(0)``, as
    memcnn does to save memory)? Reading such a tensor crashes the process.

    Example::

        >>> t = torch.ones(3)
        >>> freed(t)
        False
        >>> _ = t.untyped_storage().resize_(0)
        >>> freed(t)
        True
    """
    if t.layout != torch.strided or t.is_meta or t.numel() == 0:
        return False
    try:
        return t.untyped_storage().nbytes() < _bytes_needed(t)
    except (RuntimeError, NotImplementedError, TypeError):  # no storage of its own to read
        return False


def same_values(a: Tensor, b: Tensor) -> bool:
    """Equal shapes, dtypes and values, NaN where the other has NaN included.

    A sparse tensor is compared by its dense values.

    Example::

        >>> nan = float("nan")
        >>> same_values(torch.tensor([1.0, nan]), torch.tensor([1.0, nan]))
        True
        >>> same_values(torch.ones(2), torch.ones(2, dtype=torch.float64))
        False
    """
    if a.shape != b.shape or a.dtype != b.dtype or freed(a) or freed(b):
        return False  # a freed tensor holds no values: never read, never the same
    a, b = (t if t.layout == torch.strided else t.to_dense() for t in (a.detach(), b.detach()))
    return bool((a.eq(b) | (a.isnan() & b.isnan())).all())


def copied(tensor: Tensor | None) -> Tensor | None:
    """A copy of ``tensor``'s values (``None`` for ``None``, a lazy parameter's, a freed one's)."""
    if tensor is None or is_lazy(tensor) or freed(tensor):
        return None
    return tensor.detach().clone()


def put_back(tensor: Tensor, values: Tensor) -> None:
    """Give ``tensor`` its ``values`` again, in place: dtype and device too, if they changed.

    An unchanged tensor is left alone, so the version counter a saved graph checks stays.
    """
    if same_values(tensor, values):
        return
    kind = (tensor.shape, tensor.dtype, tensor.device, tensor.layout)
    with torch.inference_mode(tensor.is_inference()), torch.no_grad():
        if freed(tensor):  # its memory given back: take it again before writing into it
            tensor.untyped_storage().resize_(_bytes_needed(tensor))
        if kind != (values.shape, values.dtype, values.device, values.layout):
            tensor.data = values  # .double() or .to() through .data: dtype and device back too
        else:
            tensor.copy_(values)


def _hook_tables(tensor: Tensor) -> tuple[dict[Any, Any], dict[Any, Any]]:
    tables = (tensor._backward_hooks, tensor._post_accumulate_grad_hooks)
    return dict(tables[0] or {}), dict(tables[1] or {})


def _attributes(tensor: Tensor) -> dict[str, Any]:
    return dict(vars(tensor))


@dataclass
class TensorState:
    """One tensor's :data:`PARTS` as they were: compare them with now, and put them back.

    Example::

        >>> w = torch.ones(2, requires_grad=True)
        >>> state = TensorState.take(w)
        >>> with torch.no_grad():
        ...     _ = w.mul_(3)  # a learner's update, on the caller's tensor
        >>> _ = w.register_hook(lambda g: g * 0)
        >>> state.changed()
        ['values', 'hooks']
        >>> state.restore()
        >>> w, state.changed()
        (tensor([1., 1.], requires_grad=True), [])
    """

    tensor: Tensor
    values: Tensor | None  # None: a lazy parameter, which has no values yet
    requires_grad: bool
    grad: Tensor | None
    grad_values: Tensor | None
    hooks: tuple[dict[Any, Any], dict[Any, Any]]
    attributes: dict[str, Any]

    @classmethod
    def take(cls, tensor: Tensor) -> TensorState:
        grad = tensor.grad if tensor.is_leaf else None  # a non-leaf's .grad only warns
        return cls(
            tensor,
            copied(tensor),
            tensor.requires_grad,
            grad,
            copied(grad),
            _hook_tables(tensor),
            _attributes(tensor),
        )

    def changed(self) -> list[str]:
        """The parts that differ now, in the order of :data:`PARTS`."""
        t, found = self.tensor, []
        if self.values is not None and not same_values(t, self.values):
            found.append("values")
        if t.requires_grad != self.requires_grad:
            found.append("requires_grad")
        grad = t.grad if t.is_leaf else None
        if grad is not self.grad or (
            grad is not None
            and self.grad_values is not None
            and not same_values(grad, self.grad_values)
        ):
            found.append("grad")
        if _hook_tables(t) != self.hooks:
            found.append("hooks")
        if _attributes(t) != self.attributes:
            found.append("attributes")
        return found

    def restore(self, parts: tuple[str, ...] = PARTS) -> None:
        """Put ``parts`` back as they were (all of them by default)."""
        t = self.tensor
        if self.values is None:
            return  # a lazy parameter: nothing to compare, nothing to put back
        if "hooks" in parts:
            tables = (t._backward_hooks, t._post_accumulate_grad_hooks)
            for table, before in zip(tables, self.hooks, strict=True):
                if table is not None:  # as a hook's handle.remove() does, and back
                    table.clear()
                    table.update(before)
        if "values" in parts:
            put_back(t, self.values)
        if "requires_grad" in parts and t.is_leaf and t.requires_grad != self.requires_grad:
            t.requires_grad_(self.requires_grad)
        if "grad" in parts and t.is_leaf:
            if self.grad is not None and self.grad_values is not None:
                put_back(self.grad, self.grad_values)
            if t.grad is not self.grad:
                t.grad = self.grad
        if "attributes" in parts and _attributes(t) != self.attributes:
            for name in set(vars(t)) - set(self.attributes):
                delattr(t, name)
            for name, value in self.attributes.items():
                setattr(t, name, value)
