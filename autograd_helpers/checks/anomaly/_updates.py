"""Why a training step moved its parameters otherwise than the reference's step did.

Used by :mod:`._step` once a step returned the reference's loss but its update
differs. Two causes look alike in the parameters and need opposite fixes: a gradient that
is itself wrong (a tensor changed behind autograd's back), and the right gradient used by
another update rule (an optimizer such as Adam, a clamp or a clip of the gradient, weight
decay). :func:`update_hint` tells them apart by what explains the whole update (never one
element): no move at all, the earlier steps' gradients still in ``.grad``, the update
applied twice, the wrong sign, an update whose norm is the learning rate whatever the
gradient's (divided by the gradient's norm: a factor that changes from step to step, told
apart from a learning rate with the reference's gradient), a constant factor, every entry
moved by the same size (an update divided by the gradient's own size, as Adam's first step),
entries capped at a bound (a clamp), the update scaled down only where the gradient is large
(a clipped norm), a pull towards 0 (weight decay); by the update rules the step called
(:data:`OTHER_RULES`, recognised by :func:`~autograd_helpers.checks._contain.watch.watching`
under any name); and by the settings of the optimizers it stepped (:func:`optimizer_rules`: SGD
with Nesterov momentum, whose first step is 1 + momentum times the gradient step, looks like a
learning rate).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.optim.optimizer import register_optimizer_step_pre_hook

from autograd_helpers.checks._core.numeric import format_number

__all__ = ["OTHER_RULES", "Update", "optimizer_rules", "update_hint"]

# Update rules other than plain gradient descent, by the function that runs each: a fresh
# `torch.optim.Adam([w])` in the step runs `torch.optim.adam.adam` (AdamW too).
OTHER_RULES = {
    "torch.optim.adam.adam": "`torch.optim.Adam` (or `AdamW`)",
    "torch.optim.adamax.adamax": "`torch.optim.Adamax`",
    "torch.optim.nadam.nadam": "`torch.optim.NAdam`",
    "torch.optim.radam.radam": "`torch.optim.RAdam`",
    "torch.optim.rmsprop.rmsprop": "`torch.optim.RMSprop`",
    "torch.optim.adagrad.adagrad": "`torch.optim.Adagrad`",
    "torch.optim.adadelta.adadelta": "`torch.optim.Adadelta`",
    "torch.optim.rprop.rprop": "`torch.optim.Rprop`",
    "torch.optim.asgd.asgd": "`torch.optim.ASGD`",
    "torch.nn.utils.clip_grad_norm_": "`torch.nn.utils.clip_grad_norm_`",
    "torch.nn.utils.clip_grad_value_": "`torch.nn.utils.clip_grad_value_`",
}
_CLIP_NORM = "torch.nn.utils.clip_grad_norm_"
KEEP_THE_RULE = (
    "Keep the original step's update rule: its fix must compute the same step, whatever the "
    "gradient's size (for `w -= lr * w.grad`, `torch.optim.SGD` without momentum is the "
    "same rule)."
)
WRONG_GRADIENT = (
    "Hint: the loss matched but the update did not, so the gradient you stepped with is "
    "not the one the step means. Was a tensor that backward needs changed behind "
    "autograd's back (through `.data`, or in place under `torch.no_grad()`), or part of the "
    "graph cut off with `.detach()`?"
)


@dataclass(frozen=True)
class Update:
    """One step's update of the trained parameters, and what the reference's was.

    Attributes:
        moved: how each trained parameter moved in the learner's step.
        meant: how it moved in the reference's step.
        before: each trained parameter before the step.
        earlier: the reference's updates at the steps before (which the learner's matched).
        called: the update rules of :data:`OTHER_RULES` the step called, by dotted name.
        large: whether this step runs at the probe where the gradient is large.
    """

    moved: Sequence[Tensor]
    meant: Sequence[Tensor]
    before: Sequence[Tensor]
    earlier: Sequence[Sequence[Tensor]] = ()
    called: Sequence[str] = ()
    large: bool = False
    rules: Sequence[str] = ()
    gradient: Sequence[Tensor] = ()


def _sgd_rule(optimizer: torch.optim.Optimizer) -> str | None:
    """What an ``SGD`` with Nesterov momentum does otherwise than ``w -= lr * w.grad``."""
    if not isinstance(optimizer, torch.optim.SGD):
        return None
    for group in optimizer.param_groups:
        momentum = float(group.get("momentum", 0.0))
        if group.get("nesterov") and momentum > 0:
            return (
                f"`torch.optim.SGD` with momentum={momentum:g} and nesterov=True, whose first "
                f"step is already {format_number(1 + momentum)} times the gradient step "
                "(1 + momentum)"
            )
    return None


@contextmanager
def optimizer_rules() -> Iterator[list[str]]:
    """Within this block, every optimizer step taken with a rule other than plain SGD that
    the numbers alone would blame on the learning rate (SGD with Nesterov momentum), in words.

    Example::

        >>> w = torch.ones(2, requires_grad=True)
        >>> with optimizer_rules() as rules:
        ...     w.grad = torch.ones(2)
        ...     torch.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True).step()
        >>> rules[0][:42]
        '`torch.optim.SGD` with momentum=0.9 and ne'
    """
    rules: list[str] = []

    def note(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        rule = _sgd_rule(optimizer)
        if rule is not None and rule not in rules:
            rules.append(rule)

    handle = register_optimizer_step_pre_hook(note)
    try:
        yield rules
    finally:
        handle.remove()


def _flat(tensors: Sequence[Tensor]) -> Tensor:
    if not tensors:
        return torch.zeros(0, dtype=torch.float64)
    return torch.cat([t.detach().double().reshape(-1) for t in tensors])


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-4, atol=1e-7))


def _scale(got: Tensor, want: Tensor) -> float | None:
    """``s`` when ``got`` is ``s * want`` (the whole update), else ``None``."""
    norm = float((want * want).sum())
    if norm == 0:
        return None
    scale = float((got * want).sum()) / norm
    return scale if _close(got, scale * want) else None


def _same_size_everywhere(got: Tensor, want: Tensor) -> float | None:
    """The common size when every entry moved by it, each in its gradient's direction."""
    moving = want.abs() > 1e-12 * float(want.abs().max())
    if int(moving.sum()) < 2 or not bool((got.sign() == want.sign())[moving].all()):
        return None
    sizes = got.abs()[moving]
    size = float(sizes.mean())
    if size == 0 or float((sizes - size).abs().max()) > 1e-3 * size:
        return None
    return size


def _capped_at(got: Tensor, want: Tensor) -> float | None:
    """The bound when ``got`` is ``want`` with each entry clamped to ``[-c, c]``."""
    bound = float(got.abs().max())
    if bound >= (1 - 1e-3) * float(want.abs().max()):
        return None
    return bound if _close(got, want.clamp(-bound, bound)) else None


def _decay(got: Tensor, want: Tensor, before: Tensor) -> float | None:
    """``d`` when ``got`` is ``want - d * before`` with ``d > 0``: a pull towards 0."""
    norm = float((before * before).sum())
    if norm == 0:
        return None
    extra = got - want
    decay = -float((extra * before).sum()) / norm
    return decay if decay > 0 and _close(extra, -decay * before) else None


def _what_it_shows(update: Update, got: Tensor, want: Tensor) -> str | None:
    """What the numbers show of another update rule, in a sentence; ``None`` if nothing."""
    if (size := _same_size_everywhere(got, want)) is not None:
        return (
            f"every entry of your update moved by the same amount ({format_number(size)}), "
            "in its gradient's direction, however large the gradient: the gradient capped at "
            "a bound (a clamp, `clip_grad_value_`) or divided by its own size (its sign, as "
            "in Adam's first step)"
        )
    if (bound := _capped_at(got, want)) is not None:
        return (
            f"your update is the right one with each entry capped at ±{format_number(bound)}: "
            "a clamp of the gradient (`w.grad.clamp(...)`, `clip_grad_value_`)"
        )
    scale = _scale(got, want)
    if scale is not None and 0 < scale < 1 and (update.large or _CLIP_NORM in update.called):
        return (
            f"your update is {format_number(scale)} times the right one here, where the "
            "gradient is large, and it was right where the gradient was small: the gradient's "
            "norm is capped, as `clip_grad_norm_` caps it"
        )
    if (decay := _decay(got, want, _flat(update.before))) is not None:
        return (
            f"your update is the right one plus {format_number(decay)} times the parameters, "
            "which pulls them towards 0: weight decay"
        )
    return None


def _settled(update: Update, got: Tensor, want: Tensor) -> str | None:
    """The hints the numbers alone settle: no move, accumulation, twice, sign, a factor."""
    if _close(got, torch.zeros_like(got)):
        return (
            "Hint: your step did not change the parameters. Update them in place under "
            "`torch.no_grad()` (`w -= lr * w.grad`): `w = w - ...` only rebinds a local name, "
            "and the caller's tensor stays as it was."
        )
    if update.earlier and _close(got, want + sum(_flat(u) for u in update.earlier)):
        return (
            "Hint: your update is this step's and the earlier steps' together: the gradients "
            "accumulate in `.grad`. Reset them after each update (`w.grad = None`, or "
            "`optimizer.zero_grad()`)."
        )
    scale = _scale(got, want)
    if scale is None or (0 < scale < 1 and (update.large or _CLIP_NORM in update.called)):
        return None  # a factor that depends on the gradient's size: a clipped norm
    if abs(scale - 2) < 1e-3:
        return (
            "Hint: your update is twice the right one: is it applied twice (`w -= ...` and "
            "`optimizer.step()`, or two update lines)? Apply it once."
        )
    if abs(scale + 1) < 1e-3:
        return (
            "Hint: your update goes the wrong way, uphill: subtract the gradient "
            "(`w -= lr * w.grad`), do not add it."
        )
    if (normalised := _normalised(update, got, want)) is not None:
        return normalised
    times = format_number(scale)
    return f"Hint: your update is {times} times the right one: check the learning rate."


def _normalised(update: Update, got: Tensor, want: Tensor) -> str | None:
    """A hint when the update's norm is the learning rate whatever the gradient's: the
    gradient divided by its own norm (a factor that changes from step to step)."""
    gradient = _flat(update.gradient)
    size = float(gradient.norm())
    if not update.gradient or gradient.shape != want.shape or size == 0:
        return None
    rate = -float((want * gradient).sum()) / size**2  # the original's: want = -rate * g
    if rate <= 0 or abs(size - 1) < 1e-3 or abs(float(got.norm()) - rate) > 1e-4 * rate:
        return None
    return (
        f"Hint: your step has norm {format_number(rate)}, the learning rate, whatever the "
        f"gradient (its norm is {format_number(size)} here): did you divide by the "
        "gradient's norm? The original steps by `lr * w.grad`, longer where the gradient is "
        "larger."
    )


def update_hint(update: Update) -> str:
    """Why a training step changed the parameters by ``update.moved`` rather than by
    ``update.meant``: one line starting with ``"Hint: "``.

    Example::

        >>> meant = [torch.tensor([-0.3, 0.01, 0.2])]
        >>> capped = [meant[0].clamp(-0.1, 0.1)]
        >>> print(update_hint(Update(capped, meant, [torch.ones(3)]))[:80])
        Hint: another update rule than the original's: your update is the right one with
    """
    got, want = _flat(update.moved), _flat(update.meant)
    if update.rules:  # read from the optimizer's own settings: no guess from the numbers
        return f"Hint: your step calls {update.rules[0]}, another update rule. {KEEP_THE_RULE}"
    if (settled := _settled(update, got, want)) is not None:
        return settled
    shows = _what_it_shows(update, got, want)
    rule = next((OTHER_RULES[name] for name in update.called if name in OTHER_RULES), None)
    if rule is not None:
        seen = f": {shows}" if shows else ""
        return f"Hint: your step calls {rule}, another update rule{seen}. {KEEP_THE_RULE}"
    if shows is not None:
        return f"Hint: another update rule than the original's: {shows}. {KEEP_THE_RULE}"
    return WRONG_GRADIENT
