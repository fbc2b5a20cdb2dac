"""The checkers of ``02_jacobians_hessians.ipynb``'s exercises (public in ``ah.checks``).

Each runs the learner's function on a few problems chosen so that the usual mistakes show
(a tall and a non-square Jacobian, a matrix input, a matrix output), compares with PyTorch's
own answer, and turns what went wrong into a hint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._checking.feedback import (
    CheckResult,
    failed,
    from_learner_error,
    not_implemented,
)
from autograd_helpers._checking.numeric import worst_mismatch
from autograd_helpers._checking.runner import Outcome, run_learner_code
from autograd_helpers._checking.shortcuts import ShortcutTakenError, shortcuts_refused
from autograd_helpers._checking.submission import STUB_HINT

__all__ = ["check_hvp", "check_jacobian_loop", "check_jacobian_shapes"]

DOUBLE = torch.float64
JACOBIAN_SHORTCUTS = (
    "torch.autograd.functional.jacobian",
    "torch.func.jacrev",
    "torch.func.jacfwd",
)
HESSIAN_SHORTCUTS = (
    "torch.autograd.functional.hessian",
    "torch.autograd.functional.hvp",
    "torch.autograd.functional.vhp",
    *JACOBIAN_SHORTCUTS,
    "torch.func.hessian",
)
# Error messages a learner meets on the way, and what to do about each.
ERROR_HINTS = (
    (
        "backward through the graph a second time",
        "Hint: each call of `torch.autograd.grad` frees the graph it went through; the next one "
        "needs it again, so pass `retain_graph=True` (or `create_graph=True`, which keeps it).",
    ),
    (
        "does not require grad and does not have a grad_fn",
        "Hint: autograd can only differentiate what it recorded. Make `x` a leaf that requires "
        "grad before calling `f` (`x = x.detach().requires_grad_()`), and to differentiate a "
        "gradient again, compute it with `create_graph=True`.",
    ),
    (
        "grad can be implicitly created only for scalar outputs",
        "Hint: differentiate one scalar at a time (`y.reshape(-1)[i]`), or pass `grad_outputs`.",
    ),
    (
        "appears to not have been used in the graph",
        "Hint: differentiate with respect to the very tensor you passed to `f`.",
    ),
)


@dataclass(frozen=True)
class _Problem:
    description: str
    f: Callable[[Tensor], Tensor]
    x: Tensor


def _randn(generator: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=generator, dtype=DOUBLE)


def _with_hint(result: CheckResult, message: str) -> CheckResult:
    for pattern, hint in ERROR_HINTS:
        if pattern in message:
            return dataclasses.replace(result, details=(*result.details, hint))
    return result


def _from_outcome(label: str, outcome: Outcome, problem: _Problem) -> CheckResult:
    assert outcome.error is not None
    if isinstance(outcome.error.exception, ShortcutTakenError):
        return failed(
            label,
            f"it calls `{outcome.error.exception.name}`, which does the whole job.",
            "The exercise is to build it yourself from `torch.autograd.grad` calls; the "
            "checker compares your result with the library's.",
        )
    result = from_learner_error(label, f"your function (on {problem.description})", outcome)
    return _with_hint(result, str(outcome.error.exception))


def _result_problem(label: str, value: object, want: Tensor, problem: _Problem) -> str | None:
    """What is wrong with a returned tensor's type, dtype or shape, or ``None``."""
    if not isinstance(value, Tensor):
        hint = " (stack the rows: `torch.stack(rows)`)" if isinstance(value, list | tuple) else ""
        return f"on {problem.description} it returned a {type(value).__name__}, not a tensor{hint}."
    if value.dtype != want.dtype:
        return f"on {problem.description} it returned dtype {value.dtype}, expected {want.dtype}."
    return None


def _check_problems(
    label: str,
    fn: object,
    problems: Sequence[_Problem],
    expected: Callable[[_Problem], Tensor],
    shortcuts: Sequence[str],
    call: Callable[[Any, _Problem], Any],
    judge: Callable[[Tensor, Tensor, _Problem], CheckResult | None],
) -> CheckResult | None:
    """Run ``fn`` on every problem; the first verdict that is not a pass, or ``None``."""
    if fn is Ellipsis:
        return not_implemented(label, STUB_HINT)
    if not callable(fn):
        return failed(label, f"expected a function, got {type(fn).__name__}.")
    for problem in problems:
        with shortcuts_refused(*shortcuts):
            outcome = run_learner_code(call, fn, problem)
        if outcome.error is not None:
            return _from_outcome(label, outcome, problem)
        want = expected(problem)
        issue = _result_problem(label, outcome.value, want, problem)
        if issue is not None:
            return failed(label, issue)
        verdict = judge(outcome.value, want, problem)
        if verdict is not None:
            return verdict
    return None


# --- exercise: a Jacobian from a loop of autograd.grad ------------------------------------------


def _jacobian_problems() -> list[_Problem]:
    generator = torch.Generator().manual_seed(2)
    weight = _randn(generator, 4, 3)
    return [
        _Problem(
            "tanh(W @ x), x of shape (3,), W of shape (4, 3)",
            lambda x: torch.tanh(weight @ x),
            _randn(generator, 3),
        ),
        _Problem(
            "(x ** 2).sum(), x of shape (2, 3)", lambda x: (x**2).sum(), _randn(generator, 2, 3)
        ),
        _Problem("x.exp().T, x of shape (2, 3)", lambda x: x.exp().T, _randn(generator, 2, 3)),
    ]


def _judge_jacobian(label: str) -> Callable[[Tensor, Tensor, _Problem], CheckResult | None]:
    def judge(got: Tensor, want: Tensor, problem: _Problem) -> CheckResult | None:
        out_shape = want.shape[: want.dim() - problem.x.dim()]
        if got.shape != want.shape:
            details = [
                f"A Jacobian's shape is the output's shape {tuple(out_shape)} followed by the "
                f"input's {tuple(problem.x.shape)}: row i belongs to output element i."
            ]
            rows, cols = out_shape.numel(), problem.x.numel()
            if got.shape == (rows, cols):
                details.append(f"Hint: reshape the stacked rows to {tuple(want.shape)}.")
            elif got.shape == (*problem.x.shape, *out_shape):
                details.append("Hint: the input's dimensions come first in yours: transposed.")
            return failed(
                label,
                f"on {problem.description} the Jacobian has shape {tuple(got.shape)}, expected "
                f"{tuple(want.shape)}.",
                *details,
            )
        mismatch = worst_mismatch(got, want, atol=1e-8, rtol=1e-6)
        if mismatch is None:
            return None
        details = [mismatch.describe("J", "yours", "autograd's")]
        flat_got, flat_want = (
            got.reshape(out_shape.numel(), -1),
            want.reshape(out_shape.numel(), -1),
        )
        if torch.allclose(flat_got, flat_want.cumsum(0)):
            details.append(
                "Hint: each row is the sum of the rows before it: `.backward()` adds into "
                "`x.grad`. Use `torch.autograd.grad`, which returns the gradient instead."
            )
        return failed(label, f"on {problem.description} the values are off.", *details)

    return judge


def check_jacobian_loop(fn: object, *, name: str = "jacobian_loop") -> CheckResult:
    """Check a learner's ``fn(f, x)`` that builds the Jacobian of ``f`` at ``x`` row by row.

    ``fn`` is run on three problems (a non-square Jacobian, a scalar output of a matrix, a
    matrix output) with float64 inputs that do not require grad, and compared with
    :func:`torch.autograd.functional.jacobian`. Calling that function (or
    ``torch.func.jacrev``/``jacfwd``) is refused: the exercise is the loop.

    Args:
        fn: the learner's function; ``...`` means "not implemented yet".
        name: how to call it in the feedback.

    Example::

        >>> from autograd_helpers.jacobians import jacobian_by_rows
        >>> check_jacobian_loop(jacobian_by_rows).passed
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"check_jacobian_loop(): name must be a str, got {type(name).__name__}")
    problems = _jacobian_problems()
    verdict = _check_problems(
        name,
        fn,
        problems,
        lambda p: torch.autograd.functional.jacobian(p.f, p.x),
        JACOBIAN_SHORTCUTS,
        lambda learner, p: learner(p.f, p.x.clone()),
        _judge_jacobian(name),
    )
    if verdict is not None:
        return verdict
    return CheckResult(
        "passed",
        f"{name} passed: on all {len(problems)} problems its Jacobian has the shape output + "
        "input and matches torch.autograd.functional.jacobian.",
    )


# --- exercise: a Hessian-vector product by double backward -------------------------------------


def _hvp_problems() -> list[tuple[_Problem, Tensor]]:
    generator = torch.Generator().manual_seed(3)
    features = _randn(generator, 6, 4)
    labels = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0], dtype=DOUBLE)
    return [
        (
            _Problem(
                "(x ** 3).sum() + x[0] * x[1], x of shape (3,)",
                lambda x: (x**3).sum() + x[0] * x[1],
                _randn(generator, 3),
            ),
            _randn(generator, 3),
        ),
        (
            _Problem(
                "a logistic loss, x of shape (4,)",
                lambda x: torch.nn.functional.softplus(-labels * (features @ x)).mean(),
                _randn(generator, 4),
            ),
            _randn(generator, 4),
        ),
        (
            _Problem(
                "(x @ x.T).sin().sum(), x of shape (2, 3)",
                lambda x: (x @ x.T).sin().sum(),
                _randn(generator, 2, 3),
            ),
            _randn(generator, 2, 3),
        ),
    ]


def check_hvp(fn: object, *, name: str = "hvp") -> CheckResult:
    r"""Check a learner's ``fn(f, x, v)`` that returns :math:`H v` without forming :math:`H`.

    ``fn`` is run on three scalar functions (one with a matrix input) and compared with
    :func:`torch.autograd.functional.hvp`. Forming the Hessian (``hessian``, a Jacobian of
    the gradient) or calling the library's ``hvp``/``vhp`` is refused.

    Args:
        fn: the learner's function; ``...`` means "not implemented yet".
        name: how to call it in the feedback.

    Example::

        >>> def hvp(f, x, v):
        ...     x = x.detach().requires_grad_()
        ...     (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        ...     (hv,) = torch.autograd.grad(g, x, v)
        ...     return hv
        >>> check_hvp(hvp).passed
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"check_hvp(): name must be a str, got {type(name).__name__}")
    pairs = _hvp_problems()
    vectors = {id(problem): v for problem, v in pairs}

    def expected(problem: _Problem) -> Tensor:
        return torch.autograd.functional.hvp(problem.f, problem.x, vectors[id(problem)])[1]  # type: ignore[no-any-return]

    def judge(got: Tensor, want: Tensor, problem: _Problem) -> CheckResult | None:
        if got.shape != want.shape:
            return failed(
                name,
                f"on {problem.description} it returned shape {tuple(got.shape)}, expected "
                f"{tuple(want.shape)}, the shape of x.",
                "Hint: H v has one entry per entry of x: it is the gradient of the scalar "
                "`(g * v).sum()`, not that scalar.",
            )
        mismatch = worst_mismatch(got, want, atol=1e-8, rtol=1e-6)
        if mismatch is None:
            return None
        details = [mismatch.describe("Hv", "yours", "autograd's")]
        x = problem.x.detach().requires_grad_()
        (gradient,) = torch.autograd.grad(problem.f(x), x)
        if torch.allclose(got, gradient):
            details.append("Hint: that is the gradient g itself; H v is the gradient of g · v.")
        elif torch.allclose(got, gradient * vectors[id(problem)]):
            details.append("Hint: that is g * v; H v is the gradient of the scalar (g * v).sum().")
        return failed(name, f"on {problem.description} the values are off.", *details)

    verdict = _check_problems(
        name,
        fn,
        [problem for problem, _ in pairs],
        expected,
        HESSIAN_SHORTCUTS,
        lambda learner, p: learner(p.f, p.x.clone(), vectors[id(p)].clone()),
        judge,
    )
    if verdict is not None:
        return verdict
    return CheckResult(
        "passed",
        f"{name} passed: on all {len(pairs)} problems H v matches "
        "torch.autograd.functional.hvp, and the Hessian was never formed.",
    )


# --- exercise: predict a Jacobian's shape -------------------------------------------------------

Shapes = Any  # a tuple of ints, or (for several inputs or outputs) a tuple of those


def _shape_of(jacobian: object) -> Shapes:
    if isinstance(jacobian, Tensor):
        return tuple(jacobian.shape)
    assert isinstance(jacobian, tuple)
    return tuple(_shape_of(part) for part in jacobian)


def _normalised(answer: object) -> Shapes | None:
    """A prediction as nested tuples of ints, or ``None`` when it is not shape-like."""
    if isinstance(answer, int) and not isinstance(answer, bool):
        return (answer,)  # `12` for a 1-D shape
    if isinstance(answer, torch.Size):
        return tuple(answer)
    if isinstance(answer, tuple | list):
        if all(isinstance(a, int) and not isinstance(a, bool) for a in answer):
            return tuple(answer)
        parts = [_normalised(a) for a in answer]
        return None if any(p is None for p in parts) else tuple(parts)
    return None


def check_jacobian_shapes(
    predicted: object,
    problems: Mapping[str, tuple[Callable[..., Tensor], Tensor | tuple[Tensor, ...]]],
    *,
    name: str = "predicted",
) -> CheckResult:
    """Check predicted Jacobian shapes, one per problem, against what PyTorch computes.

    Args:
        predicted: a list of shapes in the order of ``problems``, each a tuple of ints (or,
            for a function of several inputs, a tuple with one shape per input);
            ``...`` means "not implemented yet".
        problems: ``{description: (f, x)}``, or ``(f, (x, y))`` for several inputs.
        name: how to call the predictions in the feedback.

    Example::

        >>> problems = {"x.sum(), x: (3, 4)": (torch.sum, torch.ones(3, 4))}
        >>> check_jacobian_shapes([(3, 4)], problems).passed
        True
    """
    if not isinstance(problems, Mapping) or not problems:
        raise ValueError("check_jacobian_shapes(): problems must be a non-empty mapping")
    for description, problem in problems.items():
        if not (isinstance(problem, tuple) and len(problem) == 2 and callable(problem[0])):
            raise TypeError(
                f"check_jacobian_shapes(): problems[{description!r}] must be (f, inputs)"
            )
    if predicted is Ellipsis:
        return not_implemented(name, STUB_HINT)
    if not isinstance(predicted, list | tuple):
        return failed(name, f"expected a list of shapes, got {type(predicted).__name__}.")
    if len(predicted) != len(problems):
        return failed(
            name, f"{len(predicted)} predictions for {len(problems)} problems: one per problem."
        )
    lines, wrong = [], 0
    for (description, (f, inputs)), answer in zip(problems.items(), predicted, strict=True):
        truth = _shape_of(torch.autograd.functional.jacobian(f, inputs))
        given = _normalised(answer)
        if given == truth:
            lines.append(f"✓ {description}: {truth}")
            continue
        wrong += 1
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        out = tuple(f(*args).shape)
        each = " for each input" if isinstance(inputs, tuple) else ""
        lines.append(
            f"✗ {description}: you said {answer!r}; it is {truth}, the output's shape {out} "
            f"followed by the input's{each}"
        )
    if wrong:
        return failed(name, f"{wrong} of {len(problems)} shapes are off.", *lines)
    return CheckResult(
        "passed", f"{name} passed: all {len(problems)} shapes are right.", tuple(lines)
    )
