"""What a Function's forward kept for backward, and whether autograd can trace it to ``x``.

Used by ``check_double_backward``. Differentiating backward (double backward) follows the
history of every tensor backward reads. The input ``x`` and the output have one; anything
forward *computed* has none, because forward runs with autograd off: a saved denominator,
``x.detach()``, ``x.clone()``. Autograd then treats it as a constant, and the second
derivative misses how it depends on ``x``. :func:`what_forward_kept` classifies each tensor
forward kept (in ``save_for_backward`` or as a ``ctx`` attribute) by its history.

:func:`kept_outside_ctx` says what else learner code changed that outlives the check, as
:class:`~autograd_helpers.checks._contain.contained.Contained` saw it: the example tensor the
notebook handed over, and the lists, dicts and sets that the Function's code names among its
globals or in its closure (``stash.append(x)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.nodes import graph_leaves
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._contain.contained import Contained

__all__ = ["EXAMPLE", "Kept", "kept_outside_ctx", "what_forward_kept"]

Kind = Literal["input", "output", "detached input", "constant", "own graph"]


@dataclass(frozen=True)
class Kept:
    """One tensor forward kept: where (``saved_tensors[0]``, ``ctx.d``) and its history."""

    where: str
    kind: Kind
    requires_grad: bool = False

    @property
    def traceable(self) -> bool:
        return self.kind not in ("detached input", "constant")

    def hint(self, x: str = "x") -> str:
        """Why autograd treats it as a constant, and what to save instead (``x``: the
        input's name)."""
        if self.kind == "detached input":
            return (
                f"Hint: forward kept `{self.where}`, the numbers of `{x}` without its history "
                f"(`{x}.detach()`, `{x}.data`): differentiating backward treats it as a "
                f"constant and misses how backward's result depends on `{x}`. Save `{x}` "
                "itself."
            )
        own_leaf = (
            " (`.requires_grad_()` makes it a leaf of its own, not part of x's history)"
            if self.requires_grad
            else ""
        )
        return (
            f"Hint: forward kept `{self.where}`, a tensor autograd cannot trace back to "
            f"`{x}`{own_leaf}: forward runs with autograd off, so what it computes has no "
            "history, and differentiating backward treats it as a constant. Save "
            f"`{x}` (or the output) and compute the rest in backward with torch operations."
        )


def _kind(tensor: Tensor, leaf: Tensor, node: Any) -> Kind:
    if tensor is leaf:
        return "input"
    if tensor.grad_fn is node:
        return "output"
    if tensor.grad_fn is not None and any(t is leaf for t in graph_leaves(tensor)):
        return "own graph"
    same_memory = tensor.numel() and tensor.data_ptr() == leaf.data_ptr()
    return "detached input" if same_memory else "constant"


def _kept(fn: type[Function], x: Tensor) -> list[Kept]:
    leaf = fresh_leaf(x)
    output = fn.apply(leaf)
    node = getattr(output, "grad_fn", None)
    if node is None:
        return []
    found: list[Kept] = []
    for k, tensor in enumerate(getattr(node, "saved_tensors", ()) or ()):
        if isinstance(tensor, Tensor):
            found.append(
                Kept(f"saved_tensors[{k}]", _kind(tensor, leaf, node), tensor.requires_grad)
            )
    for name, value in (vars(node) if hasattr(node, "__dict__") else {}).items():
        if isinstance(value, Tensor):
            found.append(Kept(f"ctx.{name}", _kind(value, leaf, node), value.requires_grad))
    return found


def what_forward_kept(fn: type[Function], x: Tensor) -> list[Kept]:
    """Each tensor ``fn``'s forward kept on ``ctx`` at ``x``, with its history (``[]`` if
    forward fails: that has its own verdict).

    Example::

        >>> class SavesDenominator(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x, 1 + x.abs())
        ...         return x / (1 + x.abs())
        >>> [(k.where, k.kind) for k in what_forward_kept(SavesDenominator, torch.ones(2))]
        [('saved_tensors[0]', 'input'), ('saved_tensors[1]', 'constant')]
    """
    outcome = run_learner_code(_kept, fn, x)
    return [] if outcome.error is not None else list(outcome.value)


EXAMPLE = "the example tensor the notebook passed to the checker"


def kept_outside_ctx(contained: Contained, example: Tensor) -> list[str]:
    """What forward or backward changed outside ``ctx``, as ``contained`` saw it: the lists,
    dicts and sets the Function's code names that gained a tensor, and the ``example`` tensor
    (the :data:`EXAMPLE`, under any name) if its values or ``requires_grad`` changed.

    Example::

        >>> stash = []
        >>> class Stashes(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         stash.append(x)
        ...         return x * 2
        >>> example = torch.ones(2)
        >>> contained = Contained(Stashes, {EXAMPLE: example})
        >>> _ = Stashes.apply(example)
        >>> kept_outside_ctx(contained, example), contained.restore(), stash
        (['the global list `stash`'], None, [])
    """
    found = [c.label for c in contained.containers.changed() if c.gained_tensors()]
    for _, state in contained.tensors:
        if state.tensor is example and {"values", "requires_grad"} & set(state.changed()):
            found.append(EXAMPLE)
    return found
