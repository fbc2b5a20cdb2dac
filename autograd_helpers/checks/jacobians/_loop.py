"""Exercise 2 of chapter 02: a Jacobian built row by row from ``torch.autograd.grad``.

The problems are data (:func:`problems`): the chapter's example and probes beyond it (a
scalar output, a matrix output, 0-d inputs and outputs, a wide Jacobian of odd sizes,
size-1 dimensions, a one-element output of shape (1,), Jacobian entries above 1e4, a
float32 input at edge values).
:data:`EXERCISE` is the table of named checks each run goes through, the shared ones
(:mod:`._checks`) and this exercise's own (the result's shape and values), then
the notes that valid routes other than the loop pass with (:mod:`._notes`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from autograd_helpers.checks._core.problems import Exercise, Finding, Problem, Run, draws
from autograd_helpers.checks.jacobians._checks import (
    FORWARD_MODE,
    changed_arguments,
    changed_notebook,
    compare,
    finite_differences,
    left_settings,
    lower_precision,
    nan_hint,
    no_derivative,
    not_a_tensor,
    raised,
    refused,
    wrong_dtype,
)
from autograd_helpers.checks.jacobians._loop_errors import ERROR_HINTS, out_shape
from autograd_helpers.checks.jacobians._notes import (
    batched_rows,
    forward_columns,
    kept_graph,
    nan_patched,
    repeated_forwards,
)

__all__ = ["EXERCISE", "REFUSED", "problems"]

REFUSED = {
    "torch.autograd.functional.jacobian": "returns the whole Jacobian",
    "torch.func.jacrev": "returns the whole Jacobian",
    "torch.func.jacfwd": "returns the whole Jacobian",
    "autograd_helpers.jacobians.jacobian_by_rows": "is the course's own answer to this exercise",
    "autograd_helpers.engine.replay_backward": (
        "is section 2's replay of `backward()` in Python, a model of autograd's engine for "
        "reading, not the engine: ask the engine itself"
    ),
}
ALTERNATIVES = (
    "torch.func.vmap",
    "torch.func.vjp",
    "torch.autograd.functional.vjp",
    "torch.autograd.functional.jvp",
    *FORWARD_MODE,
)


def _problem(description: str, probes: str, f: Callable[[Tensor], Tensor], x: Tensor) -> Problem:
    expected = torch.autograd.functional.jacobian(f, x.detach().double())
    return Problem(description, probes, f, x, (), expected)


@functools.cache
def problems() -> tuple[Problem, ...]:
    """The chapter's example first, then the probes (float64 unless said)."""
    randn = draws(2)

    w, a, c, w5 = randn(4, 3), randn(2, 7), randn(2, 3), randn(3, 5)
    return (
        _problem(
            "tanh(W @ x), x of shape (3,), W of shape (4, 3)",
            "a non-square Jacobian",
            lambda x: torch.tanh(w.to(x.dtype) @ x),
            randn(3),
        ),
        *_shape_probes(randn, a, c),
        *_value_probes(w5),
    )


def _shape_probes(randn: Callable[..., Tensor], a: Tensor, c: Tensor) -> tuple[Problem, ...]:
    """Outputs and inputs of every rank, where a Jacobian's shape is easy to get wrong:
    a scalar output, a matrix output, 0-d inputs and outputs, a wide Jacobian of odd size,
    size-1 dimensions, a one-element output of shape (1,)."""
    return (
        _problem(
            "(x ** 2).sum(), x of shape (2, 3)",
            "a scalar output",
            lambda x: (x**2).sum(),
            randn(2, 3),
        ),
        _problem(
            "x.exp().T, x of shape (2, 3)", "a matrix output", lambda x: x.exp().T, randn(2, 3)
        ),
        _problem(
            "torch.stack([x.sin(), x * x, x.exp()]), x of shape () (0-d)",
            "a 0-d input",
            lambda x: torch.stack([x.sin(), x * x, x.exp()]),
            randn(),
        ),
        _problem(
            "x.sin() * 2, x of shape () (0-d)",
            "a 0-d input and output",
            lambda x: x.sin() * 2,
            randn(),
        ),
        _problem(
            "A @ x.sin(), x of shape (7,), A of shape (2, 7)",
            "a wide Jacobian of odd size",
            lambda x: a.to(x.dtype) @ x.sin(),
            randn(7),
        ),
        _problem(
            "(C @ x).T, x of shape (3, 1), C of shape (2, 3)",
            "size-1 dimensions",
            lambda x: (c.to(x.dtype) @ x).T,
            randn(3, 1),
        ),
        _problem(
            "x.exp().sum(1), x of shape (1, 4)",
            "a one-element output of shape (1,)",
            lambda x: x.exp().sum(1),
            randn(1, 4),
        ),
    )


def _value_probes(w5: Tensor) -> tuple[Problem, ...]:
    """Values at the edges of precision: Jacobian entries above 1e4, a float32 input at
    edge values (0, 1e-8, -1e-30, where float32's ``exp`` nearly overflows)."""
    edges = torch.tensor([0.0, 1e-8, -1e-30, 0.5, 88.7], dtype=torch.float32)
    return (
        _problem(
            "x.exp() * 100, x = [2, 8, 11]",
            "Jacobian entries above 1e4",
            lambda x: x.exp() * 100,
            torch.tensor([2.0, 8.0, 11.0], dtype=torch.float64),
        ),
        _problem(
            "softplus(W @ x) in float32, x = [0, 1e-8, -1e-30, 0.5, 88.7], W of shape (3, 5)",
            "a float32 input at edge values",
            lambda x: F.softplus(w5.to(x.dtype) @ x),
            edges,
        ),
    )


def wrong_shape(run: Run) -> Finding | None:
    """The Jacobian's shape is not ``f(x).shape + x.shape``, with the likely reason."""
    assert isinstance(run.value, Tensor)
    got, want, x = run.value, run.problem.expected, run.problem.x
    if got.shape == want.shape:
        return None
    out = out_shape(run)
    details = [
        f"A Jacobian's shape is the output's shape {tuple(out)} followed by the input's "
        f"{tuple(x.shape)}: row i belongs to output element i."
    ]
    rows = out.numel()
    if got.shape == tuple(d for d in want.shape if d != 1):
        details.append(
            "Hint: `squeeze()` drops every size-1 dimension, those that belong to the "
            "shapes too: reshape to `y.shape + x.shape` instead."
        )
    elif got.numel() == want.numel() and rows == 1 and len(out) > 0:
        details.append(
            "Hint: one output element, but f(x) is not 0-d here: its size-1 dimensions stay "
            "in the Jacobian. Reshape to `y.shape + x.shape`, also when there is one row."
        )
    elif got.shape == (rows, x.numel()):
        details.append(f"Hint: reshape the stacked rows to {tuple(want.shape)}.")
    elif got.shape == (*x.shape, *out):
        details.append("Hint: the input's dimensions come first in yours: transposed.")
    elif got.shape == x.shape and torch.allclose(
        got.double(), want.reshape(rows, -1).sum(0).reshape(got.shape)
    ):
        details.append(
            "Hint: that is the sum of all rows, the gradient of `y.sum()`: one backward pass "
            "per output element gives the rows one by one."
        )
    return Finding(
        f"on {run.problem.description} the Jacobian has shape {tuple(got.shape)}, expected "
        f"{tuple(want.shape)}.",
        tuple(details),
    )


def _zero_rows(got: Tensor, want: Tensor) -> str:
    """``"1, 2, 3"``: the rows that are all zero in ``got`` and not in ``want``."""
    zero = [i for i in range(got.shape[0]) if not got[i].any() and want[i].any()]
    return ", ".join(str(i) for i in zero)


def wrong_values(run: Run) -> Finding | None:
    """Values off the Jacobian, with the likely reason (``.grad`` reused or accumulated)."""
    mismatch = compare(run)
    if mismatch is None:
        return None
    assert isinstance(run.value, Tensor)
    details = [mismatch.describe("J", "yours", "autograd's")]
    rows = out_shape(run).numel()
    got = run.value.detach().double().reshape(rows, -1)
    total = run.problem.expected.reshape(rows, -1).cumsum(0)
    nan = nan_hint(mismatch)
    if nan is not None:
        details.append(nan)
    elif rows > 1 and all(torch.allclose(row, total[-1]) for row in got):
        details.append(
            "Hint: every row is the same tensor: `x.grad` is one tensor, updated in place. "
            "Store a copy (`x.grad.clone()`), or use `torch.autograd.grad`, which returns a "
            "new gradient."
            if run.usage.backward_calls
            else "Hint: every row is the sum of all rows, the gradient of `y.sum()`: each "
            "pass went through all of y. Row i is the gradient of element i alone, "
            "`y.reshape(-1)[i]`."
        )
    elif rows > 1 and (zero := _zero_rows(got, run.problem.expected.reshape(rows, -1))):
        details.append(
            f"Hint: rows {zero} are all zero, where the Jacobian's are not: was an error "
            "caught, or a row left as it was made? Each row needs its own backward pass "
            "(`retain_graph=True` keeps the graph for the next)."
        )
    elif rows > 1 and torch.allclose(got, total):
        details.append(
            "Hint: each row is the sum of the rows before it: `.backward()` adds into `x.grad`. "
            "Reset it (`x.grad = None`) before each row, or use `torch.autograd.grad`, which "
            "returns the gradient instead."
        )
    return Finding(f"on {run.problem.description} the values are off.", tuple(details))


EXERCISE = Exercise(
    watched=(*REFUSED, *ALTERNATIVES),
    checks=(
        refused(
            REFUSED,
            "The exercise is to build it yourself, one `torch.autograd.grad` per output "
            "element; the checker compares your result with the library's.",
        ),
        raised(ERROR_HINTS),
        left_settings,
        changed_notebook,
        changed_arguments,
        lower_precision,
        finite_differences(
            "A row of the Jacobian is exact from one backward pass at x: "
            "`torch.autograd.grad(y.reshape(-1)[i], x, retain_graph=True)`. Finite "
            "differences only approximate it (chapter 03 uses them to check derivatives)."
        ),
        no_derivative(
            "Row i of the Jacobian is the gradient of output element i: "
            "`torch.autograd.grad(y.reshape(-1)[i], x, retain_graph=True)`."
        ),
        not_a_tensor,
        wrong_dtype,
        wrong_shape,
        wrong_values,
    ),
    notes=(
        batched_rows,
        forward_columns,
        repeated_forwards,
        kept_graph("Jacobian"),
        nan_patched(
            "Each row is exact from one backward pass at x; where a row has a NaN, look "
            "for what the code around it divides by."
        ),
    ),
)
