"""Chapter 04's checkers: NaN-free losses and training steps without in-place errors."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.checks import check_finite_gradients, check_training_step


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
        lambda p: torch.sqrt((p**2).sum(dim=1) + 1e-12).mean(),
        lambda p: torch.sqrt((p**2).sum(dim=1).clamp(min=1e-12)).mean(),
        lambda p: torch.where(
            (p**2).sum(1) > 0,
            torch.sqrt(torch.where((p**2).sum(1) > 0, (p**2).sum(1), torch.ones(len(p)))),
            torch.zeros(len(p)),
        ).mean(),
    ],
    ids=["vector_norm", "epsilon", "clamp", "double-where"],
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
        (lambda p: torch.nan_to_num(mean_radius(p)), "still contains NaN"),
        (..., "not implemented yet"),
    ],
    ids=["unchanged", "eps-outside", "big-eps", "detached-1", "detached-2", "nan_to_num", "stub"],
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
        (forgets_to_reset_grad, "after step 3 the loss is"),  # step 2 still starts right
        (shifts_after_the_loss, "after step 1 the loss is"),
        (lambda w, x, t: None, "returned a NoneType"),
        (..., "not implemented yet"),
    ],
    ids=["unchanged", "no-reset", "no-shift", "no-loss", "stub"],
)
def test_wrong_training_steps_fail(answer, phrase):
    result = check_training_step(answer, reference=train_step, make_inputs=make_inputs)
    assert not result.passed and phrase in result.message, result.message
