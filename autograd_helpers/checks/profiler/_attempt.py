"""``check_regions``, part 1a: the learner's step and the specified one, side by side.

Labels change nothing a step computes, so the learner's step must train exactly as the
specified one does: prepare the batch (each sample to mean 0 and standard deviation 1),
``loss = model(batch).square().mean()``, zero the gradients, ``loss.backward()``, one
``optimizer.step()``. :func:`attempt` runs the learner's step once on copies of the
notebook's model, optimizer and samples, and the specified step on other copies; the
gradients are seeded with a marker first, so that a step that forgets to zero them shows.
What it records is an :class:`Attempt` (the optimizer's settings and hooks before and
after: ``_optimizer_changes``), for the checks of ``_step`` to judge. The
notebook's own objects are never handed to the learner's code (the caller puts them back
if the step reaches them by name).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers._common.tensors import same_values
from autograd_helpers._common.validate import require_float_tensor
from autograd_helpers.checks._contain.modules import ModelRecord
from autograd_helpers.checks.profiler._left import Left, optimizer_state, state_changes
from autograd_helpers.checks.profiler._optimizer_changes import (
    group_settings,
    hooks_added,
    settings_changed,
)

__all__ = [
    "MARKER",
    "Attempt",
    "attempt",
    "normalise_each",
    "probe_size",
    "require_step_arguments",
    "trainable",
]

MARKER = 0.5  # what each gradient holds before the step: zeroing it must remove it
SEED = 0  # both steps draw the same random numbers (dropout masks): the caller forks the RNG


def require_step_arguments(model: object, optimizer: object, samples: object) -> None:
    """``check_regions``' arguments from the notebook: a model, its optimizer, a batch."""
    me = "check_regions"
    if not isinstance(model, nn.Module):
        raise TypeError(f"{me}(): model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"{me}(): optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    require_float_tensor(me, "samples", samples)
    assert isinstance(samples, Tensor)
    if samples.dim() < 2 or len(samples) < 2:
        raise ValueError(
            f"{me}(): samples must be a batch of at least two samples (at least 2-d), "
            f"got shape {tuple(samples.shape)}"
        )


def normalise_each(samples: Tensor) -> Tensor:
    """Each sample (a row) to mean 0 and standard deviation 1: the specified preparation.

    Example::

        >>> normalise_each(torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]))
        tensor([[-1.,  0.,  1.],
                [-1.,  0.,  1.]])
    """
    rows = samples.reshape(len(samples), -1)
    rows = (rows - rows.mean(dim=1, keepdim=True)) / rows.std(dim=1, keepdim=True)
    return rows.reshape(samples.shape)


def probe_size(batch: int) -> int:
    """A batch size beyond the notebook's, that divides nothing the example's does."""
    return 37 if batch != 37 else 53


def trainable(model: nn.Module) -> list[Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def _flags(model: nn.Module) -> dict[str, str]:
    """What a training step must leave alone, in words: modes, ``requires_grad``, hooks."""
    found = {}
    for name, module in model.named_modules():
        where = f"`{name}`" if name else "the model"
        found[f"mode {name}"] = f"{where} in {'train' if module.training else 'eval'} mode"
        hooks = len(module._forward_hooks) + len(module._forward_pre_hooks)
        hooks += len(module._backward_hooks) + len(module._backward_pre_hooks)
        found[f"hooks {name}"] = f"{hooks} hook(s) on {where}"
    for name, p in model.named_parameters():
        found[f"grad {name}"] = f"`{name}` {'trainable' if p.requires_grad else 'frozen'}"
    return found


@dataclass
class Attempt:
    """One call of the learner's step on copies, and the specified step beside it."""

    label: str
    where: str  # "" on the notebook's batch, else which probe
    batch: int = 0  # samples in the batch
    outcome: Outcome = field(default_factory=Outcome)
    samples_changed: bool = False
    notebook_changed: bool = False
    flags_changed: list[str] = field(default_factory=list)
    steps_given: int = 0  # calls of the given optimizer's step
    steps_other: int = 0  # of any other optimizer's
    grads: list[Tensor] = field(default_factory=list)  # at the given optimizer's first step
    update: list[Tensor] = field(default_factory=list)  # parameters after minus before
    want_grads: list[Tensor] = field(default_factory=list)
    want_update: list[Tensor] = field(default_factory=list)
    raw_grads: list[Tensor] = field(default_factory=list)  # of the loss on the raw samples
    settings_changed: list[str] = field(default_factory=list)  # "lr of param group 0: ..."
    hooks_added: list[str] = field(default_factory=list)  # "a step post-hook on the optimizer"
    random_changed: bool = False  # torch's random state differs from the specified step's
    left: list[str] = field(default_factory=list)  # what else it changed, in words
    requires_grad_changed: bool = False  # on the samples it was given
    closure: bool = False  # optimizer.step(closure)

    def fail(self, title: str, *details: str) -> tuple[str, ...]:
        return (f"{self.where}{title}" if self.where else title, *details)


@contextmanager
def _watching_steps(
    run: Attempt, given: torch.optim.Optimizer, params: list[Tensor]
) -> Iterator[None]:
    def before_step(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        if optimizer is not given:
            run.steps_other += 1
            return
        run.steps_given += 1
        given_args = [*args][1:] if isinstance(args, tuple) else []  # args[0] is the optimizer
        closures = [
            *given_args,
            (kwargs or {}).get("closure") if isinstance(kwargs, dict) else None,
        ]
        run.closure = run.closure or any(callable(c) for c in closures)
        if run.steps_given == 1:
            run.grads = [
                torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params
            ]

    handle = register_optimizer_step_pre_hook(before_step)
    try:
        yield
    finally:
        handle.remove()


def _specified(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: Tensor
) -> tuple[list[Tensor], list[Tensor], list[dict[str, Any]]]:
    """The gradients at the step, the update and the optimizer's state after it, of the
    specified step on copies."""
    model, optimizer = copy.deepcopy((model, optimizer))
    torch.manual_seed(SEED)  # the learner's step runs from the same seed: the same dropout
    params = trainable(model)
    before = [p.detach().clone() for p in params]
    with torch.enable_grad():
        loss = model(batch).square().mean()
        optimizer.zero_grad()
        loss.backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
    optimizer.step()
    update = [p.detach() - b for p, b in zip(params, before, strict=True)]
    return grads, update, optimizer_state(optimizer)


def attempt(
    fn: Callable[..., object],
    label: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Tensor,
    prepare: Callable[[Tensor], Tensor],
    where: str = "",
) -> Attempt:
    """Run ``fn`` once on copies of ``model``, ``optimizer`` and ``samples`` (:class:`Attempt`)."""
    run = Attempt(label, where, len(samples))
    with torch.no_grad():
        batch = prepare(samples.detach().clone())
    run.want_grads, run.want_update, want_state = _specified(model, optimizer, batch)
    want_random = torch.random.get_rng_state()
    run.raw_grads, _, _ = _specified(model, optimizer, samples.detach().clone())
    notebook = ModelRecord(model)  # never handed over: changed only if reached by name
    mine, given = copy.deepcopy((model, optimizer))
    params = trainable(mine)
    for p in params:
        p.grad = torch.full_like(p, MARKER)
    before = [p.detach().clone() for p in params]
    flags = _flags(mine)
    copied = samples.detach().clone()
    settings = group_settings(given)
    # the checker's own watch is not the learner's hook: counted after it is registered
    with _watching_steps(run, given, params), hooks_added(given) as added:
        torch.manual_seed(SEED)

        left = Left(fn, mine, given)  # what else it could leave changed

        def step(*args: object) -> object:
            with left.watching():
                result = fn(*args)
            run.random_changed = not torch.equal(torch.random.get_rng_state(), want_random)
            run.left = left.random_changes()  # before the runner puts them back
            return result

        try:
            run.outcome = run_learner_code(step, mine, given, copied)
            run.left += left.changes()
            # before the snapshot puts back what the step reached by name (`net`)
            run.notebook_changed = bool(
                notebook.values_changed(model) or notebook.grads_changed(model)
            )
        finally:
            left.restore()
    run.hooks_added = added
    run.settings_changed = settings_changed(settings, group_settings(given))
    run.samples_changed = not same_values(copied, samples)
    run.requires_grad_changed = copied.requires_grad != samples.requires_grad
    if run.outcome.error is None:
        run.left += state_changes(given, want_state)
    after = _flags(mine)
    run.flags_changed = [
        after.get(key, "") for key, said in flags.items() if after.get(key) != said
    ]
    run.update = [p.detach() - b for p, b in zip(params, before, strict=True)]
    return run
