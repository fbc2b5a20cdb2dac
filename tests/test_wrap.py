"""autograd_helpers.wrap.wrap_builtin: a built-in's backward reused from a custom Function."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import gradcheck, gradgradcheck

from autograd_helpers.wrap import wrap_builtin
from tests.real_world import Cycle

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


def test_a_hessian_through_a_wrapped_sin_has_sins_second_derivative():
    # The issue: once_differentiable only refuses when the incoming gradient requires grad;
    # under `.sum()` it does not, and the Hessian came out as zeros, silently.
    x = torch.randn(4, dtype=DOUBLE, requires_grad=True)
    sin = wrap_builtin(torch.sin)
    hessian = torch.autograd.functional.hessian(lambda t: sin(t).sum(), x)
    torch.testing.assert_close(hessian, torch.diag(-x.detach().sin()))
    assert gradgradcheck(sin, (x,))
    assert gradgradcheck(lambda x, w, b: wrap_builtin(F.linear)(x, w, b).tanh(), _params())


def test_a_second_derivative_of_a_random_builtin_uses_the_forwards_draw():
    x = torch.randn(6, dtype=DOUBLE, requires_grad=True)

    def second(dropout):
        torch.manual_seed(3)
        y = dropout(x, 0.5, training=True)
        (g,) = torch.autograd.grad(y.pow(3).sum(), x, create_graph=True)
        return torch.autograd.grad(g.sum(), x)[0]

    torch.testing.assert_close(second(wrap_builtin(F.dropout)), second(F.dropout))


@pytest.mark.parametrize(
    "call",
    [
        lambda cat, a, b: cat([a, b]),
        lambda cat, a, b: cat((a, b)),
        lambda cat, a, b: cat(tensors=[a, b], dim=0),
    ],
    ids=["list", "tuple", "keyword list"],
)
def test_tensors_inside_a_list_or_tuple_argument_get_their_gradients(call):
    a = torch.randn(2, dtype=DOUBLE, requires_grad=True)
    b = torch.randn(3, dtype=DOUBLE, requires_grad=True)
    cat = wrap_builtin(torch.cat)
    call(cat, a, b).pow(2).sum().backward()
    torch.testing.assert_close(a.grad, 2 * a.detach())
    torch.testing.assert_close(b.grad, 2 * b.detach())
    assert gradcheck(lambda a, b: call(cat, a, b), (a, b))


def _odeint(func, y0, t):
    """torchdiffeq's odeint, rebuilt: Euler steps of a module's dynamics dy/dt = func(t, y)."""
    ys = [y0]
    for i in range(len(t) - 1):
        ys.append(ys[-1] + (t[i + 1] - t[i]) * func(t[i], ys[-1]))
    return torch.stack(ys)


class _Dynamics(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(2, 2).double()

    def forward(self, t, y):
        return torch.tanh(self.net(y))


def _gradients_of(fn, leaves):
    for leaf in leaves:
        leaf.grad = None
    fn().square().sum().backward()
    return [leaf.grad.clone() for leaf in leaves]


def test_the_parameters_of_a_module_passed_to_the_builtin_get_their_gradients():
    torch.manual_seed(0)
    func, y0 = _Dynamics(), torch.randn(2, dtype=DOUBLE, requires_grad=True)
    t = torch.linspace(0, 1, 5, dtype=DOUBLE)
    leaves = [y0, *func.parameters()]
    wrapped = _gradients_of(lambda: wrap_builtin(_odeint)(func, y0, t), leaves)
    builtin = _gradients_of(lambda: _odeint(func, y0, t), leaves)
    for got, want in zip(wrapped, builtin, strict=True):
        torch.testing.assert_close(got, want)  # none missing, none counted twice


def test_a_whole_model_wrapped_gives_its_parameters_their_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    x = torch.randn(5, 3, dtype=DOUBLE)
    wrapped = wrap_builtin(model)
    assert type(wrapped(x).grad_fn).__name__ == "WrappedSequentialBackward"
    mine = _gradients_of(lambda: wrapped(x), list(model.parameters()))
    expected = _gradients_of(lambda: model(x), list(model.parameters()))
    for got, want in zip(mine, expected, strict=True):
        torch.testing.assert_close(got, want)
    closure = wrap_builtin(lambda t: model(t).exp(), name="closure")  # a module by name
    assert all(g is not None for g in _gradients_of(lambda: closure(x), list(model.parameters())))


class _Hidden:
    __slots__ = ("weight",)  # no __dict__: not followed

    def __init__(self, weight):
        self.weight = weight


def test_a_tensor_requiring_grad_reached_by_another_route_is_refused_in_one_sentence():
    hidden = _Hidden(torch.randn(2, dtype=DOUBLE, requires_grad=True))
    scaled = wrap_builtin(lambda v, h: v * h.weight, name="scaled")
    with pytest.raises(ValueError, match=r"wrap_builtin\(scaled\): the built-in used a tensor"):
        scaled(torch.ones(2, dtype=DOUBLE), hidden)


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


def test_a_second_derivative_counts_a_train_mode_batch_once_in_the_running_statistics():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Tanh()).double()
    x = torch.randn(4, 3, dtype=DOUBLE, requires_grad=True)
    expected = copy.deepcopy(model)
    expected(x)  # one batch: one momentum update of the running statistics
    (g,) = torch.autograd.grad(wrap_builtin(model)(x).pow(2).sum(), x, create_graph=True)
    g.sum().backward()  # the built-in runs again here, on copies of the buffers
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model[1], name), getattr(expected[1], name))
    hessian_row = x.grad.clone()
    x.grad = None
    (g,) = torch.autograd.grad(model(x).pow(2).sum(), x, create_graph=True)
    g.sum().backward()
    torch.testing.assert_close(hessian_row, x.grad)


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def _first_and_second(module, x, wrapped):
    """The first and second derivatives of sum(module(x)³), from the cursor at 0."""
    module._pos = 0
    leaf = x.clone().requires_grad_()
    call = wrap_builtin(module) if wrapped else module
    (first,) = torch.autograd.grad(call(leaf).pow(3).sum(), leaf, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), leaf)
    return first.detach(), second, module._pos


def test_a_second_derivative_reruns_from_the_module_state_forward_started_from():
    # detectron2's CycleBatchNormList moves `self._pos` in forward: the rerun for the
    # second derivative took the other branch, and the first derivative came out wrong too.
    torch.manual_seed(1)
    module = Cycle().double()
    x = torch.randn(6, 3, dtype=DOUBLE)
    first, second, cursor = _first_and_second(module, x, wrapped=True)
    want_first, want_second, want_cursor = _first_and_second(module, x, wrapped=False)
    torch.testing.assert_close(first, want_first)
    torch.testing.assert_close(second, want_second)
    assert cursor == want_cursor == 1  # moved once, by forward


def test_a_second_derivative_reruns_from_pythons_random_state_forward_started_from():
    # revtorch's fix_random_seed: forward reseeds torch from Python's random.
    import random

    class Reseeding(nn.Module):
        def forward(self, t):
            torch.manual_seed(random.randint(0, 2**31))
            return F.dropout(t, 0.5, training=True)

    x = torch.randn(8, dtype=DOUBLE)

    def second(call):
        random.seed(5)
        leaf = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(call(leaf).pow(3).sum(), leaf, create_graph=True)
        return torch.autograd.grad(g.sum(), leaf)[0]

    torch.testing.assert_close(second(wrap_builtin(Reseeding())), second(Reseeding()))
