"""autograd_helpers.profiling: the profiler's rows, fair comparisons, and the Swish Function."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from torch import nn

from autograd_helpers import functions as fns
from autograd_helpers.memory import saved_tensor_bytes
from autograd_helpers.profiling import PROFILE_COLUMNS, Comparison, compare, profile_ops

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
        (lambda: compare({}, torch.ones(2)), ValueError, "candidates"),
        (lambda: compare({"a": 3}, torch.ones(2)), TypeError, "candidates\\['a'\\]"),
        (lambda: compare({"a": torch.sin}, torch.ones(2), rounds=0), ValueError, "rounds"),
        (lambda: fns.swish(torch.arange(3)), TypeError, "floating-point"),
    ],
)
def test_bad_arguments(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()
