"""Chapter 05, ``05-mode-predictions``: predict five entries of the mode table.

The questions, in order: (eval, enabled, output requires grad), (train, no_grad, dropout
active), (train, no_grad, batch-norm stats updated), (eval, enabled, batch-norm stats
updated), (eval, no_grad, equal to train output). The truth: True, True, True, False, False.
"""

from __future__ import annotations

from tests.banks import bank, right, wrong


def predicted(answers: str, head: str = "") -> str:
    return f"{head}predicted = {answers}"


BANK = bank(
    "05-mode-predictions",
    # --- wrong formula: the confusions the chapter is about -------------------------------
    wrong(
        "wrong type or shape",
        "a tensor on the meta device, which has no value (a checker crash once)",
        predicted("[True, True, True, False, torch.tensor(False, device='meta')]"),
        "you said a tensor on the meta device (it has a shape but no value)",
    ),
    wrong(
        "wrong formula",
        "eval() stops recording",
        predicted("[False, True, True, False, False]"),
        "✗ eval, enabled, output requires grad: you said False; it is True",
    ),
    wrong(
        "wrong formula",
        "no_grad switches dropout off",
        predicted("[True, False, True, False, False]"),
        "✗ train, no_grad, dropout active: you said False; it is True",
    ),
    wrong(
        "wrong formula",
        "no_grad protects the running statistics",
        predicted("[True, True, False, False, False]"),
        "✗ train, no_grad, batch-norm stats updated: you said False; it is True",
    ),
    wrong(
        "wrong formula",
        "eval() still updates the statistics",
        predicted("[True, True, True, True, False]"),
        "1 of 5 predictions are off",
    ),
    wrong(
        "wrong formula",
        "eval output equals the train output",
        predicted("[True, True, True, False, True]"),
        "✗ eval, no_grad, equal to train output: you said True; it is False",
    ),
    wrong(
        "wrong formula",
        "grad mode and module mode swapped",
        predicted("[False, False, False, True, True]"),
        "5 of 5 predictions are off",
    ),
    # --- symptom fix ----------------------------------------------------------------------
    wrong(
        "symptom fix",
        "all True, to see which are off",
        predicted("[True] * 5"),
        "2 of 5 predictions are off",
    ),
    wrong(
        "symptom fix",
        "hedges with 0.5 where unsure",
        predicted("[1, 0.5, 0.5, 0, 0]"),
        "you said 0.5; it is True",
    ),
    wrong(
        "symptom fix",
        "None where unsure",
        predicted("[True, None, True, False, False]"),
        "you said None; it is True",
    ),
    # --- bypassed mechanism ---------------------------------------------------------------
    wrong(
        "bypassed mechanism",
        "reads the table of a model without dropout or batch norm",
        predicted(
            "[row[column] for mode, grad, column in questions for row in table\n"
            "             if (row['mode'], row['grad mode']) == (mode, grad)]",
            head="table = ah.modes.mode_table(nn.Linear(4, 1), x)\n",
        ),
        "✗ train, no_grad, dropout active: you said False; it is True",
    ),
    # --- wrong type or shape --------------------------------------------------------------
    wrong(
        "wrong type or shape",
        "the strings 'True' and 'False'",
        predicted('["True", "True", "True", "False", "False"]'),
        "not the strings 'True' and 'False'",
    ),
    wrong(
        "wrong type or shape",
        "'yes' and 'no'",
        predicted('["yes", "yes", "yes", "no", "no"]'),
        "you said 'yes'; it is True",
    ),
    wrong(
        "wrong type or shape",
        "four answers for five questions",
        predicted("[True, True, True, False]"),
        "4 answers for 5 questions",
    ),
    wrong(
        "wrong type or shape",
        "a dict of answers",
        predicted("{question: True for question in questions}"),
        "expected a list of answers, one per question, got dict",
    ),
    wrong(
        "wrong type or shape",
        "one bool for everything",
        predicted("True"),
        "got bool",
    ),
    wrong(
        "wrong type or shape",
        "the list wrapped in another",
        predicted("[[True, True, True, False, False]]"),
        "1 answer for 5 questions",
    ),
    # --- right ----------------------------------------------------------------------------
    right("1.0 and 0.0", predicted("[1.0, 1.0, 1.0, 0.0, 0.0]"), "(you wrote 1.0)"),
    right("1 and 0", predicted("[1, 1, 1, 0, 0]"), "(you wrote 1)"),
    right(
        "NumPy bools",
        predicted("list(np.array([1, 1, 1, 0, 0], dtype=bool))", head="import numpy as np\n"),
    ),
    right(
        "a NumPy array",
        predicted("np.array([True, True, True, False, False])", head="import numpy as np\n"),
    ),
    right("a torch bool tensor", predicted("torch.tensor([True, True, True, False, False])")),
    right("a tuple", predicted("(True, True, True, False, False)")),
    right(
        "computed from words",
        predicted("[answer == 'yes' for answer in ['yes', 'yes', 'yes', 'no', 'no']]"),
    ),
    # --- from the fresh-eyes audit: passed before
    wrong(
        "bypassed mechanism",
        "shortens the question list to the four it is sure of",
        "questions = questions[:4]\npredicted = [True, True, True, False]",
        "`questions` is not the exercise's list any more (4 questions, the exercise asks 5)",
    ),
    right(
        "all five answered, the list shortened after (the check asks its own questions)",
        "predicted = [True, True, True, False, False]\nquestions = questions[:2]",
        "the check asks the exercise's own questions",
    ),
    # --- from the round-4 learner audit
    wrong(
        "wrong type or shape",
        "each answer in a list of its own (audit: told 'you said [True]; it is True')",
        predicted("[[True], [True], [True], [False], [False]]"),
        "Each answer is one value (True or False, or a number), not a list",
    ),
    wrong(
        "wrong type or shape",
        "answers as (question, answer) pairs",
        predicted("[('a', True), ('b', True), ('c', True), ('d', False), ('e', False)]"),
        "a flat list with one value per question",
    ),
)
