"""The template a checker of a new kind starts from (CONTRIBUTING.md, "Write a checker of a
new kind"). The exercise: a context manager ``frozen(module)`` that switches ``requires_grad``
off for the module's parameters inside the ``with`` block and puts each parameter's own flag
back after it, also when the block raises. Copy it into ``autograd_helpers/checks/<chapter>/``;
``tests/checks/test_template_checker.py`` keeps it working.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.contained import Contained, Words
from autograd_helpers.checks._contain.modules import ModelRecord, listed
from autograd_helpers.checks._core import feedback as say
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.problems import label_of

__all__ = ["check_frozen_context"]

# How the containment says each change (its defaults say nothing of a list appended to).
WORDS = Words(container="it changed {label} (it held {before} items, now {now})")


class _InsideBlockError(Exception):
    """What the checker raises inside the block: it must come out of the block."""


@dataclass(frozen=True)
class Case:
    description: str
    frozen_before: tuple[int, ...] = ()  # layers frozen before the block stay frozen after it
    raises: bool = False  # the block raises an error


CASES = (  # the exercise's example first, then the probes beyond it, as data
    Case("a two-layer network"),
    Case("a network whose first layer was frozen before the block", frozen_before=(0,)),
    Case("a block that raises an error", raises=True),
)


@dataclass
class Attempt:
    """The learner's ``frozen`` used on one case's model, and what the checker saw."""

    case: Case
    label: str
    model: nn.Module
    record: ModelRecord  # the model before the block
    outside: Contained  # what the learner's code reaches by name: judged, then put back
    outcome: Outcome = field(default_factory=Outcome)
    returned: object = None  # what `frozen(model)` returned
    inside: dict[str, bool] = field(default_factory=dict)  # requires_grad in the block
    grad_mode_inside: bool = True

    def fail(self, title: str, *details: str) -> CheckResult:
        return say.failed(self.label, f"with {self.case.description}, {title}", *details)


def _use(frozen: Callable[[nn.Module], Any], run: Attempt) -> None:
    """What a learner's cell does with ``frozen``; called through the runner only."""
    run.returned = manager = frozen(run.model)
    if hasattr(manager, "__enter__") and hasattr(manager, "__exit__"):
        with manager:
            run.inside = {name: p.requires_grad for name, p in run.model.named_parameters()}
            run.grad_mode_inside = torch.is_grad_enabled()
            if run.case.raises:
                raise _InsideBlockError("the checker's error inside the block")


def attempt(frozen: Callable[[nn.Module], Any], case: Case, label: str) -> Attempt:
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # the notebook's RNG unmoved
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        model(torch.ones(2, 3)).sum().backward()  # a .grad on each, as in the middle of training
    for index in case.frozen_before:
        model[index].requires_grad_(False)
    # unwrap: @contextmanager's wrapper has contextlib's globals, not the notebook's
    outside = Contained(inspect.unwrap(frozen), words=WORDS, deep=True)
    run = Attempt(case, label, model, ModelRecord(model), outside)
    run.outcome = run_learner_code(_use, frozen, run)
    return run


# --- the named checks, in order: the first that finds a problem gives the verdict ----------


def _ran(run: Attempt) -> CheckResult | None:
    error = run.outcome.error
    if error is None and not run.inside:  # the block never ran
        return run.fail(
            f"`{run.label}(model)` returned {type(run.returned).__name__}, not a context manager.",
            "Decorate it with `@contextlib.contextmanager` and `yield` where the block runs, "
            "or write a class with `__enter__` and `__exit__`.",
        )
    if run.case.raises and error is None:
        return run.fail(
            "the error raised inside the block did not come out of it.",
            "Swallowed, it hides every bug in the block: restore in a `finally:`, catch nothing.",
        )
    if error is None or isinstance(error.exception, _InsideBlockError):
        return say.side_effect_verdict(run.label, "the block", run.outcome.side_effects)
    return say.raised_verdict(run.label, f"using it with {run.case.description}", run.outcome)


def _frozen_inside(run: Attempt) -> CheckResult | None:
    if not (learning := [name for name, flag in run.inside.items() if flag]):
        return None
    hint = (
        "Hint: `torch.no_grad()` stops every graph in the block, not this module's learning: "
        "freeze the parameters themselves, `p.requires_grad_(False)`."
        if not run.grad_mode_inside
        else "Hint: `module.parameters()` finds every parameter, nested layers' too."
    )
    return run.fail(f"inside the block {listed(learning)} still require grad.", hint)


def _flags_restored(run: Attempt) -> CheckResult | None:
    if not (changed := run.record.requires_grad_changed(run.model)):
        return None
    return run.fail(
        f"after the block requires_grad of {listed(changed)} is not as it was before.",
        "Put the flags back in a `finally:` (or `__exit__`): it runs when the block raises."
        if run.case.raises
        else "Keep each parameter's own flag and put that back: frozen before, frozen after.",
    )


def _nothing_else_changed(run: Attempt) -> CheckResult | None:
    if changes := run.record.changes(run.model):  # requires_grad was judged above
        return run.fail(
            f"it changed {'; '.join(changes)}.", "Freezing switches requires_grad only."
        )
    if changes := run.outside.changes():
        title = "it changed something outside the module that outlives the block."
        return say.lasting_change(run.label, title, changes, "every later cell that reads it")
    return None


CHECKS = (_ran, _frozen_inside, _flags_restored, _nothing_else_changed)


def check_frozen_context(frozen: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's context manager ``frozen(module)`` on each of :data:`CASES`.

    Example::

        >>> print(check_frozen_context(...).message)  # the untouched stub
        📝 your function: not implemented yet.
           Replace the `...` with your code.
    """
    label = label_of(frozen, name, "check_frozen_context")
    if (problem := say.callable_verdict(label, frozen)) is not None:
        return problem
    assert callable(frozen)
    for case in CASES:
        run = attempt(frozen, case, label)
        try:
            if (verdict := say.first_found(CHECKS, run)) is not None:
                return verdict
        finally:
            run.outside.restore()
    tried = "; ".join(case.description for case in CASES)
    title = f"{label} passed: frozen inside the block, each flag put back after it."
    return CheckResult("passed", title, (f"Tried with {tried}.",))
