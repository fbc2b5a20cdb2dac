"""explain_gradcheck: the same verdict as gradcheck, and words for where it goes wrong."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from torch.autograd import Function, gradcheck

from autograd_helpers.checks import GradcheckReport, explain_gradcheck

matplotlib.use("Agg")
DOUBLE = torch.float64


def _x(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=DOUBLE).requires_grad_()


def sigmoid_with(backward):
    class Sigmoid(Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.sigmoid(x)
            ctx.save_for_backward(y)
            return y

    Sigmoid.backward = staticmethod(backward)
    return Sigmoid


RIGHT = sigmoid_with(lambda ctx, g: g * ctx.saved_tensors[0] * (1 - ctx.saved_tensors[0]))
TWICE = sigmoid_with(lambda ctx, g: 2 * g * ctx.saved_tensors[0] * (1 - ctx.saved_tensors[0]))
NEGATED = sigmoid_with(lambda ctx, g: -g * ctx.saved_tensors[0] * (1 - ctx.saved_tensors[0]))
WRONG_SHAPE = sigmoid_with(lambda ctx, g: (g * ctx.saved_tensors[0]).sum())


class ScaleAndShift(Function):
    """a * x + b: the gradient for b is right, the one for a is wrong (x where g * x belongs)."""

    @staticmethod
    def forward(ctx, a, x, b):
        ctx.save_for_backward(a, x)
        return a * x + b

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        return x, g * a, g  # the first should be g * x


def test_a_correct_function_passes_like_gradcheck():
    x = _x(5)
    report = explain_gradcheck(RIGHT.apply, x)
    assert isinstance(report, GradcheckReport) and report.passed, report.message
    assert gradcheck(RIGHT.apply, (x,))
    assert "Sigmoid passes gradcheck: all 25 Jacobian entries agree" in report.message
    torch.testing.assert_close(report.numerical[0], report.analytical[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    ("function", "phrases"),
    [
        (TWICE, ["5 of 25 Jacobian entries", "your gradient is 2 times the right one"]),
        (NEGATED, ["the sign is flipped"]),
    ],
    ids=["scale", "sign"],
)
def test_a_wrong_backward_fails_with_the_worst_entries_and_a_hint(function, phrases):
    x = _x(5)
    report = explain_gradcheck(function.apply, x)
    assert not report.passed
    assert not gradcheck(function.apply, (x,), raise_exception=False)  # the same verdict
    assert "output [" in report.message and "input `x[" in report.message
    for phrase in phrases:
        assert phrase in report.message, report.message


def test_a_gradient_of_the_wrong_shape_is_reported_not_raised():
    report = explain_gradcheck(WRONG_SHAPE.apply, _x(5))
    assert not report.passed and "raised an exception" in report.message
    assert "invalid gradient" in report.message


def test_one_wrong_input_of_several_is_named():
    a, x, b = _x(3), _x(3, seed=1), _x(3, seed=2)
    report = explain_gradcheck(ScaleAndShift.apply, a, x, b)
    assert not report.passed
    assert "input `a[" in report.message
    assert "input `x[" not in report.message and "input `b[" not in report.message
    assert report.names == ("a", "x", "b") and len(report.numerical) == 3


def test_only_inputs_that_require_grad_are_checked():
    a, x, b = _x(3), _x(3, seed=1).detach(), _x(3, seed=2)
    report = explain_gradcheck(lambda a, x, b: a * x + b, a, x, b)
    assert report.passed and report.names == ("a", "b")


def test_float32_is_flagged():
    x = _x(4).detach().float().requires_grad_()
    report = explain_gradcheck(torch.sigmoid, x)
    assert "is torch.float32, not float64" in report.message


def test_the_plot_has_three_panels():
    report = explain_gradcheck(TWICE.apply, _x(4))
    figure = report.plot()
    titles = [a.get_title() for a in figure.axes if a.get_title()]
    assert titles == ["numerical", "analytical (backward)", "analytical − numerical"]
    with pytest.raises(ValueError, match=r"input must be an int in 0\.\.0"):
        report.plot(1)


def test_an_exception_in_forward_is_reported_with_the_learners_line():
    def broken(x):
        return x @ torch.ones(2, dtype=DOUBLE)

    report = explain_gradcheck(broken, _x(3))
    assert report.status == "failed" and "RuntimeError" in report.message
    assert "return x @ torch.ones(2" in report.message


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: explain_gradcheck("f", _x(2)), TypeError, "fn must be callable"),
        (lambda: explain_gradcheck(torch.sin, _x(2).detach()), ValueError, "no input requires"),
        (lambda: explain_gradcheck(torch.sin, _x(2), eps=0), ValueError, "eps"),
        (lambda: explain_gradcheck(torch.sin, _x(2), atol=-1), ValueError, "atol"),
    ],
)
def test_bad_arguments_are_named(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def test_a_function_that_leaves_a_global_setting_changed_is_told_so():
    import torch
    from torch.autograd import Function

    from autograd_helpers.checks import explain_gradcheck

    class SetsDtype(Function):
        @staticmethod
        def forward(ctx, x):
            torch.set_default_dtype(torch.float64)
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    report = explain_gradcheck(SetsDtype.apply, x)
    assert report.status == "failed" and "default dtype" in report.message
    assert torch.get_default_dtype() == torch.float32


def test_explain_is_importable_where_notebooks_and_chapter_03_import_it():
    from autograd_helpers.checks import explain as alias
    from autograd_helpers.checks import gradcheck
    from autograd_helpers.checks.gradcheck import explain

    for module in (alias, gradcheck):
        assert module.explain_gradcheck is explain.explain_gradcheck is explain_gradcheck
        assert module.GradcheckReport is explain.GradcheckReport is GradcheckReport
