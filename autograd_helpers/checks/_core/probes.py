"""Inputs beyond the example: the edges of a function's domain, in float64 and float32.

Used by ``check_function(..., probes=...)``. An example input is one point; a mistake that
shows only at 0 (``x**3 / x``), at a rounding tie (``floor(x + 0.5)``), where float32's
``exp`` overflows (``tanh`` written with ``exp``) or at a tiny value (``x + 1e-8`` before a
formula) passes it. The probes are run as further examples (every check, in float64), and
then once more in float32, the dtype learners compute in, where only what is not finite,
or off by more than float32's rounding, counts against the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from autograd_helpers.checks._core.numeric import format_number

__all__ = [
    "EDGE_VALUES",
    "FLOAT32_ATOL",
    "FLOAT32_RTOL",
    "also_note",
    "edge_probes",
    "probe_note",
]

# 0 and its tiny neighbours (down to where float32's squares underflow, and below its
# normal range); small values where a constant added to a formula shows (1e-5, 1e-4);
# rounding ties and values near them; where float32's exp overflows (about 88.72); large
# values of both signs, where float64's exp overflows too (-1000).
EDGE_VALUES = (
    0.0, 1e-30, -1e-30, 2e-30, 1e-25, 1e-20, -1e-20, 1e-8, -1e-8, 1e-5, -1e-5, 1e-4,
    0.25, 0.3, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, -3.0, 20.0, -20.0,
    88.5, 89.0, -89.0, 100.0, -100.0, 300.0, -1000.0,
)  # fmt: skip

# float32's rounding, with room for a few operations: the float32 run
# (:mod:`autograd_helpers.checks.function._float32`) is compared with the reference's float64
# values.
FLOAT32_RTOL, FLOAT32_ATOL = 1e-3, 1e-5


def edge_probes() -> list[tuple[Tensor]]:
    """The edge values as a row; the range in between as a 3 × 7 matrix; a 0-d scalar.

    Example::

        >>> [tuple(x.shape) for (x,) in edge_probes()]
        [(32,), (3, 7), ()]
    """
    row = torch.tensor(EDGE_VALUES, dtype=torch.float64)
    # The range in between, in a shape that is not a row and is odd in both sizes; five of
    # its values lie 1e-8 beyond a rounding tie (0.50000001), where rounding is right in
    # float64 only: float32 holds 0.5 there, and a round done in float32 goes the other way.
    matrix = torch.linspace(-11.5 + 1e-8, 12.5 + 1e-8, 21, dtype=torch.float64).reshape(3, 7)
    return [(row,), (matrix,), (torch.tensor(-0.3, dtype=torch.float64),)]


def also_note(
    inputs: Sequence[object], names: Sequence[str], first: Sequence[object], raised: bool
) -> str:
    """The detail a failure on an example of ``also=`` gets: which one, and, when the code
    raised there after passing on the first example of other shapes, the likely cause."""
    shown = probe_note(inputs, names, first).split(": ", 1)[-1]
    note = f"This is another example (`also=`), after the first passed: {shown}"
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in inputs]
    if raised and shapes != [tuple(x.shape) if isinstance(x, Tensor) else None for x in first]:
        note += (
            " Its shapes differ from the first example's: a size written into the code "
            "(`torch.eye(4)`, `range(3)`) fits one example only; take sizes from the "
            "tensors (`y.numel()`, `x.shape[0]`)."
        )
    return note


def probe_note(
    inputs: Sequence[object], names: Sequence[str], example: Sequence[object] | None = None
) -> str:
    """The detail a failure on a probe gets: which input, shown whole when it is short.

    ``example``: the example's inputs, for a probe the notebook gave (not the edges): the
    probe is said to be "with other shapes" when its shapes differ.
    """
    shown = []
    for name, x in zip(names, inputs, strict=False):
        if isinstance(x, Tensor) and x.numel() <= len(EDGE_VALUES):
            values = ", ".join(format_number(float(v)) for v in x.detach().reshape(-1))
            shown.append(f"`{name}` = [{values}] (shape {tuple(x.shape)})")
        elif isinstance(x, Tensor):
            shown.append(f"`{name}` of shape {tuple(x.shape)}")
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in inputs]
    where = (
        "at the edges of the domain"
        if example is None
        else "with other shapes"
        if shapes != [tuple(x.shape) if isinstance(x, Tensor) else None for x in example]
        else "at other values"
    )
    return f"This is one of the checker's probes beyond your example, {where}: " + (
        "; ".join(shown) + "."
    )
