"""Step 3 of ``check_function``: the gradients' values against each source of truth.

Part of :mod:`._steps`. The learner's gradients (for a random ``grad_output``) are compared
with ``reference``'s autograd gradients and with central finite differences of the
learner's own forward (or, instead of both, with ``grad_reference``'s). Against the
reference the tolerances are float64's, unless finite differences side with the answer.
Where a gradient is off, :func:`~._precision.precision_note` says whether float32
is the whole cause.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult, from_learner_error
from autograd_helpers.checks._core.numeric import (
    finite_difference_vjp,
    format_number,
    worst_mismatch,
)
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._gradient_match import compare_gradients
from autograd_helpers.checks.function._kinks import Kinks, find_kinks, kink_notes, kink_verdict
from autograd_helpers.checks.function._nudged import nudged_note
from autograd_helpers.checks.function._precision import named_dtype, precision_note
from autograd_helpers.checks.function._projected import ELEMENTWISE_LIMIT, check_along_directions
from autograd_helpers.checks.function._reference import Reference
from autograd_helpers.checks.function._replays import linear_verdict
from autograd_helpers.checks.function._settled import domain_masks, settled

__all__ = ["FD_AGREE", "gradient_values"]


def gradient_values(
    trial: Trial,
    plain_call: Callable[..., Any],
    reference: Reference | None,
    grad_reference: Reference | None,
) -> tuple[CheckResult | None, list[str]]:
    """3. the gradients match each source of truth: reference, finite differences."""
    if grad_reference is not None:
        wanted = grad_reference.gradients(trial.grad_outputs, trial.differentiable)
        if wanted is None:
            raise TypeError(
                "check_function(): grad_reference's outputs must require grad and have the "
                "outputs' shapes"
            )
        comparisons = [("the expected gradient", wanted, False)]
        mismatch = _first_mismatch(trial, comparisons) or _tight_expected(trial, wanted)
        return _explained(mismatch, trial, plain_call, wanted), ["the expected gradient"]
    expected = (
        None if reference is None else reference.gradients(trial.grad_outputs, trial.differentiable)
    )
    comparisons = [] if expected is None else [("the reference's gradient", expected, True)]
    sources = [source for source, _, _ in comparisons]
    selected = _outputs_at(plain_call, trial.differentiable)
    if sum(t.numel() for t in trial.wrt_leaves) > ELEMENTWISE_LIMIT:
        mismatch = _first_mismatch(trial, comparisons) or check_along_directions(trial, selected)
        directions = [*sources, "finite differences along random directions"]
        return _explained(mismatch, trial, plain_call, expected), directions
    fd = run_learner_code(
        finite_difference_vjp,
        selected,
        trial.leaves,
        trial.grad_outputs,
        trial.wrt,
        eps=trial.options.eps,
    )
    if fd.error is not None:
        return from_learner_error(trial.label, "forward (during finite differences)", fd), []
    sources.append("finite differences")
    if (unread := _unread_verdict(trial, fd.value)) is not None:
        return unread, sources
    truths = _settled_truths(trial, reference, expected, fd.value)
    kinks = _kinks(trial, selected, truths, truths[0] if expected is not None else None)
    fair = [kinks.substituted(trial, truth) for truth in truths]
    comparisons = [(source, truth, True) for source, truth in zip(sources, fair, strict=True)]
    mismatch = _first_mismatch(trial, comparisons)
    if mismatch is None and expected is not None:
        mismatch = _tight_mismatch(trial, fair[0], fair[-1], selected)
        if mismatch is None and (rounded := _rounded(trial, plain_call, fair[0])) is not None:
            return rounded, sources
    if mismatch is None and (outside := kink_verdict(trial, kinks)) is not None:
        mismatch = trial.fail(*outside)
    if mismatch is None:
        trial.notes += kink_notes(trial, kinks, expected)
    return _explained(mismatch, trial, plain_call, expected, reference), sources


def _settled_truths(
    trial: Trial,
    reference: Reference | None,
    expected: list[Tensor] | None,
    differences: list[Tensor],
) -> list[list[Tensor]]:
    """The reference's gradient and finite differences, each left out where it has no say
    (:mod:`._settled`): outside the reference's domain, and finite differences
    where the answer matches the reference's gradient to float64's rounding."""
    if reference is None or expected is None:
        return [differences]
    masks = domain_masks(trial, reference.outputs)
    tight = (trial.options.reference_atol, trial.options.reference_rtol)
    return [
        settled(trial, expected, masks),
        settled(trial, differences, masks, expected, tight),
    ]


def _explained(
    mismatch: CheckResult | None,
    trial: Trial,
    call: Callable[..., Any],
    expected: Sequence[Tensor] | None,
    reference: Reference | None = None,
) -> CheckResult | None:
    """A gradient found off, with a word about float32 where that is the whole cause, or
    about finite differences where backward computes them."""
    if mismatch is None:
        return None
    note = precision_note(trial, call, expected)
    if note is None and reference is not None and expected is not None:
        note = nudged_note(trial, _outputs_at(reference.fn, trial.differentiable), expected)
    return (
        mismatch
        if note is None
        else dataclasses.replace(mismatch, details=(*mismatch.details, note))
    )


def _kinks(
    trial: Trial,
    selected: Callable[..., Any],
    truths: Sequence[Sequence[Tensor]],
    reference: Sequence[Tensor] | None,
) -> Kinks:
    """The kinks among the elements where the gradient disagrees with a source of truth
    (finite differences and the reference at the check's tolerances, the reference to
    float64's too)."""
    tolerances = [(trial.options.atol, trial.options.rtol)] * len(truths)
    pairs = list(zip(truths, tolerances, strict=True))
    if reference is not None:
        pairs.append((reference, (trial.options.reference_atol, trial.options.reference_rtol)))
    suspects = []
    for k, got in enumerate(trial.grads):
        leaf = trial.wrt_leaves[k]
        mask = torch.zeros(leaf.shape, dtype=torch.bool)
        if isinstance(got, Tensor) and got.shape == leaf.shape:
            for truth, (atol, rtol) in pairs:
                want = truth[k].detach().double()
                mine = got.detach().double()
                mask |= ~((mine == want) | ((mine - want).abs() <= atol + rtol * want.abs()))
        suspects.append(mask)
    if not any(bool(m.any()) for m in suspects):
        return Kinks.none(trial)
    found = run_learner_code(find_kinks, trial, selected, suspects)
    return Kinks.none(trial) if found.error is not None else found.value


def _unread_verdict(trial: Trial, differences: Sequence[Tensor]) -> CheckResult | None:
    """An input whose every nudge leaves the output exactly as it was, though backward
    gives it a gradient: forward does not compute with its values."""
    for k, (got, fd) in enumerate(zip(trial.grads, differences, strict=True)):
        if got is None or bool(fd.ne(0).any()) or fd.numel() < 1:
            continue
        if worst_mismatch(got, fd, atol=trial.options.atol, rtol=trial.options.rtol) is None:
            continue
        name = trial.wrt_names[k]
        return trial.fail(
            f"the output does not change when `{name}` changes, yet backward gives `{name}` "
            "a gradient.",
            f"Finite differences nudge each element of `{name}` and find the output exactly as "
            f"it was (a difference of 0 for all {fd.numel()} elements), while your backward "
            f"gives up to {format_number(float(got.detach().abs().max()))}.",
            "That happens when forward does not compute with this input's values: it reads "
            "the same numbers from elsewhere (a module passed beside them, as memcnn's "
            "`AdditiveBlockFunction(x, Fm, Gm, *weights)` reads `Fm`'s and `Gm`'s own "
            "weights; a global; a copy kept from before), or the function is flat there (a "
            "step, such as `torch.round`). The checker nudges the copies it hands to "
            "forward, so it cannot check such a gradient: compute forward from the inputs "
            "themselves (`torch.func.functional_call(Fm, params, x)`), or pass "
            "`grad_reference=` for a gradient that is deliberately not the derivative.",
        )
    return None


# Against a reference's float64 gradient a right answer is off by rounding alone: the
# tolerances are tight (Options' reference_atol and reference_rtol), so a
# formula off by 0.1% or only where the gradient is tiny (1e-10 added, at x = 1e-5) fails.
# Where the reference's own rounding is worse (torch.sinc's gradient is 0 at 1e-8, not
# -x/3), an answer is taken as right where finite differences side with it: closer to
# them than the reference, by more than their own error, and within FD_AGREE of them.
FD_AGREE = 1e-9


def _first_mismatch(
    trial: Trial, comparisons: Sequence[tuple[str, list[Tensor], bool]]
) -> CheckResult | None:
    """The gradients against each source of truth in turn: the first that differs."""
    for source, expected_grads, derivative in comparisons:
        verdict = compare_gradients(trial, expected_grads, source, derivative=derivative)
        if verdict is not None:
            return trial.fail(verdict.title, *verdict.details)
    return None


def _tight_mismatch(
    trial: Trial,
    reference: Sequence[Tensor],
    differences: Sequence[Tensor],
    plain_call: Callable[..., Any],
) -> CheckResult | None:
    """The gradients against the reference's, to float64's rounding (see above)."""
    rtol = trial.options.rtol  # finite differences' own agreement
    atol, tight = trial.options.reference_atol, trial.options.reference_rtol
    wider: Sequence[Tensor] | None = None  # finite differences with twice the step
    expected = []
    for k, (got, want, fd) in enumerate(zip(trial.grads, reference, differences, strict=True)):
        if not isinstance(got, Tensor) or got.shape != want.shape:
            expected.append(want)
            continue
        got = got.detach()
        off = (got - want).abs() > atol + tight * want.abs()
        if not bool(off.any()):
            expected.append(want)
            continue
        if wider is None:
            again = run_learner_code(
                finite_difference_vjp,
                plain_call,
                trial.leaves,
                trial.grad_outputs,
                trial.wrt,
                eps=2 * trial.options.eps,
            )
            wider = again.value if again.error is None else [fd * math.inf for fd in differences]
        # Their error: truncation and rounding show in how much the two steps disagree.
        error = (fd - wider[k]).abs().nan_to_num(math.inf)
        sides = ((got - fd).abs() + error < (want - fd).abs()) & (
            (got - fd).abs() <= FD_AGREE + rtol * fd.abs()
        )
        expected.append(torch.where(sides, got, want))
    source = "the reference's gradient"
    verdict = compare_gradients(trial, expected, source, derivative=True, atol=atol, rtol=tight)
    return None if verdict is None else trial.fail(verdict.title, *verdict.details)


# float32 rounds to 24 bits (up to 6e-8 relative), under the reference's 1e-7: a derivative
# rounded once to float32 in the float64 run shows only at a tighter tolerance. It fails
# there only where float32 is the whole difference, never for a reference's own rounding.
FLOAT32_RTOL = 1e-9


def _rounded(
    trial: Trial, call: Callable[..., Any], expected: Sequence[Tensor]
) -> CheckResult | None:
    """A gradient right to 1e-7 but rounded to float32 on the way (``.float()`` on a factor
    that does not depend on ``grad_output``, so the linearity probe cannot see it)."""
    atol = trial.options.reference_atol
    rtol = min(trial.options.reference_rtol, FLOAT32_RTOL)
    source = "the reference's gradient"
    verdict = compare_gradients(trial, expected, source, derivative=True, atol=atol, rtol=rtol)
    if verdict is None or (note := precision_note(trial, call, expected)) is None:
        return None
    if linear_verdict(trial, call) is not None:
        return None  # grad_output itself rounded: the linearity check, next, says so plainly
    title = f"your code computes in {named_dtype(note)}: {verdict.title}"
    return trial.fail(title, *verdict.details, note)


def _tight_expected(trial: Trial, expected: Sequence[Tensor]) -> CheckResult | None:
    """The gradients against ``grad_reference``'s, to float64's rounding (no finite
    differences to side with an answer: the expected gradient is not the derivative)."""
    atol, rtol = trial.options.reference_atol, trial.options.reference_rtol
    source = "the expected gradient"
    verdict = compare_gradients(trial, expected, source, derivative=False, atol=atol, rtol=rtol)
    return None if verdict is None else trial.fail(verdict.title, *verdict.details)


def _outputs_at(call: Callable[..., Any], positions: Sequence[int]) -> Callable[..., Any]:
    """``call`` returning only its outputs at ``positions`` (the differentiable ones)."""

    def selected(*args: Any) -> tuple[Any, ...]:
        value = call(*args)
        outputs = value if isinstance(value, tuple) else (value,)
        return tuple(outputs[k] for k in positions)

    return selected
