"""What a Hessian-vector product must not do, as checks of chapter 02's exercise 3.

Used by :mod:`._hvp`'s table: no Hessian-sized tensor computed
(the rows batched passes compute, summed over calls: :func:`formed_hessian`; a tensor of
``n × n`` numbers that is not the Hessian, such as ``torch.outer(g, v)``, passes with a note:
:func:`large_intermediate`), no more backward passes than H v needs, and a derivative taken,
except for the exact ``H · 0 = 0`` of a special case for ``v = 0``, which passes with a
note (:func:`zero_shortcut`) while a special case for a small nonzero ``v`` fails.
"""

from __future__ import annotations

from torch import Tensor

from autograd_helpers.checks._contain.watch import Usage
from autograd_helpers.checks._core.problems import Check, Finding, Run
from autograd_helpers.checks.jacobians._checks import FORWARD_MODE, no_derivative

__all__ = [
    "MAX_BACKWARD_PASSES",
    "formed_hessian",
    "hessian_sized",
    "large_intermediate",
    "needs_a_derivative",
    "too_many_passes",
    "zero_shortcut",
]

MAX_BACKWARD_PASSES = 3


def hessian_sized(usage: Usage, n: int) -> tuple[int, tuple[int, ...]]:
    """``(elements, shape)`` of the largest Hessian-sized tensor the code computed, or
    ``(0, ())``.

    Hessian-sized: ``n × n`` numbers, or a whole number of times that (a batch of rows
    that adds up to H). What a function carries along does not count: its data (a
    ``(6, 4)`` feature matrix, even a captured ``n × n`` matrix) copied by a trace or
    ``.to(dtype)`` is not computed, and a tensor of another size is no Hessian.
    """
    sized = [(size, shape) for shape, size in usage.computed.items() if size % (n * n) == 0]
    return max(sized, default=(0, ()))


def formed_hessian(run: Run) -> Finding | None:
    """Batched passes computed as many rows as the Hessian has (where the solution computes
    none): ``vmap`` of a pullback, ``is_grads_batched``, a ``vmap``-ed ``jvp``, each batch's
    rows of ``n`` numbers summed over the calls (two half batches are the whole H)."""
    n = run.problem.size
    rows = run.usage.batched_rows
    if n < 3 or run.problem.honest_size or rows < n:
        return None
    return Finding(
        f"on {run.problem.description} its batched passes compute {rows} rows of {n} numbers "
        f"({rows * n} in all): as many as the Hessian, {n} × {n}, has.",
        (
            "Each row of a batched pass (`vmap` of a pullback, `is_grads_batched=True`) is a "
            "row of H, however the batch is cut. The point of H v is never to form H: for a "
            "million weights it would have 10^12 entries. Differentiate the scalar "
            "`(g * v).sum()` instead, one backward pass.",
        ),
    )


def large_intermediate(run: Run) -> Finding | None:
    """Note: a tensor of ``n × n`` numbers along the way, not the Hessian (no rows of it)."""
    n = run.problem.size
    largest, shape = hessian_sized(run.usage, n)
    if n < 3 or run.problem.honest_size or not largest or run.usage.batched_rows >= n:
        return None
    return Finding(
        f"Note: on {run.problem.description} it computes a tensor of {largest} numbers (shape "
        f"{shape}) along the way: not the Hessian, and the result is right, but as large as "
        f"the Hessian ({n} × {n}), which for a million weights is 10^12 numbers. "
        "`(g * v).sum()` is the same scalar from n numbers."
    )


def too_many_passes(run: Run) -> Finding | None:
    """More backward passes than H v needs (a pass per entry builds H a row at a time)."""
    passes = run.usage.backward_passes
    if passes <= MAX_BACKWARD_PASSES:
        return None
    return Finding(
        f"on {run.problem.description} it ran {passes} backward passes; "
        f"{MAX_BACKWARD_PASSES} are enough.",
        (
            "H v needs two backward passes: one for g (with `create_graph=True`), one for "
            "g · v. A pass per entry of x builds the whole Hessian a row at a time, which is "
            "what the exercise avoids.",
        ),
    )


def _zero_shortcut(run: Run) -> bool:
    """No derivative taken, where v is exactly 0 and the result exactly 0: ``H · 0 = 0``."""
    (v,) = run.problem.extra
    value = run.value
    return (
        not bool(v.any())
        and isinstance(value, Tensor)
        and value.shape == run.problem.x.shape
        and not bool(value.detach().any())
        and not run.usage.backward_passes
        and run.usage.took(FORWARD_MODE) is None
    )


def needs_a_derivative(why: str) -> Check:
    """:func:`no_derivative`, except for the exact ``H · 0 = 0`` (a note says it)."""
    underived = no_derivative(why)

    def check(run: Run) -> Finding | None:
        if _zero_shortcut(run):
            return None
        finding = underived(run)
        value = run.value
        if finding and isinstance(value, Tensor) and not bool(value.detach().any()):
            return Finding(
                f"on {run.problem.description} it returns zeros without a backward pass, "
                "but v is not 0 there, and neither is H v.",
                ("Hint: a special case for a small v is wrong: H v is linear in v. " + why,),
            )
        return finding

    return check


def zero_shortcut(run: Run) -> Finding | None:
    """Note: ``v = 0`` special-cased; right, and not needed (every other probe judged it)."""
    if not _zero_shortcut(run):
        return None
    return Finding(
        "Note: for v = 0 it returns zeros without a backward pass: right, H · 0 = 0, but the "
        "special case is not needed (H v is linear in v, and the general code returns 0 "
        "too); every probe with a nonzero v, a tiny one among them, ran the general code."
    )
