"""``check_function`` and ``check_tensor``: the checkers any exercise can use.

Public through :mod:`autograd_helpers.checks`; ``check_function`` checks the notebook's
options here, then runs the three steps of :mod:`autograd_helpers.checks.function._steps` on
each input in turn (:mod:`autograd_helpers.checks.function._runs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.validate import require_bool, require_option
from autograd_helpers.checks._core.feedback import CheckResult, failed, stub_verdict
from autograd_helpers.checks._core.numeric import worst_mismatch
from autograd_helpers.checks._core.trial import Options, with_tolerances
from autograd_helpers.checks.function._inputs import checked_wrt
from autograd_helpers.checks.function._runs import counted, float32_problem, planned_runs, run_each

__all__ = ["check_function", "check_tensor"]


def _name_of(fn: object) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def check_function(
    fn: object,
    *inputs: object,
    reference: Callable[..., Any] | None = None,
    grad_reference: Callable[..., Any] | None = None,
    wrt: Sequence[int] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    eps: float = 1e-6,
    name: str | None = None,
    allow_callable: bool = False,
    also: Sequence[tuple[object, ...]] = (),
    probes: str | Sequence[tuple[object, ...]] | None = None,
) -> CheckResult:
    r"""Check a learner's ``torch.autograd.Function`` on example inputs.

    Runs ``fn`` on ``inputs`` in float64, then checks, stopping at the first problem:

    1. forward: it runs; it returns tensors (the reference's structure, shape, dtype), without
       NaN/inf, without changing its inputs in place (unless it marks them dirty with
       ``ctx.mark_dirty``), and matching ``reference`` if given. Integer and boolean
       outputs (indices, masks) and outputs marked non-differentiable are compared by
       value and left out of the gradient checks;
    2. backward: it runs; it returns one gradient per input (``None`` for non-tensors), each a
       tensor of its input's shape (or one autograd can sum down to it) and dtype, finite,
       not ``None`` where one is needed;
    3. the gradients, for a random ``grad_output``, match ``reference``'s autograd gradients
       and central finite differences of ``fn`` itself (or, instead of both, the gradients of
       ``grad_reference``: for Functions whose gradient is deliberately not the derivative,
       such as a straight-through estimator). Beyond ``ELEMENTWISE_LIMIT`` (1024) input
       elements, finite differences are taken along random directions, as gradcheck's fast
       mode does, instead of element by element. Against the reference (and
       ``grad_reference``) the tolerances are float64's (1e-12 absolute, 1e-7 relative), so
       a gradient off by 0.1%, or only where it is tiny, fails, unless finite differences
       side with the answer (the reference's own rounding);
    4. backward runs again: twice on one graph (the same gradient: no saved tensor changed
       in place), with a zero, a doubled, a negated and a 1000 times larger ``grad_output``
       (backward is linear in it, not clipped), and, for a Function of several inputs,
       with each input alone requiring grad (as ``ctx.needs_input_grad`` then says: the
       same gradient for it).

    Throughout, what the code changes that outlives the call fails: a global variable, a
    global list, dict, set or deque (or one inside it, or inside a tuple, or the one behind
    a bound method), a NumPy array or a tensor of the notebook it reaches by name, an
    attribute of a class, plain object or function of the notebook (or of an object it
    holds), a default argument, an attribute set on a module or ``torch.Tensor``, a
    ``functools.lru_cache`` that grew (all put back; in the notebook's functions it calls
    too), ``.grad`` of a tensor it was handed, a setting for the whole process (print
    options, warnings filters, the default device, environment variables...), a reseed of
    torch's, NumPy's or Python's random number generator left so at the end of the call
    (put back; a state set back, or ``fork_rng``, passes). A right answer that calls
    ``nan_to_num`` (or patches NaN with ``torch.where`` on ``isnan``) or runs autograd
    inside ``backward``, or whose forward marks its input dirty, passes with a note.

    ``fn`` is called with copies of the inputs that are not leaves, as the tensors in a
    learner's own graph are: a Function that writes into its input and marks it dirty can
    be checked, and the notebook's tensors are never changed.

    The random ``grad_output`` comes from the checker's own generator: the notebook's random
    state is neither used nor changed, and it never equals an input (so a backward that
    uses ``x`` where ``grad_output`` belongs cannot pass by coincidence).

    Args:
        fn: a ``torch.autograd.Function`` subclass (called through ``.apply``); with
            ``allow_callable``, any differentiable callable.
        *inputs: example inputs. Floating-point tensors are copied to float64 leaves;
            anything else is passed as is and must get a ``None`` gradient. Every tensor
            to differentiate needs at least one element. A sparse input is passed as a
            constant: its gradient is not checked.
        reference: callable with the expected forward (and, if differentiable, gradient).
        grad_reference: callable whose gradients are expected instead (skips finite
            differences).
        wrt: indices of the inputs to differentiate (default: every floating-point tensor).
        atol, rtol: tolerances, as in :func:`torch.allclose`, each in (0, 1). By default
            1e-5 and 1e-3 against finite differences, and float64's rounding (1e-12, 1e-7)
            against ``reference`` or ``grad_reference``; a value given holds for both.
        eps: finite-difference step, from 1e-10 to 1e-2 (the inputs are float64).
        name: how to call ``fn`` in the feedback (default: its ``__name__``).
        allow_callable: accept a plain function too (default ``False``: an exercise that
            asks for a Function is not answered by ``torch.tanh``).
        also: more example inputs, each a tuple like ``inputs``, checked the same way after
            them: a mistake that one example hides (a hard-coded constant, a shape that
            happens to fit) shows on another.
        probes: inputs beyond the examples, at the edges of the function's domain:
            ``"edges"`` for a function of one tensor (0, tiny values from ±1e-30 to 1e-4,
            rounding ties, where float32's ``exp`` overflows, large values up to 300 and
            -1000; as a row, a 3 × 7 matrix and a scalar), or a list of input tuples.
            Each is checked like an example, and then every input once more in float32,
            where a NaN or inf that the reference does not have, or a value off by more
            than float32's rounding, fails.

    Returns:
        A :class:`CheckResult` (``.passed``, ``.message``).

    Raises:
        TypeError, ValueError: the check is set up wrong (bad options, or the reference
            fails on the inputs): the notebook's mistake, not the learner's.

    Example::

        >>> class Cube(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x**3
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (x,) = ctx.saved_tensors
        ...         return grad_output * 3 * x**2
        >>> check_function(Cube, torch.randn(4), reference=lambda x: x**3).passed
        True
    """
    options = _asked_options(
        fn,
        inputs,
        name=name,
        reference=reference,
        grad_reference=grad_reference,
        wrt=wrt,
        atol=atol,
        rtol=rtol,
        eps=eps,
        allow_callable=allow_callable,
    )
    runs, probed = planned_runs(inputs, also, probes)
    result, notes = run_each(fn, runs, options, wrt, allow_callable=allow_callable, probes=probes)
    if not result.passed:
        return result
    if probed:
        problem = float32_problem(fn, runs, wrt, options)
        if problem is not None:
            return problem
    return counted(result, notes, len(runs), len(probed), bool(also))


def _asked_options(
    fn: object,
    inputs: tuple[object, ...],
    *,
    name: str | None,
    reference: Callable[..., Any] | None,
    grad_reference: Callable[..., Any] | None,
    wrt: Sequence[int] | None,
    atol: float | None,
    rtol: float | None,
    eps: float,
    allow_callable: bool,
) -> Options:
    """The notebook's options, checked (a wrong one is the notebook's mistake: it raises)."""
    me = "check_function"
    if name is not None and not isinstance(name, str):
        raise TypeError(f"{me}(): name must be a str, got {type(name).__name__}")
    require_bool(me, "allow_callable", allow_callable)
    for option, value in {"atol": atol, "rtol": rtol}.items():
        if value is not None:
            require_option(me, option, value, "a number in (0, 1)", lambda v: 0 < v < 1)
    require_option(me, "eps", eps, "a number from 1e-10 to 1e-2", lambda v: 1e-10 <= v <= 1e-2)
    for option, given in {"reference": reference, "grad_reference": grad_reference}.items():
        if given is not None and not callable(given):
            raise TypeError(f"{me}(): {option} must be callable, got {type(given).__name__}")
    if name is None:
        name = "your answer" if fn is Ellipsis or fn is None else _name_of(fn)
    asked = Options(
        label=name,
        wrt=checked_wrt(inputs, wrt),
        reference=reference,
        grad_reference=grad_reference,
        eps=float(eps),
    )
    return with_tolerances(asked, atol, rtol)


def check_tensor(
    value: object,
    expected: Tensor,
    *,
    name: str = "your answer",
    atol: float = 1e-6,
    rtol: float = 1e-4,
) -> CheckResult:
    """Check a tensor the learner computed (a gradient, a Jacobian...) against ``expected``.

    Args:
        value: the learner's value; ``...`` (the stub) means "not implemented yet".
        expected: the right answer.
        name: how to call the value in the feedback.
        atol, rtol: tolerances, as in :func:`torch.allclose`.

    Example::

        >>> check_tensor(torch.ones(2), torch.ones(2), name="x.grad").passed
        True
    """
    if not isinstance(expected, Tensor):
        raise TypeError(
            f"check_tensor(): expected must be a torch.Tensor, got {type(expected).__name__}"
        )
    if expected.is_meta:
        raise ValueError("check_tensor(): expected is a meta tensor, which has no values")
    if not isinstance(name, str):
        raise TypeError(f"check_tensor(): name must be a str, got {type(name).__name__}")
    for option, number in {"atol": atol, "rtol": rtol}.items():
        require_option("check_tensor", option, number, "a non-negative number", lambda v: v >= 0)
    if (stub := stub_verdict(name, value)) is not None:
        return stub
    if isinstance(value, int | float) and not isinstance(value, bool) and expected.dim() == 0:
        value = torch.tensor(value, dtype=expected.dtype)
    if not isinstance(value, Tensor):
        return failed(name, f"expected a tensor, got {type(value).__name__}.")
    if value.is_meta:
        return failed(name, "it is a meta tensor, which holds no values.")
    if value.shape != expected.shape:
        return failed(name, f"shape {tuple(value.shape)}, expected {tuple(expected.shape)}.")
    if value.dtype != expected.dtype:
        return failed(name, f"dtype {value.dtype}, expected {expected.dtype}.")
    mismatch = worst_mismatch(value, expected, atol=atol, rtol=rtol)
    if mismatch is not None:
        return failed(name, "the values are off.", mismatch.describe("", "yours", "expected"))
    size = "a scalar" if expected.dim() == 0 else f"shape {tuple(expected.shape)}"
    return CheckResult("passed", f"{name} passed: {size}, every value matches.")
