"""A NaN that an op of forward made while PyTorch warned about it: the warning explains it.

Kept apart from ``_causes`` (the causes read from values). The learner's run is watched
with its warnings recorded, so PyTorch's own diagnosis would otherwise be lost; the
commonest is the unbiased ``std`` or ``var`` of one value: n − 1 = 0 degrees of freedom.
"""

from __future__ import annotations

from autograd_helpers.anomaly._records import Made

__all__ = ["warned_cause"]

_SPREADS = ("std", "var", "std_mean", "var_mean")


def warned_cause(made: Made, cause: str) -> str:
    """``cause`` for the NaN ``made.op`` made, with what PyTorch warned meanwhile, if anything;
    for ``std`` or ``var`` with too few values, the cause itself."""
    if not made.warned:
        return cause
    said = f"PyTorch warned: “{made.warned}”"
    if made.op in _SPREADS and "degrees of freedom" in made.warned:
        return (
            f"`{made.op}` divides by n − correction (n the number of values it reduces; the "
            "correction is 1 by default, for the unbiased estimate), and that is 0 or less "
            "here: too few values, as over a dimension that holds a single value (a batch of "
            f"one sample) with the default correction, where it is 0 / 0, NaN ({said}). Fix: "
            "reduce over more values (a batch of at least two with the default correction), "
            "or pass `correction=0` (the biased estimate, divided by n) where a single value "
            "must work."
        )
    return f"{cause} {said}."
