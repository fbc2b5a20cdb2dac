"""A backward pass replayed in Python, with PyTorch's own recorded nodes.

Introduced in ``02_jacobians_hessians.ipynb``. :func:`replay_backward` does what
``torch.autograd.grad`` does, in about sixty lines that can be read: it walks the graph
behind ``output``, and calls each node (each ``grad_fn``) once all the gradients flowing into
it have arrived, in dependency order, the way PyTorch's C++ engine schedules them. The nodes
are PyTorch's own, so the numbers are the real ones; only the bookkeeping is ours.

It leaves out what the real engine adds: hooks, anomaly mode, ``create_graph``, threads and
devices. It never writes ``.grad`` (``AccumulateGrad`` nodes are read, not run) and never
frees the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["ReplayStep", "replay_backward"]

Node = Any  # a grad_fn: torch._C._FunctionBase subclasses, typed loosely by torch itself
Shape = tuple[int, ...]


@dataclass(frozen=True)
class ReplayStep:
    """One node run by :func:`replay_backward`: its name and the gradients it received.

    ``grad_shapes[k]`` is the shape of the gradient for the node's ``k``-th forward output,
    or ``None`` when no gradient reached that output.
    """

    node: str
    grad_shapes: tuple[Shape | None, ...]

    def __str__(self) -> str:
        shapes = ", ".join("none" if s is None else str(s) for s in self.grad_shapes)
        return f"{self.node} <- {shapes}"


def _inputs_tuple(inputs: object) -> tuple[Tensor, ...]:
    found = (inputs,) if isinstance(inputs, Tensor) else inputs
    if not isinstance(found, Sequence) or not found:
        raise TypeError(
            "replay_backward(): inputs must be a tensor or a non-empty sequence of them"
        )
    for i, t in enumerate(found):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"replay_backward(): inputs[{i}] must be a tensor, got {type(t).__name__}"
            )
        if not t.requires_grad:
            raise ValueError(f"replay_backward(): inputs[{i}] does not require grad")
    return tuple(found)


def _start(output: object, grad_output: object) -> Tensor:
    """The gradient the pass starts from: ``grad_output``, or 1 for a scalar output."""
    if not isinstance(output, Tensor):
        raise TypeError(f"replay_backward(): output must be a tensor, got {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError("replay_backward(): output does not require grad: there is no graph")
    if grad_output is None:
        if output.numel() != 1:
            raise ValueError(
                "replay_backward(): grad_output is needed for an output that is not a scalar "
                f"(shape {tuple(output.shape)}): which vector-Jacobian product?"
            )
        return torch.ones_like(output)
    if not isinstance(grad_output, Tensor):
        raise TypeError(
            f"replay_backward(): grad_output must be a tensor, got {type(grad_output).__name__}"
        )
    if grad_output.shape != output.shape:
        raise ValueError(
            f"replay_backward(): grad_output has shape {tuple(grad_output.shape)}, output "
            f"{tuple(output.shape)}: they must match"
        )
    return grad_output


def _run(node: Node, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
    """Call one node on its incoming gradients, as the engine would.

    Built-in nodes are called directly and accept ``None`` for an output that received no
    gradient. A custom Function's node is run through ``apply``, which calls its
    ``backward``; that gets zeros instead of ``None`` unless it asked otherwise with
    ``ctx.set_materialize_grads(False)``.
    """
    if hasattr(node, "saved_tensors"):  # a custom Function's node
        if getattr(node, "materialize_grads", True):
            grads = [
                torch.zeros(meta.shape, dtype=meta.dtype, device=meta.device) if g is None else g
                for g, meta in zip(grads, node._input_metadata, strict=True)
            ]
        result = node.apply(*grads)
    else:
        result = node(*grads)
    return (result,) if isinstance(result, Tensor) or result is None else tuple(result)


def _fit(grad: Tensor, child: Node, slot: int) -> Tensor:
    """The engine's last step for each gradient: summed over broadcast dims, cast to dtype."""
    meta = child._input_metadata[slot]
    if grad.shape != meta.shape:
        grad = grad.sum_to_size(meta.shape)
    return grad if grad.dtype == meta.dtype else grad.to(meta.dtype)


def _reachable(root: Node) -> tuple[list[Node], dict[Node, int]]:
    """Every node below ``root``, children before parents, and how many edges enter each."""
    order: list[Node] = []
    dependencies: dict[Node, int] = {}
    seen = {root}
    stack = [(root, iter(root.next_functions))]
    while stack:
        node, children = stack[-1]
        for child, _ in children:
            if child is None:  # an input that needed no gradient
                continue
            dependencies[child] = dependencies.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append((child, iter(child.next_functions)))
                break
        else:
            stack.pop()
            order.append(node)
    return order, dependencies


def replay_backward(
    output: Tensor,
    inputs: Tensor | Sequence[Tensor],
    grad_output: Tensor | None = None,
    *,
    trace: list[ReplayStep] | Callable[[ReplayStep], object] | None = None,
) -> tuple[Tensor | None, ...]:
    r"""The gradients of ``output`` with respect to ``inputs``, computed node by node.

    Returns the same as ``torch.autograd.grad(output, inputs, grad_output,
    allow_unused=True)``: a tuple with one gradient per input, ``None`` for an input that
    ``output`` does not depend on.

    Args:
        output: a tensor computed with autograd recording.
        inputs: tensors that require grad (leaves or not), one or a sequence.
        grad_output: the vector of the vector-Jacobian product, shaped like ``output``;
            may be left out for a scalar ``output`` (it is then 1).
        trace: a list that receives a :class:`ReplayStep` per node run, in order, or a
            function called with each.

    Example::

        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> steps = []
        >>> replay_backward((x * x).sum(), x, trace=steps)
        (tensor([2., 4.]),)
        >>> [str(step) for step in steps]
        ['SumBackward0 <- ()', 'MulBackward0 <- (2,)']
    """
    targets = _inputs_tuple(inputs)
    start = _start(output, grad_output)
    if trace is not None and not isinstance(trace, list) and not callable(trace):
        raise TypeError(f"replay_backward(): trace must be a list or callable, got {type(trace)}")
    record = trace.append if isinstance(trace, list) else trace
    if output.grad_fn is None:  # output is itself a leaf
        return tuple(start if t is output else None for t in targets)

    # Where each input's gradient collects: a non-leaf's in the slot of its own grad_fn, a
    # leaf's in the one slot of its AccumulateGrad node.
    slots: dict[Node, list[tuple[int, int]]] = {}  # node -> [(slot, input index)]
    leaves = {id(t): i for i, t in enumerate(targets) if t.grad_fn is None}
    for i, t in enumerate(targets):
        if t.grad_fn is not None:
            slots.setdefault(t.grad_fn, []).append((t.output_nr, i))

    # 1. the nodes below the output, and which of them lead to an input at all
    root = output.grad_fn
    order, dependencies = _reachable(root)
    needed: dict[Node, bool] = {}
    for node in order:  # children come first, so their answer is known
        leaf = getattr(node, "variable", None)
        needed[node] = (
            node in slots
            or (leaf is not None and id(leaf) in leaves)
            or any(child is not None and needed[child] for child, _ in node.next_functions)
        )

    # 2. run each needed node once every gradient flowing into it has arrived, summing the
    #    gradients of all paths in one buffer per (node, output slot)
    buffers: dict[Node, list[Tensor | None]] = {root: [None] * len(root._input_metadata)}
    buffers[root][output.output_nr] = start
    found: list[Tensor | None] = [None] * len(targets)
    ready = [root] if needed[root] else []
    with torch.no_grad():
        while ready:
            node = ready.pop()
            grads = buffers.pop(node)
            for slot, i in slots.get(node, ()):
                found[i] = grads[slot]
            leaf = getattr(node, "variable", None)
            if leaf is not None:  # AccumulateGrad: read its gradient, never add into .grad
                if id(leaf) in leaves:
                    found[leaves[id(leaf)]] = grads[0]
                continue
            results: tuple[Tensor | None, ...] = ()
            if any(g is not None for g in grads):  # no gradient arrived: nothing to send on
                if record is not None:
                    record(ReplayStep(type(node).__name__, tuple(_shape(g) for g in grads)))
                results = _run(node, grads)
            for k, (child, slot) in enumerate(node.next_functions):
                if child is None or not needed[child]:
                    continue
                grad = results[k] if k < len(results) else None
                buffer = buffers.setdefault(child, [None] * len(child._input_metadata))
                if grad is not None:
                    grad = _fit(grad, child, slot)
                    earlier = buffer[slot]
                    buffer[slot] = grad if earlier is None else earlier + grad
                dependencies[child] -= 1
                if dependencies[child] == 0:
                    ready.append(child)
    return tuple(found)


def _shape(grad: Tensor | None) -> Shape | None:
    return None if grad is None else tuple(grad.shape)
