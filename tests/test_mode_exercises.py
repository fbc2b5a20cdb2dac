"""Chapter 05's checkers: evaluate loops, frozen layers, and predictions of the mode table."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograd_helpers.checks import check_evaluate, check_frozen, check_mode_predictions


def evaluate_right(model, loader):
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        losses = [F.mse_loss(model(x), y) for x, y in loader]
    model.train(was_training)
    return sum(float(loss) for loss in losses) / len(losses)


def evaluate_with_no_grad_and_tensor_result(model, loader):
    mode = model.training
    try:
        model.eval()
        with torch.no_grad():
            return torch.stack([F.mse_loss(model(x), y) for x, y in loader]).mean()
    finally:
        model.train(mode)


@pytest.mark.parametrize("answer", [evaluate_right, evaluate_with_no_grad_and_tensor_result])
def test_right_evaluate_loops_pass(answer):
    result = check_evaluate(answer)
    assert result.passed, result.message


def in_train_mode(model, loader):
    with torch.no_grad():
        return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)


def never_restores(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)


def always_back_to_train(model, loader):
    value = never_restores(model, loader)
    model.train()
    return value


def records_a_graph(model, loader):
    was_training = model.training
    model.eval()
    value = sum(F.mse_loss(model(x), y).item() for x, y in loader) / len(loader)
    model.train(was_training)
    return value


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (in_train_mode, "that is the train-mode loss"),
        (never_restores, "was in train mode before and is in eval mode after"),
        (always_back_to_train, "was in eval mode before and is in train mode after"),
        (records_a_graph, "it recorded a graph"),
        (lambda model, loader: "done", "returned a str"),
        (..., "not implemented yet"),
    ],
    ids=["train-mode", "never-restores", "always-train", "graph", "str", "stub"],
)
def test_wrong_evaluate_loops_are_explained(answer, phrase):
    result = check_evaluate(answer)
    assert not result.passed and phrase in result.message, result.message


@pytest.mark.parametrize(
    "answer",
    [
        lambda m: [p.requires_grad_(False) for p in m[:-1].parameters()],
        lambda m: [layer.requires_grad_(False) for layer in list(m)[:-1]],
        lambda m: [p.requires_grad_(n.startswith("4.")) for n, p in m.named_parameters()],
    ],
    ids=["parameters", "modules", "by-name"],
)
def test_right_freezes_pass(answer):
    result = check_frozen(answer)
    assert result.passed, result.message


def module_attribute(model):
    for layer in list(model)[:-1]:
        layer.requires_grad = False


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (module_attribute, "sets a new attribute that nothing reads"),
        (lambda m: m.eval(), "`model.eval()` changes dropout"),
        (lambda m: m.requires_grad_(False), "the last layer is frozen too"),
        (lambda m: None, "still get gradients"),
        (lambda m: m[0].requires_grad_(False), "Still learning: 2.bias, 2.weight"),
    ],
    ids=["attribute", "eval", "everything", "nothing", "first-only"],
)
def test_wrong_freezes_are_explained(answer, phrase):
    result = check_frozen(answer)
    assert not result.passed and phrase in result.message, result.message


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 1))


QUESTIONS = [
    ("eval", "enabled", "output requires grad"),
    ("train", "no_grad", "dropout active"),
    ("train", "no_grad", "batch-norm stats updated"),
    ("eval", "inference_mode", "batch-norm stats updated"),
]
X = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))


def test_predictions_are_checked_one_by_one():
    assert check_mode_predictions([True, True, True, False], QUESTIONS, _model(), X).passed
    result = check_mode_predictions([False, False, False, False], QUESTIONS, _model(), X)
    assert "3 of 4 predictions are off" in result.message
    assert "✗ train, no_grad, batch-norm stats updated: you said False; it is True" in (
        result.message
    )
    assert check_mode_predictions(..., QUESTIONS, _model(), X).status == "not implemented"
    short = check_mode_predictions([True] * 3, QUESTIONS, _model(), X)
    assert "3 answers for 4 questions" in short.message


def test_a_bad_question_is_the_notebooks_mistake():
    with pytest.raises(ValueError, match="each question is"):
        check_mode_predictions([True], [("eval", "enabled", "speed")], _model(), X)
