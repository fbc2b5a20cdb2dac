"""Run a learner's function over a table of problems, then a table of named checks on each.

Used by chapter 02's checkers (the Jacobian loop and the Hessian-vector product), and for
:func:`label_of` by later chapters'. A :class:`Problem` is data: a function, a point, the
extra arguments, and the answer the checker trusts. An :class:`Exercise` says which
functions to watch for, what to measure, and which checks judge a :class:`Run` (one call on
one problem), in order: the first :class:`Finding` of a failing check is the verdict, the
notes of a pass are collected. Every call into the learner's code goes through
:func:`~autograd_helpers._common.runner.run_learner_code`, on copies, with the notebook
snapshotted before and put back after
(:class:`~autograd_helpers.checks._contain.contained.Contained`, in this chapter's :data:`WORDS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers._common.tensors import TensorState
from autograd_helpers.checks._contain.contained import Contained, Words, said
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.nan_patching import nan_patching
from autograd_helpers.checks._contain.saved_hooks_switch import Settings
from autograd_helpers.checks._contain.watch import Usage, watching
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    callable_verdict,
    failed,
    from_learner_error,
)

__all__ = [
    "WORDS",
    "Check",
    "Exercise",
    "Finding",
    "Problem",
    "Run",
    "draws",
    "label_of",
    "run_exercise",
]

# How chapter 02's checkers say what a call changed in the notebook, and in its arguments.
WORDS = Words(
    container="it changed {label} (it held {before} items, now {now})",
    tensor="it changed the notebook's tensor {label} ({what})",
    reached="{label}",
    module="",
    mode="it switched the module {label} to {mode} mode",
    optimizer="",
    attribute="it set the attribute `{owner}.{name}`",
    requires_grad="requires_grad (now {now})",
    grad="its .grad",
    hooks="its hooks",
)


@dataclass(frozen=True)
class Problem:
    """One test point: what it is, ``f``, ``x``, extra arguments and the trusted answer.

    Attributes:
        description: how the feedback names it, e.g. ``"tanh(W @ x), x of shape (3,)"``.
        probes: what it probes, for the pass message (``"a non-square Jacobian"``).
        f: the function the learner's code differentiates (it works in any float dtype).
        x: the point; the learner's code gets a copy.
        extra: further arguments after ``x`` (``v`` for a Hessian-vector product), copied.
        expected: the answer, computed in float64 by PyTorch's own functions.
        honest_size: elements of the largest Hessian-sized tensor the exercise's own
            solution computes on this problem (0 when it computes none, or not measured).
    """

    description: str
    probes: str
    f: Callable[[Tensor], Tensor]
    x: Tensor
    extra: tuple[Tensor, ...] = ()
    expected: Tensor = field(default_factory=lambda: torch.empty(0))
    honest_size: int = 0

    @property
    def size(self) -> int:
        """How many numbers ``x`` holds (``n``)."""
        return self.x.numel()


@dataclass(frozen=True)
class Run:
    """One call of the learner's function on one problem, and what was seen."""

    problem: Problem
    outcome: Outcome
    usage: Usage
    argument_changes: tuple[str, ...]  # "x: requires_grad (now True)", ...
    notebook_changes: tuple[str, ...]  # "it changed the global list `rows` ...", ...
    # beyond the runner's side effects: a reseed, random numbers drawn, saved-tensor hooks
    settings_changes: tuple[str, ...] = ()
    nan_patched: str = ""  # "calls `nan_to_num`", "replaces NaN (`isnan`)" or ""

    @property
    def value(self) -> object:
        return self.outcome.value


@dataclass(frozen=True)
class Finding:
    """What a check found: a failure's title (one sentence) and further lines."""

    title: str
    details: tuple[str, ...] = ()


Check = Callable[[Run], Finding | None]


@dataclass(frozen=True)
class Exercise:
    """How to run and judge one exercise's function.

    Attributes:
        watched: dotted names of functions to record (the shortcuts and the alternatives).
        checks: the failing checks, in order; the first finding is the verdict.
        notes: checks whose findings are notes on a pass.
        argument_names: what the learner calls ``x`` and the extra arguments.
        measure_size: whether to record the largest tensor created (costs a little).
    """

    watched: tuple[str, ...]
    checks: tuple[Check, ...]
    notes: tuple[Check, ...] = ()
    argument_names: tuple[str, ...] = ("x",)
    measure_size: bool = False


def draws(seed: int) -> Callable[..., Tensor]:
    """``randn(*shape)``: float64 draws from a generator of the table's own ``seed``, the
    same problems at every check, whatever the notebook's random state.

    Example::

        >>> randn = draws(2)
        >>> torch.equal(randn(3), draws(2)(3)), randn(2, 3).shape
        (True, torch.Size([2, 3]))
    """
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> Tensor:
        return torch.randn(shape, generator=generator, dtype=torch.float64)

    return randn


def label_of(fn: object, name: str | None, caller: str) -> str:
    """``name`` if given (a str), else the function's own name, for the feedback."""
    if name is not None:
        if not isinstance(name, str):
            raise TypeError(f"{caller}(): name must be a str, got {type(name).__name__}")
        return name
    found = getattr(fn, "__name__", None)
    return found if isinstance(found, str) and found != "<lambda>" else "your function"


def _attempt(
    fn: Callable[..., object], problem: Problem, exercise: Exercise, notebook: Contained
) -> Run:
    x = problem.x.clone()
    extra = tuple(t.clone() for t in problem.extra)
    names = exercise.argument_names
    states = {name: TensorState.take(t) for name, t in zip(names, (x, *extra), strict=True)}
    settings = Settings.take()
    calls = GlobalCalls()  # a reseed or a draw, seen before the runner puts the state back
    # Grad mode on, as a caller's would be: a cell elsewhere that left it off is not fn's doing.
    with (
        torch.enable_grad(),
        watching(exercise.watched, measure_size=exercise.measure_size) as usage,
    ):
        f = usage.counting(problem.f, x)
        attributes = dict(vars(f))
        with nan_patching() as patched:
            outcome = run_learner_code(calls.around(fn), f, x, *extra)
    settings_changes = settings.changes()
    settings.restore()
    settings_changes += calls.said((*outcome.side_effects, *settings_changes))
    changes = tuple(
        f"{name}: {', '.join(found)}"
        for name, state in states.items()
        if (found := said(state, WORDS))
    )
    set_on_f = [name for name in vars(f) if attributes.get(name, f) is not vars(f)[name]]
    if set_on_f:
        changes = (f"f: it set the attribute `f.{set_on_f[0]}`", *changes)
    return Run(
        problem,
        outcome,
        usage,
        changes,
        tuple(notebook.changes()),
        tuple(settings_changes),
        patched.how,
    )


def _probe_note(problem: Problem, first: Problem) -> tuple[str, ...]:
    if problem is first:
        return ()
    return (
        f"This is one of the checker's probes beyond its first problem ({first.description})"
        f": {problem.probes}.",
    )


def _judged(check: Check, run: Run) -> Finding | None:
    """``check(run)``; a result too strange to judge is a verdict too, never a traceback."""
    try:
        return check(run)
    except Exception as exc:
        return Finding(
            f"on {run.problem.description} its result could not be judged "
            f"({type(exc).__name__}: {exc}).",
            ("Return a plain tensor of numbers on the CPU, shaped as the exercise says.",),
        )


def run_exercise(
    label: str, fn: object, exercise: Exercise, problems: Sequence[Problem]
) -> tuple[CheckResult | None, list[str]]:
    """Run ``fn`` on every problem and judge each run: ``(verdict, notes)``.

    The verdict is ``None`` when every check passed on every problem; the notes are what
    the pass carries, each note check's first finding.
    """
    if (verdict := callable_verdict(label, fn)) is not None:
        return verdict, []
    assert callable(fn)
    notebook = Contained(fn, every_global=True, words=WORDS)
    notes: list[str] = []
    noted: set[Check] = set()
    try:
        for problem in problems:
            run = _attempt(fn, problem, exercise, notebook)
            error = run.outcome.error
            if error is not None and error.is_stub:
                return from_learner_error(label, "your function", run.outcome), []
            for check in exercise.checks:
                finding = _judged(check, run)
                if finding is not None:
                    details = (*finding.details, *_probe_note(problem, problems[0]))
                    return failed(label, finding.title, *details), []
            for note in exercise.notes:
                found = None if note in noted else note(run)
                if found is not None:
                    noted.add(note)
                    notes.append(found.title)
    finally:
        notebook.restore()
    return None, notes
