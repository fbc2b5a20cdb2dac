"""Running the learner's fn forward and backward under anomaly mode, watching both."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.nn.parameter import is_lazy

from autograd_helpers._common.boxes import box_html, box_text
from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers._common.nodes import accumulated_leaf, graph_nodes
from autograd_helpers._common.reach import modules_reachable
from autograd_helpers._common.runner import Outcome, run_learner_code
from autograd_helpers._common.state import ModuleState
from autograd_helpers._grads_kept import KeptGrads, backward_into_grads, grads_kept, refusals
from autograd_helpers._profiling_state import every_module, state_kept
from autograd_helpers.anomaly._backward import BackwardRecord, watch_backward
from autograd_helpers.anomaly._forward import Watch
from autograd_helpers.anomaly._frames import FRAME, learner_frame_in
from autograd_helpers.anomaly._inputs import Inputs, prepare_inputs
from autograd_helpers.anomaly._own import OwnBackward
from autograd_helpers.anomaly._saved import Snapshot
from autograd_helpers.anomaly._tensors import kind_of

__all__ = ["FRAME", "Report", "Run", "noted", "reported", "run_watched"]


@dataclass
class Run:
    """What :func:`run_watched` saw."""

    outcome: Outcome
    watch: Watch
    backward: BackwardRecord
    trace: str  # the forward traceback anomaly mode reported with an error, or ""
    outputs: list[Tensor]  # the tensors fn returned
    inputs: Inputs  # what fn was given
    returned: str = ""  # what fn returned instead of tensors ("a str"), or ""
    silent: list[Snapshot] = field(default_factory=list)  # saved, then changed unseen
    # The tool's own backward could not run: fn's own backward (or an earlier one) had
    # freed the graph of what fn returned. The error's text, or "".
    freed: str = ""
    differentiated: bool = False  # the tool's own backward of what fn returned ran
    grads_note: str = ""  # a Function's backward wrote .grad itself: put back, said so
    fn: Any = field(default=None, repr=False)  # what ran: the names it reaches tell

    @property
    def own(self) -> list[OwnBackward]:
        """The backward passes fn ran itself, in order."""
        return self.watch.backwards

    @property
    def records(self) -> list[tuple[BackwardRecord, OwnBackward | None]]:
        """Every backward watched, fn's own first (with the call), then the tool's."""
        return [(own.record, own) for own in self.own] + [(self.backward, None)]


def run_watched(fn: Callable[..., Any], inputs: Sequence[Any], *, keep_saved: bool = False) -> Run:
    """Forward and backward under anomaly mode (``check_nan=False``), watching both.

    ``fn`` is given its inputs as :func:`prepare_inputs` makes them. It may return a tensor,
    or a tuple or list of tensors: backward starts from a gradient of ones for each that
    requires grad. It runs with ``torch.autograd.grad`` (with ``backward()`` where a Function
    refuses that), and every ``.grad`` it can reach is put back: none is changed, a model's
    parameters' included, also where a Function's backward writes ``.grad`` itself
    (``Run.grads_note`` says so). With ``keep_saved``, the saved tensors whose values
    changed unseen by autograd are listed in ``Run.silent`` (found before backward).

    A backward pass that fn runs itself (a training step's ``loss.backward()``) is watched
    the same way (``Run.own``); it is real: it fills ``.grad`` as it would without the tool.
    fn may then return nothing, and what it returns is not differentiated again where fn's
    backward freed its graph.
    """
    watch = Watch(keep_saved)
    prepared = prepare_inputs(fn, inputs)
    run = Run(Outcome(), watch, BackwardRecord(), "", [], prepared, fn=fn)
    # The copies that stand for fn's inputs are ours: what reaches them reaches the leaf.
    watch.skip = set(prepared.copy_nodes)

    def forward_and_backward() -> None:
        with watch:
            value = fn(*prepared.given)
        if value is None and watch.backwards:
            return  # a training step that ran its backward and returns nothing
        values = list(value) if isinstance(value, list | tuple) else [value]
        others = [type(v).__name__ for v in values if not isinstance(v, Tensor)]
        if not values or others:
            run.returned = f"a {type(value).__name__}"
            if isinstance(value, list | tuple):
                run.returned += f" holding a {others[0]}" if others else " without tensors"
            return
        run.outputs = values
        run.silent = [s for own in watch.backwards for s in own.silent]
        # What fn's own backward already differentiated, and freed, is not done again.
        freed = {node for own in watch.backwards for node in own.freed}
        roots = [v for v in values if v.requires_grad and v.grad_fn not in freed]
        if not roots or any(kind_of(v) == "nan" for v in values):
            return  # a NaN in forward is explained from forward alone
        nodes = graph_nodes([v.grad_fn for v in roots if v.grad_fn is not None])
        if watch.saved is not None:
            run.silent += watch.saved.changed_silently(nodes)
        targets = [leaf for node in nodes if (leaf := accumulated_leaf(node)) is not None]
        if not targets:
            return
        _differentiate(run, fn, roots, nodes, targets)

    with warnings.catch_warnings(record=True) as caught, _buffers_kept(fn, inputs):
        warnings.simplefilter("always")
        watch.caught = caught
        with torch.autograd.detect_anomaly(check_nan=False):
            run.outcome = run_learner_code(forward_and_backward)
    run.trace = next(
        (str(w.message) for w in caught if str(w.message).startswith("Error detected in")), ""
    )
    return run


def _differentiate(
    run: Run, fn: Callable[..., Any], roots: list[Tensor], nodes: list[Any], targets: list[Tensor]
) -> None:
    """The tool's own backward of what fn returned, every node but the input copies hooked;
    every ``.grad`` it can reach is put back afterwards."""
    watch = run.watch
    hooked = [node for node in nodes if node not in watch.skip]
    handles = watch_backward(hooked, run.backward, learner_frame_in)
    try:
        # A Function's backward may write .grad itself (revtorch, memcnn): put back.
        with grads_kept(nodes, fn, *run.inputs.given, *watch.leaves.values()) as kept:
            grads = _tools_backward(roots, targets, run, kept)
    except RuntimeError as error:
        if "a second time" not in str(error):
            raise  # fn's graph's own error (an in-place change, a custom backward)
        run.freed = str(error)  # the tool's backward, not fn, met a freed graph
        return
    finally:
        for handle in handles:
            handle.remove()
    note = kept.note("the tool")
    run.grads_note = f"Note: {note}" if note else ""
    run.differentiated = True
    run.backward.leaves = [
        (target, kind_of(grad))
        for target, grad in zip(targets, grads, strict=True)
        if grad is not None
    ]


@contextlib.contextmanager
def _buffers_kept(fn: Callable[..., Any], inputs: Sequence[Any]) -> Iterator[None]:
    """Run a block on copies of the buffers of the modules ``fn`` and ``inputs`` reach, then
    put back the originals, the train/eval flags and the modules' other attributes (a call
    counter, a hook fn registered): batch norm's running statistics and its
    ``num_batches_tracked`` are left as found. Parameters are not put back: a training step's
    optimizer really steps them."""
    modules = modules_reachable(fn, *inputs)
    everything = every_module(modules)
    tables = [(m, dict(m._buffers), m.training) for m in everything]
    with state_kept(everything, (), {}):
        for module, found, _ in tables:
            for key, buffer in found.items():
                if buffer is not None and not is_lazy(buffer):
                    with torch.inference_mode(buffer.is_inference()):
                        module._buffers[key] = fresh_leaf(buffer, requires_grad=False)
        try:
            yield
        finally:
            for module, found, training in tables:
                module._buffers.clear()
                module._buffers.update(found)
                module.training = training


def _tools_backward(
    roots: list[Tensor], targets: list[Tensor], run: Run, kept: KeptGrads
) -> tuple[Tensor | None, ...]:
    """The tool's backward: ``torch.autograd.grad``, or, for a graph with a Function that
    refuses it (a reentrant checkpoint, memcnn's invertible blocks: "please use
    .backward()"), ``backward()`` as fn's user would run it, reading ``.grad`` (which
    :func:`grads_kept` puts back)."""
    ones = [torch.ones_like(v) for v in roots]
    with refusals() as refused:
        try:
            return torch.autograd.grad(
                roots,
                targets,
                ones,
                retain_graph=True,  # the in-place report reads the saved tensors afterwards
                allow_unused=True,
            )
        except Exception:
            if not refused:
                raise
    run.backward.events.clear()  # the refused attempt's: it stopped at that Function
    return backward_into_grads(roots, ones, targets, kept)


@dataclass(frozen=True)
class Report:
    found: bool
    message: str
    title: str = field(default="", repr=False)
    details: tuple[str, ...] = field(default=(), repr=False)
    raised: bool = field(default=False, repr=False)  # fn itself raised: nothing was traced

    def _look(self) -> tuple[str, str]:
        if self.raised:
            return "❌", "#cf222e"
        return ("🔎", "#9a6700") if self.found else ("✅", "#1a7f37")

    def __repr__(self) -> str:
        return box_text(self._look()[0], self.title, self.details)

    def _repr_html_(self) -> str:
        icon, colour = self._look()
        return box_html(icon, colour, self.title, self.details)


ReportType = TypeVar("ReportType", bound=Report)


def reported(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    report: Callable[[Run], ReportType],
    *,
    keep_saved: bool = False,
) -> ReportType:
    """``report`` on fn's :func:`run_watched` run, :func:`noted`; then the modules fn reaches
    have their parameters back (values, ``requires_grad``, ``.grad``, which ones they
    have), unless fn ran backward itself: a training step's updates are real. A forward
    that writes its parameters (normflows' ``ActNorm`` initialises them from the first
    batch through ``.data``, its flag a buffer) is no training, and its buffers come back."""
    found = ModuleState(modules_reachable(fn, *inputs))
    run = run_watched(fn, inputs, keep_saved=keep_saved)
    try:
        return noted(report(run), run)
    finally:  # after the report: it reads the tensors fn changed as fn left them
        if not run.own:
            found.restore()


def noted(report: ReportType, run: Run) -> ReportType:
    """``report`` with the run's note on ``.grad`` a Function's backward wrote, if any."""
    if not run.grads_note:
        return report
    message = f"{report.message} {run.grads_note}"
    return replace(report, message=message, details=(*report.details, run.grads_note))
