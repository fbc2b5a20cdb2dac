"""What a cell left changed in the notebook, for chapter 02's shapes checker to judge.

Used by :mod:`._shapes`. The checker runs after the learner's cell and cannot
undo what it did; it judges it, in plain words: a problem's tensor, or a tensor its
description names (``B``), of another shape or no tensor at all; a problem's input that
requires grad, has a ``.grad`` or a hook (the notebook makes them plain); grad mode off,
anomaly mode on, another default dtype.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

__all__ = ["changed_problems", "notebook_settings"]

_DESCRIBED = re.compile(r"\b([A-Za-z_]\w*): \(([\d, ]*)\)")


def _input_names(f: Callable[..., Tensor], count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):  # a built-in such as torch.sum
        parameters = []
    return parameters[:count] if len(parameters) >= count else ["x", "y", "z"][:count]


def _reached(f: Callable[..., Tensor]) -> dict[str, object]:
    """The names ``f`` reads from its closure and the notebook's globals (``B``)."""
    try:
        found = inspect.getclosurevars(f)
    except (TypeError, ValueError):  # a built-in such as torch.sum
        return {}
    return {**found.globals, **found.nonlocals}


def _changed_tensor(name: str, t: Tensor) -> str | None:
    """What a cell did to a problem's input, which the notebook makes plain (or ``None``)."""
    if t.grad is not None:
        return f"`{name}` has a .grad from a backward pass"
    if getattr(t, "_backward_hooks", None):
        return f"`{name}` has a hook registered on it"
    if t.requires_grad:
        return f"`{name}` requires grad (`requires_grad_()` on the notebook's tensor)"
    return None


def changed_problems(problems: Mapping[str, Any]) -> list[str]:
    """Problems whose tensors were changed after the notebook made them, one sentence each.

    A description such as ``"B @ x, B: (5, 3), x: (3,)"`` names shapes: an input, or a
    tensor the function reads (``B``), of another shape was changed (``x.t_()``, ``B =
    torch.randn(4, 3)``), so the truth computed now is not that problem's. The notebook
    makes its inputs plain, so one that requires grad, has a ``.grad`` or a hook was
    changed by a cell too.
    """
    found = []
    for description, (f, inputs) in problems.items():
        tensors = inputs if isinstance(inputs, tuple) else (inputs,)
        described = {
            name: tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
            for name, dims in _DESCRIBED.findall(description)
        }
        named = dict(zip(_input_names(f, len(tensors)), tensors, strict=True))
        for name, value in _reached(f).items():
            if name in described and name not in named:
                named[name] = value
        for name, t in named.items():
            if not isinstance(t, Tensor):
                if name in described:
                    found.append(
                        f"in {description!r}, `{name}` is now {type(t).__name__}, not the "
                        f"tensor of shape {described[name]} its description states"
                    )
                continue
            if name in described and tuple(t.shape) != described[name]:
                found.append(
                    f"in {description!r}, `{name}` has shape {tuple(t.shape)}, not the "
                    f"{described[name]} its description states"
                )
            elif (change := _changed_tensor(name, t)) is not None:
                found.append(f"in {description!r}, {change}")
    return found


def notebook_settings() -> list[str]:
    """Global settings the notebook never leaves changed, found changed: a cell did it."""
    found = []
    if not torch.is_grad_enabled():
        found.append(
            "grad mode is off in your notebook (`torch.set_grad_enabled(False)` outlived its "
            "cell): switch it on again, and use `with torch.no_grad():` where you need it off"
        )
    if torch.is_anomaly_enabled():
        found.append(
            "anomaly mode is on in your notebook, for every cell after it: switch it off "
            "(`torch.autograd.set_detect_anomaly(False)`), and use `with "
            "torch.autograd.detect_anomaly():` around one computation"
        )
    if torch.get_default_dtype() != torch.float32:
        found.append(
            f"the default dtype is {torch.get_default_dtype()} in your notebook, for every "
            "tensor made after it: set it back (`torch.set_default_dtype(torch.float32)`) and "
            "give tensors a dtype where you need another"
        )
    return found
