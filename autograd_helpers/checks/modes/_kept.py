"""What a chapter 05 call left on the model besides its values and flags: dtypes, hooks,
attributes, and what its modules hold.

Used by ``check_evaluate`` and ``check_frozen``. ``model.double()`` (or ``.float()``)
converts every parameter and buffer in place: their values then differ from the record, and
batch norm's running statistics look as if a train-mode pass had moved them. Said as what
it is, a change of dtype, before the values are judged. A hook registered on the model or
on a parameter (``register_forward_hook``, ``register_full_backward_pre_hook``,
``weight.register_hook``) stays there after the call and runs on every later pass. An
attribute set on a module (dropout's ``p``, ``model.evaluated = True``) changes what later
passes compute or is read by nothing, and a buffer, parameter, submodule or private attribute
added or removed (:class:`Layout`) changes the model for good.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from torch import nn

from autograd_helpers.checks._contain.modules import ModelRecord, listed
from autograd_helpers.checks._core.feedback import CheckResult, failed
from autograd_helpers.checks.modes._grads import ModelRun

__all__ = [
    "Layout",
    "Recorded",
    "attributes_kept",
    "dtypes_kept",
    "hooks_kept",
    "layout_kept",
]


def _dtypes(model: nn.Module) -> str:
    """``"float64"``: the dtypes the model's parameters have now."""
    found = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()})
    return ", ".join(found)


def dtypes_kept(doing: str) -> Callable[[ModelRun], CheckResult | None]:
    """A check: a verdict when the call changed the dtype of the model's parameters or
    buffers (``doing``: ``"evaluating"``, how the verdict names what the function does)."""

    def check(run: ModelRun) -> CheckResult | None:
        changed = run.record.dtypes_changed(run.model)
        if not changed:
            return None
        return run.fail(
            f"it changed the dtype of the model's parameters and buffers ({listed(changed)}, "
            f"now {_dtypes(run.model)}): {doing} leaves the model as it found it.",
            "`model.double()` and `model.float()` convert the model itself, in place, for "
            "every later cell (and an optimizer built before keeps stepping the old "
            "tensors). Compute in the model's own dtype, or convert a copy "
            "(`copy.deepcopy(model).double()`).",
        )

    check.__name__ = "_dtypes_kept"
    return check


def hooks_kept(doing: str) -> Callable[[ModelRun], CheckResult | None]:
    """A check: a verdict when the call left hooks on the model's modules or parameters."""

    def check(run: ModelRun) -> CheckResult | None:
        hooks = run.record.hooks_added(run.model)
        if not hooks:
            return None
        return run.fail(
            f"it left hooks on {listed(hooks)}: they would run on every later forward or "
            f"backward pass, and {doing} leaves the model as it found it.",
            "Remove a hook you add (`handle = module.register_forward_hook(...)`, then "
            "`handle.remove()`, in a `finally:`), or add none.",
        )

    check.__name__ = "_hooks_kept"
    return check


class Recorded(Protocol):
    """One call of a learner's function on a model recorded before the call."""

    @property
    def label(self) -> str: ...

    @property
    def record(self) -> ModelRecord: ...

    @property
    def model(self) -> nn.Module: ...


def attributes_kept(doing: str) -> Callable[[Recorded], CheckResult | None]:
    """A check: a verdict when the call set, added or deleted plain attributes of the model's
    modules (``doing``: ``"evaluating"``, how the verdict names what the function does)."""

    def check(run: Recorded) -> CheckResult | None:
        changed = run.record.attributes_changed(run.model)
        if not changed:
            return None
        return failed(
            run.label,
            f"it changed attributes of the model's modules ({listed(changed)}): {doing} "
            "leaves every module's settings as they were.",
            "Those attributes decide what later forward passes compute (dropout's `p`, batch "
            "norm's `momentum` and `eps`), and an attribute a module does not know (such as "
            "`model.evaluated = True`) is read by nothing. Leave the modules' attributes alone.",
        )

    check.__name__ = "_attributes_kept"
    return check


def _layout(module: nn.Module) -> tuple[set[str], set[str], set[str], set[str]]:
    return (
        set(vars(module)),
        set(module._buffers),
        set(module._parameters),
        set(module._modules),
    )


class Layout:
    """Each module's attribute names (private ones too), buffers, parameters and submodules,
    as they were: a call that adds or removes one (``model._evaluated = True``,
    ``model.register_buffer("n_evals", ...)``) changed the model for good."""

    def __init__(self, model: nn.Module) -> None:
        self.before = {name: _layout(m) for name, m in model.named_modules()}

    def changed(self, model: nn.Module) -> list[str]:
        """``["`_evaluated` (an attribute)", "`n_evals` (a buffer)"]``: added or removed."""
        kinds = ("an attribute", "a buffer", "a parameter", "a submodule")
        found: list[str] = []
        for name, module in model.named_modules():
            if name not in self.before:
                continue
            seen: set[str] = set()
            for kind, now, was in zip(kinds, _layout(module), self.before[name], strict=True):
                for key in sorted(now ^ was):
                    if key in seen:
                        continue
                    seen.add(key)
                    where = f"{name}.{key}" if name else key
                    verb = "added" if key in now else "removed"
                    found.append(f"`{where}` ({kind}, {verb})")
        return found


class Laid(Protocol):
    """One call of a learner's function on a model whose layout was recorded before."""

    @property
    def label(self) -> str: ...

    @property
    def layout(self) -> Layout: ...

    @property
    def model(self) -> nn.Module: ...


def layout_kept(doing: str) -> Callable[[Any], CheckResult | None]:
    """A check: a verdict when the call added or removed attributes (private ones too),
    buffers, parameters or submodules of the model's modules."""

    def check(run: Laid) -> CheckResult | None:
        changed = run.layout.changed(run.model)
        if not changed:
            return None
        return failed(
            run.label,
            f"it changed what the model's modules hold ({', '.join(changed)}): {doing} "
            "leaves the model as it found it.",
            "A buffer registered on the model is saved in its `state_dict` and moves with "
            "`.to()`, and an attribute, private (`_evaluated`) or not, stays on the model "
            "for every later cell: keep counters and flags outside the model, or leave "
            "them out.",
        )

    check.__name__ = "_layout_kept"
    return check
