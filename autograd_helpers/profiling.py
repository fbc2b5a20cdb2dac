"""Where time and memory go: the profiler's table as plain rows, and fair timing comparisons.

Introduced in ``06_profiler.ipynb``; ``make bench`` times with :func:`compare` too.

- :func:`profile_ops` runs ``fn`` (and the backward of its result) under
  :class:`torch.profiler.profile` inside ``record_function`` regions named ``forward`` and
  ``backward``, and returns one plain row per operator. It leaves the caller's modules,
  tensors and random state as it found them.
- :func:`region_times` reads each ``record_function`` label's fastest run in a profile.
- :func:`compare` (from ``_timing``) times several callables with
  :class:`torch.utils.benchmark.Timer`, interleaved over several rounds so that a slow spell
  of the machine hits all of them alike, and reports medians, their spread, and ratios to
  the first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves, working_copies
from autograd_helpers._common.memory_guard import MemoryGuard
from autograd_helpers._common.nodes import graph_leaves
from autograd_helpers._common.reach import modules_reachable, optimizers_reachable
from autograd_helpers._common.state import kept_as_found
from autograd_helpers._common.tables import barh, html_table, text_table
from autograd_helpers._common.timing import Comparison, Timing, compare
from autograd_helpers._common.validate import require_bool, require_callable, require_option
from autograd_helpers._profiling_regions import RegionTime, region_times
from autograd_helpers._profiling_state import (
    described,
    differentiable_outputs,
    scalers_reachable,
    state_kept,
)
from autograd_helpers._randomness import random_states_kept
from autograd_helpers.notebook import QUIET_NATIVE_LOGS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PROFILE_COLUMNS", "Comparison", "ProfileReport", "RegionTime", "Timing", "compare"]
__all__ += ["profile_ops", "region_times"]

PROFILE_COLUMNS = ("name", "calls", "self_cpu_us", "total_cpu_us", "cpu_memory_bytes")


def cpu_profile(**options: Any) -> Any:
    """A ``torch.profiler.profile`` of the CPU, its native log lines silenced where possible.

    Not exported: the one place where the course's helpers (``profile_ops``, the chapter 06
    checkers) open a profiler. ``KINETO_LOG_LEVEL`` still takes effect when set here;
    ``TORCH_CPP_LOG_LEVEL`` only before ``import torch`` (see ``QUIET_NATIVE_LOGS``).
    """
    from torch.profiler import ProfilerActivity, profile

    for key, value in QUIET_NATIVE_LOGS.items():
        os.environ.setdefault(key, value)
    return profile(activities=[ProfilerActivity.CPU], **options)


@dataclass(frozen=True)
class ProfileReport:
    """What :func:`profile_ops` measured.

    Attributes:
        rows: one dict per operator (and per ``record_function`` label), with the keys
            :data:`PROFILE_COLUMNS`, sorted by self CPU time, largest first; over several
            runs, each row adds them up, as the profiler's own table does.
        profiler: the :class:`torch.profiler.profile` object, for everything else
            (``profiler.key_averages().table(...)``, ``profiler.events()``,
            ``export_chrome_trace``).
        runs: how many times ``fn`` ran in the profile, each in regions of its own.
    """

    rows: list[dict[str, Any]]
    profiler: Any
    runs: int = 1

    def _cells(self, limit: int = 12) -> list[list[str]]:
        return [
            [
                str(r["name"]),
                str(r["calls"]),
                f"{r['self_cpu_us']:.1f}",
                f"{r['total_cpu_us']:.1f}",
                str(r["cpu_memory_bytes"]),
            ]
            for r in self.rows[:limit]
        ]

    def __repr__(self) -> str:
        return text_table(PROFILE_COLUMNS, self._cells())

    def _repr_html_(self) -> str:
        return html_table(PROFILE_COLUMNS, self._cells())

    def row(self, name: str) -> dict[str, Any]:
        """The row called ``name`` (``KeyError`` naming the ones there are, otherwise)."""
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(f"no row {name!r}; there are {[r['name'] for r in self.rows]}")

    def plot(self, top: int = 10) -> Figure:
        """The ``top`` operators by self CPU time, as horizontal bars (labels excluded)."""
        require_option("plot", "top", top, "a positive int", lambda v: v >= 1, integer=True)
        rows = [r for r in self.rows if r["name"] not in ("forward", "backward")][:top]
        return barh(
            [str(r["name"]) for r in rows],
            [float(r["self_cpu_us"]) for r in rows],
            title="Operators by self CPU time",
            xlabel="self CPU time (µs)",
        )


def profile_ops(
    fn: Callable[..., Any], *inputs: Any, backward: bool = True, runs: int = 1
) -> ProfileReport:
    """Profile ``fn(*inputs)`` and (by default) the backward of its result, operator by operator.

    Floating-point tensor inputs become fresh leaves that require grad. ``fn`` runs once
    before profiling, so that one-time costs (allocations, lazy initialisation) do not
    distort the table; that run gets copies of the leaves (``leaf.clone()``), and if it
    writes into them (``x.relu_()``, ``nn.ReLU(inplace=True)`` first), so does the profiled
    run, made before the profile starts: the gradients still reach the leaves, and the
    backward rows include a ``CloneBackward0``. The profile has ``record_shapes`` and
    ``profile_memory`` on; forward and backward sit in ``record_function`` regions called
    ``forward`` and ``backward``, which appear as rows, as do any labels ``fn`` adds itself.
    The profiler's own C++ log lines are silenced at the source
    (:data:`~autograd_helpers.notebook.QUIET_NATIVE_LOGS`, set in the kernels the course
    starts).

    With ``runs`` above 1, one profile holds ``runs`` runs one after the other, each in
    regions of its own and each a first backward (the gradients of the run before are
    dropped between runs, outside the regions): on a busy machine another program can only
    add time, so a row's fastest run is the least disturbed, and one profile of several runs
    costs one warm-up and one start of the profiler where several profiles cost one each.

    Profiling changes nothing, though ``fn`` runs twice (in train mode, batch norm would
    count two batches and dropout would draw twice). Afterwards:

    - the random states are the caller's again: torch's, Python's ``random`` and NumPy's
      (a model may draw a seed from Python's ``random`` in its forward, as revtorch's
      ``fix_random_seed`` does);
    - the modules ``fn`` reaches by name (``fn`` itself if it is an ``nn.Module``, a bound
      method's owner, modules in its closure cells, defaults or the globals it names, and
      module inputs) have their train/eval flags, parameters, buffers and ``.grad`` back;
    - the optimizers and learning-rate schedulers ``fn`` reaches by name (a training step's
      ``optimizer``) have their state back: Adam's moments, SGD's momentum buffers, the
      step count and the learning rates;
    - every tensor that existed before and that an operator of the warm-up's forward was
      handed has its values back, found by watching the operators (a ``TorchDispatchMode``):
      so the buffers of a module that no name leads to come back too;
    - the graph's leaves (a closure's weight tensor) have their ``.grad`` back;
    - those modules' other attributes are put back too, their submodules' and those set on
      their parameters and buffers: a counter (``self.calls += 1``), a cache, an attribute
      forward creates (xformers' ``record_rng`` sets ``self.cpu_state``), a list they
      append to, a hook ``fn`` registers on them;
    - the gradient scalers ``fn`` reaches by name (``torch.amp.GradScaler``, whose scale
      grows or backs off at every ``update()``) have their state back, a fresh one too;
    - the environment variables that silence the profiler's logs are as they were.

    Not restored: state kept outside tensors elsewhere (a global Python counter), the flags
    and attributes of a module that no name leads to, and memory that only the profiled
    run or the backward touches.

    Args:
        fn: the computation; it returns a tensor, or a tuple, list or dict of them (for
            backward, at least one that requires grad).
        *inputs: its inputs.
        backward: also run and profile ``output.backward(ones_like(output))``, through every
            output that requires grad. Pass ``False`` for a function that runs backward
            itself (a training step).
        runs: how many times to run (and profile) ``fn`` in the one profile, a positive int.

    Returns:
        A :class:`ProfileReport`: ``.rows``, ``.profiler``, ``.plot()``; an HTML table in
        Jupyter.

    Example::

        >>> norm = torch.nn.BatchNorm1d(3)
        >>> report = profile_ops(lambda x: norm(x).square().sum(), torch.randn(4, 3))
        >>> {"forward", "backward", "aten::batch_norm"} <= {row["name"] for row in report.rows}
        True
        >>> norm.num_batches_tracked, norm.running_mean  # as they were
        (tensor(0), tensor([0., 0., 0.]))
    """
    require_callable("profile_ops", "fn", fn)
    require_bool("profile_ops", "backward", backward)
    require_option("profile_ops", "runs", runs, "a positive int", lambda v: v >= 1, integer=True)
    guard = MemoryGuard()
    modules, optimizers = modules_reachable(fn, *inputs), optimizers_reachable(fn, *inputs)
    scalers = scalers_reachable(fn, *inputs)
    with (
        state_kept(modules, scalers, QUIET_NATIVE_LOGS),
        random_states_kept(),
        kept_as_found(modules, optimizers),
    ):
        try:
            profiler = _profile(fn, inputs, backward, runs, guard)
        finally:
            guard.restore()
    rows = [
        {
            "name": event.key,
            "calls": int(event.count),
            "self_cpu_us": float(event.self_cpu_time_total),
            "total_cpu_us": float(event.cpu_time_total),
            "cpu_memory_bytes": int(event.cpu_memory_usage),
        }
        for event in profiler.key_averages()
    ]
    rows.sort(key=lambda r: -r["self_cpu_us"])
    return ProfileReport(rows, profiler, runs)


def _labelled_forward(fn: Callable[..., Any], arguments: list[Any], backward: bool) -> Any:
    """``fn(*arguments)`` in a "forward" region; for ``backward``, its output must need grad."""
    from torch.profiler import record_function

    with record_function("forward"):
        output = fn(*arguments)
    if backward and not differentiable_outputs(output):
        raise TypeError(
            "profile_ops(): fn must return a tensor that requires grad (or a tuple, list "
            f"or dict holding one) for backward=True, got {described(output)} (pass "
            "backward=False for a function that runs backward itself)"
        )
    return output


def _labelled_backward(output: Any) -> None:
    """Backward from every differentiable output with ones, in a "backward" region."""
    from torch.profiler import record_function

    outputs = differentiable_outputs(output)
    with record_function("backward"):
        try:
            torch.autograd.backward(outputs, [torch.ones_like(o) for o in outputs])
        except RuntimeError as error:
            if "backward through the graph a second time" not in str(error):
                raise
            raise RuntimeError(
                "profile_ops(): fn already ran backward through the graph of the tensor "
                "it returned (a training step calling loss.backward()); pass "
                "backward=False to profile it as it is, or return the loss without "
                "calling backward"
            ) from None


def _profile(
    fn: Callable[..., Any], inputs: tuple[Any, ...], backward: bool, runs: int, guard: MemoryGuard
) -> Any:
    """A warm-up run (its forward watched by ``guard``), then the ``runs`` profiled ones."""
    copies = working_copies(fresh_leaves(inputs))  # a leaf that requires grad cannot be written
    versions = [x._version if isinstance(x, Tensor) else 0 for x in copies]
    with guard:  # the warm-up touches what the profiled run will: kept before its first use
        warm = _labelled_forward(fn, copies, backward)  # one-time costs stay out of the table
    in_place = any(
        isinstance(x, Tensor) and x._version != version
        for x, version in zip(copies, versions, strict=True)
    )
    # The graph's leaves (a module's parameters, say) keep their .grad: set aside now, put
    # back at the end, so the learner's tensors are unchanged and the profiled backward is a
    # first one (no `add_` into an old gradient, no old gradient freed during the profile).
    found = [graph_leaves(o) for o in differentiable_outputs(warm)] if backward else []
    leaves_with_grad = list({id(v): v for leaves in found for v in leaves}.values())
    kept = [leaf.grad for leaf in leaves_with_grad]
    try:
        for leaf in leaves_with_grad:
            leaf.grad = None
        if backward:
            _labelled_backward(warm)
        del warm
        for leaf in leaves_with_grad:
            leaf.grad = None
        leaves = fresh_leaves(inputs)
        # made outside the profile: a copy for each run of a function that writes into them
        arguments = [working_copies(leaves) if in_place else leaves for _ in range(runs)]
        graph = [*leaves_with_grad, *(x for x in leaves if isinstance(x, Tensor))]
        with cpu_profile(record_shapes=True, profile_memory=True) as profiler:
            for run, run_arguments in enumerate(arguments):
                if run:  # each run a first backward, as the first one
                    for leaf in graph:
                        leaf.grad = None
                output = _labelled_forward(fn, run_arguments, backward)
                if backward:
                    _labelled_backward(output)
                del output
    finally:
        for leaf, grad in zip(leaves_with_grad, kept, strict=True):
            leaf.grad = grad
    return profiler
