"""One node of :func:`~autograd_helpers.engine.replay_backward`'s replay: called, and its
results checked and fitted, as PyTorch's C++ engine does with each node it runs.

Kept apart from ``engine`` so that the replay there reads as the scheduling algorithm;
what running one node involves is here: a built-in node is called, a custom Function's
through ``apply`` (its ``backward`` returns one gradient per ``forward`` argument, lined up
here with the node's edges), and each gradient is checked and summed to its input's shape.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.nodes import is_custom_function

__all__ = ["fit_gradient", "run_node"]

Node = Any  # a grad_fn, typed loosely by torch itself


def _as_tuple(result: Any) -> tuple[Tensor | None, ...]:
    return (result,) if isinstance(result, Tensor) or result is None else tuple(result)


def run_node(node: Node, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
    """Call one node on its incoming gradients: one result per edge in ``next_functions``.

    Built-in nodes are called directly and accept ``None`` for an output without gradient.
    A custom Function's node is run through ``apply``, which calls its ``backward``, with
    zeros for ``None`` (the default ``set_materialize_grads(True)``).
    """
    if not is_custom_function(node):
        return _as_tuple(node(*grads))
    zeros = [
        torch.zeros(meta.shape, dtype=meta.dtype, device=meta.device) if g is None else g
        for g, meta in zip(grads, node._input_metadata, strict=True)
    ]
    return _per_edge(node, _as_tuple(node.apply(*zeros)))


def _per_edge(node: Node, results: tuple[Tensor | None, ...]) -> tuple[Tensor | None, ...]:
    """Line a custom ``backward``'s results, one per ``forward`` argument, up with its edges.

    ``next_functions`` has an edge per *tensor* argument, with a node exactly where
    ``needs_input_grad`` is True: the k-th result that needs grad goes to the k-th node.
    """
    needs = node.needs_input_grad
    if len(results) < len(needs):
        raise RuntimeError(
            f"replay_backward(): {type(node).__name__}'s backward returned {len(results)} "
            f"gradients for {len(needs)} forward arguments: return one each (None if no tensor)"
        )
    kept = iter([result for result, need in zip(results, needs, strict=False) if need])
    return tuple(None if child is None else next(kept) for child, _ in node.next_functions)


def fit_gradient(grad: object, node: Node, index: int) -> Tensor:
    """The engine's last step for each gradient a node returns, checked as the engine does:
    summed over broadcast dimensions to the shape of the input it is for, cast to its dtype.
    """
    if not isinstance(grad, Tensor):
        raise TypeError(
            f"replay_backward(): Function {type(node).__name__} returned "
            f"{type(grad).__name__} at index {index}: a gradient must be a tensor or None"
        )
    child, slot = node.next_functions[index]
    meta = child._input_metadata[slot]
    shape, wanted = tuple(grad.shape), tuple(meta.shape)  # meta.shape is a list
    if shape != wanted:
        if not _expandable(wanted, shape):  # as validate_outputs in torch's engine.cpp
            raise RuntimeError(
                f"replay_backward(): Function {type(node).__name__} returned an invalid "
                f"gradient at index {index} - got {list(shape)} but expected shape compatible "
                f"with {list(wanted)}: a backward returns for each input a gradient shaped "
                "like that input"
            )
        grad = grad.sum_to_size(wanted)
    return grad if grad.dtype == meta.dtype else grad.to(meta.dtype)


def _expandable(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Can ``shape`` be broadcast to ``target`` (so a gradient of ``target`` sums down)?"""
    if len(shape) > len(target):
        return False
    return all(s in (t, 1) for s, t in zip(reversed(shape), reversed(target), strict=False))
