"""What watching forward records: an op that made a NaN or an infinity, and one that changed
a tensor in place.

Kept apart from ``_forward`` (the watch itself), which fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from autograd_helpers.anomaly._tensors import storage_of, version_of

__all__ = ["InPlace", "Made"]


@dataclass(frozen=True)
class Made:
    """An op of forward that made a NaN (or an infinity) from arguments without one."""

    kind: str  # "nan" or "inf"
    op: str
    line: str
    value: str  # "NaN", "inf", "-inf" or "±inf"
    storages: tuple[Any, ...] = field(repr=False)  # held, so that no later tensor reuses them
    infinite_argument: bool = False  # a NaN made from an argument holding an infinity
    from_op: Made | None = None  # the op where that infinity started
    dtype: torch.dtype = torch.float32  # of the tensor that holds it: where it overflows
    hook: str = ""  # made inside a module's forward hook: "forward hook of Linear"
    backwards_before: int = 0  # how many backward passes fn had run itself when it was made
    # The op's mask arguments by name (attention's `key_padding_mask`, `attn_mask`).
    masks: tuple[tuple[str, Tensor], ...] = field(default=(), repr=False)
    # The optimizer step that put the infinity this op met into a parameter: this op made
    # NaN of it, or (kind "inf") passed it on, as a layer passes an infinite bias on.
    from_step: InPlace | None = field(default=None, repr=False)
    warned: str = ""  # what PyTorch warned about while this op ran, if anything

    def holds(self, tensor: Tensor) -> bool:
        return storage_of(tensor) in {s.data_ptr() for s in self.storages}

    @property
    def step(self) -> InPlace | None:
        """The optimizer step whose infinite parameter this value comes from, if any: this
        op's, or that of the op where the infinity it met started."""
        if self.from_step is not None:
            return self.from_step
        return self.from_op.from_step if self.from_op is not None else None


@dataclass(frozen=True)
class InPlace:
    """An op of forward that increased the version of one of its arguments."""

    op: str
    line: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    version: int  # before the change
    target: Tensor = field(repr=False)  # the tensor changed (held: its memory stays its own)
    by_optimizer: bool = False  # made inside a `torch.optim` optimizer's `step()`
    side_effect: bool = False  # an op not in place by its name (`embedding` with max_norm)
    # The worst value the op left in the tensor, "", "inf" or "nan": noted for an optimizer's
    # step only (a step that put inf into a parameter explains the next forward's NaN).
    kind_after: str = ""
    backwards_before: int = 0  # how many backward passes fn had run itself by then
    in_module_forward: bool = False  # made inside a module's own `forward` method
    # The part of `target` written, when the op says (`y[3] = 5.0` writes `y[3]`), a view.
    written: Tensor | None = field(default=None, repr=False)

    def changed(self, tensor: Tensor) -> bool:
        """Whether this op changed ``tensor``: the same memory and the same version counter.

        Sharing memory is not enough: `y.data` and `torch.from_numpy(y.numpy())` share
        `y`'s memory but not its version counter, so autograd never sees their changes. The
        counters are compared by moving ``tensor``'s one on, which changes no value; only
        when they read the same, since each move also reaches the caller's tensor.
        """
        if storage_of(self.target) != storage_of(tensor):
            return False
        before = version_of(self.target)
        if before is None or before != version_of(tensor):
            return False  # two counters that differ now are not one counter
        try:
            torch.autograd.graph.increment_version(tensor)
        except RuntimeError:  # an inference tensor has no version counter
            return False
        return version_of(self.target) == before + 1
