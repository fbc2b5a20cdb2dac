"""``check_function`` in its three steps: forward, backward, and the gradients' values.

Each step extends the shared :class:`~autograd_helpers.checks._core.trial.Trial` and returns a
:class:`~autograd_helpers.checks._core.feedback.CheckResult` when it finds a problem, ``None``
when the next step may run. The reference (the notebook's trusted answer) runs before any
learner code: when *it* fails, the check is set up wrong, and that is said plainly.
After each step, what the learner's code changed that outlives the call, or called that it
should not, is judged (:mod:`._conduct`), and ``.grad`` it wrote itself
(:mod:`._grads`); the values are step 3 (:mod:`._values`); after them,
backward is run again (:mod:`._replays`): twice, with other ``grad_output``s, with
each input alone. A forward that frees its input's memory gets a verdict before anything
reads that input (reading it would crash the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers._common.tensors import freed
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    from_learner_error,
    outlived,
    printed_lines,
)
from autograd_helpers.checks._core.numeric import dense, same_values
from autograd_helpers.checks._core.submission import (
    diagnose,
    entry_points,
    forward_parameter_names,
)
from autograd_helpers.checks._core.trial import Options, Trial, random_grad_outputs
from autograd_helpers.checks.function._conduct import (
    WORDS,
    conduct_notes,
    grad_set_verdict,
    stage_verdict,
    tensors_on_ctx,
)
from autograd_helpers.checks.function._conduct_watch import conduct
from autograd_helpers.checks.function._forward_output import inspect_outputs
from autograd_helpers.checks.function._grad_read import grad_read_verdict
from autograd_helpers.checks.function._grads import GradsKept, grad_written_verdict
from autograd_helpers.checks.function._inputs import written_inputs_notes
from autograd_helpers.checks.function._limits import (
    deterministic_verdict,
    empty_verdict,
    float64_refused,
)
from autograd_helpers.checks.function._precision import output_precision_note
from autograd_helpers.checks.function._reference import Reference
from autograd_helpers.checks.function._replays import alone_verdict, linear_verdict
from autograd_helpers.checks.function._returned_gradients import (
    broadcast_notes,
    inspect_raw_gradients,
)
from autograd_helpers.checks.function._values import gradient_values
from autograd_helpers.checks.function._wording import MISMATCH, Verdict

__all__ = ["run_check"]


def _verdict(trial: Trial, verdict: Verdict | None) -> CheckResult | None:
    return None if verdict is None else trial.fail(verdict.title, *verdict.details)


def _forward(
    trial: Trial, call: Callable[..., Any], reference: Reference | None, plain: Callable[..., Any]
) -> CheckResult | None:
    """1. forward runs and returns tensors like the reference's, without touching its inputs."""
    outcome = run_learner_code(call, *trial.args)
    trial.printed += outcome.printed
    if outcome.error is not None:
        return from_learner_error(
            trial.label, "forward", outcome, hint=float64_refused(trial, plain, outcome.error)
        )
    if outcome.side_effects:
        return trial.fail(*outlived("forward", outcome.side_effects))
    expected = None if reference is None else reference.outputs
    result = _freed_verdict(trial, outcome.value) or _verdict(
        trial,
        _with_precision(inspect_outputs(outcome.value, trial, expected), trial, expected, plain),
    )
    if result is not None:
        return result
    trial.notes += written_inputs_notes(trial, outcome.value)
    trial.outputs = outcome.value if isinstance(outcome.value, tuple) else (outcome.value,)
    trial.differentiable = tuple(k for k, o in enumerate(trial.outputs) if o.requires_grad)
    differentiable = [trial.outputs[k] for k in trial.differentiable]
    empty_too = reference is not None and not any(o.numel() for o in reference.outputs)
    if trial.wrt and not any(o.numel() for o in differentiable) and not empty_too:
        return trial.fail(
            "forward returned an empty tensor, so there is nothing to compare.",
            "Return the result for every element of the input.",
        )
    trial.grad_outputs = random_grad_outputs(differentiable, [*trial.leaves, *trial.outputs])
    trial.after_forward = _values_now(trial)
    return None


def _with_precision(
    verdict: Verdict | None,
    trial: Trial,
    expected: tuple[Tensor, ...] | None,
    plain: Callable[..., Any],
) -> Verdict | None:
    """An output off from the reference's, with the float32 sentence where that is why."""
    if verdict is None or expected is None or not verdict.title.endswith(MISMATCH):
        return verdict
    note = output_precision_note(
        plain, trial, expected, trial.options.reference_atol, trial.options.reference_rtol
    )
    return verdict if note is None else Verdict(verdict.title, (*verdict.details, note))


def _freed_verdict(trial: Trial, value: object) -> CheckResult | None:
    """An input (or output) whose memory forward freed: reading it would crash the kernel."""
    returned = value if isinstance(value, tuple) else (value,)
    names = [f"its input `{n}`" for n in trial.names]
    outputs = [
        "its output" if len(returned) == 1 else f"its output {k}" for k in range(len(returned))
    ]
    for what, t in zip([*names, *outputs], [*trial.args, *returned], strict=True):
        if isinstance(t, Tensor) and freed(t):
            return trial.fail(
                f"forward freed the memory of {what} (`untyped_storage().resize_(0)`), so "
                "that tensor holds no values and check_function cannot check this Function.",
                "memcnn does this to save memory (`keep_input=False`) and rebuilds the input "
                "in backward; the caller's tensor is unreadable meanwhile. Check the Function "
                "with its inputs kept (memcnn: `keep_input=True`).",
            )
    return None


def _values_now(trial: Trial) -> list[Tensor | None]:
    """Copies of what forward handed back and was handed: the caller's tensors."""
    return [
        t.detach().clone() if isinstance(t, Tensor) else None for t in (*trial.args, *trial.outputs)
    ]


def _changed_in_backward(trial: Trial) -> CheckResult | None:
    """An input or output of forward that backward wrote into: the caller's tensors."""
    names = [*trial.names, *[f"output {k}" for k in range(len(trial.outputs))]]
    if len(trial.outputs) == 1:
        names[-1] = "the output"
    for name, now, before in zip(
        names, (*trial.args, *trial.outputs), trial.after_forward, strict=True
    ):
        if isinstance(now, Tensor) and before is not None and not same_values(now, before):
            what = name if name.startswith(("the ", "output")) else f"its input `{name}`"
            return trial.fail(
                f"backward changed {what} in place.",
                "Saved tensors are the caller's tensors too (an input, or the result the "
                "caller holds): compute a new tensor (`1 - y * y`, not `y.mul_(y)`).",
            )
    return None


def _backward(trial: Trial, recorded: list[tuple[object, bool]]) -> CheckResult | None:
    """2. backward runs through the real engine and returns one gradient per input."""
    differentiable = [o for o in trial.outputs if o.requires_grad]
    outcome = run_learner_code(
        torch.autograd.grad, differentiable, trial.wrt_leaves, trial.grad_outputs, allow_unused=True
    )
    trial.printed += outcome.printed
    if outcome.side_effects:
        return trial.fail(*outlived("backward", outcome.side_effects))
    if trial.is_function and recorded:
        raw, changed_grad_output = recorded[0]
        raw = dense(raw)
        if changed_grad_output:
            return trial.fail(
                "backward changed `grad_output` in place.",
                "`grad_output` belongs to autograd, which may pass the same tensor on "
                "elsewhere: compute a new tensor (`grad_output * 2`, not "
                "`grad_output.mul_(2)`).",
            )
        result = _changed_in_backward(trial) or _verdict(trial, inspect_raw_gradients(raw, trial))
        if result is not None:
            return result
        trial.raw_gradients = raw if isinstance(raw, tuple) else (raw,)
        trial.notes += broadcast_notes(raw, trial)
    if outcome.error is not None:
        return from_learner_error(trial.label, "backward", outcome)
    trial.grads = [dense(g) for g in outcome.value]
    return None


def _passed(trial: Trial, checked_against: list[str]) -> CheckResult:
    names = [f"`{n}`" for n in trial.wrt_names]
    what = "output matches the reference" if trial.options.reference else "forward runs"
    gradients = "the gradient for" if len(names) == 1 else "the gradients for"
    verb = "matches" if len(names) == 1 else "match"
    return CheckResult(
        "passed",
        f"{trial.label} passed: {what}; {gradients} {', '.join(names)} {verb} "
        + " and ".join(checked_against)
        + " (float64).",
        (*trial.notes, *tensors_on_ctx(trial), *printed_lines(trial.printed)),
    )


def run_check(
    fn: object, inputs: tuple[object, ...], options: Options, *, allow_callable: bool
) -> CheckResult:
    """Check ``fn`` on ``inputs``: forward, then backward, then the gradients' values."""
    problem = diagnose(fn, options.label, require_function=not allow_callable)
    if problem is not None:
        return problem
    is_function = isinstance(fn, type) and issubclass(fn, Function)
    reference = grad_reference = None
    if options.reference is not None:
        reference = Reference("reference", options.reference, options, inputs)
        if not options.probe:
            reference.require_domain(forward_parameter_names(fn, len(inputs)))
    if options.grad_reference is not None:
        grad_reference = Reference("grad_reference", options.grad_reference, options, inputs)
    trial = Trial.start(inputs, options, forward_parameter_names(fn, len(inputs)), is_function)
    recorded: list[tuple[object, bool]] = []
    call, plain_call = entry_points(fn, recorded)
    contained = Contained(fn, words=WORDS, deep=True)  # what it reaches by name
    grads = GradsKept(inputs, trial.names, [(label, m) for label, m, _ in contained.modules])
    try:
        with conduct() as forward:
            result = _forward(trial, call, reference, plain_call)
        result = (
            result
            or grad_written_verdict(trial, grads, "forward")
            or stage_verdict(trial, contained, forward, "forward")
            or deterministic_verdict(trial, plain_call)
        )
        if result is not None:
            return result
        with conduct() as backward:
            result = _backward(trial, recorded)
        result = (
            result
            or grad_written_verdict(trial, grads, "backward")
            or stage_verdict(trial, contained, backward, "backward")
            or grad_set_verdict(trial)
            or empty_verdict(trial)
        )
        if result is not None:
            return result
        result, checked_against = gradient_values(trial, plain_call, reference, grad_reference)
        result = (
            result
            or linear_verdict(trial, plain_call)
            or alone_verdict(trial, plain_call)
            or grad_read_verdict(trial, plain_call)
        )
    finally:
        grads.restore()
        contained.restore()
    if result is not None:
        return result
    trial.notes += conduct_notes(trial, forward, backward)
    trial.notes += _none_notes(trial)
    return _passed(trial, checked_against)


def _none_notes(trial: Trial) -> list[str]:
    """A note for each input of ``wrt`` whose gradient backward returned as ``None``: it
    passed because that gradient is zero at these inputs, not because it was computed."""
    raw = trial.raw_gradients or ()
    names = [f"`{trial.names[i]}`" for i in trial.wrt if i < len(raw) and raw[i] is None]
    if not names:
        return []
    which = " and ".join(names)
    return [
        f"Note: backward returned `None` for {which}, accepted because the gradient is zero "
        "at these inputs (`None` means zero); whether backward computes it where it is not "
        "zero was not checked: if it can be non-zero, add inputs where it is (`also=`)."
    ]
