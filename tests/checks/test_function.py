"""autograd_helpers.checks: every kind of learner mistake gets its own plain-words verdict.

Each broken Function below is a variant of a correct ``Cube`` with one mistake, so a test
fails only if the checker misses (or mislabels) exactly that mistake.
"""

from __future__ import annotations

import threading

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from autograd_helpers.checks import check_function, check_tensor
from autograd_helpers.checks._core.feedback import CheckResult
from tests.learner_code import Cube, X, cube, saved, variant


def check(fn, *inputs, **options):
    result = check_function(fn, *(inputs or (X,)), **options)
    assert isinstance(result, CheckResult)
    return result


def assert_fails(result, *phrases):
    assert result.status == "failed", result.message
    assert not result.passed
    for phrase in phrases:
        assert phrase in result.message, result.message


# --- correct code passes -----------------------------------------------------------------------


def test_a_correct_function_passes_against_reference_and_finite_differences():
    result = check(Cube, reference=cube)
    assert result.passed, result.message
    assert "matches the reference's gradient and finite differences (float64)" in result.message


def test_a_correct_function_passes_without_reference():
    result = check(Cube)
    assert result.passed and "matches finite differences" in result.message


def test_a_plain_callable_is_checked_through_autograd():
    assert check(torch.sin, reference=torch.sin, allow_callable=True).passed


def test_a_modern_form_once_differentiable_function_passes():
    class Exp(Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            return grad_output * ctx.saved_tensors[0]

    assert check(Exp, reference=torch.exp).passed


def test_non_tensor_inputs_take_none_and_multiple_inputs_are_named():
    class MulAdd(Function):
        @staticmethod
        def forward(ctx, x, y, c):
            ctx.c = c
            return x * c + y

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.c, grad_output, None

    result = check_function(MulAdd, X, X.flip(0), 2.5, reference=lambda x, y, c: x * c + y)
    assert result.passed, result.message
    assert "the gradients for `x`, `y` match" in result.message


def test_wrt_limits_the_inputs_that_need_a_gradient():
    class OnlyX(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.needs = ctx.needs_input_grad
            return x * y.detach()

        @staticmethod
        def backward(ctx, grad_output):
            assert ctx.needs == (True, False)
            return grad_output, None

    assert check_function(OnlyX, X, torch.ones(5), wrt=[0], reference=lambda x, y: x * y).passed


def test_a_straight_through_estimator_is_checked_against_grad_reference():
    class RoundSTE(Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    assert check(RoundSTE, reference=torch.round, grad_reference=lambda x: x).passed
    wrong = variant(forward=lambda ctx, x: x.round(), backward=lambda ctx, g: 2 * g)
    assert_fails(check(wrong, grad_reference=lambda x: x), "compared with the expected gradient")


# --- stubs -------------------------------------------------------------------------------------


def test_an_untouched_stub_is_not_implemented_yet():
    def stub(ctx, grad_output):
        raise NotImplementedError("write backward")

    result = check(variant(backward=stub))
    assert result.status == "not implemented" and not result.passed
    assert "not implemented yet" in result.message
    assert "Replace the `raise NotImplementedError` in `stub` with your code" in result.message


@pytest.mark.parametrize("value", [..., None])
def test_an_ellipsis_or_none_instead_of_a_function(value):
    result = check(value)
    assert not result.passed
    assert result.status == ("not implemented" if value is ... else "failed")
    assert "your answer" in result.message


def test_not_implemented_raised_inside_torch_is_an_error_not_a_stub():
    def meta(ctx, x):
        return torch.empty(5, device="meta").sin()

    result = check(variant(forward=lambda ctx, x: meta(ctx, x).cpu()))
    assert_fails(result, "forward raised an exception", "NotImplementedError")


# --- exceptions --------------------------------------------------------------------------------


def test_an_exception_in_forward_names_the_learners_line():
    def forward(ctx, x):
        return x @ torch.ones(3)  # shapes do not fit

    result = check(variant(forward=forward))
    assert_fails(result, "forward raised an exception", "RuntimeError", "in forward, line")
    assert "return x @ torch.ones(3)" in result.message


def test_an_exception_in_backward_names_the_learners_line():
    def backward(ctx, grad_output):
        _x, y = ctx.saved_tensors  # only one was saved
        return grad_output * y

    result = check(variant(backward=backward))
    assert_fails(result, "backward raised an exception", "ValueError", "_x, y = ctx.saved_tensors")


def test_backward_calling_backward_is_stopped_quickly():
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            Recursive.apply(x.detach().requires_grad_()).sum().backward()
        return grad_output

    Recursive = variant(backward=backward)
    threads = threading.active_count()
    result = check(Recursive)
    assert_fails(result, "nested 16 deep", "call .backward()")
    assert threading.active_count() == threads  # stopped before the engine spawns threads


def test_infinite_recursion_in_forward():
    def forward(ctx, x):
        return Again.apply(x)

    Again = variant(forward=forward)
    assert_fails(check(Again), "RecursionError")


def test_printing_too_much_is_stopped():
    def forward(ctx, x):
        while True:
            print("debug " * 50)

    result = check(variant(forward=forward))
    assert_fails(result, "forward printed too much", "100,000 characters")
    assert len(result.message) < 2000


def test_a_little_printing_is_shown_not_lost():
    def forward(ctx, x):
        print("forward saw", tuple(x.shape))
        ctx.save_for_backward(x)
        return x**3

    result = check(variant(forward=forward), reference=cube)
    assert result.passed
    assert "Your code printed:\n   forward saw (5,)" in result.message


# --- what forward and backward return (the full table is in test_function_hostile.py) -----


def test_a_graph_cut_in_a_plain_callable():
    result = check(
        lambda x: torch.from_numpy(x.detach().numpy() ** 3), name="numpy_cube", allow_callable=True
    )
    assert_fails(result, "numpy_cube: the output does not require grad", "cut the graph")


# --- gradient values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backward", "hint"),
    [
        (lambda ctx, g: 3 * saved(ctx) ** 2, "without multiplying it by `grad_output`"),
        (lambda ctx, g: -g * 3 * saved(ctx) ** 2, "the sign is flipped"),
        (lambda ctx, g: g * 6 * saved(ctx) ** 2, "your gradient is 2 times the right one"),
        (lambda ctx, g: g * 0 * saved(ctx), "zero everywhere"),
    ],
    ids=["chain-rule", "sign", "factor", "zero"],
)
def test_a_wrong_gradient_names_the_worst_element_and_gives_a_hint(backward, hint):
    result = check(variant(backward=backward), reference=cube)
    assert_fails(result, "the gradient for `x` is off compared with", "worst element `x[", hint)


def test_a_one_line_stub_is_not_implemented_yet():
    class OneLine(Function):
        @staticmethod
        def forward(ctx, x): raise NotImplementedError  # fmt: skip

        @staticmethod
        def backward(ctx, g): raise NotImplementedError  # fmt: skip

    result = check(OneLine)
    assert result.status == "not implemented", result.message


def test_an_empty_output_is_not_a_pass():
    result = check(variant(forward=lambda ctx, x: x[:0] ** 3))
    assert_fails(result, "forward returned an empty tensor")


def test_the_grad_reference_footnote_does_not_speak_of_derivatives():
    wrong = variant(forward=lambda ctx, x: x.round(), backward=lambda ctx, g: 2 * g)
    result = check(wrong, grad_reference=lambda x: x)
    assert_fails(result, "these are the gradients for it, not for `grad_output` = 1")
    assert "times the derivative" not in result.message


def test_without_reference_finite_differences_catch_a_wrong_gradient():
    result = check(variant(backward=lambda ctx, g: g * saved(ctx)))
    assert_fails(result, "compared with finite differences", "yours", "off by")


def test_an_input_the_output_ignores_needs_no_gradient():
    result = check_function(lambda x, y: x * 2, X, X, name="ignores_y", allow_callable=True)
    assert result.passed, result.message


def test_a_detached_input_in_a_callable_gets_no_gradient():
    result = check_function(lambda x, y: x * y.detach(), X, X, name="mul", allow_callable=True)
    assert_fails(result, "`y` gets no gradient")


# --- learner objects that are not Functions ----------------------------------------------------


def test_a_plain_function_where_a_function_is_asked_for_fails_clearly():
    def Tanh(x):
        return torch.tanh(x)

    result = check(Tanh, reference=torch.tanh)
    assert_fails(result, "asks for a `torch.autograd.Function` subclass", "plain function")
    result = check(torch.tanh, reference=torch.tanh)
    assert_fails(result, "`tanh` is a built-in function")
    assert_fails(check(lambda x: x**3), "`<lambda>` is a lambda")
    assert check(Tanh, reference=torch.tanh, allow_callable=True).passed


def test_a_class_that_forgot_to_subclass_function():
    class NotAFunction:
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    result = check(NotAFunction)
    assert_fails(result, "not a subclass of `torch.autograd.Function`")
    assert "class NotAFunction(torch.autograd.Function):" in result.message


def test_an_instance_instead_of_the_class():
    with pytest.warns(DeprecationWarning):
        instance = Cube()
    assert_fails(check(instance), "pass the class `Cube` itself, not an instance `Cube()`")


def test_a_function_without_backward_or_forward():
    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x

    class NoForward(Function):
        @staticmethod
        def backward(ctx, g):
            return g

    assert_fails(check(NoBackward), "it has no `backward`")
    assert_fails(check(NoForward), "it has no `forward`")
    assert_fails(check(42), "expected a Function subclass or a function, got int")
    assert_fails(check(torch.nn.Tanh), "`Tanh` is an `nn.Module`")
    assert_fails(check(dict), "it is a class; pass a `torch.autograd.Function` subclass.")
    assert_fails(check(dict, allow_callable=True), "subclass or a function")


# --- determinism and no side effects -------------------------------------------------------------


def test_same_check_same_message_and_the_global_rng_is_untouched():
    wrong = variant(backward=lambda ctx, g: g)
    torch.manual_seed(1)
    first = check(wrong).message
    after = torch.rand(1)
    torch.manual_seed(1)
    assert check(wrong).message == first
    assert torch.equal(torch.rand(1), after)


def test_the_callers_inputs_are_not_changed_and_no_grad_leaks():
    x = X.clone().requires_grad_()
    check(Cube, x, reference=cube)
    assert x.grad is None and torch.equal(x.detach(), X)


def test_the_result_renders_as_html_and_text():
    result = check(variant(backward=lambda ctx, g: -g * 3 * saved(ctx) ** 2), reference=cube)
    assert repr(result) == result.message and result.message.startswith("❌ Cube: ")
    html = result._repr_html_()
    assert "❌ Cube: the gradient for <code>x</code> is off" in html and "<div" in html


# --- the notebook author's mistakes raise ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "phrase"),
    [
        ({"atol": 0}, ValueError, "atol"),
        ({"rtol": -1}, ValueError, "rtol"),
        ({"eps": "small"}, ValueError, "eps"),
        ({"reference": 3}, TypeError, "reference"),
        ({"grad_reference": "x"}, TypeError, "grad_reference"),
        ({"wrt": [3]}, ValueError, "wrt"),
        ({"wrt": "0"}, TypeError, "wrt"),
        ({"name": 5}, TypeError, "name"),
        ({"eps": 1e-30}, ValueError, "eps must be a number from 1e-10 to 1e-2"),
        ({"eps": 0.5}, ValueError, "eps"),
        ({"atol": 10.0}, ValueError, "atol must be a number in \\(0, 1\\)"),
        ({"allow_callable": "yes"}, TypeError, "allow_callable"),
    ],
)
def test_bad_options_raise_naming_the_option(kwargs, error, phrase):
    with pytest.raises(error, match=phrase):
        check_function(Cube, X, **kwargs)


def test_inputs_must_include_a_floating_point_tensor():
    with pytest.raises(ValueError, match="at least one example input"):
        check_function(Cube)
    with pytest.raises(ValueError, match="no floating-point tensor"):
        check_function(Cube, torch.arange(3))
    with pytest.raises(ValueError, match="complex"):
        check_function(Cube, torch.ones(2, dtype=torch.complex64))


def test_an_input_without_elements_is_refused_rather_than_passed():
    with pytest.raises(ValueError, match="input 0 has no elements"):
        check_function(torch.sin, torch.empty(0), allow_callable=True)
    with pytest.raises(ValueError, match="input 1 has no elements"):
        check_function(torch.mul, X, torch.empty(0, 5), allow_callable=True)


def test_meta_tensors_are_refused_by_name():
    with pytest.raises(ValueError, match="input 0 is a meta tensor"):
        check_function(Cube, torch.ones(3, device="meta"))
    with pytest.raises(ValueError, match="expected is a meta tensor"):
        check_tensor(torch.ones(3), torch.ones(3, device="meta"))
    assert_fails(check_tensor(torch.ones(3, device="meta"), torch.ones(3)), "meta tensor")


def test_a_reference_that_raises_is_the_checks_fault_not_the_learners():
    def reference(x):
        return x / "3"

    with pytest.raises(ValueError, match=r"the reference raised TypeError.*set up wrong"):
        check_function(Cube, X, reference=reference)
    with pytest.raises(ValueError, match="the grad_reference raised ZeroDivisionError"):
        check_function(Cube, X, grad_reference=lambda x: 1 / 0)
    with pytest.raises(TypeError, match="the reference must return a tensor"):
        check_function(Cube, X, reference=lambda x: 3.0)


def test_a_reference_of_another_shape_is_named_as_the_reference():
    result = check(Cube, reference=lambda x: (x**3).sum())
    assert_fails(result, "the output has shape (5,), but the reference's has shape ()")
    assert "expected ()" not in result.message


# --- check_tensor ------------------------------------------------------------------------------


def test_check_tensor_verdicts():
    expected = torch.tensor([1.0, 2.0, 3.0])
    assert check_tensor(expected.clone(), expected, name="x.grad").passed
    assert check_tensor(..., expected).status == "not implemented"
    assert check_tensor(2.0, torch.tensor(2.0)).passed
    assert_fails(check_tensor([1.0, 2.0, 3.0], expected), "expected a tensor, got list")
    assert_fails(check_tensor(torch.ones(2), expected), "shape (2,), expected (3,)")
    assert_fails(check_tensor(torch.tensor([1, 2, 3]), expected), "dtype torch.int64")
    wrong = torch.tensor([1.0, 2.5, 3.0])
    assert_fails(check_tensor(wrong, expected, name="g"), "g: the values are off", "[1]")
    with pytest.raises(TypeError, match="expected"):
        check_tensor(expected, [1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="atol"):
        check_tensor(expected, expected, atol=-1)


def test_a_tensor_stored_on_ctx_passes_with_a_note():
    def forward(ctx, x):
        ctx.x = x  # works, but skips save_for_backward's safety
        return x**3

    result = check(
        variant(forward=forward, backward=lambda ctx, g: g * 3 * ctx.x**2), reference=cube
    )
    assert result.passed, result.message
    assert "Note: forward stored a tensor as `ctx.x`" in result.message


def test_a_stub_run_from_python_dash_c_is_recognised(tmp_path):
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from autograd_helpers.checks import check_function\n"
        "class F(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        raise NotImplementedError('todo')\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g\n"
        "print(check_function(F, torch.ones(2)).status)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "not implemented"


def test_changing_grad_output_in_place_is_named():
    result = check(variant(backward=lambda ctx, g: g.mul_(3 * saved(ctx) ** 2)), reference=cube)
    assert_fails(result, "backward changed `grad_output` in place", "grad_output.mul_(2)")


def test_the_worst_element_quotes_the_input_and_grad_output_there():
    result = check(variant(backward=lambda ctx, g: g * 2 * saved(ctx)), reference=cube)
    assert_fails(result, "There `x` = ", "and `grad_output` = ")


# --- several inputs: shapes autograd can sum down, swaps, transposes ---------------------------


class ScaleFeatures(Function):
    """``x * scale`` with ``x`` (N, F) and ``scale`` (F,); backward leaves the sum to autograd."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, scale = ctx.saved_tensors
        return grad_output * scale, grad_output * x  # (N, F) for scale: autograd sums it


BATCH, SCALE = torch.randn(3, 4), torch.randn(4)


def test_a_gradient_autograd_sums_down_to_its_input_passes_with_a_note():
    result = check_function(ScaleFeatures, BATCH, SCALE, reference=torch.mul)
    assert result.passed, result.message
    assert "Note: backward returned a gradient of shape (3, 4) for `scale`" in result.message


def test_gradients_swapped_in_place_of_each_other_are_named():
    swapped = type(
        "ScaleFeatures",
        (ScaleFeatures,),
        {
            "backward": staticmethod(
                lambda ctx, g: (g * ctx.saved_tensors[0], g * ctx.saved_tensors[1])
            )
        },
    )
    result = check_function(swapped, BATCH, SCALE, reference=torch.mul)
    assert_fails(result, "the gradients for `x` and `scale` look swapped")


class MatMul(Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return grad_output @ weight.T, x.T @ grad_output


def _matmul_variant(backward):
    return type("MatMul", (MatMul,), {"backward": staticmethod(backward)})


def test_matmul_shape_mistakes_get_their_hint():
    x, w = torch.randn(5, 3), torch.randn(3, 2)
    assert check_function(MatMul, x, w, reference=torch.matmul).passed
    transposed = _matmul_variant(
        lambda ctx, g: (g @ ctx.saved_tensors[1].T, g.T @ ctx.saved_tensors[0])
    )
    assert_fails(
        check_function(transposed, x, w, reference=torch.matmul),
        "the gradient for `weight` has shape (2, 3), but `weight` has shape (3, 2)",
        "transposed shape",
    )
    swapped = _matmul_variant(
        lambda ctx, g: (ctx.saved_tensors[0].T @ g, g @ ctx.saved_tensors[1].T)
    )
    assert_fails(
        check_function(swapped, x, w, reference=torch.matmul),
        "the gradients for `x` and `weight` look swapped",
    )


def test_a_square_matrix_hides_the_transposed_shape_but_not_the_values():
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    transposed = _matmul_variant(
        lambda ctx, g: (g @ ctx.saved_tensors[1].T, g.T @ ctx.saved_tensors[0])
    )
    assert_fails(
        check_function(transposed, x, w, reference=torch.matmul),
        "the gradient for `weight` is off",
    )


def test_an_integer_output_gets_a_hint_about_integers():
    result = check(variant(forward=lambda ctx, x: torch.round(x).long()), reference=torch.round)
    assert_fails(result, "dtype torch.int64", "an integer tensor (torch.int64) cannot carry")
    assert "zeros_like" not in result.message


def test_a_wrong_gradient_of_a_function_that_changes_shape_gets_a_verdict_not_a_crash():
    # the output (7 elements) and the input (9) differ in shape: no hint may multiply them
    def pool_keeping_one(t):
        values = torch.nn.functional.max_pool1d(t * t, 3, stride=1)
        return values.detach() * 0.5 + values * 0.5  # the same values, half the gradient

    x = torch.randn(1, 2, 9)
    reference = lambda t: torch.nn.functional.max_pool1d(t * t, 3, stride=1)  # noqa: E731
    result = check_function(pool_keeping_one, x, reference=reference, allow_callable=True)
    assert_fails(result, "is off compared with", "0.5 times the right one")


def test_more_examples_catch_what_one_example_hides():
    class NormalizeWithFixedNorm(Function):
        @staticmethod
        def forward(ctx, x):
            norm = x.norm()
            y = x / norm
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return (g - y * (y * g).sum()) / 30**0.5  # the first example's norm, hard-coded

    first = torch.tensor([3.0, -4.0, 1.0, 2.0])
    reference = lambda t: t / t.norm()  # noqa: E731
    assert check_function(NormalizeWithFixedNorm, first, reference=reference).passed
    result = check_function(
        NormalizeWithFixedNorm, first, reference=reference, also=[(torch.tensor([0.5, 2.0]),)]
    )
    assert_fails(result, "is off compared with")
    assert check_function(Cube, X, reference=cube, also=[(X * 2,), (-X,)]).title.startswith(
        "Cube passed on 3 example inputs:"
    )
    with pytest.raises(TypeError, match="also must be a sequence of input tuples"):
        check_function(Cube, X, also=[X])
