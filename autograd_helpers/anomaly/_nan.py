"""``find_nan_origin``: where the first NaN of a forward and backward pass comes from."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autograd_helpers._checking.validate import check_callable
from autograd_helpers.anomaly._tracing import Report, run_watched

__all__ = ["NanOrigin", "find_nan_origin"]

_WHERE_TRAP = (
    " If it sits inside `torch.where`, the branch not taken still gets a zero gradient, and "
    "0 × ∞ is NaN: feed that branch a safe input too (the double-where fix)."
)
_CAUSES = {
    "Sqrt": "the derivative of √x, 1/(2√x), is infinite at 0, and anything multiplied by it "
    "becomes NaN where it was 0 (0 × ∞). Add a small epsilon under the root "
    "(`torch.sqrt(x + 1e-12)`) or keep x away from 0." + _WHERE_TRAP,
    "Rsqrt": "the derivative of 1/√x is infinite at 0. Add a small epsilon." + _WHERE_TRAP,
    "Log": "the derivative of log x, 1/x, is infinite at 0 (and log of a negative number is "
    "already NaN). Clamp the argument (`x.clamp(min=1e-12)`) or use a stable form such as "
    "`torch.log1p` or `logsumexp`." + _WHERE_TRAP,
    "Div": "a division by zero (or by something that underflowed to zero) makes an infinite "
    "gradient, and 0 × ∞ is NaN. Keep the denominator away from zero (add an epsilon)."
    + _WHERE_TRAP,
    "Reciprocal": "the derivative of 1/x is infinite at 0. Keep x away from zero." + _WHERE_TRAP,
    "Pow": "a fractional power such as x ** 0.5 has an infinite derivative at 0. Add an "
    "epsilon, or avoid the power at 0." + _WHERE_TRAP,
    "Mul": "an infinite value met a zero: 0 × ∞ is NaN. Look for an overflow (an `exp` of a "
    "large number) earlier in forward.",
    "Acos": "the derivative of acos is infinite at ±1. Clamp the argument to (-1 + ε, 1 - ε).",
    "Asin": "the derivative of asin is infinite at ±1. Clamp the argument to (-1 + ε, 1 - ε).",
    "Atanh": "the derivative of atanh is infinite at ±1. Clamp the argument.",
}
_CUSTOM = (
    "this is a custom Function: its own backward returned NaN. Find its singular point (a "
    "division by zero, 0 × ∞) and make backward safe there, for example with "
    "`torch.where(x == 0, limit, formula)` or an epsilon."
)
_FORWARD_CAUSES = {
    "log": "log of a negative number is NaN (log 0 is -inf). Clamp the argument.",
    "sqrt": "the square root of a negative number is NaN. Clamp the argument, or ask why it "
    "can be negative.",
    "div": "0 / 0 is NaN (and ∞ / ∞). Keep the denominator away from zero.",
    "sub": "∞ - ∞ is NaN: something overflowed to infinity earlier.",
    "mul": "0 × ∞ is NaN: something overflowed to infinity earlier.",
}


@dataclass(frozen=True, repr=False)
class NanOrigin(Report):
    """Where a NaN first appeared.

    Attributes:
        found: whether forward or backward produced a NaN.
        stage: ``"forward"`` or ``"backward"`` (``""`` when not found).
        node: the operation (``"log"``) or backward node (``"SqrtBackward0"``) that made it.
        source: the learner's own forward line that created it: ``"in loss: d = torch.sqrt(x)"``.
        message: one paragraph: what, where, the usual cause and the usual fix.
    """

    stage: str = ""
    node: str = ""
    source: str = ""


def _cause(node: str) -> str:
    base = re.sub(r"Backward\d*$", "", node)
    for key, cause in _CAUSES.items():
        if base == key or (base.startswith(key) and base[len(key) :].isdigit()):
            return cause
    if node.endswith("Backward") and not node[-1].isdigit():
        return _CUSTOM
    return "Look at the values reaching this operation: an infinity or a zero in a denominator."


def find_nan_origin(fn: Callable[..., Any], *inputs: Any) -> NanOrigin:
    """Run ``fn(*inputs)`` and its backward and report where the first NaN came from.

    Floating-point tensor inputs are replaced by fresh leaves that require grad, and the
    backward pass starts from a gradient of ones. A NaN made in forward is traced to the op
    that made it from NaN-free inputs; one made in backward to the node anomaly mode names,
    and through the forward traceback it recorded, to the line of ``fn`` that created it.

    Args:
        fn: the computation, returning one tensor (a loss, say).
        *inputs: its inputs.

    Returns:
        A :class:`NanOrigin`; it displays itself in Jupyter.

    Example::

        >>> def distance(x):
        ...     return torch.sqrt((x**2).sum())
        >>> origin = find_nan_origin(distance, torch.zeros(3))
        >>> origin.found, origin.stage, origin.node
        (True, 'backward', 'SqrtBackward0')
    """
    check_callable("find_nan_origin", "fn", fn)
    outcome, watch, backward, _ = run_watched(fn, inputs, check_nan=False)
    error = outcome.error
    if error is not None:
        message = f"fn raised {error.describe()} {error.where}".strip()
        return NanOrigin(False, message, "fn raised an exception", (message,), raised=True)
    output = outcome.value
    if bool(output.isnan().any()):
        op, line = watch.first_nan or ("an operation", "")
        cause = _FORWARD_CAUSES.get(op, "check the values reaching it.")
        where = f" ({line})" if line else ""
        message = f"The NaN appears in forward, made by `{op}`{where}: {cause}"
        return NanOrigin(
            True,
            message,
            f"NaN in forward: `{op}`",
            (message,),
            stage="forward",
            node=op,
            source=line,
        )
    nan = next((event for event in backward.events if event[1] == "nan"), None)
    if nan is None:
        infinite = [f"`{node}`" for node, _, _ in backward.events]
        tail = f" (but {', '.join(infinite)} produced infinite gradients)" if infinite else ""
        message = f"No NaN: forward and backward ran without one{tail}."
        return NanOrigin(False, message, "no NaN in forward or backward", (message,))
    origin = backward.events[0]  # the first non-finite gradient: an inf that became NaN, or NaN
    node, _, line = origin
    made = f", created by the line {line}" if line else ""
    parts = [f"The first non-finite gradient comes from `{node}`{made}."]
    if nan is not origin:
        nan_line = f" ({nan[2]})" if nan[2] else ""
        parts.append(
            f"It was infinite there; the NaN appears in `{nan[0]}`{nan_line}, where that "
            "infinity met a zero (0 × ∞ is NaN)."
        )
    if watch.first_nan is not None:
        op, forward_line = watch.first_nan
        parts.append(
            f"Forward also made a NaN with `{op}` ({forward_line}) and then discarded it, as "
            "`torch.where` does with the branch not taken."
        )
    parts.append(f"Usually {_cause(node)}")
    message = " ".join(parts)
    return NanOrigin(
        True,
        message,
        f"NaN in backward, from `{node}`",
        (message,),
        stage="backward",
        node=node,
        source=line,
    )
