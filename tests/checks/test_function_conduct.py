"""check_function beyond one backward pass: needs_input_grad, linearity, a second pass, the
edges, and what learner code changes or calls (globals, `.grad`, the seed, nan_to_num).

Each Function here passed the checker before these checks existed.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import sys
import types
import warnings
from collections import Counter, OrderedDict, defaultdict, deque

import numpy as np
import pytest
import torch
from torch.autograd import Function

from autograd_helpers.checks import check_function
from autograd_helpers.checks._core.probes import EDGE_VALUES
from autograd_helpers.checks.function._conduct import WORDS
from tests.learner_code import Cube, X, cube, saved, variant

STASH: list[torch.Tensor] = []
CACHE: dict[str, torch.Tensor] = {}
COUNTER = torch.zeros(())
COUNTS: defaultdict[str, int] = defaultdict(int)
TALLY: Counter[str] = Counter()
ORDERED: OrderedDict[str, object] = OrderedDict()
RECENT: deque[torch.Tensor] = deque(maxlen=3)
MEMO: dict[str, list[torch.Tensor]] = {"xs": []}
SEEN: list[torch.Tensor] = []
BUF = np.zeros(3)
BOX = types.SimpleNamespace()
STATE0 = torch.get_rng_state()


class Store:
    pass


class Stats:
    calls = 0


def remember(t):
    SEEN.append(t)


def assert_fails(result, *phrases):
    assert result.status == "failed", result.message
    for phrase in phrases:
        assert phrase in result.message, result.message


def edges(fn, **options):
    return check_function(fn, torch.linspace(-2, 2, 6), reference=cube, probes="edges", **options)


class MatMul(Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight


def matmul_with(backward):
    return type("MatMul", (MatMul,), {"backward": staticmethod(backward)})


def check_matmul(fn):
    x, w = torch.linspace(-2, 3, 15).reshape(5, 3), torch.linspace(-1.5, 1, 6).reshape(3, 2)
    return check_function(fn, x, w, reference=torch.matmul)


# --- needs_input_grad: each input alone requiring grad ---------------------------------------


def test_returning_only_the_needed_gradients_is_caught():
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grads = []
        if ctx.needs_input_grad[0]:
            grads.append(g @ w.T)
        if ctx.needs_input_grad[1]:
            grads.append(x.T @ g)
        return tuple(grads)

    assert_fails(check_matmul(matmul_with(backward)), "needs_input_grad", "raised")


def test_needs_input_grad_read_the_wrong_way_round_is_caught():
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad
        return (g @ w.T if need_w else None), (x.T @ g if need_x else None)

    assert_fails(check_matmul(matmul_with(backward)), "needs_input_grad", "only `x`")


def test_honouring_needs_input_grad_passes():
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g @ w.T if ctx.needs_input_grad[0] else None
        gw = x.T @ g if ctx.needs_input_grad[1] else None
        return gx, gw

    result = check_matmul(matmul_with(backward))
    assert result.passed, result.message


# --- linear in grad_output; the same gradient twice ------------------------------------------


def test_a_constant_added_fails_with_a_hint_naming_grad_output():
    # too small for finite differences' tolerance: only linearity in grad_output shows it
    result = check_function(variant(backward=lambda ctx, g: g * 3 * saved(ctx) ** 2 + 1e-7), X)
    assert_fails(result, "for a zero `grad_output`", "multiply by `grad_output`")


def test_a_backward_not_linear_in_grad_output_fails():
    result = check_function(
        variant(backward=lambda ctx, g: g * 3 * saved(ctx) ** 2 * (1 + 1e-7 * g)), X
    )
    assert_fails(result, "twice the `grad_output`", "not twice the gradient")


def test_a_clipped_gradient_fails_for_a_large_grad_output():
    result = check_function(
        variant(backward=lambda ctx, g: (g * 3 * saved(ctx) ** 2).clamp(-50, 50)), X
    )
    assert_fails(result, "1000 times the `grad_output`", "clip nothing")


@pytest.mark.parametrize("offset", ["+1e-10", "+5e-10", "clamp"])
def test_a_gradient_off_by_less_than_finite_differences_tolerance_fails(offset):
    def backward(ctx, g):
        derivative = 3 * saved(ctx) ** 2
        if offset == "clamp":
            return g * derivative.clamp(min=1e-10)
        return g * (derivative + float(offset))

    assert_fails(edges(variant(backward=backward)), "is off compared with the reference")


def test_a_probe_of_another_shape_says_so():
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g.reshape(5, 2) @ w.T, x.T @ g

    x, w = torch.linspace(-2, 3, 15).reshape(5, 3), torch.linspace(-1.5, 1, 6).reshape(3, 2)
    probe = (torch.linspace(-1, 1, 8).reshape(4, 2), torch.linspace(-1, 1, 6).reshape(2, 3))
    result = check_function(matmul_with(backward), x, w, reference=torch.matmul, probes=[probe])
    assert_fails(result, "probes beyond your example, with other shapes")


class CubeScalingItsIntermediate(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.square = x * x  # an intermediate, as an attribute
        return x**3

    @staticmethod
    def backward(ctx, g):
        ctx.square.mul_(3)  # in place: the next pass sees 9 x**2
        return g * ctx.square


class CubeScalingItsSavedIntermediate(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x * x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (square,) = ctx.saved_tensors
        return g * square.mul_(3)


def test_a_saved_intermediate_changed_in_backward_is_caught_on_a_second_pass():
    assert_fails(check_function(CubeScalingItsIntermediate, X, reference=cube), "second time")
    assert_fails(check_function(CubeScalingItsSavedIntermediate, X, reference=cube), "second time")


# --- the edges ---------------------------------------------------------------------------------


def test_the_edge_values_reach_tiny_and_large_magnitudes():
    for value in (1e-25, 2e-30, 1e-20, -1e-20, 1e-5, -1e-5, 1e-4, 0.25, 0.3, 300.0, -1000.0):
        assert value in EDGE_VALUES


@pytest.mark.parametrize(
    ("backward", "phrase"),
    [
        (lambda ctx, g: g * 3 * saved(ctx) ** 3 / saved(ctx), "nan"),
        (lambda ctx, g: g * 3 * saved(ctx).clamp(-200, 200) ** 2, "is off"),
        (lambda ctx, g: g * 3 * (saved(ctx) ** 2 + 1e-9), "is off"),  # off only near 0
    ],
    ids=["x**3/x", "large magnitudes", "small magnitudes"],
)
def test_formulae_off_only_at_the_edges_fail(backward, phrase):
    assert_fails(edges(variant(backward=backward)), phrase)


@pytest.mark.parametrize(
    "backward",
    [
        lambda ctx, g: (g.double() * 3 * saved(ctx).double() ** 2).to(g.dtype),
        lambda ctx, g: g * 3 * torch.pow(saved(ctx), 2),
        lambda ctx, g: saved(ctx) * saved(ctx) * 3 * g,
        lambda ctx, g: g * (saved(ctx) ** 2 + saved(ctx) ** 2 + saved(ctx) ** 2),
    ],
    ids=["float64", "torch.pow", "x*x*3", "a sum of three"],
)
def test_right_spellings_pass_at_the_edges(backward):
    result = edges(variant(backward=backward))
    assert result.passed, result.message


# --- side effects: globals, containers, notebook tensors, .grad, the seed -----------------------


def _stash(ctx, g):
    STASH.append(g)
    return g * 3 * saved(ctx) ** 2


def _cache(ctx, g):
    CACHE["g"] = g
    return g * 3 * saved(ctx) ** 2


def _count(ctx, g):
    COUNTER.add_(1)
    return g * 3 * saved(ctx) ** 2


def _with(effect):
    """Cube's right backward, which first does ``effect(x)``."""

    def backward(ctx, g):
        effect(saved(ctx))
        return g * 3 * saved(ctx) ** 2

    return backward


def _default(ctx, g, _cache=[]):  # noqa: B006 (the learner's slip under test)
    _cache.append(g)
    return g * 3 * saved(ctx) ** 2


def _set_torch_attribute(x):
    torch._last_x = x


@pytest.mark.parametrize(
    ("backward", "phrase"),
    [
        (_stash, "backward changed the global list `STASH`"),
        (_cache, "backward changed the global dict `CACHE`"),
        (_count, "backward changed the notebook's tensor `COUNTER` (its values)"),
        (_with(lambda x: COUNTS.__setitem__("b", COUNTS["b"] + 1)), "the global dict `COUNTS`"),
        (_with(lambda x: TALLY.update(["b"])), "the global dict `TALLY`"),
        (_with(lambda x: ORDERED.setdefault("x", x)), "the global dict `ORDERED`"),
        (_with(lambda x: RECENT.append(x)), "the global deque `RECENT`"),
        (_with(lambda x: MEMO["xs"].append(x)), "the global list `MEMO['xs']`"),
        (_with(remember), "the global list `SEEN`"),
        (_with(lambda x: BUF.__setitem__(0, float(x[0]))), "the global NumPy array `BUF`"),
        (_with(lambda x: setattr(Store, "y", torch.tanh(x))), "set `Store.y`"),
        (_with(lambda x: setattr(Stats, "calls", Stats.calls + 1)), "set `Stats.calls`"),
        (_with(lambda x: setattr(BOX, "last", x)), "set `BOX.last`"),
        (_with(_set_torch_attribute), "set `torch._last_x`"),
        (_default, "the default list `_cache` of _default"),
    ],
    ids=[
        "list", "dict", "tensor", "defaultdict", "Counter", "OrderedDict", "deque",
        "nested list", "helper", "numpy", "class", "class counter", "object", "torch",
        "default",
    ],
)  # fmt: skip
def test_what_backward_changes_outside_ctx_is_judged_and_put_back(backward, phrase):
    assert_fails(edges(variant(backward=backward)), phrase, "outlives the call", "put it back")
    assert STASH == [] and CACHE == {} and float(COUNTER) == 0
    assert not COUNTS and not TALLY and not ORDERED and not RECENT and MEMO == {"xs": []}
    assert not SEEN and not BUF.any() and Stats.calls == 0 and not vars(BOX)
    assert not hasattr(Store, "y") and not hasattr(torch, "_last_x")
    assert _default.__defaults__ == ([],)


def test_containers_of_every_kind_are_snapshot_for_every_global():
    # chapter 02 snapshots every global of the notebook: a defaultdict crashed it
    from autograd_helpers.checks._contain.contained import Contained

    def fn():
        COUNTS["x"] += 1

    contained = Contained(fn, every_global=True, words=WORDS)
    fn()
    changes = contained.changes()
    contained.restore()
    assert any("the global dict `COUNTS`" in c for c in changes), changes
    assert not COUNTS


def test_setting_grad_of_the_saved_input_is_a_side_effect():
    def backward(ctx, g):
        x = saved(ctx)
        x.grad = g * 3 * x**2
        return x.grad

    assert_fails(edges(variant(backward=backward)), "backward set `.grad` of its input `x`")


@pytest.mark.parametrize("stage", ["forward", "backward"])
def test_reseeding_is_a_side_effect_and_the_random_state_is_put_back(stage):
    def forward(ctx, x):
        torch.manual_seed(0)
        ctx.save_for_backward(x)
        return x**3

    def backward(ctx, g):
        torch.manual_seed(0)
        return g * 3 * saved(ctx) ** 2

    state = torch.get_rng_state()
    methods = {"forward": forward} if stage == "forward" else {"backward": backward}
    assert_fails(edges(variant(**methods)), f"{stage} reseeds", "put the random state back")
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda: np.random.seed(0), "reseeds NumPy's global random number generator"),
        (lambda: random.seed(0), "reseeds Python's global random number generator"),
        (lambda: torch.set_rng_state(STATE0), "(`torch.set_rng_state`)"),
    ],
    ids=["numpy", "python", "set_rng_state"],
)
def test_reseeding_numpy_python_or_setting_the_state_is_judged_and_put_back(call, phrase):
    np.random.seed(5)
    random.seed(5)
    torch.manual_seed(5)
    expected = (np.random.rand(), random.random(), float(torch.rand(())))
    np.random.seed(5)
    random.seed(5)
    torch.manual_seed(5)
    assert_fails(edges(variant(backward=_with(lambda x: call()))), phrase)
    assert (np.random.rand(), random.random(), float(torch.rand(()))) == expected


def _draws(x):
    np.random.rand(3)
    random.random()
    torch.rand(3)
    with torch.random.fork_rng():
        torch.rand(2)


def test_drawing_random_numbers_in_backward_is_no_reseed():
    assert edges(variant(backward=_with(_draws))).passed


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda: torch.set_printoptions(precision=2), "print options"),
        (lambda: torch.set_flush_denormal(True), "flushing of denormal numbers on"),
        (lambda: warnings.simplefilter("ignore"), "warnings filters"),
        (lambda: torch.set_float32_matmul_precision("medium"), "matmul precision"),
        (lambda: torch.use_deterministic_algorithms(True), "deterministic algorithms on"),
    ],
    ids=["printoptions", "flush_denormal", "warnings", "matmul_precision", "deterministic"],
)
def test_global_settings_left_changed_are_judged_and_put_back(call, phrase):
    filters = list(warnings.filters)
    options = dict(vars(torch._tensor_str.PRINT_OPTS))
    assert_fails(edges(variant(backward=_with(lambda x: call()))), phrase, "put it back")
    assert warnings.filters == filters and vars(torch._tensor_str.PRINT_OPTS) == options
    assert torch.get_float32_matmul_precision() == "highest"
    assert float(torch.tensor([1e-40]) * 1.0) != 0.0
    assert not torch.are_deterministic_algorithms_enabled()


# --- notes: right numbers by a route the exercise does not teach ------------------------------


def test_nan_to_num_in_backward_gets_a_note():
    result = edges(
        variant(backward=lambda ctx, g: torch.nan_to_num(g * 3 * saved(ctx) ** 3 / saved(ctx)))
    )
    assert result.passed and "Note: backward calls `nan_to_num`" in result.message


def test_nan_replaced_by_where_or_masked_fill_gets_the_same_note():
    def where(ctx, g):
        d = g * 3 * saved(ctx) ** 3 / saved(ctx)
        return torch.where(torch.isnan(d), torch.zeros_like(d), d)

    def masked(ctx, g):
        d = g * 3 * saved(ctx) ** 3 / saved(ctx)
        return d.masked_fill(d.isnan(), 0.0)

    for backward in (where, masked):
        result = edges(variant(backward=backward))
        assert result.passed and "Note: backward replaces NaN (`isnan`)" in result.message


def test_autograd_inside_backward_gets_a_note():
    def backward(ctx, g):
        with torch.enable_grad():
            leaf = saved(ctx).detach().requires_grad_()
            (grad,) = torch.autograd.grad(leaf**3, leaf, g)
        return grad

    result = edges(variant(backward=backward))
    assert result.passed and "runs autograd itself" in result.message


def test_the_right_answer_gets_no_note():
    result = edges(Cube)
    assert result.passed and "Note" not in result.message


class CubeInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.clone())
        ctx.mark_dirty(x)
        return x.pow_(3)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


def test_mark_dirty_gets_a_note():
    result = edges(CubeInPlace)
    assert result.passed and "marks its input dirty" in result.message


class CubeAndNumpy(Function):
    @staticmethod
    def forward(ctx, x):
        return x**3, (x * x).numpy()

    @staticmethod
    def backward(ctx, g, h):
        return g


def test_a_numpy_output_gets_one_sentence():
    result = check_function(CubeAndNumpy, X)
    assert_fails(result, "numpy.ndarray, not a torch.Tensor", "torch.from_numpy")
    assert "Traceback" not in result.message


# --- the second-round audit of chapters 00/01 -------------------------------------------------


@pytest.mark.parametrize("factor", ["2.999 / 3", "1.0009", "1 + 5e-4", "1.0005 beyond 100"])
def test_a_gradient_off_by_a_tenth_of_a_percent_fails(factor):
    def backward(ctx, g):
        x = saved(ctx)
        if factor == "1.0005 beyond 100":
            return g * 3 * x**2 * torch.where(x.abs() > 100, 1.0005, 1.0)
        return g * 3 * x**2 * eval(factor)

    assert_fails(edges(variant(backward=backward)), "is off compared with the reference")


def test_a_grad_reference_is_compared_tightly_too():
    result = check_function(
        variant(backward=lambda ctx, g: g * 3 * saved(ctx) ** 2 * 0.9995),
        X,
        grad_reference=lambda t: t**3,
    )
    assert_fails(result, "is off compared with the expected gradient")


def test_a_sparse_gradient_is_judged_in_float32_too():
    result = edges(variant(backward=lambda ctx, g: (g * 3 * saved(ctx) ** 2).to_sparse()))
    assert result.passed, result.message


def _forked(x):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        torch.rand(1)


def _saved_and_set_back(x):
    state = torch.get_rng_state()
    torch.manual_seed(0)
    torch.rand(1)
    torch.set_rng_state(state)


@pytest.mark.parametrize("effect", [_forked, _saved_and_set_back], ids=["fork_rng", "by_hand"])
def test_a_reseed_whose_state_is_set_back_passes(effect):
    state = torch.get_rng_state()
    assert edges(variant(backward=_with(effect))).passed
    assert torch.equal(torch.get_rng_state(), state)


def test_masking_by_the_input_gets_no_nan_note():
    def where(ctx, g):
        x = saved(ctx)
        return torch.where(x == 0, torch.zeros_like(x), g * 3 * x**2)

    def masked(ctx, g):
        x = saved(ctx)
        return (g * 3 * x**2).masked_fill(x == 0, 0.0)

    for backward in (where, masked):
        result = edges(variant(backward=backward))
        assert result.passed and "Note" not in result.message, result.message


def test_a_default_device_set_by_the_notebook_gives_no_autograd_note():
    torch.set_default_device("cpu")
    try:
        result = edges(Cube)
    finally:
        torch.set_default_device(None)
    assert result.passed and "Note" not in result.message, result.message


def _process_settings():
    return (
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.backends.mkldnn.enabled,
        torch.get_default_device(),
        sys.getrecursionlimit(),
        dict(os.environ),
        torch.is_warn_always_enabled(),
        np.geterr(),
        np.get_printoptions(),
        logging.root.manager.disable,
    )


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda: setattr(torch.backends.cudnn, "deterministic", True), "cuDNN's flags"),
        (lambda: setattr(torch.backends.cudnn, "benchmark", True), "cuDNN's flags"),
        (lambda: setattr(torch.backends.mkldnn, "enabled", False), "oneDNN"),
        (lambda: torch.set_default_device("cpu"), "default device"),
        (lambda: __import__("sys").setrecursionlimit(4321), "recursion limit"),
        (lambda: __import__("os").environ.__setitem__("AH_TEST_X", "1"), "environment"),
        (lambda: torch.set_warn_always(True), "set_warn_always"),
        (lambda: torch.autograd.set_multithreading_enabled(False), "multithreading"),
        (lambda: np.seterr(all="ignore"), "np.seterr"),
        (lambda: np.set_printoptions(precision=2), "np.set_printoptions"),
        (lambda: __import__("logging").disable(50), "logging.disable"),
    ],
)
def test_process_settings_left_changed_are_judged_and_put_back(call, phrase):
    if torch.backends.flags_frozen() and phrase in ("cuDNN's flags", "oneDNN"):
        pytest.skip("an earlier test froze torch.backends' flags (disable_global_flags)")

    before = _process_settings()

    def forward(ctx, x):  # autograd's multithreading set in backward ends with the node
        call()
        ctx.save_for_backward(x)
        return x**3

    assert_fails(edges(variant(forward=forward)), phrase, "put it back")
    assert _process_settings() == before
    assert torch._C._is_multithreading_enabled()


class Outer:
    class Inner:
        calls = 0


NESTED = types.SimpleNamespace(inner=types.SimpleNamespace())
PAIR = (types.SimpleNamespace(), 1)
TUPLED: tuple[int, tuple[list[torch.Tensor]]] = (1, ([],))
ARRAYS = (np.zeros(2), 1)
ALIASED: list[torch.Tensor] = []
PUSH = ALIASED.append


def helper(t):
    return t


@functools.lru_cache
def squared(v):
    return v * v


def _nested_class(x):
    Outer.Inner.calls += 1


def _tensor_class_attribute(x):
    torch.Tensor._last = x


def _function_attribute(x):
    helper.last = x


def _numpy_seed_imported(x):
    from numpy.random import seed

    seed(0)


@pytest.mark.parametrize(
    ("effect", "phrase"),
    [
        (lambda x: setattr(NESTED.inner, "last", x), "set `NESTED.inner.last`"),
        (lambda x: setattr(PAIR[0], "last", x), "set `PAIR[0].last`"),
        (lambda x: TUPLED[1][0].append(x), "the global list `TUPLED[1][0]`"),
        (lambda x: ARRAYS[0].__setitem__(0, 1.0), "the global NumPy array `ARRAYS[0]`"),
        (_nested_class, "set `Outer.Inner.calls`"),
        (_tensor_class_attribute, "set `torch.Tensor._last`"),
        (_function_attribute, "set `helper.last`"),
        (lambda x: PUSH(x), "the list behind `PUSH`"),
        (lambda x: squared(float(x.sum())), "the functools.lru_cache of `squared`"),
        (_numpy_seed_imported, "reseeds NumPy's global random number generator"),
        (lambda x: np.random.mtrand._rand.seed(0), "reseeds NumPy's global"),
    ],
    ids=[
        "two levels", "in a tuple", "list in tuples", "array in a tuple", "nested class",
        "torch.Tensor", "function", "bound method", "lru_cache", "numpy seed imported",
        "numpy mtrand",
    ],
)  # fmt: skip
def test_what_backward_reaches_deeper_is_judged_and_put_back(effect, phrase):
    np.random.seed(3)
    expected = np.random.rand()
    np.random.seed(3)
    assert_fails(edges(variant(backward=_with(effect))), phrase)
    assert np.random.rand() == expected
    assert not hasattr(NESTED.inner, "last") and not hasattr(PAIR[0], "last")
    assert TUPLED[1][0] == [] and ALIASED == [] and Outer.Inner.calls == 0
    assert not ARRAYS[0].any()
    assert not hasattr(torch.Tensor, "_last") and not hasattr(helper, "last")
    assert squared.cache_info().currsize == 0


def _numpy_set_back(x):
    state = np.random.get_state()
    np.random.seed(0)
    np.random.rand(2000)
    np.random.set_state(state)
    np.random.rand(3)


def test_numpy_drawn_from_or_set_back_passes():
    assert edges(variant(backward=_with(_numpy_set_back))).passed
    assert edges(variant(backward=_with(lambda x: np.random.rand(5000)))).passed
