"""Draw the autograd graph behind a tensor, as Mermaid (JupyterLab renders it) and as text.

Introduced in ``00_start_here.ipynb``; chapter 02 walks the same graph by hand. Nodes are the
``grad_fn`` objects autograd recorded; arrows point the way gradients flow in ``backward()``,
from the output down to the leaves (``AccumulateGrad`` nodes, which add into ``.grad``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = ["AutogradGraph", "autograd_graph"]


@dataclass(frozen=True)
class AutogradGraph:
    """The graph behind a tensor: ``nodes[i]`` is a label, ``edges`` are ``(from, to)`` pairs.

    Displays as a Mermaid flowchart in JupyterLab and as an indented tree elsewhere
    (``print(graph)`` or ``str(graph)``).
    """

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]

    def to_mermaid(self) -> str:
        """Return the Mermaid flowchart source."""
        lines = ["flowchart TD"]
        lines += [f'    n{i}["{label}"]' for i, label in enumerate(self.nodes)]
        lines += [f"    n{a} --> n{b}" for a, b in self.edges]
        return "\n".join(lines)

    def to_text(self) -> str:
        """Return an indented tree, the root first; a node reached twice is marked ``(seen)``."""
        children: dict[int, list[int]] = {i: [] for i in range(len(self.nodes))}
        for a, b in self.edges:
            children[a].append(b)
        out: list[str] = []
        seen: set[int] = set()

        def walk(i: int, depth: int) -> None:
            again = i in seen
            out.append("    " * depth + self.nodes[i] + (" (seen)" if again else ""))
            seen.add(i)
            if not again:
                for child in children[i]:
                    walk(child, depth + 1)

        if self.nodes:
            walk(0, 0)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, str]:
        return {"text/vnd.mermaid": self.to_mermaid(), "text/plain": self.to_text()}


def _leaf_label(leaf: torch.Tensor, names: Mapping[int, str]) -> str:
    shape = "×".join(str(s) for s in leaf.shape) or "scalar"
    name = names.get(id(leaf), "leaf")
    return f"AccumulateGrad: {name} ({shape})"


def autograd_graph(
    tensor: torch.Tensor, names: Mapping[str, torch.Tensor] | None = None
) -> AutogradGraph:
    """Collect the autograd graph that produced ``tensor``, breadth first from its ``grad_fn``.

    Args:
        tensor: a tensor produced by differentiable operations (it must have a ``grad_fn``).
        names: optional ``{"x": x, ...}`` so leaves are labelled with their names.

    Returns:
        An :class:`AutogradGraph`; node numbering follows the breadth-first order, so the
        same code always draws the same graph.

    Example::

        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> print(autograd_graph((x * 3).sum(), names={"x": x}))
        SumBackward0
            MulBackward0
                AccumulateGrad: x (2)
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"autograd_graph(): tensor must be a torch.Tensor, got {type(tensor)}")
    if tensor.grad_fn is None:
        raise ValueError(
            "autograd_graph(): tensor has no grad_fn: it is a leaf or was computed without "
            "gradient tracking (set requires_grad=True on an input, outside torch.no_grad())"
        )
    if names is not None and (
        not isinstance(names, Mapping)
        or not all(isinstance(n, str) and isinstance(t, torch.Tensor) for n, t in names.items())
    ):
        raise TypeError(
            "autograd_graph(): names must be a mapping from names to tensors, such as "
            f'{{"x": x}}, got {type(names).__name__}'
        )
    by_id = {id(t): n for n, t in (names or {}).items()}
    index: dict[object, int] = {tensor.grad_fn: 0}
    labels = [type(tensor.grad_fn).__name__]
    edges: list[tuple[int, int]] = []
    queue = [tensor.grad_fn]
    while queue:
        node = queue.pop(0)
        for child, _input_nr in node.next_functions:
            if child is None:  # an input that does not need a gradient
                continue
            if child not in index:
                index[child] = len(labels)
                leaf: object = getattr(child, "variable", None)  # set on AccumulateGrad only
                if isinstance(leaf, torch.Tensor):
                    labels.append(_leaf_label(leaf, by_id))
                else:
                    labels.append(type(child).__name__)
                queue.append(child)
            edges.append((index[node], index[child]))
    return AutogradGraph(tuple(labels), tuple(edges))
