"""autograd_helpers.jacobians: the textbook loop and every strategy agree with PyTorch."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.jacobians import STRATEGIES, jacobian_by_rows, strategy_named

DOUBLE = torch.float64
W = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=DOUBLE)

# (name, f, input shape): scalar and tensor inputs and outputs, wide and tall Jacobians
PROBLEMS = [
    ("elementwise", torch.sin, (4,)),
    ("matrix-vector (tall)", lambda x: torch.tanh(W @ x), (3,)),
    ("sum of squares (wide)", lambda x: (x**2).sum(), (6,)),
    ("scalar to vector", lambda x: torch.stack([x, x**2, x.exp()]), ()),
    ("matrix to matrix", lambda x: x.T @ x, (2, 3)),
    ("3-d to 2-d", lambda x: x.sum(0).exp(), (2, 3, 2)),
]
IDS = [p[0] for p in PROBLEMS]


def _x(shape):
    return torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=DOUBLE)


@pytest.mark.parametrize(("name", "f", "shape"), PROBLEMS, ids=IDS)
def test_the_row_loop_equals_autograd_functional_jacobian(name, f, shape):
    x = _x(shape)
    expected = torch.autograd.functional.jacobian(f, x)
    got = jacobian_by_rows(f, x)
    assert got.shape == f(x).shape + x.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(("name", "f", "shape"), PROBLEMS, ids=IDS)
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_every_strategy_equals_the_row_loop(strategy, name, f, shape):
    x = _x(shape)
    torch.testing.assert_close(strategy.compute(f, x), jacobian_by_rows(f, x))


def test_the_input_is_left_alone_and_outputs_that_ignore_it_get_zero_rows():
    x = _x((3,))
    got = jacobian_by_rows(lambda t: torch.stack([t.sum(), torch.tensor(2.0, dtype=DOUBLE)]), x)
    assert torch.equal(got[1], torch.zeros(3, dtype=DOUBLE))
    assert x.grad is None and not x.requires_grad
    constant = jacobian_by_rows(lambda t: torch.ones(2, dtype=DOUBLE), x)
    assert torch.equal(constant, torch.zeros(2, 3, dtype=DOUBLE))
    assert jacobian_by_rows(lambda t: t[:0], x).shape == (0, 3)


def test_strategies_say_their_mode_and_are_found_by_name():
    assert {s.mode for s in STRATEGIES} == {"reverse", "forward"}
    assert strategy_named("torch.func.jacrev").batched
    assert not strategy_named("autograd.functional.jacobian (row loop)").batched
    with pytest.raises(ValueError, match="name must be one of"):
        strategy_named("jacobian")


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: jacobian_by_rows("sin", _x((2,))), TypeError, "f must be callable"),
        (lambda: jacobian_by_rows(torch.sin, torch.arange(3)), TypeError, "floating-point"),
        (lambda: jacobian_by_rows(lambda t: [t], _x((2,))), TypeError, "f must return a tensor"),
    ],
)
def test_bad_arguments_are_named(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()
