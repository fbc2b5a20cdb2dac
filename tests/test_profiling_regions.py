"""autograd_helpers.profiling.region_times: the regions of a profile, as events() has them."""

from __future__ import annotations

import threading

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

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


def _as_events_has_them(prof, labels) -> dict[str, RegionTime]:
    """The loop the chapter teaches: each label's fastest row of ``events()``."""
    events = prof.function_events if hasattr(prof, "function_events") else prof.events()
    found: dict[str, RegionTime] = {}
    for event in events:
        if event.name in labels:
            seen = RegionTime(event.cpu_time_total, event.self_cpu_time_total)
            found[event.name] = min(found.get(event.name, seen), seen)
    return found


def _agrees_with_events(prof, labels) -> None:
    times = region_times(prof, labels)
    expected = _as_events_has_them(prof, labels)
    assert list(times) == [label for label in labels if label in expected]
    for label, time in times.items():
        assert time.total_us == pytest.approx(expected[label].total_us, abs=0.01), label
        assert time.self_us == pytest.approx(expected[label].self_us, abs=0.01), label
        assert 0 <= time.self_us <= time.total_us


def test_each_labels_fastest_run_agrees_with_profiler_events():
    prof = _per_sample_steps()
    _agrees_with_events(prof, LABELS)
    assert list(region_times(prof, LABELS)) == LABELS


def _linear_steps(**options) -> profile:
    layer = torch.nn.Linear(8, 8)
    with profile(activities=[ProfilerActivity.CPU], **options) as prof:
        for _ in range(3):
            with record_function("fwd"):
                layer(torch.randn(4, 8)).sum()
    return prof


@pytest.mark.parametrize(
    "options",
    [
        {"with_stack": True},  # Python functions are children: they take from self time
        {"with_stack": True, "record_shapes": True, "profile_memory": True},
        {"with_modules": True, "with_flops": True},
    ],
    ids=str,
)
def test_the_profilers_options_change_nothing_that_events_would_not(options):
    _agrees_with_events(_linear_steps(**options), ["fwd"])


def test_a_region_inside_one_of_the_same_name_is_a_row_of_its_own_as_in_events():
    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("A"):
        torch.ones(100).exp()
        with record_function("A"):
            torch.ones(10).sum()
    _agrees_with_events(prof, ["A"])


def test_what_the_raw_records_do_not_show_as_events_does_is_read_from_events():
    steps = schedule(wait=0, warmup=0, active=1, repeat=2)
    with profile(schedule=steps, acc_events=True) as accumulated:
        for size in (10, 100_000):  # two cycles: events() keeps both, the raw records one
            with record_function("step"):
                torch.ones(size).exp()
            accumulated.step()
    _agrees_with_events(accumulated, ["step"])
    with profile(schedule=schedule(wait=1, warmup=1, active=3)) as scheduled:
        for _ in range(5):
            torch.ones(50).exp()
            scheduled.step()
    _agrees_with_events(scheduled, ["ProfilerStep*", "ProfilerStep#3"])  # as events() names
    assert list(region_times(scheduled, ["ProfilerStep#3"])) == []
    ending = torch.futures.Future()
    with profile() as across_threads:  # a region that ends in another thread
        with record_function("remote call") as region:
            done = region._call_end_callbacks_on_future(ending)
        threading.Thread(target=ending.set_result, args=(1,)).start()
        done.wait()
    _agrees_with_events(across_threads, ["remote call"])
    assert "remote call" in region_times(across_threads, ["remote call"])


def test_the_autograd_profilers_own_class_is_read_too():
    with torch.autograd.profiler.profile() as prof, record_function("a"):
        torch.ones(3).sum()
    _agrees_with_events(prof, ["a"])
    assert list(region_times(prof, ["a"])) == ["a"]


def test_labels_keep_their_order_and_a_missing_one_is_left_out():
    prof = _per_sample_steps(steps=1)
    assert list(region_times(prof, ("update", "backward", "data", "update"))) == ["update", "data"]
    assert list(region_times(prof, iter(["forward"]))) == ["forward"]


@pytest.mark.parametrize(
    ("make", "labels", "error", "phrase"),
    [
        (_per_sample_steps, "data", TypeError, "labels must be a list of record_function names"),
        (_per_sample_steps, [], TypeError, "labels must be one or more strings"),
        (_per_sample_steps, ["data", 3], TypeError, "labels must be one or more strings"),
        (lambda: None, ["data"], TypeError, r"torch\.profiler\.profile \(or a .*\), got NoneType"),
        (
            lambda: profile(activities=[ProfilerActivity.CPU]),
            ["data"],
            ValueError,
            "the profile has not finished",
        ),
    ],
    ids=["one string", "no label", "not a string", "not a profile", "not finished"],
)
def test_bad_arguments_are_named(make, labels, error, phrase):
    with pytest.raises(error, match=phrase):
        region_times(make(), labels)
