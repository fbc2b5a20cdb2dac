"""What a learner's step changed on the optimizer it was given, besides its state.

Used by ``_attempt`` for ``check_regions``. A step may change the optimizer's param groups'
settings (a learning rate lowered, momentum turned on: :func:`group_settings` before,
:func:`settings_changed` after) or register hooks, on the optimizer or on every optimizer
(:func:`hooks_added`, which removes the global ones: every later optimizer of the kernel
would run them). Both outlive the call; the checks of ``_step`` say so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.optim import optimizer as optim_module

__all__ = ["group_settings", "hooks_added", "settings_changed"]


def group_settings(optimizer: torch.optim.Optimizer) -> list[dict[str, object]]:
    """Each param group's settings (lr, momentum...), everything but its parameters."""
    return [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]


def settings_changed(before: list[dict[str, object]], after: list[dict[str, object]]) -> list[str]:
    """What differs between two readings of :func:`group_settings`, in words
    (``"lr of param group 0: 0.1 → 0.01"``)."""
    if len(before) != len(after):
        return [f"its number of param groups ({len(before)} → {len(after)})"]
    found = []
    for index, (was, now) in enumerate(zip(before, after, strict=True)):
        for key in sorted(set(was) | set(now)):
            old, new = was.get(key, "unset"), now.get(key, "unset")
            if type(old) is not type(new) or old != new:
                found.append(f"{key} of param group {index}: {old!r} → {new!r}")
    return found


_HOOK_TABLES = {
    "_optimizer_step_pre_hooks": "a step pre-hook on the optimizer (`register_step_pre_hook`)",
    "_optimizer_step_post_hooks": "a step post-hook on the optimizer (`register_step_post_hook`)",
    "_optimizer_state_dict_pre_hooks": "a state_dict hook on the optimizer",
    "_optimizer_state_dict_post_hooks": "a state_dict hook on the optimizer",
    "_optimizer_load_state_dict_pre_hooks": "a load_state_dict hook on the optimizer",
    "_optimizer_load_state_dict_post_hooks": "a load_state_dict hook on the optimizer",
}


def _hooks(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """How many hooks of each kind: the optimizer's own, and every optimizer's (global)."""
    counts = {name: len(getattr(optimizer, name, None) or {}) for name in _HOOK_TABLES}
    counts["global pre"] = len(optim_module._global_optimizer_pre_hooks)
    counts["global post"] = len(optim_module._global_optimizer_post_hooks)
    return counts


def _global_tables() -> tuple[dict[int, Any], dict[int, Any]]:
    return optim_module._global_optimizer_pre_hooks, optim_module._global_optimizer_post_hooks


def _global_hooks() -> list[set[int]]:
    return [set(table) for table in _global_tables()]


def _new_hooks_said(before: dict[str, int], after: dict[str, int]) -> list[str]:
    said = {
        **_HOOK_TABLES,
        "global pre": "a step pre-hook on every optimizer (`register_optimizer_step_pre_hook`)",
        "global post": "a step post-hook on every optimizer (`register_optimizer_step_post_hook`)",
    }
    return list(dict.fromkeys(said[k] for k, n in after.items() if n > before.get(k, 0)))


@contextmanager
def hooks_added(optimizer: torch.optim.Optimizer) -> Iterator[list[str]]:
    """The hooks the block adds to ``optimizer`` or to every optimizer, in words, in the list
    it yields (filled as the block ends); the ones added to every optimizer are removed
    (every optimizer would run them)."""
    counts, globals_before = _hooks(optimizer), _global_hooks()
    added: list[str] = []
    yield added
    added += _new_hooks_said(counts, _hooks(optimizer))
    for table, keys in zip(_global_tables(), globals_before, strict=True):
        for key in [k for k in table if k not in keys]:
            del table[key]
