"""The exceptions a Jacobian loop raises, and the hint for each (chapter 02, exercise 2).

Used by :mod:`._loop`'s table through :func:`~._checks.raised`: a
pattern of the exception's message, and what to do about it. Indexing a 0-d tensor says
which one is 0-d on the problem (the output, or x), and that torch's own advice, `.item()`,
leads away from a derivative.
"""

from __future__ import annotations

import torch

from autograd_helpers.checks._core.problems import Run
from autograd_helpers.checks.jacobians._checks import Hints

__all__ = ["ERROR_HINTS", "RETAIN", "SHAPE_ASSUMED", "out_shape", "zero_dim"]

RETAIN = (
    "backward through the graph a second time",
    "Hint: each call of `torch.autograd.grad` frees the graph it went through, and the next row "
    "needs it again: pass `retain_graph=True`.",
)
SHAPE_ASSUMED = (
    "Hint: your code assumes a shape. The problems include 0-d inputs and outputs and "
    "matrices: loop over `y.reshape(-1)` and `y.numel()`, and reshape the stacked rows to "
    "`y.shape + x.shape`."
)
ITEM = (
    "and torch's advice, `.item()`, would give a plain Python number, which autograd "
    "cannot differentiate"
)


def zero_dim(run: Run) -> str:
    """The hint for indexing a 0-d tensor: which one is 0-d on this problem."""
    if not out_shape(run):
        return (
            f"Hint: `y` is 0-d here (f(x) has shape ()): it has no index, {ITEM}. Loop over "
            "`y.reshape(-1)`, 1-D for every shape, 0-d included, and reshape the stacked rows "
            "to `y.shape + x.shape`."
        )
    return (
        f"Hint: `x` is 0-d here (shape ()): it has no index, {ITEM}. Work with "
        "`x.reshape(-1)` where you need entries, and reshape the stacked rows to "
        "`y.shape + x.shape`."
    )


ERROR_HINTS: Hints = (
    RETAIN,
    (
        "does not require grad and does not have a grad_fn",
        "Hint: autograd only differentiates what it recorded: make `x` a leaf that requires "
        "grad before calling `f` (`x = x.detach().requires_grad_()`), and differentiate "
        "`f(x)` itself, not a detached copy of it.",
    ),
    (
        "grad can be implicitly created only for scalar outputs",
        "Hint: differentiate one output element at a time: `y.reshape(-1)[i]` is a scalar.",
    ),
    (
        "appears to not have been used in the graph",
        "Hint: differentiate with respect to the very tensor you evaluated `f` at (the copy "
        "that requires grad), not another one.",
    ),
    (
        "leaf Variable that requires grad is being used in an in-place operation",
        "Hint: build the Jacobian in a tensor of its own (or stack the rows), never in `x`.",
    ),
    ("out of range", SHAPE_ASSUMED),
    ("out of bounds", SHAPE_ASSUMED),
    ("0-d tensor", SHAPE_ASSUMED),
    ("invalid index of a 0-dim tensor", zero_dim),
    ("invalid for input of size", SHAPE_ASSUMED),
    (
        'missing 1 required positional arguments: "shape"',
        "Hint: when x and f(x) are both 0-d, `reshape(*y.shape, *x.shape)` unpacks nothing: "
        "pass the shape as one tuple, `reshape(y.shape + x.shape)`.",
    ),
)


def out_shape(run: Run) -> torch.Size:
    """The output's shape, ``f(x).shape``: the Jacobian's dimensions before x's."""
    want = run.problem.expected
    return want.shape[: want.dim() - run.problem.x.dim()]
