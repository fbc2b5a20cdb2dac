"""``check_regions``, part 2: the checker's own profile of the step, read once.

:func:`profile_steps` profiles calls of the learner's step (on copies, after a warm-up
call, traced by :class:`~._trace.RegionTrace`: the work on ``samples``, the loss by
its value, the regions left open) into a :class:`StepProfile`; only the operators the step
itself calls count (each call runs in a region of the checker's own). Two profiles: one
call with every operator, then the model and its loss alone (what each region holds,
counted: :func:`~._events.flat_events` read into a count of each kind of event
with its region); and :data:`STEPS` calls with the regions alone (:func:`regions_only`: how
often each opened, how long it took, inside which). A per-sample loop records thousands of
operators per call: recording them once, not for every timed call, and reading them into a
few hundred kinds with no tree of objects, keeps the checker quick and leaves nothing for
the garbage collector; the timed calls also carry no cost of recording operators.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.profiler import record_function

from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers._profile_events import (
    EventTable,
    Span,
    flat_events,
    raw_events,
    regions_named,
)
from autograd_helpers.checks.profiler._trace import RegionTrace, Trace
from autograd_helpers.notebook import QUIET_NATIVE_LOGS
from autograd_helpers.profiling import cpu_profile

__all__ = ["LABELS", "STEP", "STEPS", "Label", "Op", "StepProfile", "profile_steps", "regions_only"]

LABELS = ("data", "forward", "backward", "update")
STEPS = 5  # profiled calls of the learner's step: a label must appear once per call
_MODEL, _LOSS = "checker: the model", "checker: its loss"  # regions of the checker's own
STEP = "checker: one call of the step"
_ZERO_GRAD = "Optimizer.zero_grad#"


class Op(NamedTuple):
    """A kind of event the step called, as the checks read it."""

    name: str
    region: str | None  # the innermost of LABELS around it (None: outside all of them)
    caller: str | None  # the name of the event around it (None: at the top)
    in_zero_grad: bool  # inside `optimizer.zero_grad()`
    is_user_annotation: bool


class Label(NamedTuple):
    """One of the four regions, in one call of the step."""

    name: str
    cpu_time_total: float  # µs, children included
    outer: str | None  # the label around it (None: not inside another)


@dataclass(frozen=True)
class StepProfile:
    """What :data:`STEPS` profiled calls ran, and what the model alone runs.

    The regions of every timed call are read (``labels``: how often each opened, how long
    it took, whether inside another); the work of one call, event by event (``events``):
    the calls differ in their times, not in what they run.
    """

    events: dict[Op, int]  # each kind of event one call ran, and how many times
    labels: list[Label]  # every call's, in the order they started
    model_ops: int  # operators the model and its loss run, once
    loss_ops: frozenset[str]  # the names of the loss's own operators
    trace: Trace | None = None  # the warm-up call, traced (None: it could not be)

    def where(self, matches: Callable[[str], bool]) -> set[str | None]:
        return {e.region for e in self.events if matches(e.name)}


def _labels(spans: list[Span]) -> list[Label]:
    """The four regions inside the checker's calls of the step (``spans`` in the order they
    started), each with the innermost one around it."""
    calls = [span for span in spans if span.name == STEP]
    labels: list[Label] = []
    open_in: dict[int, list[Span]] = {}  # per thread: the regions still open
    for span in spans:
        if span.name not in LABELS or not any(call.holds(span) for call in calls):
            continue
        around = open_in.setdefault(span.thread, [])
        while around and not around[-1].holds(span):
            around.pop()
        labels.append(Label(span.name, span.cpu_time_total, around[-1].name if around else None))
        around.append(span)
    return labels


def _first_call(table: EventTable) -> tuple[dict[Op, int], int, frozenset[str]]:
    """The kinds of event under the checker's first :data:`STEP` region of ``table``, and
    the operators directly inside its regions around the model and the loss alone."""
    names, parents = table.names, table.parents
    label_at, in_step, zero = [-1] * len(names), [False] * len(names), [False] * len(names)
    events: Counter[Op] = Counter()
    own_ops, loss_ops = 0, set()
    for i, (name, p) in enumerate(zip(names, parents, strict=True)):
        if p < 0:
            continue  # a region of the checker's own
        parent = names[p]
        label_at[i] = p if parent in LABELS else label_at[p]
        in_step[i] = in_step[p] or parent == STEP
        zero[i] = zero[p] or parent.startswith(_ZERO_GRAD)
        if name.startswith("aten::") and parent in (_MODEL, _LOSS):
            own_ops += 1
            if parent == _LOSS:
                loss_ops.add(name)
        if in_step[i]:
            region = names[label_at[i]] if label_at[i] >= 0 else None
            events[Op(name, region, parent, zero[i], table.annotations[i])] += 1
    return dict(events), own_ops, frozenset(loss_ops)


def read_steps(detailed: list[Any], timed: list[Any], trace: Trace | None = None) -> StepProfile:
    """The :class:`StepProfile` of two profiles' :func:`~._events.raw_events`: one
    call of the step with every operator (then the model and its loss alone), and the timed
    calls (:func:`regions_only`)."""
    spans = regions_named(detailed, (STEP, _MODEL, _LOSS))
    calls = [span for span in spans if span.name == STEP]
    alone = [span for span in spans if span.name in (_MODEL, _LOSS)]
    events, model_ops, loss_ops = _first_call(flat_events(detailed, within=[*calls[:1], *alone]))
    labels = _labels(regions_named(timed, (STEP, *LABELS)))
    return StepProfile(events, labels, model_ops, loss_ops, trace)


@contextmanager
def regions_only() -> Iterator[list[Any]]:
    """A CPU profile of the ``record_function`` regions alone, no operator recorded: the
    list it gives holds the raw records once the block ends.

    A region's time is then what its work takes, without the cost of recording each
    operator inside it (a few microseconds each, thousands in a per-sample loop), and the
    profile ends in milliseconds where one of every operator takes a tenth of a second.
    """
    from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler
    from torch._C._profiler import (
        ProfilerActivity,
        ProfilerConfig,
        ProfilerState,
        RecordScope,
        _ExperimentalConfig,
    )

    for key, value in QUIET_NATIVE_LOGS.items():
        os.environ.setdefault(key, value)
    config = ProfilerConfig(
        ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig()
    )
    activities = {ProfilerActivity.CPU}
    records: list[Any] = []
    _prepare_profiler(config, activities)
    # torch's stub leaves out the third argument, the scopes recorded (2.13 takes it)
    _enable_profiler(config, activities, {RecordScope.USER_SCOPE})  # type: ignore[call-arg]
    try:
        yield records
    finally:
        records.extend(_disable_profiler().events())


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
    """Profile calls of ``fn`` on copies; the failed call's outcome if one raises.

    One profile holds one call with every operator, then the model and its loss alone, in
    regions of the checker's own: what the model runs is counted where the learner's step is
    measured. Another times :data:`STEPS` calls, their regions alone.
    """
    mine, given = copy.deepcopy((model, optimizer))
    copied = samples.detach().clone()
    tracing = RegionTrace(copied, LABELS)

    def traced(*args: object) -> object:
        with tracing:
            return fn(*args)

    def step(*args: object) -> object:
        with record_function(STEP):
            return fn(*args)

    warm = run_learner_code(traced, mine, given, copied)
    trace: Trace | None = tracing.trace
    if warm.error is not None:  # code a dispatch mode disturbs? Warm up without it, then
        trace, mine, given = None, *copy.deepcopy((model, optimizer))
        warm = run_learner_code(fn, mine, given, copied)
    if warm.error is not None:
        return warm
    with cpu_profile() as profiler:
        outcome = run_learner_code(step, mine, given, copied)
        _model_alone(mine, samples.detach().clone())
    if outcome.error is not None:
        return outcome
    detailed = raw_events(profiler)
    del profiler  # the recorded operators go as soon as they are read
    with regions_only() as timed:
        for _ in range(STEPS):
            outcome = run_learner_code(step, mine, given, copied)
            if outcome.error is not None:
                return outcome
    return read_steps(detailed, timed, trace)
