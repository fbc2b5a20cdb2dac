"""The named mistakes a wrong Jacobian-shape prediction is matched against, in order.

Used by :mod:`._shapes` (``check_jacobian_shapes``). Each mistake is a predicate
on the output's shape, the inputs' shapes and the prediction: the Jacobian transposed
(the input's shape first), flattened to a matrix, the output's or the input's shape alone,
a 1 for a scalar output, a size-1 dimension dropped, one shape for several inputs, the
inputs' order swapped, the output's shape mistaken. :func:`hint_for` names the first one
a prediction matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["HINTS", "Shapes", "Truth", "hint_for"]

Shapes = Any  # a tuple of ints, or (several inputs or outputs) a tuple of those


@dataclass(frozen=True)
class Truth:
    """A problem's Jacobian shape, its output's shape (``None`` for several outputs) and
    its inputs' shapes."""

    shape: Shapes
    out: tuple[int, ...] | None
    ins: tuple[tuple[int, ...], ...]


# --- the named mistakes, each a predicate on (output shape, input shapes, prediction) ------

Mistake = Callable[[tuple[int, ...], tuple[tuple[int, ...], ...], Shapes], bool]
Rule = Callable[[tuple[int, ...], tuple[int, ...], tuple[int, ...]], bool]


def _one_shape_for_several(out: tuple[int, ...], ins: tuple[Any, ...], given: Shapes) -> bool:
    return len(ins) > 1 and all(isinstance(d, int) for d in given)


def _shapes_for_one(out: tuple[int, ...], ins: tuple[Any, ...], given: Shapes) -> bool:
    return len(ins) == 1 and bool(given) and all(isinstance(d, tuple) for d in given)


def _input_order(out: tuple[int, ...], ins: tuple[Any, ...], given: Shapes) -> bool:
    return len(ins) > 1 and tuple(given) == tuple(out + i for i in reversed(ins))


def _per_input(rule: Rule) -> Mistake:
    """A mistake about one input's Jacobian, found in any input's part of the prediction."""

    def mistake(out: tuple[int, ...], ins: tuple[Any, ...], given: Shapes) -> bool:
        parts = (given,) if len(ins) == 1 else given
        if len(parts) != len(ins) or not all(
            isinstance(p, tuple) and all(isinstance(d, int) for d in p) for p in parts
        ):
            return False
        return any(p != out + i and rule(out, i, p) for p, i in zip(parts, ins, strict=True))

    return mistake


HINTS: tuple[tuple[Mistake, str], ...] = (
    (_one_shape_for_several, "a function of several inputs has one Jacobian per input: give "
     "a tuple with one shape per input"),
    (_shapes_for_one, "a tuple of shapes is for several inputs; this problem has one: write "
     "its shape"),
    (_input_order, "one shape per input, in the order of the inputs"),
    (_per_input(lambda out, i, p: p == i + out), "the output's shape comes first, then the "
     "input's"),
    (_per_input(lambda out, i, p: p in ((math.prod(out), math.prod(i)), (math.prod(out + i),))),
     "that is the Jacobian flattened; `jacobian` keeps both shapes as they are"),
    (_per_input(lambda out, i, p: out == () and p in ((1, *i), (*i, 1))), "a scalar output "
     "adds no dimension, not even a 1: the gradient has the input's shape"),
    (_per_input(lambda out, i, p: p == out), "that is the output's shape alone; the input's "
     "follows it"),
    (_per_input(lambda out, i, p: p == i and out != ()), "that is the input's shape alone; "
     "the output's comes first"),
    (_per_input(lambda out, i, p: p == tuple(d for d in out + i if d != 1)), "a size-1 "
     "dimension stays in the shape"),
    (_per_input(lambda out, i, p: len(p) > len(i) and p[len(p) - len(i):] == i), "the "
     "input's part is right; work out the shape of f(x) for the part before it"),
)  # fmt: skip


def hint_for(truth: Truth, given: Shapes) -> str | None:
    """The first named mistake ``given`` matches, or ``None``."""
    if truth.out is None:
        return None
    return next((text for mistake, text in HINTS if mistake(truth.out, truth.ins, given)), None)
