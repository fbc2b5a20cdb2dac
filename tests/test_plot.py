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
