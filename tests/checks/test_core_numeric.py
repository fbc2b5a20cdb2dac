"""autograd_helpers.checks._core.numeric: finite differences agree with autograd."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.checks._core.numeric import (
    finite_difference_vjp,
    format_number,
    located,
    worst_mismatch,
)


def test_finite_differences_match_autograd_for_a_multi_input_multi_output_function():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)

    def f(x, w, scale):
        return (x * w).sin() * scale, (x @ w).exp()

    outputs = f(x, w, 2.0)
    vs = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outputs]
    expected = torch.autograd.grad(outputs, [x, w], vs)
    estimate = finite_difference_vjp(f, [x, w, 2.0], vs, [0, 1], eps=1e-6)
    for got, want in zip(estimate, expected, strict=True):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-7, rtol=1e-6)
    assert x.grad is None  # inputs untouched, nothing accumulated


def test_finite_differences_work_on_non_contiguous_inputs():
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3).T  # a transposed view
    (estimate,) = finite_difference_vjp(lambda t: t**2, [x], [torch.ones(3, 2)], [0], eps=1e-6)
    torch.testing.assert_close(estimate, 2 * x)


def test_worst_mismatch_reports_the_worst_element_with_its_index():
    expected = torch.zeros(2, 3)
    got = expected.clone()
    got[0, 1], got[1, 2] = 0.1, 5.0
    mismatch = worst_mismatch(got, expected, atol=1e-3, rtol=0)
    assert mismatch is not None
    assert (mismatch.index, mismatch.got, mismatch.count, mismatch.numel) == ("[1, 2]", 5.0, 2, 6)
    text = mismatch.describe("g", "yours", "expected")
    assert (
        text == "worst element `g[1, 2]`: yours 5, expected 0 (off by 5) (2 of 6 elements are off)"
    )


def test_worst_mismatch_treats_nan_as_worst_and_matching_nan_or_inf_as_equal():
    assert (
        worst_mismatch(
            torch.tensor([float("nan"), float("inf")]),
            torch.tensor([float("nan"), float("inf")]),
            atol=0,
            rtol=0,
        )
        is None
    )
    mismatch = worst_mismatch(torch.tensor([9.0, float("nan")]), torch.zeros(2), atol=0, rtol=0)
    assert mismatch is not None and mismatch.index == "[1]"
    assert worst_mismatch(torch.ones(3), torch.ones(3) + 1e-9, atol=1e-8, rtol=0) is None


def test_a_scalar_mismatch_has_no_index():
    mismatch = worst_mismatch(torch.tensor(1.0), torch.tensor(2.0), atol=0, rtol=0)
    assert mismatch is not None
    assert mismatch.describe("", "yours", "expected") == "the value: yours 1, expected 2 (off by 1)"


@pytest.mark.parametrize(
    ("value", "text"), [(-0.0, "0"), (1 / 3, "0.3333"), (123456.0, "1.235e+05"), (2.0, "2")]
)
def test_format_number(value, text):
    assert format_number(value) == text


@pytest.mark.parametrize(
    ("inputs", "eps", "error", "phrase"),
    [
        ([torch.arange(3)], 1e-6, TypeError, "input 0 must be a floating-point tensor"),
        ([3.0], 1e-6, TypeError, "input 0 must be a floating-point tensor"),
        ([torch.ones(3)], 0.0, ValueError, "eps must be a positive number"),
    ],
)
def test_finite_differences_refuse_what_cannot_be_stepped(inputs, eps, error, phrase):
    with pytest.raises(error, match=phrase):
        finite_difference_vjp(lambda x: x * 2, inputs, [torch.ones(3)], [0], eps=eps)


def test_a_place_is_told_by_the_inputs_values_there_not_a_flat_index():
    x = torch.tensor([[1.0, -2.0, 0.0], [3.0, 4.0, 5.0]])
    assert located(2, x.shape, [("x", x)]) == "at `x` = 0 (element [0, 2])"
    assert located(4, x.shape, [("x", x), ("w", torch.ones(3))]) == "at `x` = 4 (element [1, 1])"
    assert located(1, torch.Size([3]), [("x", x)]) == "at element [1]"  # no input of that shape
    assert located(0, torch.Size([]), []) == ""
