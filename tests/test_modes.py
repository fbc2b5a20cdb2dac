"""autograd_helpers.modes.mode_table: six rows, every entry checked, the model left untouched."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograd_helpers.modes import MODE_COLUMNS, ModeTable, mode_table, preserved_state
from tests.real_world import (
    AdditiveCoupling,
    BinarizeLinear,
    Cycle,
    Deterministic,
    InvertibleModuleWrapper,
    ReversibleSequence,
)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1)
    )


X = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))


def test_every_record_of_a_model_with_dropout_and_batch_norm():
    model = _model()
    table = mode_table(model, X)
    assert isinstance(table, ModeTable) and len(table) == 6
    assert all(list(record) == list(MODE_COLUMNS) for record in table)
    by_key = {(r["mode"], r["grad mode"]): r for r in table}
    for (mode, grad), record in by_key.items():
        training, recording = mode == "train", grad == "enabled"
        assert record["output requires grad"] is recording
        assert record["equal to train output"] is training  # the same dropout masks
        assert record["dropout active"] is training
        assert record["batch-norm stats updated"] is training  # even under no_grad
        assert (record["bytes saved for backward"] > 0) is recording
        assert record["backward"] == ("works" if recording else "fails: no graph was recorded")
    # eval still records a graph; train saves more (dropout's mask, batch norm's batch stats)
    train_bytes = by_key["train", "enabled"]["bytes saved for backward"]
    eval_bytes = by_key["eval", "enabled"]["bytes saved for backward"]
    assert 0 < eval_bytes < train_bytes


def test_without_dropout_or_batch_norm_eval_and_train_agree():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    table = mode_table(model, X)
    assert all(r["equal to train output"] for r in table)
    assert not any(r["dropout active"] or r["batch-norm stats updated"] for r in table)
    saved = {r["mode"]: r["bytes saved for backward"] for r in table if r["grad mode"] == "enabled"}
    assert saved["train"] == saved["eval"] > 0


@pytest.mark.parametrize("start_in_eval", [False, True])
def test_the_model_is_left_as_it_was_found(start_in_eval):
    model = _model()
    model[1].running_mean += 3.0
    model.train(not start_in_eval)
    model[3].train()  # a mixed state: one submodule differs
    model(X).sum().backward()  # some gradients already there
    flags = [m.training for m in model.modules()]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters()]
    mode_table(model, X)
    assert [m.training for m in model.modules()] == flags
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters(), strict=True))


class RaisesInEval(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        y = self.norm(x)
        if not self.training:
            raise RuntimeError("this model refuses eval mode")
        return y


def test_the_state_is_restored_even_when_the_model_raises():
    model = RaisesInEval()
    before = model.norm.running_mean.clone()
    with pytest.raises(RuntimeError, match="refuses eval mode"):
        mode_table(model, X)
    assert model.training and torch.equal(model.norm.running_mean, before)


def test_the_table_displays_as_text_and_html():
    table = mode_table(_model(), X)
    text = str(table)
    assert text.splitlines()[0].startswith("mode   grad mode")
    assert "<th>bytes saved for backward</th>" in table._repr_html_()


def test_preserved_state_restores_a_batch_norm():
    norm = nn.BatchNorm1d(2)
    with preserved_state(norm):
        norm(torch.randn(4, 2) + 5)
    assert torch.equal(norm.running_mean, torch.zeros(2))


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: mode_table("model", X), TypeError, "model must be an nn.Module"),
        (lambda: mode_table(_model(), [[1.0] * 4]), TypeError, "x must be a torch.Tensor"),
        (lambda: mode_table(_model(), X, seed=-1), ValueError, "seed"),
        (lambda: preserved_state(3).__enter__(), TypeError, "model"),
    ],
)
def test_bad_arguments(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def _by_key(table):
    return {(r["mode"], r["grad mode"]): r for r in table}


def test_a_tuple_output_counts_all_its_tensors():
    torch.manual_seed(0)
    gru = nn.GRU(4, 5, num_layers=2, dropout=0.5)  # returns (output, h_n)
    rows = _by_key(mode_table(gru, torch.randn(3, 2, 4)))
    assert rows["train", "enabled"]["backward"] == "works"
    assert rows["eval", "enabled"]["output requires grad"] is True
    assert [rows["train", g]["equal to train output"] for g in ("no_grad", "inference_mode")] == [
        True,
        True,
    ]


class DictOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return {"scores": self.linear(x), "note": None, "inputs": [x]}


def test_a_dict_output_works_and_an_output_without_tensors_is_refused():
    table = mode_table(DictOutput(), X)
    assert [r["backward"] for r in table if r["grad mode"] == "enabled"] == ["works", "works"]

    class Nothing(nn.Module):
        def forward(self, x):
            return "done"

    with pytest.raises(TypeError, match=r"model\(x\) must return a tensor.*returned str"):
        mode_table(Nothing(), X)


class FunctionalDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return F.dropout(self.linear(x), 0.5, training=self.training)


class RecurrentDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 5, num_layers=2, dropout=0.5)

    def forward(self, x):
        return self.gru(x)[0]


@pytest.mark.parametrize(
    ("model", "x"),
    [(FunctionalDropout(), X), (RecurrentDropout(), torch.randn(3, 2, 4))],
    ids=["F.dropout", "GRU(dropout=)"],
)
def test_dropout_is_found_by_behaviour_not_by_module_type(model, x):
    rows = _by_key(mode_table(model, x))
    assert all(rows["train", grad]["dropout active"] for grad in ("enabled", "no_grad"))
    assert not any(rows["eval", grad]["dropout active"] for grad in ("enabled", "no_grad"))


class Detaching(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x).detach()


@pytest.mark.parametrize(
    ("model", "enabled"),
    [
        (nn.Sequential(nn.Dropout(0.5), nn.Tanh()), "fails: neither x nor any parameter"),
        (nn.Linear(4, 2).requires_grad_(False), "fails: neither x nor any parameter"),
        (Detaching(), "fails: the output depends on nothing that requires grad"),
    ],
    ids=["parameter-free", "frozen", "detached"],
)
def test_backward_failing_with_grad_enabled_does_not_blame_grad_mode(model, enabled):
    for record in mode_table(model, X):
        expected = enabled if record["grad mode"] == "enabled" else "no graph was recorded"
        assert expected in record["backward"], record


def test_no_gradient_and_no_random_state_is_touched():
    model = nn.Sequential(nn.Linear(4, 2), nn.Dropout())
    x = X.clone().requires_grad_()
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    table = mode_table(model, x)
    assert torch.equal(torch.rand(3), expected)  # the caller's random stream goes on unchanged
    assert x.grad is None and all(p.grad is None for p in model.parameters())
    assert [r["backward"] for r in table if r["grad mode"] == "enabled"] == ["works", "works"]


def test_a_lazy_model_gets_a_clear_error_and_stays_lazy():
    model = nn.Sequential(nn.LazyLinear(3), nn.Dropout())
    with pytest.raises(ValueError, match=r"uninitialised lazy .*0\.weight.*call `model\(x\)` once"):
        mode_table(model, torch.randn(4, 5))
    assert torch.nn.parameter.is_lazy(model[0].weight)
    model(torch.randn(4, 5))  # materialised: now it works
    assert len(mode_table(model, torch.randn(4, 5))) == 6


# --- outputs equal up to rounding (another kernel is not another computation) -------------


@pytest.mark.parametrize(
    ("model", "x"),
    [
        (nn.TransformerEncoderLayer(16, 4, dropout=0.0, batch_first=True), (2, 5, 16)),
        (nn.LSTM(8, 16, num_layers=2), (5, 3, 8)),
    ],
    ids=["Transformer eval fast path", "LSTM under no_grad (MKLDNN)"],
)
def test_a_different_kernel_is_not_a_different_output(model, x):
    torch.manual_seed(0)
    table = mode_table(model, torch.randn(x))
    assert all(r["equal to train output"] is True for r in table)  # a plain bool either way
    assert not any(r["dropout active"] or r["batch-norm stats updated"] for r in table)
    for index, column in table.notes:  # where the bits differ, the table says so
        assert column == "equal to train output"
        assert table._cells()[index][3] == "True (within rounding)"


class RoundsByMode(nn.Module):
    """The same sum in another order in eval mode (as a fused kernel would), or not the same."""

    def __init__(self, eval_factor: float = 1.0) -> None:
        super().__init__()
        self.eval_factor = eval_factor

    def forward(self, x):
        if self.training:
            return (x + 0.1) + 0.2
        return (x + (0.1 + 0.2)) * self.eval_factor


def test_the_table_says_when_outputs_agree_only_up_to_rounding():
    x = torch.full((3,), 2.0, dtype=torch.float64)
    assert not torch.equal((x + 0.1) + 0.2, x + (0.1 + 0.2))  # one ulp apart
    table = mode_table(RoundsByMode(), x)
    assert [r["equal to train output"] for r in table] == [True] * 6
    eval_rows = [i for i, r in enumerate(table) if r["mode"] == "eval"]
    assert table.notes == {(i, "equal to train output"): "within rounding" for i in eval_rows}
    lines = str(table).splitlines()
    assert all("True (within rounding)" in lines[1 + i] for i in eval_rows)
    assert "<td>True (within rounding)</td>" in table._repr_html_()
    assert "within rounding" not in lines[1]  # the train rows are equal bit for bit

    off_by_more = mode_table(RoundsByMode(eval_factor=1 + 1e-9), x)
    assert [r["equal to train output"] for r in off_by_more if r["mode"] == "eval"] == [False] * 3
    assert not off_by_more.notes


# --- inputs of any dtype; running statistics of every kind -----------------------------------


def test_a_model_taking_token_ids_works():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    rows = _by_key(mode_table(model, torch.tensor([[1, 2, 3], [4, 5, 6]])))
    assert rows["train", "enabled"]["backward"] == "works"  # gradients go to the embedding
    assert rows["eval", "enabled"]["output requires grad"] is True
    assert (
        rows["train", "no_grad"]["dropout active"] and not rows["eval", "no_grad"]["dropout active"]
    )


class CountsCalls(nn.Module):
    """No norm layer, but a buffer that its forward updates in train mode."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()), persistent=False)

    def forward(self, x):
        if self.training:
            self.calls += 1
        return x * 2


@pytest.mark.parametrize(
    ("model", "x"),
    [
        (nn.InstanceNorm2d(3, track_running_stats=True), torch.randn(2, 3, 4, 4)),
        (nn.BatchNorm1d(4, momentum=None), X),  # a cumulative average
        (CountsCalls(), X),
    ],
    ids=["InstanceNorm2d", "BatchNorm1d(momentum=None)", "a buffer of its own"],
)
def test_running_statistics_are_found_by_behaviour(model, x):
    for record in mode_table(model, x):
        assert record["batch-norm stats updated"] is (record["mode"] == "train"), record


def test_preserved_state_puts_back_every_buffer_flag_and_gradient():
    model = nn.Sequential(CountsCalls(), nn.Linear(4, 2))
    running = model[0].calls
    with preserved_state(model):
        model(X)  # the non-persistent buffer counts
        model[0].calls = torch.ones(())  # replaced, not edited
        model[1].weight.requires_grad_(False)
        model[1].bias.grad = torch.ones(2)
        model.eval()
    assert model[0].calls is running and running.item() == 0
    assert model[1].weight.requires_grad and model[1].bias.grad is None
    assert model.training and model[0].training


def test_a_graph_recorded_before_still_runs_backward():
    # Only changed values are copied back: a saved parameter keeps its version counter.
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(), nn.Linear(8, 1))
    loss = model(X).sum()
    mode_table(model, X)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


# --- what the audit found ---------------------------------------------------------------


def test_a_dropout_that_kept_every_element_is_still_active_for_every_seed():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
    x = torch.randn(1, 4)  # four outputs: often nothing is dropped (0.9**4 = 66 %)
    for seed in range(40):
        rows = _by_key(mode_table(model, x, seed=seed))
        assert all(rows["train", grad]["dropout active"] for grad in ("enabled", "no_grad")), seed
        assert not any(rows["eval", grad]["dropout active"] for grad in ("enabled", "no_grad"))
        assert rows["eval", "enabled"]["equal to train output"] is False, seed


@pytest.mark.parametrize(
    ("first", "changes_output"),
    [(nn.Dropout(0.5, inplace=True), True), (nn.ReLU(inplace=True), False)],
    ids=["Dropout(inplace=True)", "ReLU(inplace=True)"],
)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_first_layer_working_in_place_changes_neither_x_nor_the_verdicts(
    first, changes_output, requires_grad
):
    torch.manual_seed(0)
    model = nn.Sequential(first, nn.Linear(4, 2))
    x = torch.randn(8, 4).requires_grad_(requires_grad)
    before = x.detach().clone()
    rows = _by_key(mode_table(model, x))
    assert torch.equal(x.detach(), before) and x.grad is None and x._version == 0
    for (mode, _grad), record in rows.items():
        expected = mode == "train" or not changes_output
        assert record["equal to train output"] is expected, (mode, record)
        assert record["dropout active"] is (changes_output and mode == "train")
    assert rows["train", "enabled"]["backward"] == "works"


def test_batch_norm_with_a_batch_of_one_is_refused_in_words():
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match=r"mode_table\(\): train-mode batch norm needs a batch"):
        mode_table(model, torch.randn(1, 4))
    assert model.training and model[1].num_batches_tracked.item() == 0


class SmallPartChangesInEval(nn.Module):
    """One output with elements of very different sizes; eval changes only the small ones."""

    def forward(self, x):
        small = x if self.training else x * 1.001
        return torch.cat([x * 1e4, small])


def test_a_change_in_the_small_elements_of_a_mixed_scale_output_is_seen():
    x = torch.tensor([0.5, -0.7, 0.9, 0.3])
    rows = _by_key(mode_table(SmallPartChangesInEval(), x))
    assert [rows["eval", g]["equal to train output"] for g in ("enabled", "no_grad")] == [
        False,
        False,
    ]
    assert rows["train", "no_grad"]["equal to train output"] is True


def test_a_graph_recorded_inside_preserved_state_runs_backward_after_it():
    norm = nn.BatchNorm1d(3)
    statistics = norm.running_mean
    x = torch.randn(4, 3, requires_grad=True)
    with preserved_state(norm):
        y = (norm(x) * torch.arange(3.0)).sum()
    y.backward()  # the running statistics it saved were not written back into
    assert x.grad is not None and norm.running_mean is statistics
    assert torch.equal(statistics, torch.zeros(3)) and norm.num_batches_tracked.item() == 0


def test_preserved_state_puts_back_dtypes_and_what_the_model_has_by_name():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    model(torch.randn(3, 2)).sum().backward()
    weight, grad, statistics = model[0].weight, model[0].weight.grad, model[1].running_var
    with preserved_state(model):
        model.double()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {b.dtype for b in model.buffers() if b.is_floating_point()} == {torch.float32}
    assert model[0].weight is weight and weight.grad is grad and grad.dtype == torch.float32
    with preserved_state(model):
        del model[0].weight
        model[0].weight = torch.ones(2, 2)  # a plain attribute now
        model[1].register_buffer("extra", torch.ones(1))
        model[1] = nn.Identity()
    assert model[0].weight is weight and list(model[0]._parameters) == ["weight", "bias"]
    assert model[1].running_var is statistics and "extra" not in dict(model.named_buffers())
    model(torch.randn(3, 2))  # still a working model


def test_the_enabled_rows_record_a_graph_even_inside_no_grad():
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        table = mode_table(model, torch.randn(4, 3))
    enabled = [r for r in table if r["grad mode"] == "enabled"]
    assert enabled and all(r["output requires grad"] for r in enabled)


def test_a_non_leaf_x_keeps_the_callers_graph():
    # The re-audit: the table's backward ran on into the caller's graph and freed it.
    w = torch.linspace(-1, 1, 12).reshape(4, 3).requires_grad_()
    x = w.exp()
    grad_fn = x.grad_fn
    table = mode_table(nn.Sequential(nn.Linear(3, 3), nn.Dropout()), x)
    assert x.grad_fn is grad_fn and x.requires_grad and w.grad is None
    assert [r["backward"] for r in table if r["grad mode"] == "enabled"] == ["works", "works"]
    x.sum().backward()  # the caller's graph still has its saved tensors
    torch.testing.assert_close(w.grad, w.detach().exp())


def test_the_batch_of_one_refusal_says_what_batch_norm_really_computes():
    # The re-audit: running_var is updated with the unbiased variance (n - 1), with momentum.
    model = nn.BatchNorm1d(1)
    x = torch.tensor([[1.0], [2.0], [4.0]])
    model(x)
    expected = 0.9 * 1.0 + 0.1 * x.var(unbiased=True)
    torch.testing.assert_close(model.running_var, expected.reshape(1))
    with pytest.raises(ValueError) as raised:
        mode_table(nn.BatchNorm1d(1), torch.ones(1, 1))
    for phrase in ("the biased one, divided by n", "unbiased one (divided by n − 1", "momentum"):
        assert phrase in str(raised.value), str(raised.value)


def test_the_callers_hooks_on_x_and_on_parameters_do_not_fire_in_the_table():
    model = torch.nn.Linear(3, 2)
    x = torch.ones(4, 3, requires_grad=True)
    seen = []
    x.register_hook(lambda grad: seen.append("x"))
    model.weight.register_hook(lambda grad: seen.append("weight"))
    table = mode_table(model, x)
    assert seen == [] and table[0]["backward"] == "works"
    model(x).sum().backward()  # the caller's own backward still runs them, once each
    assert sorted(seen) == ["weight", "x"]


def test_a_module_that_needs_more_than_one_input_is_refused_in_one_sentence():
    with pytest.raises(TypeError, match=r"MultiheadAttention\.forward needs more than one input"):
        mode_table(torch.nn.MultiheadAttention(4, 2), torch.ones(2, 3, 4))


def test_spectral_norms_power_iteration_is_not_counted_as_batch_norm_stats():
    from torch.nn.utils import spectral_norm
    from torch.nn.utils.parametrizations import spectral_norm as parametrized_spectral_norm

    for wrap in (spectral_norm, parametrized_spectral_norm):
        torch.manual_seed(0)
        model = nn.Sequential(wrap(nn.Linear(4, 3)), nn.ReLU(), nn.Linear(3, 1))
        for record in mode_table(model, X):
            assert record["batch-norm stats updated"] is False, (wrap, record)
        with_norm = nn.Sequential(wrap(nn.Linear(4, 3)), nn.BatchNorm1d(3))
        rows = _by_key(mode_table(with_norm, X))
        assert rows["train", "enabled"]["batch-norm stats updated"] is True


# --- issue 25: the library on real code --------------------------------------------------------


def test_a_model_whose_function_refuses_autograd_grad_has_a_backward_that_works():
    # memcnn's blocks ask for .backward(); loss.backward() works, so backward "works".
    torch.manual_seed(0)
    model = InvertibleModuleWrapper(AdditiveCoupling())
    x = torch.randn(3, 4, requires_grad=True)
    table = mode_table(model, x)
    rows = _by_key(table)
    assert rows["train", "enabled"]["backward"] == rows["eval", "enabled"]["backward"] == "works"
    assert "refuses autograd.grad" in str(table)
    assert x.grad is None and all(p.grad is None for p in model.parameters())


def test_a_deterministic_model_that_reseeds_torch_has_no_dropout_and_keeps_every_random_state():
    # revtorch's fix_random_seed: random.randint, then torch.manual_seed, in forward.
    import random

    import numpy as np

    torch.manual_seed(0)
    model = ReversibleSequence()
    x = torch.randn(3, 4, requires_grad=True)
    random.seed(7)
    np.random.seed(7)
    python, numpy_draw = random.random(), np.random.rand()
    random.seed(7)
    np.random.seed(7)
    table = mode_table(model, x)
    assert not any(record["dropout active"] for record in table), str(table)
    assert (random.random(), np.random.rand()) == (python, numpy_draw)  # streams go on
    assert "writes .grad itself" in str(table)  # the blocks' backward fills their .grad
    assert all(p.grad is None for p in model.parameters())


def test_a_dropout_that_draws_the_same_mask_seed_after_seed_is_still_seen_from_its_outputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.01))  # keeps all four, nearly always
    rows = _by_key(mode_table(model, torch.randn(1, 4)))
    assert (
        rows["train", "enabled"]["dropout active"] and not rows["eval", "enabled"]["dropout active"]
    )


class _ResidualBlock(nn.Module):
    """A ResNet's basic block, as timm's small ResNets stack them."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)
        self.conv2, self.bn2 = nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


@pytest.mark.parametrize("dropout", [False, True])
def test_the_table_runs_the_model_as_often_as_its_docstring_says(dropout):
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3, padding=1), _ResidualBlock(4), _ResidualBlock(4)]
    model = nn.Sequential(*layers, nn.Flatten(), *([nn.Dropout(0.2)] if dropout else []))
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(module.training))
    mode_table(model, torch.randn(2, 3, 6, 6))
    assert len(calls) <= (16 if dropout else 10), len(calls)  # 25 before
    assert "ten times" in mode_table.__doc__ and "up to sixteen" in mode_table.__doc__


class _Drawing(nn.Module):
    """Draws zeros and ones in forward: `certain` ones only (p = 1), or a fused dropout."""

    def __init__(self, certain: bool) -> None:
        super().__init__()
        self.certain = certain

    def forward(self, x):
        if self.certain:  # a draw that cannot come out otherwise: not random
            return x * torch.bernoulli(torch.ones_like(x))
        return torch.ops.aten.native_dropout(x, 0.01, self.training)[0]


@pytest.mark.parametrize(("certain", "active"), [(True, False), (False, True)])
def test_dropout_active_is_whether_the_output_could_have_come_out_otherwise(certain, active):
    rows = _by_key(mode_table(_Drawing(certain), torch.randn(1, 3)))
    assert rows["train", "no_grad"]["dropout active"] is active
    assert rows["eval", "no_grad"]["dropout active"] is False


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def test_every_forward_runs_from_the_callers_module_state_a_cursor_included():
    # detectron2's CycleBatchNormList moves `self._pos` in forward: a row that ran from the
    # row before's cursor computed another branch, and the table called it "dropout active".
    torch.manual_seed(0)
    model, seen = Cycle(), []
    model.register_forward_pre_hook(lambda module, args: seen.append(module._pos))
    table = mode_table(model, torch.randn(2, 3))
    assert seen and set(seen) == {0}, seen
    assert not any(record["dropout active"] for record in table), str(table)
    assert all(record["equal to train output"] for record in table), str(table)
    assert model._pos == 0


def test_a_cycling_batch_norm_runs_its_first_norm_in_every_row():
    class CycleNorm(nn.ModuleList):  # detectron2's CycleBatchNormList, affine off
        def __init__(self):
            super().__init__([nn.BatchNorm1d(3), nn.BatchNorm1d(3)])
            self._pos = 0

        def forward(self, x):
            out = self[self._pos](x)
            self._pos = (self._pos + 1) % len(self)
            return out

    norm = CycleNorm()
    norm[1].running_mean.fill_(5.0)  # the second norm would shift eval's output by 5
    rows = _by_key(mode_table(nn.Sequential(nn.Linear(3, 3), norm), torch.randn(4, 3)))
    assert all(not r["dropout active"] for r in rows.values())
    eval_rows = [rows["eval", grad] for grad in ("enabled", "no_grad", "inference_mode")]
    assert all(not r["equal to train output"] for r in eval_rows)  # running vs batch stats
    assert norm._pos == 0 and float(norm[0].running_mean.abs().sum()) == 0.0


def test_an_attribute_set_on_a_parameter_in_forward_is_removed():
    # BinaryNet's training loop branches on hasattr(p, "org"): a table must not add it.
    torch.manual_seed(0)
    model = nn.Sequential(BinarizeLinear(4, 6), nn.Tanh())
    model[0].weight.note = note = object()  # the caller's own attribute stays, as it was
    mode_table(model, torch.randn(8, 4))
    assert not hasattr(model[0].bias, "org")
    assert model[0].weight.note is note


def test_an_attribute_a_submodules_forward_creates_is_removed():
    # xformers' Deterministic.record_rng sets `self.cpu_state` in train mode.
    model = nn.Sequential(Deterministic(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.2))))
    mode_table(model, torch.randn(3, 4))
    assert not hasattr(model[0], "cpu_state")
    with preserved_state(model):
        model(torch.randn(3, 4))
    assert not hasattr(model[0], "cpu_state")
