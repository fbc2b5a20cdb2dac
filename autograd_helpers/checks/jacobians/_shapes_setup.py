"""The shapes exercise's problems as the notebook set them up (:class:`ShapesSetUp`), kept.

Used by :func:`~autograd_helpers.checks.set_up_jacobian_shapes`. A learner's cell that
changes a problem and then calls the set-up again would otherwise make the check judge
the learner's own problems; so a set-up that shares a description with one made before
is compared with it (:func:`remembered_set_up`). The same problems (the set-up cell run
again: new functions with the same code, new inputs of the same shapes) replace it; other
ones get the first set-up back, and the check says what departs from it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any

import torch
from torch import Tensor

__all__ = ["ShapesSetUp", "inputs_of", "remembered_set_up", "same_function"]

_REMEMBERED: list[ShapesSetUp] = []  # the first set-up of each group of problems
_KEPT = 16  # set-ups remembered at most (a notebook makes one)


def _same_code(a: CodeType, b: CodeType) -> bool:
    """The same source run again (another cell, another line): equal but for where."""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_argcount) != (
        b.co_code,
        b.co_names,
        b.co_varnames,
        b.co_freevars,
        b.co_argcount,
    ) or len(a.co_consts) != len(b.co_consts):
        return False
    return all(
        _same_code(p, q)
        if isinstance(p, CodeType) and isinstance(q, CodeType)
        else type(p) is type(q) and p == q
        for p, q in zip(a.co_consts, b.co_consts, strict=True)
    )


def _same_cell(a: object, b: object) -> bool:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a.shape == b.shape and a.dtype == b.dtype
    try:
        return a is b or bool(a == b)
    except Exception:  # a comparison that raises or is ambiguous: not known to be the same
        return False


def same_function(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """``a`` is ``b``, or made from the same code (a cell run again) with like closures.

    Example::

        >>> same_function(lambda x: x.T, lambda x: x.T), same_function(torch.sum, torch.sum)
        (True, True)
        >>> same_function(lambda x: x.T, lambda x: x.sum(0))
        False
    """
    if a is b:
        return True
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if not (isinstance(code_a, CodeType) and isinstance(code_b, CodeType)):
        return False
    if not _same_code(code_a, code_b):
        return False
    cells_a, cells_b = getattr(a, "__closure__", None) or (), getattr(b, "__closure__", None) or ()
    return len(cells_a) == len(cells_b) and all(
        _same_cell(p.cell_contents, q.cell_contents) for p, q in zip(cells_a, cells_b, strict=True)
    )


def inputs_of(problem: object) -> tuple[object, ...]:
    """A problem's inputs as a tuple (``()`` for something that is no problem)."""
    if not (isinstance(problem, tuple) and len(problem) == 2):
        return ()
    inputs = problem[1]
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _same_values(a: object, b: Tensor) -> bool:
    if not isinstance(a, Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return True  # another shape or no tensor: said by changed_problems, from the description
    try:
        return bool(torch.equal(a.detach(), b))
    except Exception:  # a meta or fake tensor: nothing to compare
        return False


class ShapesSetUp:
    """The problems of the shapes exercise as the notebook set them up, to judge against.

    Made by :func:`~autograd_helpers.checks.set_up_jacobian_shapes` in the cell that
    defines ``problems``: the descriptions in order, each function, and copies of the
    inputs' values. A cell that drops, adds, reorders or replaces a problem, or changes a
    tensor's values in place, is said; the predictions are judged against the problems as
    set up.
    """

    def __init__(self, problems: Mapping[str, Any]) -> None:
        self.items: tuple[tuple[str, Any, tuple[Any, ...]], ...] = tuple(
            (
                description,
                problem[0],
                tuple(t.detach().clone() for t in inputs_of(problem) if isinstance(t, Tensor)),
            )
            for description, problem in problems.items()
        )
        self._originals = dict(problems)
        self.again = False  # made by a later set-up of problems that depart from these

    def original(self, description: str) -> Any:
        """The problem as set up: the notebook's ``(f, inputs)``, its tensors as they are now."""
        return self._originals[description]

    def set_up_again(self) -> ShapesSetUp:
        """This set-up, for a later set-up call on problems that depart from it."""
        again = copy.copy(self)
        again.again = True
        return again

    def problems(self) -> dict[str, Any]:
        """The problems as set up: their functions, on copies of the inputs' values."""
        found = {}
        for description, f, copies in self.items:
            inputs = self._originals[description][1]
            values = copies if isinstance(inputs, tuple) else copies[0]
            found[description] = (
                f,
                tuple(t.clone() for t in values) if isinstance(values, tuple) else values.clone(),
            )
        return found

    def departures(self, problems: object) -> list[str]:
        """How ``problems`` departs from the set-up, one phrase each (``[]``: it does not)."""
        if not isinstance(problems, Mapping):
            return [
                f"the notebook's `problems` was replaced: it is now a {type(problems).__name__}, "
                "not the dict of problems the notebook set up"
            ]
        now = list(problems)
        found = [
            f"the problem {description!r} is missing from the notebook's "
            "`problems` (popped or deleted)"
            for description, _, _ in self.items
            if description not in problems
        ]
        known = {description for description, _, _ in self.items}
        found += [
            f"the notebook's `problems` has a problem it did not set up, {d!r}"
            for d in now
            if d not in known
        ]
        if not found and now != [d for d, _, _ in self.items]:
            found.append("the notebook's problems are in another order than it set them up in")
        changed, replaced = [], []
        for description, f, copies in self.items:
            problem = problems.get(description)
            if problem is None:
                continue
            if not (isinstance(problem, tuple) and len(problem) == 2):
                replaced.append(
                    f"in {description!r}, the problem is not the one the notebook set up"
                )
            elif not same_function(problem[0], f):
                changed.append(f"the problem {description!r} was changed (another function)")
            elif problem[0] is not f:
                replaced.append(
                    f"in {description!r}, the problem is not the one the notebook set up"
                )
            elif not all(
                _same_values(a, b) for a, b in zip(inputs_of(problem), copies, strict=False)
            ):
                replaced.append(
                    f"in {description!r}, an input holds other values than the notebook set "
                    "up (changed in place)"
                )
        again = (
            [
                "`set_up_jacobian_shapes` ran again after the change: the check keeps the "
                "problems as the notebook first set them up"
            ]
            if self.again
            else []
        )
        return [*found, *changed, *replaced, *again]


def _same_inputs(now: object, before: object, copies: tuple[Tensor, ...]) -> bool:
    """Inputs of the same form, shapes and dtypes; the set-up's own tensors unchanged."""
    if isinstance(now, tuple) != isinstance(before, tuple):
        return False
    tensors, originals = inputs_of((None, now)), inputs_of((None, before))
    if len(tensors) != len(copies):
        return False
    for t, original, kept in zip(tensors, originals, copies, strict=False):
        if not isinstance(t, Tensor) or t.shape != kept.shape or t.dtype != kept.dtype:
            return False
        if t is original and not torch.equal(t.detach(), kept):
            return False  # the same tensor, changed in place
    return True


def _same_problems(first: ShapesSetUp, problems: Mapping[str, Any]) -> bool:
    """``problems`` are those of ``first`` (its set-up cell run again), or none changed."""
    if list(problems) != [description for description, _, _ in first.items]:
        return False
    for description, f, copies in first.items:
        problem = problems[description]
        if not (isinstance(problem, tuple) and len(problem) == 2 and callable(problem[0])):
            return False
        before = first.original(description)[1]
        if not same_function(problem[0], f) or not _same_inputs(problem[1], before, copies):
            return False
    return True


def remembered_set_up(problems: Mapping[str, Any]) -> ShapesSetUp:
    """The set-up to judge against: ``problems``'s own, or the first one made of problems
    that share a description with them and differ (then marked as set up again)."""
    first = next(
        (s for s in _REMEMBERED if any(description in problems for description, _, _ in s.items)),
        None,
    )
    if first is not None and not _same_problems(first, problems):
        return first.set_up_again()
    fresh = ShapesSetUp(problems)
    if first is not None:
        _REMEMBERED.remove(first)
    _REMEMBERED.append(fresh)
    del _REMEMBERED[:-_KEPT]
    return fresh
