"""``check_regions``, part 0: the notebook as the check finds it.

The notebook asks the learner to run the table cell before the check, and that cell calls
``labelled_step(net, sgd, samples)`` on the notebook's own objects: whatever a step leaves
behind (a thread count, grad mode off, the model in eval mode, momentum turned on) is in
the notebook *before* the check starts, and a step that sets it again changes nothing the
check could see. So the check judges the step from the course's settings
(:data:`COURSE_SETTINGS`, put in place for its own calls by :func:`from_course_settings`),
tells what differed as it started (:func:`found_at_start`), and compares the notebook's
model and optimizer with what the notebook built (:func:`objects_problem`): a model in
train mode, each param group as ``optimizer.defaults`` (the arguments it was built with).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from autograd_helpers.checks._contain.global_calls import flushing_denormals
from autograd_helpers.checks._core.feedback import CheckResult

__all__ = [
    "COURSE_SETTINGS",
    "found_at_start",
    "from_course_settings",
    "objects_problem",
    "optimizer_kept",
    "told_the_start",
]

# What `ah.setup_notebook()` and torch's own defaults give every notebook of the course.
COURSE_SETTINGS: dict[str, object] = {
    "grad mode": True,
    "default dtype": torch.float32,
    "threads": 1,
    "flush-denormal": False,
}
_SAID_AS = {  # how the runner's verdict on a changed setting names it
    "grad mode": "grad mode",
    "default dtype": "default dtype",
    "threads": "threads",
    "flush-denormal": "denormal",
}
_PUT_BACK = {
    "grad mode": "`torch.set_grad_enabled(True)`",
    "default dtype": "`torch.set_default_dtype(torch.float32)`",
    "threads": "`torch.set_num_threads(1)`",
    "flush-denormal": "`torch.set_flush_denormal(False)`",
}


def _settings() -> dict[str, object]:
    return {
        "grad mode": torch.is_grad_enabled(),
        "default dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
        "flush-denormal": flushing_denormals(),
    }


def _apply(settings: dict[str, object]) -> None:
    torch.set_grad_enabled(bool(settings["grad mode"]))
    dtype = settings["default dtype"]
    assert isinstance(dtype, torch.dtype)
    torch.set_default_dtype(dtype)
    threads = settings["threads"]
    assert isinstance(threads, int)
    torch.set_num_threads(threads)
    torch.set_flush_denormal(bool(settings["flush-denormal"]))


def _shown(value: object) -> str:
    return (
        {True: "on", False: "off"}.get(value, str(value)) if isinstance(value, bool) else str(value)
    )


def found_at_start() -> dict[str, str]:
    """Each setting that differs from :data:`COURSE_SETTINGS` now, and what it is."""
    return {k: _shown(v) for k, v in _settings().items() if v != COURSE_SETTINGS[k]}


@contextmanager
def from_course_settings() -> Iterator[None]:
    """Run the block from the course's settings; the notebook's are put back after it."""
    found = _settings()
    _apply(COURSE_SETTINGS)
    try:
        yield
    finally:
        _apply(found)


def told_the_start(problem: CheckResult, found: dict[str, str]) -> CheckResult:
    """``problem`` with a line on the settings the notebook had as the check started, where
    the step is what changed them (the verdict names them)."""
    named = [k for k in found if _SAID_AS[k] in problem.message]
    if not named:
        return problem
    settings = ", ".join(f"{k} {found[k]}" for k in named)
    how = " and ".join(_PUT_BACK[k] for k in named)
    line = (
        f"The notebook already runs so ({settings}, not the course's setting): the table "
        f"cell ran your step. Put it back with {how}, then run the table cell again."
    )
    return dataclasses.replace(problem, details=(*problem.details, line))


def _name_of(value: object, default: str) -> str:
    """The notebook's name for ``value`` (``net``), or ``default``."""
    main = sys.modules.get("__main__")
    for name, held in vars(main).items() if main is not None else ():
        if held is value and not name.startswith("_"):
            return f"the notebook's `{name}`"
    return default


def _differs(a: object, b: object) -> bool:
    try:
        return bool(a != b)
    except Exception:  # a tensor of several numbers, an object without ==: not the same
        return True


def _groups_changed(optimizer: torch.optim.Optimizer) -> list[str]:
    return [
        f"{key} of param group {index}: {group[key]!r}, where `optimizer.defaults` (what it "
        f"was built with) says {built!r}"
        for index, group in enumerate(optimizer.param_groups)
        for key, built in optimizer.defaults.items()
        if key in group and _differs(group[key], built)
    ]


@contextmanager
def optimizer_kept(optimizer: torch.optim.Optimizer) -> Iterator[None]:
    """Put the optimizer's state and groups back after the block, as they were: read
    directly, not through ``state_dict()``, which raises on a state entry for a tensor that
    is no parameter (a step can write one, and the table cell runs the step)."""
    state = {key: copy.deepcopy(value) for key, value in optimizer.state.items()}
    groups = [
        {k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in optimizer.param_groups
    ]
    try:
        yield
    finally:
        optimizer.state.clear()
        optimizer.state.update(state)
        for group, kept in zip(optimizer.param_groups, groups, strict=False):
            params = group["params"]
            group.clear()
            group.update(kept, params=params)


def _state_not_written(optimizer: torch.optim.Optimizer) -> list[str]:
    """Keys of the optimizer's state that its own step never writes (a twin of it, built
    with the same groups on copies, steps twice to find those it does)."""
    groups, copies = [], {}
    for group in optimizer.param_groups:
        params = [p.detach().clone().requires_grad_() for p in group["params"]]
        copies.update({id(p): c for p, c in zip(group["params"], params, strict=True)})
        groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": params})
    try:
        twin = type(optimizer)(groups, **optimizer.defaults)
        for _ in range(2):
            for c in copies.values():
                c.grad = torch.ones_like(c)
            twin.step()
    except Exception:  # an optimizer built otherwise: nothing to compare with
        return []
    written = {key for state in twin.state.values() for key in state}
    return sorted({str(k) for state in optimizer.state.values() for k in state} - written)


def objects_problem(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[str, ...] | None:
    """The model not in train mode, or the optimizer's groups not as it was built."""
    in_eval = [name or "the model itself" for name, m in model.named_modules() if not m.training]
    if in_eval:
        who = _name_of(model, "the model")
        return (
            f"{who} is in eval mode as the check starts ({', '.join(in_eval[:3])}): the "
            "notebook built it in train mode, and a training step leaves it so.",
            "Does the step call `model.eval()`? The table cell ran it on the notebook's "
            "model. Drop it from the step, put the model back with `.train()`, run the table "
            "cell again, then this check.",
        )
    changed = _groups_changed(optimizer)
    changed += [
        f"`{key}` in its state, which `optimizer.step()` never writes"
        for key in _state_not_written(optimizer)
    ]
    if changed:
        who = _name_of(optimizer, "the optimizer")
        return (
            f"{who} no longer has the settings it was built with ({'; '.join(changed[:3])}).",
            "Does the step change them? The table cell ran it on the notebook's optimizer. A "
            "training step uses the optimizer's settings, never changes them: fix the step, "
            "build the optimizer again (run the cell that makes it), run the table cell, then "
            "this check.",
        )
    return None
