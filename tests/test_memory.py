"""autograd_helpers.memory.saved_tensor_bytes counts what a graph keeps for backward."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers import functions as fns
from autograd_helpers.memory import saved_tensor_bytes


def test_a_function_saving_its_output_saves_less_than_the_composition():
    x = torch.randn(1000, requires_grad=True)
    assert saved_tensor_bytes(lambda t: 1 / (1 + torch.exp(-t)), x) == 8000
    assert saved_tensor_bytes(fns.sigmoid, x) == 4000


def test_nothing_is_saved_without_requires_grad_or_under_no_grad():
    assert saved_tensor_bytes(torch.exp, torch.randn(10)) == 0
    x = torch.randn(10, requires_grad=True)
    assert saved_tensor_bytes(lambda t: t * 3, x) == 0  # a constant factor saves nothing


def test_a_storage_saved_twice_counts_once():
    x = torch.randn(100, requires_grad=True)
    assert saved_tensor_bytes(lambda t: t * t * t, x) == 2 * 400  # x (saved 3 times), x*x


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        saved_tensor_bytes(3, torch.ones(1))
