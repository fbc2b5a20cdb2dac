"""Backward run again, as autograd may run it: twice, with other ``grad_output``s, alone.

Part of ``check_function`` (:mod:`._steps`). One backward pass with one random
``grad_output`` cannot tell a backward that is right from one that:

- ignores ``grad_output``, adds a constant or clips: backward must be linear in
  ``grad_output``, so a zero ``grad_output`` gives a zero gradient, and twice it (minus it,
  1000 times it), twice (minus, 1000 times) the gradient (:func:`linear_verdict`);
- changes a saved tensor in place, so that a second backward pass on the same graph
  (``retain_graph=True``) gives another gradient (:func:`linear_verdict` runs it twice);
- breaks when only some inputs require grad, as ``ctx.needs_input_grad`` tells it: it
  returns fewer gradients, or in another order (:func:`alone_verdict` makes each input
  the only one that requires grad).

Each runs the learner's forward again on fresh float64 leaves, through the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaves, working_copies
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.numeric import dense
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._precision import named_dtype, precision_note

__all__ = ["alone_verdict", "linear_verdict", "same_gradient"]

SCALE = 2.0  # exact in binary: a backward linear in grad_output gives exactly twice
# grad_output times each scale: a zero one, twice, minus it, and a large one (a clipped
# gradient, `grad_output.clamp(-10, 10)`, is linear only for small ones); what to call it
SCALES = ((0.0, "a zero"), (SCALE, "twice the"), (-1.0, "minus the"), (1e3, "1000 times the"))
# A backward's rounding, relative to the largest gradient: what "the same" allows.
SAME_RTOL, SAME_ATOL = 1e-9, 1e-12


def _run_forward(
    call: Callable[..., Any], trial: Trial, wrt: Sequence[int]
) -> tuple[list[object], list[Tensor]] | None:
    """Fresh leaves (those at ``wrt`` require grad) and forward's outputs that require grad."""
    leaves = fresh_leaves(trial.inputs, torch.float64, wrt)
    outcome = run_learner_code(call, *working_copies(leaves))
    if outcome.error is not None or outcome.side_effects:
        return None  # judged on the first run
    value = outcome.value
    outputs = value if isinstance(value, tuple) else (value,)
    carriers = [o for o in outputs if isinstance(o, Tensor) and o.requires_grad]
    return leaves, carriers


def _grads(outputs: list[Tensor], sources: list[Tensor], vs: list[Tensor]) -> Any:
    return torch.autograd.grad(outputs, sources, vs, retain_graph=True, allow_unused=True)


def _close(a: Tensor | None, b: Tensor | None, scale: float = 1.0) -> bool:
    a, b = dense(a), dense(b)  # a sparse gradient (Embedding's) compares by its values
    if a is None or b is None:  # None: no gradient, as good as zeros
        other = b if a is None else a
        return other is None or not bool(other.detach().ne(0).any())
    a64, b64 = a.detach().double(), scale * b.detach().double()
    if a64.shape != b64.shape:
        return False
    finite = b64.isfinite()
    atol = SAME_ATOL + SAME_RTOL * float(b64[finite].abs().max()) if bool(finite.any()) else 0
    equal = (a64 - b64).abs() <= atol + SAME_RTOL * b64.abs()
    return bool((equal | (a64.isnan() & b64.isnan()) | (a64 == b64)).all())


def same_gradient(a: Tensor | None, b: Tensor | None) -> bool:
    """The same gradient, to a backward's rounding (``None`` as good as zeros)."""
    return _close(a, b)


def _ctx_attributes(outputs: Sequence[Tensor]) -> dict[str, object]:
    """What forward kept on ``ctx`` as attributes (the node of the first output)."""
    node = next((o.grad_fn for o in outputs if o.grad_fn is not None), None)
    attributes = getattr(node, "__dict__", None)
    return dict(attributes) if isinstance(attributes, dict) else {}


def _dropped(before: dict[str, object], after: dict[str, object]) -> str:
    """``"deletes `ctx.y`"`` (or ``"sets `ctx.y` to None"``) for what backward let go of."""
    for name, value in before.items():
        if name not in after:
            return f"deletes `ctx.{name}`"
        if value is not None and after[name] is None:
            return f"sets `ctx.{name}` to None"
    return ""


_TWICE = (
    "Autograd may run backward again on the same graph (`retain_graph=True`, "
    "`torch.autograd.grad` for a Hessian): changing a saved tensor in place "
    "(`y.mul_(3)`, `x += 1`), on `ctx` or elsewhere, makes the next pass wrong. Compute "
    "new tensors (`y * 3`)."
)
_ONCE = (
    "Autograd may run backward again on the same graph (`retain_graph=True`, "
    "`torch.autograd.grad` for a Hessian, this check's second pass). Freeing what "
    "backward needs saves memory early (revtorch deletes `ctx.y`), but then the "
    "Function supports one pass only, and a second one fails (or says so, if it raises "
    "on purpose): leave it on `ctx`, which autograd frees with the graph."
)
_KEPT = (
    "Each pass must compute the gradient from what forward saved alone. A value backward "
    "keeps on `ctx` for the next pass (a running sum, a counter) makes a second pass on "
    "the same graph (`retain_graph=True`, a Hessian) give another gradient: compute the "
    "gradient afresh and return it; autograd adds it into `.grad`."
)
_GUARD = (
    "Autograd may run backward again on the same graph (`retain_graph=True`, "
    "`torch.autograd.grad` for a Hessian, this check's second pass), and nothing here "
    "stops it from being right again: drop the flag and the error, and compute the "
    "gradient from the saved tensors each time."
)
_FREED = (
    "Autograd may run backward again on the same graph (`retain_graph=True`, this check's "
    "second pass). A graph built in forward and differentiated in backward is freed by "
    "the first `torch.autograd.grad(...)` unless it passes `retain_graph=True`; better, "
    "write the derivative's formula and build no graph at all."
)
_AGAIN = (
    "Autograd may run backward again on the same graph (`retain_graph=True`, "
    "`torch.autograd.grad` for a Hessian): backward must work from what forward saved, "
    "each time it runs."
)
_CHAIN = (
    "The gradient is `grad_output` times the derivative (the chain rule): multiply by "
    "`grad_output`, and add nothing that does not depend on it, clip nothing."
)


def _twice_verdict(
    trial: Trial,
    outputs: list[Tensor],
    sources: list[Tensor],
    first: Any,
    on_ctx: dict[str, object],
) -> CheckResult | None:
    """Backward a second time on the graph whose first pass gave ``first``: the same."""
    after_first = _ctx_attributes(outputs)
    dropped = _dropped(on_ctx, after_first)
    kept = _kept(on_ctx, after_first)
    second = run_learner_code(_grads, outputs, sources, trial.grad_outputs)
    if second.error is not None:
        where = [second.error.where] if second.error.where else []
        title, hint = _once_cause(second.error.describe(), dropped, kept)
        return trial.fail(title, second.error.describe(), *where, hint)
    for name, a, b in zip(trial.wrt_names, second.value, first, strict=True):
        if not _close(a, b):
            title = (
                f"backward gives another gradient for `{name}` the second time it runs on "
                "the same graph"
            )
            if kept:
                return trial.fail(f"{title}: it keeps {kept} from its first pass.", _KEPT)
            return trial.fail(f"{title}.", _TWICE)
    return None


def _kept(before: dict[str, object], after: dict[str, object]) -> str:
    """``"`ctx.acc`"``: what backward's first pass set on ``ctx`` for the next one."""
    for name, value in after.items():
        if name not in before or before[name] is not value:
            return f"`ctx.{name}`"
    return ""


def _once_cause(error: str, dropped: str, kept: str) -> tuple[str, str]:
    """Title and hint for a backward whose second pass on one graph raised."""
    once = "backward can run only once on a graph"
    if dropped:
        return f"{once}: it {dropped}, which its second pass needs.", _ONCE
    if kept:
        return f"{once}: its first pass sets {kept}, and the second raises on it.", _GUARD
    if "backward through the graph a second time" in error:
        return (
            f"{once}: it differentiates a graph of its own that its first pass freed.",
            _FREED,
        )
    if "modified by an inplace operation" in error:
        return "backward raised an exception when it ran a second time on the same graph.", _TWICE
    return (
        "backward raised an exception when it ran a second time on the same graph.",
        _AGAIN,
    )


def linear_verdict(trial: Trial, call: Callable[..., Any]) -> CheckResult | None:
    """Backward twice on one graph, then with a zero and a doubled ``grad_output``."""
    ran = _run_forward(call, trial, trial.wrt)
    if ran is None:
        return None
    leaves, outputs = ran
    sources = [t for i in trial.wrt if isinstance(t := leaves[i], Tensor)]
    vs = trial.grad_outputs
    if [o.shape for o in outputs] != [v.shape for v in vs]:
        return None
    on_ctx = _ctx_attributes(outputs)
    first = run_learner_code(_grads, outputs, sources, vs)
    if first.error is not None:
        return None  # the first backward pass was judged already
    twice = _twice_verdict(trial, outputs, sources, first.value, on_ctx)
    if twice is not None:
        return twice
    for scale, what in SCALES:
        outcome = run_learner_code(_grads, outputs, sources, [scale * v for v in vs])
        if outcome.error is not None:
            return trial.fail(
                f"backward raised an exception for {what} `grad_output`.",
                outcome.error.describe(),
                *([outcome.error.where] if outcome.error.where else []),
                _CHAIN,
            )
        for name, a, b in zip(trial.wrt_names, outcome.value, first.value, strict=True):
            if not _close(a, b, scale) and not (scale == 0 and a is None):
                result = "not zero" if scale == 0 else f"not {what} gradient"
                title = f"for {what} `grad_output`, backward's gradient for `{name}` is {result}."
                note = precision_note(trial, call, scale=scale)
                if note is not None:  # rounding, not clipping: say so first
                    title = f"your code computes in {named_dtype(note)}: {title}"
                return trial.fail(title, note or _CHAIN)
    return None


def alone_verdict(trial: Trial, call: Callable[..., Any]) -> CheckResult | None:
    """Each input of ``wrt`` the only one that requires grad: the same gradient for it."""
    if not trial.is_function or len(trial.wrt) < 2:
        return None
    hint = (
        "When only some inputs require grad, `ctx.needs_input_grad` says which: backward "
        "still returns one value per input of forward, in forward's order, and may return "
        "`None` for an input whose `ctx.needs_input_grad[i]` is False."
    )
    for k, i in enumerate(trial.wrt):
        name = trial.names[i]
        ran = _run_forward(call, trial, [i])
        if ran is None:
            continue
        leaves, outputs = ran
        source = leaves[i]
        vs = trial.grad_outputs
        if not isinstance(source, Tensor) or [o.shape for o in outputs] != [v.shape for v in vs]:
            continue
        outcome = run_learner_code(_grads, outputs, [source], vs)
        title = f"when only `{name}` requires grad (`ctx.needs_input_grad`), backward"
        if outcome.error is not None:
            return trial.fail(
                f"{title} raised an exception.",
                outcome.error.describe(),
                *([outcome.error.where] if outcome.error.where else []),
                hint,
            )
        (grad,) = outcome.value
        if grad is None and not _close(None, trial.grads[k]):  # None is a zero gradient
            return trial.fail(f"{title} returned no gradient for it.", hint)
        if not _close(grad, trial.grads[k]):
            return trial.fail(
                f"{title} returns another gradient for it than when every input does.", hint
            )
    return None
