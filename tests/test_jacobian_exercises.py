"""Chapter 02's checkers: right answers written many ways pass; each usual mistake is named."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.checks import check_hvp, check_jacobian_loop, check_jacobian_shapes
from autograd_helpers.jacobians import jacobian_by_rows

# --- the Jacobian loop ----------------------------------------------------------------------


def loop_with_reshape(f, x):
    x = x.detach().requires_grad_()
    y = f(x)
    rows = [
        torch.autograd.grad(y.reshape(-1)[i], x, retain_graph=True)[0] for i in range(y.numel())
    ]
    return torch.stack(rows).reshape(*y.shape, *x.shape)


def loop_with_unit_vectors(f, x):
    x = x.clone().requires_grad_(True)
    y = f(x)
    jac = torch.zeros(y.numel(), x.numel(), dtype=x.dtype)
    for i in range(y.numel()):
        unit = torch.zeros(y.numel(), dtype=y.dtype)
        unit[i] = 1
        (row,) = torch.autograd.grad(y, x, unit.reshape(y.shape), retain_graph=True)
        jac[i] = row.reshape(-1)
    return jac.reshape(y.shape + x.shape)


def loop_with_backward_and_reset(f, x):
    x = x.detach().requires_grad_()
    y = f(x).reshape(-1)
    rows = []
    for i in range(len(y)):
        x.grad = None
        y[i].backward(retain_graph=True)
        rows.append(x.grad.clone())
    return torch.stack(rows).reshape(*f(x).shape, *x.shape)


@pytest.mark.parametrize(
    "answer",
    [loop_with_reshape, loop_with_unit_vectors, loop_with_backward_and_reset],
)
def test_right_jacobian_loops_pass(answer):
    result = check_jacobian_loop(answer)
    assert result.passed, result.message


def no_retain_graph(f, x):
    x = x.detach().requires_grad_()
    y = f(x).reshape(-1)
    return torch.stack([torch.autograd.grad(y[i], x)[0] for i in range(len(y))])


def no_requires_grad(f, x):
    y = f(x).reshape(-1)
    return torch.stack([torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(len(y))])


def flat_rows(f, x):
    return loop_with_reshape(f, x).reshape(f(x).numel(), x.numel())


def input_dims_first(f, x):
    jac = loop_with_reshape(f, x)
    out_dims = jac.dim() - x.dim()
    return jac.permute(*range(out_dims, jac.dim()), *range(out_dims))


def accumulating_backward(f, x):
    x = x.detach().requires_grad_()
    y = f(x).reshape(-1)
    rows = []
    for i in range(len(y)):
        y[i].backward(retain_graph=True)
        rows.append(x.grad.clone())  # forgot to reset x.grad
    return torch.stack(rows).reshape(*f(x).shape, *x.shape)


def library_shortcut(f, x):
    return torch.autograd.functional.jacobian(f, x)


def list_of_rows(f, x):
    x = x.detach().requires_grad_()
    y = f(x).reshape(-1)
    return [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(len(y))]


@pytest.mark.parametrize(
    ("answer", "phrases"),
    [
        (..., ["not implemented yet"]),
        (no_retain_graph, ["backward through the graph a second time", "retain_graph=True"]),
        (no_requires_grad, ["does not require grad", "requires_grad_()"]),
        (flat_rows, []),  # phrases below: the first problem is already 2-D
        (input_dims_first, ["transposed"]),
        (accumulating_backward, ["sum of the rows before it", "torch.autograd.grad"]),
        (library_shortcut, ["calls `torch.autograd.functional.jacobian`"]),
        (list_of_rows, ["returned a list, not a tensor", "torch.stack(rows)"]),
        ("jacobian", ["expected a function, got str"]),
    ],
    ids=[
        "stub",
        "no-retain-graph",
        "no-requires-grad",
        "flat",
        "transposed",
        "accumulating",
        "shortcut",
        "list",
        "not-a-function",
    ],
)
def test_wrong_jacobian_loops_get_their_hint(answer, phrases):
    result = check_jacobian_loop(answer)
    assert not result.passed, result.message
    if answer is flat_rows:  # the tall problem is already 2-D; the matrix input gives it away
        phrases = ["has shape (1, 6), expected (2, 3)", "reshape the stacked rows to (2, 3)"]
    for phrase in phrases:
        assert phrase in result.message, result.message


def test_the_shortcut_is_restored_after_the_check():
    original = torch.autograd.functional.jacobian
    check_jacobian_loop(library_shortcut)
    assert torch.autograd.functional.jacobian is original


# --- the Hessian-vector product --------------------------------------------------------------


def hvp_double_backward(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), x)
    return hv


def hvp_with_grad_outputs(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    return torch.autograd.grad(g, x, grad_outputs=v)[0]


def hvp_forward_over_reverse(f, x, v):
    return torch.func.jvp(torch.func.grad(f), (x,), (v,))[1]


def hvp_with_backward(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (g * v).sum().backward()
    return x.grad


@pytest.mark.parametrize(
    "answer",
    [hvp_double_backward, hvp_with_grad_outputs, hvp_forward_over_reverse, hvp_with_backward],
)
def test_right_hvps_pass(answer):
    result = check_hvp(answer)
    assert result.passed, result.message


def hvp_without_create_graph(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x)
    return torch.autograd.grad((g * v).sum(), x)[0]


def hvp_returning_the_gradient(f, x, v):
    x = x.detach().requires_grad_()
    return torch.autograd.grad(f(x), x)[0]


def hvp_returning_g_times_v(f, x, v):
    x = x.detach().requires_grad_()
    return torch.autograd.grad(f(x), x)[0] * v


def hvp_returning_the_scalar(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    return (g * v).sum()


def hvp_forming_the_hessian(f, x, v):
    hessian = torch.autograd.functional.hessian(f, x)
    return (hessian.reshape(x.numel(), x.numel()) @ v.reshape(-1)).reshape(x.shape)


def hvp_library(f, x, v):
    return torch.autograd.functional.hvp(f, x, v)[1]


@pytest.mark.parametrize(
    ("answer", "phrases"),
    [
        (..., ["not implemented yet"]),
        (hvp_without_create_graph, ["does not require grad", "create_graph=True"]),
        (hvp_returning_the_gradient, ["the gradient g itself"]),
        (hvp_returning_g_times_v, ["that is g * v"]),
        (hvp_returning_the_scalar, ["returned shape ()", "not that scalar"]),
        (hvp_forming_the_hessian, ["calls `torch.autograd.functional.hessian`"]),
        (hvp_library, ["calls `torch.autograd.functional.hvp`"]),
    ],
    ids=["stub", "no-create-graph", "gradient", "g-times-v", "scalar", "hessian", "library"],
)
def test_wrong_hvps_get_their_hint(answer, phrases):
    result = check_hvp(answer)
    assert not result.passed, result.message
    for phrase in phrases:
        assert phrase in result.message, result.message


# --- predicting shapes -------------------------------------------------------------------------

W = torch.ones(5, 3)
PROBLEMS = {
    "x.sum(), x: (3, 4)": (torch.sum, torch.ones(3, 4)),
    "W @ x, W: (5, 3), x: (3,)": (lambda x: W @ x, torch.ones(3)),
    "x.T, x: (2, 3)": (lambda x: x.T, torch.ones(2, 3)),
    "x * y, x: (3,), y: (3,)": (torch.mul, (torch.ones(3), torch.ones(3))),
}


def test_right_predictions_pass_in_any_shape_like_spelling():
    answers = [(3, 4), torch.Size([5, 3]), [3, 2, 2, 3], ((3, 3), (3, 3))]
    result = check_jacobian_shapes(answers, PROBLEMS)
    assert result.passed, result.message
    assert "✓ x.T, x: (2, 3): (3, 2, 2, 3)" in result.message


def test_wrong_predictions_are_explained_one_by_one():
    result = check_jacobian_shapes([(12,), (3, 5), (3, 2, 2, 3), (3, 3)], PROBLEMS)
    assert not result.passed
    assert "3 of 4 shapes are off" in result.message
    assert "✗ x.sum(), x: (3, 4): you said (12,); it is (3, 4), the output's shape ()" in (
        result.message
    )
    assert "✗ x * y, x: (3,), y: (3,)" in result.message and "for each input" in result.message


@pytest.mark.parametrize(
    ("predicted", "phrase"),
    [(..., "not implemented yet"), ({"a": 1}, "expected a list"), ([(3, 4)], "1 predictions")],
)
def test_predictions_that_cannot_be_checked(predicted, phrase):
    result = check_jacobian_shapes(predicted, PROBLEMS)
    assert not result.passed and phrase in result.message


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: check_jacobian_shapes([], {}), ValueError, "problems must be a non-empty"),
        (lambda: check_jacobian_shapes([], {"a": torch.sum}), TypeError, r"problems\['a'\]"),
        (lambda: check_jacobian_loop(jacobian_by_rows, name=1), TypeError, "name"),
        (lambda: check_hvp(hvp_double_backward, name=3), TypeError, "name"),
    ],
)
def test_the_notebooks_mistakes_raise(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


# --- shortcuts under any name, and the audit's wrong answers --------------------------------

from torch.autograd.functional import hessian as imported_hessian  # noqa: E402
from torch.autograd.functional import hvp as imported_hvp  # noqa: E402
from torch.autograd.functional import jacobian as imported_jacobian  # noqa: E402


def test_a_shortcut_imported_under_its_own_name_is_still_refused():
    result = check_jacobian_loop(lambda f, x: imported_jacobian(f, x))
    assert "calls `torch.autograd.functional.jacobian`" in result.message
    result = check_jacobian_loop(jacobian_by_rows)
    assert "calls `autograd_helpers.jacobians.jacobian_by_rows`" in result.message
    result = check_hvp(lambda f, x, v: imported_hvp(f, x, v)[1])
    assert "calls `torch.autograd.functional.hvp`" in result.message


def test_the_outermost_shortcut_is_named():
    def via_hessian(f, x, v):
        return (imported_hessian(f, x).reshape(x.numel(), -1) @ v.reshape(-1)).reshape(x.shape)

    assert "calls `torch.autograd.functional.hessian`" in check_hvp(via_hessian).message


def test_a_hessian_built_row_by_row_is_refused_by_its_backward_passes():
    def rows_of_the_hessian(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        flat = g.reshape(-1)
        rows = [
            torch.autograd.grad(flat[i], x, retain_graph=True)[0].reshape(-1)
            for i in range(flat.numel())
        ]
        return (torch.stack(rows) @ v.reshape(-1)).reshape(x.shape)

    result = check_hvp(rows_of_the_hessian)
    assert not result.passed and "backward passes; 3 are enough" in result.message


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_the_hvp_checkers_other_hints():
    def tuple_returned(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.autograd.grad((g * v).sum(), x)

    assert "returns a tuple: take its element" in check_hvp(tuple_returned).message

    def vectors_only(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.autograd.grad(g @ v, x)[0]

    assert "`x` may be a matrix" in check_hvp(vectors_only).message

    def accumulated(f, x, v):
        x = x.detach().requires_grad_()
        f(x).backward(create_graph=True)
        (x.grad * v).sum().backward()
        return x.grad

    assert "that is g + H v" in check_hvp(accumulated).message
    assert "create_graph=True" in check_hvp(hvp_without_create_graph).message.split("Hint")[1][:200]


def test_the_jacobian_checkers_other_hints():
    def aliased_rows(f, x):
        x = x.detach().requires_grad_()
        y = f(x).reshape(-1)
        rows = []
        for i in range(len(y)):
            y[i].backward(retain_graph=True)
            rows.append(x.grad)  # the same tensor every time
        return torch.stack(rows).reshape(*f(x).shape, *x.shape)

    assert "every row is the same tensor" in check_jacobian_loop(aliased_rows).message

    def summed_rows(f, x):
        x = x.detach().requires_grad_()
        y = f(x)
        return torch.autograd.grad(y, x, torch.ones_like(y))[0]

    assert "the sum of all rows" in check_jacobian_loop(summed_rows).message

    def vectors_only(f, x):
        x = x.detach().requires_grad_()
        y = f(x)
        rows = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(y.shape[0])]
        return torch.stack(rows)

    assert "your code assumes a shape" in check_jacobian_loop(vectors_only).message


def test_the_default_label_is_the_functions_name():
    def my_hvp(f, x, v):
        return ...

    assert check_hvp(my_hvp).title.startswith("my_hvp:")


def test_numpy_integers_count_and_a_string_is_explained():
    import numpy as np

    answers = [(np.int64(3), np.int64(4)), (5, 3), (3, 2, 2, 3), "(3, 3)"]
    result = check_jacobian_shapes(answers, PROBLEMS)
    assert "1 of 4 shapes are off" in result.message
    assert "you said a string; write the tuple itself" in result.message
