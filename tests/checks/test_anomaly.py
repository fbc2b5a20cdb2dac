"""Chapter 04's checkers: NaN-free losses and training steps without in-place errors."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest
import torch

import autograd_helpers as ah
from autograd_helpers.checks import (
    check_finite_gradients,
    check_function,
    check_safe_backward,
    check_training_step,
)
from autograd_helpers.checks.anomaly._hidden import HIDDEN_NAN_HINT

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04_anomaly_mode.ipynb"


def mean_radius(points):
    return torch.sqrt((points**2).sum(dim=1)).mean()


AT_ORIGIN = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, -1.0]])
REGULAR = [torch.tensor([[1.0, 2.0], [3.0, -4.0]])]


def check(fn):
    return check_finite_gradients(fn, AT_ORIGIN, reference=mean_radius, regular=REGULAR)


@pytest.mark.parametrize(
    "answer",
    [
        lambda p: torch.linalg.vector_norm(p, dim=1).mean(),
        lambda p: torch.linalg.vector_norm(p.double(), dim=1).mean(),
        lambda p: torch.where(
            (p**2).sum(1) > 0,
            torch.sqrt(torch.where((p**2).sum(1) > 0, (p**2).sum(1), torch.ones(len(p)))),
            torch.zeros(len(p)),
        ).mean(),
    ],
    ids=["vector_norm", "float64", "double-where"],
)
def test_right_fixes_pass(answer):
    assert check(answer).passed, check(answer).message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (mean_radius, "still contains NaN or inf"),
        (lambda p: (torch.sqrt((p**2).sum(dim=1)) + 1e-6).mean(), "still contains NaN"),
        (lambda p: torch.sqrt((p**2).sum(dim=1) + 1.0).mean(), "its value is"),
        (lambda p: torch.sqrt((p**2).sum(dim=1)).detach().mean() * 1, "does not"),
        (lambda p: torch.linalg.vector_norm(p, dim=1).detach().mean(), ""),
        (lambda p: torch.nan_to_num(mean_radius(p)), "replaces NaN with `nan_to_num`"),
        # An epsilon or a clamp under the root (the fix anomaly's hint once suggested) is
        # finite at the origin but changes the gradient near it: [1, 0] becomes [0.707, 0].
        (lambda p: torch.sqrt((p**2).sum(dim=1) + 1e-12).mean(), "near the singular point"),
        (lambda p: torch.sqrt((p**2).sum(dim=1).clamp(min=1e-12)).mean(), "An epsilon"),
        (..., "not implemented yet"),
    ],
    ids=[
        "unchanged",
        "eps-outside",
        "big-eps",
        "detached-1",
        "detached-2",
        "nan_to_num",
        "epsilon",
        "clamp",
        "stub",
    ],
)
def test_wrong_fixes_fail(answer, phrase):
    result = check(answer)
    assert not result.passed, result.message
    assert phrase in result.message, result.message


def train_step(w, x, target):
    hidden = torch.tanh(x @ w)
    hidden += 0.5
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    return loss


def make_inputs():
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(3, 2, generator=generator).requires_grad_()
    return w, torch.randn(5, 3, generator=generator), torch.rand(5, 2, generator=generator)


def fixed(w, x, target):
    hidden = torch.tanh(x @ w) + 0.5
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    return loss


def fixed_with_clone(w, x, target):
    hidden = torch.tanh(x @ w).clone()
    hidden += 0.5
    loss = ((hidden - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, w)
    with torch.no_grad():
        w.sub_(0.1 * grad)
    return loss


def forgets_to_reset_grad(w, x, target):
    hidden = torch.tanh(x @ w) + 0.5
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    return loss


def shifts_after_the_loss(w, x, target):
    hidden = torch.tanh(x @ w)
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    return loss


@pytest.mark.parametrize("answer", [fixed, fixed_with_clone])
def test_right_training_steps_pass(answer):
    result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
    assert result.passed, result.message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (train_step, "modified by an inplace operation"),
        (forgets_to_reset_grad, "after step 2 parameter 0 (`w`) differs"),  # seen in the update
        (shifts_after_the_loss, "after step 1 the loss is"),
        (lambda w, x, t: None, "returned None"),
        (..., "not implemented yet"),
    ],
    ids=["unchanged", "no-reset", "no-shift", "no-loss", "stub"],
)
def test_wrong_training_steps_fail(answer, phrase):
    result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
    assert not result.passed and phrase in result.message, result.message


# --- exercise 1: points beside the singular one, and what the loss returned -------------------


def masks_each_coordinate(p):
    safe = torch.where(p == 0, torch.ones_like(p), p)
    squared = (p**2).sum(dim=1)
    return torch.where(
        squared > 0, torch.sqrt((safe**2).sum(dim=1)), torch.zeros_like(squared)
    ).mean()


def any_zero_is_the_origin(p):
    bad = (p == 0).any(dim=1)
    safe = torch.where(bad[:, None], torch.ones_like(p), p)
    return torch.where(bad, torch.zeros(()), torch.sqrt((safe**2).sum(dim=1))).mean()


@pytest.mark.parametrize("answer", [masks_each_coordinate, any_zero_is_the_origin])
def test_a_fix_that_masks_too_much_fails_beside_the_singular_point(answer):
    result = check(answer)
    assert not result.passed, result.message
    assert "at the regular point [[0, 2], [3, -4]] its value is" in result.message
    assert "treat too much as the singular point" in result.message


def test_the_double_where_on_the_squared_length_still_passes():
    def double_where(p):
        r2 = (p * p).sum(-1)
        return torch.where(r2 == 0, 0.0, r2.where(r2 != 0, 1.0).sqrt()).mean()

    assert check(double_where).passed


@pytest.mark.parametrize(
    ("answer", "phrases"),
    [
        (
            lambda p: torch.linalg.vector_norm(p, dim=1),
            ["returned a tensor of shape (3,)", "the original's shape is ()", "`.mean()`"],
        ),
        (
            lambda p: torch.sqrt((p**2).sum(dim=1).detach()).mean(),
            ["does not require grad", "not connected to the input", "`.detach()`"],
        ),
        (
            lambda p: float(torch.linalg.vector_norm(p, dim=1).mean().detach()),
            ["returned a Python float, not a tensor", "`.item()`"],
        ),
    ],
    ids=["no-mean", "detached", "float"],
)
def test_what_the_loss_returned_is_named(answer, phrases):
    result = check(answer)
    assert not result.passed and "raised an exception" not in result.message, result.message
    for phrase in phrases:
        assert phrase in result.message, result.message


# --- exercise 2: the classic causes of a wrong update ----------------------------------------


def scaled_step(sign, rate):
    def step(w, x, target):
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= sign * rate * w.grad
        w.grad = None
        return loss

    return step


def rebinds(w, x, target):
    loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
    loss.backward()
    w = (w - 0.1 * w.grad).detach().requires_grad_()
    return loss


def returns_the_next_loss(w, x, target):
    loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
    w.grad = None
    return loss


def hides_the_change(w, x, target):
    hidden = torch.tanh(x @ w)
    hidden.data += 0.5  # the gradient silently uses tanh + 0.5
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    return loss


def detaches(w, x, target):
    hidden = torch.tanh(x @ w).detach() + 0.5
    loss = ((hidden - target) ** 2).mean()
    loss.backward()
    return loss


@pytest.mark.parametrize(
    ("answer", "phrases"),
    [
        (
            forgets_to_reset_grad,
            ["after step 2 parameter 0 (`w`) differs", "accumulate in `.grad`"],
        ),
        (scaled_step(-1, 0.1), ["after step 1 parameter 0", "wrong way, uphill"]),
        (scaled_step(1, 0.01), ["0.1 times the right one", "learning rate"]),
        (rebinds, ["did not change the parameters", "only rebinds a local name"]),
        (returns_the_next_loss, ["after step 1 the loss is", "loss after this step's update"]),
        (shifts_after_the_loss, ["after step 1 the loss is", "forward computation"]),
        (hides_the_change, ["the loss matched but the update did not", "`.data`"]),
        (detaches, ["does not require grad", "not connected to the parameters"]),
        (lambda w, x, t: (fixed(w, x, t), w), ["returned a tuple", "return the loss alone"]),
    ],
    ids=[
        "accumulates",
        "sign",
        "rate",
        "rebinds",
        "next-loss",
        "no-shift",
        "data",
        "detach",
        "tuple",
    ],
)
def test_a_wrong_step_gets_its_likely_cause(answer, phrases):
    result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
    assert not result.passed, result.message
    for phrase in phrases:
        assert phrase in result.message, result.message


def test_right_steps_with_an_optimizer_or_autograd_grad_pass():
    def with_sgd(w, x, target):
        optimizer = torch.optim.SGD([w], lr=0.1)
        optimizer.zero_grad()
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    def with_mse(w, x, target):
        loss = torch.nn.functional.mse_loss(torch.tanh(x @ w), target - 0.5)
        (g,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w.sub_(0.1 * g)
        return loss.detach()

    def returns_a_number(w, x, target):  # the loss as a Python float means the same
        return fixed(w, x, target).item()

    for answer in (with_sgd, with_mse, returns_a_number):
        result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
        assert result.passed, result.message


# --- exercise 3: SafeSinc is checked beside 0 as well as at 0 --------------------------------

# The inputs chapter 04 gives `check_function` for SafeSinc: 0, and points near it on both
# sides, where a backward that is only safe because it is zero around 0 shows.
SINC_POINTS = torch.tensor([-2.0, -0.3, -0.05, -1e-3, 0.0, 1e-3, 0.05, 0.5, 3.0])


class Sinc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        safe = torch.where(x == 0, torch.ones_like(x), x)
        return torch.where(x == 0, torch.ones_like(x), torch.sin(safe) / safe)


def sinc_with(derivative):
    class SafeSinc(Sinc):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * derivative(x)

    return SafeSinc


def _formula(x):
    return (x * torch.cos(x) - torch.sin(x)) / x**2


def _masked(x, near, value):
    safe = torch.where(near, torch.ones_like(x), x)
    return torch.where(near, value, _formula(safe))


SINC_RIGHT = {
    "double-where": lambda x: _masked(x, x == 0, torch.zeros_like(x)),
    "single-where": lambda x: torch.where(x == 0, torch.zeros_like(x), _formula(x)),
    "masked_fill": lambda x: _formula(x).masked_fill(x == 0, 0.0),
    "epsilon": lambda x: (x * torch.cos(x) - torch.sin(x)) / (x**2 + 1e-30),
    "taylor-1e-2": lambda x: _masked(x, x.abs() < 1e-2, -x / 3),
    "taylor-two-terms-1e-2": lambda x: _masked(x, x.abs() < 1e-2, -x / 3 + x**3 / 30),
}
SINC_WRONG = {
    "zero-near-0.1": lambda x: _masked(x, x.abs() < 0.1, torch.zeros_like(x)),
    "zero-near-1e-2": lambda x: _masked(x, x.abs() < 1e-2, torch.zeros_like(x)),
    "big-epsilon": lambda x: (x * torch.cos(x) - torch.sin(x)) / (x**2 + 1e-2),
    "taylor-too-wide": lambda x: _masked(x, x.abs() < 1, -x / 3),
    # float64 shows the truncation: x³/30 is 2.5e-4 of the gradient at 0.05, x⁵/840 3e-5 at 0.5
    "taylor-0.1": lambda x: _masked(x, x.abs() < 0.1, -x / 3),
    "taylor-two-terms-0.5": lambda x: _masked(x, x.abs() < 0.5, -x / 3 + x**3 / 30),
}


def check_sinc(answer):
    return check_function(answer, SINC_POINTS, reference=lambda t: torch.sinc(t / math.pi))


def check_safe_sinc(answer):
    """As the notebook's check cell does, with the chapter's own judgement around it."""
    return check_safe_backward(answer, SINC_POINTS, reference=lambda t: torch.sinc(t / math.pi))


@pytest.mark.parametrize("name", SINC_RIGHT)
def test_right_safe_sinc_backwards_pass_beside_0(name):
    result = check_sinc(sinc_with(SINC_RIGHT[name]))
    assert result.passed, result.message


@pytest.mark.parametrize("name", SINC_WRONG)
def test_a_safe_sinc_backward_wrong_beside_0_fails(name):
    result = check_sinc(sinc_with(SINC_WRONG[name]))
    assert not result.passed and "the gradient for `x` is off" in result.message, result.message


def test_the_notebooks_safe_sinc_check_looks_beside_0():
    # The chapter's own checker cell, run on a backward that is zero for |x| < 0.1.
    cells = [
        "".join(cell["source"])
        for cell in json.loads(NOTEBOOK.read_text())["cells"]
        if cell["cell_type"] == "code"
    ]
    (source,) = [c for c in cells if "check_safe_backward(" in c and "SafeSinc" in c]
    tree = ast.parse(source)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "the checker cell ends with the check"
    namespace = {"torch": torch, "ah": ah, "SafeSinc": sinc_with(SINC_WRONG["zero-near-0.1"])}
    exec(compile(tree, "checker cell", "exec"), namespace)
    result = eval(compile(ast.Expression(last.value), "checker cell", "eval"), namespace)
    assert not result.passed, "the notebook's SafeSinc check has no point near 0 but 0 itself"


# --- exercise 1: the task, find_nan_origin's hint and the checker agree (issue 20) -----------


def test_the_fix_find_nan_origin_suggests_passes_the_check():
    origin = ah.anomaly.find_nan_origin(mean_radius, AT_ORIGIN)
    assert "torch.linalg.vector_norm" in origin.message
    (fix,) = re.findall(r"`(torch\.where\(x > 0, .*?)`", origin.message)

    def as_suggested(points):
        return eval(fix, {"torch": torch, "x": (points**2).sum(dim=1)}).mean()

    assert check(as_suggested).passed, check(as_suggested).message


def test_an_epsilon_under_the_root_is_judged_near_the_origin():
    # At [[1e-6, 0], ...] the true gradient of the first point is [1, 0] / 3; sqrt(r² + 1e-12)
    # gives [0.707, 0] / 3 there.
    result = check(lambda p: torch.sqrt((p**2).sum(dim=1) + 1e-12).mean())
    assert "near the singular point, at [[1e-06, 0], [3, 4], [1, -1]]" in result.message
    assert "yours 0.2357, original 0.3333" in result.message


def test_the_callers_tensors_are_left_as_they_were():
    points, regular = AT_ORIGIN.clone(), [REGULAR[0].clone()]

    def hooks_and_writes(p):
        p.register_hook(torch.nan_to_num)
        with torch.no_grad():
            p.add_(0.0)
        return torch.linalg.vector_norm(p, dim=1).mean()

    result = check_finite_gradients(
        hooks_and_writes, points, reference=mean_radius, regular=regular
    )
    assert not result.passed
    assert torch.equal(points, AT_ORIGIN) and not points.requires_grad
    assert points._backward_hooks is None and torch.equal(regular[0], REGULAR[0])


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda: check_finite_gradients(len, AT_ORIGIN, reference=mean_radius, regular=REGULAR[0]),
         TypeError, "regular"),
        (lambda: check_finite_gradients(len, AT_ORIGIN, reference=mean_radius, regular=[]),
         ValueError, "regular"),
        (lambda: check_finite_gradients(len, REGULAR[0], reference=mean_radius, regular=REGULAR),
         ValueError, "inputs"),
        (lambda: check_finite_gradients(len, AT_ORIGIN.long(), reference=mean_radius,
                                        regular=REGULAR), TypeError, "inputs[0]"),
        (lambda: check_finite_gradients(len, AT_ORIGIN, reference=lambda p: p.sum(1),
                                        regular=REGULAR), TypeError, "reference"),
        (lambda: check_finite_gradients(len, AT_ORIGIN, reference=lambda p: 1 / 0,
                                        regular=REGULAR), ValueError, "reference raised"),
    ],
    ids=["regular-bare", "regular-count", "not-singular", "integer", "no-loss", "raises"],
)  # fmt: skip
def test_a_wrong_setup_is_the_callers_mistake(call, error, named):
    with pytest.raises(error, match=re.escape(named)):
        call()


# --- exercise 2: probes, backward passes, containment, the caller's mistakes ------------------


def test_a_step_is_probed_beyond_the_example():
    def hard_codes_the_batch(w, x, target):
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).sum() / 10
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
        return loss

    result = check_training_step(
        hard_codes_the_batch, reference=train_step, make_inputs=make_inputs
    )
    assert "with a batch of 3 rows (a probe beyond the example's 5)" in result.message


def test_backward_passes_are_counted_and_judged():
    def twice(w, x, target):
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
        torch.autograd.grad(loss, w, retain_graph=True)
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
        return loss

    result = check_training_step(twice, reference=train_step, make_inputs=make_inputs)
    assert "ran 2 backward passes; a step needs one" in result.message


def test_a_gradient_by_hand_passes_with_a_note():
    def by_hand(w, x, target):
        with torch.no_grad():
            hidden = torch.tanh(x @ w)
            residual = hidden + 0.5 - target
            loss = (residual**2).mean()
            grad = x.T @ (2 * residual * (1 - hidden**2) / residual.numel())
            w -= 0.1 * grad
        return loss

    result = check_training_step(by_hand, reference=train_step, make_inputs=make_inputs)
    assert result.passed and "saw no backward pass" in result.message, result.message


def test_make_inputs_tensors_are_never_handed_to_the_step():
    made = make_inputs()

    def step(w, x, target):
        assert w is not made[0] and x is not made[1]
        return fixed(w, x, target)

    result = check_training_step(step, reference=train_step, make_inputs=lambda: made)
    assert result.passed, result.message
    assert torch.equal(made[0], make_inputs()[0]) and made[0].grad is None


@pytest.mark.parametrize(
    ("make", "reference", "error", "named"),
    [
        (lambda: [1.0, 2.0], train_step, TypeError, "make_inputs"),
        (lambda: (torch.ones(3, 2), torch.ones(5, 3), torch.ones(5, 2)), train_step,
         ValueError, "requires_grad"),
        (make_inputs, lambda w, x, t: 1 / 0, ValueError, "reference raised"),
        (make_inputs, lambda w, x, t: (x @ w) - t, TypeError, "reference"),
    ],
    ids=["not-tensors", "no-parameters", "reference-raises", "reference-unreduced"],
)  # fmt: skip
def test_a_wrong_training_setup_is_the_callers_mistake(make, reference, error, named):
    with pytest.raises(error, match=re.escape(named)):
        check_training_step(fixed, reference=reference, make_inputs=make)


# --- a NaN hidden with nan_to_num fails both NaN exercises, in the same words


def _radius_hook_on_input(p):
    p.register_hook(torch.nan_to_num)
    return mean_radius(p)


def _radius_hook_inside(p):
    squared = (p**2).sum(dim=1)
    squared.register_hook(lambda g: g.nan_to_num(0.0))
    return torch.sqrt(squared).mean()


@pytest.mark.parametrize(
    ("answer", "where"),
    [
        (lambda p: torch.nan_to_num(mean_radius(p)), "in its forward"),
        (lambda p: torch.sqrt((p**2).sum(dim=1)).nan_to_num_().mean(), "in its forward"),
        (_radius_hook_on_input, "in a gradient hook"),
        (_radius_hook_inside, "in a gradient hook"),
    ],
    ids=["on-the-loss", "in-place", "hook-on-the-input", "hook-inside"],
)
def test_nan_to_num_fails_safe_mean_radius_in_the_shared_words(answer, where):
    result = check(answer)
    assert result.status == "failed", result.message
    assert f"it replaces NaN with `nan_to_num` ({where})" in result.title, result.message
    assert HIDDEN_NAN_HINT in result.details, result.message


@pytest.mark.parametrize(
    "derivative",
    [
        lambda x: torch.nan_to_num(_formula(x), nan=0.0),
        lambda x: _formula(x).nan_to_num(),
    ],
    ids=["nan_to_num", "method"],
)
def test_nan_to_num_fails_safe_sinc_in_the_same_words(derivative):
    assert check_sinc(sinc_with(derivative)).passed  # check_function alone: 0 is right at 0
    result = check_safe_sinc(sinc_with(derivative))
    assert result.status == "failed", result.message
    assert "it replaces NaN with `nan_to_num` (in its backward)" in result.title, result.message
    assert HIDDEN_NAN_HINT in result.details, result.message


# --- containers the learner's code changes are a verdict, said in plain words, put back

SEEN: list[object] = []
COUNTS: dict[str, int] = {"calls": 0}


def _radius_appending(p):
    SEEN.append(p)
    return torch.linalg.vector_norm(p, dim=1).mean()


def _radius_counting(p):
    COUNTS["calls"] += 1
    return torch.linalg.vector_norm(p, dim=1).mean()


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (_radius_appending, "the global list `SEEN` (0 items before the call, 1 after)"),
        (_radius_counting, "the global dict `COUNTS`"),
    ],
    ids=["list", "dict"],
)
def test_a_loss_that_changes_a_global_container_fails(answer, phrase):
    result = check(answer)  # passed silently before: the change was put back without a word
    assert result.status == "failed" and phrase in result.message, result.message
    assert SEEN == [] and COUNTS == {"calls": 0}


def test_a_step_that_changes_a_global_container_fails():
    def logging_step(w, x, target):
        SEEN.append(1)
        return fixed(w, x, target)

    result = check_training_step(logging_step, reference=train_step, make_inputs=make_inputs)
    assert result.status == "failed", result.message
    assert "the global list `SEEN` (0 items before the call, 1 after)" in result.message
    assert SEEN == []


class RememberingSinc(Sinc):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        SEEN.append(x)  # check_function left the list changed, and passed
        return grad_output * _masked(x, x.abs() < 1e-4, -x / 3)


def test_a_safe_sinc_that_changes_a_global_container_fails():
    result = check_safe_sinc(RememberingSinc)
    assert result.status == "failed", result.message
    assert "the global list `SEEN` (0 items before the call, 1 after)" in result.message
    assert SEEN == []


def test_a_clamp_at_tiny_fails_where_the_square_is_subnormal():
    def clamped(p):
        squared = (p**2).sum(dim=1)
        return torch.sqrt(squared.clamp(min=torch.finfo(squared.dtype).tiny)).mean()

    result = check(clamped)  # passed before: no probe had a subnormal square
    assert result.status == "failed" and "[[1e-20, 0]" in result.message, result.message


# --- the fresh-eyes audit: each of these passed before ----------------------------------


class RadiusKeepingTheFinite(torch.autograd.Function):
    @staticmethod
    def forward(ctx, p):
        r = torch.sqrt((p**2).sum(dim=1))
        ctx.save_for_backward(p, r)
        return r

    @staticmethod
    def backward(ctx, g):
        p, r = ctx.saved_tensors
        d = p / r[:, None]
        return g[:, None] * torch.where(torch.isfinite(d), d, 0)


@pytest.mark.parametrize(
    "derivative",
    [
        lambda x: torch.where(_formula(x).isnan(), torch.zeros_like(x), _formula(x)),
        lambda x: _formula(x).masked_fill(~torch.isfinite(_formula(x)), 0.0),
        lambda x: torch.where(torch.isfinite(_formula(x)), _formula(x), 0),
    ],
    ids=["where-isnan", "masked_fill-isfinite", "where-isfinite"],
)
def test_a_nan_selected_away_fails_sinc_in_the_words_of_nan_to_num(derivative):
    result = check_safe_sinc(sinc_with(derivative))
    assert not result.passed
    assert "selecting on a NaN test" in result.title
    assert HIDDEN_NAN_HINT in result.details


def test_a_nan_selected_away_fails_the_radius_in_the_same_words():
    result = check(lambda p: RadiusKeepingTheFinite.apply(p).mean())
    assert "selecting on a NaN test" in result.title and "in its backward" in result.title
    assert HIDDEN_NAN_HINT in result.details


def test_g_ne_g_assignment_is_a_nan_test():
    def derivative(x):
        g = _formula(x)
        g[g != g] = 0
        return g

    assert "selecting on a NaN test" in check_safe_sinc(sinc_with(derivative)).title


def test_a_guard_at_0_computed_in_float64_fails_where_float64_squares_underflow():
    def derivative(x):
        xd = x.double()
        return _masked(xd, xd == 0, torch.zeros_like(xd)).to(x.dtype)

    result = check_safe_sinc(sinc_with(derivative))
    assert not result.passed and "where x² underflows" in result.title, result.message
    assert check_safe_sinc(sinc_with(SINC_RIGHT["taylor-two-terms-1e-2"])).passed


def test_a_safe_sinc_is_held_near_0_to_the_derivatives_own_size():
    # near 0 an absolute tolerance lets 0 pass where the truth is -x/3: tiny, not 0
    epsilon = check_safe_sinc(sinc_with(SINC_RIGHT["epsilon"]))
    assert not epsilon.passed and "at x = 1e-08 is 0" in epsilon.title, epsilon.message
    one_term = check_safe_sinc(sinc_with(SINC_RIGHT["taylor-1e-2"]))
    assert not one_term.passed and "Add the next term" in one_term.message, one_term.message


def test_autograd_inside_backward_fails_with_the_hint_to_write_the_derivative():
    class Detour(Sinc):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                t = x.detach().requires_grad_()
                (d,) = torch.autograd.grad(torch.sinc(t / math.pi), t, grad_output)
            return d

    result = check_safe_sinc(Detour)
    assert not result.passed and "write the derivative" in result.message


def _norm(p):
    return torch.linalg.vector_norm(p, dim=1).mean()


def draws(p):
    torch.randn(1)
    return _norm(p)


def reseeds(p):
    torch.manual_seed(0)
    return _norm(p)


def same_threads(p):
    torch.set_num_threads(torch.get_num_threads())
    return _norm(p)


def flushes(p):
    torch.set_flush_denormal(True)
    return _norm(p)


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (draws, "drew random numbers"),
        (reseeds, "reseeded torch's random generator"),
        (same_threads, "`torch.set_num_threads`"),
        (flushes, "`torch.set_flush_denormal`"),
        (lambda p: _norm(p).reshape(1), "0-dim tensor, shape ()"),
    ],
    ids=["randn", "manual_seed", "set_num_threads", "flush_denormal", "shape-(1,)"],
)
def test_global_calls_and_a_one_element_shape_are_verdicts(answer, phrase):
    state, seed = torch.get_rng_state(), torch.initial_seed()
    result = check(answer)
    assert not result.passed and phrase in result.message, result.message
    assert torch.equal(torch.get_rng_state(), state) and torch.initial_seed() == seed
    assert float(torch.tensor([1e-39]) * 1.0) != 0  # flush-denormal put back


def test_flush_denormal_left_on_by_the_notebook_is_said_not_blamed_on_the_answer():
    torch.set_flush_denormal(True)
    try:
        result = check(_norm)
    finally:
        torch.set_flush_denormal(False)
    assert "flush-denormal is on in this notebook" in result.title
    assert "near" not in result.title


seen: list[torch.Tensor] = []
store = {"seen": seen}


def _remember(t):
    seen.append(t)


def through_an_alias(p):
    store["seen"].append(p)
    return _norm(p)


def through_a_helper(p):
    _remember(p)
    return _norm(p)


@pytest.mark.parametrize("answer", [through_an_alias, through_a_helper])
def test_a_global_list_changed_by_a_route_the_code_does_not_name(answer):
    result = check(answer)
    assert "the global list `seen`" in result.message, result.message
    assert seen == []


def counts_its_steps(w, x, target):
    counts_its_steps.steps = getattr(counts_its_steps, "steps", 0) + 1
    return fixed(w, x, target)


def with_a_tiny_dropout(w, x, target):
    return fixed(w, torch.nn.functional.dropout(x, p=1e-9), target)


def by_hand_in_float32(w, x, target):
    z = x @ w
    hidden = torch.tanh(z) + 0.5
    loss = ((hidden - target) ** 2).mean()
    with torch.no_grad():
        dz = 2 * (hidden - target) / hidden.numel() * (1 - torch.tanh(z) ** 2)
        w -= 0.1 * (x.T @ dz).float()
    return loss


def by_hand(w, x, target):
    z = x @ w
    hidden = torch.tanh(z) + 0.5
    loss = ((hidden - target) ** 2).mean()
    with torch.no_grad():
        w -= 0.1 * (x.T @ (2 * (hidden - target) / hidden.numel() * (1 - torch.tanh(z) ** 2)))
    return loss


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (counts_its_steps, "set the attribute `counts_its_steps.steps`"),
        (with_a_tiny_dropout, "drew random numbers"),
        (by_hand_in_float32, "float32's digits"),
    ],
    ids=["attribute", "dropout", "float32-by-hand"],
)
def test_training_steps_from_the_audit_fail(answer, phrase):
    result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
    assert not result.passed and phrase in result.message, result.message
    assert not hasattr(counts_its_steps, "steps")


def test_a_gradient_by_hand_in_float64_passes():
    result = check_training_step(by_hand, reference=train_step, make_inputs=make_inputs)
    assert result.passed, result.message


def keeps_batches_in_a_default(points, _seen=[]):  # noqa: B006 -- the mistake under test
    _seen.append(points)
    return _norm(points)


state = {"seen": []}


def into_a_list_in_a_dict(points):
    state["seen"].append(points)
    return _norm(points)


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (keeps_batches_in_a_default, "the default list `_seen` of keeps_batches_in_a_default"),
        (into_a_list_in_a_dict, "the global list `state['seen']`"),
    ],
    ids=["default-argument", "nested-in-a-dict"],
)
def test_containers_reached_by_the_shared_deep_containment(answer, phrase):
    result = check(answer)
    assert phrase in result.message, result.message
    assert keeps_batches_in_a_default.__defaults__ == ([],) and state == {"seen": []}


# --- issue 25: probes that bite, and update rules told from wrong gradients -----------------


def _gradient_norm(inputs):
    w, x, target = (t.detach().clone() for t in inputs)
    w.requires_grad_()
    loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, w)
    return float(grad.norm())


def test_one_probe_has_a_gradient_well_above_a_clip_of_1():
    from autograd_helpers.checks.anomaly._settings import probe_settings

    example = make_inputs()
    settings = probe_settings(example)
    (large,) = [s for s in settings if s.kind == "large"]
    assert _gradient_norm(example) < 1 and _gradient_norm(large.inputs) > 20


def test_the_float64_probe_holds_digits_float32_cannot():
    from autograd_helpers.checks.anomaly._settings import probe_settings

    (in64,) = [s for s in probe_settings(make_inputs()) if s.kind == "float64"]
    for t in in64.inputs:
        assert t.dtype == torch.float64 and bool((t.float().double() != t).all())
    assert in64.inputs[0].requires_grad and not in64.inputs[1].requires_grad


def step_with(update):
    """The right forward and backward, then ``update(w)`` in place of the original's update."""

    def step(w, x, target):
        loss = ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()
        loss.backward()
        update(w)
        w.grad = None
        return loss

    return step


def _sgd(w):
    with torch.no_grad():
        w -= 0.1 * w.grad


def _clipped_norm(w):
    torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    _sgd(w)


def _norm_capped_by_hand(w):
    with torch.no_grad():
        w -= 0.1 * w.grad * min(1.0, 1.0 / float(w.grad.norm()))


def _clamped(w):
    with torch.no_grad():
        w -= 0.1 * w.grad.clamp(-0.1, 0.1)  # binds at the example already, on some entries


def _optimizer(kind, **options):
    def update(w):
        kind([w], lr=0.1, **options).step()

    return update


def _with_float32_rate(w):
    with torch.no_grad():
        w -= torch.tensor(0.1) * w.grad  # 0.1 rounded to float32


@pytest.mark.parametrize(
    ("update", "phrases"),
    [
        (_clipped_norm, ["where the gradient is large", "`torch.nn.utils.clip_grad_norm_`"]),
        (_norm_capped_by_hand, ["where the gradient is large", "norm is capped"]),
        (_clamped, ["each entry capped at ±0.01", "a clamp of the gradient"]),
        (_optimizer(torch.optim.Adam), ["`torch.optim.Adam`", "the same amount (0.1)"]),
        (_optimizer(torch.optim.RMSprop), ["`torch.optim.RMSprop`"]),
        (_optimizer(torch.optim.SGD, weight_decay=0.01), ["weight decay"]),
        (_with_float32_rate, ["float32's digits", "7th digit"]),
    ],
    ids=["clip_grad_norm_", "norm-by-hand", "clamp", "adam", "rmsprop", "decay", "float32-rate"],
)
def test_another_update_rule_is_named_not_blamed_on_the_gradient(update, phrases):
    result = check_training_step(step_with(update), reference=train_step, make_inputs=make_inputs)
    assert not result.passed, result.message
    assert "not the one the step means" not in result.message, result.message
    for phrase in phrases:
        assert phrase in result.message, result.message


def test_a_clip_that_never_binds_and_a_fresh_momentum_pass():
    loose = step_with(lambda w: (torch.nn.utils.clip_grad_norm_([w], 1e6), _sgd(w)))
    momentum = step_with(_optimizer(torch.optim.SGD, momentum=0.9))  # its first step is SGD's
    for step in (loose, momentum):
        result = check_training_step(step, reference=train_step, make_inputs=make_inputs)
        assert result.passed and "a large gradient" in result.message, result.message


def test_the_update_hint_explains_the_whole_update_or_blames_the_gradient():
    from autograd_helpers.checks.anomaly._updates import WRONG_GRADIENT, Update, update_hint

    meant = [torch.tensor([-0.3, 0.02, 0.2, -0.05], dtype=torch.float64)]
    before = [torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)]
    cases = {
        "capped at ±0.1": meant[0].clamp(-0.1, 0.1),
        "the same amount (0.01)": 0.01 * meant[0].sign(),
        "0.5 times the right one: check the learning rate": 0.5 * meant[0],
        "weight decay": meant[0] - 0.001 * before[0],
    }
    for phrase, moved in cases.items():
        assert phrase in update_hint(Update([moved], meant, before)), phrase
    corrupted = meant[0] * torch.tensor([1.1, 0.7, 1.0, 1.3], dtype=torch.float64)
    assert update_hint(Update([corrupted], meant, before)) == WRONG_GRADIENT
    scaled = Update([0.5 * meant[0]], meant, before, large=True)  # only where it is large
    assert "norm is capped" in update_hint(scaled)
    # the gradient divided by its norm: a factor only the reference's gradient tells apart
    gradient = [-meant[0] / 0.1]  # the original steps by -0.1 * gradient
    unit = -0.1 * gradient[0] / gradient[0].norm()
    normalised = update_hint(Update([unit], meant, before, gradient=gradient))
    assert "your step has norm 0.1, the learning rate, whatever the gradient" in normalised
    assert "check the learning rate" in update_hint(
        Update([2.5 * meant[0]], meant, before, gradient=gradient)
    )


def test_optimizer_rules_reads_nesterov_from_the_optimizer_and_leaves_no_hook():
    from torch.optim.optimizer import _global_optimizer_pre_hooks

    from autograd_helpers.checks.anomaly._updates import optimizer_rules

    hooks = len(_global_optimizer_pre_hooks)
    w = torch.ones(2, requires_grad=True)
    with optimizer_rules() as rules:
        for settings in ({}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True}):
            w.grad = torch.ones(2)
            torch.optim.SGD([w], lr=0.1, **settings).step()
    assert len(rules) == 1 and "momentum=0.9 and nesterov=True" in rules[0], rules
    assert len(_global_optimizer_pre_hooks) == hooks


@pytest.mark.parametrize(
    "answer",
    [
        lambda p: torch.linalg.vector_norm(p.float(), dim=1).mean(),
        lambda p: torch.linalg.vector_norm(p.float(), dim=1).mean().to(p.dtype),
        lambda p: torch.linalg.vector_norm(p.float(), dim=1).double().mean(),
    ],
    ids=["float32-loss", "converted-back", "converted-before-the-mean"],
)
def test_a_loss_computed_in_float32_for_float64_input_is_told_so(answer):
    result = check(answer)
    assert not result.passed, result.message
    assert "computes in float32 for float64 input" in result.message, result.message
    assert "epsilon" not in result.message and "vector_norm`" not in result.message


def test_float32_tensors_outside_the_graph_are_no_lower_precision():
    from autograd_helpers.checks.anomaly._loss import computed_in

    points = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    squared = (points**2).sum(1)
    safe = torch.where(squared > 0, squared, torch.ones(2))  # float32 ones, never differentiated
    loss = torch.where(squared > 0, torch.sqrt(safe), torch.zeros(())).mean()
    assert loss.dtype == torch.float64 and computed_in(loss, [points]) is None
    assert computed_in(loss.float(), [points]) == torch.float32


def test_isclose_to_0_is_a_threshold_not_a_nan_test():
    # torch.isclose runs `|x| != inf` inside: that is no NaN test of the learner's
    def derivative(x):
        small = torch.isclose(x, torch.zeros_like(x), atol=0.05, rtol=0)
        return _masked(x, small, -x / 3 + x**3 / 30)

    result = check_safe_sinc(sinc_with(derivative))
    assert result.passed, result.message
