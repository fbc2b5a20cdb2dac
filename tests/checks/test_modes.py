"""Chapter 05's checkers: evaluate loops, frozen layers, and predictions of the mode table.

Learners' answers, right and wrong, live in the answer banks (tests/banks/ex_05_*.py, run in
a real kernel by tests/test_bank_05.py). These are the unit tests of what a bank cannot
reach: the notebook's own mistakes, the state a check starts in, and the machinery.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograd_helpers.checks import check_evaluate, check_frozen, check_mode_predictions
from autograd_helpers.checks._contain.modules import ModelRecord
from autograd_helpers.checks.modes._cases import CASES
from autograd_helpers.checks.modes._evaluate import CHECKS, CHECKS_WHEN_A_BATCH_RAISES
from autograd_helpers.modes import mode_table


def evaluate_right(model, loader):
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            losses = [F.mse_loss(model(x), y) for x, y in loader]
    finally:
        model.train(was_training)
    return sum(float(loss) for loss in losses) / len(losses)


def freeze_right(model):
    for parameter in model[:-1].parameters():
        parameter.requires_grad_(False)


def test_a_right_loop_passes_and_says_what_it_was_tried_on():
    result = check_evaluate(evaluate_right)
    assert result.passed, result.message
    assert "batches of 8, 8 and 5 rows" in result.message
    assert "instance norm" in result.message and "float64" in result.message


def test_every_case_is_uneven_and_one_raises():
    # A mean over samples equals the mean over batches only when every batch has one size.
    assert all(len(set(case.sizes)) > 1 or len(case.sizes) == 1 for case in CASES)
    assert [case.raises for case in CASES].count(True) == 1
    assert {case.start for case in CASES} == {"train", "eval"}
    # Only the raising case must pass the error on; everything else is judged on both.
    assert {c.__name__ for c in CHECKS_WHEN_A_BATCH_RAISES} - {c.__name__ for c in CHECKS} == {
        "_error_passed_on"
    }


def without_finally(model, loader):
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
    model.train(was_training)
    return sum(losses) / len(losses)


def test_a_loop_without_finally_fails_on_the_batch_that_raises():
    result = check_evaluate(without_finally)
    assert not result.passed
    assert "when a batch raised an error" in result.message
    assert "`finally:`" in result.message


def only_dropout_and_batch_norm(model, loader):
    flags = {m: m.training for m in model.modules()}
    for m in model.modules():
        if isinstance(m, nn.Dropout | nn.BatchNorm1d):
            m.eval()
    try:
        with torch.no_grad():
            return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)
    finally:
        for m, flag in flags.items():
            m.training = flag


def test_instance_norm_statistics_count_by_behaviour():
    # Not a _BatchNorm, and its running statistics move in train mode all the same.
    result = check_evaluate(only_dropout_and_batch_norm)
    assert not result.passed
    assert "a model with instance norm" in result.message, result.message


MODEL = nn.Sequential(nn.Linear(4, 1), nn.Dropout())


def uses_the_global_model(model, loader):
    MODEL.eval()
    return evaluate_right(model, loader)


def test_a_global_model_changed_is_named_and_put_back():
    result = check_evaluate(uses_the_global_model)
    assert not result.passed
    assert "it changed the notebook's `MODEL` (the train/eval flag of" in result.message
    assert MODEL.training and MODEL[1].training


def freezes_the_global_model(model):
    MODEL[:-1].requires_grad_(False)


def test_a_global_model_frozen_is_named_and_put_back():
    result = check_frozen(freezes_the_global_model)
    assert "it changed the notebook's `MODEL` (requires_grad of 0.weight, 0.bias)" in (
        result.message
    )
    assert all(p.requires_grad for p in MODEL.parameters())


def test_a_stub_and_a_non_function():
    assert check_evaluate(...).status == "not implemented"
    assert check_frozen(...).status == "not implemented"
    assert "expected a function, got int" in check_evaluate(3).message
    assert "expected a function, got NoneType" in check_frozen(None).message


@pytest.mark.parametrize(
    "check",
    [
        lambda: check_evaluate(evaluate_right),
        lambda: check_frozen(freeze_right),
        lambda: check_mode_predictions([True], [("eval", "enabled", "dropout active")], MODEL, X),
    ],
    ids=["evaluate", "frozen", "predictions"],
)
def test_grad_mode_off_in_the_notebook_is_a_verdict_not_a_crash(check):
    with torch.no_grad():
        result = check()
        assert not torch.is_grad_enabled()  # as found: the check does not switch it for good
    assert result.status == "failed"
    assert "grad mode is off in this notebook" in result.message


def test_frozen_networks_name_where_a_fixed_index_fails():
    result = check_frozen(lambda m: [m[i].requires_grad_(False) for i in (0, 1)])
    assert (
        "it works for the chapter's model but not for a seven-module network whose last layer "
        "(index 6) has no bias: layers before the last one still get gradients."
    ) in result.message
    assert "Still learning: 2.bias, 2.weight, 4.bias, 4.weight." in result.message
    assert "Hint: find the layers from the model itself" in result.message


def test_frozen_passes_and_the_message_names_the_chapters_last_layer():
    result = check_frozen(freeze_right)
    assert result.passed, result.message
    assert "(4.weight, 4.bias in the chapter's model)" in result.message
    assert not result.details  # no note: nothing else changed


def test_a_right_freeze_that_also_switches_to_eval_passes_with_a_note():
    result = check_frozen(lambda m: m[:-1].requires_grad_(False).eval())
    assert result.passed, result.message
    assert "Note: it also switched 0, 1, 2, 3 to eval mode." in result.message


def test_model_record_names_what_changed():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    record = ModelRecord(model)
    model(torch.randn(4, 2))
    model[0].weight.register_hook(lambda g: g)
    assert record.buffers_changed(model) == [
        "1.running_mean",
        "1.running_var",
        "1.num_batches_tracked",
    ]
    assert record.hooks_added(model) == ["0.weight"]
    assert record.changes(model) == [
        "the buffers 1.running_mean, 1.running_var, 1.num_batches_tracked",
        "hooks on 0.weight",
    ]


def test_model_record_names_a_dtype_change_and_a_backward_pre_hook():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    record = ModelRecord(model)
    model[0].register_full_backward_pre_hook(lambda module, grad: None)
    model.double()  # in place; the integer num_batches_tracked stays int64
    assert record.dtypes_changed(model) == [
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
        "1.running_mean",
        "1.running_var",
    ]
    assert record.hooks_added(model) == ["0"]


# --- check_mode_predictions ---------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: check_mode_predictions([True], [("eval", "enabled", "speed")], _model(), X),
         ValueError, "each question is"),
        (lambda: check_mode_predictions([True], [("test", "enabled", "backward")], _model(), X),
         ValueError, "a mode in ('train', 'eval')"),
        (lambda: check_mode_predictions([True], [("eval", "off", "backward")], _model(), X),
         ValueError, "a grad mode in"),
        (lambda: check_mode_predictions([True], "questions", _model(), X), ValueError,
         "questions must be a non-empty list"),
        (lambda: check_mode_predictions([True], QUESTIONS[:1], "model", X), TypeError,
         "model must be an nn.Module"),
        (lambda: check_mode_predictions([True], QUESTIONS[:1], _model(), [1.0]), TypeError,
         "x must be a torch.Tensor"),
        (lambda: check_mode_predictions([True], QUESTIONS[:1], _model(), torch.ones(3, 5)),
         ValueError, "check_mode_predictions(): model(x) raised RuntimeError"),
    ],
    ids=["column", "mode", "grad-mode", "questions", "model", "x", "model-and-x"],
)  # fmt: skip
def test_the_notebooks_mistakes_are_the_notebooks(call, error, words):
    with pytest.raises(error, match=None) as raised:
        call()
    assert words in str(raised.value)
    assert str(raised.value).startswith("check_mode_predictions(): ")


def test_answers_that_mean_true_and_false_count_and_say_how_they_were_read():
    ints = check_mode_predictions([1, 1, 1, 0], QUESTIONS, _model(), X)
    assert ints.passed, ints.message
    assert "✓ eval, enabled, output requires grad: True (you wrote 1)" in ints.message
    for answers in (
        [1.0, 1.0, 1.0, 0.0],  # the case: it read "you said 1.0; it is True"
        [np.float64(1.0), np.int64(1), True, np.float32(0.0)],
        list(np.array([1, 1, 1, 0], dtype=bool)),
        [torch.tensor(True), True, True, torch.tensor(False)],
        [torch.tensor(1.0), torch.tensor([1]), np.array(1), False],
        np.array([True, True, True, False]),
        torch.tensor([True, True, True, False]),
        (True, True, True, False),
    ):
        result = check_mode_predictions(answers, QUESTIONS, _model(), X)
        assert result.passed, (answers, result.message)
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
    for answer in (float(count), np.int64(count), torch.tensor(count)):
        assert check_mode_predictions([answer], questions, _model(), X).passed
    assert not check_mode_predictions(
        [True], [("train", "no_grad", "bytes saved for backward")], _model(), X
    ).passed


def test_the_backward_column_takes_works_or_a_bool():
    questions = [("train", "enabled", "backward"), ("eval", "no_grad", "backward")]
    assert check_mode_predictions(["works", "fails"], questions, _model(), X).passed
    assert check_mode_predictions([True, False], questions, _model(), X).passed
    result = check_mode_predictions([False, True], questions, _model(), X)
    assert "you said False (read as 'fails'); it is 'works'" in result.message


def test_other_containers_are_a_verdict():
    for answers, words in ((True, "got bool"), ({"a": True}, "got dict"), (None, "got NoneType")):
        result = check_mode_predictions(answers, QUESTIONS, _model(), X)
        assert not result.passed and words in result.message


@pytest.mark.parametrize(
    "check",
    [
        lambda: check_evaluate(evaluate_right),
        lambda: check_evaluate(without_finally),
        lambda: check_frozen(freeze_right),
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


# --- containment: the loader, names, optimizers, attributes, hidden graphs ------------------


def pops_the_loader(model, loader):
    was_training = model.training
    model.eval()
    losses = []
    try:
        with torch.inference_mode():
            while loader:  # a one-shot loader: used up by one pass
                x, y = loader.pop(0)
                losses.append(float(F.mse_loss(model(x), y)))
    finally:
        model.train(was_training)
    return sum(losses) / len(losses)


def replaces_a_batch(model, loader):
    value = evaluate_right(model, loader)
    loader[0] = None
    return value


@pytest.mark.parametrize("fn", [pops_the_loader, replaces_a_batch])
def test_a_loop_that_uses_up_or_replaces_the_loader_gets_a_verdict(fn):
    result = check_evaluate(fn)  # it crashed on zip(strict=True) before
    assert result.status == "failed"
    assert "it changed the loader itself" in result.message, result.message


LOSSES: list[float] = []


def keeps_every_loss(model, loader):
    value = evaluate_right(model, loader)
    LOSSES.append(value)
    return value


def test_a_global_list_appended_to_is_a_verdict_and_put_back():
    result = check_evaluate(keeps_every_loss)
    assert not result.passed
    assert "the global list `LOSSES` (it held 0 items, now 1)" in result.message
    assert LOSSES == []


def packs_saves_away(model, loader):
    was_training = model.training
    model.eval()
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: None, lambda p: None):
            losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
    finally:
        model.train(was_training)
    return sum(losses) / len(losses)


def test_a_graph_hidden_by_saved_tensors_hooks_is_still_recorded():
    result = check_evaluate(packs_saves_away)
    assert not result.passed
    assert "it recorded a graph (the model's output had a `grad_fn`" in result.message


def changes_dropout_p(model, loader):
    value = evaluate_right(model, loader)
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    return value


def marks_the_model(model, loader):
    value = evaluate_right(model, loader)
    model.evaluated = True
    return value


@pytest.mark.parametrize(
    ("fn", "name"), [(changes_dropout_p, "3.p"), (marks_the_model, "evaluated")]
)
def test_module_attributes_changed_by_evaluate_are_a_verdict(fn, name):
    result = check_evaluate(fn)
    assert not result.passed
    assert f"it changed attributes of the model's modules ({name})" in result.message


OPTIMIZER = torch.optim.SGD(MODEL.parameters(), lr=0.1)


def lowers_the_learning_rate(model):
    freeze_right(model)
    OPTIMIZER.param_groups[0]["lr"] = 0.0


def test_an_optimizer_setting_changed_by_name_is_a_verdict_and_put_back():
    result = check_frozen(lowers_the_learning_rate)
    assert not result.passed
    assert "the optimizer `OPTIMIZER`'s settings (lr of param group 0)" in result.message
    assert OPTIMIZER.param_groups[0]["lr"] == 0.1


def sets_zero_grads(model):
    for parameter in model[:-1].parameters():
        parameter.requires_grad_(False)
        parameter.grad = torch.zeros_like(parameter)


def lowers_batch_norm_momentum(model):
    freeze_right(model)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm1d):
            module.momentum = 0.0


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (sets_zero_grads, "it set the `.grad` of 0.weight, 0.bias, 1.weight, 1.bias"),
        (lowers_batch_norm_momentum, "it changed attributes of the model's modules (1.momentum)"),
        (lambda m: setattr(m, "frozen", True) or freeze_right(m), "(frozen)"),
    ],
)
def test_freezing_that_changes_grads_or_attributes_fails(fn, phrase):
    result = check_frozen(fn)
    assert not result.passed and phrase in result.message, result.message


def test_slicing_the_parameter_list_fails_where_the_last_layer_has_one_parameter():
    def slices(model):
        for parameter in list(model.parameters())[:-2]:
            parameter.requires_grad_(False)

    result = check_frozen(slices)
    assert not result.passed
    assert "Still learning: 4.bias." in result.message


def test_the_truth_follows_the_notebooks_model_as_it_is():
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 1))
    model[2].p = 0.0  # the learner's model: dropout that drops nothing
    question = [("train", "no_grad", "dropout active")]
    assert check_mode_predictions([False], question, model, torch.randn(6, 4)).passed
    assert not check_mode_predictions([True], question, model, torch.randn(6, 4)).passed


def counts_then_loops(model, loader):
    batches = iter(loader)
    count = sum(1 for _ in batches)  # uses the iterator up: the loop below sees nothing
    with torch.inference_mode():
        return sum(float(F.mse_loss(model(x), y)) for x, y in batches) / count


def test_a_used_up_iterator_returns_zero_and_the_hint_says_why():
    result = check_evaluate(counts_then_loops)
    assert not result.passed
    assert "0 is what a loop returns that saw no batch" in result.message


# --- the fresh-eyes audit: each of these passed before ----------------------------------


def swallows_the_error(model, loader):
    was_training = model.training
    model.eval()
    losses = []
    try:
        with torch.inference_mode():
            for x, y in loader:
                try:
                    losses.append(float(F.mse_loss(model(x), y)))
                except RuntimeError:
                    continue
    finally:
        model.train(was_training)
    return sum(losses) / len(losses)


def with_a_buffer(model, loader):
    model.register_buffer("n_evals", torch.zeros(()))
    return evaluate_right(model, loader)


def with_a_private_flag(model, loader):
    model._evaluated = True
    return evaluate_right(model, loader)


def reseeding(model, loader):
    torch.manual_seed(0)
    return evaluate_right(model, loader)


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (swallows_the_error, "your loop hid the error from batch 2"),
        (with_a_buffer, "`n_evals` (a buffer, added)"),
        (with_a_private_flag, "`_evaluated` (an attribute, added)"),
        (reseeding, "reseeded torch's random generator"),
    ],
    ids=["swallowed", "buffer", "private-attribute", "manual_seed"],
)
def test_evaluation_loops_from_the_audit_fail(answer, phrase):
    result = check_evaluate(answer)
    assert not result.passed and phrase in result.message, result.message


def test_freezing_all_but_the_last_two_modules_fails_on_a_network_that_needs_them():
    result = check_frozen(lambda m: m[:-2].requires_grad_(False))
    assert "second-to-last module (a LayerNorm) has parameters" in result.message
    assert "Still learning: 3.bias, 3.weight." in result.message


def test_a_buffer_and_an_optimizer_found_through_gc_are_verdicts():
    import gc

    held = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(held.parameters(), lr=0.1, momentum=0.9)

    def with_a_buffer(model):
        freeze_right(model)
        model.register_buffer("frozen", torch.tensor(True))

    def momentum_off(model):
        freeze_right(model)
        for thing in gc.get_objects():
            if type(thing) is torch.optim.SGD:
                thing.param_groups[0]["momentum"] = 0.0

    assert "`frozen` (a buffer, added)" in check_frozen(with_a_buffer).message
    result = check_frozen(momentum_off)
    assert "momentum of param group 0" in result.message, result.message
    assert optimizer.param_groups[0]["momentum"] == 0.9


CHAPTER_QUESTIONS = [
    ("eval", "enabled", "output requires grad"),
    ("train", "no_grad", "dropout active"),
    ("train", "no_grad", "batch-norm stats updated"),
    ("eval", "enabled", "batch-norm stats updated"),
    ("eval", "no_grad", "equal to train output"),
]


def test_the_exercise_judges_its_own_questions_and_says_when_they_were_changed():
    model = _model()
    right = [True, True, True, False, False]
    assert check_mode_predictions(right, CHAPTER_QUESTIONS, model, X, exercise=True).passed
    shortened = check_mode_predictions(right[:4], CHAPTER_QUESTIONS[:4], model, X, exercise=True)
    assert shortened.status == "failed" and "4 answers for 5 questions" in shortened.message
    assert "`questions` is not the exercise's list any more" in shortened.message
    kept = check_mode_predictions(right, CHAPTER_QUESTIONS[:4], model, X, exercise=True)
    assert kept.passed and "the check asks the exercise's own questions" in kept.message


def evaluates_into_a_default(model, loader, _history=[]):  # noqa: B006 -- under test
    _history.append(evaluate_right(model, loader))
    return _history[-1]


def test_a_mutable_default_argument_is_a_verdict():
    result = check_evaluate(evaluates_into_a_default)
    assert "the default list `_history` of evaluates_into_a_default" in result.message
    assert evaluates_into_a_default.__defaults__ == ([],)


# --- issue 25: probe models come with gradients, as in the middle of training ---------------


def test_every_probe_model_starts_with_nonzero_gradients():
    from autograd_helpers.checks.modes._freeze import NETWORKS, attempt

    models = [case.model() for case in CASES]
    models += [attempt(lambda model: None, network, "f").model for network in NETWORKS]
    for model in models:
        for name, parameter in model.named_parameters():
            assert parameter.grad is not None and bool(parameter.grad.ne(0).all()), name


def _evaluates_then(model, loader, clear):
    value = evaluate_right(model, loader)
    clear(model)
    return value


def _zeroes_in_place(model):
    for parameter in model.parameters():
        parameter.grad.zero_()


@pytest.mark.parametrize(
    ("clear", "phrase"),
    [
        (lambda model: model.zero_grad(), "it cleared the `.grad` of 0.weight, 0.bias"),
        (lambda model: model.zero_grad(set_to_none=False), "it zeroed the `.grad` of"),
        (_zeroes_in_place, "evaluating threw them away"),
    ],
)
def test_an_evaluation_that_clears_the_models_gradients_fails(clear, phrase):
    result = check_evaluate(lambda model, loader: _evaluates_then(model, loader, clear))
    assert not result.passed and phrase in result.message, result.message


def _sparse_zeros(model):
    for parameter in model[:-1].parameters():
        parameter.grad = torch.zeros_like(parameter).to_sparse()


@pytest.mark.parametrize(
    ("clear", "phrase"),
    [
        (
            lambda model: model.zero_grad(set_to_none=False),
            "to zeros: a zero gradient kept on a frozen layer still moves it",
        ),
        (lambda model: model.zero_grad(), "it cleared the `.grad` of the last layer"),
        (lambda model: model[-1].zero_grad(), "it cleared the `.grad` of the last layer"),
        (_sparse_zeros, "it set the `.grad` of 0.weight, 0.bias, 1.weight, 1.bias to zeros"),
    ],
)
def test_freezing_that_zeroes_or_clears_the_learning_gradients_fails(clear, phrase):
    result = check_frozen(lambda model: freeze_right(model) or clear(model))
    assert not result.passed and phrase in result.message, result.message


def test_freezing_that_clears_only_the_frozen_gradients_passes_with_a_note():
    result = check_frozen(lambda model: freeze_right(model) or model[:-1].zero_grad())
    assert result.passed, result.message
    assert "Note: it also cleared the `.grad` of the frozen 0.weight" in result.message
