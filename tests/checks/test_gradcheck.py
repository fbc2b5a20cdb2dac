"""Chapter 03's checkers, unit by unit: what the answer banks cannot show.

The learners' answers (wrong and right) live in ``tests/banks/ex_03_gradcheck_settings.py``
and ``tests/banks/ex_03_softsign.py``, worked in a real kernel. Here: the notebook's own
mistakes (which raise), global settings a learner's cell left changed (a bank's shared
kernel cannot undo them), containment, and each named check on its own.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.autograd import Function

from autograd_helpers.checks import check_double_backward, check_gradcheck_settings
from autograd_helpers.checks.gradcheck._double import DOUBLE_CHECKS
from autograd_helpers.checks.gradcheck._saved import what_forward_kept
from autograd_helpers.checks.gradcheck._settings import SETTINGS_CHECKS


def shifted(t):
    return 500 + 0.05 * torch.sin(3 * t)


POINTS = torch.linspace(-2, 2, 7)
X = torch.linspace(-2.1, 1.9, 6)
REFERENCE = lambda t: t / (1 + t.abs())  # noqa: E731


def softsign_with(save, backward):
    class Softsign(Function):
        @staticmethod
        def forward(ctx, x):
            y = x / (1 + x.abs())
            ctx.save_for_backward(save(x, y))
            return y

    Softsign.backward = staticmethod(backward)
    return Softsign


RIGHT = softsign_with(lambda x, y: x, lambda ctx, g: g / (1 + ctx.saved_tensors[0].abs()) ** 2)


# --- check_gradcheck_settings


def test_the_settings_checks_are_a_table_in_order():
    names = [check.__name__ for check in SETTINGS_CHECKS]
    assert names[0] == "_not_a_stub" and names[-1] == "_holds_beyond_the_example"


@pytest.mark.parametrize(
    ("dtype", "eps"), [(torch.float64, 1e-6), (torch.float64, 1e-3), (torch.float64, 1e-8)]
)
def test_meaningful_settings_pass(dtype, eps):
    result = check_gradcheck_settings(dtype, eps, fn=shifted, x=POINTS)
    assert result.passed, result.message
    assert "101" in result.message  # the probes beyond the example are named


def test_a_settings_stub_is_not_implemented():
    result = check_gradcheck_settings(..., ..., fn=shifted, x=POINTS)
    assert result.status == "not implemented"


def test_a_check_too_loose_to_see_a_one_percent_bug_is_said_to_be_so():
    def tiny(t):  # derivatives of 1e-6: 1% of them is far below atol
        return 1e-6 * torch.sin(t)

    result = check_gradcheck_settings(torch.float64, 1e-6, fn=tiny, x=POINTS)
    assert "a derivative 1% off passes too" in result.message


def test_float32_where_no_eps_works_says_so_first():
    result = check_gradcheck_settings(torch.float32, 1e-4, fn=shifted, x=POINTS)
    assert "No eps from 1e-1 to 1e-10 works in float32" in result.message
    assert "Rounding error dominates" not in result.message


def test_float32_where_some_eps_works_gets_the_direction_and_float64():
    result = check_gradcheck_settings(torch.float32, 1e-6, fn=torch.sin, x=POINTS)
    assert not result.passed
    assert "Rounding error dominates" in result.message and "use a larger eps" in result.message
    assert "In float64 the same eps works" in result.message


@pytest.mark.parametrize(
    "eps", [torch.tensor(1e-6), np.float32(1e-6), np.array(1e-6), torch.tensor([1e-6])]
)
def test_eps_as_a_one_element_tensor_or_numpy_number_is_read_as_a_number(eps):
    assert check_gradcheck_settings(torch.float64, eps, fn=shifted, x=POINTS).passed


@pytest.mark.parametrize(
    ("dtype", "eps", "phrase"),
    [
        (torch.float64, torch.tensor(2.0), "eps is 2"),
        (torch.float64, float("inf"), "eps is inf"),
        (torch.float64, None, "eps is None"),
        (torch.float64, 1j, "complex"),
        (torch.float64, torch.tensor(1e-6, dtype=torch.complex64), "complex"),
        (torch.float64, np.array([1e-6, 1e-5]), "an array of 2 numbers"),
        (None, 1e-6, "dtype is None"),
        (int, 1e-6, "integer"),
        (torch.bool, 1e-6, "True or False"),
        (torch.float8_e5m2, 1e-3, "float8"),
        (torch.uint8, 1e-3, "integer"),
        (np.dtype("float64"), 1e-6, "NumPy"),
        (torch.float64, torch.float64, "positive number"),
    ],
)
def test_anything_else_as_dtype_or_eps_is_a_verdict_never_a_traceback(dtype, eps, phrase):
    result = check_gradcheck_settings(dtype, eps, fn=shifted, x=POINTS)
    assert result.status == "failed" and phrase in result.message, result.message


class _NoFloat:
    def __float__(self) -> float:
        raise RuntimeError("no float here")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


@pytest.mark.parametrize(
    ("dtype", "eps", "phrase"),
    [  # each of these raised from inside the checker before
        (torch.float64, torch.tensor(1e-6, device="meta"), "eps is a tensor on the meta device"),
        (torch.float64, 10**400, "eps is a number too large for a float"),
        (torch.float64, _NoFloat(), "eps is _NoFloat"),
        (torch.float64, np.array([object()], dtype=object), "eps is object"),
        (_NoFloat(), 1e-6, "dtype is a _NoFloat"),
        # read as numbers before: a learner's b'1e-6' passed, np.True_ was "eps is 1"
        (torch.float64, b"1e-6", "eps is the bytes b'1e-6'"),
        (torch.float64, bytearray(b"1e-6"), "eps is the bytearray"),
        (torch.float64, np.True_, "eps is True (a bool: True or False, not a step)"),
        (torch.float64, torch.tensor(True), "eps is True (a bool: True or False, not a step)"),
        (np.bool_, 1e-6, "dtype is NumPy's bool"),
        (torch.tensor(1.0, device="meta"), 1e-6, "dtype is tensor(..., device='meta'"),
    ],
    ids=[
        "meta-eps",
        "huge-int",
        "no-float",
        "object-array",
        "dtype-no-repr",
        "bytes",
        "bytearray",
        "numpy-bool",
        "bool-tensor",
        "numpy-bool-dtype",
        "meta-dtype",
    ],
)
def test_odd_spellings_of_a_setting_are_a_verdict_that_names_them(dtype, eps, phrase):
    result = check_gradcheck_settings(dtype, eps, fn=shifted, x=POINTS)
    assert result.status == "failed" and phrase in result.message, result.message


def test_eps_that_requires_grad_means_the_same_number():
    eps = torch.tensor(1e-6, requires_grad=True)
    assert check_gradcheck_settings(torch.float64, eps, fn=shifted, x=POINTS).passed


def test_a_function_defined_again_is_not_judged_and_the_learner_is_told():
    namespace: dict[str, object] = {"torch": torch}
    exec("def shifted(t):\n    return 500 + 0.05 * torch.sin(3 * t)", namespace)
    original = namespace["shifted"]
    exec("def shifted(t):\n    return torch.sin(t)", namespace)  # the learner's answer cell
    # float32 works for sin at these points, never for the exercise's function
    result = check_gradcheck_settings(torch.float32, 1e-2, fn=original, x=POINTS)
    assert result.status == "failed" and "float32" in result.message, result.message
    assert "`shifted` has been defined again" in result.message, result.message
    right = check_gradcheck_settings(torch.float64, 1e-6, fn=original, x=POINTS)
    assert right.passed and "`shifted` has been defined again" in right.message
    unchanged = check_gradcheck_settings(torch.float64, 1e-6, fn=shifted, x=POINTS)
    assert "defined again" not in unchanged.message


def test_settings_the_notebook_was_left_with_are_a_verdict(monkeypatch):
    try:
        torch.set_default_dtype(torch.float64)
        result = check_gradcheck_settings(torch.float64, 1e-6, fn=shifted, x=POINTS)
        assert "default dtype is float64" in result.message
    finally:
        torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        result = check_gradcheck_settings(torch.float64, 1e-6, fn=shifted, x=POINTS)
    assert "grad mode is off" in result.message
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32


def test_a_function_that_cannot_run_in_the_dtype_is_a_verdict():
    def needs_float64(t):
        if t.dtype != torch.float64:
            raise RuntimeError(f'"sin" not implemented for {t.dtype}')
        return torch.sin(t)

    result = check_gradcheck_settings(torch.float16, 1e-3, fn=needs_float64, x=POINTS)
    assert "cannot even run in float16" in result.message


def test_the_points_are_not_touched():
    points = POINTS.clone()
    check_gradcheck_settings(torch.float32, 1e-6, fn=shifted, x=points)
    assert not points.requires_grad and torch.equal(points, POINTS)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fn": 3, "x": POINTS}, TypeError, "fn must be callable"),
        ({"fn": shifted, "x": [1.0]}, TypeError, "x must be a torch.Tensor"),
        ({"fn": shifted, "x": torch.arange(3)}, TypeError, "floating-point"),
        ({"fn": shifted, "x": torch.ones(0)}, ValueError, "no elements"),
        ({"fn": shifted, "x": torch.tensor([1.0, float("nan")])}, ValueError, "finite"),
        ({"fn": torch.sum, "x": POINTS}, ValueError, "elementwise"),
        ({"fn": lambda t: t.numpy(), "x": POINTS}, ValueError, "elementwise"),
        ({"fn": lambda t: 1 / 0, "x": POINTS}, ValueError, "fn fails on x"),
        ({"fn": shifted, "x": POINTS, "name": 3}, TypeError, "name must be a str"),
    ],
)
def test_the_notebooks_mistakes_in_settings_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        check_gradcheck_settings(torch.float64, 1e-6, **kwargs)


# --- check_double_backward


def test_the_double_backward_checks_are_a_table_in_order():
    names = [check.__name__ for check in DOUBLE_CHECKS]
    assert names == [
        "_first_derivative",
        "_nothing_kept_outside_ctx",
        "_separate_calls",
        "_backward_is_differentiable",
        "_second_derivative_in_float64",
        "_second_derivative_in_float32",
    ]


def test_a_right_answer_passes_with_probes_named():
    result = check_double_backward(RIGHT, X, reference=REFERENCE)
    assert result.passed and "edge probes" in result.message, result.message


def test_without_a_reference_the_example_alone_is_checked():
    result = check_double_backward(RIGHT, X)
    assert result.passed and "edge probes" not in result.message


def test_the_first_checks_notes_are_kept_on_a_pass():
    class StoresX(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            return g / (1 + ctx.x.abs()) ** 2

    result = check_double_backward(StoresX, X, reference=REFERENCE)
    assert result.passed and "Note: forward stored a tensor as `ctx.x`" in result.message


def test_what_forward_kept_is_classified_by_its_history():
    class KeepsEverything(Function):
        @staticmethod
        def forward(ctx, x):
            y = x / (1 + x.abs())
            with torch.enable_grad():
                ctx.own = 1 + x.abs()
            ctx.save_for_backward(x, y, x.detach(), 1 + x.abs())
            return y

    kinds = {k.where: k.kind for k in what_forward_kept(KeepsEverything, X)}
    assert kinds == {
        "saved_tensors[0]": "input",
        "saved_tensors[1]": "output",
        "saved_tensors[2]": "detached input",
        "saved_tensors[3]": "constant",
        "ctx.own": "own graph",
    }


def test_an_unused_constant_kept_is_a_note_not_a_verdict():
    class AlsoSavesDenominator(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 1 + x.abs())
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            x, _ = ctx.saved_tensors
            return g / (1 + x.abs()) ** 2

    result = check_double_backward(AlsoSavesDenominator, X, reference=REFERENCE)
    assert result.passed and "only extra memory" in result.message, result.message


def test_a_kink_accepts_either_sides_second_derivative():
    # At 0 the second derivative of softsign jumps from 2 to -2: `x > 0` picks the left side,
    # `x >= 0` the right one, `abs` (sign(0) = 0) the middle; all three are right.
    for keep in ("x > 0", "x >= 0"):
        cond = {"x > 0": lambda x: x > 0, "x >= 0": lambda x: x >= 0}[keep]

        def backward(ctx, g, cond=cond):
            (x,) = ctx.saved_tensors
            return g / torch.where(cond(x), 1 + x, 1 - x) ** 2

        result = check_double_backward(
            softsign_with(lambda x, y: x, backward), X, reference=REFERENCE
        )
        assert result.passed, (keep, result.message)


def test_a_cache_in_a_closure_is_named_and_emptied():
    cache = {}

    class Cached(Function):
        @staticmethod
        def forward(ctx, x):
            cache["x"] = x
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            return g / (1 + cache["x"].abs()) ** 2

    result = check_double_backward(Cached, X, reference=REFERENCE)
    assert "the dict `cache` of an enclosing function" in result.message, result.message
    assert cache == {}


def test_a_cache_no_container_reveals_is_caught_by_two_calls_in_flight():
    class Holder:
        x = None

    holders = [{(((Holder(),),),): 0}]  # deeper than any snapshot reaches (a dict key)

    class Cached(Function):
        @staticmethod
        def forward(ctx, x):
            next(iter(holders[0]))[0][0][0].x = x
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            return g / (1 + next(iter(holders[0]))[0][0][0].x.abs()) ** 2

    result = check_double_backward(Cached, X, reference=REFERENCE)
    assert "backward used tensors of another call" in result.message, result.message


def test_a_cache_on_an_object_of_the_notebook_is_named_and_put_back():
    class Holder:
        x = None

    holder = Holder()

    class Cached(Function):
        @staticmethod
        def forward(ctx, x):
            holder.x = x
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            return g / (1 + holder.x.abs()) ** 2

    result = check_double_backward(Cached, X, reference=REFERENCE)
    assert "forward set `holder.x`" in result.message, result.message
    assert "x" not in vars(holder)


def test_a_side_effect_only_when_backward_is_differentiated_is_a_verdict():
    threads = torch.get_num_threads()

    def backward(ctx, g):
        if torch.is_grad_enabled():  # only under create_graph=True
            torch.set_num_threads(threads + 1)
        return g / (1 + ctx.saved_tensors[0].abs()) ** 2

    result = check_double_backward(softsign_with(lambda x, y: x, backward), X, reference=REFERENCE)
    assert "backward (differentiated again) left torch on" in result.message, result.message
    assert torch.get_num_threads() == threads


def test_an_error_at_a_probe_names_the_probe():
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if torch.is_grad_enabled() and x.dim() == 0:
            raise RuntimeError("no scalars when differentiated again")
        return g / (1 + x.abs()) ** 2

    result = check_double_backward(softsign_with(lambda x, y: x, backward), X, reference=REFERENCE)
    assert "double backward (in float64) raised" in result.message, result.message
    assert "probes beyond your example" in result.message


def test_the_example_tensor_is_left_as_it_was():
    example = X.clone()

    class WritesTheExample(Function):
        @staticmethod
        def forward(ctx, x):
            example.mul_(2)
            ctx.save_for_backward(x)
            return x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g / (1 + x.abs()) ** 2

    result = check_double_backward(WritesTheExample, example, reference=REFERENCE)
    # check_function, which check_double_backward runs first, names the notebook's tensor
    assert "forward changed the notebook's tensor `example`" in result.message, result.message
    assert torch.equal(example, X) and not example.requires_grad


def test_a_double_backward_stub_is_not_implemented():
    class Softsign(Function):
        @staticmethod
        def forward(ctx, x):
            raise NotImplementedError("Exercise: replace this line with your code")

        @staticmethod
        def backward(ctx, grad_output):
            raise NotImplementedError("Exercise: replace this line with your code")

    assert check_double_backward(Softsign, X, reference=REFERENCE).status == "not implemented"
    assert check_double_backward(..., X, reference=REFERENCE).status == "not implemented"


def test_the_notebooks_mistakes_in_double_backward_raise():
    with pytest.raises(ValueError, match="one example input"):
        check_double_backward(RIGHT, X, X)
    with pytest.raises(TypeError, match="floating-point"):
        check_double_backward(RIGHT, torch.arange(3))
    with pytest.raises(TypeError, match="reference must be callable"):
        check_double_backward(RIGHT, X, reference=3)
    with pytest.raises(TypeError, match="name must be a str"):
        check_double_backward(RIGHT, X, reference=REFERENCE, name=3)


def test_a_reference_that_cannot_be_differentiated_twice_is_the_notebooks_mistake():
    from torch.autograd.function import once_differentiable

    class OnceReference(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x / (1 + x.abs())

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g / (1 + x.abs()) ** 2

    with pytest.raises(ValueError, match="reference cannot be differentiated twice"):
        check_double_backward(RIGHT, X, reference=OnceReference.apply)


def _setup() -> dict:
    return {
        "reference": lambda t: 500 + 0.05 * torch.sin(3 * t),
        "reference_x": torch.linspace(-2, 2, 7),
    }


def test_a_changed_exercise_setup_is_a_verdict_whatever_the_settings():
    def code_swapped(t):
        return 500 + 0.05 * torch.sin(3 * t)

    code_swapped.__code__ = (lambda t: torch.sin(t)).__code__
    for fn, x in [
        (torch.sin, POINTS.clone()),
        (code_swapped, POINTS.clone()),
        (shifted, torch.linspace(-1, 1, 7)),
        (None, POINTS.clone()),
    ]:
        for dtype, eps in [(torch.float32, 1e-3), (torch.float64, 1e-6)]:
            result = check_gradcheck_settings(dtype, eps, fn=fn, x=x, **_setup())
            assert not result.passed, result.message
            assert "the exercise's setup was changed" in result.message
    assert check_gradcheck_settings(torch.float64, 1e-6, fn=shifted, x=POINTS, **_setup()).passed
    with pytest.raises(TypeError, match="reference"):
        check_gradcheck_settings(torch.float64, 1e-6, fn=shifted, x=POINTS, reference=3)


# --- issue 25: messages that pointed the wrong way ------------------------------------------


@pytest.mark.parametrize("eps", [1e-14, 1e-16, 1e-20, torch.finfo(torch.float64).eps])
def test_an_eps_far_below_the_values_spacing_is_told_to_grow_by_far(eps):
    result = check_gradcheck_settings(torch.float64, eps, fn=shifted, x=POINTS)
    assert result.status == "failed", result.message
    assert "needs a much larger eps" in result.message, result.message
    assert "difference is 0" in result.message and "try 1e-06" in result.message
    assert "Neither a ten times larger" not in result.message


def test_the_steps_offered_make_a_meaningful_check():
    from autograd_helpers.checks.gradcheck._errors import meaningful_steps

    steps = meaningful_steps(shifted, POINTS, torch.float64)
    assert 1e-6 in steps and 1e-10 not in steps and 1e-1 not in steps, steps
    for eps in steps:  # each passes the whole check: at the points, across them, 1% caught
        assert check_gradcheck_settings(torch.float64, eps, fn=shifted, x=POINTS).passed


def test_a_changed_default_dtype_is_said_before_the_points_it_changed():
    try:
        torch.set_default_dtype(torch.float64)  # the learner's answer cell
        result = check_gradcheck_settings(
            torch.float64,
            1e-6,
            fn=shifted,
            x=POINTS,  # made before, in float32
            reference=lambda t: 500 + 0.05 * torch.sin(3 * t),
            reference_x=torch.linspace(-2, 2, 7),  # the check cell's: float64 now
        )
    finally:
        torch.set_default_dtype(torch.float32)
    assert "default dtype is float64" in result.message, result.message
    assert "other points" not in result.message
