"""One trial of a learner's code: the record that every step of ``check_function`` shares.

A :class:`Trial` starts with what the notebook handed to the checker (the inputs, turned
into float64 leaves, and the options) and collects what the learner's code produced on the
way: its outputs, the random ``grad_output``, the gradients, what it printed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves, working_copies
from autograd_helpers.checks._core.feedback import CheckResult, failed, printed_lines

__all__ = ["GRAD_OUTPUT_SEED", "Options", "Trial", "random_grad_outputs"]

# The checker's own generator, seeded apart from the notebooks' seed (0): the learner's
# random state is neither read nor changed, and the feedback is the same on every run.
GRAD_OUTPUT_SEED = 7919


@dataclass(frozen=True)
class Options:
    """How the notebook asked for the check (validated by :func:`~autograd_helpers.checks`)."""

    label: str
    wrt: tuple[int, ...]
    reference: Callable[..., Any] | None = None
    grad_reference: Callable[..., Any] | None = None
    atol: float = 1e-5  # against finite differences
    rtol: float = 1e-3
    eps: float = 1e-6
    # Against a reference: float64's rounding (it keeps 16 digits), unless the notebook
    # gave atol or rtol, which then replace these too (a reference that is itself approximate).
    reference_atol: float = 1e-12
    reference_rtol: float = 1e-7
    probe: bool = False  # inputs the checker chose (beyond the notebook's examples)


def with_tolerances(options: Options, atol: float | None, rtol: float | None) -> Options:
    """``options`` with the notebook's ``atol`` and ``rtol`` (``None``: the defaults): a value
    given holds against finite differences and the reference alike."""
    if atol is not None:
        options = dataclasses.replace(options, atol=float(atol), reference_atol=float(atol))
    if rtol is not None:
        options = dataclasses.replace(options, rtol=float(rtol), reference_rtol=float(rtol))
    return options


@dataclass
class Trial:
    """The learner's ``fn`` on the example ``inputs``, and what it has produced so far.

    Attributes:
        inputs: the example inputs as the notebook gave them.
        leaves: the same, floating-point tensors as fresh float64 leaves (those in
            ``options.wrt`` require grad); other inputs unchanged.
        args: what the learner's code is called with: a copy of each tensor leaf (not a
            leaf itself, as in the learner's own graphs, so that a Function that marks its
            input dirty can write into it), other inputs unchanged.
        originals: copies of the leaves' values, to notice a forward that changes them.
        names: forward's parameter names (``"input 2"`` where there is none).
        is_function: ``fn`` is a ``torch.autograd.Function`` subclass.
        raw_gradients: what a Function's ``backward`` returned, before the engine saw it.
    """

    options: Options
    inputs: tuple[object, ...]
    leaves: list[object]
    args: list[object]
    originals: list[object]
    names: list[str]
    is_function: bool
    printed: str = ""
    outputs: tuple[Tensor, ...] = ()
    grad_outputs: list[Tensor] = field(default_factory=list)
    grads: list[Tensor | None] = field(default_factory=list)
    raw_gradients: tuple[object, ...] | None = None
    notes: list[str] = field(default_factory=list)
    differentiable: tuple[int, ...] = ()  # positions of the outputs that carry gradients
    after_forward: list[Tensor | None] = field(default_factory=list)  # args, then outputs

    @classmethod
    def start(
        cls, inputs: tuple[object, ...], options: Options, names: list[str], is_function: bool
    ) -> Trial:
        leaves = fresh_leaves(inputs, torch.float64, options.wrt)
        originals = [x.detach().clone() if isinstance(x, Tensor) else x for x in leaves]
        return cls(options, inputs, leaves, working_copies(leaves), originals, names, is_function)

    @property
    def label(self) -> str:
        return self.options.label

    @property
    def wrt(self) -> tuple[int, ...]:
        return self.options.wrt

    @property
    def wrt_leaves(self) -> list[Tensor]:
        """The leaves whose gradients are checked, in ``wrt`` order."""
        return [t for i in self.wrt if isinstance(t := self.leaves[i], Tensor)]

    @property
    def wrt_names(self) -> list[str]:
        return [self.names[i] for i in self.wrt]

    def fail(self, title: str, *details: str) -> CheckResult:
        """``❌ label: title``, the details, and what the learner's code printed."""
        return failed(self.label, title, *details, *printed_lines(self.printed))


def _coincides(candidate: Tensor, other: Tensor) -> bool:
    if (
        other.shape != candidate.shape
        or not other.is_floating_point()
        or other.layout != torch.strided
    ):
        return False
    other = other.detach().to(candidate.dtype)
    return any(
        bool(torch.allclose(candidate, sign * other, rtol=1e-3, atol=1e-6)) for sign in (1, -1)
    )


def random_grad_outputs(outputs: Sequence[Tensor], avoid: Sequence[object]) -> list[Tensor]:
    """A random ``grad_output`` for each output, equal (up to sign) to none of ``avoid``.

    A backward that used ``x`` where ``grad_output`` belongs would pass if the two happened
    to hold the same numbers, as they do when the notebook drew ``x`` with the checker's
    seed; such a draw is replaced by the next seed's.
    """
    others = [t for t in avoid if isinstance(t, Tensor)]
    for attempt in range(100):
        generator = torch.Generator().manual_seed(GRAD_OUTPUT_SEED + attempt)
        drawn = [torch.randn(o.shape, generator=generator, dtype=o.dtype) for o in outputs]
        if not any(_coincides(g, t) for g in drawn if g.numel() for t in others):
            return drawn
    raise AssertionError("no grad_output distinct from the inputs in 100 draws")
