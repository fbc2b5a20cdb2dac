"""What learner code could change that outlives its call: snapshot, say in words, put back.

The checkers' one containment. A learner's function gets copies of the checker's tensors,
but its code can still reach the notebook by name: a global tensor (its values,
``requires_grad``, ``.grad``, hooks, attributes), a module, an optimizer's state, a global
variable it sets, a list it appends to, its own attributes. :class:`Contained` snapshots
all of that before learner code runs (:class:`~autograd_helpers._common.tensors.TensorState`
for each tensor, :class:`~.modules.ModelRecord` and
:class:`~autograd_helpers._common.state.ModuleState` for each module,
:class:`~.names.Names` and :class:`~.names.Containers`), says in plain
words what a call changed (a verdict of its own: each chapter's :class:`Words`), and puts
everything back, so that a check leaves the notebook as it found it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from autograd_helpers._common.code import closure_items
from autograd_helpers._common.reach import reachable
from autograd_helpers._common.state import ModuleState
from autograd_helpers._common.tensors import TensorState, same_values
from autograd_helpers.checks._contain.modules import ModelRecord
from autograd_helpers.checks._contain.names import Containers, Names, code_owners
from autograd_helpers.checks._contain.reach import (
    Arrays,
    LruCaches,
    ModuleAttributes,
    object_spaces,
    reached_functions,
)

__all__ = ["Contained", "Words", "said"]

_ITEMS = 64  # items of one global list looked into (as the notebook fingerprint does)


@dataclass(frozen=True)
class Words:
    """How a chapter's checkers say each change: a format string per kind ("": put back
    without a word). The defaults are chapter 04's."""

    name: str = "it set {label}"
    container: str = ""  # {label} {before} {now}: the numbers of items
    # {label} {what}: a container with as many items as before, or an array; said only
    # where ``container`` is said
    items: str = "it changed {label} ({what})"
    tensor: str = "it changed {label} ({what})"
    reached: str = "the tensor {label}"  # a tensor found by name (not handed over)
    module: str = "it changed the module {label} (its parameters, buffers or mode)"
    mode: str = ""  # {label} {mode}: a module's train/eval flag alone
    optimizer: str = "it changed the state of the optimizer {label}"
    # {label} {what}: ``"lr of param group 0"``; said only where ``optimizer`` is said
    settings: str = "it changed the optimizer {label}'s settings ({what})"
    attribute: str = ""  # {owner} {name}: an attribute set on the learner's function
    # the parts of one tensor, in its sentence's parentheses
    values: str = "its values"
    requires_grad: str = "its requires_grad (now {now})"
    grad: str = "its `.grad`"
    hooks: str = "a hook on it"
    attributes: str = "its attributes"


def said(state: TensorState, words: Words = Words()) -> list[str]:
    """The parts of a tensor that changed, in ``words``: ``["its values", "a hook on it"]``."""
    now = state.tensor.requires_grad
    return [getattr(words, part).format(now=now) for part in state.changed()]


def _taken(tensor: Tensor) -> TensorState | None:
    """A tensor's state, or ``None`` for one whose values cannot be read (meta, fake)."""
    try:
        state = TensorState.take(tensor)
        state.changed()
    except Exception:
        return None
    return state


def _in_globals(name: str, value: object) -> Iterator[tuple[str, Tensor | nn.Module]]:
    """``(how to write it, item)``: a global tensor or module, a module's tensors, and the
    tensors in a global list or tuple (nested ones too)."""
    if isinstance(value, Tensor):
        yield f"`{name}`", value
    elif isinstance(value, nn.Module):
        yield f"`{name}`", value
        for part, t in [*value.named_parameters(), *value.named_buffers()]:
            yield f"`{name}.{part}`", t
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value[:_ITEMS]):
            if isinstance(item, Tensor | list | tuple):
                yield from _in_globals(f"{name}[{i}]", item)


def _every_global(fn: object) -> list[tuple[str, Any]]:
    """The notebook's tensors and modules, by its names and ``fn``'s closure cells."""
    space = getattr(fn, "__globals__", None)
    names = [(n, v) for n, v in space.items() if not n.startswith("_")] if space else []
    names += closure_items(fn)
    return [found for name, value in names for found in _in_globals(name, value)]


def _cloned(state: Mapping[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """A copy of an optimizer's per-parameter state (momentum buffers, Adam's moments...)."""
    return {
        p: {k: v.detach().clone() if isinstance(v, Tensor) else v for k, v in s.items()}
        for p, s in state.items()
    }


def _settings(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each param group's settings (``lr``, ``momentum``...), its parameters left out."""
    return [
        {
            k: v.detach().clone() if isinstance(v, Tensor) else v
            for k, v in g.items()
            if k != "params"
        }
        for g in optimizer.param_groups
    ]


def _settings_changed(now: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[str]:
    """``["lr of param group 0"]``: what differs (a group added or removed says so)."""
    if len(now) != len(kept):
        return [f"the number of param groups ({len(kept)}, now {len(now)})"]
    found = []
    for index, (group, before) in enumerate(zip(now, kept, strict=True)):
        for key in sorted(group.keys() | before.keys()):
            a, b = group.get(key), before.get(key)
            same = (
                same_values(a, b)
                if isinstance(a, Tensor) and isinstance(b, Tensor)
                else a is b or (type(a) is type(b) and bool(a == b))
            )
            if not same:
                found.append(f"{key} of param group {index}")
    return found


def _same_state(now: dict[Any, dict[str, Any]], kept: dict[Any, dict[str, Any]]) -> bool:
    def equal(a: object, b: object) -> bool:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return same_values(a, b)
        return a is b or bool(a == b)

    return now.keys() == kept.keys() and all(
        now[p].keys() == kept[p].keys() and all(equal(now[p][k], kept[p][k]) for k in kept[p])
        for p in kept
    )


class Contained:
    """What ``fn``'s code can change that outlives its call, snapshot for comparison.

    ``given`` names tensors the caller handed the checker (``"the input `inputs[0]`"``).
    Found by themselves: the tensors, modules and optimizers ``fn`` can reach by name (with
    ``every_global``, instead: every global tensor and module of ``fn``'s notebook), the
    global variables and class attributes it can set, the lists, dicts and sets it can
    change (with ``every_global``, the notebook's), its attributes (``self.calls`` too) and
    ``lru_cache``. With ``deep`` (``check_function``), also what the notebook's functions it
    calls by name reach, the containers inside those containers, its default arguments, the
    attributes of the notebook's classes and plain objects, NumPy arrays, and attributes set
    on modules.

    Example::

        >>> scale = torch.ones(2)
        >>> def fn(x):
        ...     scale.mul_(2)  # a learner's slip: it changes the notebook's tensor
        ...     return x * scale
        >>> def changed_by_a_call():  # locals: no global of the example's own changes
        ...     contained = Contained(fn)
        ...     fn(torch.ones(2))
        ...     changes = contained.changes()
        ...     contained.restore()
        ...     return changes
        >>> changed_by_a_call()
        ['it changed the tensor `scale` (its values)']
        >>> scale
        tensor([1., 1.])
    """

    def __init__(
        self,
        fn: object,
        given: Mapping[str, Tensor] | None = None,
        *,
        every_global: bool = False,
        words: Words = Words(),
        deep: bool = False,
    ) -> None:
        self.words = words
        owners = reached_functions(fn) if deep else []
        self.names = Names(fn, object_spaces(owners, code_owners(fn)))
        self.containers = Containers(fn, every_global=every_global, owners=owners or None)
        self.arrays = Arrays(owners)
        self.module_attributes = ModuleAttributes(owners)
        self.lru_caches = LruCaches(owners, fn)
        reached = _every_global(fn) if every_global else reachable(*code_owners(fn))
        tensors: dict[int, tuple[str, Tensor]] = {}
        modules: dict[int, tuple[str, nn.Module]] = {}
        optimizers: dict[int, tuple[str, torch.optim.Optimizer]] = {}
        for label, item in reached:
            if not label:
                continue  # fn itself
            if isinstance(item, Tensor):
                tensors.setdefault(id(item), (words.reached.format(label=label), item))
            elif isinstance(item, nn.Module):
                modules.setdefault(id(item), (label, item))
            elif isinstance(item, torch.optim.Optimizer):
                optimizers.setdefault(id(item), (label, item))
        for label, tensor in (given or {}).items():
            tensors.setdefault(id(tensor), (label, tensor))
        self.tensors = [(label, s) for label, t in tensors.values() if (s := _taken(t))]
        self.modules = [(label, m, ModelRecord(m)) for label, m in modules.values()]
        self.module_state = ModuleState(m for _, m, _ in self.modules)
        self.optimizers = [(label, o, _cloned(o.state)) for label, o in optimizers.values()]
        self.optimizer_settings = [(o, _settings(o)) for _, o in optimizers.values()]
        owner = getattr(fn, "__func__", fn)  # a bound method's attributes are its function's
        attributes = getattr(owner, "__dict__", None)
        self.attributes = (owner, dict(attributes)) if isinstance(attributes, dict) else None

    def changes(self) -> list[str]:
        """Each change, one sentence, as the learner reads it (``"it changed ..."``)."""
        w = self.words
        found = [w.name.format(label=name) for name in self.names.changes()]
        found += [w.name.format(label=name) for name in self.module_attributes.changed()]
        if w.container:
            found += [
                w.container.format(label=c.label, before=len(c.before), now=len(c.value))
                if len(c.before) != len(c.value)
                else w.items.format(label=c.label, what="its items")
                for c in self.containers.changed()
            ]
            found += [w.items.format(label=a, what="its values") for a in self.arrays.changed()]
            found += [w.items.format(label=c, what="its items") for c in self.lru_caches.changed()]
        for label, state in self.tensors:
            if what := said(state, w):
                found.append(w.tensor.format(label=label, what=", ".join(what)))
        for label, module, record in self.modules:
            if w.module and record.changes(module):
                found.append(w.module.format(label=label))
            if w.mode and record.flags.get("") != module.training:
                mode = "train" if module.training else "eval"
                found.append(w.mode.format(label=label, mode=mode))
        if w.optimizer:
            found += [
                w.optimizer.format(label=label)
                for label, optimizer, kept in self.optimizers
                if not _same_state(_cloned(optimizer.state), kept)
            ]
            for (label, optimizer, _), (_, settings) in zip(
                self.optimizers, self.optimizer_settings, strict=True
            ):
                if what := _settings_changed(_settings(optimizer), settings):
                    found.append(w.settings.format(label=label, what=", ".join(what)))
        if w.attribute and self.attributes is not None:
            fn, before = self.attributes
            owner = getattr(fn, "__name__", "self")  # a callable object's: `self.calls`
            # new, or set again (a counter on a callable object)
            written = [n for n, v in vars(fn).items() if n not in before or before[n] is not v]
            found += [w.attribute.format(owner=owner, name=n) for n in written]
        return found

    def restore(self) -> None:
        """Put everything back as it was when this snapshot was taken."""
        self.names.restore()
        self.containers.restore()
        self.arrays.restore()
        self.module_attributes.restore()
        self.lru_caches.restore()
        for _, state in self.tensors:
            state.restore()
        self.module_state.restore()
        for _, _, record in self.modules:
            record.restore_attributes()
        for _, optimizer, kept in self.optimizers:
            optimizer.state.clear()
            optimizer.state.update(_cloned(kept))  # the kept copy stays as it was
        for optimizer, settings in self.optimizer_settings:
            if len(optimizer.param_groups) == len(settings):
                for group, before in zip(optimizer.param_groups, settings, strict=True):
                    for key in [k for k in group if k != "params" and k not in before]:
                        del group[key]
                    group.update(before)
        if self.attributes is not None:
            fn, before = self.attributes
            for name in [n for n in vars(fn) if n not in before]:
                delattr(fn, name)
            for name, value in before.items():
                if name not in vars(fn) or vars(fn)[name] is not value:
                    setattr(fn, name, value)
