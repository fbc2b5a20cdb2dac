"""What a node of the graph saved for backward, read without side effects.

Kept apart from ``graph``, which draws the graph and lists this with ``saved=True``.
:func:`saved_tensors_of` names each saved tensor with its shape, and never unpacks one that
a ``saved_tensors_hooks`` pair packed: a non-reentrant ``torch.utils.checkpoint`` would run
the forward again to recompute it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils.checkpoint as checkpoint_module

from autograd_helpers._common.nodes import is_custom_function

__all__ = ["saved_tensors_of", "shape_text"]


def shape_text(value: torch.Tensor) -> str:
    """``"3×4"``; for a nested tensor of the strided layout, which has no one shape, what it
    holds: ``"nested: 2 tensors"`` (a jagged one's shape reads ``"2×j1"``)."""
    if value.is_nested and value.layout != torch.jagged:
        return f"nested: {value.size(0)} tensors"
    return "×".join(str(s) for s in value.shape) or "scalar"


def _packed(raw: object) -> str:
    """What a saved tensor is when a ``saved_tensors_hooks`` pair packed it, or ``""``.

    Said without unpacking it: unpacking runs the hook, and the hook of a non-reentrant
    ``torch.utils.checkpoint`` recomputes the forward (batch norm would count a batch more).
    """
    hook = getattr(raw, "unpack_hook", None)
    if hook is None:
        return ""
    if getattr(hook, "__module__", None) == checkpoint_module.__name__:
        return "recomputed by checkpoint"
    return "packed by a saved_tensors_hooks hook"


def saved_tensors_of(node: object) -> tuple[str, ...]:
    """What ``node`` saved for backward, by name: ``("other 4", "self 3×4")``, or ``("freed",)``.

    Built-in nodes expose each saved tensor as an attribute ``_saved_<name>`` (numbers and
    sizes they save are left out here); a custom Function's node has ``saved_tensors``.
    After a ``backward()`` that did not keep the graph, reading them raises: ``"freed"``.
    That is read from the node alone, which, once freed, no longer says whether it had
    saved anything: a custom Function that saved nothing reads ``"freed"`` then too, as
    its ``saved_tensors`` raises torch's "already been freed".
    A saved tensor changed in place after it was saved (``y.add_(1)`` on a ``y`` that
    ``y.sin()`` saved) is another thing, and says so: ``"self modified in place after it
    was saved (backward would fail)"``.
    A tensor that ``torch.utils.checkpoint`` will recompute reads ``"self recomputed by
    checkpoint"``, and one that another ``saved_tensors_hooks`` pair packed says so: they
    are not unpacked, which would run the forward again or the hook. A ``None`` that a
    custom Function saved (``ctx.save_for_backward(None, x)``) reads ``"saved[0] None"``.
    A list of tensors is listed tensor by tensor: indexing with a mask or an index tensor
    (``x[mask]``, ``out[mask] = v``) saves ``indices``, read ``"indices[0] 1000"``.

    Example::

        >>> x = torch.ones(3, requires_grad=True)
        >>> saved_tensors_of((x * x).grad_fn)
        ('other 3', 'self 3')
    """
    if not hasattr(node, "next_functions"):
        raise TypeError(
            f"saved_tensors_of(): node must be a grad_fn (a node of the graph), got "
            f"{type(node).__name__}"
        )
    found: list[str] = []
    try:
        if is_custom_function(node):
            found = _custom_saved(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                found.extend(_builtin_saved(node, name))
    except _FreedError:  # the graph's saved tensors were freed by a backward pass
        return ("freed",)
    return tuple(found)


def _builtin_saved(node: Any, name: str) -> list[str]:
    """What a built-in node's ``_saved_<name>`` holds: a tensor (``"self 3×4"``), or a list of
    them (indexing saves ``indices``: ``"indices[0] 1000"``, a ``None`` for a full slice
    left out); numbers and sizes: nothing."""
    short = name[len("_saved_") :]
    try:
        raw = getattr(node, f"_raw{name}", None)
    except RuntimeError as error:  # a list of them, freed: even the raw list cannot be read
        return [f"{short} {_unreadable(error)}"]
    raws = raw if isinstance(raw, list | tuple) else [raw]
    if any(_packed(r) for r in raws):  # never unpacked: that would run the hook
        if not isinstance(raw, list | tuple):
            return [f"{short} {_packed(raw)}"]
        return [f"{short}[{k}] {_packed(r)}" for k, r in enumerate(raws) if _packed(r)]
    try:
        value = getattr(node, name)
    except RuntimeError as error:
        return [f"{short} {_unreadable(error)}"]
    if isinstance(value, torch.Tensor):
        return [f"{short} {shape_text(value)}"]
    if isinstance(value, list | tuple) and any(isinstance(v, torch.Tensor) for v in value):
        return [
            f"{short}[{k}] {shape_text(v)}"
            for k, v in enumerate(value)
            if isinstance(v, torch.Tensor)
        ]
    return []


def _custom_saved(node: Any) -> list[str]:
    """What a custom Function's node saved (``ctx.save_for_backward``), by position."""
    try:
        raws = node._raw_saved_tensors
    except RuntimeError as error:  # freed: even the raw list cannot be read
        return [f"saved_tensors {_unreadable(error)}"]
    if any(_packed(raw) for raw in raws):
        return [f"saved[{k}] {_packed(raw) or 'tensor'}" for k, raw in enumerate(raws)]
    try:
        saved = node.saved_tensors
    except RuntimeError as error:
        return [f"saved_tensors {_unreadable(error)}"]
    # `ctx.save_for_backward(None, x)` is allowed: the None is kept, in its place.
    return [f"saved[{k}] {'None' if t is None else shape_text(t)}" for k, t in enumerate(saved)]


class _FreedError(Exception):
    """The node's saved tensors were freed by a backward pass that did not keep the graph."""


def _unreadable(error: RuntimeError) -> str:
    """Why a saved tensor cannot be read: changed in place since it was saved (its own
    words), or freed by a backward pass (raised as :class:`_FreedError`: all of them are)."""
    if "inplace operation" in str(error):
        return "modified in place after it was saved (backward would fail)"
    raise _FreedError from error
