"""A tool's own backward pass, run so that every ``.grad`` is left as it was found.

Shared by ``anomaly``, ``modes`` and ``engine``, whose backward passes are measurements,
not training steps. Two kinds of custom Function make that harder:

- a backward that writes ``.grad`` itself: revtorch's reversible blocks call
  ``.backward()`` on a recomputed subgraph (which fills their parameters' ``.grad``), and
  memcnn's invertible blocks set their input's and output's ``.grad`` by hand. Even
  :func:`torch.autograd.grad`, which fills no ``.grad``, then leaves some changed:
  :func:`grads_kept` snapshots the ``.grad`` of every tensor such a backward can reach (the
  graph's leaves, what the Functions keep on ``ctx``, the parameters of the modules the
  caller's code reaches) and puts it back, saying which were written;
- a backward that refuses :func:`torch.autograd.grad`: it asks
  ``torch.autograd._is_checkpoint_valid()`` and raises ("not compatible with .grad(),
  please use .backward()"), as a reentrant ``torch.utils.checkpoint`` does.
  :func:`refusals` notes that question's answer, and :func:`backward_into_grads` runs the
  pass the user's way, with ``.backward()``, reading the gradients from ``.grad``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from autograd_helpers._common.nodes import accumulated_leaf, is_custom_function
from autograd_helpers._common.reach import reachable

__all__ = ["KeptGrads", "backward_into_grads", "grads_kept", "refusals"]


def _tensors_reached(*roots: object) -> list[Tensor]:
    """The tensors ``roots`` reach by name, and the parameters of the modules they reach."""
    found: list[Tensor] = []
    for _, item in reachable(*roots, kinds=(Tensor, nn.Module)):
        found.extend(item.parameters() if isinstance(item, nn.Module) else [item])
    return found


def _grad_of(tensor: Tensor) -> Tensor | None:
    """``tensor.grad``, without the warning torch gives for a non-leaf's (memcnn writes one)."""
    if tensor.is_leaf or tensor.retains_grad:
        return tensor.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return tensor.grad


@dataclass
class KeptGrads:
    """The ``.grad`` of each holder as found, and who may have written it since."""

    holders: list[Tensor]
    before: list[Tensor | None]
    writers: dict[int, str]  # id(tensor) -> the custom node whose ctx reaches it
    written: list[tuple[Tensor, str]] = field(default_factory=list)

    def add(self, tensors: Iterable[Tensor]) -> None:
        """Keep these tensors' ``.grad`` too."""
        known = {id(t) for t in self.holders}
        for tensor in tensors:
            if id(tensor) not in known:
                known.add(id(tensor))
                self.holders.append(tensor)
                self.before.append(_grad_of(tensor))

    def restore(self, *, note: bool = True) -> None:
        """Put every ``.grad`` back; with ``note``, note those a backward wrote (a tensor's
        own ``retain_grad()`` is not a backward writing it)."""
        for tensor, grad in zip(self.holders, self.before, strict=True):
            if _grad_of(tensor) is not grad:
                if note and not tensor.retains_grad:
                    self.written.append((tensor, self.writers.get(id(tensor), "")))
                tensor.grad = grad

    def note(self, tool: str) -> str:
        """One sentence on the ``.grad`` a Function's backward wrote, or ``""``: ``"`Rev`'s
        backward writes `.grad` itself (2 tensors, ...); the tool put them back as found."``"""
        if not self.written:
            return ""
        names = list(dict.fromkeys(name for _, name in self.written if name))
        who = (
            " and ".join(f"`{name}`" for name in names[:2]) + "'s backward"
            if names
            else "a backward in the graph"
        )
        count = len(self.written)
        return (
            f"{who} writes `.grad` itself ({count} tensor{'s' if count > 1 else ''}, besides "
            f"the gradients it returns); {tool} put {'them' if count > 1 else 'it'} back as "
            "found."
        )


@contextlib.contextmanager
def grads_kept(nodes: Iterable[Any], *roots: object) -> Iterator[KeptGrads]:
    """Run a backward pass through ``nodes``, then put back every ``.grad`` it can reach.

    Reached: the leaves of the graph, the tensors (and modules' parameters) each custom
    Function keeps on its ``ctx`` (read now: a backward may delete them), and those
    ``roots`` reach by name. The yielded :class:`KeptGrads` says which were written.

    Example::

        >>> x = torch.ones(2, requires_grad=True)
        >>> y = (x * 3).sum()
        >>> with grads_kept([], x) as kept:  # no nodes: x is named
        ...     y.backward()
        >>> x.grad is None, kept.written[0][0] is x
        (True, True)
    """
    nodes = list(nodes)
    holders = [leaf for node in nodes if (leaf := accumulated_leaf(node)) is not None]
    writers: dict[int, str] = {}
    for node in nodes:
        if is_custom_function(node):
            for tensor in _tensors_reached(vars(node)):
                writers.setdefault(id(tensor), type(node).__name__)
                holders.append(tensor)
    holders += _tensors_reached(*roots)
    kept = KeptGrads([], [], writers)
    kept.add(holders)
    try:
        yield kept
    finally:
        kept.restore()


@contextlib.contextmanager
def refusals() -> Iterator[list[bool]]:
    """Note each time a backward asks whether it may run (``_is_checkpoint_valid()``) and is
    told no: under :func:`torch.autograd.grad`, a Function that needs ``.backward()`` asks."""
    refused: list[bool] = []
    asked = torch.autograd._is_checkpoint_valid

    def watched() -> bool:
        valid = bool(asked())
        if not valid:
            refused.append(True)
        return valid

    torch.autograd._is_checkpoint_valid = watched
    try:
        yield refused
    finally:
        torch.autograd._is_checkpoint_valid = asked


def backward_into_grads(
    roots: Sequence[Tensor], grads: Sequence[Tensor], targets: Sequence[Tensor], kept: KeptGrads
) -> tuple[Tensor | None, ...]:
    """``torch.autograd.grad(roots, targets, grads)`` the user's way, for a graph that refuses
    it: ``backward(retain_graph=True)``, then each target's ``.grad``.

    Every ``.grad`` in ``kept`` (the targets' included) is cleared first, so that what is
    read is this pass's alone, and put back afterwards: ``backward()`` fills them, so who
    else wrote one cannot be told, and is not noted. The leaves' post-accumulate hooks
    (an optimizer stepping inside backward) are held back meanwhile.
    """
    kept.add(targets)
    hooks = [
        (held, dict(held))
        for t in kept.holders
        if isinstance(held := getattr(t, "_post_accumulate_grad_hooks", None), dict) and held
    ]
    for held, _ in hooks:
        held.clear()
    try:
        for tensor in kept.holders:
            tensor.grad = None
        torch.autograd.backward(list(roots), list(grads), retain_graph=True)
        return tuple(target.grad for target in targets)
    finally:
        kept.restore(note=False)
        for held, contents in hooks:
            held.update(contents)
