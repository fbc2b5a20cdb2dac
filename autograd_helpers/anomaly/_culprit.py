"""Which saved tensor an in-place error is about, which op changed it, and who ran that op."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.nodes import graph_nodes, is_accumulate_grad
from autograd_helpers.anomaly._advice import Changer
from autograd_helpers.anomaly._forward import InPlace
from autograd_helpers.anomaly._frames import learner_frame_in
from autograd_helpers.anomaly._tensors import storage_of
from autograd_helpers.anomaly._tracing import Run

__all__ = [
    "LoopReach",
    "carried_across_iterations",
    "changer_of",
    "changing_record",
    "describe",
    "is_parameter",
    "stale_saved_tensor",
    "unchanged_view",
]


def _changed_in_place(node: Any, name: str) -> bool:
    """Whether reading the saved attribute ``name`` of ``node`` raises the in-place error."""
    try:
        getattr(node, name)
    except RuntimeError as error:
        return "inplace operation" in str(error)
    except AttributeError:
        return False
    return False


def _unchecked(saved: Any) -> Tensor | None:
    """The tensor a raw ``SavedTensor`` holds, handed over by its pack hook, unchecked."""
    caught: list[Tensor] = []

    def pack(tensor: Tensor) -> Tensor:
        caught.append(tensor)
        return tensor

    try:
        saved.register_hooks(pack, lambda tensor: tensor)
    except (RuntimeError, AttributeError, TypeError):  # freed, or hooks already set
        return None
    return caught[0] if caught else None


def stale_saved_tensor(run: Run, shape: tuple[int, ...], found: int) -> Tensor | None:
    """The tensor autograd complained about, read from the node that saved it.

    Reading a changed saved tensor raises, so the node is the one whose saved attribute
    raises the in-place error (the one anomaly mode's traceback names, if several do).
    ``register_hooks`` on its raw saved tensor hands over the tensor itself (sharing its
    memory and version counter) without that check. The node is looked for below what fn
    returned, and below the backward passes fn ran itself (the last one first: it raised).
    """
    named = re.search(r"Error detected in (\w+)", run.trace)
    own = [root for backward in reversed(run.own) for root in backward.roots]
    roots = own + [o.grad_fn for o in run.outputs if o.grad_fn is not None]
    nodes = [n for n in graph_nodes(roots) if not is_accumulate_grad(n)]
    if named:  # the node anomaly mode names first, then the others
        nodes.sort(key=lambda n: type(n).__name__ != named.group(1))
    for node in nodes:
        for name in [a for a in dir(node) if a.startswith("_saved_")] + ["saved_tensors"]:
            if not _changed_in_place(node, name):
                continue
            raw = getattr(
                node, "_raw" + name if name.startswith("_saved") else "_raw_saved_tensors"
            )
            for saved in raw if isinstance(raw, list | tuple) else [raw]:
                tensor = _unchecked(saved)
                if tensor is not None and tuple(tensor.shape) == shape and tensor._version == found:
                    return tensor
    return None


def describe(record: InPlace) -> str:
    return f"{record.line} (`{record.op}`)" if record.line else f"`{record.op}`"


def changing_record(
    run: Run, stale: Tensor | None, shape: tuple[int, ...], dtype: str, saved: int
) -> InPlace | None:
    """The first in-place op that changed the saved tensor itself, at the version saved.

    Without the tensor, a guess from shape and dtype is only given when it is the only
    candidate: an in-place op on another tensor of the same shape is never blamed.
    """
    at_version = [record for record in run.watch.inplace if record.version == saved]
    if stale is not None:
        return next((r for r in at_version if r.changed(stale)), None)
    candidates = [
        r for r in at_version if r.shape == shape and str(r.dtype).removeprefix("torch.") == dtype
    ]
    return candidates[0] if len({storage_of(r.target) for r in candidates}) == 1 else None


def is_parameter(tensor: Tensor | None) -> bool:
    """A leaf that requires grad (a parameter), or a view of one."""
    base = tensor._base if tensor is not None and tensor._base is not None else tensor
    return base is not None and base.is_leaf and base.requires_grad


def changer_of(run: Run, stale: Tensor | None, record: InPlace | None, leaf: bool) -> Changer:
    """Who changed the saved tensor: an optimizer, an update of a parameter, a forward op
    as its side effect, fn on its own input, or fn on a tensor it computed; ``""`` when
    neither the tensor nor the op that changed it was found."""
    target = record.target if record is not None else stale
    if target is None:
        return Changer("")
    parameter = leaf or is_parameter(target)
    if parameter or (record is not None and record.by_optimizer):
        shown = target if target._base is None else target._base
        saved = None if stale is None else tuple(stale.shape)
        shape = tuple(shown.shape)
        name = f"of shape {shape}" if saved not in (None, shape) else ""
        frozen = not shown.requires_grad
        buffer = frozen and not isinstance(shown, torch.nn.Parameter)
        if record is not None and record.by_optimizer:
            return Changer("optimizer", name, frozen=frozen)
        if record is not None and record.side_effect:  # `embedding(max_norm=...)`
            return Changer("forward", name, record.op, frozen=frozen)
        if buffer and record is not None and record.in_module_forward:
            # A module's forward that changes its own buffer after using it (a running value)
            expression, rewrite = _changed_expression(record)
            return Changer("parameter", name, record.op, True, True, True, expression, rewrite)
        return Changer("parameter", name, frozen=frozen, buffer=buffer)
    position = run.inputs.position_of(target)
    if position is not None:
        return Changer("input", run.inputs.names[position])
    return Changer("computed")


def _changed_expression(record: InPlace) -> tuple[str, str]:
    """What the line that changed a tensor calls it, and that line out of place:
    ``("s.scale", "s.scale = s.scale.mul(0.9)")`` for ``s.scale.mul_(0.9)``, the same for
    ``s.scale *= 0.9`` with ``s.scale * 0.9``; ``("", "")`` when the line does not say."""
    code = record.line.partition(": ")[2].strip()
    method = re.fullmatch(r"([A-Za-z_][\w.]*)\.(\w+)_\((.*)\)", code)
    if method:
        target, op, args = method.groups()
        return target, f"{target} = {target}.{op}({args})"
    augmented = re.fullmatch(r"([A-Za-z_][\w.]*)\s*([-+*/])=\s*(.+)", code)
    if augmented:
        target, op, value = augmented.groups()
        return target, f"{target} = {target} {op} {value}"
    return "", ""


def _layout(tensor: Tensor) -> tuple[object, ...]:
    """Where a tensor's elements are: its memory, offset, strides and shape."""
    offset, stride = tensor.storage_offset(), tuple(tensor.stride())
    return (storage_of(tensor), offset, stride, tuple(tensor.shape))


def _span(tensor: Tensor) -> tuple[int, int]:
    """The first and one past the last element of memory a tensor can reach."""
    start = int(tensor.storage_offset())
    extent = sum(
        int((size - 1) * abs(step))
        for size, step in zip(tensor.shape, tensor.stride(), strict=True)
    )
    return start, start + extent + 1


def unchanged_view(
    run: Run, stale: Tensor | None, record: InPlace | None, saved: int
) -> str | None:
    """When ``stale`` is a view whose saved values did not change (the write went to another
    part of its base, which shares one version counter with its views): a phrase for the
    base (``" of a tensor of shape (3,)"``, or ``""``); ``None`` otherwise."""
    if stale is None or record is None or run.watch.saved is None:
        return None
    target = record.written if record.written is not None else record.target
    (first, end), (written, written_end) = _span(stale), _span(target)
    if stale.numel() == 0 or (written < end and first < written_end):
        return None  # the write may have reached the saved part itself
    if stale.untyped_storage().nbytes() <= stale.numel() * stale.element_size():
        return None  # the whole memory: no other part to write to
    key = _layout(stale)
    for snapshot in run.watch.saved.snapshots:
        if snapshot.version != saved:
            continue
        try:
            if _layout(snapshot.tensor) != key:
                continue
            now = stale.detach()
            same = (now == snapshot.values) | (now.isnan() & snapshot.values.isnan())
        except (RuntimeError, NotImplementedError):
            return None
        if not bool(same.all()):
            return None
        base = snapshot.tensor._base
        return "" if base is None else f" of a tensor of shape {tuple(base.shape)}"
    return None


@dataclass(frozen=True)
class LoopReach:
    """How a backward pass fn ran in a loop reached the graph of an earlier iteration's.

    ``kind`` is ``"carried"`` (a tensor carried from iteration to iteration, a recurrent
    state: the lines that made the old part of the graph made its new part too) or
    ``"reused"`` (one output made once, before the loop, used by every iteration, as a
    GAN's generator output reused across generator steps). ``line`` made the old part
    where the new part uses it; ``cut`` says whether detaching there would leave leaves
    that require grad (the generator's parameters) without a gradient from this loss.
    """

    kind: str
    line: str = ""
    cut: bool = False


def _lines(nodes: Iterable[Any]) -> set[str]:
    """The learner's forward lines that created ``nodes`` (from anomaly mode's traceback)."""
    found = {learner_frame_in("".join(node.metadata.get("traceback_", []))) for node in nodes}
    return found - {""}


def _leaves_below(nodes: Iterable[Any]) -> set[int]:
    """The ids of the leaves (that require grad) ``nodes`` send gradients to directly."""
    return {
        id(child.variable)
        for node in nodes
        for child, _ in node.next_functions
        if child is not None and is_accumulate_grad(child) and child.variable.requires_grad
    }


def carried_across_iterations(run: Run) -> LoopReach | None:
    """How the backward pass fn ran that raised reached the graph of an earlier backward
    pass from the same line (a loop's), or ``None`` when it did not."""
    failed = next((own for own in run.own if own.raised), None)
    if failed is None:
        return None
    nodes = {n for n in failed.nodes if not is_accumulate_grad(n)}
    earlier = [own for own in run.own[: run.own.index(failed)] if own.line == failed.line]
    old = {n for n in nodes if any(n in own.nodes for own in earlier)}
    if not old:
        return None
    new = nodes - old
    if _lines(old) & _lines(new):
        return LoopReach("carried")  # the same line made both: a state carried along
    boundary = [child for n in new for child, _ in n.next_functions if child in old]
    line = next(iter(sorted(_lines(boundary) or _lines(old))), "")
    return LoopReach("reused", line, bool(_leaves_below(old) - _leaves_below(new)))
