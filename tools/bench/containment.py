"""What containment costs in a ``check_function`` call, in a kernel after Run All of a chapter.

Every call into learner code runs between a snapshot of torch's and the process's settings
and the random states (:class:`~autograd_helpers._common.globals.GlobalState`: taken, compared,
put back), and a checker snapshots what the learner's code can reach by name
(:class:`~autograd_helpers.checks._contain.contained.Contained`). This module times those
parts inside real ``check_function`` calls on a right answer (chapter 00's ``Cube``), in the
state that matters: a kernel that has run a whole chapter, with its globals, modules and
NumPy imported. A cell appended to a copy of the notebook wraps the parts' methods with
timers, calls the checker ``calls`` times and prints the sums as JSON; the wrappers keep
``__wrapped__``, so the checker's own frame inspection sees the methods it expects.
"""

from __future__ import annotations

import functools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

from tools.bench.results import ContainmentFigures
from tools.course import REPO
from tools.kernels import execute_notebook

__all__ = ["PARTS", "measure_containment", "timed_checks"]

# (module, class, method): the snapshot's parts, timed wherever a checker calls them; a part
# missing from a version of the library (``undo``, once changes then restore) is skipped
PARTS = (
    ("autograd_helpers._common.globals", "GlobalState", "take"),
    ("autograd_helpers._common.globals", "GlobalState", "undo"),
    ("autograd_helpers._common.globals", "GlobalState", "changes"),
    ("autograd_helpers._common.globals", "GlobalState", "restore"),
    ("autograd_helpers.checks._contain.contained", "Contained", "__init__"),
    ("autograd_helpers.checks._contain.contained", "Contained", "changes"),
    ("autograd_helpers.checks._contain.contained", "Contained", "restore"),
)
_CELL = """\
import sys
sys.path.insert(0, {repo!r})
from tools.bench.containment import timed_checks
print(timed_checks(Cube, {calls}))  # the chapter's own Cube, its solution filled in
"""


class _Clock:
    """Seconds spent in the parts, per label, counting only the outermost part on the stack
    (``undo`` calls ``changes`` and ``restore``: their time is ``undo``'s)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.depth = 0

    def timed(self, method: Callable[..., Any], label: str) -> Callable[..., Any]:
        self.spent[label], self.calls[label] = 0.0, 0

        @functools.wraps(method)  # __wrapped__: the conduct watch finds the method's code
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.spent[label] += time.perf_counter() - start
                    self.calls[label] += 1

        return timed

    def install(self) -> None:
        import importlib

        for module, owner, name in PARTS:
            cls = getattr(importlib.import_module(module), owner)
            found = cls.__dict__.get(name)
            if isinstance(found, classmethod):
                setattr(cls, name, classmethod(self.timed(found.__func__, f"{owner}.{name}")))
            elif found is not None:
                setattr(cls, name, self.timed(found, f"{owner}.{name}"))

    def lap(self) -> dict[str, tuple[float, int]]:
        """The time and calls of each part since the last lap."""
        found = {label: (self.spent[label], self.calls[label]) for label in self.spent}
        self.spent = dict.fromkeys(self.spent, 0.0)
        self.calls = dict.fromkeys(self.calls, 0)
        return found


def timed_checks(cube: type, calls: int) -> str:
    """Run in the kernel: ``check_function(cube, ...)`` ``calls`` times, as JSON figures.

    Medians over the calls: of the call, of containment's time in it, and of each part's
    time in it (with how often the part ran in one call).
    """
    import torch

    import autograd_helpers as ah

    def check() -> Any:
        x = torch.linspace(-2, 2, 6)
        return ah.checks.check_function(cube, x, reference=lambda t: t**3, probes="edges")

    if not check().passed:  # a warm-up, and the right answer must pass
        raise RuntimeError("the right answer failed its check: nothing to measure")
    clock = _Clock()
    clock.install()
    times, laps = [], []
    for _ in range(calls):
        start = time.perf_counter()
        check()
        times.append(time.perf_counter() - start)
        laps.append(clock.lap())
    parts = {
        label: (statistics.median(lap[label][0] for lap in laps), laps[0][label][1])
        for label in laps[0]
        if laps[0][label][1]
    }
    total = statistics.median(sum(s for s, _ in lap.values()) for lap in laps)
    return json.dumps({"check_s": statistics.median(times), "containment_s": total, "parts": parts})


def measure_containment(notebook: Path, calls: int = 20) -> ContainmentFigures:
    """Containment's share of a ``check_function`` call after Run All of ``notebook``: chapter
    00, whose reference notebook defines ``Cube`` with its solution filled in."""
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_CELL.format(repo=str(REPO), calls=calls)))
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / notebook.name
        nbformat.write(nb, copy)
        executed = execute_notebook(copy)
    text = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    found = json.loads(text.strip().splitlines()[-1])
    parts = tuple(
        (label, round(seconds * 1e3, 2), count)
        for label, (seconds, count) in found["parts"].items()
    )
    return ContainmentFigures(
        notebook=notebook.name,
        calls=calls,
        check_ms=round(found["check_s"] * 1e3, 1),
        containment_ms=round(found["containment_s"] * 1e3, 1),
        parts=parts,
    )
