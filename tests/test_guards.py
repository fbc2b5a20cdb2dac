"""autograd_helpers.guards: nested backward passes are counted per context and stopped."""

from __future__ import annotations

import threading

import pytest
import torch

from autograd_helpers.guards import NestedBackwardError, nested_backward_limit


class Recursive(torch.autograd.Function):
    """A backward that starts a backward pass through a fresh copy of itself, without end."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        Recursive.calls += 1
        with torch.enable_grad():
            Recursive.apply(torch.ones(2, requires_grad=True)).sum().backward()
        return grad_output


def _backward_calls_until_stopped() -> int:
    Recursive.calls = 0
    with pytest.raises(NestedBackwardError):
        Recursive.apply(torch.ones(2, requires_grad=True)).sum().backward()
    return Recursive.calls


@pytest.mark.parametrize("limit", [1, 5, 16])
def test_the_limit_counts_backward_passes(limit):
    with nested_backward_limit(limit):
        assert _backward_calls_until_stopped() == limit


def test_a_guard_inside_a_guard_counts_each_pass_once():
    with nested_backward_limit(8), nested_backward_limit(8):
        assert _backward_calls_until_stopped() == 8


def test_the_innermost_tighter_limit_wins_and_outer_limits_still_hold():
    with nested_backward_limit(8), nested_backward_limit(3):
        assert _backward_calls_until_stopped() == 3
    with nested_backward_limit(3), nested_backward_limit(8):
        assert _backward_calls_until_stopped() == 3


def test_torch_is_patched_once_and_restored_after_the_outermost_guard():
    original_backward, original_grad = torch.autograd.backward, torch.autograd.grad
    with nested_backward_limit(4):
        patched = torch.autograd.backward
        assert patched is not original_backward
        with nested_backward_limit(4):
            assert torch.autograd.backward is patched  # not wrapped a second time
        assert torch.autograd.backward is patched
    assert torch.autograd.backward is original_backward and torch.autograd.grad is original_grad


def test_the_guard_is_restored_even_when_the_block_raises():
    original = torch.autograd.backward
    with pytest.raises(KeyError), nested_backward_limit(2):
        raise KeyError("boom")
    assert torch.autograd.backward is original


def test_another_threads_backward_is_not_limited_by_this_guard():
    results = []
    entered, release = threading.Event(), threading.Event()

    def other_thread():
        entered.wait()
        x = torch.ones(2, requires_grad=True)
        for _ in range(3):  # three plain passes in a thread with no guard of its own
            (x * 2).sum().backward()
        results.append(x.grad.tolist())
        release.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    with nested_backward_limit(1):
        entered.set()
        release.wait(timeout=30)
    worker.join()
    assert results == [[6.0, 6.0]]


def test_plain_backward_passes_in_sequence_are_not_nested():
    x = torch.ones(2, requires_grad=True)
    with nested_backward_limit(1):
        for _ in range(5):
            (x * 2).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 10.0))


@pytest.mark.parametrize("depth", [0, 51, 2.5, True])
def test_a_bad_depth_is_refused(depth):
    with pytest.raises(ValueError, match="max_depth"), nested_backward_limit(depth):
        pass
