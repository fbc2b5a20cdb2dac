"""The checkers of ``02_jacobians_hessians.ipynb``'s exercises (public in ``ah.checks``).

Each runs the learner's work on a table of problems, an example and probes
beyond it, and judges each run with a table of named checks: the mechanism the exercise
teaches (backward passes at x, no Hessian formed), what the code left changed, then the
result's type, dtype, shape and values against PyTorch's own answer. The tables live in
private modules, one per exercise: :mod:`._shapes`, :mod:`._loop`,
:mod:`._hvp`.
"""

from __future__ import annotations

from collections.abc import Mapping

from autograd_helpers._common.validate import require_str
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.problems import Exercise, Problem, label_of, run_exercise
from autograd_helpers.checks.jacobians import _hvp as hvp
from autograd_helpers.checks.jacobians import _loop as loop
from autograd_helpers.checks.jacobians._shapes import judge, validate
from autograd_helpers.checks.jacobians._shapes_setup import ShapesSetUp, remembered_set_up

__all__ = [
    "check_hvp",
    "check_jacobian_loop",
    "check_jacobian_shapes",
    "set_up_jacobian_shapes",
]


def _judged(
    fn: object,
    label: str,
    problems: tuple[Problem, ...],
    exercise: Exercise,
    passed: str,
) -> CheckResult:
    """``fn`` run on every problem: the first verdict, or a pass (``passed`` says what held;
    ``{count}`` in it is the number of problems)."""
    verdict, notes = run_exercise(label, fn, exercise, problems)
    if verdict is not None:
        return verdict
    probed = "; ".join(p.probes for p in problems[1:])
    tried = f"Tried: {problems[0].description}, then {probed}."
    title = f"{label} passed: {passed.format(count=len(problems))}"
    return CheckResult("passed", title, (tried, *notes))


def check_jacobian_loop(fn: object, *, name: str | None = None) -> CheckResult:
    """Check a learner's ``fn(f, x)`` that builds the Jacobian of ``f`` at ``x`` row by row.

    ``fn`` gets copies of the points of :func:`._loop.problems`: the chapter's
    ``tanh(W @ x)``, then a scalar output, a matrix output, 0-d inputs and outputs, a wide
    Jacobian of odd size, size-1 dimensions, a one-element output of shape ``(1,)``,
    Jacobian entries above 1e4, a float32 input at edge values. Its result
    must have shape ``f(x).shape + x.shape`` and x's dtype, and match
    :func:`torch.autograd.functional.jacobian`.

    Refused: a call that returns the whole Jacobian, under any name (that one,
    ``torch.func.jacrev``/``jacfwd``, the course's ``jacobian_by_rows``); finite
    differences (``f`` evaluated away from ``x``) and no derivative at all (no backward
    pass), each point of a ``vmap`` batch included; ``f`` evaluated in a lower precision
    than ``x``; changing the ``x`` it is given, ``f``'s attributes, the notebook's
    variables, torch's settings or its random state.
    Also refused: ``ah.engine.replay_backward`` (section 2's model of the engine).
    Accepted with a note: rows batched with ``torch.func.vmap`` or ``is_grads_batched=True``
    (which batches with the legacy vmap), columns from forward mode or from
    ``torch.autograd.functional.jvp`` (the double-backward trick, not forward mode), ``f``
    evaluated again for each row, a NaN replaced (``nan_to_num``, a selection on ``isnan``).
    Values are compared in float64 to 1e-7 relative (float64's precision, as
    ``check_function``'s), in float32 to 1e-4.

    Args:
        fn: the learner's function; ``...`` means "not implemented yet".
        name: how to call it in the feedback (default: its ``__name__``).

    Example::

        >>> def rows(f, x):
        ...     x = x.detach().requires_grad_()
        ...     y = f(x).reshape(-1)
        ...     grads = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(len(y))]
        ...     return torch.stack(grads).reshape(f(x).shape + x.shape)
        >>> check_jacobian_loop(rows).passed
        True
        >>> print(check_jacobian_loop(lambda f, x: torch.func.jacrev(f)(x)).title)
        your function: it calls `torch.func.jacrev`, which returns the whole Jacobian.
    """
    return _judged(
        fn,
        label_of(fn, name, "check_jacobian_loop"),
        loop.problems(),
        loop.EXERCISE,
        "on all {count} problems its Jacobian has the shape output + input and x's dtype, "
        "and matches torch.autograd.functional.jacobian.",
    )


def check_hvp(fn: object, *, name: str | None = None) -> CheckResult:
    r"""Check a learner's ``fn(f, x, v)`` that returns :math:`H v` without forming :math:`H`.

    ``fn`` gets copies of the points of :func:`._hvp.problems`: a cubic, then a
    logistic loss, a matrix x, an x of shape ``(3, 1)``, a 0-d x, an x of 35 entries, a
    function that carries a 4 × 4 matrix, ``v = 0``, a tiny ``v``, a large ``v`` (the
    first problem's times 10^6: H v is linear in v, so a clipped H v fails), a float32 x.
    Its result must have x's shape and dtype and match
    :func:`torch.autograd.functional.hvp` (in float64 to 1e-7 relative).

    Refused: the library's ``hessian``, ``hvp``, ``vhp`` and the Jacobian functions, under
    any name, and ``ah.engine.replay_backward``; the Hessian's rows from batched passes
    (``vmap`` of a pullback or of ``jvp``, ``is_grads_batched``: ``n`` rows or more,
    summed over calls, however the batches are cut); more than three backward passes on
    one problem; finite differences of the gradient (``f`` evaluated away from ``x``, each
    point of a ``vmap`` batch included); ``f`` evaluated in a lower precision than ``x``;
    changing the ``x`` or ``v`` it is given, ``f``'s attributes, the notebook's variables,
    torch's settings or its random state. Accepted with a note: forward-over-reverse
    (``torch.func.jvp`` or ``linearize`` of the gradient), a tensor of ``n × n`` numbers
    that is no Hessian (``torch.outer(g, v).trace()``), zeros returned for ``v = 0``
    (right, and not needed; a special case for a small nonzero ``v`` fails), and a NaN
    replaced (``nan_to_num``, a selection on ``isnan``: it hides every NaN).

    Args:
        fn: the learner's function; ``...`` means "not implemented yet".
        name: how to call it in the feedback (default: its ``__name__``).

    Example::

        >>> def hvp(f, x, v):
        ...     x = x.detach().requires_grad_()
        ...     (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        ...     (hv,) = torch.autograd.grad(g, x, v)
        ...     return hv
        >>> check_hvp(hvp).passed
        True
    """
    return _judged(
        fn,
        label_of(fn, name, "check_hvp"),
        hvp.problems(),
        hvp.EXERCISE,
        "on all {count} problems H v has x's shape and dtype and matches "
        "torch.autograd.functional.hvp, from at most "
        f"{hvp.MAX_BACKWARD_PASSES} backward passes at x, no batch of the Hessian's rows "
        "and none of the library's Hessian or Jacobian functions.",
    )


def set_up_jacobian_shapes(problems: object) -> ShapesSetUp:
    """Remember the shapes exercise's problems as the notebook sets them up.

    Call it in the cell that defines ``problems`` and pass the result to
    :func:`check_jacobian_shapes` as ``set_up``: a later cell that drops, adds or replaces a
    problem, replaces ``problems`` or changes an input in place is then said, and the
    predictions are judged against the problems as set up. Called again on problems that
    share a description with those of an earlier call, it returns the same problems anew
    (the set-up cell run again: functions of the same code, inputs of the same shapes) or,
    when they differ (a problem changed, then set up again), the earlier set-up, so that
    the change is still said.

    Args:
        problems: ``{description: (f, x)}``, or ``(f, (x, y))`` for several inputs.

    Raises:
        TypeError, ValueError: a malformed ``problems`` (the notebook's mistake).

    Example::

        >>> problems = {"x.sum()": (torch.sum, torch.ones(3, 4))}
        >>> set_up = set_up_jacobian_shapes(problems)
        >>> _ = problems.pop("x.sum()")
        >>> result = check_jacobian_shapes([(3, 4)], problems, set_up=set_up)
        >>> result.passed, "'x.sum()' is missing" in result.title
        (False, True)
    """
    validate(problems, "set_up_jacobian_shapes")
    assert isinstance(problems, Mapping)
    return remembered_set_up(problems)


def check_jacobian_shapes(
    predicted: object,
    problems: object,
    *,
    name: str = "predicted",
    set_up: ShapesSetUp | None = None,
) -> CheckResult:
    """Check predicted Jacobian shapes, one per problem, against what PyTorch computes.

    A shape may be written as a tuple or list of ints, a ``torch.Size``, NumPy or torch
    integers; for a function of several inputs, a tuple with one shape per input. A wrong
    one is explained (which mistake it looks like). The checker runs the problems on copies
    of their tensors and puts torch's settings and random state back after each; what the
    learner's cell left changed in the notebook it does not undo, it judges: a problem's
    tensor (or one its description names, such as ``B``) of another shape, requiring grad,
    with a ``.grad`` or a hook, and grad mode off, anomaly mode on or another default dtype
    fail the check, in plain words. A problem that raises when run (a cell changed ``B``)
    is a verdict too.

    Args:
        predicted: a list of shapes in the order of ``problems``; ``...`` means "not
            implemented yet".
        problems: ``{description: (f, x)}``, or ``(f, (x, y))`` for several inputs. A
            malformed problem (not ``(f, inputs)``, inputs not floating-point tensors)
            raises ``TypeError``/``ValueError`` naming it: the notebook's mistake.
        name: how to call the predictions in the feedback.
        set_up: the problems as the notebook set them up (:func:`set_up_jacobian_shapes`):
            with it, ``problems`` that departs from them is a verdict (a problem dropped,
            added, replaced or changed in place, ``problems`` replaced, even by something
            that is no mapping), and the predictions are judged against the set-up.

    Example::

        >>> problems = {"x.sum()": (torch.sum, torch.ones(3, 4))}
        >>> check_jacobian_shapes([(3, 4)], problems).passed
        True
        >>> print(check_jacobian_shapes([(4, 3)], problems).message)
        ❌ predicted: 1 of 1 shapes are off.
           ✗ x.sum(): you said (4, 3); it is (3, 4), the output's shape () followed by the input's
    """
    require_str("check_jacobian_shapes", "name", name)
    if set_up is not None and not isinstance(set_up, ShapesSetUp):
        raise TypeError(
            "check_jacobian_shapes(): set_up must come from set_up_jacobian_shapes(), got "
            f"{type(set_up).__name__}"
        )
    return judge(predicted, problems, name, set_up)
