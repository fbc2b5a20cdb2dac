"""Small plots for the notebooks, with matplotlib imported only when one is drawn.

Introduced in ``01_custom_function.ipynb``. Functions return a
:class:`matplotlib.figure.Figure` that pyplot no longer tracks: Jupyter displays it once, as a
cell's value, and no global figure state is left behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_curves"]


def _as_line(name: str, values: object, length: int | None) -> Tensor:
    if not isinstance(values, Tensor):
        raise TypeError(
            f"plot_curves(): {name} must be a torch.Tensor, got {type(values).__name__}"
        )
    if values.is_complex():
        raise TypeError(f"plot_curves(): {name} is complex; plot its .real and .imag as two curves")
    if values.is_meta:
        raise ValueError(f"plot_curves(): {name} is a meta tensor, which has no values to plot")
    if values.dim() != 1:
        raise ValueError(f"plot_curves(): {name} must be 1-D, got shape {tuple(values.shape)}")
    if length is not None and values.numel() != length:
        raise ValueError(f"plot_curves(): {name} has {values.numel()} points, x has {length}")
    return values.detach().to(torch.float64).cpu()


def plot_curves(
    x: Tensor,
    curves: Mapping[str, Tensor],
    *,
    title: str = "",
    xlabel: str = "x",
    ylabel: str = "",
) -> Figure:
    """Plot each 1-D tensor in ``curves`` against ``x``, one labelled line each.

    NaN and inf values leave gaps in a line, which is often the point.

    Args:
        x: 1-D tensor of positions.
        curves: ``{label: values}``, each 1-D with as many points as ``x``.
        title, xlabel, ylabel: text for the figure.

    Example::

        >>> x = torch.linspace(-3, 3, 50)
        >>> plot_curves(x, {"sin": x.sin(), "cos": x.cos()}, title="two waves")
        <Figure size 640x320 with 1 Axes>
    """
    for name, text in {"title": title, "xlabel": xlabel, "ylabel": ylabel}.items():
        if not isinstance(text, str):
            raise TypeError(f"plot_curves(): {name} must be a str, got {type(text).__name__}")
    xs = _as_line("x", x, None)
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("plot_curves(): curves must be a non-empty mapping of label -> tensor")
    lines = {
        str(label): _as_line(f"curves[{label!r}]", v, xs.numel()) for label, v in curves.items()
    }
    import matplotlib.pyplot as plt  # lazy: matplotlib costs ~0.2 s to import

    # A pyplot figure loads the backend, which in Jupyter registers how to display figures;
    # closing it at once means pyplot will not show it a second time at the end of the cell.
    figure = plt.figure(figsize=(6.4, 3.2), layout="constrained")
    plt.close(figure)
    axes = figure.add_subplot()
    for label, values in lines.items():
        axes.plot(xs.numpy(), values.numpy(), label=label)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axes.grid(alpha=0.3)
    axes.legend()
    return figure
