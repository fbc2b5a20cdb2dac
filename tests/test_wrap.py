"""autograd_helpers.wrap.wrap_builtin: a built-in's backward reused from a custom Function."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import gradcheck

from autograd_helpers.wrap import wrap_builtin

DOUBLE = torch.float64


def _params(seed: int = 0):
    torch.manual_seed(seed)
    layer = nn.Linear(4, 3).double()
    return torch.randn(5, 4, dtype=DOUBLE, requires_grad=True), layer.weight, layer.bias


def test_gradients_equal_the_builtins_for_every_input_without_double_counting():
    x, w, b = _params()
    wrapped = wrap_builtin(F.linear)
    wrapped(x, w, b).square().sum().backward()
    mine = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    F.linear(x, w, b).square().sum().backward()
    for got, want in zip(mine, (x.grad, w.grad, b.grad), strict=True):
        torch.testing.assert_close(got, want)  # equal, not twice as large


def test_a_second_backward_with_retain_graph_works():
    x, w, b = _params()
    out = wrap_builtin(F.linear)(x, w, b).sum()
    out.backward(retain_graph=True)
    first = w.grad.clone()
    out.backward()
    torch.testing.assert_close(w.grad, 2 * first)


def test_gradcheck_positional_and_keyword_tensors():
    x, w, b = (t.detach().requires_grad_() for t in _params())
    wrapped = wrap_builtin(F.linear)
    assert gradcheck(lambda x, w, b: wrapped(x, w, bias=b), (x, w, b))


def test_max_pool_with_indices_and_keyword_arguments():
    pool = wrap_builtin(F.max_pool1d)
    x = torch.randn(2, 3, 9, dtype=DOUBLE, requires_grad=True)
    values, indices = pool(x, kernel_size=3, stride=1, padding=1, return_indices=True)
    expected, expected_indices = F.max_pool1d(x, 3, 1, 1, return_indices=True)
    torch.testing.assert_close(values, expected)
    assert torch.equal(indices, expected_indices) and not indices.requires_grad
    assert type(values.grad_fn).__name__ == "WrappedMaxPool1dBackward"
    assert gradcheck(lambda t: pool(t, 3, stride=1), (x,))


def test_inputs_that_need_no_gradient_get_none():
    x, w, b = _params()
    frozen = w.detach()
    wrap_builtin(F.linear)(x, frozen, b).sum().backward()
    assert frozen.grad is None and x.grad is not None and b.grad is not None


def test_double_backward_is_refused_with_a_clear_error():
    x = torch.randn(4, dtype=DOUBLE, requires_grad=True)
    y = wrap_builtin(torch.sin)(x)
    (g,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_in_place_change_after_forward_is_detected():
    x = torch.randn(4, dtype=DOUBLE, requires_grad=True)
    data = x.detach().clone()
    y = wrap_builtin(torch.sin)(data.requires_grad_())  # sin saves its input
    with torch.no_grad():
        data.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_bad_arguments_and_bad_builtins():
    with pytest.raises(TypeError, match="fn must be callable"):
        wrap_builtin(3)
    with pytest.raises(ValueError, match="name must be a Python identifier"):
        wrap_builtin(torch.sin, name="not valid")
    listy = wrap_builtin(lambda t: [t * 2], name="listy")
    with pytest.raises(TypeError, match="wrap_builtin\\(listy\\): the built-in must return"):
        listy(torch.ones(2, requires_grad=True))
    assert wrap_builtin(torch.sin, name="my_sin").__name__ == "wrapped_my_sin"


def test_a_backward_without_retain_graph_frees_the_subgraph_like_any_graph():
    x, w, b = _params()
    out = wrap_builtin(F.linear)(x, w, b).sum()
    node = out.grad_fn.next_functions[0][0]  # the wrapper's node
    out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()
    with pytest.raises(RuntimeError, match="freed"):
        node.saved_tensors  # noqa: B018 (the subgraph's two ends were saved, and are gone)


def test_an_input_changed_in_place_after_forward_is_refused_even_if_the_builtin_would_not_care():
    data = torch.randn(4, dtype=DOUBLE, requires_grad=True).clone()
    y = wrap_builtin(torch.add)(data, 1.0)  # addition itself saves nothing
    with torch.no_grad():
        data.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
