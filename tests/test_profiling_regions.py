"""autograd_helpers.profiling.region_times: the regions of a profile, as events() has them."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from autograd_helpers.profiling import RegionTime, region_times

LABELS = ["data", "forward", "update"]


def _per_sample_steps(steps: int = 3) -> profile:
    """Labelled steps with a per-sample loop inside ``data``: thousands of operators."""
    samples = torch.randn(16, 8)
    weight = torch.randn(8, 1, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with record_function("data"):
                batch = torch.stack([(s - s.mean()) / s.std() for s in samples])
            with record_function("forward"):
                loss = (batch @ weight).square().mean()
            loss.backward()
            with record_function("update"), torch.no_grad():
                weight -= 0.1 * weight.grad
                weight.grad = None
    return prof


def test_each_labels_fastest_run_agrees_with_profiler_events():
    prof = _per_sample_steps()
    times = region_times(prof, LABELS)
    expected: dict[str, RegionTime] = {}
    for event in prof.events():  # the reading the chapter teaches, a second for a real step
        if event.name in LABELS:
            seen = RegionTime(event.cpu_time_total, event.self_cpu_time_total)
            expected[event.name] = min(expected.get(event.name, seen), seen)
    assert list(times) == LABELS
    for label in LABELS:
        assert times[label].total_us == pytest.approx(expected[label].total_us, abs=0.01)
        assert times[label].self_us == pytest.approx(expected[label].self_us, abs=0.01)
        assert 0 <= times[label].self_us < times[label].total_us


def test_labels_keep_their_order_and_a_missing_one_is_left_out():
    prof = _per_sample_steps(steps=1)
    assert list(region_times(prof, ("update", "backward", "data", "update"))) == ["update", "data"]
    assert list(region_times(prof, iter(["forward"]))) == ["forward"]


def test_a_region_inside_one_of_the_same_name_is_part_of_it():
    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("step"):
        torch.ones(10).sum()
        with record_function("step"):
            torch.ones(10).exp()
    (outer,) = [e for e in prof.events() if e.name == "step" and e.cpu_parent is None]
    assert region_times(prof, ["step"])["step"].total_us == pytest.approx(outer.cpu_time_total)


@pytest.mark.parametrize(
    ("make", "labels", "error", "phrase"),
    [
        (_per_sample_steps, "data", TypeError, "labels must be a list of record_function names"),
        (_per_sample_steps, [], TypeError, "labels must be one or more strings"),
        (_per_sample_steps, ["data", 3], TypeError, "labels must be one or more strings"),
        (lambda: None, ["data"], TypeError, "profile must be a torch.profiler.profile, got "),
        (
            lambda: profile(activities=[ProfilerActivity.CPU]),
            ["data"],
            ValueError,
            "the profile has not finished",
        ),
    ],
)
def test_bad_arguments_are_named(make, labels, error, phrase):
    with pytest.raises(error, match=phrase):
        region_times(make(), labels)
