"""Walking a recorded graph: its nodes, and the leaves whose ``.grad`` backward fills.

Shared by ``anomaly`` (which hooks every node), ``modes`` and ``profiling`` (which need the
leaves, for example a module's parameters, without knowing the module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

__all__ = ["graph_leaves", "graph_nodes"]


def graph_nodes(roots: Sequence[Any]) -> list[Any]:
    """Every node below ``roots``, the leaves' ``AccumulateGrad`` nodes included."""
    seen, stack, nodes = set(roots), list(roots), []
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return nodes


def graph_leaves(output: Tensor) -> list[Tensor]:
    """The tensors whose ``.grad`` a backward of ``output`` would fill (its graph's leaves)."""
    if output.grad_fn is None:
        return []
    variables = (getattr(node, "variable", None) for node in graph_nodes([output.grad_fn]))
    return [v for v in variables if isinstance(v, Tensor)]  # AccumulateGrad nodes hold them
