"""``check_regions``, part 2b: the four regions in the checker's profile of the step.

:data:`CHECKS`, one small function per property of the regions, judge the
:class:`~._steps.StepProfile` of :func:`~._steps.profile_steps` in order.
The region named as the slowest is judged on the same profile (``_slowest``).
"""

from __future__ import annotations

from collections.abc import Callable

from autograd_helpers._profile_events import places
from autograd_helpers.checks.profiler._steps import (
    LABELS,
    STEP,
    STEPS,
    Op,
    StepProfile,
    profile_steps,
)
from autograd_helpers.checks.profiler._traced import TRACED

__all__ = ["CHECKS", "LABELS", "STEPS", "StepProfile", "profile_steps"]

# A model's forward is a handful of operators; a per-sample loop inside "forward" is thousands.
FORWARD_OPS_FACTOR = 10
OUTSIDE_SHARE = 0.2  # of the step's operators, outside every region: more is work unlabelled


def _is_operator(event: Op) -> bool:
    return event.name.startswith("aten::")


# --- the checks, in order -------------------------------------------------------------------

Check = Callable[[StepProfile], tuple[str, ...] | None]


def _recorded(profile: StepProfile) -> tuple[str, ...] | None:
    if any(_is_operator(e) for e in profile.events):
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
            e.name
            for e in profile.events
            if e.is_user_annotation
            and e.name not in LABELS
            and not e.name.startswith(("Optimizer.", "ProfilerStep"))
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
    for label in profile.labels:
        if label.outer is not None:
            return (
                f"the region '{label.name}' is inside '{label.outer}'.",
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
        and e.region not in ("data", "forward")
        and (e.caller is None or e.caller in (*LABELS, STEP))  # called by the step
    ]
    if not misplaced:
        return None
    ops = ", ".join(f"`{op}`" for op in sorted({e.name for e in misplaced}))
    return (
        f"the loss ({ops}) ran {places({e.region for e in misplaced})}, not in 'forward'.",
        "The loss belongs to forward: compute it in the same region as the model.",
    )


def _data_holds_work(profile: StepProfile) -> tuple[str, ...] | None:
    # no region is inside another by now (_not_nested): inside 'data' is in its region
    if any(_is_operator(e) and e.region == "data" for e in profile.events):
        return None
    return (
        "the region 'data' holds no operator.",
        "Put the call that prepares the batch from `samples` inside it.",
    )


def _forward_is_the_model(profile: StepProfile) -> tuple[str, ...] | None:
    forward_ops = sum(  # operators directly inside: the model's own calls and the loss
        n for e, n in profile.events.items() if _is_operator(e) and e.caller == "forward"
    )
    if forward_ops <= FORWARD_OPS_FACTOR * max(profile.model_ops, 1):
        return None
    return (
        f"'forward' runs {forward_ops} operators per step; the model and its loss "
        f"need about {profile.model_ops}.",
        "The batch preparation is inside 'forward': give it its own 'data' region.",
    )


def _called_by_the_step(event: Op) -> bool:
    return event.caller is None or event.caller == STEP


def _traced(name: str) -> Check:
    """The check of ``_traced`` called ``name``, on the profile's trace."""

    def check(profile: StepProfile) -> tuple[str, ...] | None:
        return TRACED[name](profile.trace)

    check.__name__ = name
    return check


def _little_outside(profile: StepProfile) -> tuple[str, ...] | None:
    # Judged by counting operators, not by their times: on a busy machine one preempted
    # operator can take longer than a whole region, and a count does not vary.
    # `optimizer.zero_grad()` may stay outside (the exercise allows it).
    operators = {e: n for e, n in profile.events.items() if _is_operator(e)}
    outside = {e: n for e, n in operators.items() if e.region is None and not e.in_zero_grad}
    counted, counted_outside = sum(operators.values()), sum(outside.values())
    if counted_outside <= OUTSIDE_SHARE * counted:
        return None
    names = sorted({e.name for e in outside if _called_by_the_step(e)})[:4]
    return (
        f"{counted_outside} of the step's {counted} operators run "
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
