"""The gradients a model carries in the middle of training, and what a learner's call did to them.

``check_evaluate`` and ``check_frozen`` hand the learner models that already hold a ``.grad``
on every parameter (:func:`with_gradients`), as a model between two training steps does: on a
model without gradients ``model.zero_grad()`` changes nothing, and the chapter's trap (a zero
gradient kept on a frozen layer still moves it under momentum and weight decay) never shows.
:func:`grad_changes` sorts what the call did to each ``.grad`` it found: cleared (``None``
now), zeroed, or written otherwise (a backward pass, an assignment); :func:`evaluation_grads_kept`
and :func:`freezing_grads_kept` judge that for each exercise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch
from torch import nn

from autograd_helpers.checks._contain.modules import ModelRecord, listed
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.numeric import format_number

__all__ = [
    "GradChanges",
    "ModelRun",
    "evaluation_grads_kept",
    "freezing_grads_kept",
    "freezing_note",
    "grad_changes",
    "with_gradients",
]

_Model = TypeVar("_Model", bound=nn.Module)


def with_gradients(model: _Model, seed: int = 0) -> _Model:
    """Give every parameter a nonzero ``.grad`` of its dtype, drawn from ``seed``; ``model``."""
    generator = torch.Generator().manual_seed(seed)
    for parameter in model.parameters():
        drawn = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
        parameter.grad = (drawn + drawn.sign()).to(parameter.dtype)  # |g| >= 1: never zero
    return model


@dataclass(frozen=True)
class GradChanges:
    """The parameters whose ``.grad`` a call changed, by how (names as the model gives them)."""

    cleared: list[str]  # a gradient before, None after (``zero_grad()``, ``p.grad = None``)
    zeroed: list[str]  # all zeros after (``zero_grad(set_to_none=False)``)
    written: list[str]  # any other change (a backward pass, an assignment)

    def __bool__(self) -> bool:
        return bool(self.cleared or self.zeroed or self.written)


def grad_changes(record: ModelRecord, model: nn.Module) -> GradChanges:
    """What happened to each parameter's ``.grad`` since ``record`` was taken."""
    now = dict(model.named_parameters())
    cleared, zeroed, written = [], [], []
    for name in record.grads_changed(model):
        after = now[name].grad
        if after is None:
            cleared.append(name)
        elif _all_zero(after):
            zeroed.append(name)
        else:
            written.append(name)
    return GradChanges(cleared, zeroed, written)


def _all_zero(grad: torch.Tensor) -> bool:
    try:  # a learner's .grad may be sparse, or of a kind `any()` refuses: then not zeros
        dense = grad.detach() if grad.layout == torch.strided else grad.detach().to_dense()
        return not bool(dense.any())
    except Exception:
        return False


class ModelRun(Protocol):
    """A learner's call on a model, as both chapter 05 attempts record it."""

    @property
    def record(self) -> ModelRecord: ...
    @property
    def model(self) -> nn.Module: ...
    def fail(self, title: str, *details: str) -> CheckResult: ...


def _flat(grads: list[torch.Tensor | None]) -> torch.Tensor | None:
    if any(g is None or g.layout != torch.strided for g in grads):
        return None
    return torch.cat([g.detach().double().reshape(-1) for g in grads if g is not None])


def _clipped(record: ModelRecord, model: nn.Module, names: list[str]) -> str | None:
    """How the gradients ``names`` were clipped: all scaled down by one factor (a clipped
    norm) or each entry capped at a bound (clipped values); ``None`` when neither."""
    now = dict(model.named_parameters())
    before = _flat([record.parameters[name].grad for name in names])
    after = _flat([now[name].grad for name in names])
    if before is None or after is None or before.shape != after.shape:
        return None
    norm = float((before * before).sum())
    scale = float((after * before).sum()) / norm if norm else 0.0
    if 0 < scale < 1 and torch.allclose(after, scale * before, rtol=1e-5, atol=1e-7):
        return f"scaled them all by {format_number(scale)}, as `clip_grad_norm_` does"
    bound = float(after.abs().max()) if after.numel() else 0.0
    capped = before.clamp(-bound, bound)
    if 0 < bound < float(before.abs().max()) and torch.allclose(after, capped, atol=1e-7):
        return f"capped each entry at ±{format_number(bound)}, as `clip_grad_value_` does"
    return None


def evaluation_grads_kept(run: ModelRun) -> CheckResult | None:
    """Evaluating leaves every gradient the model came with as it was."""
    changes = grad_changes(run.record, run.model)
    if not changes:
        return None
    clipped = _clipped(run.record, run.model, changes.written) if changes.written else None
    if clipped is not None:
        return run.fail(
            f"it changed the `.grad` of {listed(changes.written)}: it {clipped}. Those are "
            "the gradients the model came with, as a model in the middle of training has "
            "them, and evaluating must leave them alone.",
            "Clip in the training step, between `backward()` and `optimizer.step()`, not in "
            "evaluation; `torch.inference_mode()` keeps the evaluation from adding any.",
        )
    if changes.written:
        return run.fail(
            f"it left gradients in the `.grad` of {listed(changes.written)}: evaluation runs "
            "no backward pass.",
            "Compute the losses inside `torch.inference_mode()` and call no `backward()`.",
        )
    how = "cleared" if changes.cleared else "zeroed"
    return run.fail(
        f"it {how} the `.grad` of {listed(changes.cleared or changes.zeroed)}: the model "
        "came with gradients, as a model in the middle of training has them, and evaluating "
        "threw them away.",
        "Evaluation needs no gradient and must not touch them: a training loop that "
        "evaluates between `backward()` and `optimizer.step()`, or while it accumulates "
        "gradients over several batches, would lose them. Leave `.grad` alone (no "
        "`zero_grad()`); `torch.inference_mode()` keeps the evaluation from adding any.",
    )


_MOMENTUM = (
    "A frozen parameter's `.grad` should be `None`: an optimizer skips it then, while a "
    "zero `.grad` still lets momentum and weight decay move it."
)


def freezing_grads_kept(run: ModelRun, changes: GradChanges, last: list[str]) -> CheckResult | None:
    """Freezing writes no gradient; clearing the frozen layers' stale ones is allowed."""
    if changes.zeroed:
        return run.fail(
            f"it set the `.grad` of {listed(changes.zeroed)} to zeros: a zero gradient kept "
            "on a frozen layer still moves it (momentum goes on with the velocity it "
            "gathered, weight decay pulls the weight towards zero, Adam keeps stepping).",
            f"{_MOMENTUM} `zero_grad(set_to_none=False)` keeps a zero; `zero_grad()` and "
            "`parameter.grad = None` clear it. Better still, only switch `requires_grad` off "
            "and leave the gradients to the training loop.",
        )
    if changes.written:
        return run.fail(
            f"it set the `.grad` of {listed(changes.written)}: freezing decides which "
            "parameters get a gradient, and writes none itself.",
            f"{_MOMENTUM} Only switch `requires_grad` off.",
        )
    learning = [name for name in changes.cleared if name in last]
    if learning:
        return run.fail(
            f"it cleared the `.grad` of the last layer ({listed(learning)}), the one that "
            "goes on learning: a gradient the training loop gathered for its next step (over "
            "several batches, say) is lost.",
            "Leave the last layer's gradient to the training loop's `optimizer.zero_grad()`. "
            "Clearing the frozen layers' own (`parameter.grad = None`) is fine.",
        )
    return None


def freezing_note(changes: GradChanges | None) -> str | None:
    """A note when freezing also cleared the frozen layers' gradients (right, not needed)."""
    cleared = changes.cleared if changes is not None else []
    if not cleared:
        return None
    return (
        f"Note: it also cleared the `.grad` of the frozen {listed(cleared)}. That is right: an "
        "optimizer skips a parameter whose `.grad` is `None`, even with momentum or weight "
        "decay; the training loop's next `optimizer.zero_grad()` would clear them as well."
    )
