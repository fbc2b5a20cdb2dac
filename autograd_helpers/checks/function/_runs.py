"""The runs of :func:`autograd_helpers.checks.check_function`, and how their verdicts add up.

``check_function`` checks the example, then each input tuple of ``also``, then each probe,
all in float64 (the three steps of :mod:`._steps` on each), and, when there are probes, every
input once more in float32 (:mod:`._float32`). This module holds that sequence: which runs
there are, the first one that fails (saying which inputs it was), and the pass message that
counts them. Apart from the public function, whose module checks the notebook's options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.probes import also_note, probe_note
from autograd_helpers.checks._core.submission import forward_parameter_names
from autograd_helpers.checks._core.trial import Options
from autograd_helpers.checks.function._float32 import float32_verdict
from autograd_helpers.checks.function._inputs import checked_wrt, probe_inputs
from autograd_helpers.checks.function._steps import run_check

__all__ = ["Run", "counted", "float32_problem", "planned_runs", "run_each"]

# One run of the check: its inputs, and whether they are a probe (not an example).
Run = tuple[tuple[object, ...], bool]
Probes = str | Sequence[tuple[object, ...]] | None


def planned_runs(
    inputs: tuple[object, ...], also: Sequence[tuple[object, ...]], probes: Probes
) -> tuple[list[Run], list[tuple[object, ...]]]:
    """Every run in order (the example, ``also``'s, the probes), and the probes alone.

    Raises:
        TypeError, ValueError: ``also`` or ``probes`` is not what ``check_function`` takes.
    """
    me = "check_function"
    if not isinstance(also, list | tuple) or not all(isinstance(more, tuple) for more in also):
        raise TypeError(f"{me}(): also must be a sequence of input tuples, got {also!r}")
    if probes == "edges" and len(inputs) != 1:
        raise ValueError(
            f'{me}(): probes="edges" tries edge values for a function of one tensor, and this '
            f"one takes {len(inputs)} inputs: pass probes=[...] with input tuples of your own"
        )
    probed = probe_inputs(probes)
    runs = [(inputs, False), *((more, False) for more in also), *((p, True) for p in probed)]
    return runs, probed


def run_each(
    fn: object,
    runs: list[Run],
    options: Options,
    wrt: Sequence[int] | None,
    *,
    allow_callable: bool,
    probes: Probes,
) -> tuple[CheckResult, list[str]]:
    """The three steps on each run in turn, up to the first that fails.

    Returns that run's verdict (beyond the example, with a line saying on which inputs) or,
    when every run passed, the last run's; and the notes of every run so far: a note one run
    gives (a kink at a probe) holds for the whole check.
    """
    inputs = runs[0][0]
    result = CheckResult("passed", "")
    notes: list[str] = []
    for run_inputs, is_probe in runs:
        run_options = dataclasses.replace(options, wrt=checked_wrt(run_inputs, wrt), probe=is_probe)
        result = run_check(fn, run_inputs, run_options, allow_callable=allow_callable)
        notes += [d for d in result.details if d.startswith("Note:") and d not in notes]
        if not result.passed:
            if run_inputs is inputs:
                return result, notes
            names = forward_parameter_names(fn, len(run_inputs))
            note = (
                probe_note(run_inputs, names, None if probes == "edges" else inputs)
                if is_probe
                else also_note(run_inputs, names, inputs, "raised" in result.title)
            )
            return dataclasses.replace(result, details=(*result.details, note)), notes
    return result, notes


def float32_problem(
    fn: object, runs: list[Run], wrt: Sequence[int] | None, options: Options
) -> CheckResult | None:
    """The verdict on the first run whose inputs fail in float32 (``None``: none does)."""
    for run_inputs, _ in runs:
        problem = float32_verdict(
            fn,
            run_inputs,
            checked_wrt(run_inputs, wrt),
            forward_parameter_names(fn, len(run_inputs)),
            options.label,
            options.reference,
            options.grad_reference,
        )
        if problem is not None:
            return problem
    return None


def counted(
    result: CheckResult, notes: list[str], runs: int, probes: int, also: bool
) -> CheckResult:
    """The last run's verdict, saying how many inputs passed, with every run's notes."""
    if runs > 1:
        count = (
            f"on the example and {probes} probes beyond it, in float64 and float32"
            if probes and not also
            else f"on {runs} inputs, probes included, in float64 and float32"
            if probes
            else f"on {runs} example inputs"
        )
        result = dataclasses.replace(
            result, title=result.title.replace(" passed:", f" passed {count}:", 1)
        )
    others = [d for d in result.details if not d.startswith("Note:")]
    return dataclasses.replace(result, details=(*notes, *others))
