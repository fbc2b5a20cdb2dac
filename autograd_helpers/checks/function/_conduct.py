"""How a learner's Function behaves beyond its numbers: what it changes, reseeds, calls.

Part of ``check_function`` (:mod:`._steps`). Right numbers can come from code that:

- changes what outlives the call: a global variable, a global list or dict it appends to,
  a notebook tensor it reaches by name, a class attribute
  (:class:`~autograd_helpers.checks._contain.contained.Contained` snapshots and restores them;
  :data:`WORDS` says each change);
- sets ``.grad`` of a tensor itself (``x.grad = ...``), where autograd adds its own;
- reseeds a global random number generator (``torch.manual_seed``, ``torch.set_rng_state``,
  ``np.random.seed``, ``random.seed``), so that the notebook's next "random" numbers are
  always the same (the runner puts the states back; drawing numbers is no reseed, nor is a
  state set back or ``fork_rng``: :mod:`._seeding`);
- hides a NaN with ``nan_to_num`` (or ``torch.where`` on ``isnan``), or calls autograd
  inside ``backward`` where the exercise is to write the derivative: numbers right, a note
  (not a failure);
- marks its input dirty (``ctx.mark_dirty``): right for an in-place Function, a note;

:func:`._conduct_watch.conduct` watches a stage for the calls; this module says
what they mean, as verdicts and notes.
"""

from __future__ import annotations

import warnings

from torch import Tensor

from autograd_helpers.checks._contain.contained import Contained, Words
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._conduct_watch import Conduct

__all__ = [
    "WORDS",
    "conduct_notes",
    "grad_set_verdict",
    "stage_verdict",
    "tensors_on_ctx",
]

# How check_function says what a forward or backward changed that outlives the call.
WORDS = Words(
    container="it changed {label} (it held {before} items, now {now})",
    tensor="it changed {label} ({what})",
    reached="the notebook's tensor {label}",
    attribute="",
)
# Whose generator each call reseeds, and how to draw repeatable numbers without it.
_GENERATORS = {
    "`torch": (
        "torch's random number generator",
        "(`g = torch.Generator().manual_seed(0)`, then `torch.rand(..., generator=g)`)",
    ),
    "`np.": (
        "NumPy's global random number generator",
        "(`rng = np.random.default_rng(0)`, then `rng.random(...)`)",
    ),
    "`random": (
        "Python's global random number generator",
        "(`rng = random.Random(0)`, then `rng.random()`)",
    ),
}


def stage_verdict(
    trial: Trial, contained: Contained, seen: Conduct, stage: str
) -> CheckResult | None:
    """A reseed, or a change that outlives the call, in ``stage`` (``"forward"``...)."""
    if seen.reseeded:
        call = seen.reseeded_by or "`torch.manual_seed`"
        whose, own = next(v for k, v in _GENERATORS.items() if call.startswith(k))
        return trial.fail(
            f"{stage} reseeds {whose} ({call}).",
            "The generator is global: after every call of your Function the notebook's next "
            "random numbers would be the same ones. The checker put the random state back. "
            f"Random numbers that must repeat come from a generator of their own {own}.",
        )
    changes = contained.changes()
    if not changes:
        return None
    return trial.fail(
        f"{stage} {changes[0].removeprefix('it ')}, which outlives the call.",
        "A Function should change nothing but what it returns. A cache outside `ctx` keeps "
        "tensors (and their graphs) alive after the call, and every call shares it: the next "
        "forward overwrites what an earlier backward still needs. Keep what backward needs "
        "on `ctx` (`ctx.save_for_backward(...)` for tensors). The checker has put it back.",
    )


def _has_grad(t: Tensor) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading `.grad` of a non-leaf warns
        return t.grad is not None


def grad_set_verdict(trial: Trial) -> CheckResult | None:
    """backward set ``.grad`` of a tensor it was handed (its input, a leaf, the output)."""
    names = [*trial.names, *trial.names, *["the output"] * len(trial.outputs)]
    for name, t in zip(names, (*trial.args, *trial.leaves, *trial.outputs), strict=True):
        if isinstance(t, Tensor) and _has_grad(t):
            what = name if name.startswith("the ") else f"its input `{name}`"
            return trial.fail(
                f"backward set `.grad` of {what}.",
                "backward only returns gradients; autograd decides where they go and adds "
                "them into the leaves' `.grad`. Setting `.grad` yourself puts a gradient "
                "where autograd adds its own: a leaf would end up with twice its gradient. "
                "Return the gradient instead.",
            )
    return None


def conduct_notes(trial: Trial, forward: Conduct, backward: Conduct) -> list[str]:
    """Notes for a right answer that got there by a route the exercise does not teach."""
    if not trial.is_function:
        return []
    notes = []
    if forward.marked_dirty:
        notes.append(
            "Note: forward marks its input dirty (`ctx.mark_dirty`): it writes the result "
            "into the caller's tensor, which then no longer holds the input. Right for an "
            "in-place Function (the checker gave it a copy); otherwise return a new tensor."
        )
    if backward.nan_to_num or (backward.isnan and backward.masked):
        call = "calls `nan_to_num`" if backward.nan_to_num else "replaces NaN (`isnan`)"
        notes.append(
            f"Note: backward {call}. It hides a NaN instead of avoiding it, and "
            "it hides every NaN, those of a real bug too: where the formula divides by 0, "
            "use a form that does not (`3 * x**2`, not `3 * x**3 / x`), or choose by the "
            "input (`torch.where(x == 0, ...)`), not by `isnan` of the result."
        )
    if backward.passes:
        transforms = sorted({e for e in backward.engines if e.startswith("`torch.func.")})
        names = ", ".join(transforms) or "`torch.autograd.grad` or `.backward()`"
        notes.append(
            f"Note: backward runs autograd itself ({names}), "
            "so autograd, not your formula, computes the gradient. The numbers are right, "
            "but the exercise is to write the derivative: return `grad_output` times it."
        )
    return notes


def tensors_on_ctx(trial: Trial) -> list[str]:
    """A note for each tensor forward stored as a plain attribute of ``ctx``."""
    if not trial.is_function:
        return []
    node = next((o.grad_fn for o in trial.outputs if o.grad_fn is not None), None)
    attributes = vars(node) if node is not None and hasattr(node, "__dict__") else {}
    return [
        f"Note: forward stored a tensor as `ctx.{name}`. Save tensors with "
        "`ctx.save_for_backward(...)`: it detects in-place changes that would make the "
        "gradient silently wrong, and does not keep the graph alive in a reference cycle."
        for name, value in attributes.items()
        if isinstance(value, Tensor)
    ]
