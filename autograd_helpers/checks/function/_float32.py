"""``check_function``'s float32 run: the answer in the dtype learners compute in.

Used by ``check_function(..., probes=...)`` (:mod:`autograd_helpers.checks._core.probes` chooses
the inputs). After every float64 check passed, each input runs once more in float32: where the
reference is finite, a NaN or inf, or a value off by more than float32's rounding, fails; and
outputs and gradients keep their inputs' dtype, the same rule as in float64, both ways (a float64
gradient returned for a float32 input fails as a float32 one for a float64 input does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf, working_copies
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult, failed, from_learner_error
from autograd_helpers.checks._core.hints import dtype_hint
from autograd_helpers.checks._core.numeric import dense, format_number, format_pair, index_text
from autograd_helpers.checks._core.probes import FLOAT32_ATOL, FLOAT32_RTOL
from autograd_helpers.checks._core.submission import entry_points
from autograd_helpers.checks._core.trial import GRAD_OUTPUT_SEED

__all__ = ["dtype_verdict", "float32_verdict"]


def _float_tensors(inputs: Sequence[object], wrt: Sequence[int], dtype: torch.dtype) -> list[Any]:
    return [
        fresh_leaf(x, dtype, requires_grad=i in wrt)
        if isinstance(x, Tensor) and x.is_floating_point() and x.layout == torch.strided
        else x
        for i, x in enumerate(inputs)
    ]


def _worst(got: Tensor, want: Tensor, own: Tensor | None) -> tuple[str, int] | None:
    """``("nan", flat index)`` where ``got`` is not finite but ``want`` is, or ``("off", i)``.

    ``own`` is the reference's own float32 result: where it is not finite either, nothing is
    asked of ``got``; where it is off, ``got`` may be off ten times as much.
    """
    got64, want64 = dense(got.detach()).double(), dense(want.detach()).double()
    finite = want64.isfinite()
    slack = torch.zeros_like(want64)
    if own is not None and own.shape == want64.shape:
        own64 = dense(own.detach()).double()
        finite &= own64.isfinite()
        slack = 10 * (own64 - want64).abs().nan_to_num(0.0)
    broken = finite & ~got64.isfinite()
    if bool(broken.any()):
        flat = int(broken.reshape(-1).nonzero()[0, 0])
        return ("nan" if got64.reshape(-1)[flat].isnan() else "inf"), flat
    error = (got64 - want64).abs()
    bad = finite & (error > FLOAT32_ATOL + FLOAT32_RTOL * want64.abs() + slack)
    if bool(bad.any()):
        return "off", int(torch.where(bad, error, -1.0).reshape(-1).argmax())
    return None


def _as_tuple(value: object) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _reference_run(
    fn: Callable[..., Any], inputs: Sequence[object], wrt: Sequence[int], dtype: torch.dtype
) -> tuple[tuple[Any, ...], list[Any]]:
    """The reference's outputs on leaves of ``dtype``, and those leaves."""
    leaves = _float_tensors(inputs, wrt, dtype)
    return _as_tuple(fn(*working_copies(leaves))), leaves


def _gradients(
    outputs: Sequence[Any],
    carriers: Sequence[int],
    leaves: Sequence[Any],
    wrt: Sequence[int],
    vs: Sequence[Tensor],
) -> tuple[Tensor | None, ...]:
    chosen = [outputs[k] for k in carriers]
    if not all(isinstance(o, Tensor) and o.requires_grad for o in chosen):
        return tuple(None for _ in wrt)
    weights = [v.to(o.dtype) for v, o in zip(vs, chosen, strict=True)]
    return torch.autograd.grad(chosen, [leaves[i] for i in wrt], weights, allow_unused=True)


def float32_verdict(
    fn: object,
    inputs: Sequence[object],
    wrt: Sequence[int],
    names: Sequence[str],
    label: str,
    reference: Callable[..., Any] | None,
    grad_reference: Callable[..., Any] | None,
) -> CheckResult | None:
    """``fn`` in float32 at ``inputs`` against the references in float64, or ``None``.

    Judges forward's outputs against ``reference`` and the gradients against
    ``grad_reference`` (else ``reference``'s autograd gradients), where those are finite,
    allowing float32's rounding: at least ten times what the reference itself loses in
    float32 (``torch.sinc``'s own float32 gradient is 5% off at 1e-3). Where the float64
    checks accepted another gradient than the reference's (a convention at a kink), the
    answer's own float64 gradient is the one to match. Outputs and gradients keep their
    inputs' dtype, as in float64 (:func:`dtype_verdict`).
    """
    if reference is None and grad_reference is None:
        return None
    recorded: list[tuple[object, bool]] = []
    call, plain_call = entry_points(fn, recorded)
    leaves = _float_tensors(inputs, wrt, torch.float32)
    outcome = run_learner_code(call, *working_copies(leaves))
    if outcome.error is not None:
        return from_learner_error(label, "forward (in float32)", outcome)
    outputs = _as_tuple(outcome.value)
    if reference is not None:
        wanted, _ = _reference_run(reference, inputs, wrt, torch.float64)
        own, _ = _reference_run(reference, inputs, wrt, torch.float32)
        wrong_dtype = dtype_verdict(label, "output", outputs, own, names)
        if wrong_dtype is not None:
            return wrong_dtype
        for k, (out, want) in enumerate(zip(outputs, wanted, strict=False)):
            if isinstance(out, Tensor) and out.is_floating_point() and out.shape == want.shape:
                problem = _worst(out, want, own[k] if k < len(own) else None)
                if problem is not None:
                    return _verdict(
                        label, "forward", "output", k, out, want, problem, leaves, names, wrt
                    )
    carriers = [k for k, o in enumerate(outputs) if isinstance(o, Tensor) and o.requires_grad]
    if not carriers or not wrt:
        return None
    generator = torch.Generator().manual_seed(GRAD_OUTPUT_SEED)
    vs = [torch.randn(outputs[k].shape, generator=generator, dtype=torch.float64) for k in carriers]
    grads = run_learner_code(_gradients, outputs, carriers, leaves, wrt, vs)
    if grads.error is not None:
        return from_learner_error(label, "backward (in float32)", grads)
    raw = _as_tuple(dense(recorded[0][0])) if recorded else ()
    returned = [raw[i] if i < len(raw) else None for i in wrt]
    wrong_dtype = dtype_verdict(
        label, "gradient", returned, [leaves[i] for i in wrt], [names[i] for i in wrt]
    )
    if wrong_dtype is not None:
        return wrong_dtype
    source = grad_reference or reference
    assert source is not None
    truth = _accepted(plain_call, source, inputs, wrt, carriers, vs)
    own_outputs, own_leaves = _reference_run(source, inputs, wrt, torch.float32)
    own_grads = _gradients(own_outputs, carriers, own_leaves, wrt, vs)
    for k, (got, want, own_grad) in enumerate(zip(grads.value, truth, own_grads, strict=True)):
        if got is None or want is None or got.shape != want.shape:
            continue  # judged by the float64 checks
        problem = _worst(got, want, own_grad)
        if problem is not None:
            return _verdict(
                label, "backward", "gradient", k, got, want, problem, leaves, names, wrt
            )
    return None


def _accepted(
    plain_call: Callable[..., Any],
    source: Callable[..., Any],
    inputs: Sequence[object],
    wrt: Sequence[int],
    carriers: Sequence[int],
    vs: Sequence[Tensor],
) -> list[Tensor | None]:
    """The float64 gradients the float32 run must match: the reference's, or the answer's
    own where the float64 checks (which it passed) accepted another (a kink's convention)."""
    outputs, leaves = _reference_run(source, inputs, wrt, torch.float64)
    truth = list(_gradients(outputs, carriers, leaves, wrt, vs))
    mine = run_learner_code(_own_gradients, plain_call, inputs, wrt, carriers, vs)
    if mine.error is not None:
        return truth
    for k, (want, own) in enumerate(zip(truth, mine.value, strict=True)):
        if isinstance(want, Tensor) and isinstance(own, Tensor) and own.shape == want.shape:
            own = dense(own.detach()).to(want.dtype)
            differs = (own - want).abs() > 1e-12 + 1e-7 * want.abs()
            truth[k] = torch.where(differs & own.isfinite(), own, want)
    return truth


def _own_gradients(
    plain_call: Callable[..., Any],
    inputs: Sequence[object],
    wrt: Sequence[int],
    carriers: Sequence[int],
    vs: Sequence[Tensor],
) -> tuple[Tensor | None, ...]:
    outputs, leaves = _reference_run(plain_call, inputs, wrt, torch.float64)
    return _gradients(outputs, carriers, leaves, wrt, vs)


def dtype_verdict(
    label: str,
    what: str,
    values: Sequence[object],
    like: Sequence[object],
    names: Sequence[str],
) -> CheckResult | None:
    """In float32, an output or a gradient of another floating dtype than it should have
    (an output the reference's, a gradient its input's): float64's rule, both ways."""
    for k, (value, other) in enumerate(zip(values, like, strict=False)):
        if not (isinstance(value, Tensor) and isinstance(other, Tensor)):
            continue
        if not value.is_floating_point() or value.dtype == other.dtype:
            continue
        given, wanted = (str(d).removeprefix("torch.") for d in (value.dtype, other.dtype))
        if what == "output":
            which = "forward returns" if len(values) == 1 else f"forward's output {k} is"
            return failed(
                label,
                f"in float32, {which} {given} where the reference returns {wanted}.",
                f"An output keeps its input's dtype: for {wanted} inputs, {wanted}, as for "
                f"float64 inputs, float64. Every layer after it would compute in {given}.",
                dtype_hint(value.dtype),
            )
        return failed(
            label,
            f"in float32, backward returns a {given} gradient for `{names[k]}`, which is {wanted}.",
            f"A gradient has its input's dtype: {wanted} for a {wanted} input, as float64 "
            "for a float64 one (autograd casts it silently, after computing in the wrong "
            "dtype).",
            "Build gradients from `grad_output` or the saved tensors, not a fixed dtype.",
        )
    return None


def _verdict(
    label: str,
    stage: str,
    what: str,
    k: int,
    got: Tensor,
    want: Tensor,
    problem: tuple[str, int],
    leaves: Sequence[object],
    names: Sequence[str],
    wrt: Sequence[int],
) -> CheckResult:
    kind, flat = problem
    got, want = dense(got), dense(want)
    first = leaves[wrt[0]] if wrt else None
    there = ""
    if isinstance(first, Tensor) and first.shape == got.shape:
        there = f" at `{names[wrt[0]]}` = {format_number(float(first.detach().reshape(-1)[flat]))}"
    index = index_text(flat, got.shape)
    thing = f"the {what}" if what == "output" else f"the gradient for `{names[wrt[k]]}`"
    value, exact = format_pair(
        float(got.detach().reshape(-1)[flat]), float(want.detach().reshape(-1)[flat])
    )
    if kind == "off":
        title = f"in float32, {thing} is off{there}{f' (element {index})' if index else ''}."
    else:
        title = f"in float32, {thing} is {kind}{there}{f' (element {index})' if index else ''}."
    at = float(first.detach().reshape(-1)[flat]) if there and isinstance(first, Tensor) else None
    hint = _hint(kind, at)
    return failed(
        label,
        title,
        f"Yours gives {value} there; the exact value is {exact}. The checker also runs your "
        f"{stage} in float32, the dtype tensors have by default.",
        hint,
    )


def _hint(kind: str, at: float | None) -> str:
    if kind == "off":
        return (
            "float32 keeps about 7 digits: a form that subtracts nearly equal numbers, or "
            "adds a small constant to dodge a division, loses them."
        )
    if at is not None and abs(at) > 80:
        return (
            "In float32, `exp` overflows to inf above about 88.7, and inf / inf is nan: use "
            "torch's own function (`torch.tanh`, `torch.sigmoid`, `F.softplus`) or a form "
            "that never divides infinities."
        )
    if at is not None and abs(at) < 1e-6:
        return (
            "Look for a division by something that is 0 there, or that underflows to 0 in "
            "float32 (1e-30 squared is 0 in float32): near 0, use the limit or a Taylor "
            "expansion instead of the formula."
        )
    return "Look for a division by zero, a log of 0, or an overflow at that value."
