"""The words every judgement behind ``check_function`` shares: :class:`Verdict` and its parts.

Forward's output (:mod:`._forward_output`), what backward returned (:mod:`._returned_gradients`)
and the gradients' values (:mod:`._gradient_match`) are judged apart, each returning a
:class:`Verdict`; the helpers here name a shape, a value's kind and the first NaN or inf the same
way in all of them, and :data:`GRAPH_CUT` is the one explanation of a gradient autograd cannot
reach.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = ["GRAPH_CUT", "MISMATCH", "Verdict", "first_non_finite", "kind_of", "shape_text"]

# Why an output or input that should carry a gradient does not (where autograd lost it).
GRAPH_CUT = "Something cut the graph: `.detach()`, `.item()`, `.numpy()` or `torch.no_grad()`."
# The end of a verdict's title on values that differ from the reference's.
MISMATCH = "does not match the reference."


@dataclass(frozen=True)
class Verdict:
    """What is wrong: a one-sentence ``title`` and lines of ``details``."""

    title: str
    details: tuple[str, ...] = ()


def shape_text(t: Tensor) -> str:
    """``"(3, 4)"``: a tensor's shape as the feedback writes it."""
    return str(tuple(t.shape))


def first_non_finite(t: Tensor, where: Tensor | None = None) -> tuple[str, int] | None:
    """``("nan", 2)``: the first NaN/inf element and its flat index (only where ``where``)."""
    bad = ~t.detach().isfinite()
    if where is not None:
        bad &= where
    if not bool(bad.any()):
        return None
    flat = int(bad.reshape(-1).nonzero()[0, 0])
    value = float(t.detach().reshape(-1)[flat])
    return ("nan" if value != value else "inf"), flat


def kind_of(value: object) -> str:
    """``"list"``, ``"numpy.ndarray"``: a value's type, with its module unless a builtin."""
    module = type(value).__module__
    return f"{module}.{type(value).__name__}" if module != "builtins" else type(value).__name__
