"""autograd_helpers.plot: figures without pyplot state, bad input named."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch

from autograd_helpers.plot import plot_curves

matplotlib.use("Agg")


def test_one_line_per_curve_with_labels_and_gaps_for_nan():
    x = torch.linspace(0, 1, 5)
    figure = plot_curves(x, {"a": x, "b": torch.tensor([1.0, float("nan"), 1, 1, 1])}, title="t")
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == ["a", "b"]
    y = axes.get_lines()[1].get_ydata()
    assert math.isnan(y[1]) and not any(math.isnan(v) for v in y[[0, 2, 3, 4]])  # a gap at 1
    assert axes.get_title() == "t"
    assert repr(figure) == "<Figure size 640x320 with 1 Axes>"
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []  # nothing registered with pyplot


@pytest.mark.parametrize(
    ("x", "curves", "error", "phrase"),
    [
        ([1, 2], {"a": torch.ones(2)}, TypeError, "x must be a torch.Tensor"),
        (torch.ones(2, 2), {"a": torch.ones(2)}, ValueError, "x must be 1-D"),
        (torch.ones(2), {}, ValueError, "curves must be a non-empty mapping"),
        (torch.ones(2), {"a": torch.ones(3)}, ValueError, "curves\\['a'\\] has 3 points"),
        (torch.ones(2), {"a": [1, 2]}, TypeError, "curves\\['a'\\] must be a torch.Tensor"),
        (
            torch.ones(2),
            {"a": torch.ones(2, dtype=torch.complex64)},
            TypeError,
            "curves\\['a'\\] is complex; plot its .real and .imag",
        ),
        (torch.ones(2, device="meta"), {"a": torch.ones(2)}, ValueError, "x is a meta tensor"),
    ],
)
def test_bad_arguments(x, curves, error, phrase):
    with pytest.raises(error, match=phrase):
        plot_curves(x, curves)


def test_log_axes_and_markers():
    x = torch.tensor([1.0, 10.0, 100.0])
    figure = plot_curves(x, {"a": x}, xscale="log", yscale="log", marker="o")
    (axes,) = figure.axes
    assert (axes.get_xscale(), axes.get_yscale()) == ("log", "log")
    assert axes.get_lines()[0].get_marker() == "o"
    with pytest.raises(ValueError, match="yscale must be one of"):
        plot_curves(x, {"a": x}, yscale="logarithmic")


def test_heatmaps_one_panel_and_colour_bar_each_centred_on_zero():
    from autograd_helpers.plot import plot_heatmaps

    figure = plot_heatmaps({"J": torch.tensor([[1.0, -3.0], [0.5, 2.0]]), "row": torch.ones(3)})
    panels = [a for a in figure.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["J", "row"]
    assert panels[0].get_images()[0].get_clim() == (-3.0, 3.0)
    assert panels[1].get_images()[0].get_array().shape == (1, 3)
    assert len(figure.axes) == 4  # two panels, two colour bars


@pytest.mark.parametrize(
    ("matrices", "kwargs", "error", "phrase"),
    [
        ({}, {}, ValueError, "non-empty mapping"),
        ({"a": [[1.0]]}, {}, TypeError, "must be a torch.Tensor"),
        ({"a": torch.ones(2, 2, 2)}, {}, ValueError, "1-D or 2-D"),
        ({"a": torch.ones(2, dtype=torch.complex64)}, {}, ValueError, "real"),
        ({"a": torch.ones(2)}, {"centred": 1}, TypeError, "centred must be a bool"),
    ],
)
def test_heatmaps_refuse_bad_arguments(matrices, kwargs, error, phrase):
    from autograd_helpers.plot import plot_heatmaps

    with pytest.raises(error, match=phrase):
        plot_heatmaps(matrices, **kwargs)
