"""Exercise 1 of chapter 02: predict each Jacobian's shape, then compare with PyTorch.

:func:`shape_like` reads a prediction in any spelling that means a shape (a tuple or list
of ints, a ``torch.Size``, NumPy or torch integers, ``3.0`` for 3, nested for several
inputs). :func:`true_shapes` asks PyTorch, on copies of the notebook's inputs, with torch's
settings and random state put back; a malformed problem raises (the notebook's mistake),
one that raises when run is a verdict (a cell may have changed what it uses). A wrong
prediction is explained by :mod:`._shape_hints`; what the learner's cell left
changed in the notebook is judged, not undone, by :mod:`._shapes_state`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from autograd_helpers._common.globals import GlobalState
from autograd_helpers.checks._core.feedback import CheckResult, failed, stub_verdict
from autograd_helpers.checks.jacobians._shape_hints import Shapes, Truth, hint_for
from autograd_helpers.checks.jacobians._shapes_setup import ShapesSetUp
from autograd_helpers.checks.jacobians._shapes_state import changed_problems, notebook_settings

__all__ = [
    "ShapesSetUp",
    "changed_problems",
    "judge",
    "notebook_settings",
    "shape_like",
    "true_shapes",
    "validate",
]

ME = "check_jacobian_shapes"


def _as_int(value: object) -> int | None:
    """A size: an int, a NumPy or torch integer, ``3.0``; never a bool, ``3.5`` or ``-3``."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, Tensor):
        return _as_int(value.item()) if value.dim() == 0 and not value.dtype.is_complex else None
    if isinstance(value, float | np.floating):
        whole = math.isfinite(value) and value == int(value)
        return _as_int(int(value)) if whole else None
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
    return number if number >= 0 else None


def shape_like(answer: object) -> Shapes | None:
    """A prediction as nested tuples of ints, or ``None`` when it is not shape-like.

    Example::

        >>> shape_like([3, 4]), shape_like(12), shape_like(((2, 3), torch.Size([4])))
        ((3, 4), (12,), ((2, 3), (4,)))
        >>> shape_like("(3, 4)") is None, shape_like(True) is None
        (True, True)
    """
    single = _as_int(answer)
    if single is not None:
        return (single,)  # `12` for a 1-D shape
    if isinstance(answer, np.ndarray | Tensor) and answer.ndim == 1:
        answer = answer.tolist()
    if not isinstance(answer, tuple | list):
        return None
    ints = [_as_int(a) for a in answer]
    if all(i is not None for i in ints):
        return tuple(ints)
    parts = [shape_like(a) for a in answer]
    return None if any(p is None for p in parts) else tuple(parts)


def _shape_of(jacobian: object) -> Shapes:
    if isinstance(jacobian, Tensor):
        return tuple(jacobian.shape)
    assert isinstance(jacobian, tuple)
    return tuple(_shape_of(part) for part in jacobian)


def _copies(inputs: Tensor | tuple[Tensor, ...]) -> Tensor | tuple[Tensor, ...]:
    if isinstance(inputs, Tensor):
        return inputs.detach().clone()
    return tuple(t.detach().clone() for t in inputs)


def validate(problems: object, me: str = ME) -> None:
    """Raise ``TypeError``/``ValueError`` naming a malformed problem (the notebook's mistake)."""
    if not isinstance(problems, Mapping) or not problems:
        raise ValueError(f"{me}(): problems must be a non-empty mapping")
    for description, problem in problems.items():
        where = f"{me}(): problems[{description!r}]"
        if not (isinstance(problem, tuple) and len(problem) == 2 and callable(problem[0])):
            raise TypeError(f"{where} must be (f, inputs)")
        inputs = problem[1]
        tensors = inputs if isinstance(inputs, tuple) else (inputs,)
        if not tensors or not all(isinstance(t, Tensor) and t.is_floating_point() for t in tensors):
            raise TypeError(f"{where}: inputs must be a floating-point tensor or a tuple of them")


def true_shapes(problems: object) -> list[Truth | str]:
    """The Jacobians' shapes, one per problem; for a problem that raises, what it raised.

    The notebook's functions run on copies of its inputs, with torch's global settings
    and random state put back afterwards. A problem that is not ``(f, inputs)`` with
    floating-point inputs raises (the notebook's mistake); one that raises when run is
    said in the verdict instead, since a learner's cell can cause it (``B = ...``).
    """
    validate(problems)
    assert isinstance(problems, Mapping)
    truths: list[Truth | str] = []
    for problem in problems.values():
        f, inputs = problem
        tensors = inputs if isinstance(inputs, tuple) else (inputs,)
        before = GlobalState.take()
        try:
            shape = _shape_of(torch.autograd.functional.jacobian(f, _copies(inputs)))
        except Exception as exc:
            truths.append(f"{type(exc).__name__}: {exc}".split("\n")[0])
            continue
        finally:
            before.restore()
        ins = tuple(tuple(t.shape) for t in tensors)
        first = shape if isinstance(inputs, Tensor) else shape[0]
        single = all(isinstance(d, int) for d in first)
        out = tuple(first[: len(first) - len(ins[0])]) if single else None
        truths.append(Truth(shape, out, ins))
    return truths


# --- the verdict ----------------------------------------------------------------------------


def _well_formed(problems: Mapping[str, Any]) -> bool:
    try:
        validate(problems)
    except (TypeError, ValueError):
        return False
    return True


def _form(predicted: object, count: int) -> tuple[list[object] | None, str]:
    """The predictions as a list, or ``None`` and what is wrong with their form."""
    if isinstance(predicted, str | bytes):
        return None, "expected a list of shapes, got a string: write the tuples themselves."
    if isinstance(predicted, dict):
        return None, (
            "expected a list of shapes, got a dict: a list with one shape per problem, in "
            "the order of `problems`."
        )
    if isinstance(predicted, set | frozenset):
        return None, "expected a list of shapes, got a set, which has no order: use a list."
    single = shape_like(predicted)
    if count > 1 and single is not None and all(isinstance(d, int) for d in single):
        return None, f"that is one shape; give a list with one shape per problem ({count})."
    if not isinstance(predicted, Iterable) or isinstance(predicted, Tensor | np.ndarray):
        return None, f"expected a list of shapes, got {type(predicted).__name__}."
    answers = list(predicted)  # a list, a tuple, a generator: in order
    if not answers and isinstance(predicted, Iterator):
        return None, (
            "`predicted` is an empty iterator: a generator is used up by the first check that "
            "reads it (an earlier run of this cell?). Make it a list: `predicted = [...]`."
        )
    if len(answers) != count:
        noun = "prediction" if len(answers) == 1 else "predictions"
        said = f"{len(answers)} {noun} for {count} problems: one per problem."
        wrapped = len(answers) == 1 and isinstance(answers[0], list) and len(answers[0]) == count
        if wrapped and isinstance(predicted, tuple):
            said += " `predicted` is a tuple holding your list: a comma after the closing `]`?"
        return None, said
    return answers, ""


def _line(description: str, truth: Truth, answer: object) -> tuple[bool, str]:
    if answer is Ellipsis:
        return False, f"✗ {description}: not answered yet (`...`)"
    given = shape_like(answer)
    if given == truth.shape:
        return True, f"✓ {description}: {truth.shape}"
    said = "a string; write the tuple itself" if isinstance(answer, str) else repr(answer)
    if given is None and not isinstance(answer, str):
        said += ", which is not a shape (a tuple of ints)"
    line = f"✗ {description}: you said {said}; it is {truth.shape}"
    if truth.out is not None:
        each = " for each input" if len(truth.ins) > 1 else ""
        line += f", the output's shape {truth.out} followed by the input's{each}"
    hint = None if given is None else hint_for(truth, given)
    return False, line + (f". Hint: {hint}." if hint else "")


def _broken(problems: Mapping[str, Any], truths: list[Truth | str], name: str) -> CheckResult:
    """The verdict when some problems raise now: the predictions cannot be judged."""
    lines = [
        f"✗ {description}: raises {truth}"
        for description, truth in zip(problems, truths, strict=True)
        if isinstance(truth, str)
    ]
    changes = [
        f"Also: the notebook's problems were changed: {c}." for c in changed_problems(problems)
    ]
    return failed(
        name,
        f"{len(lines)} of {len(truths)} of the notebook's problems cannot be run now, so the "
        "shapes cannot be checked.",
        *lines,
        *changes,
        "Did a cell change what a problem uses (`B`, its tensors)? Run the cells that define "
        "them and `problems` again, and try things on copies. If it still raises, the "
        "notebook itself is wrong, not your predictions.",
    )


def judge(
    predicted: object, problems: object, name: str, set_up: ShapesSetUp | None = None
) -> CheckResult:
    """The verdict on ``predicted`` for ``problems`` (which raise if they are malformed).

    It judges, and does not undo, what the learner's cell left changed in the notebook:
    the problems' tensors (shapes, ``requires_grad``, ``.grad``, hooks, and tensors such as
    ``B`` named in a description), grad mode, anomaly mode and the default dtype. With
    ``set_up``, problems dropped, added, replaced or changed in place (or ``problems``
    replaced) are said, and the predictions judged against the problems as set up.
    """
    departed = [] if set_up is None else set_up.departures(problems)
    if departed:
        assert set_up is not None
        found = problems if isinstance(problems, Mapping) else {}
        if _well_formed(found):
            departed += changed_problems(found)
        problems = set_up.problems()
    truths = true_shapes(problems)
    assert isinstance(problems, Mapping)
    if (stub := stub_verdict(name, predicted)) is not None:
        return stub
    if any(isinstance(truth, str) for truth in truths):
        return _broken(problems, truths, name)
    known = [truth for truth in truths if isinstance(truth, Truth)]
    answers, why = _form(predicted, len(known))
    changed = departed or [
        f"the notebook's problems were changed: {c}" for c in changed_problems(problems)
    ]
    state = [*changed, *notebook_settings()]
    also = [f"Also: {s}." for s in state]
    undo = (
        "The checker does not undo it: run the cells that define the problems (and `B`) again; "
        "to try a problem, run it on copies."
    )
    if answers is None and departed:  # the set-up was left: say that first
        return failed(name, f"{departed[0]}.", why, *also[1:], undo)
    if answers is None:
        return failed(name, why, *also)
    results = [
        _line(description, truth, answer)
        for description, truth, answer in zip(problems, known, answers, strict=True)
    ]
    lines = [line for _, line in results]
    wrong = sum(not right for right, _ in results)
    advice = [undo] if changed else []
    if changed:  # the truths are those of the changed problems: say that first
        now = "the problems as set up" if departed else "them as they are now"
        off = f"; against {now}, {wrong} of {len(known)} shapes are off"
        return failed(name, f"{changed[0]}{off if wrong else ''}.", *lines, *also[1:], *advice)
    if wrong:
        return failed(name, f"{wrong} of {len(known)} shapes are off.", *lines, *also)
    if state:
        return failed(name, f"the shapes are right, but {state[0]}.", *lines, *also[1:])
    used_up = (
        [
            "Note: `predicted` is an iterator (a generator): this check used it up, and a "
            "second run would find it empty. A list keeps its items: `predicted = [...]`."
        ]
        if isinstance(predicted, Iterator)
        else []
    )
    return CheckResult(
        "passed", f"{name} passed: all {len(known)} shapes are right.", (*lines, *used_up)
    )
