"""Interactive widgets for the notebooks; ipywidgets and matplotlib load only when one is built.

- :func:`tangent_explorer` (``00_start_here.ipynb``): a slider, and autograd's slope drawn as
  a tangent;
- :func:`gradcheck_explorer` (``03_gradcheck.ipynb``): autograd's derivative against a
  central difference, for a choice of function, dtype and eps.

Widgets here show their result in ``HTML`` and ``Image`` children rather than an ``Output``
widget: no display messages are sent, so the recorded notebook and a test run of it print
exactly the same thing.
"""

from __future__ import annotations

from autograd_helpers.widgets._gradcheck import (
    EXPLORER_FUNCTIONS,
    SigmoidWithWrongBackward,
    gradcheck_explorer,
)
from autograd_helpers.widgets._tangent import tangent_explorer

__all__ = [
    "EXPLORER_FUNCTIONS",
    "SigmoidWithWrongBackward",
    "gradcheck_explorer",
    "tangent_explorer",
]
