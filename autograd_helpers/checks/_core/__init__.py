"""The checkers' shared core: an attempt at an exercise and the verdict on it.

Private; used by every chapter's checkers (``checks/function/`` ... ``checks/profiler/``):

- :mod:`.feedback`: :class:`~.feedback.CheckResult`, the verdict every checker returns, and
  the words shared by all verdicts (a stub, an exception, a side effect);
- :mod:`.trial`: one trial of a learner's code, the record every step of a check shares;
- :mod:`.submission`: what the learner handed in, recognised, its inputs named;
- :mod:`.numeric`: finite-difference gradients, and how far off a number is, and where;
- :mod:`.hints`: the likely mistake behind a wrong result, when the numbers give it away;
- :mod:`.probes`: the probe sets beyond the example (edges, float32);
- :mod:`.problems`: a learner's function run over a table of problems, then a table of
  named checks on each (chapter 02's checkers; :func:`~.problems.label_of` for later ones);
- :mod:`.progress`: the progress log, one JSON line per verdict.

It may use the containment package (:mod:`autograd_helpers.checks._contain`), never a
chapter's package (``tests/test_layering.py``).
"""
