"""The checkers of chapter 06: labelled regions, a Function's saved bytes, reading a profile.

Each wrong answer a learner is likely to write must fail with its own message, each right
one (written differently from the notebook's solution) must pass, and checking must leave
the notebook's model, optimizer and random state as they were.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.profiler import record_function

from autograd_helpers.checks import check_dominant_op, check_regions, check_saved_bytes
from autograd_helpers.profiling import profile_ops

# --- exercise 1: regions -------------------------------------------------------------------------


def normalise_each(samples):
    return torch.stack([(sample - sample.mean()) / sample.std() for sample in samples])


def labelled(data=normalise_each, *, order=("data", "forward", "backward", "update")):
    """A step whose four regions carry the names in ``order`` (a typo, a swap...)."""
    data_name, forward_name, backward_name, update_name = order

    def step(model, optimizer, samples):
        with record_function(data_name):
            batch = data(samples)
        with record_function(forward_name):
            loss = model(batch).square().mean()
        with record_function(backward_name):
            optimizer.zero_grad()
            loss.backward()
        with record_function(update_name):
            optimizer.step()

    return step


def zero_first(model, optimizer, samples):
    optimizer.zero_grad()  # outside every region: a few microseconds, allowed
    with record_function("data"):
        batch = normalise_each(samples)
    with record_function("forward"):
        prediction = model(batch)
        loss = (prediction**2).mean()
    with record_function("backward"):
        loss.backward()
    with record_function("update"):
        optimizer.step()


def nested(model, optimizer, samples):
    with record_function("forward"):
        with record_function("data"):
            batch = normalise_each(samples)
        loss = model(batch).square().mean()
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("update"):
        optimizer.step()


def backward_in_forward(model, optimizer, samples):
    with record_function("data"):
        batch = normalise_each(samples)
    with record_function("forward"):
        loss = model(batch).square().mean()
        optimizer.zero_grad()
        loss.backward()
    with record_function("backward"):
        pass
    with record_function("update"):
        optimizer.step()


def data_in_forward(model, optimizer, samples):
    with record_function("data"):
        raw = samples.clone()
    with record_function("forward"):
        loss = model(normalise_each(raw)).square().mean()
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("update"):
        optimizer.step()


def zero_before_step(model, optimizer, samples):
    with record_function("data"):
        batch = normalise_each(samples)
    with record_function("forward"):
        loss = model(batch).square().mean()
    with record_function("backward"):
        loss.backward()
    with record_function("update"):
        optimizer.zero_grad()
        optimizer.step()


def step_outside(model, optimizer, samples):
    with record_function("data"):
        batch = normalise_each(samples)
    with record_function("forward"):
        loss = model(batch).square().mean()
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("update"):
        pass
    optimizer.step()


def loss_in(region):
    def step(model, optimizer, samples):
        with record_function("data"):
            batch = normalise_each(samples)
        with record_function("forward"):
            prediction = model(batch)
        if region is None:
            loss = prediction.square().mean()
        with record_function("backward"):
            if region == "backward":
                loss = prediction.square().mean()
            optimizer.zero_grad()
            loss.backward()
        with record_function("update"):
            optimizer.step()

    return step


def stepping_twice(model, optimizer, samples):
    with record_function("data"):
        batch = normalise_each(samples)
    with record_function("forward"):
        loss = model(batch).square().mean()
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("update"):
        optimizer.step()
        optimizer.step()


def own_profiler(model, optimizer, samples):
    from torch.profiler import profile

    with profile():
        labelled()(model, optimizer, samples)


def also_unlabelled(model, optimizer, samples):
    labelled()(model, optimizer, samples)
    batch = normalise_each(samples)
    loss = model(batch).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def mse_and_named_arguments(model, optimizer, samples):
    with record_function("data"):
        inputs = torch.stack([(s - s.mean()) / s.std() for s in samples])
    with record_function("forward"):
        out = model(inputs)
        loss = F.mse_loss(out, torch.zeros_like(out))
    with record_function("backward"):
        model.zero_grad(set_to_none=True)
        loss.backward()
    with torch.autograd.profiler.record_function("update"):
        optimizer.step()


def twice(model, optimizer, samples):
    for _ in range(2):
        labelled()(model, optimizer, samples)


@pytest.fixture
def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, optimizer, torch.randn(64, 32)


@pytest.mark.parametrize(
    "step",
    [labelled(), zero_first, mse_and_named_arguments],
    ids=["solution", "zero-first", "mse-loss"],
)
def test_right_regions_and_answer_pass(setup, step):
    result = check_regions(step, "data", *setup)
    assert result.passed, result.message


def test_checking_changes_nothing_of_the_notebooks(setup):
    model, optimizer, samples = setup
    labelled()(model, optimizer, samples)  # momentum buffers exist now
    parameters = [p.detach().clone() for p in model.parameters()]
    momentum = [optimizer.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    rng = torch.get_rng_state()
    assert check_regions(labelled(), "data", model, optimizer, samples).passed
    assert all(torch.equal(a, b) for a, b in zip(parameters, model.parameters(), strict=True))
    for buffer, p in zip(momentum, model.parameters(), strict=True):
        assert torch.equal(buffer, optimizer.state[p]["momentum_buffer"])
    assert torch.equal(rng, torch.get_rng_state())


@pytest.mark.parametrize(
    ("step", "phrase"),
    [
        (labelled(order=("Data", "forward", "backward", "update")), "regions called 'Data'"),
        (nested, "'data' is inside 'forward'"),
        (backward_in_forward, "backward nodes"),
        (labelled(data=lambda s: s), "'data' holds no operator"),
        (data_in_forward, "batch preparation is inside 'forward'"),
        (zero_before_step, "parameters have not changed"),
        (step_outside, "ran outside every region"),
        (twice, "ran 6 times in 3 steps"),
        (loss_in("backward"), "the loss (`aten::mean`, `aten::square`) ran in 'backward'"),
        (loss_in(None), "ran outside every region, not in 'forward'"),
        (stepping_twice, "the optimizer's step ran 6 times in 3 steps"),
        (own_profiler, "a profiler of its own"),
        (also_unlabelled, "ran outside every region as well as in 'forward'"),
    ],
    ids=[
        "typo",
        "nested",
        "backward-in-forward",
        "empty-data",
        "data-in-forward",
        "zero-late",
        "step-outside",
        "twice",
        "loss-in-backward",
        "loss-outside",
        "two-optimizer-steps",
        "own-profiler",
        "also-unlabelled",
    ],
)
def test_wrong_regions_fail_with_their_message(setup, step, phrase):
    result = check_regions(step, "data", *setup)
    assert not result.passed
    assert phrase in result.message, result.message


@pytest.mark.parametrize(
    ("answer", "status", "phrase"),
    [
        ("forward", "failed", "is not the slowest"),
        ("Data", "failed", "one of the labels"),
        (3, "failed", "one of the labels"),
        (..., "not implemented", "set `slowest`"),
    ],
)
def test_the_slowest_answer_is_judged(setup, answer, status, phrase):
    result = check_regions(labelled(), answer, *setup)
    assert result.status == status and phrase in result.message, result.message


def test_a_stub_or_a_crash_is_reported(setup):
    def stub(model, optimizer, samples):
        raise NotImplementedError

    def crash(model, optimizer, samples):
        return model(samples.T)

    assert check_regions(stub, "data", *setup).status == "not implemented"
    assert check_regions(..., ..., *setup).status == "not implemented"
    result = check_regions(crash, "data", *setup)
    assert not result.passed and "mat1 and mat2" in result.message


# --- exercise 2: saved bytes ---------------------------------------------------------------------


def mish_derivative(x, tanh_soft):
    return tanh_soft + x * (1 - tanh_soft**2) * torch.sigmoid(x)


class LeanMish(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


class RecomputingWithAutograd(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.tanh(torch.log1p(torch.exp(x)))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(F.mish(leaf), leaf, grad_output)
        return grad


class SavingTwo(Function):
    @staticmethod
    def forward(ctx, x):
        tanh_soft = torch.tanh(F.softplus(x))
        ctx.save_for_backward(x, tanh_soft)
        return x * tanh_soft

    @staticmethod
    def backward(ctx, grad_output):
        x, tanh_soft = ctx.saved_tensors
        return grad_output * mish_derivative(x, tanh_soft)


class Stashing(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * mish_derivative(ctx.x, torch.tanh(F.softplus(ctx.x)))


class SavingHalf(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.half())
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        x = x.to(grad_output.dtype)
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


class ForgettingSigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        tanh_soft = torch.tanh(F.softplus(x))
        return grad_output * (tanh_soft + x * (1 - tanh_soft**2))


class StashingInADict(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.cache = {"tanh_soft": torch.tanh(F.softplus(x))}
        ctx.save_for_backward(x)
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, ctx.cache["tanh_soft"])


class SavingNoneToo(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(None, x, torch.sigmoid(x))
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        _, x, _ = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


class InPlaceForward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.mul_(torch.tanh(F.softplus(x)))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


class SavingFloat32(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.float())
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        x = x.to(grad_output.dtype)
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


ACTIVATIONS = torch.randn(1000)
BUDGET = ACTIVATIONS.nbytes


@pytest.mark.parametrize("fn", [LeanMish, RecomputingWithAutograd])
def test_a_lean_function_passes(fn):
    result = check_saved_bytes(fn, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET)
    assert result.passed, result.message


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (SavingTwo, "saves 8,000 bytes; the budget is 4,000"),
        (Stashing, "ctx attributes (ctx.x)"),
        (SavingHalf, "float16 copy"),
        (SavingFloat32, "on float64 inputs it saves a float32 copy (the check runs it on"),
        (StashingInADict, "ctx attributes (ctx.cache)"),
        (SavingNoneToo, "an input (4,000 bytes) and an intermediate (4,000 bytes)"),
        (ForgettingSigmoid, "gradient for `x` is off"),
        (..., "not implemented"),
    ],
)
def test_a_heavy_or_wrong_function_fails(fn, phrase):
    result = check_saved_bytes(fn, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET)
    assert not result.passed and phrase in result.message, result.message


def test_the_budget_message_says_what_is_saved():
    result = check_saved_bytes(SavingTwo, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET)
    assert "an input (4,000 bytes) and an intermediate (4,000 bytes)" in result.message


def test_the_check_never_changes_the_notebooks_tensor():
    activations = torch.randn(100)
    snapshot = activations.clone()
    check_saved_bytes(InPlaceForward, activations, reference=F.mish, max_bytes=400)
    assert torch.equal(activations, snapshot)


def test_gradients_can_be_judged_on_smaller_inputs():
    small = (torch.linspace(-8, 8, 33),)
    result = check_saved_bytes(
        LeanMish, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET, gradient_inputs=small
    )
    assert result.passed, result.message
    wrong = check_saved_bytes(
        ForgettingSigmoid, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET, gradient_inputs=small
    )
    assert not wrong.passed
    with pytest.raises(TypeError, match="gradient_inputs"):
        check_saved_bytes(
            LeanMish, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET, gradient_inputs=small[0]
        )


# --- exercise 3: the dominant operator -----------------------------------------------------------


@pytest.fixture(scope="module")
def bag_report():
    torch.manual_seed(0)
    # a larger table than the notebook's: zero-filling its gradient outweighs the other
    # operators many times over, so the verdicts below hold on a busy machine too
    words = nn.EmbeddingBag(400_000, 32, mode="mean")
    indices = torch.randint(0, 400_000, (64, 8))
    return profile_ops(lambda i: words(i).square().mean(), indices)


@pytest.mark.parametrize("answer", ["aten::fill_", "fill_", "  aten::fill_ "])
def test_the_dominant_operator_passes(bag_report, answer):
    result = check_dominant_op(answer, bag_report)
    assert result.passed, result.message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        ("aten::_embedding_bag_dense_backward", "large *total*"),
        ("EmbeddingBagBackward0", "backward node"),
        ("autograd::engine::evaluate_function: EmbeddingBagBackward0", "backward node"),
        ("backward", "a label"),
        ("aten::_embedding_bag", "forward only"),
        ("aten::convolution", "no operator called"),
        (3, "a str"),
    ],
)
def test_other_answers_are_explained(bag_report, answer, phrase):
    result = check_dominant_op(answer, bag_report)
    assert not result.passed and phrase in result.message, result.message


def test_a_stub_and_bad_reports(bag_report):
    assert check_dominant_op(..., bag_report).status == "not implemented"
    with pytest.raises(TypeError, match="report"):
        check_dominant_op("aten::mm", bag_report.rows)
    forward_only = profile_ops(torch.sin, torch.ones(3), backward=False)
    with pytest.raises(ValueError, match="backward=True"):
        check_dominant_op("aten::sin", forward_only)
