"""``make bench``: measure how fast and lean the course is; write bench/results.{json,md}.

Figures, not assertions: each target in :data:`tools.bench.targets.TARGETS` is reported as
met or not, never tested.

1. Notebooks: wall time of each, executed in a fresh kernel (start-up included), against
   its own limit, and the kernel's peak memory; the *floor* is a fresh kernel that only
   imports torch and the helpers. ``course_over_floor`` = total / (floor × notebooks).
2. Import cost of ``autograd_helpers`` on top of ``torch`` (median of fresh processes).
3. Every teaching Function in ``tools.registry``, forward + backward, against the built-in
   composition it replaces (and the fused built-in, where one exists), at 10³, 10⁵ and 10⁶
   elements, with the bytes each saves for backward.
4. Jacobian strategies: a row loop, ``vectorize=True``, ``torch.func.jacrev``, ``jacfwd``.
5. The gradcheck explorer's redraw time after a slider change.
6. Chapter 06's timing exercises: how far each right answer leads the runner-up with eight
   busy processes on the machine (:mod:`~tools.bench.margins`), read as the checkers read
   it (each row's fastest of several runs): at least 3×, so that no right answer fails
   because the machine is busy.
7. Containment's share of a ``check_function`` call after Run All of chapter 00: the time its
   snapshots (``GlobalState``, ``Contained``) take, compare and put back
   (:mod:`~tools.bench.containment`), against half of the baseline measured before issue 26.
8. ``make test``'s own duration (skip with ``--skip-tests``).

Every timing goes through :func:`autograd_helpers.profiling.compare` (candidates interleaved
over rounds; medians with their spread), the course's one timing code path.

Modules: :mod:`~tools.bench.results` (records), :mod:`~tools.bench.targets` (the targets),
:mod:`~tools.bench.measure`, :mod:`~tools.bench.margins`, :mod:`~tools.bench.containment`,
:mod:`~tools.bench.report`;
``python -m tools.bench`` runs them.
"""
