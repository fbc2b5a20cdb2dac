"""The template checker (tests/checks/template_checker.py) keeps working, so it cannot rot.

CONTRIBUTING.md, "Write a checker of a new kind", points contributors at it: here it judges
right answers written in two ways, the stubs, and wrong ones of several kinds, each with the
phrase its verdict must contain, and leaves the notebook's state as it found it.
"""

from __future__ import annotations

import contextlib
import doctest

import pytest
import torch

from tests.checks import template_checker
from tests.checks.template_checker import check_frozen_context

CALLS: list[str] = []  # a notebook's global list, for the answer that appends to it


@contextlib.contextmanager
def frozen(module):
    flags = [(p, p.requires_grad) for p in module.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield module
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


class Frozen:  # a class is a right answer too: its spelling is not the check's business
    def __init__(self, module):
        self.flags = {p: p.requires_grad for p in module.parameters()}

    def __enter__(self):
        for p in self.flags:
            p.requires_grad = False

    def __exit__(self, *error):
        for p, flag in self.flags.items():
            p.requires_grad = flag


@contextlib.contextmanager
def stub(module):
    raise NotImplementedError("write frozen")
    yield


def returns_nothing(module):
    module.requires_grad_(False)


@contextlib.contextmanager
def restores_all(module):
    module.requires_grad_(False)
    try:
        yield
    finally:
        module.requires_grad_(True)


@contextlib.contextmanager
def no_finally(module):
    flags = [(p, p.requires_grad) for p in module.parameters()]
    module.requires_grad_(False)
    yield
    for p, flag in flags:
        p.requires_grad_(flag)


@contextlib.contextmanager
def swallows(module):
    flags = [(p, p.requires_grad) for p in module.parameters()]
    module.requires_grad_(False)
    try:
        yield
    except Exception:
        pass
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


@contextlib.contextmanager
def grad_mode_off(module):
    with torch.no_grad():
        yield


@contextlib.contextmanager
def only_direct(module):
    flags = {p: p.requires_grad for p in module._parameters.values()}
    for p in flags:
        p.requires_grad_(False)
    yield
    for p, flag in flags.items():
        p.requires_grad_(flag)


@contextlib.contextmanager
def clears_grads(module):
    with frozen(module):
        yield
    module.zero_grad()


@contextlib.contextmanager
def counts_calls(module):
    CALLS.append("frozen")
    with frozen(module):
        yield


@pytest.mark.parametrize("answer", [frozen, Frozen], ids=["contextmanager", "class"])
def test_right_answers_pass(answer):
    result = check_frozen_context(answer)
    assert result.passed, result.message
    assert "first layer was frozen before the block" in result.message


@pytest.mark.parametrize("answer", [..., stub], ids=["ellipsis", "raise"])
def test_stubs_are_not_implemented_yet(answer):
    result = check_frozen_context(answer, name="frozen")
    assert result.status == "not implemented", result.message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (returns_nothing, "returned NoneType, not a context manager"),
        (restores_all, "first layer was frozen before the block, after the block requires_grad"),
        (no_finally, "Put the flags back in a `finally:`"),
        (swallows, "did not come out of it"),
        (grad_mode_off, "Hint: `torch.no_grad()` stops every graph"),
        (only_direct, "inside the block 0.weight, 0.bias, 2.weight, 2.bias still require grad"),
        (clears_grads, "it changed the .grad of"),
        (counts_calls, "It changed the global list `CALLS` (it held 0 items, now 1)"),
        (3, "expected a function, got int"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_wrong_answers_fail_with_their_reason(answer, phrase):
    result = check_frozen_context(answer)
    assert result.status == "failed", result.message
    assert phrase in result.message, result.message


def test_a_check_leaves_the_notebook_as_it_found_it():
    rng, grad_mode = torch.get_rng_state(), torch.is_grad_enabled()
    check_frozen_context(counts_calls)
    check_frozen_context(grad_mode_off)
    assert CALLS == []
    assert torch.equal(torch.get_rng_state(), rng) and torch.is_grad_enabled() == grad_mode


def test_the_docstring_example_runs():
    assert doctest.testmod(template_checker).failed == 0
