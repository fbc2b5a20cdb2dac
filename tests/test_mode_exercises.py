"""Chapter 05's checkers: evaluate loops, frozen layers, and predictions of the mode table."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograd_helpers.checks import check_evaluate, check_frozen, check_mode_predictions
from autograd_helpers.modes import mode_table


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


def restores_only_the_top_flag(model, loader):
    was_training = model.training
    value = never_restores(model, loader)
    model.training = was_training
    return value


def warms_up_in_train_mode(model, loader):
    was_training = model.training
    with torch.no_grad():
        model(loader[0][0])  # "to be safe": moves batch norm's running statistics
    value = never_restores(model, loader)
    model.train(was_training)
    return value


def leaves_batch_norm_training(model, loader):
    was_training = model.training
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.eval()
    with torch.no_grad():
        value = sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)
    model.train(was_training)
    return value


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (in_train_mode, "that is the train-mode loss"),
        (never_restores, "was in train mode before and is in eval mode after"),
        (always_back_to_train, "was in eval mode before and is in train mode after"),
        (records_a_graph, "it recorded a graph"),
        (
            restores_only_the_top_flag,
            "in train mode before; after, its own flag says train but its submodules 0, 1, 2, 3, "
            "4 are in eval mode.\n   Setting `model.training = ...` changes only",
        ),
        (warms_up_in_train_mode, "batch norm's running statistics changed"),
        (leaves_batch_norm_training, "batch norm ran in train mode during the evaluation"),
        (lambda model, loader: "done", "returned a str"),
        (..., "not implemented yet"),
    ],
    ids=[
        "train-mode",
        "never-restores",
        "always-train",
        "graph",
        "top-flag-only",
        "warm-up",
        "batch-norm-training",
        "str",
        "stub",
    ],
)
def test_wrong_evaluate_loops_are_explained(answer, phrase):
    result = check_evaluate(answer)
    assert not result.passed and phrase in result.message, result.message


@pytest.mark.parametrize(
    "answer",
    [
        lambda m: [p.requires_grad_(False) for p in m[:-1].parameters()],
        lambda m: [layer.requires_grad_(False) for layer in list(m)[:-1]],
        lambda m: m.requires_grad_(False)[-1].requires_grad_(True),
    ],
    ids=["parameters", "modules", "all-then-last"],
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
        (lambda m: m[:-1].eval(), "`model.eval()` changes dropout"),  # submodules count too
        (
            lambda m: [m[i].requires_grad_(False) for i in (0, 2)],
            "it works for the chapter's five-module network but not for a seven-module network "
            "(last layer at index 6): layers before the last one still get gradients.\n"
            "   Still learning: 4.bias, 4.weight.\n"
            "   Hint: find the layers from the model itself",
        ),
        (
            lambda m: [p.requires_grad_(n.startswith("4.")) for n, p in m.named_parameters()],
            "but not for a seven-module network",
        ),
        (
            lambda m: (m[:-1].requires_grad_(False), m[3].train()),  # no m[3] in a short one
            "freezing a three-module network that starts with a nested block raised an exception",
        ),
    ],
    ids=[
        "attribute",
        "eval",
        "everything",
        "nothing",
        "first-only",
        "eval-all-but-last",
        "fixed-indices",
        "fixed-name",
        "fixed-index-raises",
    ],
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


def test_answers_that_mean_true_and_false_count_and_say_how_they_were_read():
    import numpy as np

    ints = check_mode_predictions([1, 1, 1, 0], QUESTIONS, _model(), X)
    assert ints.passed, ints.message
    assert "✓ eval, enabled, output requires grad: True (you wrote 1)" in ints.message
    for answers in (
        list(np.array([1, 1, 1, 0], dtype=bool)),
        [torch.tensor(True), True, True, torch.tensor(False)],
    ):
        result = check_mode_predictions(answers, QUESTIONS, _model(), X)
        assert result.passed, result.message
    wrong = check_mode_predictions([0, 1, 1, 0], QUESTIONS, _model(), X)
    assert "you said 0 (read as False); it is True" in wrong.message
    two = check_mode_predictions([2, True, True, False], QUESTIONS, _model(), X)
    assert "1 of 4 predictions are off" in two.message and "you said 2; it is True" in two.message


def test_strings_are_not_booleans_and_the_feedback_says_so():
    result = check_mode_predictions(["True", "True", "True", "False"], QUESTIONS, _model(), X)
    assert not result.passed
    assert "not the strings 'True' and 'False'" in result.message


def test_a_count_may_be_written_as_any_number():
    questions = [("train", "enabled", "bytes saved for backward")]
    saved = {r["grad mode"]: r for r in mode_table(_model(), X) if r["mode"] == "train"}
    count = saved["enabled"]["bytes saved for backward"]
    assert check_mode_predictions([float(count)], questions, _model(), X).passed
    assert not check_mode_predictions(
        [True], [("train", "no_grad", "bytes saved for backward")], _model(), X
    ).passed


MODEL = _model()


@pytest.mark.parametrize(
    "check",
    [
        lambda: check_evaluate(evaluate_right),
        lambda: check_evaluate(in_train_mode),
        lambda: check_frozen(lambda m: [p.requires_grad_(False) for p in m[:-1].parameters()]),
        lambda: check_mode_predictions([True] * 4, QUESTIONS, MODEL, X),
    ],
    ids=["evaluate", "evaluate-wrong", "frozen", "predictions"],
)
def test_checkers_leave_the_notebooks_random_stream_alone(check):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    check()
    assert torch.equal(torch.rand(3), expected)
