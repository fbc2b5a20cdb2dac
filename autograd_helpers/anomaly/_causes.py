"""Why an operation makes a NaN or an infinity, and the usual fix, in one or two sentences.

Each text is a whole sentence, chosen from what the values show: a node whose own
derivative is infinite at the point (``Sqrt`` at 0), a node that multiplies by an infinity
forward made (``log`` of 0), a custom Function's backward, or an op of forward.
"""

from __future__ import annotations

import math
import re

import torch

from autograd_helpers.anomaly._attention import attention_nan
from autograd_helpers.anomaly._records import Made
from autograd_helpers.anomaly._warned import warned_cause

__all__ = [
    "CUSTOM",
    "attention_nan",
    "backward_cause",
    "empty_row_backward",
    "forward_cause",
    "forward_nan",
    "nan_form",
    "value_cause",
]

WHERE_TRAP = (
    " If it sits inside `torch.where`, the branch not taken still gets a zero gradient, and "
    "0 × ∞ is NaN: feed that branch a safe input too (the double-where fix)."
)
DISCARDED = (
    " If forward discards it (the branch `torch.where` does not take), backward still uses "
    "it: give that branch a safe input too (the double-where fix)."
)

_EIGENVECTORS = (
    "The gradient through eigenvectors divides by the differences of eigenvalues, "
    "1/(λⱼ − λᵢ): where two eigenvalues are equal (degenerate, as for the identity or any "
    "matrix with a repeated eigenvalue) it is infinite or NaN, and PyTorch documents it as "
    "finite only for distinct eigenvalues (the eigenvectors of a repeated eigenvalue are not "
    "even unique). A clamp or an epsilon on the input does not fix it. Fix: use only the "
    "eigenvalues where you can (`torch.linalg.eigvalsh`, whose gradient is finite even for "
    "repeated ones), or a loss that does not depend on which basis of a repeated "
    "eigenvalue's subspace is returned; for a matrix degenerate by construction, a tiny "
    "distinct shift (`A + 1e-6 * torch.diag(torch.arange(n))`) makes the eigenvalues "
    "distinct, at the price of a slightly different result and large gradients."
)

# Nodes whose own derivative is infinite (or 0/0) at some point, by node name.
_SINGULAR = {
    "Sqrt": "The derivative of √x, 1/(2√x), is infinite at 0, and anything multiplied by it "
    "becomes NaN where it was 0 (0 × ∞). Give the root a safe input only where x is 0, and "
    "choose the result there yourself (the double `torch.where`: "
    "`torch.where(x > 0, torch.sqrt(torch.where(x > 0, x, 1.0)), 0.0)`); for a length "
    "√(Σ xᵢ²), `torch.linalg.vector_norm` does this, with the gradient 0 at 0. An epsilon "
    "under the root (`x + 1e-12`) ends the NaN too, but changes the value and the gradient "
    "wherever x is near 0." + WHERE_TRAP,
    "Rsqrt": "The derivative of 1/√x is infinite at 0. Add a small epsilon." + WHERE_TRAP,
    "Log": "The derivative of log x, 1/x, is infinite at 0 (and log of a negative number is "
    "already NaN). Clamp the argument (`x.clamp(min=1e-12)`) or use a stable form such as "
    "`torch.log1p` or `logsumexp`." + WHERE_TRAP,
    "Div": "A division by zero (or by something that underflowed to zero) makes an infinite "
    "gradient, and 0 × ∞ is NaN. Keep the denominator away from zero (add an epsilon)."
    + WHERE_TRAP,
    "Reciprocal": "The derivative of 1/x is infinite at 0. Keep x away from zero." + WHERE_TRAP,
    "Pow": "A fractional power such as x ** 0.5 has an infinite derivative at 0. Add an "
    "epsilon, or avoid the power at 0." + WHERE_TRAP,
    "Acos": "The derivative of acos is infinite at ±1. Clamp the argument to (-1 + ε, 1 - ε).",
    "Asin": "The derivative of asin is infinite at ±1. Clamp the argument to (-1 + ε, 1 - ε).",
    "Atanh": "The derivative of atanh is infinite at ±1. Clamp the argument.",
    "LinalgEigh": _EIGENVECTORS,
    "LinalgEig": _EIGENVECTORS,
    "LinalgSvd": "The gradient through singular vectors divides by differences of squared "
    "singular values, σⱼ² − σᵢ²: where two singular values are equal (repeated, or several "
    "zeros) it is infinite, and PyTorch documents it as finite only for distinct singular "
    "values. A clamp or an epsilon on the input does not fix it. Fix: use only the singular "
    "values where you can (`torch.linalg.svdvals`, whose gradient is finite even for "
    "repeated ones), or a loss that does not depend on which basis of a repeated singular "
    "value's subspace is returned.",
    "Xlogy": "The derivative of `xlogy(x, y)` with respect to y is x / y, which is 0 / 0 where "
    "both are 0 (as in `xlogy(p, p)` at p = 0, where the derivative of p log p, log p + 1, "
    "is infinite anyway). Choose the gradient you want there with the double `torch.where`.",
}
CUSTOM = (
    "This is a custom Function: its own backward returned NaN. Find its singular point (a "
    "division by zero, 0 × ∞) and make backward safe near it, not only at it: a formula "
    "that divides by x² breaks near 0 too: in float32, x² is subnormal (fewer significant "
    "bits) for |x| below about 1.1e-19, 1/x² overflows to inf below about 5.4e-20, and x² "
    "is exactly 0 below about 2.6e-23. Guard a small interval and use the limit or the "
    "Taylor expansion there: "
    "`small = x.abs() < 1e-4`, then `torch.where(small, taylor, formula(safe_x))`."
)

# A NaN made by an op of forward, from arguments without NaN or inf.
_FORWARD_NAN = {
    "log": "log of a negative number is NaN (log 0 is -inf). Clamp the argument.",
    "sqrt": "the square root of a negative number is NaN. Clamp the argument, or ask why it "
    "can be negative.",
    "div": "0 / 0 is NaN (and ∞ / ∞). Keep the denominator away from zero.",
    "acos": "acos of a number outside [-1, 1] is NaN. Clamp the argument.",
    "asin": "asin of a number outside [-1, 1] is NaN. Clamp the argument.",
    "pow": "a negative number to a fractional power is NaN. Keep the base positive.",
}
_FORWARD_NAN_DEFAULT = (
    "NaN comes from 0 / 0, 0 × ∞, ∞ − ∞, or a function outside its domain (log or sqrt of a "
    "negative number): check the values reaching it."
)

# An infinity made by an op of forward, from finite arguments.
_LOGS = ("log", "log2", "log10", "xlogy")
_EXPONENTIALS = ("exp", "exp2", "expm1", "cosh", "sinh")
_OVERFLOWS = ("pow", "mul", "square", "matmul", "mm", "bmm", "linear", "einsum", "sum")
_DIVISIONS = ("div", "true_divide", "reciprocal", "rsqrt")
_FILLS = ("masked_fill", "fill", "full", "full_like", "index_fill")  # ±inf as a fill value


def _range(dtype: torch.dtype, exponential: bool = True) -> str:
    """Where ``dtype`` overflows, from ``torch.finfo``: "float16 ends near 65504; `exp` of more
    than about 11.1 is inf" (without the part on `exp` unless ``exponential``)."""
    if not dtype.is_floating_point:
        return "its dtype ran out of range"
    largest = torch.finfo(dtype).max
    near = f"{largest:.0f}" if largest < 1e6 else f"{largest:.1e}".replace("e+", "e")
    name = str(dtype).removeprefix("torch.")
    if not exponential:
        return f"{name} ends near {near}"
    return f"{name} ends near {near}; `exp` of more than about {math.log(largest):.1f} is inf"


def _forward_infinity(made: Made) -> str:
    op = made.op
    if op in _LOGS:
        return (
            f"`{op}` of 0 is -inf. Give it a safe input where its argument is 0 (the double "
            "`torch.where`: `torch.log(torch.where(p > 0, p, torch.ones_like(p)))`), or clamp "
            "the argument (`p.clamp(min=1e-12)`)."
        )
    half = made.dtype in (torch.float16, torch.bfloat16)
    if op in _EXPONENTIALS:
        wider = " (or compute this step in float32: `x.float()`)" if half else ""
        return (
            f"`{op}` overflowed ({_range(made.dtype)}). Compute in a stable form: subtract "
            "the maximum before `exp`, or use `torch.logsumexp`, `torch.softmax` or "
            f"`torch.log_softmax`{wider}."
        )
    if op in _OVERFLOWS and half:
        return (
            f"`{op}` overflowed ({_range(made.dtype, False)}): its result does not fit, and "
            "an epsilon or a clamp does not change that. Fix: compute "
            "this step in float32 (`a.float() @ b.float()`, then `.half()` if you must); "
            "under `torch.autocast` this op runs in the low precision, so run it with "
            "autocast disabled (`with torch.autocast(device_type, enabled=False):`) on "
            "float32 inputs; or scale its inputs down (normalise them)."
        )
    if op in _OVERFLOWS:
        return (
            f"`{op}` overflowed ({_range(made.dtype, False)}): its result does not fit, and "
            "an epsilon or a clamp does not change that. Fix: scale its "
            "inputs down (normalise them), or compute this step in a wider dtype (float64)."
        )
    if op == "ctc_loss":
        return (
            "`ctc_loss` is inf for a sample whose target cannot be aligned with its input: "
            "it needs at least one time step per target label, plus one more between two "
            "equal labels in a row (an input length too short, or a target too long); the "
            "gradient of that inf loss is NaN. Fix: `F.ctc_loss(..., zero_infinity=True)` "
            "(or `nn.CTCLoss(zero_infinity=True)`), which sets those losses and their "
            "gradients to 0, and check the input and target lengths you pass."
        )
    if op in _DIVISIONS:
        return (
            f"`{op}` divided by zero. Keep the denominator away from zero (an epsilon), or "
            "pick a safe denominator with the double `torch.where`."
        )
    if op in _FILLS:
        return (
            f"`{op}` put the infinity there, as its fill value. Make sure what follows can "
            "take it, or fill with a large finite number instead (`torch.finfo(x.dtype).min`)."
        )
    return f"`{op}` made an infinite value: keep its input in the range where it is finite."


def nan_form(op: str) -> str:
    """How an op makes NaN out of an infinity: ``"0 × ∞"`` for ``mul``, and so on."""
    forms = {"mul": "0 × ∞", "add": "∞ − ∞", "sub": "∞ − ∞", "rsub": "∞ − ∞", "div": "∞ / ∞"}
    op = op.removeprefix("foreach_").removeprefix("i")  # `_foreach_mul_`, `__imul__`
    return forms.get(op, "0 × ∞, ∞ − ∞ or ∞ / ∞")


def _where(line: str) -> str:
    return f" ({line})" if line else ""


# Ops that reduce a row through its maximum: a row of only -inf (a mask that left nothing)
# gives -inf − (−inf) inside them.
_ROW_OPS = ("softmax", "log_softmax", "softmin", "cross_entropy")
EMPTY_ROW_FIX = (
    "Fix: mask so that every row keeps at least one finite entry, or handle the rows with "
    "nothing left apart: fill with a large finite negative number instead of -inf "
    "(`torch.finfo(x.dtype).min`), then set those rows' result yourself."
)


def _from(source: Made | None) -> str:
    if source is None:
        return ""
    return (
        f" (made by `{source.op}`, {source.line})" if source.line else f" (made by `{source.op}`)"
    )


def empty_row_backward(source: Made | None) -> str:
    """Why ``logsumexp``'s backward made NaN: a row of only -inf, and the fix."""
    return (
        f"A row of its input holds only -inf{_from(source)}: that row's logsumexp is -inf in "
        "forward, and its gradient, exp(x − logsumexp(x)) = exp(−inf − (−inf)), is NaN "
        f"whatever gradient arrives (∞ − ∞ is NaN). {EMPTY_ROW_FIX}"
    )


def _empty_row(made: Made) -> bool:
    """Whether ``made`` is a row op's NaN from a -inf only (a row that held nothing else)."""
    return made.op in _ROW_OPS and made.from_op is not None and made.from_op.value == "-inf"


def forward_nan(made: Made) -> str:
    """Why ``made.op`` made a NaN in forward: a clause to follow a colon, then the fix."""
    attention = attention_nan(made)
    if attention is not None:
        return attention
    if _empty_row(made):
        return (
            f"a row of its input holds only -inf{_from(made.from_op)}, and `{made.op}` "
            f"subtracts the row's maximum, −inf − (−inf), which is NaN. {EMPTY_ROW_FIX}"
        )
    if made.from_op is not None:
        source = made.from_op
        return (
            f"it met {source.value}, which started in `{source.op}`{_where(source.line)}, and "
            f"{nan_form(made.op)} is NaN. {_forward_infinity(source)}"
        )
    if made.infinite_argument:
        return (
            f"it met an infinity that fn did not make (an input or a parameter holds inf), and "
            f"{nan_form(made.op)} is NaN. Find where that infinity was made."
        )
    return warned_cause(made, _FORWARD_NAN.get(made.op, _FORWARD_NAN_DEFAULT))


def forward_cause(made: Made) -> str:
    """The cause of a NaN or an infinity that ``made.op`` made in forward, as sentences."""
    if made.kind == "inf":
        return _forward_infinity(made)
    if made.from_op is not None and not _empty_row(made) and attention_nan(made) is None:
        return _forward_infinity(made.from_op)
    text = forward_nan(made)
    return text[:1].upper() + text[1:]


def value_cause(made: Made | None, where_called: bool) -> str:
    """The cause for a backward node that uses a non-finite value of forward: what made it.

    The advice about the branch `torch.where` discards is given only when fn called it.
    """
    if made is None:
        return (
            "fn did not make that value: an input or a parameter already holds it. Find where "
            "it was made."
        )
    cause = forward_cause(made)
    return cause if "double" in cause or not where_called else cause + DISCARDED


def backward_cause(node: str, custom: bool) -> str:
    """The cause for a node that made a NaN or an infinity out of finite values."""
    if custom:
        return CUSTOM
    base = re.sub(r"Backward\d*$", "", node)
    for key, cause in _SINGULAR.items():
        if base == key or (base.startswith(key) and base[len(key) :].isdigit()):
            return cause
    return (
        f"`{node}`'s own derivative is not finite at these inputs (a 0 / 0 or 0 × ∞ inside "
        "it). Look for an input of that line at the edge of the function's domain (a 0, or "
        "±1), and keep it away from there: an epsilon, a clamp, or the double `torch.where`."
    )
