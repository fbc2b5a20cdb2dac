"""What a Function writes into ``.grad`` itself, beyond the tensors the check hands it.

Part of ``check_function`` (:mod:`._steps`). A backward returns gradients, and autograd adds
them into ``.grad`` where they belong. Some Functions write ``.grad`` themselves: revtorch's
reversible blocks run ``.backward()`` on a recomputed graph inside backward, so their
modules' parameters get their gradient there. The check runs backward many times, so such
a ``.grad`` would hold the sum of all its passes (in the thousands, with the check's 1000
times larger ``grad_output``). :class:`GradsKept` keeps the ``.grad`` of every parameter
of the modules among the inputs (and inside a list or tuple among them) and of those
``fn`` reaches by name, and of every tensor inside such a list: :meth:`GradsKept.written`
says which changed, :func:`grad_written_verdict` says so, and :meth:`GradsKept.restore`
puts every one back (the modules among the inputs whole: flags, parameters, buffers).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from torch import Tensor, nn

from autograd_helpers._common.state import ModuleState
from autograd_helpers._common.tensors import TensorState
from autograd_helpers.checks._contain.modules import listed
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.trial import Trial

__all__ = ["GradsKept", "grad_written_verdict"]

_ITEMS = 64  # items of one list or tuple input looked into


def _held(label: str, value: object) -> Iterator[tuple[str, nn.Module | Tensor]]:
    """``(how to write it, module or tensor)`` in an input, and in a list or tuple input."""
    if isinstance(value, nn.Module | Tensor):
        yield label, value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value[:_ITEMS]):
            if isinstance(item, nn.Module | Tensor):
                yield f"{label}[{i}]", item


class GradsKept:
    """The ``.grad`` of what the inputs hold and of the modules ``fn`` reaches by name.

    Args:
        inputs: the inputs as the notebook gave them (tensors given directly are copied by
            the check, and are not kept here).
        names: forward's parameter names, to say where a tensor was found.
        reached: ``(label, module)`` for the modules ``fn`` reaches by name.
    """

    def __init__(
        self,
        inputs: Sequence[object],
        names: Sequence[str],
        reached: Sequence[tuple[str, nn.Module]] = (),
    ) -> None:
        held = [
            found
            for name, value in zip(names, inputs, strict=True)
            if not isinstance(value, Tensor)
            for found in _held(name, value)
        ]
        given = [(label, m) for label, m in held if isinstance(m, nn.Module)]
        self.modules = ModuleState(m for _, m in given)
        tensors: dict[int, tuple[str, Tensor]] = {}
        for label, module in [*given, *((r.strip("`"), m) for r, m in reached)]:
            for part, p in module.named_parameters():
                tensors.setdefault(id(p), (f"{label}.{part}", p))
        for label, t in held:
            if isinstance(t, Tensor):
                tensors.setdefault(id(t), (label, t))
        self.kept = [(label, TensorState.take(t)) for label, t in tensors.values()]

    def written(self) -> list[str]:
        """``["block.weight", ...]``: whose ``.grad`` changed since the snapshot."""
        return [label for label, state in self.kept if "grad" in state.changed()]

    def restore(self) -> None:
        """Put every ``.grad`` back, and the modules among the inputs as they were."""
        self.modules.restore()
        for _, state in self.kept:
            state.restore(("grad",))


def grad_written_verdict(trial: Trial, kept: GradsKept, stage: str) -> CheckResult | None:
    """``stage`` (``"backward"``...) wrote ``.grad`` of a tensor the check did not hand it."""
    written = kept.written()
    if not written:
        return None
    return trial.fail(
        f"{stage} writes `.grad` itself (of {listed([f'`{w}`' for w in written])}).",
        "A backward returns the gradients, and autograd adds them into `.grad` where they "
        "belong. Written inside backward (`.backward()` on a graph recomputed there, as "
        "revtorch does, or `p.grad = ...`), `.grad` gets the gradient again at every pass: "
        "after this check's passes it would hold their sum. The checker put `.grad` back. "
        "Pass the parameters as inputs and return their gradients (memcnn's "
        "`AdditiveBlockFunction(x, Fm, Gm, *weights)` does), or compute them with "
        "`torch.autograd.grad`, which writes no `.grad`.",
    )
