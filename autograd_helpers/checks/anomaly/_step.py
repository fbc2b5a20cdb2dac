"""``check_training_step`` as named checks, run in order after every step.

The learner's step and the reference run side by side on copies of the same inputs (the
example for a few steps, then each probe of :mod:`._settings` for one: :mod:`._training`).
After each step (a :class:`~._step_run.StepRun`) :data:`STEP_CHECKS` judge it, one
property each: it ran; it left nothing behind; it returned the loss (a tensor of one
element, a Python or NumPy number) and the loss is the specified one; it ran one backward
pass, on that loss; it left the data as it found it and no hook on the parameters; the
parameters moved as the reference's did (once, by ``-lr * grad``); it fixed the step rather
than running the broken one under copying hooks.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch import Tensor

from autograd_helpers._common.code import code_names
from autograd_helpers.checks._contain.contained import said
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    from_learner_error,
    lasting_change,
)
from autograd_helpers.checks._core.numeric import format_number, worst_mismatch
from autograd_helpers.checks.anomaly._settings import (
    BATCH_HINT,
    DTYPE_HINT,
    as_meant,
    copies,
    loss_problem,
    loss_value,
    reference_gradient,
)
from autograd_helpers.checks.anomaly._step_run import StepRun
from autograd_helpers.checks.anomaly._updates import Update, update_hint

__all__ = ["STEP_CHECKS"]

INPLACE_HINT = (
    "Hint: a tensor that backward needs was changed in place. "
    "`ah.anomaly.explain_inplace_error` names it and the line that changed it; compute a new "
    "tensor instead (`h = h + 1`, not `h += 1`)."
)
CUT_HINT = (
    "Hint: the loss is not connected to the parameters: something cut it off from the graph "
    "(`.detach()`, `torch.no_grad()` around the forward computation, or a new tensor made "
    "with `torch.tensor(...)`)."
)
SCALAR_HINT = (
    "Hint: `backward()` needs the loss as one number: reduce it first (`.mean()`), as the "
    "original does."
)
LEAF_HINT = (
    "Hint: the update changes a leaf that requires grad, which autograd refuses while it "
    "records: update it under `torch.no_grad()` (`with torch.no_grad(): w -= 0.1 * w.grad`)."
)
NONE_HINT = (
    "Hint: was it a `.grad` that is None there? `backward()` fills it and `w.grad = None` "
    "empties it: read it between the two."
)
_ERROR_HINTS = (
    ("leaf Variable that requires grad", LEAF_HINT),
    ("'NoneType'", NONE_HINT),
    ("inplace operation", INPLACE_HINT),
    ("does not require grad", CUT_HINT),
    ("only for scalar outputs", SCALAR_HINT),
)


def _ran(run: StepRun) -> CheckResult | None:
    if run.outcome.error is None:
        return None
    text = str(run.outcome.error.exception)
    hints = [hint for pattern, hint in _ERROR_HINTS if pattern in text]
    hints += {"batch": [BATCH_HINT], "float64": [DTYPE_HINT]}.get(run.setting.kind, [])
    return from_learner_error(run.label, run.when, run.outcome, hint=next(iter(hints), None))


def _left_nothing(run: StepRun) -> CheckResult | None:
    if not run.lasting:
        return None
    return lasting_change(
        run.label,
        f"{run.when} changed something that outlives the call.",
        run.lasting,
        "every step after: keep the step's work inside the step",
    )


def _returned_a_loss(run: StepRun) -> CheckResult | None:
    problem = loss_problem(run.outcome.value)
    if problem is None:
        return None
    what, hint = problem
    return run.fail(f"{run.when} returned {what}.", *([hint] if hint else []))


def _loss_hint(run: StepRun, got: Tensor) -> tuple[str, ...]:
    """Why a step's loss differs: it is the loss after the update, the probe's batch, or
    (at step 1, before any update) a different forward computation."""
    following = as_meant(run.reference, copies(run.theirs))  # the next step's loss
    if torch.allclose(got, following, rtol=1e-5, atol=1e-7):
        return (
            "Hint: that is the loss after this step's update. Return the loss you called "
            "backward on, computed before the update.",
        )
    if run.setting.kind == "batch":
        return (BATCH_HINT,)
    if run.number == 1:
        return (
            "Hint: step 1's loss comes before any update, so the difference is in how you "
            "compute the loss: compare your forward computation with the original's, term "
            "by term.",
        )
    return ()


def _close(a: Tensor, b: Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=1e-5, atol=1e-7))


def _returned_the_loss(run: StepRun) -> CheckResult | None:
    got = loss_value(run.outcome.value)
    if _close(got, run.want):
        return None
    return run.fail(
        f"{run.after} the loss is {float(got):.6g}, expected {float(run.want):.6g}.",
        *_loss_hint(run, got),
    )


def _one_backward(run: StepRun) -> CheckResult | None:
    count = run.watch.backward_passes
    if count <= 1:
        return None  # none at all passes with a note, if the update is right
    return run.fail(
        f"{run.when} ran {count} backward passes; a step needs one.",
        "Each pass costs about as much as the forward computation: compute the gradient "
        "once and use it (`loss.backward()` then `w.grad`, or `torch.autograd.grad` alone).",
    )


def _backward_on_the_loss(run: StepRun) -> CheckResult | None:
    if not run.watch.ran_on:
        return None
    ran_on = run.watch.ran_on[0]
    if ran_on.numel() == 1 and _close(ran_on.double().reshape(()), run.want):
        return None
    what = (
        format_number(float(ran_on))
        if ran_on.numel() == 1
        else f"a tensor of shape {tuple(ran_on.shape)}"
    )
    return run.fail(
        f"{run.when} called backward on {what}, not on the loss it should "
        f"compute ({format_number(float(run.want))}).",
        "The gradient it stepped with belongs to another loss: call backward on the loss "
        "itself, the one the step returns.",
    )


def _data_left_as_found(run: StepRun) -> CheckResult | None:
    for k, state in enumerate(run.before):
        name, parts = run.names[k], state.changed()
        if k in run.trained:
            if "requires_grad" in parts:
                return run.fail(
                    f"{run.when} switched requires_grad off on `{name}`.",
                    "The caller trains it: the next step's backward would find nothing to "
                    f"differentiate. Leave `{name}.requires_grad` as it came.",
                )
            if "hooks" in parts:
                return run.fail(
                    f"{run.when} left a hook on `{name}`.",
                    f"Hooks outlive the call: registered at every step, they pile up, and "
                    f"every later gradient of `{name}` goes through all of them. Register a "
                    "hook once, outside the step, or clip inside it "
                    "(`torch.nn.utils.clip_grad_norm_`).",
                )
            continue
        if parts:
            what = "in place" if parts == ["values"] else f"({', '.join(said(state))})"
            return run.fail(
                f"{run.when} changed `{name}` {what}.",
                "The data belongs to the caller, who uses it again (the next step, the next "
                "epoch): compute new tensors (`target - 0.5`, not `target.sub_(0.5)`), and "
                "leave its requires_grad, `.grad` and hooks alone.",
            )
    return None


def _before(run: StepRun, k: int) -> Tensor:
    values = run.before[k].values  # the learner's tensor k before the step
    assert values is not None  # a step's tensors are copies, never lazy parameters
    return values.double()


def _moved(run: StepRun, k: int) -> Tensor:
    """How the learner's tensor ``k`` moved in this step."""
    return run.mine[k].detach().double() - _before(run, k)


def _meant(run: StepRun, k: int) -> Tensor:
    """How the reference's tensor ``k`` moved in this step."""
    return run.theirs[k].detach().double() - run.theirs_before[k].double()


def _float64_digits(run: StepRun, k: int) -> CheckResult | None:
    """In float64, the update must keep float64's digits: one that passed through float32
    (a gradient by hand, cast) is off by about 1e-8 of itself, far above float64's 1e-16."""
    moved, meant = _moved(run, k), _meant(run, k)
    if not meant.numel():
        return None
    if float((moved - meant).abs().max()) <= 1e-10 * float(meant.abs().max()) + 1e-300:
        return None
    return run.fail(
        f"{run.after} the update of `{run.names[k]}` keeps only float32's digits (about 7; "
        "float64 keeps 16).",
        "Hint: something on the way is float32: a `.float()`, a tensor made with "
        "`dtype=torch.float32` or without a dtype, mixed into the update. Compute the update "
        "in the parameters' own dtype.",
    )


def _update_as_meant(run: StepRun) -> CheckResult | None:
    trained = run.trained
    for k in trained:
        mine, theirs = run.mine[k], run.theirs[k]
        if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
            return run.fail(
                f"{run.after} `{run.names[k]}` has shape {tuple(mine.shape)} and dtype "
                f"{mine.dtype}, expected {tuple(theirs.shape)} and {theirs.dtype}."
            )
        mismatch = worst_mismatch(mine, theirs, atol=1e-6, rtol=1e-5)
        if mismatch is None:
            if run.setting.kind == "float64" and (verdict := _float64_digits(run, k)):
                return verdict
            continue
        update = Update(
            moved=[_moved(run, j) for j in trained],
            meant=[_meant(run, j) for j in trained],
            before=[_before(run, j) for j in trained],
            earlier=run.earlier,
            called=run.watch.called,
            large=run.setting.kind == "large",
            rules=run.rules,
            gradient=reference_gradient(run.reference, run.theirs_before, trained),
        )
        return run.fail(
            f"{run.after} parameter {k} (`{run.names[k]}`) differs from the reference's.",
            mismatch.describe(f"parameter {k}", "yours", "expected"),
            update_hint(update),
        )
    return None


def _not_the_original(run: StepRun) -> CheckResult | None:
    step = run.step
    if not isinstance(step, types.FunctionType):
        return None
    calls = [n for n in code_names(step.__code__) if step.__globals__.get(n) is run.reference]
    if not calls:
        return None
    return run.fail(
        f"your step calls `{calls[0]}`, the step to fix, instead of fixing it.",
        "Whatever gets it past the in-place error (copying every tensor backward saves with "
        "`saved_tensors_hooks`, as the checker does to learn what the original means) costs "
        "far more than the fix: find the in-place line (`ah.anomaly.explain_inplace_error`) "
        "and compute a new tensor there.",
    )


# The named checks, in order: each returns a verdict, or None when its property holds.
STEP_CHECKS: tuple[Callable[[StepRun], CheckResult | None], ...] = (
    _ran,
    _left_nothing,
    _returned_a_loss,
    _returned_the_loss,
    _one_backward,
    _backward_on_the_loss,
    _data_left_as_found,
    _update_as_meant,
    _not_the_original,
)
