"""The hints of ``check_double_backward``: why backward could not be differentiated.

Each names the mechanism chapter 03 teaches: autograd differentiates backward by following
the history of what it reads, so backward must be built from torch operations on tensors
that trace back to the input (the input itself, or the output). A hint names what broke
the trail: a tensor forward kept without history, grad mode off, a detached copy,
``@once_differentiable``, a NaN from a branch ``torch.where`` did not take.
"""

from __future__ import annotations

from torch import Tensor

from autograd_helpers.checks.gradcheck._saved import what_forward_kept
from autograd_helpers.checks.gradcheck.explain import GradcheckReport

__all__ = [
    "BLIND",
    "blind_hint",
    "is_once_differentiable",
    "kept_hint",
    "kept_notes",
    "probe_hint",
    "raised_hint",
]

BLIND = 1e-6  # a numerical second derivative above this, where autograd sees none: blind

_ONCE = (
    "Hint: `@once_differentiable` makes backward a dead end for autograd: it runs backward "
    "with autograd off, so its result has no history to differentiate. Remove it, and build "
    "backward from torch operations on the saved tensors."
)


def is_once_differentiable(fn: object) -> bool:
    """Is ``fn``'s backward wrapped (as ``@once_differentiable`` wraps it)?"""
    return hasattr(getattr(fn, "backward", None), "__wrapped__")


def kept_hint(fn: object, point: Tensor, name: str) -> str | None:
    """The hint for the first tensor forward kept that autograd cannot trace to ``name``."""
    if not isinstance(fn, type):
        return None
    untraceable = [k for k in what_forward_kept(fn, point) if not k.traceable]
    return untraceable[0].hint(name) if untraceable else None


def blind_hint(report: GradcheckReport, *, once: bool) -> str | None:
    """Where autograd saw no dependence at all (an analytical block of zeros)."""
    blind = [
        f"`{name}`"
        for name, analytical, numerical in zip(
            report.names, report.analytical, report.numerical, strict=True
        )
        if not bool(analytical.any()) and bool(numerical.abs().max() > BLIND)
    ]
    if not blind:
        return None
    if once:
        return _ONCE
    return (
        f"Hint: autograd sees no dependence of backward's result on {' or '.join(blind)}: "
        "backward computed it where autograd cannot follow: with grad mode off "
        "(`torch.no_grad()`, `torch.set_grad_enabled(False)`), on a detached copy "
        "(`.detach()`, `.data`, NumPy, a `torch.autograd.grad` of its own on a new leaf). "
        "Build it from torch operations on the saved tensors."
    )


def raised_hint(report: GradcheckReport, *, once: bool) -> str:
    """Differentiating backward raised."""
    if once or "once_differentiable" in " ".join(report.details):
        return _ONCE
    return (
        "Hint: backward must be built from torch operations on the saved tensors (no "
        "NumPy, no `.item()`), so that autograd can differentiate it again."
    )


def probe_hint(kind: str, *, in_float32: bool = False) -> str:
    """A second derivative off (``"off"``) or not finite at a probe (of float32 or float64).

    Example::

        >>> probe_hint("nan").split(":")[0]
        'Hint'
    """
    if kind == "off" and in_float32:
        return (
            "Hint: float32 keeps about 7 digits: a form that subtracts nearly equal numbers, "
            "or adds a small constant to dodge a division, loses them. Compute the derivative "
            "from the saved tensors directly."
        )
    if kind == "off":
        return (
            "Hint: a form that is right to the first derivative's tolerance can still bend "
            "differently: a smoothed |x| (`sqrt(x² + ε)`), a clamp or a cut-off changes the "
            "second derivative near the kink. Use the exact form (`x.abs()`, `x.sign()`)."
        )
    return (
        "Hint: look for `sqrt` of something that is 0 there (its derivative is infinite), a "
        "division by the input, or a `torch.where` whose branch not taken divides by zero: "
        "where's backward sends that branch 0, and 0 × inf is nan. Build the denominator "
        "first (`torch.where(x >= 0, 1 + x, 1 - x)`), then divide."
    )


def kept_notes(fn: object, point: Tensor) -> list[str]:
    """Notes for a pass: an intermediate with a graph of its own, a constant never needed."""
    if not isinstance(fn, type):
        return []
    notes = []
    for kept in what_forward_kept(fn, point):
        if kept.kind == "own graph":
            notes.append(
                f"Note: forward kept `{kept.where}`, an intermediate built with autograd "
                "on (`torch.enable_grad()`): it carries its own graph back to the input, so "
                "the second derivative is right, at the cost of keeping that graph alive. "
                "Saving the input (or the output) keeps less."
            )
        elif not kept.traceable:
            notes.append(
                f"Note: forward also kept `{kept.where}`, which autograd treats as a "
                "constant; your second derivative does not depend on it, so it is only "
                "extra memory."
            )
    return notes
