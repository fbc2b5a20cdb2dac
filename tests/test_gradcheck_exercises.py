"""Chapter 03's checkers: gradcheck settings that mean something, and double backward."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

from autograd_helpers.checks import check_double_backward, check_gradcheck_settings


def shifted(t):
    return 500 + 0.05 * torch.sin(3 * t)


POINTS = torch.linspace(-2, 2, 7)


@pytest.mark.parametrize(
    ("dtype", "eps"), [(torch.float64, 1e-6), (torch.float64, 1e-3), (torch.float64, 1e-8)]
)
def test_meaningful_settings_pass(dtype, eps):
    result = check_gradcheck_settings(dtype, eps, fn=shifted, x=POINTS)
    assert result.passed, result.message


@pytest.mark.parametrize(
    ("dtype", "eps", "phrases"),
    [
        (torch.float32, 1e-3, ["right derivative fails", "No eps from 1e-1 to 1e-10 works"]),
        (torch.float32, 1e-6, ["No eps from 1e-1 to 1e-10 works in float32", "float64"]),
        (torch.float64, 1e-1, ["Truncation error dominates", "use a smaller eps"]),
        (torch.float64, 1e-10, ["Rounding error dominates", "use a larger eps"]),
        (..., 1e-6, ["not implemented yet"]),
        (torch.int64, 1e-6, ["floating-point torch dtype"]),
        (torch.float64, 0, ["eps must be a number between 0 and 1"]),
        (torch.float64, "1e-6", ["eps must be a number"]),
    ],
)
def test_settings_that_mean_nothing_are_explained(dtype, eps, phrases):
    result = check_gradcheck_settings(dtype, eps, fn=shifted, x=POINTS)
    assert not result.passed
    for phrase in phrases:
        assert phrase in result.message, result.message


def test_a_check_too_loose_to_see_a_one_percent_bug_is_said_to_be_so():
    def tiny(t):  # derivatives of 1e-6: 1% of them is far below atol
        return 1e-6 * torch.sin(t)

    result = check_gradcheck_settings(torch.float64, 1e-6, fn=tiny, x=POINTS)
    assert "a derivative 1% off passes too" in result.message


def softsign_with(save, backward):
    class Softsign(Function):
        @staticmethod
        def forward(ctx, x):
            y = x / (1 + x.abs())
            ctx.save_for_backward(save(x, y))
            return y

    Softsign.backward = staticmethod(backward)
    return Softsign


X = torch.linspace(-2.1, 1.9, 6)
REFERENCE = lambda t: t / (1 + t.abs())  # noqa: E731


@pytest.mark.parametrize(
    "function",
    [
        softsign_with(lambda x, y: x, lambda ctx, g: g / (1 + ctx.saved_tensors[0].abs()) ** 2),
        softsign_with(lambda x, y: y, lambda ctx, g: g * (1 - ctx.saved_tensors[0].abs()) ** 2),
    ],
    ids=["saves-input", "saves-output"],
)
def test_a_backward_built_from_inputs_or_outputs_passes_double_backward(function):
    result = check_double_backward(function, X, reference=REFERENCE)
    assert result.passed, result.message


def test_a_saved_intermediate_is_named():
    saving_denominator = softsign_with(
        lambda x, y: 1 + x.abs(), lambda ctx, g: g / ctx.saved_tensors[0] ** 2
    )
    result = check_double_backward(saving_denominator, X, reference=REFERENCE)
    assert not result.passed
    assert "the first derivative is right" in result.message
    assert "neither an input nor the output (`saved_tensors[0]`)" in result.message


def test_a_numpy_backward_is_reported():
    import numpy as np

    numpy_backward = softsign_with(
        lambda x, y: x,
        lambda ctx, g: (
            g * torch.from_numpy(1 / (1 + np.abs(ctx.saved_tensors[0].detach().numpy())) ** 2)
        ),
    )
    result = check_double_backward(numpy_backward, X, reference=REFERENCE)
    assert not result.passed and "gradgradcheck fails" in result.message


def test_a_wrong_first_derivative_is_judged_first():
    wrong = softsign_with(lambda x, y: x, lambda ctx, g: g / (1 + ctx.saved_tensors[0].abs()))
    result = check_double_backward(wrong, X, reference=REFERENCE)
    assert "is off compared with" in result.message


def test_the_notebooks_mistakes_raise():
    with pytest.raises(TypeError, match="fn must be callable"):
        check_gradcheck_settings(torch.float64, 1e-6, fn=3, x=POINTS)
    with pytest.raises(ValueError, match="one example input"):
        check_double_backward(softsign_with(lambda x, y: x, lambda ctx, g: g), X, X)


def test_eps_as_a_tensor_or_numpy_number_is_read_as_a_number():
    import numpy as np

    assert check_gradcheck_settings(torch.float64, torch.tensor(1e-6), fn=shifted, x=POINTS).passed
    assert check_gradcheck_settings(torch.float64, np.float32(1e-6), fn=shifted, x=POINTS).passed
    result = check_gradcheck_settings(torch.float64, torch.tensor(2.0), fn=shifted, x=POINTS)
    assert "eps must be a number between 0 and 1, got 2" in result.message


def test_float32_where_no_eps_works_says_so_first():
    result = check_gradcheck_settings(torch.float32, 1e-4, fn=shifted, x=POINTS)
    assert "No eps from 1e-1 to 1e-10 works in float32" in result.message
    assert "Rounding error dominates" not in result.message


@pytest.mark.parametrize(
    ("backward", "phrase"),
    [
        (
            lambda ctx, g: g / (1 + ctx.saved_tensors[0].detach().abs()) ** 2,
            "computed its result outside autograd's view",
        ),
        (
            lambda ctx, g: (
                g * torch.from_numpy((1 / (1 + ctx.saved_tensors[0].abs()) ** 2).numpy())
            ),
            "autograd raised while differentiating it",
        ),
    ],
    ids=["detached", "numpy-without-detach"],
)
def test_a_backward_autograd_cannot_see_into_is_named(backward, phrase):
    result = check_double_backward(softsign_with(lambda x, y: x, backward), X, reference=REFERENCE)
    assert not result.passed and phrase in result.message, result.message
    assert "zero everywhere" not in result.message


def test_once_differentiable_is_named():
    from torch.autograd.function import once_differentiable

    @once_differentiable
    def backward(ctx, g):
        return g / (1 + ctx.saved_tensors[0].abs()) ** 2

    result = check_double_backward(softsign_with(lambda x, y: x, backward), X, reference=REFERENCE)
    assert "`@once_differentiable` makes backward a dead end" in result.message or (
        "raised while differentiating" in result.message
    ), result.message


def test_the_first_checks_notes_are_kept_on_a_pass():
    class StoresX(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            return g / (1 + ctx.x.abs()) ** 2

    result = check_double_backward(StoresX, X, reference=REFERENCE)
    assert result.passed and "Note: forward stored a tensor as `ctx.x`" in result.message


def test_float32_where_some_eps_works_gets_the_direction_and_float64():
    result = check_gradcheck_settings(torch.float32, 1e-6, fn=torch.sin, x=POINTS)
    assert not result.passed
    assert "Rounding error dominates" in result.message and "use a larger eps" in result.message
    assert "In float64 the same eps works" in result.message
