"""autograd_helpers.widgets.tangent_explorer: autograd's slope, live, and never a crash."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.widgets import tangent_explorer


def cubic(x):
    return x**3 + 2 * x


def test_readout_and_plot_follow_the_slider():
    explorer = tangent_explorer(cubic, label="x³ + 2x")
    slider, readout, image = explorer.children
    assert "f'(x) = 5</code>" in readout.value  # 3·1² + 2
    assert image.value[:8] == b"\x89PNG\r\n\x1a\n"
    first_image = image.value
    slider.value = 0.0
    assert "f'(x) = 2</code>" in readout.value and "x = 0.00" in readout.value
    assert image.value != first_image
    assert repr(explorer) == "TangentExplorer(x³ + 2x, x=0)"


def test_an_exception_in_fn_is_shown_not_raised():
    def broken(x):
        if x.requires_grad and x > 0.5:  # fails at the slider's point, not on the plot's grid
            raise ValueError("too big")
        return x * 2

    explorer = tangent_explorer(broken, value=0.0)
    slider, readout, _ = explorer.children
    assert "f'(x) = 2" in readout.value
    slider.value = 1.0
    assert "fn raised ValueError" in readout.value and "too big" in readout.value


def test_a_vector_valued_fn_is_explained_in_the_readout():
    explorer = tangent_explorer(lambda x: torch.stack([x, 2 * x]))
    readout = explorer.children[1].value
    assert "fn raised ValueError" in readout and "returned shape (2,)" in readout


@pytest.mark.parametrize(
    ("kwargs", "error", "phrase"),
    [
        ({"fn": 3}, TypeError, "fn must be callable"),
        ({"x_range": [0, 1]}, TypeError, "x_range must be a \\(low, high\\) tuple"),
        ({"x_range": (1.0, 0.0)}, ValueError, "low < high"),
        ({"x_range": (0.0, float("inf"))}, ValueError, "finite"),
        ({"value": 5.0}, ValueError, "value must be a number in"),
        ({"step": 0}, ValueError, "step must be in"),
        ({"label": 1}, TypeError, "label must be a str"),
    ],
)
def test_bad_arguments(kwargs, error, phrase):
    arguments = {"fn": cubic, **kwargs}
    with pytest.raises(error, match=phrase):
        tangent_explorer(**arguments)


# --- the gradcheck explorer --------------------------------------------------------------------


def test_the_gradcheck_explorer_follows_its_three_controls():
    from autograd_helpers.widgets import gradcheck_explorer

    explorer = gradcheck_explorer("sigmoid", dtype="float64", eps=1e-6)
    choice, precision, step, readout, image = explorer.children
    assert "passes" in readout.value and repr(explorer) == (
        "GradcheckExplorer(sigmoid, float64, eps=1e-06)"
    )
    first = image.value
    choice.value = "sigmoid with a wrong backward"
    assert "fails" in readout.value and image.value != first
    choice.value, precision.value, step.value = "sigmoid", "float32", 1e-7
    assert "fails" in readout.value and "float32, eps = 1e-07" in readout.value


def test_in_float64_only_the_broken_function_and_the_kink_fail():
    from autograd_helpers.finite_differences import compare_derivatives
    from autograd_helpers.widgets import EXPLORER_FUNCTIONS
    from autograd_helpers.widgets._gradcheck import POINTS

    verdicts = {
        name: compare_derivatives(fn, POINTS, dtype=torch.float64, eps=1e-6).passes
        for name, fn in EXPLORER_FUNCTIONS.items()
    }
    failing = {"sigmoid with a wrong backward", "relu (a kink at 0)"}  # 0 is on the grid
    assert verdicts == {name: name not in failing for name in verdicts}


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        ({"function": "cos"}, "function must be one of"),
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"eps": 1.0}, "eps must be a number from 1e-12 to 1e-1"),
    ],
)
def test_the_gradcheck_explorer_refuses_bad_arguments(kwargs, phrase):
    from autograd_helpers.widgets import gradcheck_explorer

    with pytest.raises(ValueError, match=phrase):
        gradcheck_explorer(**kwargs)
