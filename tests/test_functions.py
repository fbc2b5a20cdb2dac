"""autograd_helpers.functions: every teaching Function, checked against autograd's own maths.

The registry in ``tools/registry.py`` (shared with ``make bench``) lists each Function with
example inputs, the built-in composition it replaces, and what it claims (double backward,
forward mode). The checks run over the registry, so a new Function gets all of them by
adding one entry there.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck, gradgradcheck

from autograd_helpers import functions as fns
from tools.registry import FUNCTION_CASES, FunctionCase, case_named

DOUBLE = torch.float64


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=DOUBLE)


CASES = FUNCTION_CASES
IDS = [case.name for case in CASES]
DERIVATIVES = [case for case in CASES if case.is_derivative]


def _leaves(case: FunctionCase) -> tuple[torch.Tensor, ...]:
    return tuple(t.requires_grad_() for t in case.inputs())


def test_every_teaching_function_is_in_the_registry():
    classes = {
        getattr(fns, name)
        for name in fns.__all__
        if isinstance(getattr(fns, name), type)
        and issubclass(getattr(fns, name), torch.autograd.Function)
    }
    assert {case.function for case in CASES} == classes
    assert len(IDS) == len(set(IDS))


@pytest.mark.parametrize("case", DERIVATIVES, ids=lambda c: c.name)
def test_gradcheck_and_batched_grad(case):
    assert gradcheck(case.call, _leaves(case), check_batched_grad=True)


@pytest.mark.parametrize("case", DERIVATIVES, ids=lambda c: c.name)
def test_double_backward(case):
    assert gradgradcheck(case.call, _leaves(case), check_batched_grad=True)


def test_scale_grad_by_one_is_the_identity_for_gradcheck():
    # ScaleGrad's registry case reverses the gradient on purpose; by 1.0 it is a derivative.
    x = _randn(3, 4).requires_grad_()
    assert gradcheck(lambda t: fns.scale_grad(t, 1.0), (x,), check_batched_grad=True)
    assert gradgradcheck(lambda t: fns.scale_grad(t, 1.0), (x,), check_batched_grad=True)


@pytest.mark.parametrize("case", [c for c in CASES if c.forward_ad], ids=lambda c: c.name)
def test_forward_mode(case):
    assert gradcheck(case.call, _leaves(case), check_forward_ad=True, check_backward_ad=False)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_equals_the_builtin_composition_forward_and_backward(case):
    mine, theirs = _leaves(case), _leaves(case)
    out_mine, out_theirs = case.call(*mine), case.builtin(*theirs)
    torch.testing.assert_close(out_mine, out_theirs)
    grad_output = _randn(*out_mine.shape, seed=9)
    grads_mine = torch.autograd.grad(out_mine, mine, grad_output)
    grads_theirs = torch.autograd.grad(out_theirs, theirs, grad_output)
    for a, b in zip(grads_mine, grads_theirs, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("case", [c for c in CASES if c.fused], ids=lambda c: c.name)
def test_equals_the_fused_builtin_where_there_is_one(case):
    inputs = case.inputs()
    torch.testing.assert_close(case.call(*inputs), case.fused(*inputs))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_inputs_keep_their_dtype(case):
    inputs = tuple(t.requires_grad_() for t in case.inputs(dtype=torch.float32))
    out = case.call(*inputs)
    out.sum().backward()
    assert out.dtype == torch.float32
    assert all(t.grad.dtype == torch.float32 for t in inputs)


# --- torch.func on the modern-form Functions ---------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "builtin"),
    [(fns.exp, torch.exp), (fns.sigmoid, torch.sigmoid)],
    ids=["exp", "sigmoid"],
)
def test_torch_func_transforms(mine, builtin):
    x = _randn(5)
    batch = _randn(4, 5, seed=1)
    torch.testing.assert_close(torch.func.vmap(mine)(batch), builtin(batch))
    for transform in (torch.func.jacrev, torch.func.jacfwd):
        torch.testing.assert_close(transform(mine)(x), transform(builtin)(x))

    def total(f):
        return lambda t: f(t).sum()

    torch.testing.assert_close(
        torch.func.hessian(total(mine))(x), torch.func.hessian(total(builtin))(x)
    )
    torch.testing.assert_close(
        torch.func.vmap(torch.func.grad(total(mine)))(batch),
        torch.func.vmap(torch.func.grad(total(builtin)))(batch),
    )


def test_classic_form_functions_are_refused_by_torch_func():
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.grad(lambda t: fns.relu(t).sum())(_randn(3))


# --- behaviour each Function promises ----------------------------------------------------------


def test_relu_gradient_at_zero_matches_torch():
    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    fns.relu(x).sum().backward()
    y = x.detach().clone().requires_grad_()
    torch.relu(y).sum().backward()
    assert torch.equal(x.grad, y.grad) and x.grad[1] == 0


def _returned_by_backward(function, *args):
    """Run ``function`` forward and backward; return exactly what its backward returned."""
    returned = []

    class Recording(function):
        @staticmethod
        def backward(ctx, grad_output):
            returned.append(function.backward(ctx, grad_output))
            return returned[-1]

    Recording.apply(*args).sum().backward()
    return returned[0]


def test_mul_constant_returns_none_for_the_constant():
    x = torch.ones(2, requires_grad=True)
    grad_x, grad_constant = _returned_by_backward(fns.MulConstant, x, 3)
    assert grad_constant is None
    torch.testing.assert_close(grad_x, torch.full((2,), 3.0))
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0))


@pytest.mark.parametrize("coeff", [-1.0, 0.5, 3])
def test_scale_grad_is_identity_forward_and_scales_backward(coeff):
    x = _randn(4).requires_grad_()
    y = fns.scale_grad(x, coeff)
    assert torch.equal(y, x) and y.data_ptr() == x.data_ptr()  # no copy
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), float(coeff), dtype=DOUBLE))


@pytest.mark.parametrize(
    "needs",
    [(True, True, True), (False, True, False), (True, False, True), (False, False, True)],
    ids=["all", "weight-only", "input-and-bias", "bias-only"],
)
def test_linear_computes_only_the_gradients_asked_for(needs):
    inputs = case_named("LinearFunction").inputs()
    x, w, b = (t.requires_grad_(n) for t, n in zip(inputs, needs, strict=True))
    returned = _returned_by_backward(fns.LinearFunction, x, w, b)
    # A gradient nobody needs is never computed: backward returns None in its place.
    assert [g is not None for g in returned] == list(needs)
    assert [t.grad is not None for t in (x, w, b)] == list(needs)


@pytest.mark.parametrize(("in_features", "out_features"), [(0, 3), (4, 0), (0, 0)])
def test_linear_with_an_empty_layer_matches_f_linear(in_features, out_features):
    x = _randn(5, in_features).requires_grad_()
    w = _randn(out_features, in_features, seed=1).requires_grad_()
    b = _randn(out_features, seed=2).requires_grad_()
    out = fns.linear(x, w, b)
    torch.testing.assert_close(out, F.linear(x, w, b))
    grads = torch.autograd.grad(out, (x, w, b), torch.ones_like(out))
    expected = torch.autograd.grad(F.linear(x, w, b), (x, w, b), torch.ones_like(out))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_pooling_an_empty_batch_gives_an_empty_result():
    assert fns.square_and_max_pool1d(torch.ones(0, 2, 6), 2).shape == (0, 2, 3)


def test_linear_accepts_a_single_sample_and_no_bias():
    x, w = _randn(4).requires_grad_(), _randn(3, 4, seed=1).requires_grad_()
    assert gradcheck(fns.linear, (x, w))
    torch.testing.assert_close(fns.linear(x, w), F.linear(x, w))


# --- square_and_max_pool1d: every pooling configuration ----------------------------------------


def test_default_stride_is_the_kernel_size():
    x = _randn(1, 1, 8)
    torch.testing.assert_close(fns.square_and_max_pool1d(x, 2), F.max_pool1d(x * x, 2))
    assert fns.square_and_max_pool1d(x, 2).shape[-1] == 4  # not 7: windows do not overlap


def test_an_element_winning_several_windows_gets_every_gradient():
    x = torch.tensor([[[0.1, 5.0, 0.2, 0.3]]], dtype=DOUBLE, requires_grad=True)
    out = fns.square_and_max_pool1d(x, 3, stride=1)  # 5.0 wins both windows
    out.backward(torch.tensor([[[1.0, 10.0]]], dtype=DOUBLE))
    torch.testing.assert_close(
        x.grad, torch.tensor([[[0.0, 2 * 5.0 * 11, 0.0, 0.0]]], dtype=DOUBLE)
    )


def test_overwriting_scatter_is_caught_by_gradcheck():
    class Overwriting(fns.SquareAndMaxPool1d):
        @staticmethod
        def backward(ctx, grad_output):
            input, indices = ctx.saved_tensors
            grad = torch.zeros_like(input).scatter(-1, indices, grad_output)
            return grad * 2 * input, None, None, None, None, None

    x = _randn(1, 2, 9).requires_grad_()
    assert gradcheck(lambda t: Overwriting.apply(t, 3, 3, 0, 1, False), (x,))  # no overlap: hidden
    assert not gradcheck(
        lambda t: Overwriting.apply(t, 3, 1, 0, 1, False), (x,), raise_exception=False
    )


@settings(max_examples=60, deadline=None)
@given(
    kernel=st.integers(1, 5),
    stride=st.one_of(st.none(), st.integers(1, 5)),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 3),
    ceil_mode=st.booleans(),
    batched=st.booleans(),
    length=st.integers(1, 14),
    seed=st.integers(0, 2**16),
)
def test_pool_matches_the_builtin_in_any_valid_configuration(
    kernel, stride, padding, dilation, ceil_mode, batched, length, seed
):
    padding = min(padding, kernel // 2)
    if length + 2 * padding < dilation * (kernel - 1) + 1:
        return  # no complete window: the wrapper refuses (tested below)
    shape = (2, 3, length) if batched else (3, length)
    probe = F.max_pool1d(torch.ones(shape), kernel, stride, padding, dilation, ceil_mode)
    if bool(probe.isinf().any()):  # some window holds only padding: refused, with a reason
        with pytest.raises(ValueError, match="covers only padding"):
            fns.square_and_max_pool1d(
                torch.ones(shape), kernel, stride, padding, dilation, ceil_mode
            )
        return
    x = _randn(*shape, seed=seed).requires_grad_()
    y = x.detach().clone().requires_grad_()
    mine = fns.square_and_max_pool1d(x, kernel, stride, padding, dilation, ceil_mode)
    theirs = F.max_pool1d(y * y, kernel, stride, padding, dilation, ceil_mode)
    torch.testing.assert_close(mine, theirs)
    # first derivative, recorded so that it can be differentiated again
    grad_output = _randn(*mine.shape, seed=seed + 1).requires_grad_()
    (first_mine,) = torch.autograd.grad(mine, x, grad_output, create_graph=True)
    (first_theirs,) = torch.autograd.grad(theirs, y, grad_output, create_graph=True)
    torch.testing.assert_close(first_mine, first_theirs)
    # second derivative, with respect to the input and to grad_output
    v = _randn(*x.shape, seed=seed + 2)
    second_mine = torch.autograd.grad(first_mine, (x, grad_output), v, allow_unused=True)
    second_theirs = torch.autograd.grad(first_theirs, (y, grad_output), v, allow_unused=True)
    for got, want, like in zip(second_mine, second_theirs, (x, grad_output), strict=True):
        zeros = torch.zeros_like(like)
        torch.testing.assert_close(zeros if got is None else got, zeros if want is None else want)


# --- bad arguments name themselves ------------------------------------------------------------

X = torch.ones(2, 3, 8)


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: fns.exp([1.0]), TypeError, "exp\\(\\): input must be a torch.Tensor"),
        (
            lambda: fns.sigmoid(torch.arange(3)),
            TypeError,
            "sigmoid\\(\\): input must have a floating",
        ),
        (lambda: fns.relu(None), TypeError, "relu\\(\\): input"),
        (lambda: fns.mul_constant(X, torch.tensor(2.0)), TypeError, "constant must be a Python"),
        (lambda: fns.mul_constant(X, float("inf")), ValueError, "constant must be finite"),
        (lambda: fns.mul_constant(X, True), TypeError, "constant"),
        (lambda: fns.scale_grad(X, "1"), TypeError, "coeff"),
        (lambda: fns.linear(X, torch.ones(3)), ValueError, "weight must be 2-D"),
        (lambda: fns.linear(X, torch.ones(4, 5)), ValueError, "weight has 5 input features"),
        (lambda: fns.linear(X, torch.ones(4, 8, dtype=DOUBLE)), TypeError, "weight dtype"),
        (
            lambda: fns.linear(X, torch.ones(4, 8), torch.ones(3)),
            ValueError,
            "bias must have shape",
        ),
        (lambda: fns.linear(torch.tensor(1.0), torch.ones(1, 1)), ValueError, "input must have"),
        (
            lambda: fns.linear(torch.ones(2, 8), torch.ones(4, 8, device="meta")),
            ValueError,
            "weight is on meta but input is on cpu",
        ),
        (
            lambda: fns.linear(torch.ones(2, 8), torch.ones(4, 8), torch.ones(4, device="meta")),
            ValueError,
            "bias is on meta",
        ),
        (
            lambda: fns.square_and_max_pool1d(torch.ones(2, 0, 5), 2),
            ValueError,
            "input has no channels \\(shape \\(2, 0, 5\\)\\)",
        ),
        (
            lambda: fns.square_and_max_pool1d(torch.ones(8), 2),
            ValueError,
            "input must be \\(C, L\\)",
        ),
        (lambda: fns.square_and_max_pool1d(X, 0), ValueError, "kernel_size must be at least 1"),
        (lambda: fns.square_and_max_pool1d(X, 2.0), TypeError, "kernel_size must be an int"),
        (
            lambda: fns.square_and_max_pool1d(X, 2, stride=0),
            ValueError,
            "stride must be at least 1",
        ),
        (
            lambda: fns.square_and_max_pool1d(X, 2, padding=-1),
            ValueError,
            "padding must be at least",
        ),
        (lambda: fns.square_and_max_pool1d(X, 3, padding=2), ValueError, "padding must be at most"),
        (lambda: fns.square_and_max_pool1d(X, 2, dilation=0), ValueError, "dilation"),
        (
            lambda: fns.square_and_max_pool1d(X, 2, ceil_mode=1),
            TypeError,
            "ceil_mode must be a bool",
        ),
        (
            lambda: fns.square_and_max_pool1d(X, 5, dilation=2),
            ValueError,
            "shorter than the window",
        ),
        (
            lambda: fns.square_and_max_pool1d(torch.ones(1, 1), 2, padding=1, dilation=2),
            ValueError,
            "window 0 covers only padding",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def test_the_empty_window_check_agrees_with_the_builtin_everywhere():
    # Only windows that start in the padding are examined (fast for long inputs); compare
    # with max_pool1d's own answer (-inf for a window of padding only) over every small case.
    from autograd_helpers.functions._pooling import _window_of_only_padding

    for kernel, stride, padding, dilation, ceil_mode, length in itertools.product(
        range(1, 6), range(1, 6), range(3), range(1, 4), (False, True), range(1, 15)
    ):
        if padding > kernel // 2 or length + 2 * padding < dilation * (kernel - 1) + 1:
            continue
        pooled = F.max_pool1d(torch.ones(1, length), kernel, stride, padding, dilation, ceil_mode)
        expected = int(pooled.isinf().nonzero()[0, 1]) if pooled.isinf().any() else None
        found = _window_of_only_padding(length, kernel, stride, padding, dilation, ceil_mode)
        assert found == expected, (kernel, stride, padding, dilation, ceil_mode, length)
