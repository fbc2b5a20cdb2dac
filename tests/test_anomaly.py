"""autograd_helpers.anomaly: where a NaN comes from, and which in-place change broke backward.

Every call must leave anomaly mode off, whatever happened inside.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

from autograd_helpers.anomaly import (
    InplaceReport,
    NanOrigin,
    explain_inplace_error,
    find_nan_origin,
)


@pytest.fixture(autouse=True)
def anomaly_mode_is_off_afterwards():
    assert not torch.is_anomaly_enabled()
    yield
    assert not torch.is_anomaly_enabled()


# --- NaN: where it first appears ---------------------------------------------------------------


def distance(x):
    squared = (x**2).sum()
    return torch.sqrt(squared)


def where_trap(x):
    return torch.where(x > 0, torch.sqrt(x), torch.zeros_like(x)).sum()


def acos_squared(x):
    return (torch.acos(x) ** 2).sum()


def log_of_negative(p):
    return -torch.log(p).sum()


def zero_over_zero(x):
    return (x / x.sum()).sum()


def overflowing_softmax(x):
    e = torch.exp(x)
    return (e / e.sum()).sum()


class AbsWithUnsafeBackward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x / x.abs()  # 0 / 0 at x = 0


def uses_custom(x):
    y = AbsWithUnsafeBackward.apply(x)
    return y.sum()


NAN_CASES = [
    # (fn, input, stage, node, line fragment)
    (distance, torch.zeros(3), "backward", "SqrtBackward0", "return torch.sqrt(squared)"),
    (where_trap, torch.tensor([0.0, 4.0]), "backward", "SqrtBackward0", "torch.where"),
    (acos_squared, torch.tensor([1.0, 0.5]), "backward", "AcosBackward0", "torch.acos(x)"),
    (log_of_negative, torch.tensor([0.5, -0.1]), "forward", "log", "torch.log(p)"),
    (zero_over_zero, torch.zeros(3), "forward", "div", "x / x.sum()"),
    (overflowing_softmax, torch.tensor([100.0, 1.0]), "forward", "div", "e / e.sum()"),
    (uses_custom, torch.tensor([0.0, 2.0]), "backward", "AbsWithUnsafeBackwardBackward", "apply"),
]


@pytest.mark.parametrize(
    ("fn", "x", "stage", "node", "line"), NAN_CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_the_nan_is_traced_to_its_node_and_the_learners_line(fn, x, stage, node, line):
    origin = find_nan_origin(fn, x)
    assert isinstance(origin, NanOrigin)
    assert origin.found and origin.stage == stage and origin.node == node, origin.message
    assert origin.source.startswith(f"in {fn.__name__}: ") and line in origin.source
    assert ".py" not in origin.source and "File" not in origin.source  # no file paths


def test_an_infinity_that_becomes_nan_later_is_told_apart():
    origin = find_nan_origin(distance, torch.zeros(3))
    assert "It was infinite there; the NaN appears in `PowBackward0`" in origin.message
    assert "squared = (x**2).sum()" in origin.message


def test_a_nan_discarded_by_where_is_mentioned():
    origin = find_nan_origin(where_trap, torch.tensor([-1.0, 4.0]))
    assert origin.stage == "backward" and "discarded it" in origin.message


def test_the_usual_cause_and_fix_are_given():
    assert "double-where" in find_nan_origin(where_trap, torch.tensor([0.0, 4.0])).message
    assert "custom Function" in find_nan_origin(uses_custom, torch.tensor([0.0, 2.0])).message


def test_a_clean_function_is_said_to_be_clean_even_with_infinite_gradients():
    clean = find_nan_origin(lambda x: (x * 2).sum(), torch.ones(3))
    assert not clean.found and "No NaN" in clean.message and clean.node == ""
    infinite = find_nan_origin(lambda x: torch.sqrt(x).sum(), torch.zeros(2))
    assert not infinite.found and "`SqrtBackward0` produced infinite gradients" in infinite.message


def test_a_function_that_raises_is_reported_not_crashed_on():
    def broken(x):
        return x @ torch.ones(2)

    origin = find_nan_origin(broken, torch.ones(3))
    assert not origin.found and "RuntimeError" in origin.message
    assert "return x @ torch.ones(2)" in origin.message
    assert repr(origin).startswith("❌ fn raised")


def test_the_caller_inputs_are_left_alone():
    x = torch.zeros(3)
    find_nan_origin(distance, x)
    assert not x.requires_grad and x.grad is None


# --- in-place changes to saved tensors -------------------------------------------------------


def exp_changed(x):
    y = x.exp()
    y.add_(1)
    return y.sum()


def sigmoid_changed(x):
    y = torch.sigmoid(x)
    y += 1
    return y.sum()


def factor_changed_by_setitem(x):
    h = x * 2
    z = h * h
    h[0] = 0
    return z.sum()


def relu_in_place_after_tanh(x):
    y = torch.tanh(x)
    y.relu_()
    return y.sum()


def weight_updated_before_backward(x, w):
    out = (x @ w).sum()
    with torch.no_grad():
        w.sub_(0.1)  # an optimizer step too early
    return out


def pow_then_clamp(x):
    y = x.exp()
    z = y**2
    y.clamp_(max=1.0)
    return z.sum()


INPLACE_CASES = [
    # (fn, inputs, made by, changing line, saved_by fragment)
    (exp_changed, (torch.ones(3),), "shape (3,)", "y.add_(1)", "y = x.exp()"),
    (sigmoid_changed, (torch.ones(3),), "shape (3,)", "y += 1", "torch.sigmoid(x)"),
    (factor_changed_by_setitem, (torch.ones(3),), "shape (3,)", "h[0] = 0", "z = h * h"),
    (relu_in_place_after_tanh, (torch.ones(3),), "shape (3,)", "y.relu_()", "torch.tanh"),
    (
        weight_updated_before_backward,
        (torch.ones(2, 3), torch.ones(3, 4)),
        "shape (3, 4), a leaf",
        "w.sub_(0.1)",
        "x @ w",
    ),
    (pow_then_clamp, (torch.ones(3),), "output 0 of Clamp", "y.clamp_(max=1.0)", "z = y**2"),
]


@pytest.mark.parametrize(
    ("fn", "inputs", "made_by", "changed", "saved"),
    INPLACE_CASES,
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_the_changed_tensor_the_saving_line_and_the_changing_line_are_named(
    fn, inputs, made_by, changed, saved
):
    report = explain_inplace_error(fn, *inputs)
    assert isinstance(report, InplaceReport)
    assert report.found, report.message
    assert made_by in report.tensor + report.message and report.found_version > report.saved_version
    assert changed in report.changed_by, report.message
    assert saved in report.saved_by, report.message
    assert "clone()" in report.message


def test_an_in_place_change_nobody_saved_is_fine():
    def harmless(x):
        y = x * 2  # multiplying by a number saves nothing of y
        y.add_(1)
        return y.sum()

    report = explain_inplace_error(harmless, torch.ones(3))
    assert not report.found and "nothing it needed was changed" in report.message


def test_another_error_is_reported_as_such():
    def leaf_in_place(x):
        x.add_(1)  # a leaf that requires grad
        return x.sum()

    report = explain_inplace_error(leaf_in_place, torch.ones(3))
    assert not report.found and "a leaf Variable that requires grad" in report.message


@pytest.mark.parametrize("helper", [find_nan_origin, explain_inplace_error])
def test_fn_must_be_callable(helper):
    with pytest.raises(TypeError, match="fn must be callable"):
        helper("loss", torch.ones(2))
