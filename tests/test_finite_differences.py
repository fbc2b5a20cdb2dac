"""autograd_helpers.finite_differences: central differences against known derivatives."""

from __future__ import annotations

import matplotlib
import pytest
import torch

from autograd_helpers.finite_differences import (
    central_difference,
    compare_derivatives,
    eps_sweep,
    plot_eps_sweep,
)
from tests.real_world import (
    AdditiveCoupling,
    BinarizeLinear,
    Cycle,
    InvertibleModuleWrapper,
    ReversibleSequence,
)

matplotlib.use("Agg")
DOUBLE = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=DOUBLE)


def test_one_input_one_output_is_shaped_like_jacobian():
    x = _x(2, 3)
    got = central_difference(torch.sin, x)
    assert got.shape == (2, 3, 2, 3)
    expected = torch.diag(x.cos().reshape(-1)).reshape(2, 3, 2, 3)  # d sin = cos, diagonal
    torch.testing.assert_close(got, expected, atol=1e-8, rtol=1e-7)


def test_several_inputs_give_one_jacobian_each():
    a, b = _x(3), _x(3, seed=1)
    da, db = central_difference(lambda u, v: u * v + u**2, (a, b))
    torch.testing.assert_close(da, torch.diag(b + 2 * a), atol=1e-8, rtol=1e-7)
    torch.testing.assert_close(db, torch.diag(a), atol=1e-8, rtol=1e-7)


def test_several_outputs_nest_like_torch():
    a, b = _x(2), _x(3, seed=1)

    def f(u, v):
        return u.sum() * v, (u * u).sum()

    got = central_difference(f, (a, b))
    expected = torch.autograd.functional.jacobian(f, (a, b))
    for got_row, want_row in zip(got, expected, strict=True):
        for g, w in zip(got_row, want_row, strict=True):
            torch.testing.assert_close(g, w, atol=1e-8, rtol=1e-6)


def test_the_inputs_are_left_unchanged_and_no_graph_is_recorded():
    x = _x(4).requires_grad_()
    before = x.detach().clone()
    central_difference(torch.exp, x)
    assert torch.equal(x.detach(), before) and x.grad is None


def test_float32_arithmetic_stays_float32_and_its_precision_is_noted():
    x = _x(3).float()
    with pytest.warns(UserWarning, match=r"inputs\[0\] is float32: .* about 6e-05 × \|f\|"):
        assert central_difference(torch.exp, x, 1e-3).dtype == torch.float32


def _sweep():
    eps = [10.0**-k for k in range(1, 14)]
    return eps_sweep(torch.sigmoid, _x(5), eps)


def _best(records, dtype):
    return min((r for r in records if r["dtype"] is dtype), key=lambda r: r["error"])


def test_eps_sweep_records_every_dtype_and_eps_as_plain_dicts():
    records = _sweep()
    assert len(records) == 2 * 13
    assert all(set(r) == {"dtype", "eps", "error"} for r in records)
    assert {r["dtype"] for r in records} == {torch.float32, torch.float64}


def test_float32s_best_eps_is_larger_than_float64s_and_both_near_the_cube_root_rule():
    records = _sweep()
    best32, best64 = _best(records, torch.float32), _best(records, torch.float64)
    assert best32["eps"] > best64["eps"]
    for best, dtype in ((best32, torch.float32), (best64, torch.float64)):
        rule = torch.finfo(dtype).eps ** (1 / 3)  # the optimum of a central difference
        assert rule / 100 <= best["eps"] <= rule * 100, (dtype, best)


def test_both_errors_rise_again_below_their_best_eps():
    records = _sweep()
    for dtype in (torch.float32, torch.float64):
        best = _best(records, dtype)
        tiniest = min((r for r in records if r["dtype"] is dtype), key=lambda r: r["eps"])
        assert tiniest["error"] > 100 * best["error"], dtype


def test_truncation_error_falls_like_eps_squared_in_float64():
    records = eps_sweep(torch.sin, _x(3), [1e-1, 1e-2], dtypes=(DOUBLE,))
    ratio = records[0]["error"] / records[1]["error"]
    assert 80 < ratio < 120  # ten times smaller eps, about a hundred times smaller error


def test_plot_marks_each_minimum():
    figure = plot_eps_sweep(_sweep(), title="sweep")
    (axes,) = figure.axes
    assert axes.get_xscale() == axes.get_yscale() == "log"
    assert len(axes.get_lines()) == 4  # a curve and a marked minimum per dtype
    assert [t.get_text() for t in axes.texts] == ["best eps 1e-02", "best eps 1e-05"]


def test_compare_derivatives_on_a_correct_and_a_broken_function():
    xs = torch.linspace(-3, 3, 30)  # an even count: 0 is not on the grid
    assert compare_derivatives(torch.tanh, xs, dtype=DOUBLE, eps=1e-6).passes
    assert compare_derivatives(torch.relu, xs, dtype=DOUBLE, eps=1e-6).passes  # kink unprobed
    kink = compare_derivatives(torch.relu, torch.tensor([0.0, 1.0]), dtype=DOUBLE, eps=1e-6)
    assert not kink.passes and kink.worst_x == 0.0 and kink.error == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: central_difference(torch.sin, torch.arange(3)), TypeError, r"inputs\[0\]"),
        (lambda: central_difference(torch.sin, _x(2), eps=0), ValueError, "eps"),
        (lambda: central_difference(lambda t: [t], _x(2)), TypeError, "f must return"),
        (lambda: central_difference(torch.sin, ()), ValueError, "at least one"),
        (lambda: eps_sweep(torch.sin, _x(2), []), ValueError, "eps_values"),
        (lambda: eps_sweep(torch.sin, _x(2), [1e-3], dtypes=(torch.int64,)), ValueError, "dtypes"),
        (lambda: plot_eps_sweep([]), ValueError, "records"),
        (lambda: plot_eps_sweep([{"eps": 1}]), ValueError, "keys dtype, eps, error"),
        (
            lambda: compare_derivatives(torch.sin, _x(2, 2), dtype=DOUBLE, eps=1e-3),
            TypeError,
            "1-D",
        ),
        (
            lambda: compare_derivatives(torch.sum, _x(3), dtype=DOUBLE, eps=1e-3),
            ValueError,
            "elementwise",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


# --- functions that return a view or an alias of their input (the buffers must not be shared)


@pytest.mark.parametrize(
    "f",
    [lambda t: t[0], lambda t: t.t(), lambda t: t.view(-1), lambda t: t, lambda t: t.add_(0)],
    ids=["select", "transpose", "view", "identity", "in place"],
)
def test_views_and_aliases_of_the_input_get_their_true_jacobian(f):
    x = torch.randn(2, 3, dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(lambda t: f(t.clone()), x)
    numerical = central_difference(f, x)
    torch.testing.assert_close(numerical, expected)
    assert numerical.abs().sum() > 0


def test_eps_sweep_of_a_view_is_exact_not_a_zero_jacobian():
    records = eps_sweep(lambda t: t.t(), torch.randn(2, 3), [1e-3], dtypes=(torch.float64,))
    assert records[0]["error"] < 1e-9


def test_a_function_writing_into_its_input_leaves_the_point_alone():
    x = torch.randn(4, dtype=torch.float64)
    before = x.clone()
    jac = central_difference(lambda t: t.mul_(2), x)
    torch.testing.assert_close(jac, 2 * torch.eye(4, dtype=torch.float64))
    assert torch.equal(x, before)


def test_a_scalar_input_and_output_give_a_scalar_jacobian():
    x = torch.tensor(2.0, dtype=DOUBLE)
    jac = central_difference(lambda t: t * t, x)
    assert jac.shape == ()
    assert abs(float(jac) - 4.0) < 1e-8


# --- what the audit found: in place, tuples, arrays and tensors of eps, sparse inputs ------


def test_eps_sweep_of_a_function_working_in_place():
    records = eps_sweep(lambda t: t.mul_(3), torch.randn(3), [1e-3], dtypes=(DOUBLE,))
    assert records[0]["error"] < 1e-9


def test_eps_sweep_refuses_a_function_returning_a_tuple_in_words():
    with pytest.raises(TypeError, match=r"eps_sweep\(\): f must return one tensor, got tuple"):
        eps_sweep(lambda t: (t.sin(), t.cos()), torch.randn(3), [1e-3])


@pytest.mark.parametrize(
    "eps_values",
    [
        torch.tensor([1e-2, 1e-5]),
        torch.tensor([1e-2, 1e-5], dtype=DOUBLE),
        pytest.param("numpy", id="numpy array"),
        (1e-2, 1e-5),
        (e for e in (1e-2, 1e-5)),
    ],
    ids=["float32 tensor", "float64 tensor", "numpy array", "tuple", "generator"],
)
def test_eps_values_may_be_any_1d_sequence_array_or_tensor(eps_values):
    if isinstance(eps_values, str):
        import numpy as np

        eps_values = np.array([1e-2, 1e-5])
    records = eps_sweep(torch.sin, torch.ones(3), eps_values, dtypes=(DOUBLE,))
    assert [r["eps"] for r in records] == pytest.approx([1e-2, 1e-5])
    assert all(type(r["eps"]) is float for r in records)


@pytest.mark.parametrize(
    ("eps_values", "phrase"),
    [
        (torch.tensor(1e-3), "1-D"),
        (torch.ones(2, 2) * 1e-3, r"1-D.*shape \(2, 2\)"),
        (torch.tensor([1e-3, -1e-3]), "positive numbers, got -0.001"),
        ([1e-3, float("nan")], "positive numbers, got nan"),
        ([True], "positive numbers, got True"),
        ("1e-3", "1-D sequence"),
        (3, "1-D sequence.*got int"),
        ({1e-3: "a"}, "1-D sequence.*got dict"),
        (torch.tensor([]), "at least one positive number"),
    ],
)
def test_bad_eps_values_are_named(eps_values, phrase):
    with pytest.raises(ValueError, match=r"eps_sweep\(\): eps_values must .*" + phrase):
        eps_sweep(torch.sin, torch.ones(3), eps_values)


def test_a_sparse_input_is_refused_with_what_to_do():
    sparse = torch.eye(3, dtype=DOUBLE).to_sparse()
    with pytest.raises(TypeError, match=r"inputs\[1\] is a sparse tensor.*inputs\[1\]\.to_dense"):
        central_difference(lambda a, b: a @ b, (_x(3, 3), sparse))


# --- the re-audit on real-world code -------------------------------------------------------


def test_a_random_f_gets_one_draw_for_every_evaluation_and_a_warning():
    dropout = torch.nn.Dropout(0.5)
    x = torch.ones(4, dtype=DOUBLE)
    torch.manual_seed(3)
    after = torch.rand(2)
    torch.manual_seed(3)
    with pytest.warns(UserWarning, match="f draws random numbers .* one fixed draw"):
        got = central_difference(dropout, x)
    assert torch.equal(torch.rand(2), after)  # the caller's random stream is untouched
    kept = got.diagonal()
    assert set(kept.round().tolist()) <= {0.0, 2.0} and got.abs().max() <= 2.0 + 1e-6
    assert torch.equal(got, torch.diag(kept))  # no 1/eps noise off the diagonal


def test_batch_norm_in_train_mode_keeps_none_of_the_evaluations_updates():
    norm = torch.nn.BatchNorm1d(2).double()
    central_difference(norm, _x(4, 2))
    assert torch.equal(norm.running_mean, torch.zeros(2, dtype=DOUBLE))
    assert torch.equal(norm.running_var, torch.ones(2, dtype=DOUBLE))
    assert int(norm.num_batches_tracked) == 0 and norm.training


def test_eps_sweep_with_a_module_uses_its_dtype_and_refuses_another():
    layer = torch.nn.Linear(2, 2)
    records = eps_sweep(layer, torch.ones(2), [1e-3])
    assert [r["dtype"] for r in records] == [torch.float32]
    with pytest.raises(ValueError, match=r"dtypes holds float64, but f uses a Linear whose"):
        eps_sweep(layer, torch.ones(2), [1e-3], dtypes=(torch.float64,))
    with pytest.raises(ValueError, match="convert the module first"):
        eps_sweep(lambda t: layer(t) * 2, torch.ones(2), [1e-3], dtypes=(torch.float64,))


def test_eps_sweep_cuts_a_non_leaf_point_from_its_graph():
    w = torch.ones(2, dtype=DOUBLE, requires_grad=True)
    x = w * 2
    records = eps_sweep(torch.sin, x, [1e-4], dtypes=(DOUBLE,))
    assert records[0]["error"] < 1e-6 and w.grad is None
    x.sum().backward()  # the caller's graph is intact
    assert torch.equal(w.grad, torch.full((2,), 2.0, dtype=DOUBLE))


def test_a_sweep_whose_errors_are_nan_plots_without_crashing():
    records = eps_sweep(torch.sqrt, torch.zeros(2, dtype=DOUBLE), [1e-2, 1e-4], dtypes=(DOUBLE,))
    assert all(r["error"] != r["error"] for r in records)  # NaN, said as NaN
    figure = plot_eps_sweep(records)
    figure.canvas.draw()  # a log axis with nothing finite used to raise here
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert any("NaN or inf, not drawn: torch.float64: 2 of 2" in t for t in texts), texts


# --- from the real-world audit ---------------------------------------------------------------


def test_central_difference_refuses_f_that_draws_from_its_own_generator():
    import numpy as np

    gen = torch.Generator().manual_seed(1)
    x = torch.ones(3, dtype=torch.double)
    with pytest.raises(ValueError, match="different values when evaluated twice"):
        central_difference(lambda t: t * torch.rand(3, generator=gen, dtype=t.dtype), x)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="make f deterministic"):
        central_difference(lambda t: t * torch.from_numpy(rng.random(3)), x)


def test_eps_sweep_refuses_f_whose_output_is_cut_from_x():
    x = torch.ones(3)
    for cut in (lambda t: t.detach() * 2, lambda t: torch.from_numpy(t.detach().numpy() * 2)):
        with pytest.raises(ValueError, match="does not depend on x through autograd"):
            eps_sweep(cut, x, [1e-3], dtypes=(torch.float64,))
    (constant,) = eps_sweep(lambda t: torch.ones(3), x, [1e-3], dtypes=(torch.float64,))
    assert constant["error"] == 0.0  # not connected, and not changing: nothing wrong


def test_central_difference_puts_back_a_modules_attributes_and_hooks():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, t):
            self.calls += 1
            return t * 2

    module = Counting()

    def f(t):
        module.register_forward_hook(lambda *args: None)
        return module(t)

    central_difference(f, torch.ones(2, dtype=torch.double))
    assert module.calls == 0 and len(module._forward_hooks) == 0


# --- from the second-round audit -------------------------------------------------------------


def test_a_lazy_module_not_yet_materialised_is_refused_and_left_lazy():
    from torch.nn.parameter import is_lazy

    model = torch.nn.LazyLinear(2).double()
    x = _x(3)
    with pytest.raises(ValueError, match="lazy parameters are not initialised yet"):
        central_difference(model, x)
    with pytest.raises(ValueError, match="call it once"):
        eps_sweep(model, x, [1e-3])
    assert is_lazy(model.weight)
    assert model(x).shape == (2,)  # still works, shaped by its first real call


def test_f_random_only_away_from_the_point_is_refused():
    import random

    def f(x):
        return x + random.random() if x.sum() > 1.0 else x * 2

    with pytest.raises(ValueError, match="different values when evaluated twice"):
        central_difference(f, torch.tensor([1.0], dtype=DOUBLE), eps=1e-3)


# --- issue 25: the library on real code --------------------------------------------------------


def test_a_model_reseeding_torch_from_pythons_random_keeps_every_random_state():
    # revtorch's fix_random_seed draws a seed from Python's random in forward.
    import random
    import warnings

    import numpy as np

    torch.manual_seed(0)
    model = ReversibleSequence().double()
    state, numpy_state = random.getstate(), np.random.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model is not random: no "draws random numbers"
        central_difference(lambda t: model(t), _x(1, 4))
        eps_sweep(lambda t: model(t).sum(), _x(1, 4), [1e-6])
    assert random.getstate() == state
    assert all(
        np.array_equal(a, b) for a, b in zip(np.random.get_state(), numpy_state, strict=True)
    )


def test_a_dropout_f_still_gets_its_warning():
    with pytest.warns(UserWarning, match="f draws random numbers"):
        central_difference(lambda t: torch.nn.functional.dropout(t, 0.01), _x(3))


def test_eps_sweep_on_a_backward_that_runs_once_says_so_in_one_sentence():
    torch.manual_seed(0)
    model = ReversibleSequence().double()
    with pytest.raises(ValueError, match="f's backward runs only once on a graph") as caught:
        eps_sweep(lambda t: model(t), _x(2, 4), [1e-6])
    assert "AttributeError" in str(caught.value) and "lambda t: f(t).sum()" in str(caught.value)
    records = eps_sweep(lambda t: model(t).sum(), _x(2, 4), [1e-6])  # the fix it gives works
    assert records[0]["error"] < 1e-6


def test_eps_sweep_on_a_backward_that_refuses_autograd_grad_says_so_in_one_sentence():
    torch.manual_seed(0)
    block = InvertibleModuleWrapper(AdditiveCoupling()).double()
    with pytest.raises(ValueError, match=r"f's backward refuses torch\.autograd\.grad"):
        eps_sweep(lambda t: block(t), _x(2, 4), [1e-6])


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def test_each_evaluation_runs_from_the_callers_module_state():
    # detectron2's CycleBatchNormList moves `self._pos` at every call: central differences
    # of the function the caller's next call computes, not a refusal nor noise.
    torch.manual_seed(0)
    model = Cycle().double()
    x = torch.randn(2, 3, dtype=DOUBLE)
    numerical = central_difference(lambda t: model(t).sum(), x)
    assert model._pos == 0
    leaf = x.clone().requires_grad_()
    (analytical,) = torch.autograd.grad(model(leaf).sum(), leaf)
    torch.testing.assert_close(numerical, analytical)


def test_an_attribute_forward_sets_on_a_parameter_is_removed():
    layer = BinarizeLinear(3, 2).double()  # BinaryNet: `self.bias.org = ...` in forward
    central_difference(lambda t: layer(t).sum(), torch.ones(1, 3, dtype=DOUBLE))
    eps_sweep(lambda t: layer(t).sum(), torch.ones(1, 3, dtype=DOUBLE), [1e-3])
    assert not hasattr(layer.bias, "org")
