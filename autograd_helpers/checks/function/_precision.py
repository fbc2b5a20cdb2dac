"""Is float32 the cause? The learner's code run again as if it never left float64.

Part of ``check_function`` (:mod:`._steps`). A Function that converts to float32 on the way
(``y.float()``, a constant made with ``torch.tensor(0.1)``) is right to about 7 digits:
against float64's references its gradient is "off by 5e-08", finite differences of a
float32 forward are noise, and backward is not exactly linear in ``grad_output`` (``1000 *
g`` rounds differently). Those verdicts are true, and say nothing of the cause. When one of
them is given, :func:`precision_note` runs forward and backward again under
:class:`Float64Throughout`, where every floating tensor an operation returns is float64,
and names float32 only when that run is right: then float32 is the whole mistake (a
constant added to the gradient, computed through a float32 mask, is not).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

from autograd_helpers._common.leaves import fresh_leaves, working_copies
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.numeric import dense, finite_difference_vjp, worst_mismatch
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._projected import ELEMENTWISE_LIMIT

__all__ = ["Float64Throughout", "named_dtype", "output_precision_note", "precision_note"]

_DIGITS = {torch.float32: "7", torch.float16: "3", torch.bfloat16: "2"}
_CASTS = {torch.float32: ".float()", torch.float16: ".half()", torch.bfloat16: ".bfloat16()"}


def _less_precise(dtype: object) -> bool:
    return isinstance(dtype, torch.dtype) and dtype.is_floating_point and dtype != torch.float64


class Float64Throughout(TorchDispatchMode):
    """Run a block with every floating result in float64; ``found`` is the least precise
    dtype the code asked for (``None``: it never left float64)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else the first use imports torch._dynamo: seconds, for nothing here

    def __init__(self) -> None:
        super().__init__()
        self.found: torch.dtype | None = None

    def _saw(self, dtype: torch.dtype) -> None:
        if self.found is None or torch.finfo(dtype).eps > torch.finfo(self.found).eps:
            self.found = dtype

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if _less_precise(kwargs.get("dtype")):
            self._saw(kwargs["dtype"])
            kwargs["dtype"] = torch.float64
        out = func(*args, **kwargs)
        given = {id(t) for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)}

        def widened(t: Any) -> Any:
            if not isinstance(t, Tensor) or id(t) in given or not _less_precise(t.dtype):
                return t  # an argument written in place stays the tensor it is
            self._saw(t.dtype)
            with _disable_current_modes():
                return t.to(torch.float64)

        return tree_map(widened, out)


def _inside(watch: Float64Throughout, run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` under ``watch``, entered inside the runner: the runner's own probes of the
    process's state (a float32 tensor among them) are not the learner's code."""

    def watched(*args: Any, **kwargs: Any) -> Any:
        with watch:
            return run(*args, **kwargs)

    return watched


def _outputs(call: Callable[..., Any], leaves: Sequence[object], positions: Sequence[int]) -> Any:
    value = call(*working_copies(leaves))
    outputs = value if isinstance(value, tuple) else (value,)
    return tuple(outputs[k] for k in positions)


def _in_float64(
    call: Callable[..., Any], trial: Trial, scales: Sequence[float], differences: bool
) -> tuple[torch.dtype, list[Any], list[Tensor] | None] | None:
    """Under :class:`Float64Throughout`: the dtype the code left float64 for, the gradients
    for each scale of ``grad_output`` and (with ``differences``) finite differences.
    ``None`` where the code never left float64, or fails, or is too large to nudge."""
    watch = Float64Throughout()
    # made outside the watch: copying a float32 example input is the checker's doing
    leaves = fresh_leaves(trial.inputs, torch.float64, trial.wrt)

    def gradients() -> list[Any]:
        outputs = _outputs(call, leaves, trial.differentiable)
        sources = [t for i in trial.wrt if isinstance(t := leaves[i], Tensor)]
        return [
            torch.autograd.grad(
                outputs, sources, [s * v for v in trial.grad_outputs], True, allow_unused=True
            )
            for s in scales
        ]

    grads = run_learner_code(_inside(watch, gradients))
    if grads.error is not None or watch.found is None:
        return None
    if not differences:
        return watch.found, grads.value, None
    if sum(t.numel() for t in trial.wrt_leaves) > ELEMENTWISE_LIMIT:
        return None  # thousands of forward passes, for a note

    def plain(*args: Any) -> Any:
        return _outputs(call, args, trial.differentiable)

    fd = run_learner_code(
        _inside(watch, finite_difference_vjp),
        plain,
        trial.leaves,
        trial.grad_outputs,
        trial.wrt,
        eps=trial.options.eps,
    )
    return None if fd.error is not None else (watch.found, grads.value, fd.value)


def _close(got: Sequence[Any], want: Sequence[Any], atol: float, rtol: float) -> bool:
    return all(
        isinstance(a, Tensor)
        and isinstance(b, Tensor)
        and a.shape == b.shape
        and worst_mismatch(dense(a), dense(b), atol=atol, rtol=rtol) is None
        for a, b in zip(got, want, strict=True)
    )


def precision_note(
    trial: Trial,
    call: Callable[..., Any],
    expected: Sequence[Tensor] | None = None,
    scale: float | None = None,
) -> str | None:
    """A sentence naming float32 (or another dtype less precise than float64) when the
    learner's code computes in it and, run in float64 throughout, would be right: match
    ``expected`` (the reference's gradients) to float64's rounding, or finite differences
    without them, or with ``scale``, be linear in ``grad_output``. Else ``None``."""
    scales = [1.0] if scale is None else [1.0, scale]
    ran = _in_float64(call, trial, scales, differences=expected is None and scale is None)
    if ran is None:
        return None
    found, grads, fd = ran
    if scale is not None:
        right = _close(grads[1], [scale * g for g in grads[0]], 1e-12, 1e-9)
    elif expected is not None:
        right = _close(grads[0], expected, 1e-12, 1e-7)
    else:
        right = fd is not None and _close(grads[0], fd, trial.options.atol, trial.options.rtol)
    return _sentence(found) if right else None


def named_dtype(note: str) -> str:
    """``"float32"``: the dtype a :func:`precision_note` names, to lead a title with."""
    return note.removeprefix(_OPENING).split(" ", 1)[0]


_OPENING = "Your forward or backward computes in "


def _sentence(found: torch.dtype) -> str:
    """The note that ``found``, not the formula, is the whole difference."""
    name = str(found).removeprefix("torch.")
    return (
        f"{_OPENING}{name} (`{_CASTS.get(found, '.to(...)')}`, "
        f"or a tensor made without `dtype=`), though every input is float64: {name} keeps "
        f"about {_DIGITS.get(found, 'a few')} significant digits, and that is the whole "
        f"difference (run in float64 throughout, your code is right). Keep every step in "
        "the input's dtype (`torch.tensor(c, dtype=x.dtype)`, or a plain number, for a "
        "constant)."
    )


def output_precision_note(
    call: Callable[..., Any], trial: Trial, expected: Sequence[Tensor], atol: float, rtol: float
) -> str | None:
    """The float32 sentence for an output off from ``expected`` (the reference's), when
    forward, run in float64 throughout, matches it to ``atol`` and ``rtol``."""
    watch = Float64Throughout()
    leaves = fresh_leaves(trial.inputs, torch.float64, trial.wrt)
    outcome = run_learner_code(_inside(watch, call), *working_copies(leaves))
    if outcome.error is not None or watch.found is None:
        return None
    value = outcome.value
    outputs = value if isinstance(value, tuple) else (value,)
    right = len(outputs) == len(expected) and _close(outputs, expected, atol, rtol)
    return _sentence(watch.found) if right else None
