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

The gradients come from leaves cut off from the caller's graph, so they cannot be
differentiated again with respect to the real inputs: the Function is ``once_differentiable``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

__all__ = ["IsolatedSubgraph", "wrap_builtin"]

# Where the tensors sit in a call: ("arg", position) or ("kwarg", name).
_Slot = tuple[str, Any]


class IsolatedSubgraph(Function):
    """Base of the Functions :func:`wrap_builtin` makes: one subclass, one name, per built-in.

    Its inputs are ``call`` (the built-in with its non-tensor arguments bound) and the
    tensors; its outputs are the built-in's, detached. Use :func:`wrap_builtin` rather than
    ``.apply``: it builds ``call`` and names the subclass.
    """

    @staticmethod
    def forward(ctx: Any, call: Callable[[Sequence[Tensor]], Any], *tensors: Tensor) -> Any:
        needs = ctx.needs_input_grad[1:]
        # 1. fresh leaves: same memory (and version counter), none of the caller's graph
        leaves = [t.detach().requires_grad_(need) for t, need in zip(tensors, needs, strict=True)]
        # 2. record the built-in's own graph on them
        with torch.enable_grad():
            result = call(leaves)
        outputs = result if isinstance(result, tuple) else (result,)
        # 3. keep both ends of the subgraph for backward
        ctx.save_for_backward(*leaves, *outputs)
        ctx.count = len(leaves)
        detached = tuple(o.detach() for o in outputs)
        ctx.mark_non_differentiable(
            *(d for d, o in zip(detached, outputs, strict=True) if not o.requires_grad)
        )
        return detached if isinstance(result, tuple) else detached[0]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grad_outputs: Tensor | None) -> tuple[Tensor | None, ...]:
        needs = ctx.needs_input_grad[1:]
        saved = ctx.saved_tensors
        leaves, outputs = saved[: ctx.count], saved[ctx.count :]
        wanted = [leaf for leaf, need in zip(leaves, needs, strict=True) if need]
        pairs = [
            (out, torch.zeros_like(out) if grad is None else grad)
            for out, grad in zip(outputs, grad_outputs, strict=True)
            if out.requires_grad
        ]
        grads = iter(
            torch.autograd.grad(
                [out for out, _ in pairs],
                wanted,
                [grad for _, grad in pairs],
                retain_graph=True,  # the caller's retain_graph decides (see the module doc)
                allow_unused=True,
            )
            if wanted and pairs
            else []
        )
        return (None, *(next(grads) if need else None for need in needs))


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Builtin"


def wrap_builtin(fn: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """Return ``fn`` run inside a custom Function whose backward is ``fn``'s own.

    The returned callable takes the same arguments as ``fn``. Tensor arguments (positional
    or keyword, at the top level) are the Function's inputs; everything else is passed
    through unchanged. Gradients equal ``fn``'s exactly, for every floating-point tensor
    input; a second ``backward(retain_graph=True)`` works; double backward is refused
    (``once_differentiable``).

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
    label: str = name or str(getattr(fn, "__name__", "builtin"))
    function = cast(
        type[IsolatedSubgraph],
        type(f"Wrapped{_camel(label)}", (IsolatedSubgraph,), {"__module__": __name__}),
    )

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        slots: list[_Slot] = [("arg", i) for i, a in enumerate(args) if isinstance(a, Tensor)]
        slots += [("kwarg", k) for k, v in kwargs.items() if isinstance(v, Tensor)]
        tensors = [args[key] if kind == "arg" else kwargs[key] for kind, key in slots]

        def call(leaves: Sequence[Tensor]) -> Any:
            new_args, new_kwargs = list(args), dict(kwargs)
            for (kind, key), leaf in zip(slots, leaves, strict=True):
                if kind == "arg":
                    new_args[key] = leaf
                else:
                    new_kwargs[key] = leaf
            result = fn(*new_args, **new_kwargs)
            outputs = result if isinstance(result, tuple) else (result,)
            if not outputs or not all(isinstance(o, Tensor) for o in outputs):
                raise TypeError(
                    f"wrap_builtin({label}): the built-in must return a tensor or a tuple of "
                    f"tensors, got {type(result).__name__}"
                )
            return result

        return function.apply(call, *tensors)

    wrapped.__name__ = wrapped.__qualname__ = f"wrapped_{label}"
    wrapped.__doc__ = f"``{label}`` inside a custom Function (see :func:`wrap_builtin`)."
    return wrapped
