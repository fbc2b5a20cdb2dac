"""``check_regions``, part 1c: what the learner's step leaves behind, beyond the parameters.

A training step changes the parameters, their gradients and the optimizer's state the way
``optimizer.step()`` does, and nothing else: the notebook calls it again and again, so
whatever else it changes accumulates. :class:`Left` snapshots, before one call of the step,
what its code can reach by name (the shared
:class:`~autograd_helpers.checks._contain.contained.Contained`, ``deep``: a global list it
appends the loss to, a dict of counters, the notebook's objects), the attributes of the model
and of the optimizer it was given (``model.last_loss``, ``optimizer.steps_done``), the
optimizer's ``defaults``, and NumPy's and Python's random states (the runner puts those back
without a word); after the call it says each change in a sentence and puts back what was reached
by name. :func:`state_changes` compares the optimizer's state with the one the specified step
leaves (a key of its own, a stray buffer, state for a tensor that is no parameter).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from autograd_helpers.checks._contain.contained import Contained, Words
from autograd_helpers.checks._contain.patched import Patched

__all__ = ["Left", "optimizer_state", "random_changes", "random_states", "state_changes"]

NUMPY_CHANGED = (
    "it changed NumPy's global random state (`np.random.seed(...)`, or a draw such as "
    "`np.random.rand()`)"
)
PYTHON_CHANGED = (
    "it changed Python's random state (`random.seed(...)`, or a draw such as `random.random()`)"
)

WORDS = Words(
    name="it set the global {label}",
    container="it changed {label} (it held {before} items, now {now})",
    items="it changed {label} ({what})",
    tensor="it changed {label} ({what})",
    reached="the notebook's tensor {label}",
    module="it changed the notebook's module {label}",
    optimizer="it changed the state of the notebook's optimizer {label}",
    settings="it changed the notebook's optimizer {label}'s settings ({what})",
    attribute="it set the attribute `{owner}.{name}`",
)


def _plain(value: object, depth: int = 0) -> object:
    """A comparable copy of an attribute's value (tensors, modules and functions by identity,
    containers item by item)."""
    if isinstance(value, dict) and depth < 4:
        return (type(value), {k: _plain(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list | tuple) and depth < 4:
        return (type(value), [_plain(v, depth + 1) for v in value])
    if isinstance(value, int | float | str | bytes | bool | complex | type(None)):
        return value
    try:  # a plain value (a torch.dtype, a set of numbers) compares by equality
        if isinstance(value, set | frozenset | torch.dtype | torch.device):
            return copy.deepcopy(value)
    except Exception:
        pass
    return ("same object", id(value))


def _attributes(owner: object) -> dict[str, object]:
    return {
        k: _plain(v)
        for k, v in vars(owner).items()
        if k not in ("state", "param_groups", "defaults")
    }


def _changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    found = [k for k in after if k not in before]
    for key in (k for k in after if k in before):
        try:
            if bool(after[key] != before[key]):
                found.append(key)
        except Exception:  # values without a plain comparison: unchanged if the same object
            if after[key] is not before[key]:
                found.append(key)
    return found


class Left:
    """One call of the step, snapshot before: :meth:`changes` after it, then :meth:`restore`."""

    def __init__(self, fn: object, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.contained = Contained(fn, words=WORDS, deep=True)
        self.model, self.optimizer = model, optimizer
        self.modules = {name: _attributes(m) for name, m in model.named_modules()}
        self.optimizer_attributes = _attributes(optimizer)
        self.defaults = _plain(optimizer.defaults)
        self.numpy_rng = np.random.get_state()
        self.python_rng = random.getstate()
        self.reseeded: list[str] = []

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Note calls of ``np.random.seed`` and ``random.seed`` (a reseed to the state the
        generator already has changes nothing :meth:`random_changes` can see)."""
        patched = Patched()
        for owner, said in ((np.random, NUMPY_CHANGED), (random, PYTHON_CHANGED)):
            patched.wrap(owner, "seed", functools.partial(self._reseeded, said))
        try:
            yield
        finally:
            patched.restore()

    def _reseeded(self, said: str, *args: object, **kwargs: object) -> None:
        self.reseeded.append(said)

    def random_changes(self) -> list[str]:
        """Call inside the runner's call, before it puts the random states back."""
        found = random_changes((self.numpy_rng, self.python_rng))
        return list(dict.fromkeys([*found, *self.reseeded]))

    def changes(self) -> list[str]:
        found = list(self.contained.changes())
        for name, module in self.model.named_modules():
            where = f"model.{name}" if name else "model"
            for key in _changed(self.modules.get(name, {}), _attributes(module)):
                found.append(f"it set the attribute `{where}.{key}`")
        for key in _changed(self.optimizer_attributes, _attributes(self.optimizer)):
            found.append(f"it set the attribute `optimizer.{key}`")
        if bool(_plain(self.optimizer.defaults) != self.defaults):
            found.append("it changed `optimizer.defaults`")
        return found

    def restore(self) -> None:
        self.contained.restore()


def random_states() -> tuple[Any, Any]:
    """NumPy's global random state and Python's, for :func:`random_changes`."""
    return np.random.get_state(), random.getstate()


def random_changes(before: tuple[Any, Any]) -> list[str]:
    """NumPy's and Python's random states changed since ``before``, in words (the runner
    puts them back without a word: a reseed or a draw is no setting it names)."""
    found = []
    now = np.random.get_state()
    if any(not np.array_equal(a, b) for a, b in zip(now, before[0], strict=True)):
        found.append(NUMPY_CHANGED)
    if random.getstate() != before[1]:
        found.append(PYTHON_CHANGED)
    return found


def optimizer_state(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """The state of each parameter, in the param groups' order (``{}`` for none)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return [dict(optimizer.state.get(p, {})) for p in params]


def _same(a: object, b: object) -> bool:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.shape != b.shape:
            return False
        scale = max(float(b.double().abs().max()) if b.numel() else 0.0, 1e-12)
        return bool((a.double() - b.double()).abs().max() <= 1e-3 * scale) if a.numel() else True
    try:
        return bool(a == b)
    except Exception:
        return a is b


def state_changes(optimizer: torch.optim.Optimizer, want: list[dict[str, Any]]) -> list[str]:
    """How the optimizer's state differs from the specified step's (``want``), in words."""
    params = {id(p) for group in optimizer.param_groups for p in group["params"]}
    found = []
    if any(id(key) not in params for key in optimizer.state):
        found.append("it added optimizer state for a tensor that is not one of its parameters")
    for index, (got, wanted) in enumerate(zip(optimizer_state(optimizer), want, strict=True)):
        for key in sorted(set(got) - set(wanted)):
            found.append(f"it added `{key}` to the optimizer's state of parameter {index}")
        for key in sorted(set(wanted) - set(got)):
            found.append(f"the optimizer's state of parameter {index} lacks `{key}`")
        for key in sorted(k for k in set(got) & set(wanted) if not _same(got[k], wanted[k])):
            found.append(
                f"the optimizer's `{key}` of parameter {index} is not the one its step makes"
            )
    return found[:3]
