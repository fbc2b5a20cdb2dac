"""Property tests (hypothesis) for the functional wrappers in autograd_helpers.functions.

For any shape (empty included), float32 or float64, contiguous or not, each wrapper must
equal its built-in in forward and backward; any non-floating dtype must be refused.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from autograd_helpers import functions as fns

FLOATS = st.sampled_from([torch.float32, torch.float64])
NOT_FLOATS = st.sampled_from([torch.int64, torch.int32, torch.uint8, torch.bool])
SHAPES = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
SEEDS = st.integers(0, 2**16)
NUMBERS = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False) | st.integers(-50, 50)
ELEMENTWISE = {
    "exp": (fns.exp, torch.exp),
    "sigmoid": (fns.sigmoid, torch.sigmoid),
    "relu": (fns.relu, torch.relu),
}


def _tensor(shape, dtype, seed, transposed=False):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=gen, dtype=dtype)
    return t.transpose(0, -1) if transposed and t.dim() >= 2 else t  # a non-contiguous view


def _same_forward_and_backward(mine, theirs, *inputs):
    a = [t.detach().clone().requires_grad_() for t in inputs]
    b = [t.detach().clone().requires_grad_() for t in inputs]
    out_a, out_b = mine(*a), theirs(*b)
    torch.testing.assert_close(out_a, out_b)
    grad_output = torch.ones_like(out_a) if out_a.numel() == 0 else out_a.detach().cos()
    grads_a = torch.autograd.grad(out_a, a, grad_output, allow_unused=True)
    grads_b = torch.autograd.grad(out_b, b, grad_output, allow_unused=True)
    for g_a, g_b, t in zip(grads_a, grads_b, inputs, strict=True):
        torch.testing.assert_close(
            torch.zeros_like(t) if g_a is None else g_a, torch.zeros_like(t) if g_b is None else g_b
        )


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, dtype=FLOATS, seed=SEEDS, transposed=st.booleans())
def test_elementwise_wrappers_equal_their_builtin(name, shape, dtype, seed, transposed):
    mine, theirs = ELEMENTWISE[name]
    _same_forward_and_backward(mine, theirs, _tensor(shape, dtype, seed, transposed))


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, dtype=FLOATS, seed=SEEDS, constant=NUMBERS)
def test_mul_constant_equals_multiplication(shape, dtype, seed, constant):
    x = _tensor(shape, dtype, seed)
    _same_forward_and_backward(
        lambda t: fns.mul_constant(t, constant), lambda t: t * float(constant), x
    )


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, dtype=FLOATS, seed=SEEDS, coeff=NUMBERS)
def test_scale_grad_is_identity_with_scaled_gradient(shape, dtype, seed, coeff):
    x = _tensor(shape, dtype, seed).requires_grad_()
    y = fns.scale_grad(x, coeff)
    assert torch.equal(y, x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, float(coeff)))


@settings(max_examples=40, deadline=None)
@given(
    batch=st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple),
    features=st.tuples(st.integers(0, 5), st.integers(0, 5)),  # empty layers too, as F.linear
    bias=st.booleans(),
    dtype=FLOATS,
    seed=SEEDS,
)
def test_linear_equals_f_linear(batch, features, bias, dtype, seed):
    in_features, out_features = features
    x = _tensor((*batch, in_features), dtype, seed)
    w = _tensor((out_features, in_features), dtype, seed + 1)
    if bias:
        b = _tensor((out_features,), dtype, seed + 2)
        _same_forward_and_backward(fns.linear, F.linear, x, w, b)
    else:
        _same_forward_and_backward(fns.linear, F.linear, x, w)


@settings(max_examples=30, deadline=None)
@given(dtype=NOT_FLOATS, shape=SHAPES)
def test_every_wrapper_refuses_a_non_floating_input(dtype, shape):
    t = torch.zeros(shape, dtype=dtype)
    calls = [
        *(lambda f=f: f(t) for f, _ in ELEMENTWISE.values()),
        lambda: fns.mul_constant(t, 2.0),
        lambda: fns.scale_grad(t, 2.0),
        lambda: fns.linear(t, torch.ones(1, 1)),
        lambda: fns.square_and_max_pool1d(t, 1),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="input must have a floating-point dtype"):
            call()
