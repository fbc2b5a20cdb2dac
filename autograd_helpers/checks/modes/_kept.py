"""What a chapter 05 call left on the model besides its values and flags: dtypes and hooks.

Used by ``check_evaluate`` and ``check_frozen``. ``model.double()`` (or ``.float()``)
converts every parameter and buffer in place: their values then differ from the record, and
batch norm's running statistics look as if a train-mode pass had moved them. Said as what
it is, a change of dtype, before the values are judged. A hook registered on the model or
on a parameter (``register_forward_hook``, ``register_full_backward_pre_hook``,
``weight.register_hook``) stays there after the call and runs on every later pass.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from autograd_helpers.checks._contain.modules import listed
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks.modes._grads import ModelRun

__all__ = ["dtypes_kept", "hooks_kept"]


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
