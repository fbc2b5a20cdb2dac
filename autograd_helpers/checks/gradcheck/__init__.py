"""The checkers of ``03_gradcheck.ipynb``'s exercises (public in ``ah.checks``).

With them, :func:`explain_gradcheck` (:mod:`.explain`), gradcheck's comparison told in
words: the chapter's teaching tool, which the checkers also use for their hints.

Each is a thin entry that validates what the notebook passed (its mistakes raise) and runs
a table of named checks on what the learner wrote (its mistakes are verdicts):
:data:`~autograd_helpers.checks.gradcheck._settings.SETTINGS_CHECKS` and
:data:`~autograd_helpers.checks.gradcheck._double.DOUBLE_CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers._common.validate import require_callable, require_float_tensor, require_str
from autograd_helpers.checks._core.feedback import CheckResult, failed
from autograd_helpers.checks.gradcheck._double import Double, run_double_checks
from autograd_helpers.checks.gradcheck._settings import (
    Choice,
    notebook_settings,
    run_settings_checks,
)
from autograd_helpers.checks.gradcheck.explain import GradcheckReport, explain_gradcheck

__all__ = [
    "GradcheckReport",
    "check_double_backward",
    "check_gradcheck_settings",
    "explain_gradcheck",
]


def _require_elementwise(me: str, fn: Callable[[Tensor], Tensor], x: Tensor) -> None:
    """``fn`` runs on ``x`` in float64 and returns a tensor of ``x``'s shape."""
    outcome = run_learner_code(fn, x.detach().to(torch.float64))
    if outcome.error is not None:
        raise ValueError(f"{me}(): fn fails on x in float64: {outcome.error.describe()}")
    value = outcome.value
    if not isinstance(value, Tensor) or value.shape != x.shape:
        got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(
            f"{me}(): fn must be elementwise (a tensor of x's shape {tuple(x.shape)}), got {got}"
        )


def check_gradcheck_settings(
    dtype: object,
    eps: object,
    *,
    fn: Callable[[Tensor], Tensor],
    x: Tensor,
    name: str = "your settings",
    reference: Callable[[Tensor], Tensor] | None = None,
    reference_x: Tensor | None = None,
) -> CheckResult:
    """Check a choice of ``dtype`` and ``eps`` for gradcheck on the elementwise ``fn`` at ``x``.

    A check is *meaningful* when the right derivative passes and one that is 1% off fails.
    The choice is read as torch reads it (``float`` is float64; ``eps`` may be a one-element
    tensor or a NumPy number), then judged: torch's global settings as the notebook left
    them, gradcheck on the right derivative and on one 1% off at ``x``, and the right one
    again at 101 points across ``x``'s range. A failing choice is explained: truncation
    error (eps too large), rounding error (eps too small, or a dtype with too few digits).
    Anything else given as ``dtype`` or ``eps`` (a string, a float8 or integer dtype, a
    negative or NaN step, bytes, a bool, a tensor without values) is a verdict that says
    what to write. When the notebook's name for ``fn`` now means another function (the
    learner defined it again), the choice is still judged on ``fn``, with a note saying so.
    With ``reference`` and ``reference_x`` (the exercise's function and points, written out
    in the check cell), an ``fn`` that computes something else, or an ``x`` that holds other
    points, is a verdict: the exercise's setup was changed, and settings chosen for another
    function say nothing about this one.

    Args:
        dtype: the learner's dtype (``torch.float64``, say); ``...`` is a stub.
        eps: the learner's step; ``...`` is a stub.
        fn: the elementwise function the exercise checks.
        x: the points, a floating-point tensor with at least one element.
        name: how to call the choice in the feedback.
        reference: what ``fn`` must compute (the exercise's function, written again).
        reference_x: the points ``x`` must hold (the exercise's points).

    Raises:
        TypeError, ValueError: ``fn``, ``x`` or ``name`` are wrong (the notebook's mistake).

    Example::

        >>> x = torch.linspace(-1, 1, 5)
        >>> check_gradcheck_settings(torch.float64, 1e-6, fn=torch.sin, x=x).passed
        True
    """
    me = "check_gradcheck_settings"
    if (left := notebook_settings()) is not None:  # first: a changed default changes `x` too
        return failed(name if isinstance(name, str) else "your settings", *left)
    if reference is not None or reference_x is not None:
        require_callable(me, "reference", reference)
        require_float_tensor(me, "reference_x", reference_x)
        assert reference is not None and reference_x is not None
        if (changed := _changed_setup(fn, x, reference, reference_x)) is not None:
            return failed(
                name,
                f"the exercise's setup was changed: {changed}.",
                "The checker judges the dtype and eps you chose for the exercise's own "
                "function, `500 + 0.05 * sin(3 t)`, at its own points: settings that make a "
                "check meaningful for another function say nothing about this one. Run the "
                "cell that sets up `shifted`, `points` and `exercise_2` again, and change only "
                "`dtype` and `eps`.",
            )
    require_callable(me, "fn", fn)
    require_float_tensor(me, "x", x)
    require_str(me, "name", name)
    if x.numel() == 0:
        raise ValueError(f"{me}(): x has no elements; give at least one point")
    if x.is_complex() or not bool(x.detach().isfinite().all()):
        raise ValueError(f"{me}(): x must hold finite real numbers")
    _require_elementwise(me, fn, x)
    choice = Choice(dtype, eps, fn, x.detach().clone(), name)
    if (note := _redefined(fn)) is not None:
        choice.notes.append(note)
    return run_settings_checks(choice)


_FINGERPRINT = (-1.9, -0.7, 0.05, 0.3, 1.3, 1.7)  # extra points where fn must match reference


def _changed_setup(
    fn: object, x: object, reference: Callable[[Tensor], Tensor], reference_x: Tensor
) -> str | None:
    """How ``fn`` and ``x`` depart from the exercise's ``reference`` and ``reference_x``."""
    if not callable(fn):
        return f"`fn` is {type(fn).__name__}, not the exercise's function"
    if not isinstance(x, Tensor) or x.is_meta or x.shape != reference_x.shape:
        return "`x` is not the exercise's points"
    if not torch.equal(x.detach().double(), reference_x.detach().double()):
        return "`x` holds other points than the exercise's"
    where = torch.cat([reference_x.detach().double(), torch.tensor(_FINGERPRINT).double()])
    want = reference(where.clone())
    got = run_learner_code(fn, where.clone())
    value = got.value
    same = (
        got.error is None
        and isinstance(value, Tensor)
        and value.shape == want.shape
        and bool(torch.allclose(value.detach().double(), want.double(), rtol=1e-10, atol=0))
    )
    if not same:
        return "`fn` computes something else than the exercise's function"
    return None


def _redefined(fn: Callable[[Tensor], Tensor]) -> str | None:
    """A note when the notebook's name for ``fn`` now means another function.

    The exercise's check cell passes the function it set up; a learner who defines a
    function of the same name again (in the answer cell, say) is told which one is judged.
    """
    name, space = getattr(fn, "__name__", None), getattr(fn, "__globals__", None)
    if not isinstance(name, str) or not isinstance(space, dict):
        return None
    now = space.get(name)
    if now is None or now is fn or not callable(now):
        return None
    return (
        f"Note: `{name}` has been defined again since the exercise set it up. Your settings "
        f"are judged on the exercise's own `{name}`, the one the check was given, not on "
        "the new definition: choosing settings needs no change to the function."
    )


def check_double_backward(
    fn: object,
    *inputs: Tensor,
    reference: Callable[..., Any] | None = None,
    name: str | None = None,
) -> CheckResult:
    """Check that a one-input Function's backward is right *and* differentiable (gradgradcheck).

    The checks, in order (the first that finds a problem gives the verdict):

    1. the first derivative, by ``check_function``: at the example and, with a
       ``reference``, at the edge probes (0, ±1e-30, ±1e-8, ±1, large values), in float64
       and float32;
    2. nothing kept outside ``ctx``: a global, a class attribute, a global list, the
       example tensor changed (each is put back);
    3. two calls in flight keep apart: the first call's gradient does not change when a
       second call's forward runs before its backward;
    4. gradgradcheck at the example: the gradient of backward's result, with respect to the
       input and to ``grad_output``, against finite differences; a failure names what
       forward kept that autograd cannot trace back to the input;
    5. with a ``reference``: the second derivative at the edge probes against the
       reference's, in float64 and then float32 (where the reference has a kink, either
       side's value is right).

    Args:
        fn: the learner's ``torch.autograd.Function`` subclass (one tensor input and output).
        *inputs: one example input (a floating-point tensor; checked in float64).
        reference: the expected forward, built from torch operations (differentiated twice).
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Raises:
        TypeError, ValueError: the notebook set the check up wrong (not one example input,
            a reference that is not callable or fails).

    Example::

        >>> class Square(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * grad_output
        >>> check_double_backward(Square, torch.randn(3)).passed
        True
    """
    me = "check_double_backward"
    if len(inputs) != 1:
        raise ValueError(f"{me}(): give one example input (a one-input Function)")
    (example,) = inputs
    require_float_tensor(me, "the example input", example)
    if reference is not None:
        require_callable(me, "reference", reference)
    if name is not None:
        require_str(me, "name", name)
    label = name or str(getattr(fn, "__name__", "your answer"))
    return run_double_checks(Double(fn, example, reference, label))
