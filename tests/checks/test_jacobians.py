"""Chapter 02's checkers and their machinery, as units.

The learner answers themselves (right ones written many ways, wrong ones in every category)
live in the answer banks, ``tests/banks/ex_02_*.py``, worked in a real kernel by
``tests/test_bank_02.py``. Here: the instruments the checkers judge by (backward passes,
evaluation points, the largest tensor, what a call left changed), the problem tables, the
shapes checker's spellings and hints, answers too strange for a notebook cell, and the
notebook's own mistakes.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from autograd_helpers.checks import check_hvp, check_jacobian_loop, check_jacobian_shapes
from autograd_helpers.checks._contain.contained import Contained
from autograd_helpers.checks._contain.watch import watching
from autograd_helpers.checks._core.problems import WORDS
from autograd_helpers.checks.jacobians import _hvp as hvp_table
from autograd_helpers.checks.jacobians import _loop as loop_table
from autograd_helpers.checks.jacobians._shapes import changed_problems, shape_like
from autograd_helpers.jacobians import jacobian_by_rows


def rows(f, x):
    x = x.detach().requires_grad_()
    y = f(x)
    flat = y.reshape(-1)
    grads = [torch.autograd.grad(flat[i], x, retain_graph=True)[0] for i in range(flat.numel())]
    return torch.stack(grads).reshape(y.shape + x.shape)


def double_backward(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x, create_graph=True)
    return torch.autograd.grad((g * v).sum(), x)[0]


# --- the instruments --------------------------------------------------------------------------


def test_watching_counts_passes_forwards_and_points_away_from_x():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with watching() as usage:
        f = usage.counting(torch.sin, x)
        rows(f, x.clone())
        f(x + 1e-6)
    assert (usage.backward_passes, usage.forwards, usage.moved) == (2, 2, 1)


def test_watching_sees_batched_passes_and_the_functions_called_under_any_name():
    x = torch.ones(3, dtype=torch.float64)
    names = ("torch.func.jacrev", "torch.func.vmap")
    with watching(names) as usage:
        f = usage.counting(torch.sin, x)
        jacrev = torch.func.jacrev  # an alias is the same code
        jacrev(f)(x)
        y = f(x.detach().requires_grad_())
        torch.autograd.grad(y, y, torch.eye(3, dtype=y.dtype), is_grads_batched=True)
    assert usage.called[0] == "torch.func.jacrev" and "torch.func.vmap" in usage.called
    assert usage.batched_passes == 1


def test_watching_measures_new_storage_not_views():
    with watching(measure_size=True) as usage:
        big = torch.ones(1, 4).expand(50, 4)  # a view: 4 numbers
        assert big.shape == (50, 4)
        torch.zeros(3, 5)
    assert (usage.largest, usage.largest_shape) == (15, (3, 5))


def test_watching_puts_back_the_profile_function_it_found():
    calls = []

    def mine(frame, event, arg):
        calls.append(event)

    sys.setprofile(mine)
    try:
        with watching():
            pass
        assert sys.getprofile() is mine
    finally:
        sys.setprofile(None)


def test_contained_finds_and_undoes_every_change_to_the_notebook():
    space: dict[str, object] = {}
    exec(
        "import torch\n"
        "t = torch.ones(2, requires_grad=True)\n"
        "kept = []\n"
        "def fn():\n"
        "    global last\n"
        "    last = 1\n"
        "    kept.append(t)\n"
        "    (t * 2).sum().backward()\n"
        "    t.register_hook(lambda g: g)\n"
        "    with torch.no_grad():\n"
        "        t.add_(1)\n",
        space,
    )
    held = Contained(space["fn"], every_global=True, words=WORDS)
    space["fn"]()
    found = " | ".join(held.changes())
    for phrase in ("`last`", "global list `kept`", "its values", ".grad", "its hooks"):
        assert phrase in found, found
    held.restore()
    t = space["t"]
    assert "last" not in space and space["kept"] == [] and t.grad is None
    assert t.tolist() == [1.0, 1.0] and not t._backward_hooks
    assert held.changes() == []


# --- the problem tables ------------------------------------------------------------------------


@pytest.mark.parametrize("table", [loop_table.problems, hvp_table.problems])
def test_every_problem_has_its_answer_in_float64_and_an_x_the_learner_cannot_reach(table):
    problems = table()
    assert problems[0].probes or problems[0] is table()[0]
    for problem in problems:
        assert problem.expected.dtype == torch.float64
        assert not problem.x.requires_grad
    dtypes = {p.x.dtype for p in problems}
    assert dtypes == {torch.float64, torch.float32}
    assert {p.x.dim() for p in problems} >= {0, 1, 2}


def test_the_honest_solution_never_creates_a_tensor_as_large_as_the_hessian_where_judged():
    judged = [p for p in hvp_table.problems() if p.size >= 3 and p.honest_size == 0]
    assert len(judged) >= 6


def test_the_data_f_carries_is_no_hessian_for_jvp_of_the_gradient():
    # torch.func.linearize, whose trace copies f's data (a (6, 4), a (4, 4)), is worked in
    # 02-hvp's answer bank with the same phrase; it traces on every call, so only once.
    def by_jvp(f, x, v):
        return torch.func.jvp(torch.func.grad(f), (x,), (v,))[1]

    result = check_hvp(by_jvp)
    assert result.passed and "forward-mode Jacobian-vector product" in result.message, (
        result.message
    )
    assert any("4 × 4" in p.probes for p in hvp_table.problems())


def test_a_zero_shortcut_passes_only_at_v_zero_and_is_not_praised():
    def zero_at_zero(f, x, v):
        return torch.zeros_like(x) if not v.any() else double_backward(f, x, v)

    def zero_when_small(f, x, v):
        return torch.zeros_like(x) if v.abs().max() < 1e-12 else double_backward(f, x, v)

    passed = check_hvp(zero_at_zero)
    assert passed.passed and "the special case is not needed" in passed.message
    failed = check_hvp(zero_when_small)
    assert not failed.passed and "a special case for a small v is wrong" in failed.message


def test_forward_mode_is_named_only_for_forward_mode():
    def columns(jvp_of):
        def answer(f, x):
            eye = torch.eye(x.numel(), dtype=x.dtype)
            cols = [jvp_of(f, x, eye[j].reshape(x.shape)).reshape(-1) for j in range(x.numel())]
            return torch.stack(cols, dim=1).reshape(f(x).shape + x.shape)

        return answer

    forward = check_jacobian_loop(columns(lambda f, x, u: torch.func.jvp(f, (x,), (u,))[1]))
    trick = check_jacobian_loop(columns(lambda f, x, u: torch.autograd.functional.jvp(f, x, u)[1]))
    assert forward.passed and "in forward mode" in forward.message
    assert trick.passed and "not forward mode; it is the double-backward trick" in trick.message


def test_replay_backward_is_refused_in_plain_words():
    import autograd_helpers as ah

    def replayed(f, x):
        x = x.detach().requires_grad_()
        y = f(x).reshape(-1)
        rows_ = [ah.engine.replay_backward(y[i], x)[0] for i in range(y.numel())]
        return torch.stack(rows_).reshape(f(x).shape + x.shape)

    message = check_jacobian_loop(replayed).message
    assert "replay of `backward()` in Python" in message and "no backward pass" not in message


def test_a_one_element_output_keeps_its_size_1_dimensions():
    def one_row_is_a_gradient(f, x):
        jacobian = rows(f, x)
        return jacobian.reshape(x.shape) if jacobian.numel() == x.numel() else jacobian

    def squeezed(f, x):
        return rows(f, x).squeeze()

    for answer in (one_row_is_a_gradient, squeezed):
        result = check_jacobian_loop(answer)
        assert not result.passed and "the Jacobian has shape" in result.message, result.message


def test_the_loops_pass_message_lists_the_probes_and_its_notes():
    def batched(f, x):
        y, pullback = torch.func.vjp(f, x)
        units = torch.eye(y.numel(), dtype=y.dtype).reshape(-1, *y.shape)
        return torch.func.vmap(pullback)(units)[0].reshape(y.shape + x.shape)

    result = check_jacobian_loop(batched)
    assert result.passed, result.message
    assert "a float32 input at edge values" in result.message
    assert "Note: it computes the rows as one batched pass" in result.message


# --- answers too strange for a notebook cell: verdicts, never tracebacks --------------------


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (lambda f, x: rows(f, x).to_sparse(), "sparse_coo tensor"),
        (lambda f, x: torch.empty(rows(f, x).shape, device="meta", dtype=x.dtype), "meta tensor"),
        (lambda f, x: rows(f, x).to(torch.float8_e4m3fn), "float8_e4m3fn"),
        (lambda f, x: rows(f, x).to(torch.complex128), "complex128"),
        (lambda f, x: (r for r in rows(f, x)), "a generator, not a tensor"),
        (lambda f, x: print("x" * 200_000) or rows(f, x), "printed too much"),
        (lambda f, x: rows(f, x).sum().numpy(), "a NumPy value"),
        (lambda f, x: rows(f, x) * float("nan"), "yours nan"),
        ("jacobian", "expected a function, got str"),
        (..., "not implemented yet"),
    ],
    ids=[
        "sparse",
        "meta",
        "float8",
        "complex",
        "generator",
        "prints",
        "numpy",
        "nan",
        "str",
        "stub",
    ],
)
def test_strange_jacobian_answers_get_a_verdict(answer, phrase):
    result = check_jacobian_loop(answer)
    assert not result.passed and phrase in result.message, result.message


def test_endless_recursion_is_a_verdict():
    def forever(f, x):
        return forever(f, x)

    assert "RecursionError" in check_jacobian_loop(forever).message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (lambda f, x, v: double_backward(f, x, v).to_sparse(), "sparse_coo tensor"),
        (lambda f, x, v: float(double_backward(f, x, v).sum()), "a float, not a tensor"),
        (lambda f, x, v: double_backward(f, x, v) > 0, "torch.bool"),
        (..., "not implemented yet"),
    ],
    ids=["sparse", "float", "bool", "stub"],
)
def test_strange_hvp_answers_get_a_verdict(answer, phrase):
    result = check_hvp(answer)
    assert not result.passed and phrase in result.message, result.message


def test_a_shortcut_is_named_under_any_name_and_nothing_is_patched():
    from torch.autograd.functional import hessian as imported_hessian

    original = torch.autograd.functional.jacobian
    assert "calls `torch.autograd.functional.jacobian`" in (
        check_jacobian_loop(lambda f, x: original(f, x)).message
    )
    assert torch.autograd.functional.jacobian is original
    assert (
        "`autograd_helpers.jacobians.jacobian_by_rows`"
        in check_jacobian_loop(jacobian_by_rows).message
    )

    def via_hessian(f, x, v):  # hessian calls jacobian inside: the outermost is named
        return (imported_hessian(f, x).reshape(x.numel(), -1) @ v.reshape(-1)).reshape(x.shape)

    assert "calls `torch.autograd.functional.hessian`" in check_hvp(via_hessian).message


def test_the_default_label_is_the_functions_name():
    def my_hvp(f, x, v):
        return ...

    assert check_hvp(my_hvp).title.startswith("my_hvp:")
    assert check_hvp(lambda f, x, v: 0, name="mine").title.startswith("mine:")


# --- predicting shapes -------------------------------------------------------------------------

W = torch.ones(5, 3)
PROBLEMS = {
    "x.sum(), x: (3, 4)": (torch.sum, torch.ones(3, 4)),
    "W @ x, W: (5, 3), x: (3,)": (lambda x: W @ x, torch.ones(3)),
    "x.T, x: (2, 3)": (lambda x: x.T, torch.ones(2, 3)),
    "x * y, x: (3,), y: (3,)": (torch.mul, (torch.ones(3), torch.ones(3))),
}


@pytest.mark.parametrize(
    ("spelling", "shape"),
    [
        ((3, 4), (3, 4)),
        ([3, 4], (3, 4)),
        (torch.Size([3, 4]), (3, 4)),
        (np.array([3, 4]), (3, 4)),
        (torch.tensor([3, 4]), (3, 4)),
        ((np.int64(3), torch.tensor(4)), (3, 4)),
        ((3.0, 4.0), (3, 4)),
        (12, (12,)),
        ((), ()),
        ([[2, 3], (2, 3, 2)], ((2, 3), (2, 3, 2))),
        ("(3, 4)", None),
        ((True, 4), None),
        ((3.5, 4), None),
        ((-3, 4), None),
        (None, None),
    ],
)
def test_a_shape_is_read_in_any_spelling_that_means_one(spelling, shape):
    assert shape_like(spelling) == shape


def test_wrong_predictions_are_explained_one_by_one():
    result = check_jacobian_shapes([(12,), (3, 5), (3, 2, 2, 3), (3, 3)], PROBLEMS)
    assert not result.passed
    assert "3 of 4 shapes are off" in result.message
    assert "✗ x.sum(), x: (3, 4): you said (12,); it is (3, 4), the output's shape ()" in (
        result.message
    )
    assert "Hint: that is the Jacobian flattened" in result.message
    assert "Hint: the output's shape comes first" in result.message
    assert "✗ x * y, x: (3,), y: (3,)" in result.message and "one Jacobian per input" in (
        result.message
    )


def test_a_problem_changed_after_the_notebook_made_it_is_said():
    problems = {"x.T, x: (2, 3)": (lambda x: x.T, torch.ones(3, 2))}
    assert "not the (2, 3) its description states" in changed_problems(problems)[0]
    result = check_jacobian_shapes([(2, 3, 3, 2)], problems)
    assert not result.passed and "the notebook's problems were changed" in result.message


@pytest.mark.parametrize(
    ("setting", "phrase"),
    [
        (lambda: torch.set_grad_enabled(False), "grad mode is off"),
        (lambda: torch.set_default_dtype(torch.float64), "the default dtype is torch.float64"),
        (lambda: torch.autograd.set_detect_anomaly(True), "anomaly mode is on"),
    ],
    ids=["grad", "dtype", "anomaly"],
)
def test_a_setting_left_changed_in_the_notebook_fails_right_shapes(setting, phrase):
    grad, dtype, anomaly = (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.is_anomaly_enabled(),
    )
    setting()
    try:
        result = check_jacobian_shapes([(3, 4), (5, 3), (3, 2, 2, 3), ((3, 3), (3, 3))], PROBLEMS)
        assert torch.is_grad_enabled() == (phrase != "grad mode is off")  # judged, not undone
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.autograd.set_detect_anomaly(anomaly)
    assert not result.passed and "the shapes are right, but" in result.message
    assert phrase in result.message


@pytest.mark.parametrize(
    ("predicted", "phrase"),
    [
        (..., "not implemented yet"),
        ({"a": 1}, "got a dict"),
        ([(3, 4)], "1 prediction for 4 problems"),
        ((3, 4), "that is one shape"),
        ({(3, 4)}, "no order"),
        (3.5, "expected a list of shapes, got float"),
    ],
)
def test_predictions_that_cannot_be_checked(predicted, phrase):
    result = check_jacobian_shapes(predicted, PROBLEMS)
    assert not result.passed and phrase in result.message, result.message


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda: check_jacobian_shapes([], {}), ValueError, "problems must be a non-empty"),
        (lambda: check_jacobian_shapes([], {"a": torch.sum}), TypeError, r"problems\['a'\]"),
        (
            lambda: check_jacobian_shapes([()], {"a": (torch.sum, torch.arange(3))}),
            TypeError,
            "floating-point tensor",
        ),
        (lambda: check_jacobian_shapes([()], PROBLEMS, name=3), TypeError, "name"),
        (lambda: check_jacobian_loop(jacobian_by_rows, name=1), TypeError, "name"),
        (lambda: check_hvp(double_backward, name=3), TypeError, "name"),
    ],
)
def test_the_notebooks_mistakes_raise(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def test_a_broken_problem_leaves_the_random_state_as_it_was():
    def draws(x):
        torch.randn(3)
        return x.sum()

    before = torch.get_rng_state()
    check_jacobian_shapes([(2,)], {"draws, x: (2,)": (draws, torch.ones(2))})
    assert torch.equal(torch.get_rng_state(), before)


def test_a_problem_that_no_longer_runs_is_a_verdict():
    result = check_jacobian_shapes([()], {"a": (lambda x: x @ x, torch.ones(3, 2))})
    assert not result.passed and "cannot be run now" in result.message
    assert "raises RuntimeError" in result.message and "notebook itself is wrong" in result.message


def test_a_global_the_cell_changed_gives_a_verdict_never_a_traceback():
    namespace = {"torch": torch, "B": torch.randn(5, 3)}
    f = eval("lambda x: B @ x", namespace)
    problems = {"B @ x, B: (5, 3), x: (3,)": (f, torch.randn(3))}
    assert check_jacobian_shapes([(5, 3)], problems).passed
    namespace["B"] = torch.randn(5, 4)  # the learner's cell: B = torch.randn(5, 4)
    broken = check_jacobian_shapes([(5, 3)], problems)
    assert not broken.passed and "cannot be run now" in broken.message
    assert "`B` has shape (5, 4), not the (5, 3)" in broken.message
    namespace["B"] = torch.randn(4, 3)  # another batch size: runs, with another truth
    changed = check_jacobian_shapes([(5, 3)], problems)
    assert changed.message.startswith("❌ predicted: the notebook's problems were changed")
    assert "`B` has shape (4, 3)" in changed.message and "does not undo it" in changed.message
    namespace["B"] = 3  # not a tensor any more
    assert "`B` is now int" in check_jacobian_shapes([(5, 3)], problems).message


def test_a_problem_tensor_made_to_require_grad_or_hooked_is_judged_not_undone():
    x = torch.randn(2, 3)
    problems = {"x.T, x: (2, 3)": (lambda x: x.T, x)}
    x.requires_grad_()
    result = check_jacobian_shapes([(3, 2, 2, 3)], problems)
    assert not result.passed and "`x` requires grad" in result.message
    assert x.requires_grad  # judged, not undone
    x.register_hook(lambda g: g)
    assert "`x` has a hook" in check_jacobian_shapes([(3, 2, 2, 3)], problems).message


# --- the audit's findings: vmap, precision, settings, random state, the shapes' set-up ---------


def test_watching_sees_each_point_of_a_vmap_batch_and_a_lower_precision():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    with watching() as usage:
        f = usage.counting(torch.sin, x)
        torch.func.vmap(f)(x + torch.eye(3, dtype=torch.float64) * 1e-6)
        f(x.float())  # rounded to float32: no step, a lower precision
    assert (usage.forwards, usage.moved, usage.lower_precision) == (2, 3, torch.float32)


def test_watching_counts_the_rows_of_batched_passes_across_calls():
    x = torch.ones(4, dtype=torch.float64)
    units = torch.eye(4, dtype=torch.float64)
    with watching() as usage:
        _, pullback = torch.func.vjp(torch.func.grad(lambda t: (t**3).sum()), x)
        torch.func.vmap(pullback)(units[:1])
        torch.func.vmap(pullback)(units[1:])
    assert usage.batched_rows == 4


def fd_in_vmap(f, x):
    xx = x.detach().requires_grad_()
    torch.autograd.grad(f(xx).sum(), xx)
    x64, n = x.detach().double(), x.numel()
    steps = (torch.eye(n, dtype=torch.float64) * 1e-6).reshape(n, *x.shape)
    cols = (torch.func.vmap(f)(x64 + steps) - torch.func.vmap(f)(x64 - steps)) / 2e-6
    return cols.reshape(n, -1).T.reshape(f(x).shape + x.shape).to(x.dtype)


def in_float32(f, x):
    return rows(f, x.float()).to(x.dtype)


def hvp_fd_in_vmap(f, x, v):
    x64 = x.detach().double()
    size = v.double().norm()
    if size == 0:
        return torch.zeros_like(x)
    u, h = v.double() / size, 1e-5
    g = torch.func.vmap(torch.func.grad(f))(torch.stack([x64 + h * u, x64 - h * u]))
    return ((g[0] - g[1]) / (2 * h) * size).to(x.dtype)


def hvp_in_chunks(f, x, v):
    n = x.numel()
    _, pullback = torch.func.vjp(torch.func.grad(f), x)
    units = torch.eye(n, dtype=x.dtype).reshape(n, *x.shape)
    top = torch.func.vmap(pullback)(units[: n // 2])[0].reshape(-1, n)
    bottom = torch.func.vmap(pullback)(units[n // 2 :])[0].reshape(-1, n)
    return (torch.cat([top, bottom]) @ v.reshape(-1)).reshape(x.shape)


def then(setting, answer):
    def wrapped(*args):
        setting()
        return answer(*args)

    return wrapped


@pytest.mark.parametrize(
    ("check", "answer", "phrase"),
    [
        (check_jacobian_loop, fd_in_vmap, "finite differences"),
        (check_jacobian_loop, in_float32, "a lower precision than x's float64"),
        (check_jacobian_loop, then(lambda: torch.manual_seed(0), rows), "reseeded"),
        (check_jacobian_loop, then(lambda: torch.rand(3), rows), "drew random numbers"),
        (
            check_jacobian_loop,
            lambda f, x: torch.nan_to_num(rows(f, x)).clamp(-1e4, 1e4),
            "x.exp() * 100",
        ),
        (check_hvp, hvp_fd_in_vmap, "finite differences"),
        (check_hvp, hvp_in_chunks, "its batched passes compute"),
        (
            check_hvp,
            lambda f, x, v: double_backward(f, x, v).squeeze(),
            "expected (3, 1)",
        ),
        (check_hvp, then(lambda: torch.set_flush_denormal(True), double_backward), "denormal"),
        (
            check_hvp,
            then(lambda: torch.use_deterministic_algorithms(True), double_backward),
            "deterministic algorithms on",
        ),
        (
            check_hvp,
            then(lambda: torch._C._autograd._saved_tensors_hooks_disable("no"), double_backward),
            "saved-tensor hooks disabled",
        ),
    ],
    ids=[
        "fd-vmap",
        "float32",
        "reseed",
        "draw",
        "clamp",
        "hvp-fd-vmap",
        "hvp-chunks",
        "hvp-squeeze",
        "flush",
        "deterministic",
        "saved-hooks",
    ],
)
def test_the_audits_wrong_answers_fail_and_settings_are_put_back(check, answer, phrase):
    state = torch.get_rng_state()
    result = check(answer)
    assert not result.passed and phrase in result.message, result.message
    assert torch.equal(torch.get_rng_state(), state)
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()
    assert (torch.tensor([1e-310], dtype=torch.float64) * 1.0).item() != 0.0


def test_an_attribute_set_on_f_is_a_verdict():
    def keeps(f, x):
        f.last = rows(f, x)
        return f.last

    result = check_jacobian_loop(keeps)
    assert not result.passed and "it set the attribute `f.last`" in result.message


def test_an_outer_product_trace_passes_with_a_note_not_a_hessian_verdict():
    def outer(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.autograd.grad(torch.outer(g.reshape(-1), v.reshape(-1)).trace(), x)[0]

    result = check_hvp(outer)
    assert result.passed and "not the Hessian" in result.message, result.message


def test_the_shapes_set_up_says_a_problem_dropped_replaced_or_changed():
    from autograd_helpers.checks import set_up_jacobian_shapes

    problems = {
        "x.T, x: (2, 3)": (lambda x: x.T, torch.randn(2, 3)),
        "x.sum(), x: (3, 4)": (torch.sum, torch.ones(3, 4)),
        "x * y, x: (3,), y: (3,)": (torch.mul, (torch.ones(3), torch.ones(3))),
    }
    set_up = set_up_jacobian_shapes(problems)
    right = [(3, 2, 2, 3), (3, 4), ((3, 3), (3, 3))]
    baseline = check_jacobian_shapes(right, problems, set_up=set_up)
    truths = [line for line in baseline.details if line.startswith(("✓", "✗"))]
    problems["x.T, x: (2, 3)"][1].add_(1)
    assert "changed in place" in check_jacobian_shapes(right, problems, set_up=set_up).message
    problems.pop("x.T, x: (2, 3)")
    popped = check_jacobian_shapes(right[1:], problems, set_up=set_up)
    assert not popped.passed and "'x.T, x: (2, 3)' is missing" in popped.title
    for replaced in ({}, list(problems.items()), None):
        result = check_jacobian_shapes(right, replaced, set_up=set_up)
        assert not result.passed, result.message
    listed = check_jacobian_shapes(right, list(problems.items()), set_up=set_up)
    assert "it is now a list" in listed.title
    assert [line for line in listed.details if line.startswith(("✓", "✗"))] == truths


def test_a_generator_of_predictions_passes_with_a_note_and_an_empty_one_is_explained():
    right = [(3, 4), (5, 3), (3, 2, 2, 3), ((3, 3), (3, 3))]
    shapes = iter(right)
    first = check_jacobian_shapes(shapes, PROBLEMS)
    assert first.passed and "iterator" in first.message
    again = check_jacobian_shapes(shapes, PROBLEMS)
    assert not again.passed and "used up" in again.message


def test_set_up_and_its_use_refuse_the_notebooks_mistakes():
    from autograd_helpers.checks import set_up_jacobian_shapes

    with pytest.raises(ValueError, match="set_up_jacobian_shapes"):
        set_up_jacobian_shapes({})
    with pytest.raises(TypeError, match="set_up must come from"):
        check_jacobian_shapes([()], PROBLEMS, set_up=PROBLEMS)


# --- issue 25: float64 numbers that float32 cannot hold --------------------------------------


def test_the_float64_probe_holds_digits_float32_rounds_away():
    (problem,) = [p for p in hvp_table.problems() if "float32 cannot hold" in p.probes]
    (v,) = problem.extra
    for t in (problem.x, v):
        assert t.dtype == torch.float64 and bool((t.float().double() != t).all())
    from autograd_helpers.checks.jacobians._hvp_values import in_float32

    rounded = in_float32(problem)
    off = (rounded - problem.expected).abs().max() / problem.expected.abs().max()
    assert off > 1e-2, off  # float32 on the way is off by percents, the tolerance is 1e-6


def _through_float32(where):
    def hvp(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        if where == "v":
            return torch.autograd.grad((g * v.float()).sum(), x)[0]
        if where == "g":
            return torch.autograd.grad((g.float() * v).sum(), x)[0]
        return torch.autograd.grad(g, x, torch.tensor(v.tolist()).to(x.dtype))[0]

    return hvp


@pytest.mark.parametrize("where", ["v", "g", "a copy made without a dtype"])
def test_a_float64_hvp_with_float32_on_the_way_fails_naming_float32(where):
    result = check_hvp(_through_float32(where))
    assert result.status == "failed", result.message
    # float64's tolerance (1e-7) finds it on the first probe whose H v the rounding moves
    assert "rounded to float32" in result.message and "float32 (`v.float()`" in result.message


# --- issue 25, learner audit of chapter 02 ----------------------------------------------------


def _scaled_down(limit):
    """H v by double backward, then clipped: each entry, or the norm, at most ``limit``."""

    def clipped(f, x, v):
        h = double_backward(f, x, v)
        if limit == "norm":
            return h * torch.clamp(30 / (h.norm() + 1e-12), max=1.0)
        return h.clamp(-limit, limit)

    return clipped


@pytest.mark.parametrize("limit", [50, 1e6, "norm"])
def test_a_clipped_hvp_fails_on_a_large_v_because_hv_is_linear_in_v(limit):
    result = check_hvp(_scaled_down(limit))
    assert result.status == "failed", result.message
    assert "H v is linear in v" in result.message and "10^6 · v" in result.message


def test_the_large_v_probe_bites_where_every_other_probe_is_small():
    problems = hvp_table.problems()
    (large,) = [p for p in problems if p.probes.startswith("a large v")]
    others = max(float(p.expected.abs().max()) for p in problems if p is not large)
    assert float(large.expected.abs().max()) > 1e6 > 100 * others


@pytest.mark.parametrize(
    ("factor", "passes"), [(1 + 1e-6, False), (1 - 5e-7, False), (1 + 1e-9, True)]
)
def test_a_float64_hvp_is_judged_at_float64s_precision(factor, passes):
    result = check_hvp(lambda f, x, v: double_backward(f, x, v) * factor)
    assert result.passed is passes, result.message


def test_right_float64_answers_written_differently_pass_the_tight_tolerance():
    def by_jvp(f, x, v):  # the double-backward trick: other last bits than the reference
        def gradient(t):
            return torch.autograd.grad(f(t), t, create_graph=True)[0]

        return torch.autograd.functional.jvp(gradient, x.detach(), v)[1]

    def by_inner(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.autograd.grad(torch.inner(g.reshape(-1), v.reshape(-1)), x)[0]

    def columns(f, x):  # the Jacobian from forward mode, one column per input
        flat = x.detach().reshape(-1)
        units = torch.eye(flat.numel(), dtype=x.dtype)
        cols = [torch.func.jvp(f, (x.detach(),), (u.reshape(x.shape),))[1] for u in units]
        return torch.stack(cols, dim=-1).reshape(f(x).shape + x.shape)

    for fn in (by_jvp, by_inner, lambda f, x, v: torch.func.jvp(torch.func.grad(f), (x,), (v,))[1]):
        assert check_hvp(fn).passed, check_hvp(fn).message
    assert check_jacobian_loop(columns).passed, check_jacobian_loop(columns).message


def _nan_patched(how):
    def hvp(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        h = torch.autograd.grad((g * (v / v.norm())).sum(), x)[0] * v.norm()
        if how == "nan_to_num":
            return torch.nan_to_num(h)
        if how == "method":
            return h.nan_to_num_()
        return torch.where(torch.isnan(h), torch.zeros_like(h), h)

    return hvp


@pytest.mark.parametrize(
    ("how", "phrase"),
    [
        ("nan_to_num", "calls `nan_to_num`"),
        ("method", "calls `nan_to_num`"),
        ("where", "replaces NaN (`isnan`)"),
    ],
)
def test_a_nan_patched_hvp_passes_with_a_note_that_says_so(how, phrase):
    result = check_hvp(_nan_patched(how))
    assert result.passed, result.message
    assert phrase in result.message and "v / v.norm()" not in result.title


def test_a_nan_note_is_only_for_the_learners_own_call():
    assert "NaN" not in check_hvp(double_backward).message
    assert "NaN" not in check_jacobian_loop(rows).message


def test_indexing_a_0d_output_gets_a_hint_not_torchs_item_advice():
    def unflattened(f, x):
        x = x.detach().requires_grad_()
        y = f(x)
        grads = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(y.numel())]
        return torch.stack(grads).reshape(y.shape + x.shape)

    def indexed(f, x, v):  # matrices flattened, a 0-d x forgotten
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        gs, vs = (g.reshape(-1), v.reshape(-1)) if x.dim() > 1 else (g, v)
        dot = sum(gs[i] * vs[i] for i in range(x.numel()))
        return torch.autograd.grad(dot, x)[0]

    def entries_of_x(f, x):  # x flattened where it is a matrix, a 0-d x forgotten
        x = x.detach().requires_grad_()
        flat_x = x.reshape(-1) if x.dim() > 1 else x
        y = f(x).reshape(-1)
        rows = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(len(y))]
        assert all(flat_x[j] is not None for j in range(x.numel()))
        return torch.stack(rows).reshape(f(x).shape + x.shape)

    loop = check_jacobian_loop(unflattened)
    assert "invalid index of a 0-dim tensor" in loop.message
    assert "`y` is 0-d here" in loop.message and "`y.reshape(-1)`" in loop.message
    assert "not `.item()`" not in loop.message and "`.item()`, would give a plain" in loop.message
    of_x = check_jacobian_loop(entries_of_x)
    assert "a 0-d input" in of_x.message and "`x` is 0-d here" in of_x.message, of_x.message
    hvp = check_hvp(indexed)
    assert "invalid index of a 0-dim tensor" in hvp.message, hvp.message
    assert "`x` may be a matrix (or 0-d)" in hvp.message and "`.item()`" in hvp.message


def test_an_index_out_of_bounds_in_hvp_gets_the_matrix_hint():
    def vector_only(f, x, v):
        x = x.detach().requires_grad_()
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        return torch.autograd.grad(sum(g[i] * v[i] for i in range(x.numel())), x)[0]

    result = check_hvp(vector_only)
    assert "out of bounds" in result.message and "`x` may be a matrix" in result.message


def _shapes_cell(tag):
    """The set-up cell of a shapes exercise, as a function: each call is a re-run of it."""
    return {
        f"x.T, x: (2, 3) [{tag}]": (lambda x: x.T, torch.randn(2, 3)),
        f"(x * x).sum(1), x: (4, 2) [{tag}]": (lambda x: (x * x).sum(1), torch.randn(4, 2)),
    }


def test_a_problem_changed_then_set_up_again_is_judged_as_first_set_up():
    from autograd_helpers.checks import set_up_jacobian_shapes

    problems = _shapes_cell("mutated")
    set_up_jacobian_shapes(problems)  # the notebook's cell
    problems["x.T, x: (2, 3) [mutated]"] = (lambda x: x.sum(0), torch.randn(2, 3))
    set_up = set_up_jacobian_shapes(problems)  # the learner's answer cell
    result = check_jacobian_shapes([(3, 2, 3), (4, 4, 2)], problems, set_up=set_up)
    assert result.status == "failed", result.message
    assert "'x.T, x: (2, 3) [mutated]' was changed (another function)" in result.title
    assert "1 of 2 shapes are off" in result.title
    assert "you said (3, 2, 3); it is (3, 2, 2, 3)" in result.message


def test_a_problem_replaced_in_a_new_dict_then_set_up_again_is_said():
    from autograd_helpers.checks import set_up_jacobian_shapes

    problems = _shapes_cell("rebuilt")
    set_up_jacobian_shapes(problems)
    key = "(x * x).sum(1), x: (4, 2) [rebuilt]"
    problems = {**problems, key: (lambda x: x * x, torch.randn(4, 2))}
    result = check_jacobian_shapes(
        [(3, 2, 2, 3), (4, 2, 4, 2)], problems, set_up=set_up_jacobian_shapes(problems)
    )
    assert result.status == "failed" and f"{key!r} was changed" in result.title, result.message


def test_a_problem_added_or_an_input_changed_in_place_then_set_up_again_is_said():
    from autograd_helpers.checks import set_up_jacobian_shapes

    problems = _shapes_cell("added")
    set_up_jacobian_shapes(problems)
    problems["x.sum(0), x: (2, 3) [mine]"] = (lambda x: x.sum(0), torch.randn(2, 3))
    set_up = set_up_jacobian_shapes(problems)
    added = check_jacobian_shapes([(3, 2, 2, 3), (4, 4, 2), (3, 2, 3)], problems, set_up=set_up)
    assert "has a problem it did not set up, 'x.sum(0), x: (2, 3) [mine]'" in added.title
    assert "ran again after the change" in added.message

    problems = _shapes_cell("in place")
    set_up_jacobian_shapes(problems)
    problems["x.T, x: (2, 3) [in place]"][1].mul_(2)
    set_up = set_up_jacobian_shapes(problems)
    result = check_jacobian_shapes([(3, 2, 2, 3), (4, 4, 2)], problems, set_up=set_up)
    assert not result.passed and "changed in place" in result.title, result.message


def test_the_same_function_is_one_made_from_the_same_code_and_like_closures():
    from autograd_helpers.checks.jacobians._shapes_setup import same_function

    def made(dim):
        return lambda x: x.sum(dim)

    assert same_function(made(0), made(0)) and not same_function(made(0), made(1))
    assert same_function(torch.sum, torch.sum) and not same_function(torch.sum, torch.mean)
    assert not same_function(lambda x: x.T, lambda x: x.sum(0))


def test_the_set_up_cell_run_again_is_no_change():
    from autograd_helpers.checks import set_up_jacobian_shapes

    set_up_jacobian_shapes(_shapes_cell("again"))
    problems = _shapes_cell("again")  # new lambdas, new random inputs: the same problems
    set_up = set_up_jacobian_shapes(problems)
    result = check_jacobian_shapes([(3, 2, 2, 3), (4, 4, 2)], problems, set_up=set_up)
    assert result.passed, result.message
