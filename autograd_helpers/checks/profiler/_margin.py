"""How far a time measured on a busy machine can be trusted: the chapter 06 checkers' one rule.

A workshop puts 40 learners on one host, so a loaded machine is the normal case. There a
profile can credit any row with milliseconds it spent waiting for a core: the scheduler hands
the core to another program in the middle of an operator, and the profiler's clock runs on.
Another program can only add time, so each row is read as the fastest of several runs
(:func:`fastest`).

An answer that names the slowest row is judged by :func:`rule`. The checker's own measurement
decides where it is decisive: the answer within :data:`NEAR_TIE` of the top (right), or the
top ahead of it by :data:`DECISIVE` or more (wrong). The exercises' workloads give the right
answer at least that lead on a machine at load 8 (``tools/bench/margins.py`` measures it).
Between the two, the machine's noise could swap the rows, and the table the learner read
decides; without one (the learner has not run the cell that prints it), the answer is not
passed on a guess: the learner is asked to run that cell and read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["DECISIVE", "NEAR_TIE", "Ruling", "fastest", "rule"]

NEAR_TIE = 0.8  # within 80% of the top: too close to call, accepted as a tie
# The lead that noise at load 8 does not make up: the checker's measurement decides beyond it.
DECISIVE = 3.0


def fastest(runs: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Each key's smallest value over the runs it appears in.

    Example::

        >>> fastest([{"data": 9.0, "forward": 4.0}, {"data": 7.0, "forward": 6.0}])
        {'data': 7.0, 'forward': 4.0}
    """
    best: dict[str, float] = {}
    for run in runs:
        for key, value in run.items():
            best[key] = min(best.get(key, value), value)
    return best


def _top(times: Mapping[str, float]) -> str:
    return max(times, key=lambda key: times[key])


@dataclass(frozen=True)
class Ruling:
    """How an answer that names the slowest row stands.

    Attributes:
        passed: the verdict.
        kind: ``"leads"`` (the checker's measurement puts it on top, or within
            :data:`NEAR_TIE`), ``"as read"`` (too close to call, and the learner's table puts
            it on top), ``"unread"`` (too close to call, no table to ask), ``"read otherwise"``
            (too close to call, and the learner's table puts another row on top) or
            ``"behind"`` (the top leads it by :data:`DECISIVE` or more).
        top: the checker's top row.
        read_top: the top row of the learner's table (``None`` without one).
    """

    passed: bool
    kind: str
    top: str
    read_top: str | None


def rule(answer: str, measured: Mapping[str, float], read: Mapping[str, float] | None) -> Ruling:
    """Judge ``answer`` as the slowest of ``measured`` (the checker's times), else of ``read``.

    Example::

        >>> rule("data", {"data": 9.0, "update": 1.0}, None).kind
        'leads'
        >>> rule("forward", {"backward": 9.0, "forward": 6.0}, {"forward": 7.0, "backward": 5.0})
        Ruling(passed=True, kind='as read', top='backward', read_top='forward')
        >>> rule("update", {"backward": 9.0, "update": 2.0}, {"update": 9.0, "backward": 1.0})
        Ruling(passed=False, kind='behind', top='backward', read_top='update')
    """
    top = _top(measured)
    read_top = _top(read) if read else None
    mine = measured.get(answer, 0.0)
    if mine >= NEAR_TIE * measured[top]:
        return Ruling(True, "leads", top, read_top)
    if mine * DECISIVE <= measured[top]:
        return Ruling(False, "behind", top, read_top)
    if not read:
        return Ruling(False, "unread", top, read_top)
    shown = read.get(answer, 0.0) >= NEAR_TIE * read[_top(read)]
    return Ruling(shown, "as read" if shown else "read otherwise", top, read_top)
