"""autograd_helpers.checks._contain.watch: the one watcher of what learner code does while it
runs."""

from __future__ import annotations

import torch

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._contain.watch import Allocations, run_watched, watching


def test_the_passes_a_step_runs_are_counted_with_what_each_ran_on():
    w = torch.ones(3, requires_grad=True)

    def step(w):
        loss = (w * 2).sum()
        loss.backward()  # through Tensor.backward and the runner's guard: one pass
        torch.autograd.grad((w**2).sum(), w)
        return loss

    outcome, usage = run_watched(step, w)
    assert outcome.error is None
    assert (usage.backward_passes, usage.backward_calls) == (2, 1)
    assert [float(t) for t in usage.ran_on] == [6.0, 3.0]


def test_hooks_registered_are_seen():
    def hooked(x):
        x.register_hook(lambda g: g)
        x.register_post_accumulate_grad_hook(lambda p: None)
        return x.sum()

    leaf = torch.ones(2, requires_grad=True)
    _, usage = run_watched(hooked, leaf)
    assert usage.hooked == [leaf, leaf]


def test_a_pass_nested_in_a_backward_counts_too():
    class Nested(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                (inner,) = torch.autograd.grad((leaf * 2).sum(), leaf)
            return g * inner

    x = torch.ones(2, requires_grad=True)
    with watching() as usage:
        outcome = run_learner_code(lambda: Nested.apply(x).sum().backward())
    assert outcome.error is None and usage.backward_passes == 2


def test_allocations_see_new_storages_not_views():
    with Allocations() as allocations:
        base = torch.zeros(4, 5)
        view = base[1:]
        assert view.shape == (3, 5)
    assert (allocations.largest, allocations.largest_shape) == (20, (4, 5))
    assert any(ref() is not None for ref in allocations.storages)


def test_allocations_count_as_computed_neither_copies_of_old_data_nor_broadcasts():
    data = torch.randn(4, 4)  # made before: a function's captured matrix
    with Allocations() as allocations:
        carried = data.clone()  # a copy of old data: nothing computed
        zero = torch.zeros(()).expand(4, 4).clone()  # a broadcast copied: holds 1 number
        product = data @ data  # computed
        again = product.clone()  # a copy of what was computed holds as much
    assert carried.shape == zero.shape == again.shape == (4, 4)
    assert allocations.computed[(4, 4)] == 16  # product and its copy
    assert allocations.largest == 16
    with Allocations() as allocations:
        data.clone().to(torch.float64)
        torch.zeros(()).expand(4, 4).clone()
    assert allocations.computed.get((4, 4), 0) <= 1
