"""Reuse a built-in's backward from inside your own Function: the isolated-subgraph trick.

Introduced in ``01_custom_function.ipynb``, section 4. Inside ``forward`` autograd is off,
so a built-in called there records nothing. :func:`wrap_builtin` turns it back on for a
moment and runs the built-in on *detached aliases* of the inputs: ``detach()`` returns a new
tensor that shares the input's storage (no copy) but none of its history, a fresh leaf.
That records a small graph of its own, which ``backward`` then differentiates with
:func:`torch.autograd.grad`.

Three details make it correct:

1. ``autograd.grad``, not ``.backward()``: ``grad`` *returns* the gradients, and the engine
   adds what our backward returns into the real inputs' ``.grad`` once. Calling
   ``.backward()`` on a subgraph built from the real inputs would add into their ``.grad``
   too: every parameter's gradient counted twice.
2. The fresh leaves and the subgraph's outputs go through ``save_for_backward`` like any
   saved tensor: an in-place change of an input before backward is detected, and a
   caller's ``backward()`` without ``retain_graph`` frees the subgraph as it frees the rest
   of the graph. The price of the trick is memory: everything the built-in saved for its
   backward stays alive as long as our node does, as it would without the wrapper.
3. ``retain_graph=True`` inside our backward: the subgraph is reached only through our
   node, so whether it may be freed is the caller's decision (point 2), not autograd.grad's.

What the built-in differentiates must all be inputs of the Function, or its gradient is
lost: the tensors among the arguments (in lists, tuples and dicts too: ``torch.cat([a,
b])``) become fresh leaves, and the parameters of the modules the built-in reaches (a
model, the ``nn.Module`` that ``odeint`` integrates) join as inputs used as they are, their
gradients taken with ``autograd.grad`` like the leaves' (so never accumulated twice). A
tensor that requires grad and is neither is refused in one sentence.

The gradients come from leaves cut off from the caller's graph, so they cannot be
differentiated with respect to the real inputs. For a second derivative (``backward``
runs with ``create_graph=True``), the built-in runs again on the real inputs, from the
state forward started from (the random states, torch's, Python's and NumPy's, and its
modules' attributes, flags and buffers: a cursor that forward moves is where forward found
it), and that graph is differentiated instead, itself differentiably; the modules are put
back afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.nodes import accumulated_leaf, is_accumulate_grad
from autograd_helpers._wrap_call import BuiltinCall, Start

__all__ = ["IsolatedSubgraph", "wrap_builtin"]


class IsolatedSubgraph(Function):
    """Base of the Functions :func:`wrap_builtin` makes: one subclass, one name, per built-in.

    Its inputs are ``call`` (the built-in with everything but the tensors bound), ``count``,
    and the tensors: the ``count`` argument tensors the built-in gets as fresh leaves, then
    those it uses as they are (its modules' parameters). Its outputs are the built-in's,
    detached. Use :func:`wrap_builtin` rather than ``.apply``: it builds ``call`` and names
    the subclass.
    """

    label = "builtin"  # what the built-in is called in messages: each subclass names its own

    @staticmethod
    def forward(ctx: Any, call: BuiltinCall, count: int, *tensors: Tensor) -> Any:
        needs = ctx.needs_input_grad[2:]
        given, used = tensors[:count], tensors[count:]
        # 1. fresh leaves: same memory (and version counter), none of the caller's graph
        leaves = [t.detach().requires_grad_(need) for t, need in zip(given, needs, strict=False)]
        # 2. record the built-in's own graph on them (and on the parameters it uses)
        ctx.start = Start(call)  # for a second derivative: run again from here
        with torch.enable_grad():
            result = call(leaves)
        outputs = result if isinstance(result, tuple) else (result,)
        _refuse_unrouted(ctx._forward_cls.label, outputs, [*leaves, *used])
        # 3. keep both ends of the subgraph for backward, and the inputs for a second one
        ctx.save_for_backward(*leaves, *used, *outputs, *given)
        ctx.counts = (count, len(used), len(outputs))
        detached = tuple(o.detach() for o in outputs)
        ctx.mark_non_differentiable(
            *(d for d, o in zip(detached, outputs, strict=True) if not o.requires_grad)
        )
        return detached if isinstance(result, tuple) else detached[0]

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Tensor | None) -> tuple[Tensor | None, ...]:
        saved = _saved(ctx)
        inputs, outputs = [*saved.leaves, *saved.used], saved.outputs
        second = torch.is_grad_enabled()  # create_graph=True: the gradients need a graph
        if second:  # one that reaches the real inputs: run the built-in again on them
            result = ctx.start.run_again(saved.given)
            inputs = [*saved.given, *saved.used]
            outputs = result if isinstance(result, tuple) else (result,)
        grads = _gradients(inputs, ctx.needs_input_grad[2:], outputs, grad_outputs, second)
        return (None, None, *grads)


class _Saved(NamedTuple):
    leaves: Sequence[Tensor]  # the subgraph's inputs: the fresh leaves...
    used: Sequence[Tensor]  # ...and the tensors used as they are (parameters)
    outputs: Sequence[Tensor]  # the subgraph's outputs
    given: Sequence[Tensor]  # the real inputs the leaves stand for


def _saved(ctx: Any) -> _Saved:
    """What forward saved, by part."""
    saved, (count, used, outputs) = ctx.saved_tensors, ctx.counts
    ends = (count, count + used, count + used + outputs)
    return _Saved(
        saved[: ends[0]], saved[ends[0] : ends[1]], saved[ends[1] : ends[2]], saved[ends[2] :]
    )


def _gradients(
    inputs: Sequence[Tensor],
    needs: Sequence[bool],
    outputs: Sequence[Tensor],
    grad_outputs: Sequence[Tensor | None],
    create_graph: bool,
) -> list[Tensor | None]:
    """The gradient of ``outputs`` for each input that ``needs`` one (``None`` elsewhere)."""
    wanted = [t for t, need in zip(inputs, needs, strict=True) if need]
    pairs = [
        (out, torch.zeros_like(out) if grad is None else grad)
        for out, grad in zip(outputs, grad_outputs, strict=True)
        if out.requires_grad
    ]
    found = iter(
        torch.autograd.grad(
            [out for out, _ in pairs],
            wanted,
            [grad for _, grad in pairs],
            retain_graph=True,  # the caller's retain_graph decides (see the module doc)
            create_graph=create_graph,
            allow_unused=True,
        )
        if wanted and pairs
        else []
    )
    return [next(found) if need else None for need in needs]


def _refuse_unrouted(label: str, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
    """Refuse a subgraph that reaches a tensor requiring grad that is not one of ``inputs``:
    its gradient would be lost (a weight the built-in finds by a route not followed)."""
    known = {id(t) for t in inputs}
    stops = {t.grad_fn for t in inputs if t.grad_fn is not None}
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if node in seen or node in stops:
            continue
        seen.add(node)
        if is_accumulate_grad(node):
            leaf = accumulated_leaf(node)
            assert leaf is not None
            if id(leaf) not in known:
                raise ValueError(
                    f"wrap_builtin({label}): the built-in used a tensor that requires grad (shape "
                    f"{tuple(leaf.shape)}) that is neither among its arguments nor a "
                    "parameter of a module it reaches, so its gradient would be lost: pass "
                    "it as an argument"
                )
        stack.extend(child for child, _ in node.next_functions if child is not None)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Builtin"


def wrap_builtin(fn: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """Return ``fn`` run inside a custom Function whose backward is ``fn``'s own.

    The returned callable takes the same arguments as ``fn``. Tensor arguments (positional
    or keyword, and those inside lists, tuples and dicts: ``torch.cat([a, b])``) are the
    Function's inputs, and so are the parameters of the modules ``fn`` reaches (an
    ``nn.Module`` argument, ``fn`` itself when it is a model, a module its closure or its
    globals name); everything else is passed through unchanged. Gradients equal ``fn``'s
    exactly, for every floating-point tensor input and parameter; a second
    ``backward(retain_graph=True)`` works; so does double backward (a Hessian): the built-in
    then runs again on the real inputs, from the state its forward started from (the random
    states, and its modules' attributes, flags and buffers), and the modules are put back. A tensor
    requiring grad that ``fn`` reaches by another route is refused with a ``ValueError``.

    Args:
        fn: a differentiable callable returning a tensor or a tuple of tensors, for example
            :func:`torch.nn.functional.linear` or :func:`torch.nn.functional.max_pool1d`.
        name: names the Function (its ``grad_fn`` is ``Wrapped<Name>Backward``); default
            ``fn.__name__``.

    Example::

        >>> pool = wrap_builtin(torch.nn.functional.max_pool1d)
        >>> x = torch.randn(1, 1, 6, requires_grad=True)
        >>> y = pool(x, kernel_size=3, stride=1)
        >>> type(y.grad_fn).__name__
        'WrappedMaxPool1dBackward'
    """
    if not callable(fn):
        raise TypeError(f"wrap_builtin(): fn must be callable, got {type(fn).__name__}")
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise ValueError(f"wrap_builtin(): name must be a Python identifier, got {name!r}")
    label: str = name or str(getattr(fn, "__name__", type(fn).__name__))
    function = cast(
        type[IsolatedSubgraph],
        type(
            f"Wrapped{_camel(label)}",
            (IsolatedSubgraph,),
            {"__module__": __name__, "label": label},
        ),
    )

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        call = BuiltinCall(fn, label, args, kwargs)
        return function.apply(call, len(call.given), *call.given, *call.used)

    wrapped.__name__ = wrapped.__qualname__ = f"wrapped_{label}"
    wrapped.__doc__ = f"``{label}`` inside a custom Function (see :func:`wrap_builtin`)."
    return wrapped
