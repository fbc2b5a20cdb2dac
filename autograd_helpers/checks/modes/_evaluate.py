"""``check_evaluate`` as named checks, run in order from :data:`CHECKS` on every case.

Each case of :data:`~autograd_helpers.checks.modes._cases.CASES` calls the learner's loop
once (:func:`~autograd_helpers.checks.modes._attempt.attempt`). Then one small function per
property judges the call, and the first that finds a problem gives the verdict. On the case
whose last batch makes the model raise, only what must hold *also* when a loop raises is
judged (:data:`CHECKS_WHEN_A_BATCH_RAISES`): the error passed on to the caller (not
swallowed), the mode put back, nothing else changed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from autograd_helpers.checks._contain.modules import listed, notebook_kept, settings_kept
from autograd_helpers.checks._core.feedback import CheckResult, first_found, raised_verdict
from autograd_helpers.checks.modes._attempt import Attempt, as_number
from autograd_helpers.checks.modes._cases import FEATURES, WRONG_LOOPS
from autograd_helpers.checks.modes._contain import global_calls_kept, outside_kept
from autograd_helpers.checks.modes._grads import evaluation_grads_kept
from autograd_helpers.checks.modes._kept import (
    attributes_kept,
    dtypes_kept,
    hooks_kept,
    layout_kept,
)

__all__ = ["CHECKS", "CHECKS_WHEN_A_BATCH_RAISES", "judge"]

# float32 sums of a few losses of order 1 agree to ~1e-7; a loop that averages differently
# (over samples, say) is off by 1e-2 or more.
RELATIVE_TOLERANCE = 1e-5
_LEAK = (
    "In train mode a forward pass updates the running statistics from every batch it sees: "
    "the evaluation data leaks into the model. Call `model.eval()` (it switches every "
    "submodule) before the first forward pass, a warm-up pass included."
)


# --- the checks, in order -------------------------------------------------------------------


def _ran(run: Attempt) -> CheckResult | None:
    return raised_verdict(run.label, f"on {run.case.description}, it", run.outcome)


def _one_number(run: Attempt) -> CheckResult | None:
    read = as_number(run.outcome.value)
    if isinstance(read, float):
        run.value = read
        return None
    if read == "None":
        hint = "Did you forget `return`? Return the mean loss, one number."
    elif read.startswith(("a list", "a tuple")):
        hint = "Return their mean, one number: `sum(losses) / len(losses)`."
    else:
        hint = (
            "Return one number: the mean over the batches of each batch's mean loss "
            "(`F.mse_loss` reduces a batch to one number; not with `reduction='none'`)."
        )
    return run.fail(f"it returned {read}, not the mean loss.", hint)


def _close(value: float, target: float) -> bool:
    return abs(value - target) <= RELATIVE_TOLERANCE * max(1.0, abs(target))


def _value(run: Attempt) -> CheckResult | None:
    want = run.expected
    assert want is not None
    if _close(run.value, want.right):
        return None
    details = [f"It returned {run.value:.6g}; the eval-mode mean loss is {want.right:.6g}."]
    details += [hint for loop, hint in WRONG_LOOPS if _close(run.value, loop(want))][:1]
    moved = run.record.buffers_changed(run.model)
    if len(details) == 1 and moved:
        return run.fail(
            f"on {run.case.description}, the running statistics changed ({listed(moved)}): "
            "a forward pass ran in train mode during the evaluation.",
            *details,
            _LEAK,
        )
    return run.fail(f"on {run.case.description}, the value is off.", *details)


def _mode_restored(run: Attempt) -> CheckResult | None:
    problem = _mode_problem(run.model, run.case.start)
    if problem is None:
        return None
    title, hint = problem
    if run.case.raises:
        return run.fail(
            f"when a batch raised an error (it has {FEATURES + 1} features, the model takes "
            f"{FEATURES}), {title}",
            "Put the mode back in a `finally:` block, as the chapter's `evaluate` does: it "
            "runs whether the loop finishes or raises.",
        )
    return run.fail(title, hint)


def _mode_problem(model: nn.Module, start: str) -> tuple[str, str] | None:
    """(title, hint) when ``model`` is not wholly back in the ``start`` mode, else None."""
    training = start == "train"
    flags = {module.training for module in model.modules()}
    if flags == {training}:
        return None
    other = "eval" if training else "train"
    if flags == {not training}:
        return (
            f"the model was in {start} mode before and is in {other} mode after.",
            "Restore the mode you found: remember `was_training = model.training`, and call "
            "`model.train(was_training)` at the end (not simply `model.train()`).",
        )
    if model.training == training:
        changed = [name for name, m in model.named_modules() if m.training != training]
        return (
            f"the model was in {start} mode before; after, its own flag says {start} but its "
            f"submodules {listed(changed)} are in {other} mode.",
            "Setting `model.training = ...` changes only the model's own flag; "
            "`model.train(was_training)` sets it on every submodule.",
        )
    return (
        f"the model was in {start} mode before; after, some of its modules are in train mode "
        "and some in eval mode.",
        "Restore the mode with `model.train(was_training)`: it sets every submodule.",
    )


def _statistics_kept(run: Attempt) -> CheckResult | None:
    moved = run.record.buffers_changed(run.model)
    if not moved:
        return None
    kinds = sorted({type(run.model.get_submodule(n.rpartition(".")[0])).__name__ for n in moved})
    return run.fail(
        f"{' and '.join(kinds)}'s running statistics changed ({listed(moved)}): a forward "
        "pass ran in train mode.",
        _LEAK,
    )


def _parameters_kept(run: Attempt) -> CheckResult | None:
    model, record = run.model, run.record
    flipped = record.requires_grad_changed(model)
    if flipped:
        now = dict(model.named_parameters())[flipped[0]].requires_grad
        if not now:
            return run.fail(
                f"it left `requires_grad` off on {listed(flipped)}: after evaluating, the "
                "model can no longer learn.",
                "Evaluation needs no graph: `torch.inference_mode()` (or `torch.no_grad()`) "
                "records none and changes nothing on the model; `requires_grad_(False)` "
                "changes the model for good.",
            )
        return run.fail(
            f"it switched `requires_grad` on for {listed(flipped)}, which were frozen: the "
            "model it hands back trains layers that were meant to stay fixed.",
            "Leave `requires_grad` alone: `torch.inference_mode()` (or `torch.no_grad()`) "
            "stops recording without touching the model.",
        )
    changed = record.replaced(model) + record.values_changed(model)
    if changed:
        return run.fail(
            f"it changed the model's parameters ({listed(changed)}): evaluating must not "
            "train or modify the model."
        )
    return evaluation_grads_kept(run)


def _loader_kept(run: Attempt) -> CheckResult | None:
    if len(run.loader) != len(run.batches) or any(
        now is not before for now, before in zip(run.loader, run.batches, strict=True)
    ):
        return run.fail(
            f"it changed the loader itself: it held {len(run.batches)} batches, and after the "
            f"call it holds {len(run.loader)}"
            + (", some of them replaced" if len(run.loader) == len(run.batches) else "")
            + ". The loader is the caller's: the next evaluation, or the next epoch, "
            "would see other batches, or none.",
            "Read the batches with `for inputs, targets in loader:`; do not `pop`, `clear`, "
            "`del` or reassign its items. (A one-shot iterator is used up by one pass: "
            "take the losses and the count in that same pass.)",
        )
    for index, ((x, y), (x0, y0)) in enumerate(zip(run.batches, run.data, strict=True)):
        for name, now, before in (("inputs", x, x0), ("targets", y, y0)):
            if now.requires_grad != before.requires_grad or not torch.equal(now, before):
                return run.fail(
                    f"it changed batch {index}'s {name} in place: the loader's data is the "
                    "caller's, and the next evaluation would see other numbers.",
                    "Compute new tensors (`(x - mean) / std`), not in-place ones "
                    "(`x.sub_(mean)`), and leave `requires_grad` of the data alone.",
                )
    return None


def _no_graph(run: Attempt) -> CheckResult | None:
    if not run.saved and not run.recorded:
        return None
    what = (
        f"{run.saved} tensors saved for backward"
        if run.saved
        else f"the model's output had a `grad_fn` in {run.recorded} forward passes, its saved "
        "tensors packed away by `saved_tensors_hooks`"
    )
    return run.fail(
        f"it recorded a graph ({what}) it never uses.",
        "Wrap the loop in `torch.inference_mode()` (or `torch.no_grad()`): evaluation needs "
        "no gradients, and the graph costs memory and time. Hooks that move saved tensors "
        "elsewhere still record the graph; only grad mode off records none "
        "(`torch.inference_mode(False)` and `torch.enable_grad()` switch it back on).",
    )


_attributes_kept = attributes_kept("evaluating")
_layout_kept = layout_kept("evaluating")
_dtypes_kept = dtypes_kept("evaluating")
_hooks_kept = hooks_kept("evaluating")


def _error_passed_on(run: Attempt) -> CheckResult | None:
    """The batch that makes the model raise must make the loop raise: the caller's error."""
    if run.outcome.error is not None:
        return None
    batch = len(run.case.sizes)
    return run.fail(
        f"your loop hid the error from batch {batch}: that batch has {FEATURES + 1} features, "
        f"the model takes {FEATURES} and raises, and your loop "
        + (
            "returned a number anyway"
            if run.outcome.value is not None
            else "returned as if nothing had happened"
        )
        + ".",
        "Let the error go up to the caller: a `try`/`except` that swallows it (`except "
        "Exception: pass`, `except RuntimeError: continue`) turns a broken batch into a mean "
        "over the others, and nobody learns that the data or the model is wrong. Put the mode "
        "back in a `finally:` block, with no `except`, as the chapter's `evaluate` does.",
    )


Check = Callable[[Attempt], CheckResult | None]
CHECKS: tuple[Check, ...] = (
    _ran,
    settings_kept,
    notebook_kept,
    outside_kept,
    _loader_kept,
    _dtypes_kept,
    _one_number,
    _value,
    _mode_restored,
    _statistics_kept,
    _parameters_kept,
    _hooks_kept,
    _attributes_kept,
    _layout_kept,
    global_calls_kept,
    _no_graph,
)
# A loop on a batch that raises must raise (the model's error goes up to the caller), and
# leave the model as it found it on the way out.
CHECKS_WHEN_A_BATCH_RAISES: tuple[Check, ...] = (
    settings_kept,
    notebook_kept,
    outside_kept,
    _dtypes_kept,
    _error_passed_on,
    _mode_restored,
    _statistics_kept,
    _parameters_kept,
    _hooks_kept,
    _attributes_kept,
    _layout_kept,
    _loader_kept,
    global_calls_kept,
)


def judge(run: Attempt) -> CheckResult | None:
    """The first problem the checks find with one call, or None."""
    return first_found(CHECKS_WHEN_A_BATCH_RAISES if run.case.raises else CHECKS, run)
