"""``check_regions``, part 2a: which region each piece of the step's work ran in, by tensor.

A profile says which operators ran in which region, not on which tensors. One call of the
learner's step (the warm-up) runs under a :class:`RegionTrace` instead, which follows the
regions as they open and close (any spelling of ``record_function`` reaches the same
``profiler::_record_function_enter_new`` operator) and notes:

- each operator that reads the raw ``samples`` (or a view of them), and its region: the
  batch preparation is the work on ``samples``, wherever its lines are (a region around a
  copy of a batch prepared before it holds none of it); reads that leave torch's operators
  (``samples.tolist()``, ``.numpy()``, ``.item()``, ``np.asarray(samples)``) count too, seen
  at the method's call;
- the loss, found by its value (the tensor ``backward`` starts from), not by an operator's
  name, and the region that computed it;
- the regions still open when the step returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["RegionTrace", "Trace"]


def _storage(tensor: Tensor) -> int | None:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except Exception:  # a tensor without storage (sparse, meta): no samples there
        return None


@dataclass
class Trace:
    """What one traced call of the step did, region by region."""

    samples_read: list[tuple[str, str | None]] = field(default_factory=list)  # (op, region)
    loss: tuple[str, str | None] | None = None  # the op that computed it, and its region
    unclosed: list[str] = field(default_factory=list)  # regions opened and never closed

    def preparation_outside(self, region: str) -> tuple[list[str], set[str | None]]:
        """The operators on ``samples`` outside ``region``, and where they ran."""
        outside = [(op, where) for op, where in self.samples_read if where != region]
        names = list(dict.fromkeys(op for op, _ in outside))
        return names, {where for _, where in outside}


# Tensor methods that hand the numbers to Python or NumPy without an operator on them
_PYTHON_READS = {
    Tensor.tolist: "samples.tolist()",
    Tensor.numpy: "samples.numpy()",
    Tensor.__array__: "np.asarray(samples)",
    Tensor.item: "samples.item()",
}


class _Backward(TorchFunctionMode):
    """Sees ``loss.backward()`` and ``torch.autograd.backward/grad``: which tensor; and the
    reads of a tensor's numbers into Python (:data:`_PYTHON_READS`)."""

    def __init__(self, seen: Callable[[Tensor], None], read: Callable[[str, Tensor], None]) -> None:
        super().__init__()
        self.seen = seen
        self.read = read

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func in (Tensor.backward, torch.autograd.backward, torch.autograd.grad) and args:
            first = next((t for t in tree_leaves(args[0]) if isinstance(t, Tensor)), None)
            if first is not None:
                self.seen(first)
        elif func in _PYTHON_READS and args and isinstance(args[0], Tensor):
            self.read(_PYTHON_READS[func], args[0])
        return func(*args, **(kwargs or {}))


class RegionTrace(TorchDispatchMode):
    """Follow the regions ``labels`` while code runs; see :class:`Trace` for what is noted.

    Example::

        >>> from torch.profiler import record_function
        >>> samples = torch.randn(4, 3)
        >>> with RegionTrace(samples, ("data",)) as tracing:
        ...     batch = samples - samples.mean()  # outside every region
        ...     with record_function("data"):
        ...         batch = batch.clone()
        >>> tracing.trace.preparation_outside("data")
        (['aten::mean', 'aten::sub'], {None})
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else the first use imports torch._dynamo: seconds, for nothing here

    def __init__(self, samples: Tensor, labels: tuple[str, ...]) -> None:
        super().__init__()
        self.samples = _storage(samples)
        self.labels = labels
        self.trace = Trace()
        self._open: list[tuple[object, str]] = []  # (the handle record_function keeps, name)
        self._scalars: dict[int, tuple[str, str | None]] = {}  # where each scalar was computed
        self._backward = _Backward(self._loss_seen, self._read)

    def __enter__(self) -> RegionTrace:
        super().__enter__()
        self._backward.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._backward.__exit__(*exc)
        super().__exit__(*exc)
        self.trace.unclosed = [name for _, name in self._open if name in self.labels]

    def region(self) -> str | None:
        return next((name for _, name in reversed(self._open) if name in self.labels), None)

    def _read(self, how: str, tensor: Tensor) -> None:
        if self.samples is not None and _storage(tensor) == self.samples:
            self.trace.samples_read.append((how, self.region()))

    def _loss_seen(self, loss: Tensor) -> None:
        if self.trace.loss is None:
            key = _storage(loss)
            self.trace.loss = self._scalars.get(key) if key is not None else None

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        name = str(func.name())
        if name.startswith("profiler::_record_function_enter"):
            self._open.append((out, str(args[0]) if args else ""))
        elif name.startswith("profiler::_record_function_exit"):
            handle = args[0] if args else None
            same = [i for i, (kept, _) in enumerate(self._open) if kept is handle]
            if same or self._open:  # its handle, or else the innermost: regions nest
                del self._open[same[-1] if same else -1]
        else:
            self._note(name, args, kwargs, out)
        return out

    def _note(self, name: str, args: Any, kwargs: Any, out: Any) -> None:
        op = name if name.startswith("aten::") else name.replace(".", "::", 1)
        op = op.split(".")[0]
        where = self.region()
        if self.samples is not None and any(
            isinstance(t, Tensor) and _storage(t) == self.samples
            for t in tree_leaves((args, kwargs))
        ):
            self.trace.samples_read.append((op, where))
        for t in tree_leaves(out):
            if isinstance(t, Tensor) and t.numel() == 1 and (key := _storage(t)) is not None:
                self._scalars[key] = (op, where)
