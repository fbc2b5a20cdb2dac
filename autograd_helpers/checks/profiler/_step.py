"""``check_regions``, part 1b: does the labelled step still do the specified training step?

:func:`step_problem` runs the learner's step beside the specified one
(:func:`~._attempt.attempt`), on the notebook's batch and on a probe batch of
another size; :data:`CHECKS`, one small function per property of an
:class:`~._attempt.Attempt`, judge each run in order, and the first that finds a
problem gives the verdict.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from autograd_helpers.checks._core.feedback import (
    CheckResult,
    failed,
    first_found,
    from_learner_error,
)
from autograd_helpers.checks.profiler._attempt import MARKER, Attempt, attempt, probe_size
from autograd_helpers.checks.profiler._compare import RELATIVE_TOLERANCE, clipped, gap, scale_of

__all__ = ["CHECKS", "Check", "step_problem"]

SPECIFIED_LOSS = "`model(batch).square().mean()`"
_STEPPED_EARLY = (
    "`optimizer.step()` ran before `loss.backward()`: it changed, in place, the weights the "
    "loss's graph saved. Keep the order of the original step: zero the gradients, "
    "`loss.backward()`, then `optimizer.step()`."
)


# --- the checks, in order -------------------------------------------------------------------

Check = Callable[[Attempt], tuple[str, ...] | None]


def _global_settings(run: Attempt) -> tuple[str, ...] | None:
    if not run.outcome.side_effects:
        return None
    changes = run.outcome.side_effects
    return run.fail(
        f"{changes[0]}.", *changes[1:], "A training step leaves torch's settings as it found them."
    )


def _samples_kept(run: Attempt) -> tuple[str, ...] | None:
    if run.requires_grad_changed and not run.samples_changed:
        return run.fail(
            "it changed the caller's `samples`: they now require grad "
            "(`samples.requires_grad_()`).",
            "The raw data is the caller's, and a step needs no gradient for it: the gradients "
            "are the parameters'. Drop the `requires_grad_` (to experiment, use a copy: "
            "`samples.detach().clone().requires_grad_()`).",
        )
    if not run.samples_changed:
        return None
    return run.fail(
        "it changed `samples` in place: the caller's raw data is no longer raw.",
        "Prepare a new tensor (`batch = normalise_each(samples)`) instead of writing into "
        "`samples` (`-=`, `/=`, `sub_`...).",
    )


def _notebook_kept(run: Attempt) -> tuple[str, ...] | None:
    if not run.notebook_changed:
        return None
    return run.fail(
        "it trained the notebook's own model, not the model it was given.",
        "Inside `labelled_step`, use its arguments `model`, `optimizer` and `samples`, "
        "not the notebook's names (`net`, `sgd`): the checker calls it with copies.",
    )


def _flags_kept(run: Attempt) -> tuple[str, ...] | None:
    if not run.flags_changed:
        return None
    return run.fail(
        f"it left {', '.join(run.flags_changed[:3])}: that outlives the step.",
        "A training step changes the parameters, nothing else of the model: drop the "
        "`model.eval()`, `requires_grad_` or hook from the step.",
    )


_CALLED_AGAIN = (
    "The notebook calls `labelled_step(net, sgd, samples)` again, and trains on: "
    "what the step changes stays."
)


def _optimizer_settings_kept(run: Attempt) -> tuple[str, ...] | None:
    if not run.settings_changed:
        return None
    return run.fail(
        f"it changed the optimizer's settings ({'; '.join(run.settings_changed[:3])}).",
        f"A training step uses the optimizer's settings, never changes them. {_CALLED_AGAIN} "
        "Change a learning rate outside the step (a scheduler, between steps).",
    )


def _no_optimizer_hooks(run: Attempt) -> tuple[str, ...] | None:
    if not run.hooks_added:
        return None
    return run.fail(
        f"it registered {', '.join(run.hooks_added)}: every later step would run it.",
        f"A training step registers nothing. {_CALLED_AGAIN} Register a hook once, outside "
        "the step, if at all.",
    )


def _random_state_kept(run: Attempt) -> tuple[str, ...] | None:
    if not run.random_changed:
        return None
    return run.fail(
        "it changed torch's random state (a `torch.manual_seed(...)` in the step, or random "
        "numbers the specified step does not draw).",
        f"Every later random draw of the notebook would change with it. {_CALLED_AGAIN} "
        "Seed once, at the top of the notebook, not inside a step.",
    )


def _stepped_once(run: Attempt) -> tuple[str, ...] | None:
    if run.steps_given == 1 and not run.steps_other:
        return None
    if run.steps_given == 0 and run.steps_other:
        return run.fail(
            "the optimizer it was given never stepped; another one did.",
            "Call `optimizer.step()` on the `optimizer` argument, not on a notebook name or "
            "a new optimizer: the checker calls the step with copies of the model given.",
        )
    if run.steps_given == 0 and gap(run.update, run.want_update) <= RELATIVE_TOLERANCE:
        return run.fail(
            "it updates the parameters by hand, never with `optimizer.step()`.",
            "Right by value for plain SGD, on this step; but the exercise labels the original "
            "step, whose update is `optimizer.step()`: an optimizer with momentum or Adam "
            "would update differently by hand, and its state would never advance. Call "
            "`optimizer.step()` in the 'update' region.",
        )
    if run.steps_given == 0:
        return run.fail(
            "the optimizer's step never ran: the step does not train.",
            "End the step with `optimizer.step()`, in the 'update' region.",
        )
    return run.fail(
        f"the optimizer's step ran {run.steps_given + run.steps_other} times in one call of "
        "the step.",
        "Call `optimizer.step()` once per training step: each call moves the parameters again.",
    )


def _gradients(run: Attempt) -> tuple[str, ...] | None:
    """The gradients ``optimizer.step()`` saw are the specified loss's; where they are not,
    the first known slip that explains them (the order of the lines, a missing zeroing, the
    raw samples, a clip) is said, else :func:`_another_loss`."""
    if gap(run.grads, run.want_grads) <= RELATIVE_TOLERANCE:
        return None
    if all(not bool(g.any()) for g in run.grads) and run.closure:
        return run.fail(
            "it calls `loss.backward()` inside `optimizer.step(closure)`: the gradients are "
            "zero when the step starts, and backward runs in 'update'.",
            "Keep the original step: `loss.backward()` in 'backward', then `optimizer.step()` "
            "without a closure in 'update' (a closure is for optimizers that re-evaluate the "
            "loss, such as L-BFGS).",
        )
    if all(not bool(g.any()) for g in run.grads):
        return run.fail(
            "the gradients are all zero (or None) when `optimizer.step()` runs, so the "
            "parameters have not changed: it does not train.",
            "Keep the order of the original step: zero the gradients, `loss.backward()`, then "
            "`optimizer.step()` (zeroing between backward and step throws the gradients away; "
            "stepping before backward has none to use yet).",
        )
    if all(bool((g == MARKER).all()) for g in run.grads):
        return run.fail(
            "`optimizer.step()` ran before `loss.backward()`: it used the gradients left over "
            "from before the step.",
            "Keep the order of the original step: zero the gradients, `loss.backward()`, then "
            "`optimizer.step()`.",
        )
    if gap(run.grads, [w + MARKER for w in run.want_grads]) <= RELATIVE_TOLERANCE:
        return run.fail(
            "it does not zero the gradients: `loss.backward()` adds the new gradients to "
            "those of the previous step.",
            "Call `optimizer.zero_grad()` before `loss.backward()`, in the 'backward' region.",
        )
    if gap(run.grads, run.raw_grads) <= RELATIVE_TOLERANCE:
        return run.fail(
            "its loss is computed from the raw `samples`, not from the prepared batch.",
            "Prepare the batch in 'data' (each sample to mean 0 and standard deviation 1: "
            "`batch = normalise_each(samples)`), then compute the loss from it: "
            "`model(batch).square().mean()`.",
        )
    if (clip := clipped(run.grads, run.want_grads)) is not None:
        return run.fail(
            f"the gradients at `optimizer.step()` are clipped: {clip}.",
            "Clipping changes the update (a smaller step, and another direction when "
            "values are capped one by one): the step specifies the plain gradient of "
            f"{SPECIFIED_LOSS}. Labels change nothing a step computes: drop the clipping, "
            "keep the original step's lines, each inside its region.",
        )
    return _another_loss(run)


def _another_loss(run: Attempt) -> tuple[str, ...]:
    """Gradients that no known slip explains: those of another loss, by a factor if any."""
    scale = scale_of(run.grads, run.want_grads)
    if scale is not None:
        times = f"{scale:.4g} times"
        summed = " (the sum over the batch, not the mean)" if round(scale) == run.batch else ""
        hint = f"Its gradients are {times} those of the specified loss{summed}."
    else:
        hint = "Its gradients are not a multiple of the specified loss's either."
    return run.fail(
        "the gradients at `optimizer.step()` are not those of the specified loss.",
        hint,
        f"The step specifies {SPECIFIED_LOSS}, with `batch` each sample normalised to mean 0 "
        "and standard deviation 1 (`normalise_each(samples)`). Labels change nothing a step "
        "computes: keep the original step's lines, each inside its region.",
    )


def _update(run: Attempt) -> tuple[str, ...] | None:
    if gap(run.update, run.want_update) <= RELATIVE_TOLERANCE:
        return None
    return run.fail(
        "the gradients are right, but the parameters moved differently from one step of the "
        "optimizer it was given.",
        "Leave the optimizer's settings alone (its learning rate, its state) and call "
        "`optimizer.step()` once, after `loss.backward()`.",
    )


def _nothing_left(run: Attempt) -> tuple[str, ...] | None:
    if not run.left:
        return None
    return run.fail(
        f"it changed something a training step leaves alone: {run.left[0]}.",
        *(f"Also: {more}." for more in run.left[1:3]),
        f"A training step changes the parameters (and the optimizer's state, through "
        f"`optimizer.step()`), nothing else. {_CALLED_AGAIN} A list of losses kept in a global "
        "also keeps each step's graph alive. Record what you need outside the step, from "
        "what it returns (the checker put it back).",
    )


CHECKS: tuple[Check, ...] = (
    _global_settings,
    _samples_kept,
    _notebook_kept,
    _flags_kept,
    _optimizer_settings_kept,
    _no_optimizer_hooks,
    _random_state_kept,
    _stepped_once,
    _gradients,
    _update,
    _nothing_left,
)


def step_problem(
    fn: Callable[..., object],
    label: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Tensor,
    prepare: Callable[[Tensor], Tensor],
) -> CheckResult | None:
    """The learner's step against the specified one, on the batch and on a probe batch."""
    probe = probe_size(len(samples))
    generator = torch.Generator().manual_seed(0)
    other = torch.randn((probe, *samples.shape[1:]), generator=generator, dtype=samples.dtype)
    where = f"on a batch of {probe} samples (a probe beyond the notebook's {len(samples)}), "
    for batch, said in ((samples, ""), (other, where)):
        run = attempt(fn, label, model, optimizer, batch, prepare, said)
        if run.outcome.error is not None:
            early = run.steps_given and "modified by an inplace" in str(run.outcome.error.exception)
            hint = _STEPPED_EARLY if early else None
            return from_learner_error(label, f"{said}the step", run.outcome, hint=hint)
        if (problem := first_found(CHECKS, run)) is not None:
            return failed(label, *problem)
    return None
