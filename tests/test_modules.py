"""autograd_helpers.modules.Linear: a drop-in for torch.nn.Linear over LinearFunction."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autograd_helpers.modules import Linear


def _pair(bias: bool) -> tuple[Linear, nn.Linear]:
    torch.manual_seed(0)
    mine = Linear(4, 3, bias=bias)
    torch.manual_seed(0)
    theirs = nn.Linear(4, 3, bias=bias)
    return mine, theirs


@pytest.mark.parametrize("bias", [True, False])
def test_same_seed_same_weights_same_outputs_same_gradients(bias):
    mine, theirs = _pair(bias)
    assert torch.equal(mine.weight, theirs.weight)
    x = torch.randn(2, 5, 4)
    out_mine, out_theirs = mine(x), theirs(x)
    torch.testing.assert_close(out_mine, out_theirs)
    out_mine.square().sum().backward()
    out_theirs.square().sum().backward()
    torch.testing.assert_close(mine.weight.grad, theirs.weight.grad)
    if bias:
        torch.testing.assert_close(mine.bias.grad, theirs.bias.grad)
    assert type(out_mine.grad_fn).__name__ == "LinearFunctionBackward"


def test_parameters_are_registered_and_bias_false_has_none():
    mine, _ = _pair(bias=True)
    assert [name for name, _ in mine.named_parameters()] == ["weight", "bias"]
    assert set(mine.state_dict()) == {"weight", "bias"}
    no_bias = Linear(4, 3, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]
    assert set(no_bias.state_dict()) == {"weight"}


def test_initial_values_are_within_the_nn_linear_bound():
    layer = Linear(16, 8)
    bound = 1 / 16**0.5
    assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound


def test_repr_device_and_dtype():
    assert repr(Linear(3, 2, bias=False)) == "Linear(in_features=3, out_features=2, bias=False)"
    layer = Linear(3, 2, dtype=torch.float64, device="cpu")
    assert layer.weight.dtype == torch.float64 and layer.bias.device.type == "cpu"
    assert layer.to(torch.float32).weight.dtype == torch.float32


def test_an_optimizer_step_trains_it():
    torch.manual_seed(0)
    layer = Linear(2, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    x, target = torch.randn(64, 2), torch.randn(64, 1)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = (layer(x) - target).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "phrase"),
    [
        ((0, 2), {}, ValueError, "in_features must be at least 1"),
        ((2, -1), {}, ValueError, "out_features"),
        ((2.0, 2), {}, TypeError, "in_features must be an int"),
        ((2, 2), {"bias": "yes"}, TypeError, "bias must be a bool"),
        ((2, 2), {"dtype": torch.int64}, TypeError, "dtype must be a floating-point"),
    ],
)
def test_bad_arguments(args, kwargs, error, phrase):
    with pytest.raises(error, match=phrase):
        Linear(*args, **kwargs)


def test_a_wrong_input_shape_names_the_argument():
    with pytest.raises(ValueError, match="weight has 3 input features"):
        Linear(3, 2)(torch.ones(4, 5))
