"""Chapter 06's timing rule: no right answer may fail because the machine was busy.

On a loaded machine a profile can credit any row with milliseconds it spent waiting for the
CPU. The checkers read each row's fastest of several runs, decide by their own measurement
only where it is decisive, and otherwise by the table the learner read
(``checks.profiler._margin``). The verdicts are tested here on made-up times (no test may
depend on wall time); ``tools/bench/margins.py`` measures the real workloads' margins under
load.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.profiler import record_function

from autograd_helpers.checks import check_dominant_op, check_regions
from autograd_helpers.checks.profiler._dominant import Backward, backward_runs
from autograd_helpers.checks.profiler._margin import DECISIVE, NEAR_TIE, fastest, rule
from autograd_helpers.checks.profiler._regions import LABELS, StepProfile
from autograd_helpers.checks.profiler._slowest import read_regions, slowest_verdict
from autograd_helpers.checks.profiler._steps import Label
from autograd_helpers.profiling import cpu_profile, profile_ops
from tests.checks.test_profiler import labelled

# --- the rule, on made-up times ------------------------------------------------------------------

# A step whose preparation is written on the whole batch: no region leads by much.
CLOSE = {"backward": 900.0, "forward": 600.0, "data": 500.0, "update": 250.0}


def test_each_row_counts_its_fastest_run():
    runs = [{"data": 9.0, "forward": 4.0}, {"data": 7.0, "forward": 6.0, "update": 1.0}]
    assert fastest(runs) == {"data": 7.0, "forward": 4.0, "update": 1.0}


@pytest.mark.parametrize(
    ("answer", "read", "passed", "kind"),
    [
        ("backward", None, True, "leads"),
        ("forward", None, False, "unread"),  # too close to call, and no table: not a guess
        ("forward", {**CLOSE, "forward": 950.0}, True, "as read"),
        ("data", CLOSE, False, "read otherwise"),
        ("update", None, False, "behind"),  # 900 is 3.6 times 250: decisive
        ("update", {**CLOSE, "update": 9000.0}, False, "behind"),  # a disturbed table
    ],
)
def test_the_checkers_own_times_decide_only_where_they_are_decisive(answer, read, passed, kind):
    ruling = rule(answer, CLOSE, read)
    assert (ruling.passed, ruling.kind, ruling.top) == (passed, kind, "backward")


def test_the_thresholds_leave_room_between_a_tie_and_a_decisive_lead():
    assert 1 / NEAR_TIE < DECISIVE


def _step_profile(per_step: list[dict[str, float]]) -> StepProfile:
    """A profile whose labels took the given µs, step after step (made-up labels)."""
    labels = [Label(label, step[label], None) for step in per_step for label in LABELS]
    return StepProfile({}, labels, model_ops=5, loss_ops=frozenset({"aten::mean"}))


def test_a_right_answer_read_from_the_learners_table_passes_though_the_checker_saw_another():
    disturbed = {**CLOSE, "forward": 4600.0}  # one of the checker's steps held up for 4 ms
    profile = _step_profile([CLOSE, disturbed, CLOSE])
    read = {**CLOSE, "forward": 1000.0}  # the learner's table: forward first
    result = slowest_verdict("labelled_step", "forward", profile, read)
    assert result.passed, result.message
    assert "your table, which shows 'forward' first, decides" in result.message


def test_without_a_table_a_close_call_asks_for_the_table():
    result = slowest_verdict("labelled_step", "data", _step_profile([CLOSE]))
    assert not result.passed, result.message
    assert "no table of yours to settle it" in result.message
    assert "Run the cell that profiles three steps" in result.message
    leading = slowest_verdict("labelled_step", "backward", _step_profile([CLOSE]))
    assert leading.passed, leading.message  # the checker's own lead needs no table


def test_a_close_call_against_the_learners_own_table_fails_and_cites_it():
    result = slowest_verdict("labelled_step", "data", _step_profile([CLOSE]), CLOSE)
    assert not result.passed
    assert "not the slowest in your own table: 'backward' is" in result.message


def test_a_decisive_lead_decides_and_a_disturbed_table_is_named():
    read = {**CLOSE, "update": 9000.0}
    result = slowest_verdict("labelled_step", "update", _step_profile([CLOSE] * 5), read)
    assert not result.passed and "'update' is not the slowest" in result.message
    assert "other programs held the CPU while your profile ran" in result.message


def test_a_region_held_up_in_one_step_does_not_decide():
    quiet = {"data": 10_000.0, "forward": 600.0, "backward": 900.0, "update": 250.0}
    held_up = {**quiet, "backward": 14_000.0}  # a wait of a scheduler tick or three
    result = slowest_verdict("labelled_step", "backward", _step_profile([held_up, quiet]))
    assert not result.passed and "'backward' is not the slowest" in result.message
    assert slowest_verdict("labelled_step", "data", _step_profile([held_up, quiet])).passed


# --- the learner's table, read from a real profile ---------------------------------------------


def normalise_batch(samples):
    return (samples - samples.mean(dim=1, keepdim=True)) / samples.std(dim=1, keepdim=True)


_labelled = labelled(data=normalise_batch)  # the preparation on the whole batch


@pytest.fixture
def vectorised():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(128, 32)


def test_the_table_is_read_as_each_labels_fastest_step(vectorised):
    model, optimizer, samples = vectorised
    with cpu_profile() as profile:
        for _ in range(3):
            _labelled(model, optimizer, samples)
    read = read_regions(profile)
    assert read is not None and set(read) == set(LABELS)
    steps = [e for e in profile.events() if e.name == "data"]
    assert len(steps) == 3
    assert read["data"] == pytest.approx(min(e.cpu_time_total for e in steps), abs=1.0)


def test_a_profile_without_the_labels_or_no_profile_is_no_table():
    with cpu_profile() as profile:
        torch.ones(3).sum()
    assert read_regions(profile) is None
    assert read_regions(object()) is None


def test_the_vectorised_step_passes_with_the_slowest_its_table_shows(vectorised):
    """Issue 25: a right `slowest`, read off the learner's table, failed 1 of 4."""
    model, optimizer, samples = vectorised
    _labelled(model, optimizer, samples)  # warm-up
    with cpu_profile() as profile:
        for _ in range(5):  # the fastest of five: a table a busy machine rarely disturbs
            _labelled(model, optimizer, samples)
    read = read_regions(profile)
    assert read is not None
    answer = max(read, key=lambda label: read[label])

    result = check_regions(
        _labelled, answer, model, optimizer, samples, prepare=normalise_batch, read_from=profile
    )
    assert result.passed, result.message


def test_read_from_must_be_a_profile(vectorised):
    with pytest.raises(TypeError, match="read_from"):
        check_regions(_labelled, "data", *vectorised, read_from={"data": 1.0})


# --- the dominant operator: each operator's fastest of the learner's runs -----------------------


def test_the_dominant_operator_is_read_as_each_operators_fastest_run():
    torch.manual_seed(0)
    words = nn.EmbeddingBag(1000, 8, mode="mean")
    indices = torch.randint(0, 1000, (4, 3))
    report = profile_ops(lambda i: words(i).square().mean(), indices, runs=3)
    runs = backward_runs(report)
    assert len(runs) == 3
    combined = Backward.read([report])
    for operator in ("aten::fill_", "aten::_embedding_bag_dense_backward"):
        assert combined.self_times[operator] == min(own[operator] for own, _ in runs)
        assert combined.total_times[operator] == min(total[operator] for _, total in runs)
    assert combined.runs == 3
    one_more = profile_ops(lambda i: words(i).square().mean(), indices)
    assert Backward.read([report, one_more]).runs == 4  # a list of reports: all their runs
    result = check_dominant_op("backward", report)  # judged without a time: a label
    assert not result.passed and "a label" in result.message
    assert check_dominant_op("backward", [report, one_more]).message == result.message


# --- the checker's timed steps: the regions alone -----------------------------------------------


def test_the_timed_steps_record_the_regions_alone_and_time_them():
    """The checker times its steps without recording their operators (thousands in a
    per-sample loop: they made check_regions take a second and its kernel 100 MB more)."""
    from autograd_helpers._profile_events import regions_named
    from autograd_helpers.checks.profiler._steps import regions_only

    samples = torch.randn(64, 8)
    with regions_only() as records:
        for _ in range(2):
            with record_function("data"):
                torch.stack([(s - s.mean()) / s.std() for s in samples])
            with record_function("update"):
                samples.sum()
    names = [r.name() for r in records]
    assert sorted(names) == ["data", "data", "update", "update"]  # no aten:: operator
    spans = regions_named(records, LABELS)
    assert [s.name for s in spans] == ["data", "update"] * 2
    assert all(s.cpu_time_total > 0 for s in spans)
    assert not torch._C._autograd._profiler_enabled()  # the profile has ended


def test_a_step_that_raises_in_the_timed_steps_ends_their_profile(vectorised):
    from autograd_helpers.checks.profiler._steps import STEPS, profile_steps

    calls = []

    def flaky(model, optimizer, samples):  # right, then raises in the last timed step
        calls.append(1)
        if len(calls) == 2 + STEPS:  # after the warm-up and the detailed call
            raise RuntimeError("not this time")
        _labelled(model, optimizer, samples)

    outcome = profile_steps(flaky, *vectorised)
    assert not isinstance(outcome, StepProfile) and "not this time" in str(outcome.error)
    assert not torch._C._autograd._profiler_enabled()
    assert isinstance(profile_steps(_labelled, *vectorised), StepProfile)
