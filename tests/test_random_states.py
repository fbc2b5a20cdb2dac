"""NumPy's random state and the runner's snapshot: whatever learner code draws, reseeds or
switches is put back (and named) each call."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from autograd_helpers._common.globals import GlobalState, flush_denormal
from autograd_helpers._common.random_states import numpy_random_state
from autograd_helpers._common.runner import run_learner_code


def _same_numpy_state(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[2:] == b[2:] and np.array_equal(a[1], b[1])


def test_a_moved_state_is_seen_and_put_back():
    np.random.seed(0)
    first = numpy_random_state()
    assert first is not None and not first.moved()
    np.random.rand(2)
    assert first.moved()
    first.restore()
    assert not first.moved()


def test_a_cached_gaussian_added_without_moving_the_words_is_put_back():
    """Replaying a saved state adds a cached normal and leaves the generator's words as they
    were (an audit's case: a fingerprint of the words alone missed it)."""
    np.random.seed(0)
    np.random.randn()  # a cached normal now
    saved = np.random.get_state()
    np.random.randn()  # the cache used: same words, no cached normal
    expected = np.random.get_state()
    assert expected[3] == 0 and saved[3] == 1
    outcome = run_learner_code(lambda: np.random.set_state(saved))
    assert outcome.error is None
    assert _same_numpy_state(np.random.get_state(), expected)


@pytest.mark.parametrize(
    "draw",
    [
        lambda: np.random.rand(5),
        lambda: np.random.seed(123),
        lambda: np.random.randn(),  # draws two normals, keeps one cached
        lambda: np.random.set_state(("MT19937", np.arange(624, dtype=np.uint32), 3, 0, 0.0)),
    ],
    ids=["draw", "seed", "randn", "set_state"],
)
@pytest.mark.parametrize("cached_gaussian", [False, True])
def test_every_route_that_moves_numpys_state_is_put_back(draw, cached_gaussian):
    np.random.seed(7)
    if cached_gaussian:
        np.random.randn()  # an odd number of normals: one is kept for the next draw
    expected = np.random.get_state()
    outcome = run_learner_code(draw)
    assert outcome.error is None and outcome.side_effects == ()
    assert _same_numpy_state(np.random.get_state(), expected)


def test_the_cached_gaussian_alone_used_is_put_back():
    np.random.seed(1)
    np.random.randn()  # one cached now; the next randn uses it without moving the words
    expected = np.random.get_state()
    assert expected[3] == 1
    run_learner_code(np.random.randn)
    assert _same_numpy_state(np.random.get_state(), expected)
    learner_drew = run_learner_code(np.random.randn).value
    assert np.random.randn() == learner_drew  # the notebook's next normal: the cached one


def test_every_random_state_is_put_back_after_each_call():
    torch.manual_seed(2), np.random.seed(2), random.seed(2)
    expected = (float(torch.rand(())), float(np.random.rand()), random.random())
    torch.manual_seed(2), np.random.seed(2), random.seed(2)
    for _ in range(3):
        run_learner_code(lambda: (torch.rand(9), np.random.rand(9), random.random()))
    assert (float(torch.rand(())), float(np.random.rand()), random.random()) == expected


def test_flushing_denormals_is_read_without_torch_and_agrees_with_torch():
    for on in (True, False):
        if not torch.set_flush_denormal(on) and on:
            pytest.skip("this CPU cannot flush denormals")
        tiny = torch.tensor([1], dtype=torch.int32).view(torch.float32)
        assert flush_denormal() is on is ((tiny * 1.0).item() == 0.0)


def test_a_setting_changed_between_two_calls_is_caught_in_the_call_that_changed_it():
    calls = [lambda: None, lambda: torch.set_num_threads(torch.get_num_threads() + 1)]
    outcomes = [run_learner_code(call) for call in [*calls, calls[0]]]
    assert [bool(o.side_effects) for o in outcomes] == [False, True, False]
    assert "threads" in outcomes[1].side_effects[0]


def test_undo_says_what_changes_would_and_restores_as_restore_would():
    before = GlobalState.take()
    torch.set_default_dtype(torch.float64)
    torch.set_flush_denormal(True)
    try:
        said = before.changes()
        assert before.undo() == said and len(said) == 2
    finally:
        torch.set_default_dtype(torch.float32), torch.set_flush_denormal(False)
    assert before.changes() == [] and torch.get_default_dtype() == torch.float32
