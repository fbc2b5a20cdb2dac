"""A backward pass replayed in Python, with PyTorch's own recorded nodes.

Introduced in ``02_jacobians_hessians.ipynb``. :func:`replay_backward` does what
``torch.autograd.grad`` does, in about a hundred lines that can be read: it walks the graph
behind ``output``, and calls each node (each ``grad_fn``) once all the gradients flowing into
it have arrived, in dependency order, the way PyTorch's C++ engine schedules them. The nodes
are PyTorch's own, so the numbers are the real ones; only the bookkeeping is ours.

It runs the ``register_hook`` hooks of ``output`` and ``inputs``, and leaves out the rest of
what the real engine adds: hooks on the tensors in between and hooks on nodes
(``grad_fn.register_hook``/``register_prehook``), which PyTorch 2.13 keeps in C++ where Python
can neither see nor run them, anomaly mode, ``create_graph``, threads and devices. A module's
``register_full_backward_hook``/``register_full_backward_pre_hook`` leaves a
``BackwardHookFunctionBackward`` node in the graph: that, at least, can be seen, and is
refused. A custom Function's ``backward`` gets zeros for an output without gradient even
after ``ctx.set_materialize_grads(False)``, a flag Python can set but not read back. A
gradient of the wrong shape is refused as the engine refuses it, naming the node. It never
writes ``.grad`` (``AccumulateGrad`` nodes are read, not run; a reentrant checkpoint, whose
backward would, is refused; a custom Function whose backward writes ``.grad`` itself has it
put back, with a warning) and never frees the graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.nodes import accumulated_leaf
from autograd_helpers._grads_kept import grads_kept
from autograd_helpers._replay_arguments import (
    inputs_tuple,
    recorder,
    refuse_engine_only_hooks,
    refuse_nested,
    refuse_unreplayable,
    start_gradient,
)
from autograd_helpers._replay_nodes import fit_gradient, run_node

__all__ = ["ReplayStep", "replay_backward"]

Node = Any  # a grad_fn: torch._C._FunctionBase subclasses, typed loosely by torch itself
Shape = tuple[int, ...]
Hooks = Mapping[int, Callable[..., Tensor | None]]  # a tensor's ``_backward_hooks``


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


def _edge(t: Tensor, accumulators: Mapping[int, Node]) -> tuple[Node | None, int]:
    """Where ``t``'s gradient arrives: a slot of its ``grad_fn``, or its AccumulateGrad."""
    if t.grad_fn is not None:
        return t.grad_fn, t.output_nr
    return accumulators.get(id(t)), 0


def _tensor_hooks(
    tensors: Iterable[Tensor], accumulators: Mapping[int, Node]
) -> dict[Node, dict[int, Hooks]]:
    """The ``register_hook`` hooks of ``tensors``, by the node and slot their gradient reaches."""
    found: dict[Node, dict[int, Hooks]] = {}
    for t in tensors:
        node, slot = _edge(t, accumulators)
        if t._backward_hooks and node is not None:
            refuse_engine_only_hooks(t._backward_hooks.values())
            found.setdefault(node, {})[slot] = t._backward_hooks
    return found


def _hooked(grads: list[Tensor | None], hooks: Mapping[int, Hooks]) -> list[Tensor | None]:
    """Each slot's gradient through its tensor's hooks in turn; a hook returning None keeps it."""
    grads = list(grads)
    for slot, registered in hooks.items():
        for hook in list(registered.values()):
            changed = hook(grads[slot])  # called with None too, as the engine does
            if changed is not None:
                grads[slot] = changed
    return grads


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


def _must_run(order: list[Node], wanted: Mapping[Node, object]) -> dict[Node, bool]:
    """Which nodes must run: those with an edge to a node that must run or that is wanted."""
    runs: dict[Node, bool] = {}
    for node in order:  # children come first, so their answer is known
        runs[node] = any(
            child is not None and (child in wanted or runs[child])
            for child, _ in node.next_functions
        )
    return runs


@dataclass(frozen=True)
class _Plan:
    """What steps 1 and 2 of :func:`replay_backward` found, for step 3 to run."""

    wanted: Mapping[Node, list[tuple[int, int]]]  # node -> [(slot, input index)]
    runs: Mapping[Node, bool]  # whether the node must run
    dependencies: dict[Node, int]  # edges still to arrive, counted down as gradients do
    hooks: Mapping[Node, dict[int, Hooks]]  # the inputs' and output's tensor hooks


def _propagate(
    plan: _Plan,
    start_at: tuple[Node, int],
    start: Tensor,
    count: int,
    record: Callable[[ReplayStep], object] | None,
) -> list[Tensor | None]:
    """Run each node once every gradient flowing into it has arrived, summing the gradients
    of all paths in one buffer per (node, output slot); return the ``count`` inputs'
    gradients."""
    root, slot = start_at
    wanted, runs, dependencies = plan.wanted, plan.runs, plan.dependencies
    buffers: dict[Node, list[Tensor | None]] = {root: [None] * len(root._input_metadata)}
    buffers[root][slot] = start
    found: list[Tensor | None] = [None] * count
    ready = [root] if root in wanted or runs[root] else []
    with torch.no_grad():
        while ready:
            node = ready.pop()
            arrived = buffers.pop(node)
            grads = _hooked(arrived, plan.hooks.get(node, {}))
            # the engine reads an input's gradient before its hooks when the node runs on
            # and after them when it does not (engine.cpp, "NOTE [Hooks ordering]")
            for slot, i in wanted.get(node, ()):
                found[i] = (arrived if runs[node] else grads)[slot]
            if not runs[node]:
                continue
            results: tuple[Tensor | None, ...] = (None,) * len(node.next_functions)
            if any(g is not None for g in grads):  # no gradient arrived: nothing to send on
                if record is not None:
                    record(ReplayStep(type(node).__name__, tuple(_shape(g) for g in grads)))
                results = run_node(node, grads)
            for index, ((child, slot), grad) in enumerate(
                zip(node.next_functions, results, strict=True)
            ):
                if child is None or not (child in wanted or runs[child]):
                    continue
                buffer = buffers.setdefault(child, [None] * len(child._input_metadata))
                if grad is not None:
                    grad = fit_gradient(grad, node, index)
                    earlier = buffer[slot]
                    buffer[slot] = grad if earlier is None else earlier + grad
                dependencies[child] -= 1
                if dependencies[child] == 0:
                    ready.append(child)
    return found


def replay_backward(
    output: Tensor,
    inputs: Tensor | Iterable[Tensor],
    grad_output: Tensor | None = None,
    *,
    trace: list[ReplayStep] | Callable[[ReplayStep], object] | None = None,
) -> tuple[Tensor | None, ...]:
    r"""The gradients of ``output`` with respect to ``inputs``, computed node by node.

    Returns the same as ``torch.autograd.grad(output, inputs, grad_output,
    allow_unused=True)``: a tuple with one gradient per input, ``None`` for an input that
    ``output`` does not depend on. Hooks registered on ``output`` or on ``inputs`` with
    ``register_hook`` run as they would there; hooks on other tensors and on nodes do not
    (see the module's documentation).

    It leaves every ``.grad`` as found, also where a custom Function's backward writes
    ``.grad`` itself (revtorch's reversible blocks fill their parameters', memcnn's
    invertible blocks their input's): that is put back, and a ``UserWarning`` says so.
    That is one difference from ``torch.autograd.grad``: a tensor
    on which ``retain_grad()`` was called (``output``, one of ``inputs``, or one in between)
    has its ``.grad`` filled (accumulated into) by ``torch.autograd.grad``, and keeps the
    ``.grad`` it had (``None``, say) here. To read such a tensor's gradient, pass it in
    ``inputs``.

    .. warning::
        A hook registered on a tensor *in between* (``h = x * 2; h.register_hook(...)``)
        or on a node (``grad_fn.register_hook``/``register_prehook``) is neither run nor
        seen: PyTorch keeps it in C++, out of Python's reach, so the replay cannot even
        tell that it is there. A graph with such a hook that changes gradients gets the
        gradients without that change here, and with it from ``torch.autograd.grad``:
        compare the two when a graph has hooks. What can be seen is refused in a sentence:
        a module's full backward hooks, a reentrant checkpoint, a hook from
        ``torch.autograd.graph.register_multi_grad_hook`` on ``output`` or ``inputs``
        (it runs only inside PyTorch's engine), and nested tensors of the strided layout
        (``torch.jagged`` ones replay).

    Args:
        output: a tensor computed with autograd recording.
        inputs: tensors that require grad (leaves or not): one, or any iterable of them
            (a list, a tuple, ``model.parameters()``).
        grad_output: the vector of the vector-Jacobian product: ``output``'s shape and
            layout, floating-point (complex for a complex ``output``), cast to its dtype;
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
    targets = inputs_tuple(inputs)
    refuse_nested((output, grad_output, *targets))
    start = start_gradient(output, grad_output)
    record = recorder(trace)
    if output.grad_fn is None:  # output is itself a leaf: its hooks make its gradient
        (grad,) = _hooked([start], {0: output._backward_hooks or {}})
        return tuple(grad if t is output else None for t in targets)

    # 1. the nodes below the output, and where each input's gradient arrives there
    root = output.grad_fn
    order, dependencies = _reachable(root)
    refuse_nested((), order)
    accumulators = {id(leaf): n for n in order if (leaf := accumulated_leaf(n)) is not None}
    wanted: dict[Node, list[tuple[int, int]]] = {}  # node -> [(slot, input index)]
    for i, t in enumerate(targets):
        node, slot = _edge(t, accumulators)
        if node is not None:
            wanted.setdefault(node, []).append((slot, i))
    hooks = _tensor_hooks((output, *targets), accumulators)

    # 2. which nodes must run to send a gradient on to an input (AccumulateGrad has no
    #    edges below it, so it never runs: the replay reads the gradient that reaches it)
    runs = _must_run(order, wanted)
    refuse_unreplayable(node for node in order if runs[node] or node in wanted)

    # 3. run each such node once every gradient flowing into it has arrived (_propagate).
    #    A custom Function's backward may write .grad itself (revtorch's call .backward()
    #    on a recomputed subgraph): every .grad it can reach is put back, with a warning.
    with grads_kept(order) as kept:
        plan = _Plan(wanted, runs, dependencies, hooks)
        found = _propagate(plan, (root, output.output_nr), start, len(targets), record)
    if kept.written:
        warnings.warn(f"replay_backward(): {kept.note('replay_backward')}", stacklevel=2)
    return tuple(found)


def _shape(grad: Tensor | None) -> Shape | None:
    return None if grad is None else tuple(grad.shape)
