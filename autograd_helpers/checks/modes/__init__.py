"""The checkers of ``05_grad_mode_vs_eval.ipynb``'s exercises (public in ``ah.checks``).

Each is a thin entry: the cases, networks and named checks it runs are private, one module
per idea: ``_cases`` (the models and loaders ``check_evaluate`` tries, as data),
``_evaluate`` and ``_freeze`` (the checks, run in order from a table),
``_predictions`` (reading answers in every spelling that means the same) and
``_contain.modules`` (what a call changed: on the model, the notebook's models).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import torch
from torch import Tensor, nn

from autograd_helpers.checks._contain.modules import NotebookModels, listed
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    callable_verdict,
    failed,
    stub_verdict,
)
from autograd_helpers.checks._core.problems import label_of
from autograd_helpers.checks.modes import _attempt as evaluate_run
from autograd_helpers.checks.modes import _evaluate as evaluate_checks
from autograd_helpers.checks.modes import _freeze as freeze_checks
from autograd_helpers.checks.modes._cases import CASES
from autograd_helpers.checks.modes._contain import one_optimizer_scan
from autograd_helpers.checks.modes._grads import freezing_note
from autograd_helpers.checks.modes._predictions import (
    EXERCISE_QUESTIONS,
    answers_of,
    marked,
    require_questions,
)
from autograd_helpers.modes import mode_table

__all__ = ["check_evaluate", "check_frozen", "check_mode_predictions"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _keeps_random_state(checker: Callable[_P, _R]) -> Callable[_P, _R]:
    # The checkers seed to build their models; the notebook's random stream must not notice.
    # The kernel's optimizers are found once per call (each attempt judges their settings).
    @functools.wraps(checker)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with torch.random.fork_rng(devices=[]), one_optimizer_scan():
            return checker(*args, **kwargs)

    return wrapper


def _grad_mode_off(label: str) -> CheckResult | None:
    """The notebook's grad mode is off as the check starts: nothing could be checked."""
    if torch.is_grad_enabled():
        return None
    return failed(
        label,
        "grad mode is off in this notebook, so the check cannot run: a "
        "`torch.set_grad_enabled(False)` outlived its cell (this one or one before).",
        "Run `torch.set_grad_enabled(True)`, then this check again. To switch grad mode off "
        "for a while, use `with torch.no_grad():`, which switches it back.",
    )


def _cannot_run(fn: object, label: str) -> CheckResult | None:
    return callable_verdict(label, fn) or _grad_mode_off(label)


@_keeps_random_state
def check_evaluate(fn: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's ``evaluate(model, loader)``: the eval-mode mean loss, nothing changed.

    ``evaluate`` must return the mean over the loader's batches of
    ``F.mse_loss(model(x), y)`` in eval mode, record no graph, and leave everything as it
    found it: the model's mode (tried from train mode and from eval mode), its running
    statistics, parameters (values, ``requires_grad``, ``.grad``: every model comes with
    gradients, as in the middle of training, which a ``zero_grad()`` would lose) and hooks,
    the loader's tensors, torch's global settings, and the notebook's own models. The cases
    are data (``_cases.CASES``): the chapter's model and one with instance norm and
    RReLU, batches of uneven sizes (a mean over samples differs), a float64 model, and a
    loader whose last batch makes the model raise: the error must reach the caller (a loop
    that swallows it fails), and the mode must be back too (a ``try``/``finally``). Buffers or
    attributes added to the model (private ones too), every notebook list, dict and
    optimizer, and a reseed of torch's generator count as changes. Evaluating a copy of the
    model passes, with a note. The global random state is left as it was.

    Example::

        >>> def evaluate(model, loader):
        ...     was_training = model.training
        ...     model.eval()
        ...     try:
        ...         with torch.inference_mode():
        ...             losses = [torch.nn.functional.mse_loss(model(x), y) for x, y in loader]
        ...             total = sum(float(loss) for loss in losses)
        ...     finally:
        ...         model.train(was_training)
        ...     return total / len(loader)
        >>> check_evaluate(evaluate).passed
        True
    """
    label = label_of(fn, name, "check_evaluate")
    if (problem := _cannot_run(fn, label)) is not None:
        return problem
    assert callable(fn)
    notebook = NotebookModels(fn)
    notes: list[str] = []
    try:
        for seed, case in enumerate(CASES):
            run = evaluate_run.attempt(fn, case, seed, label, notebook)
            try:
                result = evaluate_checks.judge(run)
            finally:
                if run.contained is not None:
                    run.contained.restore()
            if result is not None:
                return result
            note = evaluate_run.copy_note(run)
            if note is not None and note not in notes:
                notes.append(note)
    finally:
        notebook.restore()
    tried = [case.description for case in CASES if not case.raises]
    return CheckResult(
        "passed",
        f"{label} passed: the eval-mode mean loss, no graph, and the model left as it was "
        "found (its mode too, also when a batch raised an error).",
        ("Tried on " + "; ".join(tried) + ".", *notes),
    )


@_keeps_random_state
def check_frozen(fn: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's ``fn(model)`` that freezes every layer but the last one.

    ``fn`` freezes the chapter's model (``Linear, BatchNorm1d, ReLU, Dropout, Linear``: five
    modules, as in the notebook), then a seven-module network whose last layer has no bias
    and a three-module one that starts with a nested block (so that fixed indices or names
    fail), and one whose second-to-last module has parameters (so ``model[:-2]`` fails); the
    networks are data (``_freeze.NETWORKS``). Each time only the last layer's
    parameters may require grad, a backward pass must fill their ``.grad`` and no other, and
    nothing else may change: the weights, the layers themselves (a buffer added too), torch's
    global settings (a reseed too), the notebook's own models and any optimizer's settings.
    Every network comes with a ``.grad`` on each parameter, as in the middle of training: a
    gradient set to zeros fails (momentum and weight decay still move a frozen layer that
    keeps one), and so does clearing the last layer's. Clearing the frozen layers' gradients
    passes, with a note, and so does switching them to eval mode as well. The global random
    state is left as it was.

    Example::

        >>> def freeze(model):
        ...     for parameter in model[:-1].parameters():
        ...         parameter.requires_grad_(False)
        >>> check_frozen(freeze).passed
        True
    """
    label = label_of(fn, name, "check_frozen")
    if (problem := _cannot_run(fn, label)) is not None:
        return problem
    assert callable(fn)
    first, *others = freeze_checks.NETWORKS
    notes: dict[int, str] = {}
    last: list[str] = []  # the chapter's model's last layer, for the message
    for network in freeze_checks.NETWORKS:
        run = freeze_checks.attempt(fn, network, label)
        try:
            result = freeze_checks.judge(run, first)
        finally:
            if run.contained is not None:
                run.contained.restore()
            run.notebook.restore()
        if result is not None:
            return result
        for kind, note in enumerate((freeze_checks.mode_note(run), freezing_note(run.grads))):
            if note is not None:
                notes.setdefault(kind, note)  # each kind once, as the first network shows it
        last = last or run.last
    return CheckResult(
        "passed",
        f"{label} passed: after backward only the last layer has a gradient ({listed(last)} "
        f"in {first.description}); also tried on {' and on '.join(n.description for n in others)}"
        "; the frozen layers record no gradient of their own.",
        tuple(notes[kind] for kind in sorted(notes)),
    )


def check_mode_predictions(
    predicted: object,
    questions: Sequence[tuple[str, str, str]],
    model: nn.Module,
    x: Tensor,
    *,
    name: str = "predicted",
    exercise: bool = False,
) -> CheckResult:
    """Check predictions of :func:`~autograd_helpers.modes.mode_table` entries, one by one.

    A yes/no entry takes ``True`` or ``False``; ``1``/``0``, ``1.0``/``0.0``, and NumPy's or
    torch's bools mean the same and count (the feedback says how it read them). Strings such
    as ``"True"`` do not. The answers may be a list, a tuple, or a 1-D array or tensor.

    Args:
        predicted: one answer per question (``True``/``False``, or a number).
        questions: ``(mode, grad mode, column)`` triples, such as
            ``("eval", "no_grad", "dropout active")``.
        model, x: what the table is computed for (the model is left as it was found).
        name: how to call the predictions in the feedback.
        exercise: judge notebook 05's own questions (``EXERCISE_QUESTIONS``), whatever
            ``questions`` holds: a list shortened or changed by an answer cell
            (``questions = questions[:4]``) is said, and not what is judged.

    Raises:
        ValueError, TypeError: when the notebook's ``questions``, ``model`` or ``x`` are
            wrong (the check is set up wrong, not the learner's answer).

    Example::

        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout())
        >>> questions = [("eval", "enabled", "dropout active")]
        >>> check_mode_predictions([0.0], questions, model, torch.ones(2, 3)).passed
        True
    """
    caller = "check_mode_predictions"
    asked = require_questions(caller, questions)
    if not isinstance(model, nn.Module):
        raise TypeError(f"{caller}(): model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor):
        raise TypeError(f"{caller}(): x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"{caller}(): name must be a str, got {type(name).__name__}")
    if (stub := stub_verdict(name, predicted)) is not None:
        return stub
    changed: tuple[str, ...] = ()
    if exercise and asked != list(EXERCISE_QUESTIONS):
        count = _count(len(asked), "question")
        changed = (
            f"Note: `questions` is not the exercise's list any more ({count}, the exercise "
            f"asks {len(EXERCISE_QUESTIONS)}): the check asks the exercise's own questions, "
            "in their order.",
        )
        asked = list(EXERCISE_QUESTIONS)
    answers = answers_of(predicted)
    if answers is None:
        return failed(
            name,
            f"expected a list of answers, one per question, got {type(predicted).__name__}.",
            f"Write `{name} = [True, False, ...]`, in the order of the questions.",
        )
    if len(answers) != len(asked):
        return failed(
            name,
            f"{_count(len(answers), 'answer')} for {_count(len(asked), 'question')}.",
            "Give one answer per question, in their order.",
            *changed,
        )
    problem = _grad_mode_off(name)
    if problem is not None:
        return problem
    lines, wrong = marked(asked, answers, _table(caller, model, x))
    if wrong:
        return failed(name, f"{wrong} of {len(asked)} predictions are off.", *lines, *changed)
    return CheckResult(
        "passed", f"{name} passed: all {len(asked)} predictions hold.", (*lines, *changed)
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _table(caller: str, model: nn.Module, x: Tensor) -> list[dict[str, object]]:
    """The notebook's model and input tabulated; their own errors are the notebook's."""
    try:
        return list(mode_table(model, x))
    except (TypeError, ValueError) as error:
        raise type(error)(str(error).replace("mode_table()", f"{caller}()")) from error
    except RuntimeError as error:
        raise ValueError(
            f"{caller}(): model(x) raised {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''} (the notebook's model and x "
            "do not fit each other)"
        ) from error
