"""autograd_helpers.profiling: the profiler's rows, fair comparisons, and the Swish Function."""

from __future__ import annotations

import copy
import functools
import os

import matplotlib
import pytest
import torch
from torch import nn

from autograd_helpers import functions as fns
from autograd_helpers._common.memory_guard import MemoryGuard
from autograd_helpers._common.reach import modules_reachable
from autograd_helpers.memory import saved_tensor_bytes
from autograd_helpers.profiling import PROFILE_COLUMNS, Comparison, compare, profile_ops
from tests.real_world import BinarizeLinear, Deterministic, ReversibleSequence

matplotlib.use("Agg")


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def test_profile_ops_has_labels_forward_and_backward_ops_and_memory():
    model = _model()

    def loss(x):
        with torch.profiler.record_function("my label"):
            return model(x).pow(2).sum()

    report = profile_ops(loss, torch.randn(4, 8))
    names = {row["name"] for row in report.rows}
    assert {"forward", "backward", "my label", "aten::addmm", "AddmmBackward0"} <= names
    assert any(n.startswith("autograd::engine::evaluate_function: ") for n in names)
    assert all(list(row) == list(PROFILE_COLUMNS) for row in report.rows)
    forward = report.row("forward")
    assert forward["calls"] == 1 and forward["total_cpu_us"] >= forward["self_cpu_us"] >= 0
    assert report.row("aten::addmm")["calls"] == 2  # two Linear layers, one call each
    assert max(row["cpu_memory_bytes"] for row in report.rows) > 0
    selfs = [row["self_cpu_us"] for row in report.rows]
    assert selfs == sorted(selfs, reverse=True)
    assert "aten::addmm" in repr(report) and "<table>" in report._repr_html_()
    assert report.profiler.key_averages() is not None


def test_several_runs_share_one_profile_each_in_regions_of_its_own_and_a_first_backward():
    torch.manual_seed(0)
    layer = nn.Linear(8, 2)
    layer(torch.randn(4, 8)).sum().backward()
    before = layer.weight.grad.clone()
    report = profile_ops(lambda x: layer(x).square().sum(), torch.randn(4, 8), runs=3)
    assert report.runs == 3
    assert report.row("forward")["calls"] == report.row("backward")["calls"] == 3
    assert report.row("aten::addmm")["calls"] == 3  # the rows add the runs up
    regions = [e for e in report.profiler.events() if e.name in ("forward", "backward")]
    assert [e.name for e in sorted(regions, key=lambda e: e.time_range.start)] == [
        "forward",
        "backward",
    ] * 3
    assert all(e.cpu_parent is None for e in regions)
    # every run's backward is a first one: no gradient of the run before is added to
    assert not any(e.name in ("aten::add_", "aten::add") for e in report.profiler.events())
    assert torch.equal(layer.weight.grad, before)


def test_several_runs_of_a_function_writing_into_its_input_each_get_a_copy():
    x = torch.randn(4, 3)
    before = x.clone()
    report = profile_ops(lambda t: t.mul_(2).sum(), x, runs=2)
    assert report.row("aten::mul_")["calls"] == 2
    assert torch.equal(x, before) and x.grad is None


def test_profiling_leaves_a_modules_gradients_as_they_were():
    torch.manual_seed(0)
    layer = nn.Linear(8, 2)
    layer(torch.randn(4, 8)).sum().backward()
    before = layer.weight.grad.clone()
    report = profile_ops(lambda x: layer(x).square().sum(), torch.randn(4, 8))
    assert torch.equal(layer.weight.grad, before)
    names = {row["name"] for row in report.rows}
    # the profiled backward is a first one: no add_ into an old gradient
    assert "torch::autograd::AccumulateGrad" in names
    assert "aten::add_" not in names


def _state_of(model):
    return (
        [m.training for m in model.modules()],
        {k: v.clone() for k, v in model.state_dict().items()},
        [None if p.grad is None else p.grad.clone() for p in model.parameters()],
    )


def _same_state(first, second):
    (flags, state, grads), (flags2, state2, grads2) = first, second
    return (
        flags == flags2
        and all(torch.equal(state[k], state2[k]) for k in state)
        and all(
            (a is None and b is None) or torch.equal(a, b)
            for a, b in zip(grads, grads2, strict=True)
        )
    )


def _norm_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 1))


class Holder:
    """Holds a model where no name walk looks: no __dict__, so only the operators tell."""

    __slots__ = ("model",)

    def __init__(self, model):
        self.model = model


_HIDDEN = Holder(None)


def _hidden_loss(x):
    return _HIDDEN.model(x).sum()


@pytest.mark.parametrize(
    "make_fn",
    [
        lambda model: model,  # an nn.Module as fn
        lambda model: model.forward,  # a bound method
        lambda model: lambda x: model(x).sum(),  # a closure
        lambda model: functools.partial(lambda m, x: m(x).sum(), model),
        None,  # a module no name leads to: found by watching the operators only
    ],
    ids=["module", "bound method", "closure", "partial", "unreachable by name"],
)
def test_profiling_leaves_modules_and_the_random_state_as_they_were(make_fn):
    model = _norm_model()
    if make_fn is None:
        _HIDDEN.model = model
    fn = make_fn(model) if make_fn else _hidden_loss
    model[1].running_mean += 1.0
    model(torch.randn(4, 8)).sum().backward()  # gradients there already
    before, x = _state_of(model), torch.randn(16, 8)
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    report = profile_ops(fn, x)
    assert torch.equal(torch.rand(3), expected)  # dropout drew nothing from the caller's stream
    assert _same_state(before, _state_of(model))  # num_batches_tracked, running stats too
    assert "aten::native_batch_norm" in {row["name"] for row in report.rows}


def test_profiling_puts_back_tensors_that_fn_writes_into():
    calls = torch.zeros((), dtype=torch.long)
    indices = torch.tensor([3, 9, 1])
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def loss(ids):
        calls.add_(1)  # a counter tensor: not a module's, still the caller's
        ids.clamp_(max=4)  # an integer input is passed as it is: the caller's tensor
        model.eval()  # a flag, on a module reached by name
        return (model(torch.ones(3, 4) * ids[:, None]) + 1).mul_(2).sum()  # new memory

    profile_ops(loss, indices)
    assert calls.item() == 0 and indices.tolist() == [3, 9, 1] and model.training


_GLOBAL_LAYER = nn.Linear(2, 2)


def _uses_a_global(x):
    return _GLOBAL_LAYER(x)  # as a notebook's function names its model


def test_modules_are_found_through_the_names_a_function_uses():
    first, second, third, fourth = (nn.Linear(2, 2) for _ in range(4))
    helpers = {"layers": [third]}

    def helper(x):
        return helpers["layers"][0](x)

    class Wrapper:
        def __init__(self):
            self.inner = fourth

        def __call__(self, x):
            return self.inner(x)

    wrapper = Wrapper()

    def fn(x, scale=second):
        return first(helper(scale(x))) + wrapper(x)

    found = modules_reachable(fn)
    assert all(any(m is module for m in found) for module in (first, second, third, fourth))
    assert modules_reachable(_uses_a_global) == [_GLOBAL_LAYER]
    assert modules_reachable(_hidden_loss) == []  # behind __slots__: the operators tell
    assert modules_reachable(torch.sin, torch.ones(2)) == []


def test_the_memory_guard_copies_only_memory_older_than_the_call():
    buffer, weight = torch.zeros(4), torch.ones(2)
    guard = MemoryGuard()
    with guard:
        fresh = torch.ones(4).mul_(2)  # new memory: not copied
        buffer[1:3].add_(fresh[:2] * weight)  # through a view: the whole block comes back
        torch.ops.aten.native_batch_norm(  # writes its running stats, its schema says not
            torch.randn(3, 2), None, None, weight, weight.clone(), True, 0.5, 1e-5
        )
    assert buffer.tolist() == [0.0, 2.0, 2.0, 0.0] and weight.tolist() != [1.0, 1.0]
    assert guard.restore() == 2  # buffer's and weight's (read-only blocks are not copied back)
    assert buffer.tolist() == [0.0] * 4 and weight.tolist() == [1.0, 1.0]
    assert guard._new and all(key not in guard._kept for key in guard._new)


def test_forward_only_has_no_backward_rows():
    report = profile_ops(lambda x: x.exp().sum(), torch.ones(3), backward=False)
    names = {row["name"] for row in report.rows}
    assert "forward" in names and "backward" not in names and "ExpBackward0" not in names


def test_the_plot_shows_operators_not_labels():
    figure = profile_ops(lambda x: (x * 2).exp().sum(), torch.ones(5)).plot(top=3)
    labels = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
    assert len(labels) == 3 and "forward" not in labels and "backward" not in labels


def test_compare_returns_one_timing_per_candidate_relative_to_the_first():
    x = torch.randn(200)
    result = compare({"a": torch.sigmoid, "b": lambda t: 1 / (1 + torch.exp(-t))}, x, rounds=3)
    assert isinstance(result, Comparison) and [t.label for t in result] == ["a", "b"]
    assert result[0].ratio == 1.0
    assert result[1].ratio == pytest.approx(result[1].median_s / result[0].median_s)
    assert all(t.rounds == 3 and t.median_s > 0 and t.iqr_s >= 0 for t in result)
    assert "ratio to first" in repr(result) and "<table>" in result._repr_html_()
    assert len(result.plot().axes[0].patches) == 2


def test_compare_forward_only_runs_without_grad():
    seen = []

    def spy(t):
        seen.append(torch.is_grad_enabled())
        return t * 2

    compare({"spy": spy}, torch.ones(3), backward=False, rounds=1, min_run_time=0.001)
    assert seen and not any(seen)


def test_a_candidate_without_a_graph_is_refused_for_backward():
    with pytest.raises(TypeError, match="must return a tensor that requires grad"):
        compare({"detached": lambda t: t.detach() * 2}, torch.ones(3), rounds=1)


def test_swish_saves_half_of_the_composition_and_is_twice_differentiable():
    x = torch.randn(1000, requires_grad=True)
    mine = saved_tensor_bytes(fns.swish, x)
    composed = saved_tensor_bytes(lambda t: t * torch.sigmoid(t), x)
    assert mine * 2 <= composed
    x64 = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fns.swish, (x64,))
    assert torch.autograd.gradgradcheck(fns.swish, (x64,))
    torch.testing.assert_close(fns.swish(x64), torch.nn.functional.silu(x64))


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: profile_ops("f", torch.ones(2)), TypeError, "fn must be callable"),
        (lambda: profile_ops(lambda t: t.detach(), torch.ones(2)), TypeError, "requires grad"),
        (lambda: profile_ops(torch.sin, torch.ones(2), runs=0), ValueError, "runs"),
        (lambda: profile_ops(torch.sin, torch.ones(2), runs=2.0), ValueError, "runs"),
        (lambda: compare({}, torch.ones(2)), ValueError, "candidates"),
        (lambda: compare({"a": 3}, torch.ones(2)), TypeError, "candidates\\['a'\\]"),
        (lambda: compare({"a": torch.sin}, torch.ones(2), rounds=0), ValueError, "rounds"),
        (lambda: fns.swish(torch.arange(3)), TypeError, "floating-point"),
    ],
)
def test_bad_arguments(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


# --- what the audit found: in place on inputs, training steps --------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.relu_().sum(),
        nn.Sequential(nn.ReLU(inplace=True), nn.Linear(3, 1)),
    ],
    ids=["x.relu_()", "ReLU(inplace=True) first"],
)
def test_a_function_working_on_its_input_in_place_is_profiled(fn):
    x = torch.randn(4, 3)
    before = x.clone()
    report = profile_ops(fn, x)
    names = {row["name"] for row in report.rows}
    assert {"forward", "backward", "aten::relu_", "CloneBackward0"} <= names
    assert torch.equal(x, before) and x.grad is None


def test_a_function_that_leaves_its_inputs_alone_gets_the_leaves_themselves():
    report = profile_ops(lambda x: x.relu().sum(), torch.randn(4, 3))
    names = {row["name"] for row in report.rows}
    assert "aten::relu" in names and not any("Clone" in name for name in names)


def _training_step(optimizer_type, **options):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
    optimizer = optimizer_type(model.parameters(), **options)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    def step(x):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        schedule.step()  # the learning rate halves: a float, where no operator looks
        return loss

    return model, optimizer, step, schedule


@pytest.mark.parametrize(
    ("optimizer_type", "options"),
    [(torch.optim.Adam, {"lr": 0.1}), (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9})],
    ids=["Adam", "SGD with momentum"],
)
def test_profiling_a_training_step_leaves_the_optimizer_as_it_was(optimizer_type, options):
    model, optimizer, step, schedule = _training_step(optimizer_type, **options)
    x = torch.randn(8, 4)
    step(x)  # one step taken already: the state holds moments, momentum buffers, a count
    state, epoch = copy.deepcopy(optimizer.state_dict()), schedule.last_epoch
    parameters = [p.detach().clone() for p in model.parameters()]
    report = profile_ops(step, x, backward=False)
    assert "Optimizer.step#" + optimizer_type.__name__ + ".step" in {r["name"] for r in report.rows}
    after = optimizer.state_dict()
    assert after["param_groups"] == state["param_groups"]  # the learning rate: 0.05 still
    assert optimizer.param_groups[0]["lr"] == 0.05 and schedule.last_epoch == epoch
    assert after["state"].keys() == state["state"].keys()
    for key, entry in state["state"].items():
        for name, value in entry.items():
            assert torch.equal(torch.as_tensor(after["state"][key][name]), torch.as_tensor(value))
    assert all(torch.equal(a, b) for a, b in zip(parameters, model.parameters(), strict=True))


def test_profiling_a_first_training_step_creates_no_optimizer_state():
    _model, optimizer, step, _schedule = _training_step(torch.optim.SGD, lr=0.1, momentum=0.9)
    profile_ops(step, torch.randn(8, 4), backward=False)
    assert not optimizer.state  # no momentum_buffer, no step


def test_a_step_that_ran_backward_itself_is_told_to_pass_backward_false():
    _model, _optimizer, step, _schedule = _training_step(torch.optim.SGD, lr=0.1)
    with pytest.raises(RuntimeError, match=r"fn already ran backward.*backward=False"):
        profile_ops(step, torch.randn(8, 4))


# --- the re-audit on real-world code -------------------------------------------------------


def test_a_gradient_scaler_a_training_step_uses_gets_its_state_back():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)

    def step(x):
        optimizer.zero_grad()
        loss = model(x).pow(2).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()  # grows the scale at every step (growth_interval=1)
        return loss

    fresh = copy.deepcopy(vars(scaler))
    profile_ops(step, torch.ones(2, 3), backward=False)
    assert scaler._scale is None and vars(scaler) == fresh  # still fresh: no scale made
    step(torch.ones(2, 3))
    used = scaler.state_dict()
    profile_ops(step, torch.ones(2, 3), backward=False)
    assert scaler.state_dict() == used


def test_a_modules_plain_attributes_are_put_back():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 3)
            self.calls, self.seen = 0, []

        def forward(self, x):
            self.calls += 1
            self.seen.append(x.shape)
            self.last = x.detach()  # an attribute added by the forward
            return self.layer(x)

    model = Counting()
    seen = model.seen
    profile_ops(lambda x: model(x).sum(), torch.ones(2, 3))
    assert model.calls == 0 and model.seen is seen and seen == []
    assert not hasattr(model, "last")


def test_the_log_level_variables_are_as_the_caller_had_them(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "INFO")
    profile_ops(lambda x: (x * 2).sum(), torch.ones(3))
    assert "KINETO_LOG_LEVEL" not in os.environ
    assert os.environ["TORCH_CPP_LOG_LEVEL"] == "INFO"


def test_profiling_a_model_that_draws_from_pythons_and_numpys_random_leaves_them_as_found():
    # revtorch's fix_random_seed draws a seed from Python's random in forward; a model may
    # draw from NumPy's too: profile_ops runs fn twice, and neither stream may notice.
    import random

    import numpy as np

    torch.manual_seed(0)
    model = ReversibleSequence()

    def step(x):
        return model(x).sum() * float(np.random.rand() > 2)  # NumPy's draw, never used

    random.seed(3)
    np.random.seed(3)
    expected = (random.random(), np.random.rand())
    random.seed(3)
    np.random.seed(3)
    profile_ops(step, torch.randn(2, 4))
    assert (random.random(), np.random.rand()) == expected


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def test_attributes_forward_sets_on_a_submodule_or_a_parameter_are_removed():
    # xformers' Deterministic (record_rng), nested in a container as its reversible blocks
    # nest it, and BinaryNet's BinarizeLinear (`self.bias.org`): only the top-level
    # module's attributes were put back.
    model = nn.Sequential(Deterministic(nn.Sequential(BinarizeLinear(4, 4), nn.Dropout(0.2))))
    profile_ops(lambda x: model(x).sum(), torch.randn(3, 4))
    assert not hasattr(model[0], "cpu_state")
    assert not hasattr(model[0].net[0].bias, "org")


class _Field(nn.Module):
    """A model returning a dict of outputs (a radiance field's rgb and density)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 4)

    def forward(self, x):
        h = self.linear(x)
        return {"rgb": torch.sigmoid(h[:, :3]), "density": nn.functional.softplus(h[:, 3:])}


@pytest.mark.parametrize(
    "model, x",
    [
        (_Field(), torch.randn(4, 3)),  # a dict
        (nn.LSTM(3, 4, batch_first=True), torch.randn(1, 5, 3)),  # (output, (h, c))
    ],
    ids=["dict", "nested tuple"],
)
def test_a_model_returning_several_outputs_is_profiled_through_all_of_them(model, x):
    report = profile_ops(model, x)
    names = {row["name"] for row in report.rows}
    assert "backward" in names and any("Backward" in name for name in names)
    assert all(p.grad is None for p in model.parameters())  # the caller's .grad untouched


def test_an_output_with_nothing_to_differentiate_is_said_as_what_it_is():
    with pytest.raises(TypeError, match="got a tuple with no tensor that requires grad"):
        profile_ops(lambda x: (x.detach(), 1), torch.ones(3, requires_grad=True))
