"""The checkers of ``06_profiler.ipynb``'s exercises (public in ``ah.checks``).

Each is a thin entry; the checks it runs are private, one module per idea, the checks of
each a table of named checks run in order: ``_attempt`` and ``_step`` (the
labelled step, run beside the specified one, still trains as specified),
``_regions`` (the four regions in a profile of it; ``_trace`` and
``_traced``: the work on ``samples``, the loss by its value and the regions left
open, in a traced call) and ``_slowest`` (the region named as the slowest),
``_saved_run`` (in what order a Function is judged), ``_memory``, ``_routes``,
``_written`` and ``_saved`` (what it keeps alive between forward and backward, by any
route, and where),
``_dominant`` (reading backward's dominant operator);
``autograd_helpers._profile_events`` (shared with ``ah.profiling``) reads the profiler's
event tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from autograd_helpers._common.runner import Outcome
from autograd_helpers._common.validate import require_callable
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    callable_verdict,
    failed,
    first_found,
    from_learner_error,
    stub_verdict,
)
from autograd_helpers.checks._core.problems import label_of
from autograd_helpers.checks.profiler._answers import read_name
from autograd_helpers.checks.profiler._attempt import normalise_each, require_step_arguments
from autograd_helpers.checks.profiler._course import (
    found_at_start,
    from_course_settings,
    objects_problem,
    optimizer_kept,
    told_the_start,
)
from autograd_helpers.checks.profiler._dominant import WHY_NOT, Backward
from autograd_helpers.checks.profiler._regions import CHECKS as REGION_CHECKS
from autograd_helpers.checks.profiler._regions import LABELS, profile_steps
from autograd_helpers.checks.profiler._saved_run import require_saved_arguments, run_saved_bytes
from autograd_helpers.checks.profiler._slowest import read_regions, slowest_verdict
from autograd_helpers.checks.profiler._step import step_problem
from autograd_helpers.modes import preserved_state
from autograd_helpers.profiling import ProfileReport

__all__ = ["REGION_LABELS", "check_dominant_op", "check_regions", "check_saved_bytes"]

REGION_LABELS = LABELS


def check_regions(
    fn: object,
    slowest: object,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Tensor,
    *,
    name: str | None = None,
    prepare: Callable[[Tensor], Tensor] | None = None,
    read_from: torch.profiler.profile | None = None,
) -> CheckResult:
    """Check a training step labelled with ``record_function``, and the slowest region named.

    ``fn(model, optimizer, samples)`` must still do the specified step: prepare ``batch``
    from ``samples`` (``prepare``), ``loss = model(batch).square().mean()``, zero the
    gradients, ``loss.backward()``, one ``optimizer.step()``. It runs on copies of the
    model, the optimizer and the samples, on the notebook's batch and on a probe batch of
    another size, and is compared with the specified step (the gradients seen at
    ``optimizer.step()``, the update); the samples, the model's flags and hooks and torch's
    settings must be left as found. Then it must open the regions ``"data"``, ``"forward"``
    (the model and the loss), ``"backward"`` and ``"update"`` (the optimizer's step), once
    each per call, none inside another, each holding its own work (any spelling of
    ``record_function``: imported under another name, as a decorator, entered by hand).
    ``slowest`` must be the label with the largest CPU time (total, children included), as
    the checker measures it (each label's fastest of five steps, on one thread, as the
    notebooks run: on a busy machine another program can only add time); two labels within
    20% of each other are both accepted. Where the top label leads the answer by less than
    three times, a busy machine's noise could swap them, and the profile the learner read
    (``read_from``) decides; without one, the answer fails, asking for the table.

    The notebook's model and optimizer are never handed to ``fn``; if it reaches them by
    name, they are put back (parameters, buffers, gradients, optimizer state, random state).

    Args:
        fn: the learner's labelled step; ``...`` is a stub.
        slowest: the learner's answer, one of :data:`REGION_LABELS` (any capitalisation);
            ``...`` is a stub.
        model, optimizer: what the step trains.
        samples: the raw batch, at least two samples, of the shape the model takes.
        name: how to call ``fn`` in the feedback (default: its ``__name__``).
        prepare: the specified preparation of the batch (default: each sample to mean 0
            and standard deviation 1, as the notebook's ``normalise_each``).
        read_from: the profile of ``fn`` whose table the learner read ``slowest`` from
            (a finished ``torch.profiler.profile``, each label's fastest step counting);
            ``None`` (a stub's table cell) when there is none.

    Example::

        >>> from torch.profiler import record_function
        >>> model = torch.nn.Linear(4, 1)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> def step(model, optimizer, samples):
        ...     with record_function("data"):
        ...         batch = torch.stack([(s - s.mean()) / s.std() for s in samples])
        ...     with record_function("forward"):
        ...         loss = model(batch).square().mean()
        ...     with record_function("backward"):
        ...         optimizer.zero_grad()
        ...         loss.backward()
        ...     with record_function("update"):
        ...         optimizer.step()
        >>> check_regions(step, "data", model, optimizer, torch.randn(64, 4)).passed
        True
    """
    label = label_of(fn, name, "check_regions")
    require_step_arguments(model, optimizer, samples)
    if prepare is not None:
        require_callable("check_regions", "prepare", prepare)
    if read_from is not None and not isinstance(read_from, torch.profiler.profile):
        raise TypeError(
            "check_regions(): read_from must be the torch.profiler.profile the table was read "
            f"from, or None, got {type(read_from).__name__}"
        )
    if (problem := callable_verdict(label, fn)) is not None:
        return problem
    assert callable(fn)
    specified = prepare or normalise_each
    threads, at_start = torch.get_num_threads(), found_at_start()
    try:  # the checker seeds its runs: the notebook's random stream must not notice
        with (
            preserved_state(model),
            optimizer_kept(optimizer),
            torch.random.fork_rng(devices=[]),
            from_course_settings(),
        ):
            problem = step_problem(fn, label, model, optimizer, samples, specified)
            if problem is not None:
                return told_the_start(problem, at_start)
            if (left := objects_problem(model, optimizer)) is not None:
                return failed(label, *left)
            # one thread, as in the notebooks: threads waiting for a busy core distort times
            torch.set_num_threads(1)
            profile = profile_steps(fn, model, optimizer, samples)
    finally:
        torch.set_num_threads(threads)
    if isinstance(profile, Outcome):
        return from_learner_error(label, "the step (profiled)", profile)
    if (found := first_found(REGION_CHECKS, profile)) is not None:
        return failed(label, *found)
    table = read_from  # read only where the checker's own times are too close to call
    return slowest_verdict(
        label, slowest, profile, lambda: None if table is None else read_regions(table)
    )


def check_saved_bytes(
    fn: object,
    *inputs: Tensor,
    reference: Callable[..., Any],
    max_bytes: int,
    gradient_inputs: tuple[Tensor, ...] | None = None,
    name: str | None = None,
) -> CheckResult:
    """Check a Function's gradients, then that it keeps at most ``max_bytes`` for backward.

    First :func:`check_function` (with ``reference``) judges the values and the gradients,
    on ``gradient_inputs`` if given (finite differences cost two calls per input element,
    so a large tensor is better counted than differentiated) and, for a Function of one
    tensor, on probes at the edges of its domain (0, tiny values, where float32's ``exp``
    overflows...) in float64 and in float32. Then ``fn`` runs once on copies of ``inputs``
    (their dtype), and everything its forward keeps alive until backward is measured, by any
    route: the storages saved with ``ctx.save_for_backward``, each counted once (a copy of
    the input counts as memory of its own); tensors kept as ``ctx`` attributes; and memory
    held anywhere else (on the class, in a global or a closure, as an attribute of the
    input, in a NumPy array), each with its own message. A saved copy in a lower precision
    fails too.

    Args:
        fn: the learner's ``torch.autograd.Function`` subclass; ``...`` is a stub.
        *inputs: example inputs, floating-point tensors.
        reference: the expected forward (its autograd gives the expected gradients).
        max_bytes: the budget, in bytes of storage saved for backward.
        gradient_inputs: smaller example inputs for the gradient check (default: ``inputs``).
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Example::

        >>> class LeanCube(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)  # x**2 would be a second tensor to keep
        ...         return x**3
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (x,) = ctx.saved_tensors
        ...         return grad_output * 3 * x.square()
        >>> x = torch.randn(100)
        >>> cube = lambda t: t**3
        >>> check_saved_bytes(LeanCube, x, reference=cube, max_bytes=x.nbytes).passed
        True
    """
    require_saved_arguments(inputs, reference, max_bytes, gradient_inputs)
    return run_saved_bytes(fn, inputs, reference, max_bytes, gradient_inputs, name)


def check_dominant_op(
    answer: object,
    report: ProfileReport | Sequence[ProfileReport],
    *,
    name: str = "dominant",
) -> CheckResult:
    """Check the name of the operator with the most self CPU time in ``report``'s backward.

    The answer is judged against the very profiles the learner read: the operator (an
    ``aten::`` row) under the ``backward`` region with the largest self time, summed over its
    calls; an operator within 20% of it is accepted too. Given several runs of the same
    computation (a report of several runs, ``profile_ops(..., runs=5)``, or a list of
    reports), each operator's time is its fastest over them, as the notebook's table shows
    it: on a busy machine one run can credit any operator with milliseconds it spent waiting
    for a core, and another program can only add time. Every
    spelling of the name passes (the ``aten::`` prefix left out, spaces, another
    capitalisation, the Python spelling ``torch.ops.aten.fill_``, the row or event itself).
    A backward node's name, a label, an operator whose *total* is large but whose own work
    is small, one that only runs in forward, a row that is no operator, several names, or a
    typo get an explanation.

    Args:
        answer: the learner's answer, an operator name such as ``"aten::mm"``; ``...`` is
            a stub.
        report: the :func:`~autograd_helpers.profiling.profile_ops` report that was read
            (made with ``backward=True``, of one run or several), or a list of such reports
            of one computation.
        name: how to call the answer in the feedback.

    Example::

        >>> from autograd_helpers.profiling import profile_ops
        >>> layer = torch.nn.Linear(300, 300)
        >>> report = profile_ops(layer, torch.randn(200, 300), runs=3)
        >>> check_dominant_op("aten::mm", report).passed  # Linear's backward: two products
        True
    """
    reports = _reports(report)
    profile = Backward.read(reports)
    if not profile.operators:
        raise ValueError(
            "check_dominant_op(): report has no backward region: profile with backward=True"
        )
    if (stub := stub_verdict(name, answer)) is not None:
        return stub
    read = read_name(answer)
    if read is None:
        return failed(
            name, f"the answer is an operator's name (a str), got {type(answer).__name__}."
        )
    given = profile.spelled(read[0])
    if profile.dominates(given):
        how = read[1] or ("" if given in (read[0], f"aten::{read[0]}") else "its spelling")
        note = (f"(Read as `{given}`, from {how}.)",) if how else ()
        runs = f", the fastest of {profile.runs} runs" if profile.runs > 1 else ""
        return CheckResult(
            "passed",
            f"{name} passed: `{given}` does the most work in backward (self CPU time{runs}).",
            note,
        )
    why = next(reason for check in WHY_NOT if (reason := check(given, profile)) is not None)
    return failed(name, why)


def _reports(report: object) -> list[ProfileReport]:
    """``report`` as a non-empty list of reports; a ``TypeError`` naming it otherwise."""
    reports = list(report) if isinstance(report, list | tuple) else [report]
    if reports and all(isinstance(r, ProfileReport) for r in reports):
        return [r for r in reports if isinstance(r, ProfileReport)]
    raise TypeError(
        "check_dominant_op(): report must be what ah.profiling.profile_ops returned, or a "
        f"list of such reports, got {type(report).__name__}" + (" (empty)" if not reports else "")
    )
