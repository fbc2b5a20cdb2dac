"""``check_double_backward`` as named checks, run in order from :data:`DOUBLE_CHECKS`.

What chapter 03 teaches about double backward: backward must be built from torch
operations on tensors autograd can trace back to the input (the input itself, or the
output), so that autograd can differentiate it again; gradgradcheck compares that second
derivative with finite differences. The checks, in order:

1. the first derivative (``check_function``, with the edge probes in float64 and float32);
2. nothing kept outside ``ctx`` (a global list, the example tensor changed);
3. two calls in flight keep apart (a cache every call shares is overwritten);
4. gradgradcheck at the example: backward's result against finite differences of itself,
   with a hint that names what forward kept that autograd cannot trace back to ``x``;
5. the second derivative at the edge probes, in float64 and then in float32, against the
   reference's (:mod:`~autograd_helpers.checks.gradcheck._second`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    failed,
    from_learner_error,
    side_effect_verdict,
)
from autograd_helpers.checks._core.probes import probe_note
from autograd_helpers.checks._core.submission import forward_parameter_names
from autograd_helpers.checks.function import check_function
from autograd_helpers.checks.gradcheck._hints import (
    blind_hint,
    is_once_differentiable,
    kept_hint,
    kept_notes,
    probe_hint,
    raised_hint,
)
from autograd_helpers.checks.gradcheck._saved import EXAMPLE, kept_outside_ctx
from autograd_helpers.checks.gradcheck._second import (
    describe,
    probe_points,
    second_derivative_mismatch,
)
from autograd_helpers.checks.gradcheck.explain import explain_gradcheck

__all__ = ["DOUBLE_CHECKS", "Double", "run_double_checks"]

APART = 0.7  # the second call's input: the example shifted by this, so the two differ
SAME = 1e-9  # two runs of a deterministic backward agree to the last bits; a cache does not


@dataclass
class Double:
    """The learner's Function, the example, and what the checks found on the way."""

    fn: Any
    example: Tensor
    reference: Callable[..., Any] | None
    label: str
    kept: Contained | None = None  # taken before any learner code runs
    first: CheckResult | None = None

    @property
    def point(self) -> Tensor:
        return self.example.detach().to(torch.float64)

    @property
    def name(self) -> str:
        return forward_parameter_names(self.fn, 1)[0]

    def fail(self, title: str, *details: str) -> CheckResult:
        return failed(self.label, title, *details)


def _first_derivative(d: Double) -> CheckResult | None:
    probes = "edges" if d.reference is not None else None
    result = check_function(d.fn, d.example, reference=d.reference, name=d.label, probes=probes)
    if not result.passed:
        return result
    d.first = result
    return None


def _forward_and_backward(fn: type[Function], x: Tensor) -> None:
    leaf = fresh_leaf(x)
    torch.autograd.grad(fn.apply(leaf).sum(), leaf)


def _outside_ctx_verdict(d: Double) -> CheckResult | None:
    """What learner code changed outside ``ctx`` so far, as a verdict (``None``: nothing)."""
    assert d.kept is not None
    changed = kept_outside_ctx(d.kept, d.example)
    if not changed:
        return None
    return d.fail(
        f"forward or backward changed {changed[0]}, which outlives the call.",
        "A tensor kept outside `ctx` stays alive after the call, with its graph, and every "
        "call shares it: the next forward overwrites what an earlier backward still needs. "
        f"Keep what backward needs on `ctx` (`ctx.save_for_backward({d.name})`). The checker "
        "has put it back.",
    )


def _nothing_kept_outside_ctx(d: Double) -> CheckResult | None:
    outcome = run_learner_code(_forward_and_backward, d.fn, d.point)
    stage = "forward or backward"
    return side_effect_verdict(d.label, stage, outcome.side_effects) or _outside_ctx_verdict(d)


def _gradient_of_first(fn: type[Function], a: Tensor, b: Tensor | None, g: Tensor) -> Tensor:
    """The gradient for ``a``, with a second call on ``b`` (if any) in flight."""
    first = fresh_leaf(a)
    output = fn.apply(first)
    if b is not None:
        fn.apply(fresh_leaf(b))
    (gradient,) = torch.autograd.grad(output, first, g.reshape(output.shape))
    return gradient


def _separate_calls(d: Double) -> CheckResult | None:
    a = d.point
    g = torch.linspace(-1.3, 1.7, a.numel(), dtype=torch.float64).reshape(a.shape)
    alone = run_learner_code(_gradient_of_first, d.fn, a, None, g)
    paired = run_learner_code(_gradient_of_first, d.fn, a, a + APART, g)
    for outcome in (alone, paired):
        problem = side_effect_verdict(d.label, "forward or backward", outcome.side_effects)
        if problem is not None:
            return problem
    if alone.error is not None or paired.error is not None:
        return None  # a call that raises is judged by the other checks
    if torch.allclose(alone.value, paired.value, rtol=SAME, atol=SAME, equal_nan=True):
        return None
    return d.fail(
        "backward used tensors of another call: with a second call's forward run before the "
        "first call's backward, the first call's gradient changed.",
        "Forward kept what backward needs where every call finds it (a global, a class "
        "attribute, a closure), and the next forward overwrote it. Keep it on `ctx`: "
        f"`ctx.save_for_backward({d.name})`.",
    )


def _backward_of(fn: type[Function]) -> Callable[[Tensor, Tensor], Tensor]:
    def backward_of(x: Tensor, grad_output: Tensor) -> Tensor:
        """backward's result for the input ``x`` and ``grad_output``."""
        with torch.enable_grad():  # finite differences call this under no_grad
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            output = fn.apply(leaf)
            (gradient,) = torch.autograd.grad(
                output, leaf, grad_output.reshape(output.shape), create_graph=True
            )
        return gradient

    return backward_of


def _backward_is_differentiable(d: Double) -> CheckResult | None:
    point = d.point
    g = torch.linspace(-1.3, 1.7, point.numel(), dtype=torch.float64)
    once = run_learner_code(_backward_of(d.fn), fresh_leaf(point), g.clone())
    problem = side_effect_verdict(d.label, "backward (differentiated again)", once.side_effects)
    if problem is not None:
        return problem
    report = explain_gradcheck(_backward_of(d.fn), fresh_leaf(point), g.requires_grad_())
    if report.passed:
        return None
    title = "the first derivative is right, but "
    if not report.numerical:  # differentiating backward raised
        return d.fail(
            title + "backward cannot be differentiated: autograd raised while differentiating it.",
            *report.details,
            raised_hint(report, once=is_once_differentiable(d.fn)),
        )
    hint = kept_hint(d.fn, d.point, d.name) or blind_hint(report, once=is_once_differentiable(d.fn))
    return d.fail(
        title + "the derivative of backward is not: gradgradcheck fails.",
        "The function checked here is backward itself: its output is the gradient for "
        f"`{d.name}`, its inputs are `{d.name}` and `grad_output`.",
        *(line for line in report.details if not line.startswith(("Note:", "Hint for"))),
        *([hint] if hint else []),
    )


def _second_derivative_in(dtype: torch.dtype) -> Callable[[Double], CheckResult | None]:
    def check(d: Double) -> CheckResult | None:
        if d.reference is None:
            return None  # no truth to compare with beyond the example
        for x in probe_points():
            found = second_derivative_mismatch(d.fn.apply, d.reference, x, dtype)
            if found is None:
                continue
            stage = f"double backward (in {str(dtype)[6:]})"
            if isinstance(found, Outcome):
                result = side_effect_verdict(d.label, stage, found.side_effects)
                result = result or from_learner_error(d.label, stage, found)
                return replace(result, details=(*result.details, probe_note((x,), [d.name])))
            title, detail = describe(found, d.name)
            hint = kept_hint(d.fn, d.point, d.name) or probe_hint(
                found.kind, in_float32=dtype != torch.float64
            )
            return d.fail(
                f"the first derivative is right, but the second derivative {title}.",
                detail,
                probe_note((x,), [d.name]),
                hint,
            )
        return None

    check.__name__ = f"_second_derivative_in_{str(dtype)[6:]}"
    return check


DOUBLE_CHECKS: tuple[Callable[[Double], CheckResult | None], ...] = (
    _first_derivative,
    _nothing_kept_outside_ctx,
    _separate_calls,
    _backward_is_differentiable,
    _second_derivative_in(torch.float64),
    _second_derivative_in(torch.float32),
)


def run_double_checks(d: Double) -> CheckResult:
    """Each check of :data:`DOUBLE_CHECKS` in order: the first verdict, or a pass."""
    # the example, globals, class attributes and containers: for the checks' own calls too
    d.kept = Contained(d.fn, {EXAMPLE: d.example})
    try:
        for check in DOUBLE_CHECKS:
            result = check(d)
            if result is not None:  # what outlives the call comes first: it is the cause
                return _outside_ctx_verdict(d) or result
        notes = (*(d.first.details if d.first else ()), *kept_notes(d.fn, d.point))
    finally:
        d.kept.restore()
    probes = (
        ", and the reference's at the edge probes, in float64 and float32"
        if d.reference is not None
        else ""
    )
    return CheckResult(
        "passed",
        f"{d.label} passed: its backward and the derivative of its backward match finite "
        f"differences at the example (gradcheck and gradgradcheck, float64){probes}.",
        notes,
    )
