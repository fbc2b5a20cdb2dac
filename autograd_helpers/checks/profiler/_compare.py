"""``check_regions``, part 1c: how the gradients a learner's step used compare with the
specified ones: the gap between them, a constant factor (a loss scaled), a clip."""

from __future__ import annotations

import math

from torch import Tensor

__all__ = ["RELATIVE_TOLERANCE", "clipped", "gap", "scale_of"]

RELATIVE_TOLERANCE = 1e-3  # float32 sums in another order differ by ~1e-6 of the norm


def gap(got: list[Tensor], want: list[Tensor]) -> float:
    """``|got - want| / |want|`` over all the tensors together."""
    difference = math.sqrt(
        sum(float((g - w).double().square().sum()) for g, w in zip(got, want, strict=True))
    )
    size = math.sqrt(sum(float(w.double().square().sum()) for w in want))
    return difference / max(size, 1e-12)


def scale_of(got: list[Tensor], want: list[Tensor]) -> float | None:
    """``c`` if ``got`` is ``c`` times ``want`` (a loss scaled: summed, halved...), else None."""
    dot = sum(float((g.double() * w.double()).sum()) for g, w in zip(got, want, strict=True))
    norm = sum(float(w.double().square().sum()) for w in want)
    c = dot / max(norm, 1e-30)
    return c if abs(c) > 1e-6 and gap(got, [c * w for w in want]) <= RELATIVE_TOLERANCE else None


def _is_round(value: float) -> bool:
    """A number a learner writes (0.1, 1.0, 5, 0.25): two significant digits at most."""
    return value > 0 and math.isclose(value, float(f"{value:.2g}"), rel_tol=1e-4)


def clipped(got: list[Tensor], want: list[Tensor]) -> str | None:
    """How the gradients ``got`` are the specified ``want`` clipped, if they are: scaled
    down to a round total norm (``clip_grad_norm_``), or capped at a round value
    (``clip_grad_value_``); else ``None``."""
    cap = max(float(g.abs().max()) for g in got if g.numel())
    largest = max(float(w.abs().max()) for w in want if w.numel())
    capped = [w.clamp(-cap, cap) for w in want]
    if _is_round(cap) and largest > cap and gap(got, capped) <= RELATIVE_TOLERANCE:
        return f"each value capped at ±{cap:.2g} (`torch.nn.utils.clip_grad_value_`)"
    scale = scale_of(got, want)
    norm = math.sqrt(sum(float(g.double().square().sum()) for g in got))
    if scale is not None and 0 < scale < 1 and _is_round(norm):
        return (
            f"{scale:.4g} times the specified loss's, scaled to a total norm of {norm:.2g} "
            "(`torch.nn.utils.clip_grad_norm_`)"
        )
    return None
