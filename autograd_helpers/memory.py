"""How much memory autograd keeps for backward: the tensors a graph saves.

Introduced in ``01_custom_function.ipynb`` (a Function can save less than the composition
of built-ins it replaces); ``make bench`` reports it for every teaching Function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["saved_tensor_bytes"]


def saved_tensor_bytes(fn: Callable[..., Any], *inputs: Any) -> int:
    """Bytes of storage that the graph recorded by ``fn(*inputs)`` saves for backward.

    Every tensor saved for backward (by built-ins and by ``ctx.save_for_backward``) is seen
    through :func:`torch.autograd.graph.saved_tensors_hooks`; a storage saved several times
    counts once. A saved input or output is counted too: the graph keeps it alive.

    Args:
        fn: the computation to record.
        *inputs: its inputs; give the tensors that should get gradients ``requires_grad=True``.

    Example::

        >>> x = torch.randn(1000, requires_grad=True)
        >>> saved_tensor_bytes(lambda t: 1 / (1 + torch.exp(-t)), x)  # two float32 tensors
        8000
        >>> saved_tensor_bytes(torch.sigmoid, x)  # only the output
        4000
    """
    if not callable(fn):
        raise TypeError(f"saved_tensor_bytes(): fn must be callable, got {type(fn).__name__}")
    storages: dict[tuple[int, str], int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*inputs)
    return sum(storages.values())
