"""``check_regions``, part 2: the four regions in a profile of the step.

:func:`profile_steps` profiles a few calls of the learner's step (on copies, after a
warm-up call, traced by :class:`~._profiler_trace.RegionTrace`: the work on ``samples``,
the loss by its value, the regions left open) into a :class:`StepProfile`; only the
operators the step itself calls count (each call runs in a region of the checker's own).
:data:`CHECKS`, one small function per property of the regions, judge it in order. The
region named as the slowest is judged on the same profile (``_profiler_slowest``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor, nn
from torch.profiler import record_function

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers.checks._profiler_events import (
    Event,
    ancestors,
    descendants,
    is_operator,
    light_events,
    places,
    region_of,
)
from autograd_helpers.checks._profiler_trace import RegionTrace, Trace
from autograd_helpers.checks._profiler_traced import TRACED
from autograd_helpers.profiling import cpu_profile

__all__ = ["CHECKS", "LABELS", "STEPS", "StepProfile", "profile_steps"]

LABELS = ("data", "forward", "backward", "update")
STEPS = 5  # profiled calls of the learner's step: a label must appear once per call
# A model's forward is a handful of operators; a per-sample loop inside "forward" is thousands.
FORWARD_OPS_FACTOR = 10
OUTSIDE_SHARE = 0.2  # of the step's operators, outside every region: more is work unlabelled


@dataclass(frozen=True)
class StepProfile:
    """The events of :data:`STEPS` profiled calls, and what the model alone runs."""

    events: list[Event]
    model_ops: int  # operators the model and its loss run, once
    loss_ops: frozenset[str]  # the names of the loss's own operators
    trace: Trace | None = None  # the warm-up call, traced (None: it could not be)

    @cached_property
    def labels(self) -> list[Event]:
        return [e for e in self.events if e.name in LABELS]

    def where(self, matches: Callable[[str], bool]) -> set[str | None]:
        return {region_of(e, LABELS) for e in self.events if matches(str(e.name))}


_MODEL, _LOSS = "checker: the model", "checker: its loss"  # regions of the checker's own
_STEP = "checker: one call of the step"


def _model_alone(model: nn.Module, samples: Tensor) -> None:
    """The model and its loss once, in regions of the checker's own (in the same profile)."""
    with torch.no_grad():
        with record_function(_MODEL):
            prediction = model(samples)
        with record_function(_LOSS):
            prediction.square().mean()


def profile_steps(
    fn: Callable[..., object],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Tensor,
) -> StepProfile | Outcome:
    """Profile :data:`STEPS` calls of ``fn`` on copies; the failed call's outcome if one raises.

    One profile holds the steps, then the model and its loss alone, in regions of the
    checker's own: what the model runs is counted where the learner's step is measured.
    """
    mine, given = copy.deepcopy((model, optimizer))
    copied = samples.detach().clone()
    tracing = RegionTrace(copied, LABELS)

    def traced(*args: object) -> object:
        with tracing:
            return fn(*args)

    def step(*args: object) -> object:
        with record_function(_STEP):
            return fn(*args)

    warm = run_learner_code(traced, mine, given, copied)
    trace: Trace | None = tracing.trace
    if warm.error is not None:  # code a dispatch mode disturbs? Warm up without it, then
        trace, mine, given = None, *copy.deepcopy((model, optimizer))
        warm = run_learner_code(fn, mine, given, copied)
    if warm.error is not None:
        return warm
    with cpu_profile() as profiler:
        for _ in range(STEPS):
            outcome = run_learner_code(step, mine, given, copied)
            if outcome.error is not None:
                break
        _model_alone(mine, samples.detach().clone())
    if outcome.error is not None:
        return outcome
    events = light_events(profiler)
    own = [e for e in events if e.name in (_MODEL, _LOSS)]
    operators = [(r.name, c) for r in own for c in r.cpu_children if is_operator(c)]
    loss_ops = frozenset(str(c.name) for region, c in operators if region == _LOSS)
    steps = [e for e in events if e.name == _STEP]
    called = {d for call in steps for d in descendants(call)}  # the runner's work is not
    return StepProfile([e for e in events if e in called], len(operators), loss_ops, trace)


# --- the checks, in order -------------------------------------------------------------------

Check = Callable[[StepProfile], tuple[str, ...] | None]


def _recorded(profile: StepProfile) -> tuple[str, ...] | None:
    if any(is_operator(e) for e in profile.events):
        return None
    return (
        "the checker's profile recorded no operator at all: does the step open a profiler "
        "of its own?",
        "The checker profiles the step itself (a second profiler stops the first): keep "
        "only the `record_function` regions inside `labelled_step`.",
    )


def _every_label(profile: StepProfile) -> tuple[str, ...] | None:
    missing = [r for r in LABELS if not any(e.name == r for e in profile.labels)]
    if not missing:
        return None
    others = sorted(
        {
            str(e.name)
            for e in profile.events
            if getattr(e, "is_user_annotation", False)
            and e.name not in LABELS
            and not str(e.name).startswith(("Optimizer.", "ProfilerStep"))
        }
    )
    details = [f"The four labels are exactly {', '.join(map(repr, LABELS))}."]
    if others:
        details.append(f"Your profile has regions called {', '.join(map(repr, others))}.")
    details.append('Open each with `with torch.profiler.record_function("data"):` and so on.')
    return (f"there is no region called {', '.join(map(repr, missing))}.", *details)


def _once_per_step(profile: StepProfile) -> tuple[str, ...] | None:
    for region in LABELS:
        count = sum(1 for e in profile.labels if e.name == region)
        if count != STEPS:
            return (
                f"the region '{region}' ran {count} times in {STEPS} steps.",
                "Open each region once per step, around its part of the step.",
            )
    return None


def _not_nested(profile: StepProfile) -> tuple[str, ...] | None:
    for event in profile.labels:
        outer = region_of(event, LABELS)
        if outer is not None:
            return (
                f"the region '{event.name}' is inside '{outer}'.",
                "Put the four regions one after the other: a region inside another counts its "
                "time twice (in its own total and in the outer one's), so the slowest is no "
                "longer clear.",
            )
    return None


def _work_in(region: str, matches: Callable[[str], bool], what: str) -> Check:
    """A check that ``what`` (the events ``matches`` picks) runs in ``region`` only."""

    def check(profile: StepProfile) -> tuple[str, ...] | None:
        found = profile.where(matches)
        if found == {region}:
            return None
        where = (
            f"{places(found - {region})} as well as in '{region}'"
            if region in found
            else f"{places(found)}, not in '{region}'"
        )
        return (
            f"{what} ran {where}.",
            f'Move the line that does it into the `record_function("{region}")` block, '
            "and run it once per step.",
        )

    check.__name__ = f"_{region}_work"
    return check


def _loss_in_forward(profile: StepProfile) -> tuple[str, ...] | None:
    """By the loss's operator names: only where the trace could not find it by its value."""
    if profile.trace is not None and profile.trace.loss is not None:
        return None
    misplaced = [
        e
        for e in profile.events
        if e.name in profile.loss_ops
        and region_of(e, LABELS) not in ("data", "forward")
        and (e.cpu_parent is None or e.cpu_parent.name in (*LABELS, _STEP))  # by the step
    ]
    if not misplaced:
        return None
    ops = ", ".join(f"`{op}`" for op in sorted({str(e.name) for e in misplaced}))
    return (
        f"the loss ({ops}) ran {places({region_of(e, LABELS) for e in misplaced})}, "
        "not in 'forward'.",
        "The loss belongs to forward: compute it in the same region as the model.",
    )


def _data_holds_work(profile: StepProfile) -> tuple[str, ...] | None:
    data = [e for e in profile.labels if e.name == "data"]
    if any(is_operator(d) for e in data for d in descendants(e)):
        return None
    return (
        "the region 'data' holds no operator.",
        "Put the call that prepares the batch from `samples` inside it.",
    )


def _forward_is_the_model(profile: StepProfile) -> tuple[str, ...] | None:
    forward_ops = sum(
        1
        for e in profile.labels
        if e.name == "forward"
        for d in e.cpu_children  # direct children: the model's own calls and the loss
        if is_operator(d)
    )
    if forward_ops <= FORWARD_OPS_FACTOR * max(profile.model_ops, 1) * STEPS:
        return None
    return (
        f"'forward' runs {forward_ops // STEPS} operators per step; the model and its loss "
        f"need about {profile.model_ops}.",
        "The batch preparation is inside 'forward': give it its own 'data' region.",
    )


def _called_by_the_step(event: Event) -> bool:
    return event.cpu_parent is None or event.cpu_parent.name == _STEP


def _traced(name: str) -> Check:
    """The check of ``_profiler_traced`` called ``name``, on the profile's trace."""

    def check(profile: StepProfile) -> tuple[str, ...] | None:
        return TRACED[name](profile.trace)

    check.__name__ = name
    return check


def _under_zero_grad(event: Event) -> bool:
    return any(str(a.name).startswith("Optimizer.zero_grad#") for a in ancestors(event))


def _little_outside(profile: StepProfile) -> tuple[str, ...] | None:
    # Judged by counting operators, not by their times: on a busy machine one preempted
    # operator can take longer than a whole region, and a count does not vary.
    # `optimizer.zero_grad()` may stay outside (the exercise allows it).
    operators = [e for e in profile.events if is_operator(e)]
    outside = [e for e in operators if region_of(e, LABELS) is None and not _under_zero_grad(e)]
    if len(outside) <= OUTSIDE_SHARE * len(operators):
        return None
    names = sorted({str(e.name) for e in outside if _called_by_the_step(e)})[:4]
    return (
        f"{len(outside) // STEPS} of the step's {len(operators) // STEPS} operators run "
        f"outside the four regions ({', '.join(names)}…).",
        "Every line of the step belongs to one of the regions: is part of the work done "
        "twice, once outside the regions?",
    )


CHECKS: tuple[Check, ...] = (
    _recorded,
    _traced("_regions_closed"),
    _every_label,
    _once_per_step,
    _not_nested,
    _work_in("forward", lambda n: n == "aten::linear", "the model's layers (`aten::linear`)"),
    _work_in(
        "backward",
        lambda n: n.startswith("autograd::engine::evaluate_function"),
        "the backward nodes (`autograd::engine::evaluate_function: …`)",
    ),
    _work_in("update", lambda n: n.startswith("Optimizer.step#"), "the optimizer's step"),
    _traced("_preparation_in_data"),  # before the loss: the preparation calls `aten::mean` too
    _traced("_loss_by_value"),
    _little_outside,
    _traced("_preparation_whole"),
    _loss_in_forward,
    _data_holds_work,
    _forward_is_the_model,
)
