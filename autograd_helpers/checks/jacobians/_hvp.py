"""Exercise 3 of chapter 02: a Hessian-vector product by double backward, without the Hessian.

The problems are data (:func:`problems`): a cubic and probes beyond it (a logistic loss, a
matrix x, an x of shape (3, 1), a 0-d x, an x of 35 entries whose Hessian would have 1225,
a function that carries a 4 × 4 matrix, ``v = 0``, a tiny ``v``, a large ``v`` (the first
problem's times 10^6: H v is linear in v), float32, an x and a v whose digits float32
cannot hold: :func:`smoothness`).
:data:`EXERCISE` is the table of named checks: the shared ones, then this exercise's
mechanism (at most three backward passes, no batch of the Hessian's rows:
:func:`~._hvp_mechanism.formed_hessian`) and the result's shape and values
(:mod:`._hvp_values`);
forward-over-reverse passes with a note (:mod:`._notes`), and so does a tensor of
n × n numbers that is no Hessian, such as ``torch.outer(g, v)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from autograd_helpers.checks._contain.watch import watching
from autograd_helpers.checks._core.problems import Exercise, Problem, draws
from autograd_helpers.checks.jacobians._checks import (
    FORWARD_MODE,
    changed_arguments,
    changed_notebook,
    finite_differences,
    left_settings,
    lower_precision,
    not_a_tensor,
    raised,
    refused,
    wrong_dtype,
)
from autograd_helpers.checks.jacobians._hvp_mechanism import (
    MAX_BACKWARD_PASSES,
    formed_hessian,
    hessian_sized,
    large_intermediate,
    needs_a_derivative,
    too_many_passes,
    zero_shortcut,
)
from autograd_helpers.checks.jacobians._hvp_values import LARGE_V, SCALE, wrong_shape, wrong_values
from autograd_helpers.checks.jacobians._notes import forward_over_reverse, kept_graph, nan_patched

__all__ = ["EXERCISE", "MAX_BACKWARD_PASSES", "REFUSED", "hessian_sized", "problems"]

_FORMS = "forms a whole Jacobian (of the gradient: the Hessian)"
REFUSED = {
    "torch.autograd.functional.hessian": "forms the whole Hessian",
    "torch.func.hessian": "forms the whole Hessian",
    "torch.autograd.functional.hvp": "computes the whole product for you",
    "torch.autograd.functional.vhp": "computes the whole product for you",
    "torch.autograd.functional.jacobian": _FORMS,
    "torch.func.jacrev": _FORMS,
    "torch.func.jacfwd": _FORMS,
    "autograd_helpers.jacobians.jacobian_by_rows": _FORMS,
    "autograd_helpers.engine.replay_backward": (
        "is section 2's replay of `backward()` in Python, a model of autograd's engine for "
        "reading, not the engine: ask the engine itself"
    ),
}
ALTERNATIVES = ("torch.func.vmap", "torch.func.vjp", "torch.autograd.functional.vjp", *FORWARD_MODE)
MATRIX_X = (
    "Hint: `x` may be a matrix (or 0-d). `(g * v).sum()` is the dot product for any shape; "
    "`g @ v` and `torch.dot` work for vectors only."
)
ZERO_DIM_X = (
    MATRIX_X + " A 0-d tensor has no index, and torch's advice, `.item()`, would give a plain "
    "Python number, which autograd cannot differentiate."
)
ERROR_HINTS = (
    (
        "does not require grad and does not have a grad_fn",
        "Hint: to differentiate the gradient again it must itself be recorded: compute it "
        "with `torch.autograd.grad(f(x), x, create_graph=True)` (and make `x` require grad), "
        "and do not detach it.",
    ),
    (
        "backward through the graph a second time",
        "Hint: the second pass goes through the first one's graph: compute g with "
        "`create_graph=True`, which keeps and records it.",
    ),
    ("shapes cannot be multiplied", MATRIX_X),
    ("1D tensors expected", MATRIX_X),
    ("both arguments to matmul need to be at least 1D", MATRIX_X),
    ("out of range", MATRIX_X),
    ("out of bounds", MATRIX_X),
    ("0-d tensor", MATRIX_X),
    ("invalid index of a 0-dim tensor", ZERO_DIM_X),
)


def _reference(f: Callable[[Tensor], Tensor], x: Tensor, v: Tensor) -> Tensor:
    """The exercise's own solution: run once per problem, to measure what it creates."""
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), x)
    return hv


def _problem(
    description: str, probes: str, f: Callable[[Tensor], Tensor], x: Tensor, v: Tensor
) -> Problem:
    expected = torch.autograd.functional.hvp(f, x.double(), v.double())[1]
    with torch.enable_grad(), watching(measure_size=True) as usage:
        _reference(usage.counting(f, x), x, v)
    honest = hessian_sized(usage, x.numel())[0]
    return Problem(description, probes, f, x, (v,), expected, honest)


@functools.cache
def problems() -> tuple[Problem, ...]:
    """A cubic first, then the probes (float64 unless said)."""
    randn = draws(3)

    features, a, q = randn(6, 4), randn(7), randn(4, 4)
    labels = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0], dtype=torch.float64)

    def cubic(x: Tensor) -> Tensor:
        return (x**3).sum() + x[0] * x[1]

    def logistic(x: Tensor) -> Tensor:
        return F.softplus(-labels.to(x.dtype) * (features.to(x.dtype) @ x)).mean()

    x0, first_v = randn(3), randn(3)
    return (
        _problem("(x ** 3).sum() + x[0] * x[1], x of shape (3,)", "", cubic, x0, first_v),
        *_x_probes(randn, logistic, a, q),
        *_v_probes(randn, cubic, x0, first_v),
        *_precision_probes(logistic),
    )


def _x_probes(
    randn: Callable[..., Tensor], logistic: Callable[[Tensor], Tensor], a: Tensor, q: Tensor
) -> tuple[Problem, ...]:
    """Other functions and other x: a logistic loss, a matrix x, a size-1 dimension, a 0-d
    x, an x whose Hessian would be large, and data as large as the Hessian that is none."""
    column = draws(5)(2, 3, 1)  # its own draws: the other problems' stay as they were
    return (
        _problem(
            "a logistic loss, x of shape (4,)", "a logistic loss", logistic, randn(4), randn(4)
        ),
        _problem(
            "(x @ x.T).sin().sum(), x of shape (2, 3)",
            "a matrix x",
            lambda x: (x @ x.T).sin().sum(),
            randn(2, 3),
            randn(2, 3),
        ),
        _problem(
            "(x.cos() * x.sum()).sum(), x of shape (3, 1)",
            "a size-1 dimension",
            lambda x: (x.cos() * x.sum()).sum(),
            *column,
        ),
        _problem(
            "x.sin() * x ** 2, x of shape () (0-d)",
            "a 0-d x",
            lambda x: x.sin() * x**2,
            randn(),
            randn(),
        ),
        _problem(
            "log1p((x @ a) ** 2).sum() + (x.sum(0) ** 2).sum() / 10, x of shape (5, 7)",
            "an x of 35 entries, whose Hessian would have 35 × 35",
            lambda x: torch.log1p((x @ a.to(x.dtype)) ** 2).sum() + (x.sum(0) ** 2).sum() / 10,
            randn(5, 7),
            randn(5, 7),
        ),
        _problem(
            "x @ Q @ x + x.sin().sum(), Q of shape (4, 4), x of shape (4,)",
            "data as large as the Hessian (Q, 4 × 4), which is no Hessian",
            lambda x: x @ q.to(x.dtype) @ x + x.sin().sum(),
            randn(4),
            randn(4),
        ),
    )


def _v_probes(
    randn: Callable[..., Tensor], cubic: Callable[[Tensor], Tensor], x0: Tensor, first_v: Tensor
) -> tuple[Problem, ...]:
    """The first problem with other v: zero, tiny, and large (H v is linear in v)."""
    return (
        _problem(
            "the first problem with v = 0", "v = 0", cubic, x0, torch.zeros(3, dtype=torch.float64)
        ),
        _problem("the first problem with v of size 1e-30", "a tiny v", cubic, x0, randn(3) * 1e-30),
        _problem(LARGE_V, "a large v (H v is linear in v)", cubic, x0, first_v * SCALE),
    )


def _precision_probes(logistic: Callable[[Tensor], Tensor]) -> tuple[Problem, ...]:
    """float32: a float32 x and v, and an x and a v whose digits float32 cannot hold."""
    return (
        _problem(
            "a logistic loss in float32, x of shape (4,)",
            "a float32 x",
            logistic,
            torch.tensor([0.0, 1e-8, 0.5, -3.0], dtype=torch.float32),
            torch.tensor([1.0, -2.0, 0.5, 0.25], dtype=torch.float32),
        ),
        _problem(
            "((x[1:] - x[:-1]) ** 2).sum() / 2, x and v of shape (6,) near 1 (apart from it "
            "in the 7th digit)",
            "x and v with digits float32 cannot hold",
            smoothness,
            *_beyond_float32(draws(7)),
        ),
    )


def smoothness(x: Tensor) -> Tensor:
    """Half the squared differences of neighbours: H v is v's own differences, so a v
    rounded to float32 on the way (its 8th digit gone) gives another H v."""
    return ((x[1:] - x[:-1]) ** 2).sum() / 2


def _beyond_float32(randn: Callable[..., Tensor]) -> tuple[Tensor, Tensor]:
    """An x and a v near 1 whose entries differ in the 7th digit: float64 holds them,
    float32 rounds each to within 6e-8, an error of several percent in their differences."""
    return 1 + 1e-6 * randn(6), 1 + 1e-6 * randn(6)


EXERCISE = Exercise(
    watched=(*REFUSED, *ALTERNATIVES),
    checks=(
        refused(
            REFUSED,
            "The exercise is to build H v yourself from `torch.autograd.grad`; the checker "
            "compares your result with the library's.",
        ),
        raised(ERROR_HINTS),
        left_settings,
        changed_notebook,
        changed_arguments,
        lower_precision,
        finite_differences(
            "Steps along v approximate H v from gradients at other points; double backward "
            "gives it exactly at x: the gradient of `(g * v).sum()`, with g computed with "
            "`create_graph=True`."
        ),
        too_many_passes,
        formed_hessian,
        needs_a_derivative(
            "H v is the gradient of the scalar `(g * v).sum()`, where "
            "`g = torch.autograd.grad(f(x), x, create_graph=True)[0]`: two backward passes."
        ),
        not_a_tensor,
        wrong_dtype,
        wrong_shape,
        wrong_values,
    ),
    notes=(
        forward_over_reverse,
        zero_shortcut,
        large_intermediate,
        kept_graph("H v"),
        nan_patched(
            "A NaN in H v comes from the code around it (`v / v.norm()` for v = 0): H v is "
            "linear in v and needs no normalising."
        ),
    ),
    argument_names=("x", "v"),
    measure_size=True,
)
