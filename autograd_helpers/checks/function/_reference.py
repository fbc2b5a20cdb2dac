"""The notebook's trusted answer to a ``check_function``: run on float64 copies of the inputs.

When the reference itself fails (it raises, returns something that is not a tensor, or
converts its result away from float64), the check is set up wrong: that is said plainly, as
the notebook's mistake, never as the learner's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves, working_copies
from autograd_helpers._randomness import random_states_kept
from autograd_helpers.checks._core.numeric import format_number, located
from autograd_helpers.checks._core.trial import Options

__all__ = ["Reference"]


class Reference:
    """A trusted callable run on float64 copies of the inputs: outputs, then gradients."""

    def __init__(
        self, role: str, fn: Callable[..., Any], options: Options, inputs: tuple[object, ...]
    ) -> None:
        self.role = role
        self.fn = fn
        self.leaves = fresh_leaves(inputs, torch.float64, options.wrt)
        result = self._call(fn, *working_copies(self.leaves))
        outputs = result if isinstance(result, tuple) else (result,)
        if not outputs or not all(isinstance(o, Tensor) for o in outputs):
            raise TypeError(
                f"check_function(): the {role} must return a tensor or a tuple of tensors, "
                f"got {type(result).__name__}"
            )
        for k, out in enumerate(outputs):
            if out.is_floating_point() and out.dtype != torch.float64:
                which = "its output" if len(outputs) == 1 else f"its output {k}"
                raise ValueError(
                    f"check_function(): the {role} returned {out.dtype} for float64 inputs "
                    f"({which}): the check compares in float64, so the {role} must not "
                    "convert its result. The check is set up wrong, not the code it checks."
                )
        self.outputs: tuple[Tensor, ...] = outputs
        self.wrt = options.wrt

    def require_domain(self, names: Sequence[str]) -> None:
        """Raise when an output is NaN or inf at an example: the notebook chose an example
        outside the function's domain (``torch.log`` at -2), where no gradient is right."""
        for k, out in enumerate(self.outputs):
            if not out.is_floating_point() or bool(out.detach().isfinite().all()):
                continue
            flat = int((~out.detach().isfinite()).reshape(-1).nonzero()[0, 0])
            inputs = list(zip(names, self.leaves, strict=False))
            where = located(flat, out.shape, inputs) or "at an element"
            which = "its output" if len(self.outputs) == 1 else f"its output {k}"
            value = format_number(float(out.detach().reshape(-1)[flat]))
            raise ValueError(
                f"check_function(): the {self.role} gives {value} "
                f"({which}) {where} of the example: the example lies outside the function's "
                "domain, where no gradient is right or wrong. The check is set up wrong (give "
                "an example inside the domain), not the code it checks."
            )

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:  # a reference that draws (a dropout) must not move the notebook's generators
            with random_states_kept():
                return fn(*args, **kwargs)
        except Exception as exc:
            raise ValueError(
                f"check_function(): the {self.role} raised {type(exc).__name__}: {exc}. The "
                "check itself is set up wrong, not the code it checks."
            ) from exc

    def gradients(
        self, grad_outputs: Sequence[Tensor], positions: Sequence[int]
    ) -> list[Tensor] | None:
        """Its gradients for ``grad_outputs`` at its outputs ``positions``, or ``None`` when
        those outputs are not differentiable."""
        outputs = [self.outputs[k] for k in positions if k < len(self.outputs)]
        if not grad_outputs or len(outputs) != len(grad_outputs):
            return None
        if not all(o.requires_grad for o in outputs):
            return None
        if [o.shape for o in outputs] != [g.shape for g in grad_outputs]:
            return None
        sources = [t for i in self.wrt if isinstance(t := self.leaves[i], Tensor)]
        grads = self._call(torch.autograd.grad, outputs, sources, grad_outputs, allow_unused=True)
        return [
            torch.zeros_like(s) if g is None else g for g, s in zip(grads, sources, strict=True)
        ]
