"""What a chapter 05 learner's call changed beyond the model it was given, said in words.

Used by ``check_evaluate`` and ``check_frozen``. Besides the model the checker hands over
(judged by :class:`~autograd_helpers.checks._contain.modules.ModelRecord`), a learner's function
can reach the notebook by name: a global list it appends each loss to, a global variable it sets, an
optimizer whose learning rate it lowers "for the frozen layers", a tensor, an attribute on
itself. :func:`contained` snapshots all of it
(:class:`~autograd_helpers.checks._contain.contained.Contained`), and :func:`outside_kept` turns
what changed into a verdict of its own, in plain words.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import torch

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.contained import (
    Contained,
    Words,
    _settings,  # the containment's own reading of param groups
    _settings_changed,
)
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.names import Containers
from autograd_helpers.checks._contain.reach import reached_functions
from autograd_helpers.checks._core.feedback import CheckResult, lasting_change

__all__ = [
    "WORDS",
    "Kept",
    "Reached",
    "contained_call",
    "global_calls_kept",
    "outside_kept",
]

WORDS = Words(
    name="it set {label}",
    container="it changed {label} (it held {before} items, now {now})",
    tensor="it changed {label} ({what})",
    reached="the notebook's tensor {label}",
    module="",  # the notebook's modules: ``notebook_kept`` names them first, in more detail
    optimizer="it changed the state of the optimizer {label}",
    settings="it changed the optimizer {label}'s settings ({what})",
    attribute="it set the attribute `{owner}.{name}`",
)


class Reached(Protocol):
    """One call of a learner's function, with what it changed outside the model."""

    @property
    def label(self) -> str: ...

    @property
    def outside(self) -> Sequence[str]: ...


class _Scan:
    """The kernel's optimizers, found once per checker call (a gc scan takes ~0.1 s)."""

    active = False
    found: list[torch.optim.Optimizer] | None = None


def _live_optimizers() -> list[torch.optim.Optimizer]:
    if _Scan.found is not None:
        return list(_Scan.found)
    # type(o), not isinstance: some objects warn when their __class__ is read (torch's
    # deprecated torch.distributed.reduce_op)
    found = [o for o in gc.get_objects() if issubclass(type(o), torch.optim.Optimizer)]
    if _Scan.active:
        _Scan.found = found
    return found


@contextmanager
def one_optimizer_scan() -> Iterator[None]:
    """Within this block every call finds the kernel's optimizers by one gc scan."""
    _Scan.active, _Scan.found = True, None
    try:
        yield
    finally:
        _Scan.active, _Scan.found = False, None


class Optimizers:
    """Every optimizer alive in the kernel (a learner's code can reach one by ``gc``, not
    only by name): its param groups' settings, to say what changed and put them back."""

    def __init__(self, fn: object, known: Sequence[torch.optim.Optimizer]) -> None:
        space = getattr(fn, "__globals__", None)
        names = (
            {id(v): n for n, v in space.items() if isinstance(v, torch.optim.Optimizer)}
            if isinstance(space, dict)
            else {}
        )
        skip = {id(o) for o in known}
        found = [o for o in _live_optimizers() if id(o) not in skip]
        self.kept = [
            (
                f"`{names[id(o)]}`" if id(o) in names else f"`{type(o).__name__}`",
                o,
                _settings(o),
            )
            for o in found
        ]

    def changes(self) -> list[str]:
        found = []
        for label, optimizer, settings in self.kept:
            if what := _settings_changed(_settings(optimizer), settings):
                found.append(WORDS.settings.format(label=label, what=", ".join(what)))
        return found

    def restore(self) -> None:
        for _, optimizer, settings in self.kept:
            if len(optimizer.param_groups) != len(settings):
                continue
            for group, before in zip(optimizer.param_groups, settings, strict=True):
                for key in [k for k in group if k != "params" and k not in before]:
                    del group[key]
                group.update(before)


class Kept:
    """What one call could change outside the model, snapshot: ``restore()`` puts it back."""

    def __init__(self, contained: Contained, optimizers: Optimizers, said: list[str]) -> None:
        self.contained, self.optimizers = contained, optimizers
        self.global_calls = said  # a reseed, torch.set_num_threads: judged after the numbers

    def restore(self) -> None:
        self.contained.restore()
        self.optimizers.restore()


def contained_call(fn: object, *args: object) -> tuple[Outcome, list[str], Kept]:
    """Call ``fn(*args)`` through the runner: its outcome, what it changed outside the model,
    in words, and the snapshot, whose ``restore()`` the caller calls once the call is judged
    (the notebook's models are judged in more detail by ``notebook_kept`` first).

    Outside the model: what ``fn`` and the helpers it calls reach
    (:class:`~autograd_helpers.checks._contain.contained.Contained`, ``deep``: default
    arguments and containers inside containers too), every list, dict and set of the notebook
    (one changed through an alias too), every optimizer's settings (one found through ``gc``
    too), and a reseed of torch's generator
    (:class:`~autograd_helpers.checks._contain.global_calls.GlobalCalls`: the checker seeds
    before the call, so the state alone cannot tell).
    """
    contained = Contained(fn, words=WORDS, deep=True)
    contained.containers = Containers(fn, every_global=True, owners=reached_functions(fn))
    optimizers = Optimizers(fn, [o for _, o, _ in contained.optimizers])
    calls = GlobalCalls(draws=False)
    outcome = run_learner_code(calls.around(fn), *args)  # type: ignore[arg-type]
    changes = contained.changes() + optimizers.changes()
    said = calls.said([*changes, *outcome.side_effects])
    return outcome, changes, Kept(contained, optimizers, said)


def outside_kept(run: Reached) -> CheckResult | None:
    """The first thing outside the model that the call left changed, as a verdict."""
    if not run.outside:
        return None
    return lasting_change(
        run.label,
        "it changed something outside the model that outlives the call.",
        run.outside,
        "every later call and cell that reads it",
    )


class Called(Protocol):
    """One call of a learner's function, with its snapshot (:class:`Kept`)."""

    @property
    def label(self) -> str: ...

    @property
    def contained(self) -> Kept | None: ...


def global_calls_kept(run: Called) -> CheckResult | None:
    """A reseed of torch's generator (or ``torch.set_num_threads``) as a verdict: judged
    after the numbers, so that a loop's main mistake is said first."""
    if run.contained is None or not run.contained.global_calls:
        return None
    return lasting_change(
        run.label,
        "it changed something outside the model that outlives the call.",
        run.contained.global_calls,
        "every later call and cell that reads it",
    )
