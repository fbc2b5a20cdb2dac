"""Exercise checkers: run the learner's code and explain, in plain words, what is wrong.

Introduced in ``00_start_here.ipynb`` and used after every exercise. A checker never raises
because of the learner's code: a stub, an exception, a wrong shape or a wrong number all
become a :class:`~autograd_helpers.feedback.CheckResult` that says what to fix. It does raise
(``TypeError``/``ValueError``) when the *notebook* calls it with bad options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers.feedback import CheckResult, failed, not_implemented
from autograd_helpers.numeric import finite_difference_vjp, first_mismatch
from autograd_helpers.sandbox import Outcome, OutputLimitError, run_learner_code
from autograd_helpers.submission import STUB_HINT, argument_names, diagnose, entry_points
from autograd_helpers.validate import check_option
from autograd_helpers.verdicts import compare_gradients, inspect_outputs, inspect_raw_gradients

__all__ = ["check_function", "check_tensor"]


def _fail(label: str, title: str, *details: str, printed: str = "") -> CheckResult:
    return failed(label, title, *details, *_printed(printed))


def _printed(text: str, lines: int = 10, width: int = 160) -> tuple[str, ...]:
    """What the learner's code printed, cut to ``lines`` lines of ``width`` characters."""
    shown = [
        line if len(line) <= width else line[: width - 1] + "…"
        for line in text.rstrip().splitlines()
    ]
    if not shown:
        return ()
    more = f"\n(… {len(shown) - lines} more lines)" if len(shown) > lines else ""
    return ("Your code printed:\n" + "\n".join(shown[:lines]) + more,)


def _from_error(label: str, stage: str, outcome: Outcome) -> CheckResult:
    error = outcome.error
    assert error is not None
    if error.is_stub:
        where = f" in `{error.function}`" if error.function else ""
        return not_implemented(
            label,
            f"Replace the `raise NotImplementedError`{where} with your code, then run this "
            "cell again.",
        )
    if isinstance(error.exception, OutputLimitError):
        return _fail(label, f"{stage} printed too much.", str(error.exception), error.where)
    details = [error.describe()]
    if error.where:
        details.append(error.where)
    return _fail(label, f"{stage} raised an exception.", *details, printed=outcome.printed)


def _name_of(fn: object) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _validate(
    inputs: tuple[object, ...],
    wrt: Sequence[int] | None,
    tolerances: Mapping[str, object],
    callables: Mapping[str, object],
) -> list[int]:
    if not inputs:
        raise ValueError("check_function(): give at least one example input")
    for name, value in tolerances.items():
        check_option("check_function", name, value, "a positive number", lambda v: v > 0)
    for name, value in callables.items():
        if value is not None and not callable(value):
            raise TypeError(
                f"check_function(): {name} must be callable, got {type(value).__name__}"
            )
    floating = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.is_floating_point()]
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.is_complex():
            raise ValueError(
                f"check_function(): input {i} is complex; only real inputs are checked"
            )
    if wrt is None:
        if not floating:
            raise ValueError("check_function(): no floating-point tensor among the inputs")
        return floating
    if isinstance(wrt, str | bytes) or not all(isinstance(i, int) for i in wrt):
        raise TypeError(f"check_function(): wrt must be a sequence of input indices, got {wrt!r}")
    bad = [i for i in wrt if i not in floating]
    if bad:
        raise ValueError(f"check_function(): wrt {bad} are not floating-point tensor inputs")
    return list(wrt)


def _float64_leaves(inputs: tuple[object, ...], wrt: list[int]) -> list[object]:
    return [
        x.detach().to(torch.float64).clone().requires_grad_(i in wrt)
        if isinstance(x, Tensor) and x.is_floating_point()
        else x
        for i, x in enumerate(inputs)
    ]


def _run_reference(
    reference: Callable[..., Any], inputs: tuple[object, ...], wrt: list[int]
) -> tuple[list[object], tuple[Tensor, ...]]:
    """The (trusted) reference's float64 leaves and outputs."""
    leaves = _float64_leaves(inputs, wrt)
    result = reference(*leaves)
    outputs = tuple(result) if isinstance(result, tuple) else (result,)
    tensors = tuple(o for o in outputs if isinstance(o, Tensor))
    if len(tensors) != len(outputs):
        raise TypeError("check_function(): the reference must return a tensor or tuple of tensors")
    return leaves, tensors


def _reference_grads(
    leaves: list[object], outputs: tuple[Tensor, ...], wrt: list[int], grad_outputs: list[Tensor]
) -> list[Tensor] | None:
    """The reference's gradients, or ``None`` when it is not differentiable."""
    if not grad_outputs or not all(o.requires_grad for o in outputs):
        return None
    sources = _tensors_at(leaves, wrt)
    grads = torch.autograd.grad(outputs, sources, grad_outputs, allow_unused=True)
    return [torch.zeros_like(s) if g is None else g for g, s in zip(grads, sources, strict=True)]


def _gradient_sources(
    reference_grads: list[Tensor] | None,
    grad_reference: Callable[..., Any] | None,
    inputs: tuple[object, ...],
    wrt: list[int],
    grad_outputs: list[Tensor],
) -> list[tuple[str, list[Tensor]]]:
    """``[(label, expected gradients)]``; ``grad_reference`` replaces the reference's."""
    if grad_reference is not None:
        run = _run_reference(grad_reference, inputs, wrt)
        expected = _reference_grads(*run, wrt, grad_outputs)
        if expected is None:
            raise TypeError("check_function(): grad_reference's output must require grad")
        return [("the expected gradient", expected)]
    return [] if reference_grads is None else [("the reference's gradient", reference_grads)]


def _tensors_on_ctx(outputs: tuple[Tensor, ...]) -> tuple[str, ...]:
    """A note for each tensor forward stored as a plain attribute of ``ctx``."""
    node = next((o.grad_fn for o in outputs if o.grad_fn is not None), None)
    attributes = vars(node) if node is not None and hasattr(node, "__dict__") else {}
    return tuple(
        f"Note: forward stored a tensor as `ctx.{name}`. Save tensors with "
        "`ctx.save_for_backward(...)`: it detects in-place changes that would make the "
        "gradient silently wrong, and does not keep the graph alive in a reference cycle."
        for name, value in attributes.items()
        if isinstance(value, Tensor)
    )


def _tensors_at(values: Sequence[object], indices: Sequence[int]) -> list[Tensor]:
    return [t for i in indices if isinstance(t := values[i], Tensor)]


def check_function(
    fn: object,
    *inputs: object,
    reference: Callable[..., Any] | None = None,
    grad_reference: Callable[..., Any] | None = None,
    wrt: Sequence[int] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    eps: float = 1e-6,
    name: str | None = None,
) -> CheckResult:
    r"""Check a learner's ``torch.autograd.Function`` (or any differentiable callable).

    Runs ``fn`` on ``inputs`` in float64, then checks, stopping at the first problem:

    1. forward: it runs; it returns tensors (the reference's structure, shape, dtype), without
       NaN/inf, without changing its inputs in place, and matching ``reference`` if given;
    2. backward: it runs; it returns one gradient per input (``None`` for non-tensors), each a
       tensor of its input's shape and dtype, finite, not ``None`` where one is needed;
    3. the gradients, for a random ``grad_output``, match ``reference``'s autograd gradients
       and central finite differences of ``fn`` itself (or, instead of both, the gradients of
       ``grad_reference``: for Functions whose gradient is deliberately not the derivative,
       such as a straight-through estimator).

    Args:
        fn: a ``torch.autograd.Function`` subclass (called through ``.apply``) or a callable.
        *inputs: example inputs. Floating-point tensors are copied to float64 leaves;
            anything else is passed as is and must get a ``None`` gradient.
        reference: callable with the expected forward (and, if differentiable, gradient).
        grad_reference: callable whose gradients are expected instead (skips finite
            differences).
        wrt: indices of the inputs to differentiate (default: every floating-point tensor).
        atol, rtol: tolerances, as in :func:`torch.allclose`.
        eps: finite-difference step.
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Returns:
        A :class:`~autograd_helpers.feedback.CheckResult` (``.passed``, ``.message``).

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
    if name is not None and not isinstance(name, str):
        raise TypeError(f"check_function(): name must be a str, got {type(name).__name__}")
    if name is None:
        name = "your answer" if fn is Ellipsis or fn is None else _name_of(fn)
    label = name
    tolerances = {"atol": atol, "rtol": rtol, "eps": eps}
    wrt_list = _validate(
        inputs, wrt, tolerances, {"reference": reference, "grad_reference": grad_reference}
    )
    problem = diagnose(fn, label)
    if problem is not None:
        return problem
    is_function = isinstance(fn, type) and issubclass(fn, Function)
    names = argument_names(fn, len(inputs))
    leaves = _float64_leaves(inputs, wrt_list)
    originals = [x.detach().clone() if isinstance(x, Tensor) else x for x in leaves]
    recorded: list[tuple[object, bool]] = []
    call, plain_call = entry_points(fn, recorded)

    # 1. forward
    outcome = run_learner_code(call, *leaves)
    if outcome.error is not None:
        return _from_error(label, "forward", outcome)
    value = outcome.value
    reference_run = None if reference is None else _run_reference(reference, inputs, wrt_list)
    expected_outputs = (
        None if reference_run is None else tuple(o.detach() for o in reference_run[1])
    )
    verdict = inspect_outputs(value, leaves, originals, names, wrt_list, expected_outputs)
    if verdict is not None:
        return _fail(label, verdict.title, *verdict.details, printed=outcome.printed)
    outputs: tuple[Tensor, ...] = value if isinstance(value, tuple) else (value,)
    generator = torch.Generator().manual_seed(0)  # the same grad_output on every run
    grad_outputs = [
        torch.randn(o.shape, generator=generator, dtype=o.dtype) for o in outputs if o.requires_grad
    ]
    expected_grads = (
        None if reference_run is None else _reference_grads(*reference_run, wrt_list, grad_outputs)
    )
    printed = outcome.printed

    # 2. backward, through the real engine; the spy keeps backward's raw return value
    differentiable = [o for o in outputs if o.requires_grad]
    sources = _tensors_at(leaves, wrt_list)
    outcome = run_learner_code(
        torch.autograd.grad, differentiable, sources, grad_outputs, allow_unused=True
    )
    printed += outcome.printed
    if is_function and recorded:
        raw, changed_grad_output = recorded[0]
        if changed_grad_output:
            return _fail(
                label,
                "backward changed `grad_output` in place.",
                "`grad_output` belongs to autograd, which may pass the same tensor on elsewhere: "
                "compute a new tensor (`grad_output * 2`, not `grad_output.mul_(2)`).",
                printed=printed,
            )
        verdict = inspect_raw_gradients(raw, inputs, leaves, names, wrt_list)
        if verdict is not None:
            return _fail(label, verdict.title, *verdict.details, printed=printed)
    if outcome.error is not None:
        return _from_error(label, "backward", outcome)
    got = list(outcome.value)

    # 3. the gradients' values, against each source of truth in turn
    comparisons = _gradient_sources(expected_grads, grad_reference, inputs, wrt_list, grad_outputs)
    if grad_reference is None:
        fd = run_learner_code(
            finite_difference_vjp, plain_call, leaves, grad_outputs, wrt_list, eps=eps
        )
        if fd.error is not None:
            return _from_error(label, "forward (during finite differences)", fd)
        comparisons.append(("finite differences", fd.value))
    checked_against = []
    for source, expected in comparisons:
        verdict = compare_gradients(
            got,
            expected,
            [names[i] for i in wrt_list],
            grad_outputs,
            source,
            inputs=sources,
            atol=atol,
            rtol=rtol,
            is_function=is_function,
        )
        if verdict is not None:
            return _fail(label, verdict.title, *verdict.details, printed=printed)
        checked_against.append(source)

    notes = _tensors_on_ctx(outputs) if is_function else ()
    what = "output matches the reference" if reference is not None else "forward runs"
    grads_for = ", ".join(f"`{names[i]}`" for i in wrt_list)
    gradients = "the gradient for" if len(wrt_list) == 1 else "the gradients for"
    verb = "matches" if len(wrt_list) == 1 else "match"
    return CheckResult(
        "passed",
        f"{label} passed: {what}; {gradients} {grads_for} {verb} "
        + " and ".join(checked_against)
        + " (float64).",
        (*notes, *_printed(printed)),
    )


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
    for option, number in {"atol": atol, "rtol": rtol}.items():
        check_option("check_tensor", option, number, "a non-negative number", lambda v: v >= 0)
    if value is Ellipsis:
        return not_implemented(name, STUB_HINT)
    if isinstance(value, int | float) and not isinstance(value, bool) and expected.dim() == 0:
        value = torch.tensor(value, dtype=expected.dtype)
    if not isinstance(value, Tensor):
        return _fail(name, f"expected a tensor, got {type(value).__name__}.")
    if value.shape != expected.shape:
        return _fail(name, f"shape {tuple(value.shape)}, expected {tuple(expected.shape)}.")
    if value.dtype != expected.dtype:
        return _fail(name, f"dtype {value.dtype}, expected {expected.dtype}.")
    mismatch = first_mismatch(value, expected, atol=atol, rtol=rtol)
    if mismatch is not None:
        return _fail(name, "the values are off.", mismatch.describe("", "yours", "expected"))
    size = "a scalar" if expected.dim() == 0 else f"shape {tuple(expected.shape)}"
    return CheckResult("passed", f"{name} passed: {size}, every value matches.")
