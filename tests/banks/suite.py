"""The tests every chapter's answer banks get: ``globals().update(chapter_suite("01"))``.

One kernel per chapter (a module-scoped fixture; ``--dist loadfile`` keeps a file on one
worker): the student notebook runs once, as a learner first opens it (every cell but those
tagged ``raises-exception`` must run without an error, it must leave torch's global modes as
it found them, and every untouched stub's checker must say "not implemented yet"), then every answer of every exercise of the chapter is
worked in it, each followed by the untouched stub again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.banks import CATEGORIES, Answer, banks_of
from tests.banks.kernel import ChapterKernel

MIN_WRONG, MIN_RIGHT, MIN_CATEGORIES = 12, 5, 4


def chapter_suite(chapter: str) -> dict[str, Any]:
    banks = banks_of(chapter)
    cases = [(b.exercise, answer) for b in banks for answer in b.answers]
    ids = [f"{exercise}: {answer.category}: {answer.label}" for exercise, answer in cases]

    @pytest.fixture(scope="module")
    def chapter_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChapterKernel]:
        kernel = ChapterKernel(chapter, tmp_path_factory.mktemp(f"chapter{chapter}"))
        yield kernel
        kernel.close()

    def test_every_exercise_has_a_full_bank(chapter_kernel: ChapterKernel) -> None:
        assert {b.exercise for b in banks} == set(chapter_kernel.exercises)
        for b in banks:
            wrong = [a for a in b.answers if not a.is_right]
            kinds = {a.category for a in wrong}
            assert len(wrong) >= MIN_WRONG, f"{b.exercise}: {len(wrong)} wrong answers"
            assert len(b.answers) - len(wrong) >= MIN_RIGHT, f"{b.exercise}: too few right"
            assert len(kinds) >= MIN_CATEGORIES, f"{b.exercise}: only {sorted(kinds)}"
            assert kinds <= set(CATEGORIES)

    def test_run_all_leaves_torchs_global_modes_as_it_found_them(
        chapter_kernel: ChapterKernel,
    ) -> None:
        assert chapter_kernel.state_left is None, chapter_kernel.state_left

    def test_every_untouched_stub_says_not_implemented(chapter_kernel: ChapterKernel) -> None:
        for exercise, where in chapter_kernel.exercises.items():
            for index in where.solutions:
                assert "YOUR CODE HERE" in chapter_kernel.nb.cells[index].source
            shown = chapter_kernel.stub_verdict(exercise)
            assert "not implemented yet" in shown.lower(), f"{exercise}: {shown}"

    @pytest.mark.parametrize(("exercise", "answer"), cases, ids=ids)
    def test_the_verdict_fits_the_answer(
        chapter_kernel: ChapterKernel, exercise: str, answer: Answer
    ) -> None:
        try:
            attempt = chapter_kernel.attempt(exercise, answer)
        finally:
            chapter_kernel.restore(exercise)
        assert attempt.raised is None, f"the checker cell raised {attempt.raised}"
        assert not attempt.leaked, f"the check left changed: {attempt.leaked}\n{attempt.message}"
        if answer.is_right:
            assert attempt.passed, attempt.message
        else:
            assert attempt.status == "failed", attempt.message
        assert answer.phrase in attempt.message, attempt.message

    return {
        "chapter_kernel": chapter_kernel,
        "test_every_exercise_has_a_full_bank": test_every_exercise_has_a_full_bank,
        "test_run_all_leaves_torchs_global_modes_as_it_found_them": (
            test_run_all_leaves_torchs_global_modes_as_it_found_them
        ),
        "test_every_untouched_stub_says_not_implemented": (
            test_every_untouched_stub_says_not_implemented
        ),
        "test_the_verdict_fits_the_answer": test_the_verdict_fits_the_answer,
    }
