"""Walking a recorded graph down to its leaves (shared by ``modes`` and ``profiling``)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

__all__ = ["graph_leaves"]


def graph_leaves(output: Tensor) -> list[Tensor]:
    """The tensors whose ``.grad`` a backward of ``output`` would fill (its graph's leaves)."""
    leaves: dict[int, Tensor] = {}
    seen: set[Any] = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)  # an AccumulateGrad node
        if isinstance(variable, Tensor):
            leaves[id(variable)] = variable
        stack.extend(next_node for next_node, _ in node.next_functions)
    return list(leaves.values())
