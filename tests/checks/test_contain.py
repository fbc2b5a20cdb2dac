"""The checkers' containment: what learner code changed that outlives it, said and put back.

``autograd_helpers._common.tensors`` (one tensor's state), ``_common.reach`` (what a call can
reach by name), and ``checks._contain`` with its parts (``_contain.names``,
``_contain.modules``): the one place every chapter's checkers snapshot, judge and restore.
"""

from __future__ import annotations

import functools

import pytest
import torch

from autograd_helpers._common.reach import modules_reachable, reachable
from autograd_helpers._common.tensors import TensorState
from autograd_helpers.checks._contain.contained import Contained, said
from autograd_helpers.checks._contain.global_calls import GlobalCalls
from autograd_helpers.checks._contain.names import Containers
from autograd_helpers.checks._core.problems import WORDS
from autograd_helpers.checks.gradcheck._saved import EXAMPLE, kept_outside_ctx


def test_a_tensor_state_puts_back_every_part():
    t = torch.ones(3, requires_grad=True)
    t.grad = torch.zeros(3)
    grad = t.grad
    state = TensorState.take(t)
    t.register_hook(lambda g: g)
    t.register_post_accumulate_grad_hook(lambda p: None)
    t.note = "kept"  # an attribute set on the caller's tensor
    t.data = t.data.double() * 2  # values and dtype, through .data
    t.grad = None
    assert state.changed() == ["values", "grad", "hooks", "attributes"]
    state.restore()
    assert state.changed() == []
    assert t.dtype == torch.float32 and t.tolist() == [1.0, 1.0, 1.0] and t.grad is grad
    assert not t._backward_hooks and not t._post_accumulate_grad_hooks
    assert not hasattr(t, "note")


def test_a_tensor_state_puts_back_a_hook_that_was_removed():
    t = torch.ones(2, requires_grad=True)
    handle = t.register_hook(lambda g: g * 2)
    state = TensorState.take(t)
    handle.remove()
    assert state.changed() == ["hooks"]
    state.restore()
    (t * 1).sum().backward()
    assert t.grad.tolist() == [2.0, 2.0]


def test_an_inference_tensor_is_put_back_in_inference_mode():
    with torch.inference_mode():
        kept = torch.ones(2)
    state = TensorState.take(kept)
    with torch.inference_mode():
        kept.add_(1)
    state.restore()
    assert kept.tolist() == [1.0, 1.0]


_SCALE = torch.ones(1)


def test_the_walk_names_what_it_reaches_as_the_code_writes_it():
    layer = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    cache = {"w": torch.ones(1)}

    def fn(x, scale=_SCALE):
        optimizer.step()
        return cache["w"] * scale

    labels = dict((id(item), label) for label, item in reachable(fn))
    assert labels[id(cache["w"])] == "`cache`['w']"
    assert labels[id(optimizer)] == "`optimizer`"
    assert labels[id(layer.weight)] == "`optimizer`'s parameter"
    assert "`scale`" in labels.values()
    assert modules_reachable(functools.partial(lambda x, m: m(x), m=layer)) == [layer]


def test_an_optimizer_put_back_twice_keeps_its_snapshot():
    w = torch.ones(2, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = torch.ones(2)
    optimizer.step()  # a momentum buffer now exists
    momentum = optimizer.state[w]["momentum_buffer"].clone()

    def step():
        w.grad = torch.ones(2)
        optimizer.step()

    contained = Contained(step)
    for _ in range(2):  # a checker puts back after every call
        step()
        assert "it changed the state of the optimizer `optimizer`" in contained.changes()
        contained.restore()
        assert torch.equal(optimizer.state[w]["momentum_buffer"], momentum)


def test_chapter_02_words_name_a_list_of_an_enclosing_function():
    def make():
        rows = []

        def fn(x):
            rows.append(x)
            fn.calls = 1
            return x

        return fn, rows

    fn, rows = make()
    contained = Contained(fn, every_global=True, words=WORDS)
    fn(torch.ones(1))
    assert contained.changes() == [
        "it changed the list `rows` of an enclosing function (it held 0 items, now 1)",
        "it set the attribute `fn.calls`",
    ]
    contained.restore()
    assert rows == [] and not hasattr(fn, "calls")


def test_a_bound_method_is_contained_through_its_function():
    class Step:
        def __call__(self, x):
            return x

        def run(self, x):
            Step.run.seen = True
            return x

    step = Step()
    contained = Contained(step.run)
    step.run(1)
    contained.restore()
    assert not hasattr(Step.run, "seen")


def test_the_tensor_words_follow_the_chapter():
    t = torch.ones(2)
    state = TensorState.take(t)
    t.requires_grad_()
    assert said(state) == ["its requires_grad (now True)"]
    assert said(state, WORDS) == ["requires_grad (now True)"]


def test_a_container_that_gains_no_tensor_is_put_back_unsaid_in_chapter_03():
    stash: list[object] = []

    class Counts(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            stash.append("called")
            return x * 2

    example = torch.ones(2)
    contained = Contained(Counts, {EXAMPLE: example})
    Counts.apply(example)
    labels = [c.label for c in Containers(Counts).all]
    assert labels == ["the list `stash` of an enclosing function"]
    assert kept_outside_ctx(contained, example) == []
    contained.restore()
    assert stash == []


def test_an_optimizers_settings_and_a_modules_attributes_are_said_and_put_back():
    layer = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)

    def fn():
        optimizer.param_groups[0]["lr"] = 0.0
        layer.scale = 3

    contained = Contained(fn)
    fn()
    changes = contained.changes()
    contained.restore()
    assert "it changed the optimizer `optimizer`'s settings (lr of param group 0)" in changes
    assert "it changed the module `layer` (its parameters, buffers or mode)" in changes
    assert optimizer.param_groups[0]["lr"] == 0.1
    assert not hasattr(layer, "scale")


@pytest.mark.parametrize(
    ("seeding", "named"),
    [
        (lambda: torch.manual_seed(0), "(`torch.manual_seed`)"),
        (lambda: torch.random.manual_seed(0), "(`torch.manual_seed`)"),
        (lambda: torch.seed(), "(`torch.seed`)"),
        (lambda: torch.random.seed(), "(`torch.seed`)"),
    ],
    ids=["manual_seed", "random.manual_seed", "seed", "random.seed"],
)
def test_a_reseed_is_named_by_the_call_that_made_it(seeding, named):
    """A learner audit: `torch.seed()` was said as `torch.manual_seed` in chapters 04 and 05."""
    calls = GlobalCalls()
    with torch.random.fork_rng(devices=[]), calls:
        seeding()
    assert calls.reseeded and named in calls.said()[0], calls.said()
