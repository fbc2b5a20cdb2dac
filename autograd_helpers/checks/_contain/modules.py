"""The notebook's modules as a learner's call found them: what it changed, said in words.

Part of the checkers' containment (:mod:`.contained`), and the model checks of chapter 05
(``modes._evaluate``, ``modes._freeze``). A :class:`ModelRecord` is taken before the
learner's function runs and compared with the model after it: the train/eval flag of every
submodule, every parameter (the object itself, its values, ``requires_grad``, ``.grad``),
every buffer (running statistics), the hooks, and each module's plain attributes (dropout's
``p``, batch norm's ``momentum``, an attribute the call added). :class:`NotebookModels` keeps the
notebook's own modules that the learner's function can reach by name (a global ``model``
used by mistake) as they were found, and says which changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from autograd_helpers._common.reach import modules_reachable
from autograd_helpers._common.runner import Outcome
from autograd_helpers._common.state import ModuleState
from autograd_helpers._common.tensors import copied, same_values
from autograd_helpers.checks._core.feedback import CheckResult, failed, side_effect_verdict

__all__ = [
    "Called",
    "ModelRecord",
    "NotebookModels",
    "listed",
    "notebook_kept",
    "notebook_verdict",
    "settings_kept",
]

_SHOWN = 6  # names listed in one verdict before "and N more"


def listed(names: Sequence[str]) -> str:
    """``"0.weight, 0.bias"``; a long list is cut: ``"a, b, c, d, e, f and 3 more"``."""
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def _same(tensor: Tensor | None, copy: Tensor | None) -> bool:
    if tensor is None or copy is None:
        return tensor is None and copy is None
    return is_lazy(tensor) or same_values(tensor.detach(), copy)


def _hooks(module: nn.Module) -> int:
    hooks = (
        module._forward_hooks,
        module._forward_pre_hooks,
        module._backward_hooks,
        module._backward_pre_hooks,
    )
    return sum(len(found) for found in hooks)


def _tensor_hooks(tensor: Tensor) -> int:
    # register_hook and register_post_accumulate_grad_hook: both change what backward does.
    hooks = (tensor._backward_hooks, getattr(tensor, "_post_accumulate_grad_hooks", None))
    return sum(len(found or {}) for found in hooks)


_MISSING = object()


def _attributes(module: nn.Module) -> dict[str, object]:
    """A module's plain public attributes (``p``, ``momentum``...), its flag left out."""
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and k != "training"}


def _same_attribute(now: object, before: object) -> bool:
    if now is before:
        return True
    if type(now) is not type(before) or isinstance(now, Tensor):
        return False
    try:
        return bool(now == before)
    except Exception:  # a learner's object whose == raises: not the same
        return False


@dataclass(frozen=True)
class _Parameter:
    tensor: Tensor
    values: Tensor | None
    requires_grad: bool
    grad: Tensor | None


class ModelRecord:
    """A model as it was before the learner's call, to say afterwards what the call changed.

    Example::

        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
        >>> record = ModelRecord(model)
        >>> _ = model.eval()[0].requires_grad_(False)
        >>> record.flags_changed(model), record.requires_grad_changed(model)
        (['', '0', '1'], ['0.weight', '0.bias'])
    """

    def __init__(self, model: nn.Module) -> None:
        self.flags = {name: module.training for name, module in model.named_modules()}
        self.hooks = {name: _hooks(module) for name, module in model.named_modules()}
        self.tensor_hooks = {name: _tensor_hooks(p) for name, p in model.named_parameters()}
        self.parameters = {
            name: _Parameter(p, copied(p), p.requires_grad, copied(p.grad))
            for name, p in model.named_parameters()
        }
        self.buffers = {name: (b, copied(b)) for name, b in model.named_buffers()}
        self.attributes = {
            name: (module, _attributes(module)) for name, module in model.named_modules()
        }

    def flags_changed(self, model: nn.Module) -> list[str]:
        """Submodules (``""`` is the model itself) whose train/eval flag differs now."""
        now = {name: module.training for name, module in model.named_modules()}
        return [name for name, flag in now.items() if self.flags.get(name, flag) != flag]

    def replaced(self, model: nn.Module) -> list[str]:
        """Parameters that are new, gone, or another tensor object than before."""
        now = dict(model.named_parameters())
        gone = [name for name in self.parameters if name not in now]
        other = [n for n, p in now.items() if n not in self.parameters or p is not self.of(n)]
        return gone + other

    def of(self, name: str) -> Tensor:
        return self.parameters[name].tensor

    def _parameters_where(
        self, model: nn.Module, differs: Callable[[Tensor, _Parameter], bool]
    ) -> list[str]:
        """The parameters the model still has by name that ``differs`` from their record."""
        now = dict(model.named_parameters())
        return [n for n, before in self.parameters.items() if n in now and differs(now[n], before)]

    def values_changed(self, model: nn.Module) -> list[str]:
        return self._parameters_where(model, lambda p, before: not _same(p, before.values))

    def requires_grad_changed(self, model: nn.Module) -> list[str]:
        return self._parameters_where(
            model, lambda p, before: p.requires_grad != before.requires_grad
        )

    def grads_changed(self, model: nn.Module) -> list[str]:
        return self._parameters_where(model, lambda p, before: not _same(p.grad, before.grad))

    def buffers_changed(self, model: nn.Module) -> list[str]:
        """Buffers whose values changed, by behaviour: any module's, any kind of statistic."""
        now = dict(model.named_buffers())
        return [
            name
            for name, (_, values) in self.buffers.items()
            if name not in now or not _same(now[name], values)
        ]

    def dtypes_changed(self, model: nn.Module) -> list[str]:
        """Parameters and buffers whose dtype differs now (``model.double()``)."""
        now = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        before = {n: p.values for n, p in self.parameters.items()}
        before |= {n: values for n, (_, values) in self.buffers.items()}
        return [
            name
            for name, was in before.items()
            if was is not None and name in now and now[name].dtype != was.dtype
        ]

    def hooks_added(self, model: nn.Module) -> list[str]:
        """Modules (``"the model"`` itself) and parameters that have more hooks than before."""
        modules = [
            name or "the model"
            for name, module in model.named_modules()
            if _hooks(module) > self.hooks.get(name, 0)
        ]
        return modules + [
            name
            for name, parameter in model.named_parameters()
            if _tensor_hooks(parameter) > self.tensor_hooks.get(name, 0)
        ]

    def attributes_changed(self, model: nn.Module) -> list[str]:
        """Plain attributes set, added or deleted since: ``["3.p", "evaluated"]``."""
        found = []
        for name, module in model.named_modules():
            if name not in self.attributes:
                continue
            before, now = self.attributes[name][1], _attributes(module)
            for key in sorted(before.keys() | now.keys()):
                if not _same_attribute(now.get(key, _MISSING), before.get(key, _MISSING)):
                    found.append(f"{name}.{key}" if name else key)
        return found

    def restore_attributes(self) -> None:
        """Put back every recorded module's plain attributes (added ones removed)."""
        for module, before in self.attributes.values():
            for key in [k for k in _attributes(module) if k not in before]:
                delattr(module, key)
            for key, value in before.items():
                if vars(module).get(key, _MISSING) is not value:
                    object.__setattr__(module, key, value)

    def changes(self, model: nn.Module) -> list[str]:
        """Everything that differs, one phrase per kind: ``"requires_grad of 0.weight"``."""
        found = [
            (self.flags_changed(model), "the train/eval flag of"),
            (self.requires_grad_changed(model), "requires_grad of"),
            (self.replaced(model) + self.values_changed(model), "the values of"),
            (self.grads_changed(model), "the .grad of"),
            (self.buffers_changed(model), "the buffers"),
            (self.hooks_added(model), "hooks on"),
            (self.attributes_changed(model), "the attributes"),
        ]
        return [
            f"{what} {listed([n or 'the model' for n in names])}" for names, what in found if names
        ]


def _name_in(namespace: dict[str, object], module: nn.Module) -> str:
    for name, value in namespace.items():
        if value is module and not name.startswith("_"):
            return f"`{name}`"
    for name, value in namespace.items():
        inside = isinstance(value, nn.Module) and any(s is module for s in value.modules())
        if inside and not name.startswith("_"):
            return f"`{name}`"
    return "a model it reaches by name"


class NotebookModels:
    """The notebook's modules that ``fn`` reaches by name, kept as they were found.

    The modules the checker hands to ``fn`` (``given``) do not count. :meth:`changes` says
    which of the others the call changed, and how; :meth:`restore` puts them back.
    """

    def __init__(self, fn: object, given: Iterable[nn.Module] = ()) -> None:
        ours = {id(sub) for module in given for sub in module.modules()}
        reached = [m for m in modules_reachable(fn) if id(m) not in ours]
        namespace = getattr(fn, "__globals__", {})
        self.models = [(m, _name_in(namespace, m), ModelRecord(m)) for m in reached]
        self.state = ModuleState(m for m, _, _ in self.models)

    def changes(self) -> list[tuple[str, list[str]]]:
        """``(name, what changed)`` for each reached module the call changed."""
        found = [(name, record.changes(module)) for module, name, record in self.models]
        return [(name, what) for name, what in found if what]

    def restore(self) -> None:
        self.state.restore()
        for _, _, record in self.models:
            record.restore_attributes()


def notebook_verdict(label: str, notebook: NotebookModels, given: str) -> CheckResult | None:
    """``changed the notebook's `model` ...``: the learner's code used a global name."""
    changes = notebook.changes()
    notebook.restore()
    if not changes:
        return None
    name, what = changes[0]
    return failed(
        label,
        f"it changed the notebook's {name} ({'; '.join(what)}), not the {given} it was given.",
        f"Use the argument, not a global name: inside the function, work on the {given} "
        "passed in. The checker put the notebook's one back; in your notebook it would stay "
        "changed.",
    )


class Called(Protocol):
    """One call of a learner's function on a model, as chapter 05's checks record it."""

    label: str
    outcome: Outcome
    notebook: NotebookModels


def settings_kept(run: Called) -> CheckResult | None:
    """A global setting (grad mode, the default dtype...) the call left changed."""
    return side_effect_verdict(run.label, "it", run.outcome.side_effects)


def notebook_kept(run: Called) -> CheckResult | None:
    """One of the notebook's own models, reached by name, that the call changed."""
    return notebook_verdict(run.label, run.notebook, "model")
