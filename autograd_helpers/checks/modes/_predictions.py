"""Reading a learner's predictions of ``mode_table`` entries, every spelling that means the same.

Used by ``check_mode_predictions``. A yes/no entry is answered by ``True``/``False``; ``1``
and ``0``, ``1.0`` and ``0.0``, NumPy's and torch's bools (0-dim, or one element) mean the
same and count. A count (bytes saved) may be any number equal to it. The ``backward``
column reads ``"works"`` or ``"fails: ..."``: ``True``/``False`` or ``"works"``/``"fails"``
answer it. A whole answer list may also be a 1-D NumPy array or tensor. :func:`marked`
reads each answer against its truth and writes the feedback's line for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from autograd_helpers.modes import MODE_COLUMNS

__all__ = [
    "EXERCISE_QUESTIONS",
    "GRAD_MODES",
    "MODES",
    "Reading",
    "answers_of",
    "marked",
    "read",
    "require_questions",
    "spelling_notes",
]

MODES = ("train", "eval")
GRAD_MODES = ("enabled", "no_grad", "inference_mode")
QUESTION_COLUMNS = MODE_COLUMNS[2:]  # "mode" and "grad mode" name the row; they ask nothing

Question = tuple[str, str, str]

# Exercise 1's questions, as notebook 05 asks them: ``check_mode_predictions(...,
# exercise=True)`` judges these, whatever the notebook's ``questions`` holds by then.
EXERCISE_QUESTIONS: tuple[Question, ...] = (
    ("eval", "enabled", "output requires grad"),
    ("train", "no_grad", "dropout active"),
    ("train", "no_grad", "batch-norm stats updated"),
    ("eval", "enabled", "batch-norm stats updated"),
    ("eval", "no_grad", "equal to train output"),
)


def require_questions(caller: str, questions: object) -> list[Question]:
    """A non-empty list of ``(mode, grad mode, column)``: the notebook's part of the check."""
    if isinstance(questions, str) or not isinstance(questions, Sequence) or not questions:
        raise ValueError(
            f"{caller}(): questions must be a non-empty list of (mode, grad mode, column) "
            f"tuples, got {questions!r}"
        )
    found = []
    for question in questions:
        if not (
            isinstance(question, tuple | list)
            and len(question) == 3
            and question[0] in MODES
            and question[1] in GRAD_MODES
            and question[2] in QUESTION_COLUMNS
        ):
            raise ValueError(
                f"{caller}(): each question is (mode, grad mode, column) with a mode in "
                f"{MODES}, a grad mode in {GRAD_MODES} and a column in {QUESTION_COLUMNS}; "
                f"got {question!r}"
            )
        found.append((question[0], question[1], question[2]))
    return found


def answers_of(predicted: object) -> list[object] | None:
    """The answers as a list: from a list, a tuple, or a 1-D array or tensor; else None."""
    if isinstance(predicted, list | tuple):
        return list(predicted)
    if isinstance(predicted, np.ndarray | Tensor) and predicted.ndim == 1:
        return list(predicted)
    return None


def _plain(answer: object) -> object:
    """A NumPy scalar, or a tensor or array of one element, as its Python value."""
    if isinstance(answer, Tensor) and answer.numel() == 1:
        # a meta tensor has no value to read, a sparse one none item() reads
        has_value = not answer.is_meta and answer.layout == torch.strided
        return answer.item() if has_value else answer
    if isinstance(answer, np.ndarray) and answer.size == 1:
        return answer.item()
    if isinstance(answer, np.generic):
        return answer.item()
    return answer


def spelling_notes(answers: Sequence[object], truths: Sequence[object]) -> list[str]:
    """What to say about answers written as another kind of value: strings, or lists.

    Example::

        >>> spelling_notes([[True], "False"], [True, False])[0][:42]
        'Answer with the values True and False, not'
    """
    notes = []
    pairs = list(zip(answers, truths, strict=True))
    if any(isinstance(truth, bool) and isinstance(answer, str) for answer, truth in pairs):
        notes.append("Answer with the values True and False, not the strings 'True' and 'False'.")
    if any(isinstance(answer, list | tuple | dict | set) for answer, _ in pairs):
        notes.append(
            "Each answer is one value (True or False, or a number), not a list: write "
            "`predicted = [True, False, ...]`, a flat list with one value per question."
        )
    return notes


@dataclass(frozen=True)
class Reading:
    """One answer, read against the truth: right or not, and how it was read."""

    right: bool
    said: str  # the answer as the feedback shows it: "1.0" or "1.0 (read as True)"


def read(answer: object, truth: object) -> Reading:
    """Whether ``answer`` says ``truth``, in any spelling that means the same.

    Example::

        >>> read(1.0, True)
        Reading(right=True, said='1.0 (read as True)')
        >>> read("True", True).right, read(2, True).said
        (False, '2')
    """
    value = _plain(answer)
    meant: object = None
    if isinstance(truth, bool):
        if isinstance(value, bool):
            meant = value
        elif isinstance(value, int | float) and value in (0, 1):
            meant = bool(value)
    elif isinstance(truth, int):  # a count: 2496.0 or NumPy's 2496 say 2496
        if isinstance(value, int | float) and not isinstance(value, bool) and value == truth:
            meant = truth
    elif isinstance(truth, str):  # backward: "works" or "fails: why"
        works = truth == "works"
        if isinstance(value, bool):
            meant = truth if value == works else ("works" if value else "fails")
        elif isinstance(value, str):
            word = value.strip().lower()
            meant = truth if word in (truth.lower(), "works" if works else "fails") else value
    right = meant is not None and type(meant) is type(truth) and meant == truth
    shown = repr(answer)
    if isinstance(answer, Tensor) and answer.is_meta:
        shown = "a tensor on the meta device (it has a shape but no value)"
    if meant is not None and (type(meant) is not type(answer) or meant != answer):
        shown += f" (read as {meant!r})"
    return Reading(right, shown)


def marked(
    asked: Sequence[Question],
    answers: Sequence[object],
    rows: Sequence[Mapping[str, object]],
) -> tuple[list[str], int]:
    """Each answer read against its truth in ``rows`` (``mode_table``'s, one per mode and
    grad mode): a line per question (✓ or ✗, and how the answer was read), the spelling
    notes after them, and how many answers are wrong.

    Example::

        >>> rows = [{"mode": "eval", "grad mode": "enabled", "dropout active": False}]
        >>> marked([("eval", "enabled", "dropout active")], [0.0], rows)
        (['✓ eval, enabled, dropout active: False (you wrote 0.0)'], 0)
    """
    table = {(row["mode"], row["grad mode"]): row for row in rows}
    lines, wrong, truths = [], 0, []
    for (mode, grad, column), answer in zip(asked, answers, strict=True):
        truth = table[mode, grad][column]
        truths.append(truth)
        reading = read(answer, truth)
        if reading.right:
            note = "" if isinstance(answer, bool) else f" (you wrote {answer!r})"
            lines.append(f"✓ {mode}, {grad}, {column}: {truth}{note}")
        else:
            wrong += 1
            lines.append(f"✗ {mode}, {grad}, {column}: you said {reading.said}; it is {truth!r}")
    lines += spelling_notes(answers, truths)
    return lines, wrong
