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
from tests.real_world import (
    ActNorm,
    AdditiveCoupling,
    BinarizeLinear,
    InvertibleModuleWrapper,
    ReversibleSequence,
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


def exp_times_equal(x):
    y = torch.exp(x)
    y *= 2  # the forum classic: `*=` on what exp saved
    return y.sum()


def index_put_on_saved(x):
    y = x.exp()
    y[torch.tensor([0, 2])] = 0.0  # index_put_ under the hood
    return y.sum()


PARAMETER = torch.ones(3, 4, requires_grad=True)  # given as an input, it stays a leaf

INPLACE_CASES = [
    # (fn, inputs, made by, changing line, saved_by fragment, who changed it)
    (exp_changed, (torch.ones(3),), "shape (3,)", "y.add_(1)", "y = x.exp()", "computed"),
    (sigmoid_changed, (torch.ones(3),), "shape (3,)", "y += 1", "torch.sigmoid(x)", "computed"),
    (
        factor_changed_by_setitem,
        (torch.ones(3),),
        "shape (3,)",
        "h[0] = 0",
        "z = h * h",
        "computed",
    ),
    (
        relu_in_place_after_tanh,
        (torch.ones(3),),
        "shape (3,)",
        "y.relu_()",
        "torch.tanh",
        "computed",
    ),
    (
        weight_updated_before_backward,
        (torch.ones(2, 3), PARAMETER),
        "shape (3, 4), a leaf",
        "w.sub_(0.1)",
        "x @ w",
        "parameter",
    ),
    (
        pow_then_clamp,
        (torch.ones(3),),
        "output 0 of Clamp",
        "y.clamp_(max=1.0)",
        "z = y**2",
        "computed",
    ),
    (exp_times_equal, (torch.ones(3),), "shape (3,)", "y *= 2", "torch.exp(x)", "computed"),
    (index_put_on_saved, (torch.ones(3),), "shape (3,)", "] = 0.0", "y = x.exp()", "computed"),
]


@pytest.mark.parametrize(
    ("fn", "inputs", "made_by", "changed", "saved", "changer"),
    INPLACE_CASES,
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_the_changed_tensor_the_saving_line_and_the_changing_line_are_named(
    fn, inputs, made_by, changed, saved, changer
):
    report = explain_inplace_error(fn, *inputs)
    assert isinstance(report, InplaceReport)
    assert report.found and not report.silent, report.message
    assert made_by in report.tensor + report.message and report.found_version > report.saved_version
    assert changed in report.changed_by, report.message
    assert saved in report.saved_by, report.message
    assert report.changer == changer, report.message
    # A copy fixes an op on a computed tensor, never an update of a parameter.
    assert ("clone()" in report.message) == (changer == "computed"), report.message


def test_an_in_place_change_nobody_saved_is_fine():
    def harmless(x):
        y = x * 2  # multiplying by a number saves nothing of y
        y.add_(1)
        return y.sum()

    report = explain_inplace_error(harmless, torch.ones(3))
    assert not report.found and "nothing it needed was changed" in report.message


def leaf_in_place(x):
    x.add_(1)
    return x.sum()


def test_another_error_is_reported_as_such():
    # Given with requires_grad=True, as a parameter, x stays a leaf: the error is the user's.
    report = explain_inplace_error(leaf_in_place, torch.ones(3, requires_grad=True))
    assert not report.found and report.raised, report.message
    assert "a leaf Variable that requires grad" in report.message
    assert "inside `torch.no_grad()` and after backward" in report.message  # what to do


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


# --- fn's own input changed in place (the in-place ReLU on a block's input) -----------------

LAYER = torch.nn.Linear(3, 3)


def block_relu_on_input(x):
    h = LAYER(x)  # linear saves its input, x
    x.relu_()  # the in-place ReLU on the block's input
    return (h + x).sum()


def sigmoid_then_input_changed(x):
    y = torch.sigmoid(x)  # sigmoid saves its result, not x
    x.add_(1)
    return y.sum()


def test_an_in_place_change_of_fns_input_is_diagnosed_not_called_a_leaf_error():
    x = torch.randn(2, 3)
    report = explain_inplace_error(block_relu_on_input, x)
    assert report.found and report.changer == "input", report.message
    assert "leaf" not in report.message, report.message
    assert (report.saved_version, report.found_version) == (0, 1)
    assert "x.relu_()" in report.changed_by and "h = LAYER(x)" in report.saved_by
    assert "fn's own input `x` (argument 0)" in report.message
    assert "x = x.relu()" in report.message and "Clone" not in report.message
    assert not x.requires_grad and x.grad is None and x._version == 0  # the caller's x


def test_an_in_place_change_of_an_input_nobody_saved_is_no_error_but_noted():
    report = explain_inplace_error(sigmoid_then_input_changed, torch.ones(3))
    assert not report.found and not report.raised, report.message
    assert "nothing it needed was changed in place" in report.message
    assert "fn changed its input `x` (argument 0) in place" in report.message
    assert "x.add_(1)" in report.message


def test_find_nan_origin_gives_fn_inputs_that_may_be_changed_in_place():
    def double_then_length(x):
        x.mul_(2)
        return torch.sqrt((x**2).sum())

    origin = find_nan_origin(double_then_length, torch.zeros(3))
    assert origin.found and origin.node == "SqrtBackward0", origin.message

    def relu_then_length(x):  # relu's backward masks the NaN out: torch's gradient is 0
        x.relu_()
        return torch.sqrt((x**2).sum())

    masked = find_nan_origin(relu_then_length, torch.zeros(3))
    assert not masked.found and masked.removed and masked.node == "SqrtBackward0"
    broken = find_nan_origin(block_relu_on_input, torch.ones(2, 3))
    assert broken.raised and "is at version 1; expected version 0" in broken.message
    assert "leaf Variable" not in broken.message and "explain_inplace_error" in broken.message


def test_gradients_still_reach_the_inputs_through_their_copies():
    def cancelling(a):
        return (torch.sqrt(a) - torch.sqrt(a)).sum()  # ∞ − ∞ where the paths meet, at a

    origin = find_nan_origin(cancelling, torch.tensor([0.0, 1.0]))
    assert "infinite gradients of opposite sign were added" in origin.message
    assert "Clone" not in origin.message, origin.message


# --- changes through .data: no error, a wrong gradient ----------------------------------------

WEIGHT = torch.nn.Parameter(torch.ones(3, 2))


def data_of_saved_output(x):
    y = x.sigmoid()  # saves y
    y.data.mul_(0)
    return y.sum()


def weight_zeroed_through_data(x):
    out = (x @ WEIGHT).sum()  # saves WEIGHT, for the gradient of x
    WEIGHT.data.zero_()
    return out


def test_a_change_through_data_is_found_though_backward_runs():
    report = explain_inplace_error(data_of_saved_output, torch.ones(3))
    assert report.found and report.silent and not report.raised, report.message
    assert "nothing it needed" not in report.message
    assert "y.data.mul_(0)" in report.changed_by and "y = x.sigmoid()" in report.saved_by
    assert report.saved_version == report.found_version == 0
    assert "`.data`" in report.message and "bypasses the version counter" in report.message
    assert "`.detach()`" in report.message and "`torch.no_grad()`" in report.message


def test_a_parameter_changed_through_data_after_use_is_found():
    with torch.no_grad():
        WEIGHT.fill_(1.0)
    report = explain_inplace_error(weight_zeroed_through_data, torch.ones(2, 3))
    assert report.found and report.silent and report.changer == "parameter", report.message
    assert "WEIGHT.data.zero_()" in report.changed_by and "x @ WEIGHT" in report.saved_by
    assert "update it after backward" in report.message


def test_changes_through_data_or_detach_that_autograd_can_judge_are_not_called_silent():
    def before_the_save(x):
        y = x * 1
        y.data.mul_(2)  # before anything saved y: harmless
        return (y * y).sum()

    def through_detach(x):
        y = x.sigmoid()
        y.detach().mul_(0)  # shares the version counter: autograd raises
        return y.sum()

    harmless = explain_inplace_error(before_the_save, torch.ones(3))
    assert not harmless.found and "nothing it needed" in harmless.message
    seen = explain_inplace_error(through_detach, torch.ones(3))
    assert seen.found and not seen.silent and "y.detach().mul_(0)" in seen.changed_by


def test_batch_norm_updating_its_running_statistics_is_not_a_silent_change():
    norm = torch.nn.BatchNorm1d(3)

    def twice(x):
        return (norm(x) + norm(2 * x)).pow(2).sum()

    report = explain_inplace_error(twice, torch.randn(4, 3))
    assert not report.found, report.message


# --- an optimizer's step between forward and backward ----------------------------------------


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
def test_a_parameter_updated_by_an_optimizer_is_not_fixed_with_a_copy(optimizer):
    torch.manual_seed(0)
    generator = torch.nn.Linear(2, 2)
    critic = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt_d = optimizer(critic.parameters(), lr=0.1)

    def gan_step(z):
        fake = generator(z)
        d_fake = critic(fake)
        loss_d = d_fake.mean()
        opt_d.zero_grad()
        loss_d.backward(retain_graph=True)
        opt_d.step()  # changes what d_fake's graph saved
        return -d_fake.mean()  # the generator's loss, through the old graph

    report = explain_inplace_error(gan_step, torch.randn(4, 2))
    assert report.found and report.changer == "optimizer", report.message
    assert "opt_d.step()" in report.changed_by and "d_fake = critic(fake)" in report.saved_by
    assert "clone" not in report.message and "a parameter of shape (1, 4)" in report.message
    assert "call every `backward()` before any `step()`" in report.message
    assert "run the forward pass again after the update" in report.message
    assert "`.detach()` what the second loss should not differentiate" in report.message


# --- NaN from rows that a mask emptied --------------------------------------------------------

EMPTY_ROW = torch.tensor([[True, True, True], [False, True, False]])  # row 0: nothing left


def masked_logsumexp(x):
    return x.masked_fill(EMPTY_ROW, float("-inf")).logsumexp(-1).sum()


def masked_softmax(x):
    return x.masked_fill(EMPTY_ROW, float("-inf")).softmax(-1)[:, 0].sum()


def masked_cross_entropy(x):
    logits = x.masked_fill(EMPTY_ROW, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, torch.tensor([0, 0]))


def added_mask_logsumexp(x):  # the -inf enters by addition: its NaN gradient reaches x
    return (x + torch.zeros(2, 3).masked_fill(EMPTY_ROW, float("-inf"))).logsumexp(-1).sum()


def test_a_nan_that_masked_fill_removes_in_backward_is_not_a_nan_origin():
    origin = find_nan_origin(masked_logsumexp, torch.ones(2, 3))
    x = torch.ones(2, 3, requires_grad=True)
    (grad,) = torch.autograd.grad(masked_logsumexp(x), x)
    assert bool(grad.isfinite().all())  # torch: the fully masked row's NaN is masked out
    assert not origin.found and origin.removed, origin.message
    assert origin.node == "LogsumexpBackward0" and "removed before it reaches" in origin.message


def test_logsumexp_of_a_row_of_only_minus_inf_is_explained_as_such():
    origin = find_nan_origin(added_mask_logsumexp, torch.ones(2, 3))
    assert origin.stage == "backward" and origin.node == "LogsumexpBackward0", origin.message
    assert "holds only -inf (made by `masked_fill`" in origin.message
    assert "exp(−inf − (−inf))" in origin.message and "∞ − ∞ is NaN" in origin.message
    assert "at least one finite entry" in origin.message
    assert "where" not in origin.message and "0 × ∞" not in origin.message  # not called


@pytest.mark.parametrize(
    ("fn", "op"), [(masked_softmax, "softmax"), (masked_cross_entropy, "cross_entropy")]
)
def test_a_row_op_over_a_row_of_only_minus_inf_is_explained_as_such(fn, op):
    origin = find_nan_origin(fn, torch.ones(2, 3))
    assert origin.stage == "forward" and origin.node == op, origin.message
    assert "holds only -inf" in origin.message and "−inf − (−inf)" in origin.message
    assert "at least one finite entry" in origin.message and "where" not in origin.message


def test_torch_where_is_only_mentioned_when_fn_called_it():
    def clamped_overflow(x):
        return torch.exp(x).clamp(max=1e30).sum()  # exp(100) = inf, clamped: NaN in backward

    def discarded_overflow(x):
        return torch.where(x < 50, torch.exp(x), torch.zeros_like(x)).sum()

    clamped = find_nan_origin(clamped_overflow, torch.tensor([100.0, 1.0]))
    assert clamped.node == "ExpBackward0" and "`exp` overflowed" in clamped.message
    assert "where" not in clamped.message, clamped.message
    discarded = find_nan_origin(discarded_overflow, torch.tensor([100.0, 1.0]))
    assert "the branch `torch.where` does not take" in discarded.message


# --- more bugs from the forums -----------------------------------------------------------------


def test_an_in_place_relu_after_a_layer_is_judged_by_what_that_layer_saved():
    after_linear = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(inplace=True))
    after_tanh = torch.nn.Sequential(
        torch.nn.Linear(3, 3), torch.nn.Tanh(), torch.nn.ReLU(inplace=True)
    )
    fine = explain_inplace_error(lambda x: after_linear(x).sum(), torch.randn(2, 3))
    assert not fine.found and not fine.raised, fine.message  # linear saves no output
    broken = explain_inplace_error(lambda x: after_tanh(x).sum(), torch.randn(2, 3))
    assert broken.found and broken.changer == "computed", broken.message
    assert "relu(inplace=True)" in broken.changed_by


def test_index_put_on_a_view_of_a_parameter_is_the_users_own_leaf_error():
    weight = torch.nn.Parameter(torch.ones(3))

    def mask_weight(x):
        weight[torch.tensor([0])] = 0.0  # index_put_ on a leaf that requires grad
        return (x * weight).sum()

    report = explain_inplace_error(mask_weight, torch.ones(3))
    assert report.raised and not report.found, report.message
    assert "a leaf Variable that requires grad" in report.message
    assert "weight[torch.tensor([0])] = 0.0" in report.message
    assert "w2 = w * mask" in report.message


def test_the_gradient_of_a_norm_at_zero_is_judged_by_what_torch_computes():
    # vector_norm's backward is defined as 0 at 0; dividing by the norm is 0 / 0 in forward.
    clean = find_nan_origin(lambda x: torch.linalg.vector_norm(x), torch.zeros(3))
    assert not clean.found, clean.message
    unit = find_nan_origin(lambda x: (x / x.norm()).sum(), torch.zeros(3))
    assert unit.stage == "forward" and unit.node == "div", unit.message
    assert "0 / 0 is NaN" in unit.message


# --- the second audit: training steps that run backward themselves, side effects, dtypes -----


def gan(optimizer=torch.optim.Adam):
    """The shape of PyTorch issue #39141 and MorvanZhou's 406_GAN tutorial."""
    torch.manual_seed(0)
    generator = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    discriminator = torch.nn.Sequential(
        torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1), torch.nn.Sigmoid()
    )
    opt_d = optimizer(discriminator.parameters(), lr=1e-3)
    opt_g = optimizer(generator.parameters(), lr=1e-3)

    def train_step(ideas, paintings):
        fake = generator(ideas)
        prob_real = discriminator(paintings)
        prob_fake = discriminator(fake)
        d_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
        g_loss = torch.mean(torch.log(1.0 - prob_fake))
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()  # changes what prob_fake's graph saved, before g_loss's backward
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return g_loss

    return train_step


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
def test_a_gan_step_that_runs_backward_itself_blames_the_optimizer_step(optimizer):
    report = explain_inplace_error(gan(optimizer), torch.randn(4, 4), torch.randn(4, 2))
    assert report.found and report.changer == "optimizer", report.message
    assert "opt_d.step()" in report.changed_by and "prob_fake = discriminator(fake)" in (
        report.saved_by
    )
    assert "clone" not in report.message and "a copy would not help" in report.message.lower()
    assert "call every `backward()` before any `step()`" in report.message
    assert "the backward pass fn ran itself, in train_step: g_loss.backward()," in report.message


def test_one_model_stepping_before_its_own_backward_blames_the_step():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net(torch.randn(4, 3)).pow(2).mean().backward()  # the previous step left gradients

    def train_step(x):
        loss = net(x).pow(2).mean()
        opt.step()  # too early: before this loss's backward
        loss.backward()
        return loss.detach()

    report = explain_inplace_error(train_step, torch.randn(4, 3))
    assert report.found and report.changer == "optimizer", report.message
    assert "opt.step()" in report.changed_by and "loss = net(x)" in report.saved_by
    assert "clone" not in report.message
    assert "call every `backward()` before any `step()`" in report.message


def test_a_step_whose_own_backward_works_is_not_blamed_for_the_tools_backward():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def train_step(x):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    report = explain_inplace_error(train_step, torch.randn(4, 3))
    assert not report.found and not report.raised, report.message
    assert "second time" not in report.message
    assert "fn's own backward pass (in train_step: loss.backward()) ran" in report.message


def test_a_parameter_renormalised_by_embedding_max_norm_is_fixed_with_a_copy():
    # PyTorch's documentation of nn.Embedding's max_norm, where the fix is `.clone()`.
    torch.manual_seed(0)
    emb = torch.nn.Embedding(3, 5, max_norm=1.0)

    def scores(idx, W):
        a = emb.weight @ W.t()  # saves the weight
        b = emb(idx) @ W.t()  # renormalises the rows of the weight it looks up, in place
        return a.sum() + b.sum()

    report = explain_inplace_error(scores, torch.tensor([1, 2]), torch.randn(7, 5))
    assert report.found and report.changer == "forward", report.message
    assert "a = emb.weight @ W.t()" in report.saved_by
    assert "b = emb(idx) @ W.t()" in report.changed_by
    assert "`emb.weight.clone() @ W.t()`" in report.message and "max_norm" in report.message
    assert "would not help" not in report.message and "too early" not in report.message.replace(
        "not an update made too early", ""
    )


def test_a_parameter_updated_by_hand_too_early_still_gets_the_order_advice():
    report = explain_inplace_error(weight_updated_before_backward, torch.ones(2, 3), PARAMETER)
    assert report.changer == "parameter" and "update after backward" in report.message


def nan_training_step(returns):
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    with torch.no_grad():
        net.bias.zero_()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def train_step(x):
        opt.zero_grad()
        loss = torch.sqrt((net(x) ** 2).sum())  # √0: NaN gradient
        loss.backward()
        opt.step()
        return {"loss": loss, "detached": loss.detach(), "nothing": None}[returns]

    return train_step, net


@pytest.mark.parametrize("returns", ["loss", "detached", "nothing"])
def test_a_training_step_that_runs_backward_itself_is_traced(returns):
    train_step, net = nan_training_step(returns)
    origin = find_nan_origin(train_step, torch.zeros(4, 3))
    assert origin.found and not origin.raised, origin.message
    assert origin.stage == "backward" and origin.node == "SqrtBackward0", origin.message
    assert "loss = torch.sqrt((net(x) ** 2).sum())" in origin.source
    assert "the backward pass fn ran itself (in train_step: loss.backward())" in origin.message
    assert "second time" not in origin.message and "fn raised" not in origin.message
    assert "put NaN into the parameters" in origin.message  # the step really ran
    assert bool(net.weight.grad.isnan().all())  # what the audit found there


def test_a_clean_training_step_that_runs_backward_itself_is_clean():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)

    def train_step(x):
        loss = net(x).pow(2).mean()
        loss.backward()
        return loss

    origin = find_nan_origin(train_step, torch.randn(4, 3))
    assert not origin.found and not origin.raised, origin.message
    assert "the backward pass fn ran itself (in train_step: loss.backward())" in origin.message


def test_the_tools_own_backward_of_a_freed_graph_is_never_blamed_on_fn():
    x = torch.ones(2, requires_grad=True)
    loss = (x.exp() * 2).sum()
    loss.backward()  # frees the graph before the tool sees it

    origin = find_nan_origin(lambda t: loss, torch.ones(1))
    assert not origin.raised and "fn raised" not in origin.message, origin.message
    assert "already freed by an earlier backward" in origin.message


def overflow_to_nan(x):
    e = torch.exp(x)
    return (e / e.sum()).sum()  # inf / inf


@pytest.mark.parametrize(
    ("dtype", "x", "largest", "limit"),
    [
        (torch.float16, 12.0, "65504", "11.1"),
        (torch.bfloat16, 100.0, "3.4e38", "88.7"),
        (torch.float32, 100.0, "3.4e38", "88.7"),
        (torch.float64, 800.0, "1.8e308", "709.8"),
    ],
    ids=str,
)
def test_the_overflow_message_follows_the_dtype_that_overflowed(dtype, x, largest, limit):
    origin = find_nan_origin(overflow_to_nan, torch.tensor([x, 1.0], dtype=dtype))
    name = str(dtype).removeprefix("torch.")
    assert origin.stage == "forward" and "`exp` overflowed" in origin.message, origin.message
    assert f"{name} ends near {largest}; `exp` of more than about {limit} is inf" in (
        origin.message
    )
    assert (dtype in (torch.float16, torch.bfloat16)) == ("`x.float()`" in origin.message)


def test_a_tensor_changed_by_an_unknown_op_gets_no_guessed_fix():
    from autograd_helpers.anomaly._advice import Changer, inplace_fix

    fix = inplace_fix(Changer(""))
    assert "could not be found" in fix and "if it is a tensor fn computed" in fix


def test_a_graph_freed_before_fn_is_said_so_by_explain_inplace_error():
    x = torch.ones(2, requires_grad=True)
    loss = (x.exp() * 2).sum()
    loss.backward()

    report = explain_inplace_error(lambda t: loss, torch.ones(1))
    assert not report.found and not report.raised, report.message
    assert "already freed by an earlier backward" in report.message


# --- the re-audit on real-world code: hooks, attention masks, loops, checkpoint ------------


def test_a_nan_made_by_a_tensor_hook_names_the_hook_not_summed_infinities():
    def hooked(x):
        y = x * 2
        y.register_hook(lambda g: g * float("nan"))
        return y.sum()

    origin = find_nan_origin(hooked, torch.ones(3))
    assert origin.stage == "backward" and origin.node == "hook", origin.message
    assert "y.register_hook" in origin.message and "No operation made the NaN" in origin.message
    assert "opposite sign" not in origin.message, origin.message


def test_a_nan_made_by_a_module_forward_hook_names_the_hook():
    layer = torch.nn.Linear(3, 3)
    handle = layer.register_forward_hook(lambda module, args, out: out * float("nan"))
    try:
        origin = find_nan_origin(lambda x: layer(x).sum(), torch.ones(2, 3))
    finally:
        handle.remove()
    assert origin.stage == "forward" and origin.node == "forward hook of Linear", origin.message
    assert "not an operation of the model" in origin.message and "Fix the hook" in origin.message


def test_a_nan_made_by_a_module_backward_hook_is_not_called_a_custom_function():
    layer = torch.nn.Linear(3, 3)
    handle = layer.register_full_backward_hook(lambda m, gi, go: (gi[0] * float("nan"),))
    try:
        origin = find_nan_origin(lambda x: layer(x).sum(), torch.ones(2, 3))
    finally:
        handle.remove()
    assert origin.stage == "backward", origin.message
    assert "register_full_backward_hook" in origin.message, origin.message
    assert "custom Function" not in origin.message, origin.message


def test_attention_with_an_all_masked_row_explains_the_mask():
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    mask = torch.tensor([[False, False], [True, True]])  # the second sequence: all padding

    def attend(q):
        return attention(q, q, q, key_padding_mask=mask)[0].sum()

    origin = find_nan_origin(attend, torch.randn(2, 2, 4))
    assert origin.stage == "forward", origin.message
    assert "`key_padding_mask` row 1 masks all 2 keys" in origin.message, origin.message
    assert "softmax of a row of only -inf is NaN" in origin.message
    assert "fn did not make" not in origin.message, origin.message


def test_a_training_loop_names_the_iteration_where_the_nan_first_appears():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

    def loop(x):
        for step in range(6):
            optimizer.zero_grad()
            shift = 10.0 if step >= 3 else 0.0  # the argument turns negative at step 3
            loss = torch.sqrt(model(x).sum() * 0 + 1 - shift)
            loss.backward()
            optimizer.step()
        return loss

    origin = find_nan_origin(loop, torch.ones(4, 2))
    assert origin.stage == "forward" and origin.node == "sqrt", origin.message
    assert "after 3 backward passes" in origin.message, origin.message
    assert "iteration 4 (step 3, counting from 0)" in origin.message, origin.message


def test_a_nan_in_the_backward_of_a_later_iteration_is_numbered():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def loop(x):
        for step in range(3):
            (torch.sqrt(w * (step < 2) + x) * 1).sum().backward()  # sqrt(0) at step 2

    origin = find_nan_origin(loop, torch.zeros(2))
    assert origin.stage == "backward", origin.message
    assert "the 3rd of the 3 backward passes" in origin.message, origin.message
    assert "iteration 3 (step 2, counting from 0)" in origin.message


def test_a_reentrant_checkpoint_is_traced_and_not_blamed_as_a_custom_function():
    import torch.utils.checkpoint as checkpoint

    layer = torch.nn.Linear(3, 3)

    def fn(x):
        inner = lambda t: layer(torch.sqrt(t) * 0)  # noqa: E731
        return checkpoint.checkpoint(inner, x * 1, use_reentrant=True).sum()

    origin = find_nan_origin(fn, torch.zeros(3))
    assert origin.stage == "backward" and not origin.raised, origin.message
    assert "use_reentrant=True" in origin.message and "custom Function" not in origin.message
    assert layer.weight.grad is None  # the backward that filled .grad put it back


def test_eigh_with_repeated_eigenvalues_is_not_told_to_clamp():
    def eigenvectors(a):
        return torch.linalg.eigh(a + a.T)[1].sum()

    origin = find_nan_origin(eigenvectors, torch.eye(3))
    assert origin.node == "LinalgEighBackward0", origin.message
    assert "differences of eigenvalues" in origin.message and "eigvalsh" in origin.message
    assert "does not fix it" in origin.message, origin.message


def test_a_float16_matmul_overflow_is_fixed_in_float32_not_with_an_epsilon():
    def product(a):
        return ((a @ a) - (a @ a)).sum()

    origin = find_nan_origin(product, torch.full((4, 4), 300.0, dtype=torch.float16))
    assert "`matmul` overflowed (float16 ends near 65504)" in origin.message, origin.message
    assert "a.float() @ b.float()" in origin.message and "autocast" in origin.message
    assert "before `exp`" not in origin.message, origin.message


def test_an_infinite_ctc_loss_is_fixed_with_zero_infinity():
    log_probs = torch.linspace(-3, -1, 15).reshape(3, 1, 5).log_softmax(2)
    targets = torch.tensor([[1, 2, 3, 4, 1, 2]])  # 6 labels cannot fit in 3 time steps

    def ctc(lp):
        return torch.nn.functional.ctc_loss(lp, targets, torch.tensor([3]), torch.tensor([6]))

    origin = find_nan_origin(ctc, log_probs)
    assert origin.found and "zero_infinity=True" in origin.message, origin.message


def test_the_underflow_figures_of_a_custom_backward_are_exact():
    from autograd_helpers.anomaly._causes import CUSTOM

    for text, value, square in [("2.6e-23", 2.6e-23, 0.0), ("1.1e-19", 1.08e-19, None)]:
        assert text in CUSTOM
        x = torch.tensor(value)
        if square is not None:
            assert float(x * x) == square
    assert float(torch.tensor(2.7e-23) ** 2) > 0  # just above: subnormal, not 0
    assert (torch.tensor(1.08e-19) ** 2) < torch.finfo(torch.float32).smallest_normal
    assert (torch.tensor(1.09e-19) ** 2) >= torch.finfo(torch.float32).smallest_normal
    assert "5.4e-20" in CUSTOM and torch.isinf(1 / torch.tensor(5.4e-20) ** 2)


def test_a_frozen_parameter_changed_in_place_is_not_said_to_require_grad():
    layer = torch.nn.Linear(3, 3)
    layer.weight.requires_grad_(False)

    def fn(x):
        y = layer(x)
        with torch.no_grad():
            layer.weight.mul_(0.5)
        return y.sum()

    report = explain_inplace_error(fn, torch.ones(4, 3))
    assert report.found, report.message
    assert "a leaf that requires grad" not in report.message, report.message
    assert "frozen, `requires_grad=False`" in report.message


def test_a_hook_on_a_parameter_registered_outside_fn_is_named():
    weight = torch.ones(3, requires_grad=True)
    weight.register_hook(lambda grad: grad * float("nan"))

    origin = find_nan_origin(lambda x: (x * weight).sum(), torch.ones(3))
    assert origin.stage == "backward" and origin.node == "hook", origin.message
    assert "a leaf of shape (3,)" in origin.message and "outside fn" in origin.message


def test_running_statistics_an_eval_forward_saved_and_a_train_forward_changed_are_caught():
    # PyTorch updates them without a version bump: the eval-mode gradient is silently wrong.
    norm = torch.nn.BatchNorm1d(2)

    def fn(x):
        norm.eval()
        y = norm(x)
        norm.train()
        norm(x * 5 + 3)
        return (y * torch.arange(2.0)).sum()

    report = explain_inplace_error(fn, torch.linspace(-1, 1, 8).reshape(4, 2))
    assert report.found and report.silent, report.message
    assert "batch norm's `running_" in report.message and "`.data`" not in report.message
    assert "unbiased" in report.message and "momentum" in report.message


def test_a_train_mode_batch_norm_called_twice_is_fine():
    norm = torch.nn.BatchNorm1d(2)

    def fn(x):
        y = norm(x)
        norm(x * 5 + 3)  # updates the running statistics; y's backward uses the batch's own
        return (y * torch.arange(2.0)).sum()

    report = explain_inplace_error(fn, torch.linspace(-1, 1, 8).reshape(4, 2))
    assert not report.found, report.message


# --- from the real-world audit: what torch's own gradients say comes first ---------------------


def test_a_nan_that_a_mask_removes_before_the_inputs_is_not_a_nan_origin():
    def masked_root(x):
        y = x.masked_fill(x < 0, 0.0)
        return (y.sqrt() * (x > 0)).sum()

    x = torch.tensor([-1.0, 4.0], requires_grad=True)
    (grad,) = torch.autograd.grad(masked_root(x), x)
    assert torch.equal(grad, torch.tensor([0.0, 0.25]))  # torch: no NaN at all
    origin = find_nan_origin(masked_root, torch.tensor([-1.0, 4.0]))
    assert not origin.found and origin.removed, origin.message
    assert (
        origin.node == "SqrtBackward0" and "removed before it reaches the inputs" in origin.message
    )
    assert "double" not in origin.message  # no fix for a NaN that harms nothing


def test_a_nan_that_a_hook_cleans_is_not_a_nan_origin():
    def cleaned(x):
        y = x * 1
        y.register_hook(lambda g: torch.nan_to_num(g))
        return (y.sqrt() * 0).sum()

    origin = find_nan_origin(cleaned, torch.tensor([0.0, 4.0]))
    assert not origin.found and origin.removed and origin.node == "SqrtBackward0", origin.message


def test_a_hook_that_turns_an_infinity_into_nan_is_named_not_a_sum_of_paths():
    def normalised(x):
        h = x * 2
        h.register_hook(lambda grad: grad / grad.norm())
        return torch.sqrt(h - h.detach()).sum()

    origin = find_nan_origin(normalised, torch.ones(3))
    assert origin.found and origin.node == "hook", origin.message
    assert "two paths" not in origin.message and "∞ − ∞ is NaN" not in origin.message
    assert "sent an infinity there, not NaN, made by `SqrtBackward0`" in origin.message
    assert "received that infinity and returned NaN" in origin.message


def test_a_diverging_optimizer_step_is_blamed_not_the_overflowing_pow():
    def train():
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1e18)
        inputs, targets = torch.randn(8, 2), torch.randn(8, 1)
        for _ in range(6):
            opt.zero_grad()
            loss = ((model(inputs) - targets) ** 2).mean()
            loss.backward()
            opt.step()
        return loss

    origin = find_nan_origin(train)
    assert origin.found and origin.stage == "forward" and origin.node == "optimizer step"
    assert "put inf into the parameters" in origin.message, origin.message
    assert "learning rate is too high" in origin.message and "`linear`" in origin.message
    assert "float64" not in origin.message and "scale its inputs down" not in origin.message


def test_a_float16_overflow_under_grad_scaler_is_normal_scaler_behaviour():
    def train():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=2**30)
        inputs, targets = torch.randn(8, 4) * 100, torch.randn(8, 1)
        for _ in range(3):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    origin = find_nan_origin(train)
    assert origin.node.startswith("ToCopyBackward"), origin.message
    assert "normal GradScaler behaviour" in origin.message and "init_scale" in origin.message
    assert "2**30" in origin.message and "epsilon, a clamp" not in origin.message


def test_a_loop_with_two_backward_passes_per_iteration_is_counted_in_iterations():
    def train():
        torch.manual_seed(0)
        gen, disc = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
        for i in range(3):
            fake = gen(torch.randn(4, 2))
            d_loss = disc(fake.detach()).mean()
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = torch.sqrt(disc(fake).abs().sum() * 0) if i == 2 else disc(fake).mean()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        return g_loss.detach()

    origin = find_nan_origin(train)
    assert origin.found and "6th of the 6 backward passes" in origin.message, origin.message
    assert "2 backward passes per iteration, iteration 3 (step 2" in origin.message
    assert "iteration 6" not in origin.message


def test_a_write_to_another_part_of_a_saved_views_base_is_explained_as_a_shared_counter():
    def write_beside(x):
        y = x * 2
        t = y[0].sin()  # saves the view y[0]
        y[1:].zero_()  # writes elsewhere in y
        return t + y.sum()

    report = explain_inplace_error(write_beside, torch.ones(3))
    assert report.found and "The values it saved did not change" in report.message
    assert "share their base's version counter" in report.message, report.message
    assert "`t = y[0].clone().sin()`" in report.message

    def write_on(x):  # the saved part itself is written (to the same values): no such claim
        y = x * 2
        t = y[0].sin()
        y[0].mul_(1)
        return t + y.sum()

    same_part = explain_inplace_error(write_on, torch.ones(3))
    assert same_part.found and "did not change" not in same_part.message


def test_a_recurrent_state_carried_across_iterations_leads_with_detach():
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(3, 4)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)

    def train(xs):
        h = torch.zeros(1, 4)
        for t in range(3):
            h = cell(xs[t : t + 1], h)
            loss = h.pow(2).sum()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
        return loss.detach()

    report = explain_inplace_error(train, torch.randn(3, 3))
    assert report.found and report.changer == "optimizer", report.message
    fix = report.message.split("changed it in place). ")[-1]
    assert fix.startswith("This backward, run in a loop, reached back"), report.message
    assert "`h = h.detach()`" in fix and fix.index("h.detach()") < fix.index("as in a GAN")


def test_a_buffer_changed_in_place_is_called_a_buffer_not_a_parameter():
    bn = torch.nn.BatchNorm1d(3).eval()

    def fn(x):
        y = bn(x)
        bn.running_var.add_(1)
        return y.sum()

    report = explain_inplace_error(fn, torch.randn(4, 3))
    assert report.found and "It is a buffer" in report.message, report.message
    assert "a parameter, a leaf" not in report.message


def test_a_gradient_already_nan_before_fns_backward_is_not_called_removed():
    weight = torch.zeros(3, requires_grad=True)
    weight.grad = torch.full((3,), float("nan"))  # left by an earlier run: cannot be told apart

    def step(x):
        y = (x * weight).masked_fill(torch.ones(3, dtype=torch.bool), 0.0)
        loss = (y.sqrt() * 0).sum()
        loss.backward()
        return loss.detach()

    origin = find_nan_origin(step, torch.ones(3))
    assert origin.found and not origin.removed, origin.message


# --- from the second-round audit ---------------------------------------------------------------


def _overflow_then_mul_(x):
    y = torch.exp(x * 200)
    y.mul_(0)
    return y.sum()


def _sqrt_in_place(x):
    return (x - 2).sqrt_().sum()


def _divide_zeros_in_place(x):
    y = torch.zeros_like(x)
    y /= 0
    return y.sum()


def _foreach_mul_(x):
    y = torch.exp(x * 200)
    torch._foreach_mul_([y], 0.0)
    return y.sum()


@pytest.mark.parametrize(
    ("fn", "op", "phrase"),
    [
        (_overflow_then_mul_, "mul", "0 × ∞ is NaN"),
        (_sqrt_in_place, "sqrt", "square root of a negative"),
        (_divide_zeros_in_place, "div", "0 / 0"),
        (_foreach_mul_, "foreach_mul", "0 × ∞ is NaN"),
    ],
)
def test_an_in_place_op_that_makes_the_nan_is_named_not_its_input(fn, op, phrase):
    origin = find_nan_origin(fn, torch.ones(3))
    assert origin.found and origin.stage == "forward" and origin.node == op, origin.message
    assert phrase in origin.message and "did not compute" not in origin.message


def test_a_nan_made_by_an_earlier_backward_is_named_before_a_later_forwards():
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))

    def loop():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.exp(model(x) * 100).mean()
            loss.backward()
            opt.step()

    origin = find_nan_origin(loop)
    assert origin.found and origin.stage == "backward", origin.message
    assert "AddmmBackward0" in origin.message and "∞ − ∞" in origin.message
    assert "1st of the 3 backward passes" in origin.message
    assert "did not compute" not in origin.message


def test_a_nan_removed_on_one_inputs_path_is_not_blamed_for_anothers():
    def fn(x, y):
        a = torch.sqrt(x)
        b = torch.where(y > 0, torch.sqrt(y.clamp(min=0)), torch.zeros_like(y))
        return (a * 0).sum() + b.sum()

    origin = find_nan_origin(fn, torch.tensor([0.0, 1.0]), torch.tensor([-1.0, 4.0]))
    assert origin.found and origin.node == "SqrtBackward0", origin.message
    assert "a = torch.sqrt(x)" in origin.source, origin.source


def test_a_train_mode_batch_norms_running_statistics_are_left_as_found():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))

    def nan_fn(x):
        return torch.sqrt(model(x)).sum()

    def inplace_fn(x):
        y = model(x).exp()
        y.add_(1)
        return y.sum()

    norm = model[1]
    mean, tracked = norm.running_mean, norm.num_batches_tracked
    assert find_nan_origin(nan_fn, torch.randn(4, 3)).node == "sqrt"
    assert explain_inplace_error(inplace_fn, torch.randn(4, 3)).found
    assert norm.running_mean is mean and torch.equal(mean, torch.zeros(3))
    assert norm.num_batches_tracked is tracked and int(tracked) == 0
    assert model.training


class _Decaying(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("scale", torch.ones(3))

    def forward(s, x):  # noqa: N805 - `self` by another name
        out = s.lin(x) * s.scale
        s.scale.mul_(0.9)
        return out


def test_a_buffer_its_modules_forward_changes_after_using_it_gets_a_copy_as_the_fix():
    model = _Decaying()
    report = explain_inplace_error(lambda x: model(x).sum(), torch.randn(2, 3))
    assert report.found, report.message
    assert "A copy would not help" not in report.message
    assert "`s.scale.clone()`" in report.message and "`s.scale = s.scale.mul(0.9)`" in (
        report.message
    )
    assert torch.equal(model.scale, torch.ones(3))  # the buffer is left as found


def test_a_scaled_float16_loss_that_overflows_in_its_mul_is_the_scalers_normal_behaviour():
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))

    def step():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = (model(x) * 300).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    origin = find_nan_origin(step)
    assert origin.found and origin.node == "MulBackward0", origin.message
    assert "normal GradScaler behaviour" in origin.message and "2**16" in origin.message
    assert "epsilon, a clamp" not in origin.message


def test_a_setitem_outside_a_saved_view_is_explained_by_the_shared_version_counter():
    def apart(x):
        y = x * 2
        z = y[0:2].sin()
        y[3] = 5.0
        return z.sum() + y.sum()

    def inside(x):
        y = x * 2
        z = y[0:2].sin()
        y[1] = 5.0
        return z.sum() + y.sum()

    report = explain_inplace_error(apart, torch.randn(5))
    assert report.found and "share their base's version counter" in report.message
    report = explain_inplace_error(inside, torch.randn(5))
    assert report.found and "share their base's version counter" not in report.message


# --- issue 25: the library on real code --------------------------------------------------------


def _invertible():
    torch.manual_seed(0)
    return InvertibleModuleWrapper(AdditiveCoupling())


def test_a_function_refusing_autograd_grad_is_run_with_backward_not_blamed_on_fn():
    # memcnn: "not compatible with .grad(), please use .backward()". The user's
    # loss.backward() works, so the tool must not report it as fn's own error.
    block, x = _invertible(), torch.randn(3, 4)
    x.requires_grad_()
    block(x).sum().backward()  # the user's way works
    origin = find_nan_origin(lambda t: block(t).sum(), x.detach())
    assert not origin.found and not origin.raised, origin.message
    report = explain_inplace_error(lambda t: block(t).sum(), x.detach())
    assert not report.found and not report.raised, report.message
    assert "not compatible with .grad()" not in origin.message + report.message


def test_a_nan_made_behind_a_function_refusing_autograd_grad_is_still_found():
    block = _invertible()

    def loss(x):
        return torch.sqrt(block(x)).sum()  # negative entries: NaN in forward...

    def loss_at_zero(x):
        return torch.sqrt((block(x) * 0).pow(2).sum())  # ...and at 0, in backward only

    assert find_nan_origin(loss, torch.randn(3, 4)).stage == "forward"
    origin = find_nan_origin(loss_at_zero, torch.randn(3, 4))
    assert origin.found and origin.stage == "backward", origin.message
    assert origin.node == "SqrtBackward0", origin.message
    assert all(p.grad is None for p in block.parameters())  # run with .backward(), put back


def test_a_backward_that_writes_grad_itself_leaves_every_grad_as_found_and_says_so():
    # revtorch: backward calls .backward() on a recomputed subgraph, which fills the
    # blocks' parameters' .grad even under the tool's torch.autograd.grad.
    torch.manual_seed(0)
    model = ReversibleSequence()
    kept = torch.ones(2, 2)
    model.reversible_blocks[0].f_block.weight.grad = kept
    x = torch.randn(3, 4)
    for tool in (find_nan_origin, explain_inplace_error):
        report = tool(lambda t: model(t).sum(), x)
        assert not report.found and not report.raised, report.message
        assert "`ReversibleModuleFunctionBackward`'s backward writes `.grad` itself" in (
            report.message
        )
        assert "put them back as found" in report.message
        assert model.reversible_blocks[0].f_block.weight.grad is kept
        others = [
            p for p in model.parameters() if p is not model.reversible_blocks[0].f_block.weight
        ]
        assert all(p.grad is None for p in others), tool
    plain = find_nan_origin(lambda t: (t * 2).sum(), x)  # no such Function: no such note
    assert ".grad` itself" not in plain.message


def _gan(g_steps):
    """SinGAN's train_single_scale (issue 148), rebuilt: the generator's output `fake` is made
    once, in the discriminator's loop, and reused by every generator step."""
    torch.manual_seed(0)
    net_g = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, 4)
    )
    net_d = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, 1)
    )
    opt_g = torch.optim.Adam(net_g.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(net_d.parameters(), lr=1e-3)
    real = torch.randn(5, 4)

    def train_single_scale(noise):
        for _ in range(2):
            net_d.zero_grad()
            err_d_real = -net_d(real).mean()
            err_d_real.backward(retain_graph=True)
            fake = net_g(noise)
            err_d_fake = net_d(fake.detach()).mean()
            err_d_fake.backward(retain_graph=True)
            opt_d.step()
        for _ in range(g_steps):
            net_g.zero_grad()
            err_g = -net_d(fake).mean()
            err_g.backward(retain_graph=True)
            opt_g.step()
        return err_g.detach()

    return train_single_scale


def test_a_gan_reusing_one_generator_output_leads_with_computing_it_again_not_detaching():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _gan(g_steps=3)(torch.randn(5, 4))  # the real error, first
    _gan(g_steps=1)(torch.randn(5, 4))  # one generator step: no error
    report = explain_inplace_error(_gan(g_steps=3), torch.randn(5, 4))
    assert report.found and report.changer == "optimizer", report.message
    fix = report.message[report.message.index("Fix:") :]
    assert fix.startswith("Fix: compute it again after each step"), report.message
    assert "move `fake = net_g(noise)` into the loop" in fix
    assert "Do not `.detach()` it instead" in fix and "get no gradient" in fix
    assert "detach the carried tensor" not in report.message


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def test_the_unbiased_std_of_one_value_is_named_with_torchs_own_warning():
    # normflows' BatchNorm flow on a batch of one: std over dim 0 divides by n - 1 = 0.
    def batchnorm_flow(z):
        mean = torch.mean(z, dim=0, keepdim=True)
        std = torch.std(z, dim=0, keepdim=True)
        return ((z - mean) / torch.sqrt(std**2 + 1e-10)).sum()

    origin = find_nan_origin(batchnorm_flow, torch.randn(1, 3))
    assert origin.found and origin.node == "std", origin.message
    assert "degrees of freedom is <= 0" in origin.message  # PyTorch's warning, shown
    assert "`correction=0`" in origin.message and "n − correction" in origin.message
    assert "check the values reaching it" not in origin.message


@pytest.mark.parametrize("tool", [find_nan_origin, explain_inplace_error])
def test_parameters_a_forward_initialises_through_data_are_put_back(tool):
    # normflows' ActNorm: the first batch sets s and t through .data, and a flag buffer;
    # the flag was put back, the parameters were left NaN: no real call leaves that.
    flow = ActNorm(3)
    tool(lambda z: sum(t.sum() for t in flow(z)), torch.randn(1, 3))
    assert float(flow.data_dep_init_done) == 0.0
    assert not flow.s.detach().any() and not flow.t.detach().any()


@pytest.mark.parametrize("tool", [find_nan_origin, explain_inplace_error])
def test_an_attribute_forward_sets_on_a_parameter_is_removed(tool):
    layer = BinarizeLinear(3, 2)  # BinaryNet: `self.bias.org = ...` in forward
    tool(lambda x: layer(x).sum(), torch.ones(1, 3))
    assert not hasattr(layer.bias, "org")


def test_a_learning_rate_too_high_is_blamed_when_the_nan_appears_in_backward():
    # MorvanZhou's regression tutorial with lr=10: the loss overflows, a step makes the
    # output bias -inf, the next prediction is -inf, and backward makes NaN of it (0 × ∞).
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(1, 10), torch.nn.ReLU(), torch.nn.Linear(10, 1))
    opt = torch.optim.SGD(net.parameters(), lr=10.0)
    x = torch.linspace(-1, 1, 100).unsqueeze(1)
    y = x.pow(2) + 0.2 * torch.rand(x.size())

    def train():
        for _ in range(40):
            loss = torch.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss

    origin = find_nan_origin(train)
    assert origin.found and origin.node == "optimizer step", origin.message
    assert origin.stage == "backward"
    assert "into the parameter `2.bias` of `net`" in origin.message
    assert "learning rate is too high" in origin.message and "`AddmmBackward0`" in origin.message
    assert "keep its input in the range" not in origin.message  # not mse_loss's doing
    assert origin.message.count("re-create") == 1


def test_a_view_changed_in_place_is_not_given_the_name_of_the_tools_own_run():
    # torchvision's MLP (ReLU and Dropout in place) on a 1-D input: `linear` returns a view;
    # PyTorch's error calls it "output 0 of Relu" after a plain backward, "of AsStrided"
    # after a backward that keeps the graph (retain_graph=True), as the tool's own does.
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3)

    def block(x):
        h = torch.nn.functional.relu(lin(x), inplace=True)
        return torch.nn.functional.dropout(h, 0.5, training=True, inplace=True).sum()

    for keep, name in ((False, "Relu"), (True, "AsStrided")):  # the fact, on torch itself
        with pytest.raises(RuntimeError, match=f"output 0 of {name},"):
            torch.autograd.grad(block(torch.rand(3)), lin.weight, retain_graph=keep)
    report = explain_inplace_error(block, torch.rand(3))
    assert report.found and report.changer == "computed", report.message
    assert "calls it output 0 of AsStrided)" not in report.message
    said = "a view: PyTorch's error calls it output 0 of AsStrided, or of the op that saved it"
    assert said in report.message
    flat = explain_inplace_error(block, torch.rand(2, 3))  # no view: the name is PyTorch's
    assert "(PyTorch's error calls it output 0 of Relu)" in flat.message
