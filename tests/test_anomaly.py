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


# --- the audit of chapter 04: honest origins, value-based causes, no side effects ------------


def harmless_first(a, b):
    harmless = torch.sqrt(a).sum()  # an infinite gradient at a = 0, never NaN
    r = torch.sqrt((b**2).sum())  # NaN: 0 × ∞ at b = 0
    return harmless + r


def harmless_second(a, b):
    r = torch.sqrt((b**2).sum())
    harmless = torch.sqrt(a).sum()
    return harmless + r


@pytest.mark.parametrize("fn", [harmless_first, harmless_second], ids=lambda f: f.__name__)
def test_an_infinite_gradient_that_never_becomes_nan_is_not_blamed(fn):
    origin = find_nan_origin(fn, torch.tensor([0.0, 1.0]), torch.zeros(2))
    assert origin.node == "SqrtBackward0" and "r = torch.sqrt((b**2).sum())" in origin.source
    assert "the NaN appears in `PowBackward0`" in origin.message
    assert "Not the cause: `SqrtBackward0` (in " in origin.message  # the harmless one, named
    assert "harmless = torch.sqrt(a).sum()) also made" in origin.message


def where_entropy(p):
    return torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum()


def plain_entropy(p):
    return -(p * torch.log(p)).sum()


def test_a_zero_times_log_of_zero_is_traced_to_log_not_to_an_overflow():
    origin = find_nan_origin(where_entropy, torch.tensor([0.0, 0.5]))
    assert origin.stage == "backward" and origin.node == "MulBackward0", origin.message
    assert "forward computed as -inf, which started in `log`" in origin.message
    assert "double `torch.where`" in origin.message and "overflow" not in origin.message
    forward = find_nan_origin(plain_entropy, torch.tensor([0.0, 0.5]))
    assert forward.stage == "forward" and forward.node == "mul", forward.message
    assert "it met -inf, which started in `log`" in forward.message
    assert "0 × ∞ is NaN" in forward.message and "overflow" not in forward.message


def test_an_overflow_is_named_as_one():
    def overflow_discarded(x):
        return torch.where(x < 50, torch.exp(x), torch.zeros_like(x)).sum()

    origin = find_nan_origin(overflow_discarded, torch.tensor([100.0, 1.0]))
    assert origin.node == "ExpBackward0" and "`exp` overflowed" in origin.message
    softmax = find_nan_origin(overflowing_softmax, torch.tensor([100.0, 1.0]))
    assert "which started in `exp`" in softmax.message and "∞ / ∞ is NaN" in softmax.message


def test_a_nan_already_in_an_input_is_named_with_its_position():
    origin = find_nan_origin(lambda x, y: (x * y).sum(), torch.ones(2), torch.tensor([1.0, NAN]))
    assert origin.found and origin.stage == "input", origin.message
    assert "Input `y` (argument 1) already contains NaN, at position (1,)" in origin.message
    assert "an operation" not in origin.message


def test_a_nan_in_a_parameter_is_not_blamed_on_an_op():
    layer = torch.nn.Linear(3, 1)
    with torch.no_grad():
        layer.weight[0, 1] = NAN
    origin = find_nan_origin(lambda x: layer(x).sum(), torch.ones(2, 3))
    assert origin.stage == "forward" and origin.node == "linear", origin.message
    assert "No operation of fn made the NaN" in origin.message


def acosh_squared(x):
    return (torch.acosh(x) ** 2).sum()  # AcoshBackward0: 0 / 0 at x = 1, not in the table


def test_a_node_without_a_known_cause_gets_a_whole_sentence():
    for origin in (
        find_nan_origin(acosh_squared, torch.tensor([1.0, 2.0])),
        find_nan_origin(lambda p: torch.xlogy(p, p).sum(), torch.tensor([0.0, 0.5])),
    ):
        assert origin.stage == "backward", origin.message
        assert "Usually" not in origin.message and " Look at" not in origin.message
    message = find_nan_origin(acosh_squared, torch.tensor([1.0, 2.0])).message
    assert "`AcoshBackward0`'s own derivative is not finite" in message


def test_infinities_of_opposite_sign_summed_are_told_as_such():
    def cancelling(a):
        return (torch.sqrt(a) - torch.sqrt(a)).sum()

    origin = find_nan_origin(cancelling, torch.tensor([0.0, 1.0]))
    assert origin.found and origin.node == "SqrtBackward0", origin.message
    assert "infinite gradients of opposite sign were added" in origin.message


def test_no_grad_of_anything_is_changed():
    layer = torch.nn.Linear(3, 1)
    torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)  # the length of a zero vector: NaN in backward

    def model_loss(x):
        return torch.sqrt(layer(x).pow(2).sum())

    assert find_nan_origin(model_loss, torch.zeros(2, 3)).found
    assert layer.weight.grad is None and layer.bias.grad is None
    layer.weight.grad = torch.full((1, 3), 7.0)
    find_nan_origin(model_loss, torch.zeros(2, 3))
    torch.testing.assert_close(layer.weight.grad, torch.full((1, 3), 7.0))
    assert layer.bias.grad is None


def test_tuple_and_list_outputs_are_followed_and_other_results_explained():
    def two_outputs(x):
        return x.sum(), torch.sqrt((x**2).sum())

    origin = find_nan_origin(two_outputs, torch.zeros(3))
    assert origin.found and origin.node == "SqrtBackward0", origin.message
    assert find_nan_origin(lambda x: [x.sum(), x.exp().sum()], torch.ones(2)).message.startswith(
        "No NaN"
    )
    for returned, text in [("loss", "fn returned a str"), ((1.0,), "a tuple holding a float")]:
        report = find_nan_origin(lambda x, r=returned: r, torch.ones(2))
        assert report.raised and text in report.message and "TypeError" not in report.message
        assert "a tensor (a loss), or a tuple or list of tensors" in report.message


NAN = float("nan")


def harmless_then_real(x):
    counter = x * 1
    counter.add_(1)  # harmless: nothing saved counter
    y = x.exp()  # exp saves its output
    y.add_(1)  # the real culprit
    return (y + counter).sum()


def setitem_elsewhere(x):
    mask = torch.zeros(3)
    mask[0] = 1.0  # harmless: another tensor of the same shape
    y = x.exp()
    y[1] = 0.0
    return (y * mask).sum()


def through_view(x):
    y = x.exp()
    y.view(-1)[0] = 0.0
    return y.sum()


def through_slice(x):
    y = torch.sigmoid(x)
    y[:, 0].mul_(2)
    return y.sum()


def functional_relu(x):
    y = torch.tanh(x)
    torch.nn.functional.relu(y, inplace=True)
    return y.sum()


RELU_NET = torch.nn.Sequential(torch.nn.Sigmoid(), torch.nn.ReLU(inplace=True))


def module_relu(x):
    return RELU_NET(x).sum()


@pytest.mark.parametrize(
    ("fn", "shape", "changed"),
    [
        (harmless_then_real, (3,), "y.add_(1)"),
        (setitem_elsewhere, (3,), "y[1] = 0.0"),
        (through_view, (2, 3), "y.view(-1)[0] = 0.0"),
        (through_slice, (2, 3), "y[:, 0].mul_(2)"),
        (functional_relu, (3,), "relu(y, inplace=True)"),
        (module_relu, (2, 3), "return RELU_NET(x).sum() (`relu(inplace=True)`)"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_only_an_in_place_change_of_that_very_tensor_is_blamed(fn, shape, changed):
    report = explain_inplace_error(fn, torch.ones(shape))
    assert report.found, report.message
    assert changed in report.changed_by, report.message
    assert "counter" not in report.changed_by and "mask" not in report.changed_by


def test_an_unrelated_in_place_change_of_the_same_shape_is_never_guessed():
    def only_other_change(x):
        other = x * 1
        other.add_(1)  # same shape, and nothing saved it
        y = x.exp()
        y.data.add_(1)  # invisible to autograd: no version bump...
        y.add_(0)  # ...but this one is seen
        return (y + other).sum()

    report = explain_inplace_error(only_other_change, torch.ones(3))
    assert report.found and "y.add_(0)" in report.changed_by, report.message


def test_any_dtype_is_named():
    def half(x):
        y = x.to(torch.bfloat16).exp()
        y.add_(1)
        return y.float().sum()

    report = explain_inplace_error(half, torch.ones(3))
    assert report.found and not report.raised, report.message
    assert report.tensor == "bfloat16 tensor of shape (3,)" and "y.add_(1)" in report.changed_by


@pytest.mark.parametrize(
    ("kind", "dtype"),
    [
        ("torch.FloatTensor", "float32"),
        ("torch.DoubleTensor", "float64"),
        ("CPUBFloat16Type", "bfloat16"),
        ("torch.cuda.HalfTensor", "float16"),
        ("torch.LongTensor", "int64"),
    ],
)
def test_the_type_in_pytorchs_message_is_read_generically(kind, dtype):
    from autograd_helpers.anomaly._inplace import dtype_name

    assert dtype_name(kind) == dtype
