"""The checkers of chapter 06: labelled regions, a Function's saved bytes, reading a profile.

Unit tests, beyond the notebook's setup (a model with momentum, other batch sizes, a
Function of two inputs, a larger embedding table): the learners' answers themselves, wrong
and right, are the answer banks' (``tests/banks/ex_06_*.py``, run by ``test_bank_06.py``).
Checking must leave the caller's model, optimizer and random state as they were.
"""

from __future__ import annotations

import types
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn, tensor
from torch.autograd import Function
from torch.profiler import record_function

from autograd_helpers._profile_events import light_events
from autograd_helpers.checks import check_dominant_op, check_regions, check_saved_bytes
from autograd_helpers.profiling import cpu_profile, profile_ops

# --- exercise 1: regions -------------------------------------------------------------------------


def normalise_each(samples):
    return torch.stack([(sample - sample.mean()) / sample.std() for sample in samples])


def labelled(data=normalise_each, *, order=("data", "forward", "backward", "update"), then=None):
    """A step whose four regions carry the names in ``order`` (a typo, a swap...);
    ``then(model)`` runs at the end of backward (a clip)."""
    data_name, forward_name, backward_name, update_name = order

    def step(model, optimizer, samples):
        with record_function(data_name):
            batch = data(samples)
        with record_function(forward_name):
            loss = model(batch).square().mean()
        with record_function(backward_name):
            optimizer.zero_grad()
            loss.backward()
            if then is not None:
                then(model)
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


def data_twice(model, optimizer, samples):
    normalise_each(samples)  # a first try, left in: its work is outside every region
    labelled()(model, optimizer, samples)


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


def a_new_optimizer(model, optimizer, samples):
    fresh = torch.optim.SGD(model.parameters(), lr=0.01)
    labelled()(model, fresh, samples)


def halved_learning_rate(model, optimizer, samples):
    for group in optimizer.param_groups:
        group["lr"] = 0.005
    labelled()(model, optimizer, samples)


def freezing(model, optimizer, samples):
    labelled()(model, optimizer, samples)
    model[0].weight.requires_grad_(False)


def hooked(model, optimizer, samples):
    model.register_forward_hook(lambda module, args, out: None)
    labelled()(model, optimizer, samples)


def prepared_before(model, optimizer, samples):
    batch = (samples - samples.mean(dim=1, keepdim=True)) / samples.std(dim=1, keepdim=True)
    labelled(data=lambda _: batch.clone())(model, optimizer, samples)


def post_hooked(model, optimizer, samples):
    labelled()(model, optimizer, samples)
    optimizer.register_step_post_hook(lambda *args: None)


def reseeding(model, optimizer, samples):
    torch.manual_seed(123)
    labelled()(model, optimizer, samples)


def never_closed(model, optimizer, samples):
    record_function("data").__enter__()
    batch = normalise_each(samples)
    with record_function("forward"):
        loss = model(batch).square().mean()
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("update"):
        optimizer.step()


def per_batch_of(size):
    def step(model, optimizer, samples):
        labelled(data=lambda s: normalise_each(s.view(size, -1)))(model, optimizer, samples)

    return step


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


def test_a_custom_preparation_and_batch_norm(setup):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    samples = torch.randn(50, 32)
    stats = model[1].running_mean.clone()

    def scaled(s):
        return s / 10

    right = check_regions(labelled(data=scaled), "data", model, optimizer, samples, prepare=scaled)
    assert right.passed or "is not the slowest" in right.message, right.message  # timings
    wrong = check_regions(labelled(), "data", model, optimizer, samples, prepare=scaled)
    assert not wrong.passed and "not those of the specified loss" in wrong.message
    assert torch.equal(model[1].running_mean, stats) and not optimizer.state


def test_a_model_with_dropout_is_compared_with_the_same_masks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    result = check_regions(labelled(), "data", model, optimizer, torch.randn(40, 32))
    assert result.passed, result.message


def test_the_notebooks_objects_are_never_handed_over(setup, tmp_path):
    model, optimizer, samples = setup
    log = tmp_path / "seen.txt"  # a list would be put back: the step must leave globals alone

    def spy(m, o, s):
        with open(log, "a") as file:
            file.write(f"{m is model or o is optimizer or s is samples}\n")
        labelled()(m, o, s)

    check_regions(spy, "data", model, optimizer, samples)
    seen = log.read_text().split()
    assert seen and set(seen) == {"False"}


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
        (labelled(order=("data", "forward", "backward", "Update")), "regions called 'Update'"),
        (backward_in_forward, "backward nodes"),
        (labelled(data=lambda s: s), "from the raw `samples`"),
        (data_in_forward, "batch preparation is inside 'forward'"),
        (step_outside, "ran outside every region"),
        (loss_in("backward"), "the loss (`aten::mean`, the value `backward` starts from) ran in"),
        (loss_in(None), "ran outside every region, not in 'forward'"),
        (also_unlabelled, "the optimizer's step ran 2 times in one call"),
        (a_new_optimizer, "another one did"),
        (halved_learning_rate, "it changed the optimizer's settings (lr of param group 0"),
        (freezing, "`0.weight` frozen"),
        (hooked, "hook(s) on"),
        (per_batch_of(64), "probe beyond the notebook's 64"),
        (data_twice, "operators run outside the four regions"),
        (prepared_before, "the batch preparation (the work on `samples`: `aten::mean`"),
        (post_hooked, "registered a step post-hook on the optimizer"),
        (reseeding, "changed torch's random state"),
        (never_closed, "opened 'data' and never closed it"),
    ],
    ids=[
        "typo",
        "backward-in-forward",
        "empty-data",
        "data-in-forward",
        "step-outside",
        "loss-in-backward",
        "loss-outside",
        "also-unlabelled",
        "new-optimizer",
        "learning-rate",
        "freezes",
        "hook",
        "hard-coded-batch",
        "data-twice",
        "prepared-before",
        "post-hook",
        "reseeds",
        "never-closed",
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
        ("Data", "passed", "Read as the label 'data'"),
        (["data"], "failed", "one of the labels"),
        (" update ", "failed", "'update' is not the slowest"),
        (3, "failed", "one of the labels"),
        (..., "not implemented", "set `slowest`"),
    ],
)
def test_the_slowest_answer_is_judged(setup, answer, status, phrase):
    result = check_regions(labelled(), answer, *setup)
    assert result.status == status and phrase in result.message, result.message


def test_the_callers_mistakes_are_named(setup):
    model, optimizer, samples = setup
    with pytest.raises(ValueError, match="samples"):
        check_regions(labelled(), "data", model, optimizer, samples[0])
    with pytest.raises(TypeError, match="prepare"):
        check_regions(labelled(), "data", model, optimizer, samples, prepare=3)
    with pytest.raises(TypeError, match="samples"):
        check_regions(labelled(), "data", model, optimizer, samples.long())


def test_the_light_event_tree_agrees_with_the_profilers(setup):
    model, optimizer, samples = setup
    with cpu_profile() as prof:
        zero_first(model, optimizer, samples)

    def parents(events, start):
        counts, found = Counter(), {}
        for event in sorted(events, key=start):
            counts[event.name] += 1  # the nth event of a name, in the order they started
            parent = event.cpu_parent
            found[event.name, counts[event.name]] = parent.name if parent else None
        return found

    theirs = parents(prof.events(), lambda e: e.time_range.start)
    ours = parents(light_events(prof), lambda e: e.start_ns)
    assert len(theirs) > 1000 and ours == theirs


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


_CACHE: dict[str, torch.Tensor] = {}


class CachingInThisModule(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _CACHE["tanh_soft"] = torch.tanh(F.softplus(x))
        return x * _CACHE["tanh_soft"]

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, _CACHE["tanh_soft"])


class _Store:
    def __init__(self):
        self.held = []


class CachingInANestedObject(Function):
    store = _Store()

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        CachingInANestedObject.store.held.append(torch.tanh(F.softplus(x)))
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, CachingInANestedObject.store.held.pop())


_ELSEWHERE = types.ModuleType("elsewhere")  # only attributes the code names are searched


class CachingUnnamed(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _ELSEWHERE.__dict__["held"] = torch.tanh(F.softplus(x))  # no name: an unnamed route
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


_BUFFER = torch.zeros(4096)  # made before forward: forward's allocations do not see it


class CachingInAnExistingBuffer(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _BUFFER[: x.numel()].copy_(torch.tanh(F.softplus(x)).reshape(-1))
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, _BUFFER[: x.numel()].view_as(x).to(x.dtype))


class CachingOnTheOutput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        tanh_soft = torch.tanh(F.softplus(x))
        output = x * tanh_soft
        output.tanh_soft = tanh_soft
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))


class CachingInADefault(Function):
    @staticmethod
    def forward(ctx, x, cache=[]):  # noqa: B006 - the learner's cache, on purpose
        ctx.save_for_backward(x)
        cache.append(torch.tanh(F.softplus(x)))
        return F.mish(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x))), None


class LeanProduct(Function):
    """Two inputs, both saved: the budget counts each storage once."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


_PLAIN = torch.zeros(4000)
with torch.inference_mode():
    _INFERENCE = torch.zeros(4000)
_DEEP = {"a": {"b": [[{"c": torch.zeros(4000)}]]}}


class _Store:
    buf = torch.zeros(4000)


def _kept(name, store, fetch):
    """A LeanMish (named ``name``) that keeps ``tanh_soft`` by the line ``store`` in forward
    and reads it by the expression ``fetch``, as a learner writes it in this module."""
    source = (
        f"class {name}(Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        tanh_soft = torch.tanh(F.softplus(x)).detach()\n"
        f"        {store}\n        return x * tanh_soft\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        f"        (x,) = ctx.saved_tensors\n        tanh_soft = {fetch}\n"
        "        return grad_output * mish_derivative(x, tanh_soft)\n"
    )
    exec(source, globals())
    return globals()[name]


_FLAT = "[: x.numel()].copy_(tanh_soft.reshape(-1))"
_BACK = "[: x.numel()].clone().view_as(x).to(x.dtype)"
KeptAsAList = _kept("KeptAsAList", "ctx.t = tanh_soft.tolist()", "torch.tensor(ctx.t)")
WrittenThroughData = _kept("WrittenThroughData", f"_PLAIN.data{_FLAT}", f"_PLAIN{_BACK}")
WrittenThroughNumPy = _kept(
    "WrittenThroughNumPy",
    "_PLAIN.numpy()[: x.numel()] = tanh_soft.reshape(-1).float().numpy()",
    f"_PLAIN{_BACK}",
)
WrittenUnderInferenceMode = _kept(
    "WrittenUnderInferenceMode",
    f"with torch.inference_mode(): _INFERENCE{_FLAT}",
    f"_INFERENCE{_BACK}",
)
WrittenIntoAClassAttribute = _kept(
    "WrittenIntoAClassAttribute", f"_Store.buf{_FLAT}", f"_Store.buf{_BACK}"
)
WrittenDeepInAContainer = _kept(
    "WrittenDeepInAContainer",
    f'_DEEP["a"]["b"][0][0]["c"]{_FLAT}',
    f'_DEEP["a"]["b"][0][0]["c"]{_BACK}',
)


class KeptInTheOutputsStorage(LeanMish):  # LeanMish's backward
    @staticmethod
    def forward(ctx, x):
        tanh_soft = torch.tanh(F.softplus(x))
        out = torch.stack([x * tanh_soft, tanh_soft])[0]
        ctx.save_for_backward(x)
        return out


class SavingASparseCopy(Function):
    @staticmethod
    def forward(ctx, x):
        tanh_soft = torch.tanh(F.softplus(x))
        ctx.save_for_backward(x, tanh_soft.to_sparse())
        return x * tanh_soft

    @staticmethod
    def backward(ctx, grad_output):
        x, sparse = ctx.saved_tensors
        return grad_output * mish_derivative(x, sparse.to_dense())


class ReturningFloat64(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.mish(x).double()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))).to(x.dtype)


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
        (SavingFloat32, "on float64 inputs it saves a float32 copy (the check runs it on"),
        (SavingNoneToo, "an input (4,000 bytes) and an intermediate (4,000 bytes)"),
        (ForgettingSigmoid, "gradient for `x` is off"),
        (CachingInThisModule, "the global `_CACHE`"),
        (CachingInANestedObject, "the class attribute `CachingInANestedObject.store`"),
        (CachingUnnamed, "could not name where"),
        (CachingInAnExistingBuffer, "`_BUFFER`"),
        (CachingOnTheOutput, "an attribute of the output (`.tanh_soft`)"),
        (CachingInADefault, "the closure of `forward`"),
        (KeptAsAList, "`ctx.t` (numbers kept as a Python list)"),
        (WrittenThroughData, "the global `_PLAIN`"),
        (WrittenThroughNumPy, "the global `_PLAIN`"),
        (WrittenUnderInferenceMode, "the global `_INFERENCE`"),
        (WrittenIntoAClassAttribute, "the attribute `_Store.buf`"),
        (WrittenDeepInAContainer, "the global `_DEEP`"),
        (KeptInTheOutputsStorage, "the output's storage"),
        (SavingASparseCopy, "the budget is 4,000"),
        (ReturningFloat64, "forward returns float64 where the reference returns float32"),
        (..., "not implemented"),
    ],
)
def test_a_heavy_or_wrong_function_fails(fn, phrase):
    buffers = [_PLAIN, _INFERENCE, _Store.buf, _DEEP["a"]["b"][0][0]["c"]]
    result = check_saved_bytes(fn, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET)
    assert not result.passed and phrase in result.message, result.message
    assert all(not b.any() for b in buffers), "a buffer written by forward was not put back"


def test_a_cache_written_into_an_existing_tensor_is_held_and_put_back():
    from autograd_helpers.checks.profiler._memory import measure

    before = _BUFFER.clone()
    memory = measure(CachingInAnExistingBuffer, (ACTIVATIONS,))
    # found once: as a storage an operator returned, or as a tensor whose version moved
    assert [h.route for h in memory.elsewhere] == ["the global `_BUFFER`"]
    assert torch.equal(_BUFFER, before)


def test_a_function_of_two_inputs():
    a, b = torch.randn(100), torch.randn(100)
    product = torch.mul
    result = check_saved_bytes(LeanProduct, a, b, reference=product, max_bytes=800)
    assert result.passed, result.message
    tight = check_saved_bytes(LeanProduct, a, b, reference=product, max_bytes=400)
    assert "an input (400 bytes) and an input (400 bytes)" in tight.message


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
def bag_reports():
    torch.manual_seed(0)
    # a larger table than the notebook's: zero-filling its gradient outweighs the other
    # operators many times over; and each operator's fastest of five profiles counts, as in
    # the notebook, so the verdicts below hold on a busy machine too (one profile there can
    # credit any operator with milliseconds spent waiting for the CPU)
    words = nn.EmbeddingBag(400_000, 32, mode="mean")
    indices = torch.randint(0, 400_000, (64, 8))
    return [profile_ops(lambda i: words(i).square().mean(), indices) for _ in range(5)]


@pytest.mark.parametrize(
    "answer",
    [
        "aten::fill_",
        "fill_",
        "  aten::fill_ ",
        "ATen::Fill_",
        torch.ops.aten.fill_,
        torch.ops.aten.fill_.Scalar,  # an overload names the same row
        "aten::fill_.Scalar",
        "fill_.default",
        "torch.ops.aten.fill_.Scalar",
        "torch.fill_",
        "Tensor.fill_",
        "torch.Tensor.fill_",
        torch.Tensor.fill_,
        torch.fill_,
    ],
)
def test_the_dominant_operator_passes(bag_reports, answer):
    result = check_dominant_op(answer, bag_reports)
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
        ("aten::fil", "Did you mean `aten::fill_`?"),
        ("aten::fill_.bogus", "no operator called 'aten::fill_.bogus'"),
        (3, "a str"),
    ],
)
def test_other_answers_are_explained(bag_reports, answer, phrase):
    result = check_dominant_op(answer, bag_reports)
    assert not result.passed and phrase in result.message, result.message


def test_a_stub_and_bad_reports(bag_reports):
    assert check_dominant_op(..., bag_reports).status == "not implemented"
    with pytest.raises(TypeError, match="report"):
        check_dominant_op("aten::mm", bag_reports[0].rows)
    for bad in ([], [bag_reports[0], "aten::mm"]):
        with pytest.raises(TypeError, match="report must be what"):
            check_dominant_op("aten::mm", bad)
    forward_only = profile_ops(torch.sin, torch.ones(3), backward=False)
    with pytest.raises(ValueError, match="backward=True"):
        check_dominant_op("aten::sin", forward_only)


# --- second-round audit: Python reads of samples, state left behind, 0-dim hyperparameters


LOSSES = []
STATS = {"n": 0}


def _with(*, before=None, after=None, data=normalise_each, update=None):
    """The labelled step, with ``before(model, optimizer, samples)`` run first (its result
    handed to ``data``) and ``after(model, optimizer, loss)`` last."""

    def step(model, optimizer, samples):
        prepared = before(model, optimizer, samples) if before else samples
        with record_function("data"):
            batch = data(prepared)
        with record_function("forward"):
            loss = model(batch).square().mean()
        with record_function("backward"):
            optimizer.zero_grad()
            loss.backward()
        with record_function("update"):
            optimizer.step() if update is None else update(optimizer)
        if after:
            after(model, optimizer, loss)

    return step


def _python_statistics(model, optimizer, samples):
    import statistics

    return [[(v - statistics.mean(r)) / statistics.stdev(r) for v in r] for r in samples.tolist()]


def _by_hand(optimizer):
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])


@pytest.mark.parametrize(
    ("step", "phrase"),
    [
        (_with(before=_python_statistics, data=torch.tensor), "`samples.tolist()`) ran outside"),
        (
            _with(before=lambda m, o, s: s.tolist(), data=lambda r: normalise_each(tensor(r))),
            "`samples.tolist()`) ran outside",
        ),
        (
            _with(before=lambda m, o, s: s.numpy(), data=lambda a: normalise_each(torch.tensor(a))),
            "`samples.numpy()`",
        ),
        (_with(after=lambda m, o, loss: LOSSES.append(loss)), "the global list `LOSSES`"),
        (_with(after=lambda m, o, loss: STATS.update(n=STATS["n"] + 1)), "`STATS`"),
        (_with(after=lambda m, o, loss: setattr(m, "last_loss", loss.item())), "`model.last_loss`"),
        (_with(after=lambda m, o, loss: setattr(o, "steps_done", 1)), "`optimizer.steps_done`"),
        (_with(after=lambda m, o, loss: o.defaults.update(lr=1.0)), "`optimizer.defaults`"),
        (
            _with(after=lambda m, o, loss: o.state[next(m.parameters())].update(junk=1)),
            "added `junk` to the optimizer's state",
        ),
        (
            _with(after=lambda m, o, loss: o.state[torch.zeros(3)].update(momentum_buffer=1)),
            "a tensor that is not one of its parameters",
        ),
        (_with(after=lambda m, o, loss: np.random.seed(0)), "NumPy's global random"),
        (_with(after=lambda m, o, loss: np.random.rand()), "NumPy's global random"),
        (_with(after=lambda m, o, loss: __import__("random").seed(0)), "Python's random state"),
        (_with(before=lambda m, o, s: s.requires_grad_()), "now require grad"),
        (_with(update=_by_hand), "by hand, never with `optimizer.step()`"),
    ],
    ids=[
        "statistics-before", "tolist-before", "numpy-before", "losses-list", "stats-dict",
        "model-attribute", "optimizer-attribute", "defaults", "state-key", "stray-state",
        "numpy-seed", "numpy-draw", "python-seed", "samples-require-grad", "update-by-hand",
    ],
)  # fmt: skip
def test_what_a_step_leaves_or_reads_outside_data_is_judged(setup, step, phrase):
    random_state = __import__("random").getstate()
    result = check_regions(step, "data", *setup)
    assert not result.passed and phrase in result.message, result.message
    assert not LOSSES and STATS == {"n": 0}, "the globals were not put back"
    assert __import__("random").getstate() == random_state


def test_a_step_that_steps_with_a_closure_is_told_so(setup):
    def step(model, optimizer, samples):
        with record_function("data"):
            batch = normalise_each(samples)
        with record_function("forward"):
            loss = model(batch).square().mean()
        with record_function("backward"):
            optimizer.zero_grad()
        with record_function("update"):
            optimizer.step(lambda: loss.backward() or loss)

    result = check_regions(step, "data", *setup)
    assert not result.passed and "inside `optimizer.step(closure)`" in result.message


exec("import io, mmap, os, tempfile\nBIO = io.BytesIO()\nHIDDEN_NAME = 'HID' + 'DEN'", globals())
_LOAD = "torch.load({}, weights_only=True).to(x.dtype)"
_TMP_FILE = "os.path.join(tempfile.gettempdir(), 'ah_lean_mish_cache.pt')"
KEPT_ELSEWHERE = {
    "BytesIOOnCtx": (
        "ctx.buf = io.BytesIO(); torch.save(tanh_soft, ctx.buf)",
        "(ctx.buf.seek(0), " + _LOAD.format("ctx.buf") + ")[1]",
        "`ctx.buf` (bytes kept in an `io.BytesIO`)",
    ),
    "BytesIOGlobal": (
        "BIO.seek(0); BIO.truncate(); torch.save(tanh_soft, BIO)",
        "(BIO.seek(0), " + _LOAD.format("BIO") + ")[1]",
        "the global `BIO`",
    ),
    "SpooledOnCtx": (
        "ctx.f = tempfile.SpooledTemporaryFile(); torch.save(tanh_soft, ctx.f)",
        "(ctx.f.seek(0), " + _LOAD.format("ctx.f") + ")[1]",
        "`ctx.f` (bytes kept in a file object (SpooledTemporaryFile))",
    ),
    "MmapOnCtx": (
        "ctx.mm = mmap.mmap(-1, tanh_soft.nbytes); ctx.mm.write(tanh_soft.numpy().tobytes()); "
        "ctx.dtype = tanh_soft.dtype",
        "torch.frombuffer(bytearray(ctx.mm[:]), dtype=ctx.dtype).view_as(x).to(x.dtype)",
        "`ctx.mm` (bytes kept in an `mmap`)",
    ),
    "TextOnCtx": (
        "ctx.t = str(tanh_soft.tolist())",
        "torch.tensor(eval(ctx.t), dtype=x.dtype)",
        "`ctx.t` (numbers kept as a Python str)",
    ),
    "DictOnCtx": (
        "ctx.t = dict(enumerate(tanh_soft.reshape(-1).tolist()))",
        "torch.tensor(list(ctx.t.values()), dtype=x.dtype).view_as(x)",
        "`ctx.t` (numbers kept as a Python dict)",
    ),
    "TextUnnamed": (
        "globals()[HIDDEN_NAME] = str(tanh_soft.tolist())",
        "torch.tensor(eval(globals()[HIDDEN_NAME]), dtype=x.dtype)",
        "bytes of Python objects alive between forward and backward",
    ),
    "FileOnDisk": (
        f"torch.save(tanh_soft, {_TMP_FILE})",
        _LOAD.format(_TMP_FILE),
        "forward writes to a file (`<tempdir>/ah_lean_mish_cache.pt`)",
    ),
}


@pytest.mark.parametrize("name", list(KEPT_ELSEWHERE))
def test_an_intermediate_kept_as_python_data_or_in_a_file_fails(name):
    import os
    import tempfile

    store, fetch, phrase = KEPT_ELSEWHERE[name]
    fn = _kept(name, store, fetch)
    result = check_saved_bytes(fn, ACTIVATIONS, reference=F.mish, max_bytes=BUDGET)
    assert not result.passed and phrase in result.message, result.message
    assert not os.path.exists(os.path.join(tempfile.gettempdir(), "ah_lean_mish_cache.pt"))


@pytest.mark.parametrize("dtype", ["", ", dtype=x.dtype"])
@pytest.mark.parametrize("inputs", [ACTIVATIONS, ACTIVATIONS.double()], ids=["float32", "float64"])
def test_a_0_dim_hyperparameter_saved_beside_x_passes(dtype, inputs):
    exec(
        "class WithBeta(Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n"
        f"        beta = torch.tensor(1.0{dtype})\n        ctx.save_for_backward(x, beta)\n"
        "        return x * torch.tanh(F.softplus(beta * x))\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        x, beta = ctx.saved_tensors\n"
        "        return grad_output * mish_derivative(x, torch.tanh(F.softplus(x)))\n",
        globals(),
    )
    result = check_saved_bytes(WithBeta, inputs, reference=F.mish, max_bytes=inputs.nbytes)  # noqa: F821
    assert result.passed and "0-dim tensor" in result.message, result.message


def test_an_overload_the_profile_cannot_tell_is_read_as_the_row(bag_reports):
    result = check_dominant_op("aten::fill_.Tensor", bag_reports)
    assert result.passed and "not which overload ran" in result.message, result.message


# --- issue 25, learner audit: the notebook's table cell runs the step before the check -------


def _then(step, extra):
    def changed(model, optimizer, samples):
        step(model, optimizer, samples)
        extra(model, optimizer)

    return changed


@pytest.mark.parametrize(
    ("extra", "phrase"),
    [
        (lambda m, o: torch.set_num_threads(3), "left torch on 3 threads"),
        (lambda m, o: torch.set_grad_enabled(False), "grad mode off"),
        (lambda m, o: torch.set_default_dtype(torch.float64), "default dtype at torch.float64"),
        (lambda m, o: torch.set_flush_denormal(True), "flushing of denormal numbers on"),
    ],
    ids=["threads", "grad mode", "dtype", "flush-denormal"],
)
def test_a_setting_the_table_cell_left_is_judged_from_the_courses(setup, extra, phrase):
    model, optimizer, samples = setup
    step = _then(labelled(), extra)
    threads = torch.get_num_threads()
    try:
        step(model, optimizer, samples)  # the table cell: the notebook now runs so
        left = (torch.get_num_threads(), torch.is_grad_enabled(), torch.get_default_dtype())
        result = check_regions(step, "data", model, optimizer, samples)
        assert (torch.get_num_threads(), torch.is_grad_enabled(), torch.get_default_dtype()) == left
    finally:
        torch.set_num_threads(threads)
        torch.set_grad_enabled(True)
        torch.set_default_dtype(torch.float32)
        torch.set_flush_denormal(False)
    assert not result.passed and phrase in result.message, result.message
    assert "the table cell ran your step" in result.message


def test_the_notebooks_objects_as_the_table_cell_left_them(setup):
    model, optimizer, samples = setup
    model.eval()
    result = check_regions(labelled(), "data", model, optimizer, samples)
    assert not result.passed and "is in eval mode as the check starts" in result.message
    model.train()
    optimizer.param_groups[0]["momentum"] = 0.5  # built with 0.9
    result = check_regions(labelled(), "data", model, optimizer, samples)
    assert not result.passed and "momentum of param group 0: 0.5" in result.message
    optimizer.param_groups[0]["momentum"] = 0.9
    assert check_regions(labelled(), "data", model, optimizer, samples).passed


def test_clipping_is_named():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    samples = torch.randn(64, 32)

    clipped = labelled(then=lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05))

    result = check_regions(clipped, "data", model, optimizer, samples)
    assert not result.passed and "clip_grad_norm_" in result.message, result.message
