"""What did the learner hand in? Recognise it, name its inputs, and watch its backward.

Used by :func:`autograd_helpers.checks.check_function`. Learners hand in a
``torch.autograd.Function`` subclass, a plain function, or one of the near misses that this
module recognises and explains: an instance instead of the class, a class that forgot to
subclass ``Function``, a Function without ``backward``, the untouched ``...`` of a stub.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers.checks._core.feedback import CheckResult, failed, stub_verdict
from autograd_helpers.checks._core.numeric import same_values

__all__ = ["diagnose", "entry_points", "forward_parameter_names", "spy"]


def diagnose(fn: object, label: str, *, require_function: bool) -> CheckResult | None:
    """Explain why ``fn`` cannot be checked at all, or return ``None`` when it can.

    With ``require_function``, anything but a ``torch.autograd.Function`` subclass is refused
    (an exercise that asks for a Function is not answered by ``torch.tanh``).
    """
    if (stub := stub_verdict(label, fn)) is not None:
        return stub
    if fn is None:
        return failed(label, "got None instead of a Function or a function.")
    if isinstance(fn, type) and issubclass(fn, Function):
        if fn.forward is Function.forward:
            return failed(label, "it has no `forward`; define `def forward(ctx, ...)`.")
        if fn.backward is Function.backward and fn.vjp is Function.vjp:
            return failed(label, "it has no `backward`; define `def backward(ctx, grad_output)`.")
        return None
    if isinstance(fn, Function):
        return failed(label, f"pass the class `{label}` itself, not an instance `{label}()`.")
    if isinstance(fn, type):
        if issubclass(fn, torch.nn.Module):
            return failed(
                label,
                f"`{label}` is an `nn.Module`; pass a `torch.autograd.Function` subclass.",
                "A module's forward is differentiated by autograd, op by op; the exercise is "
                "to write the backward yourself, in a Function.",
            )
        if hasattr(fn, "forward") and hasattr(fn, "backward"):
            return failed(
                label,
                "it is not a subclass of `torch.autograd.Function`.",
                f"Write `class {label}(torch.autograd.Function):`.",
            )
        either = "" if require_function else " or a function"
        return failed(label, f"it is a class; pass a `torch.autograd.Function` subclass{either}.")
    if not callable(fn):
        return failed(
            label, f"expected a Function subclass or a function, got {type(fn).__name__}."
        )
    if require_function:
        return failed(
            label,
            f"this exercise asks for a `torch.autograd.Function` subclass, and `{label}` is "
            f"a {_callable_kind(fn)}.",
            "Define it as `class Name(torch.autograd.Function):` with static `forward` and "
            "`backward` methods: writing the backward yourself is the exercise.",
        )
    return None


def _callable_kind(fn: object) -> str:
    if inspect.isfunction(fn):
        return "lambda" if fn.__name__ == "<lambda>" else "plain function"
    if inspect.isbuiltin(fn) or type(fn).__module__ == "torch":
        return "built-in function"
    return type(fn).__name__


def forward_parameter_names(fn: object, count: int) -> list[str]:
    """Names for the first ``count`` inputs of ``fn``, as the learner wrote them.

    For a classic-form Function these are ``forward``'s parameters after ``ctx`` (the
    modern form's ``forward`` has no ``ctx``); for a plain callable, its parameters. An input
    that has no positional parameter of its own (``*args``, or a signature that cannot be
    read) is called ``"input i"``.
    """
    names = [f"input {i}" for i in range(count)]
    target = fn.forward if isinstance(fn, type) and issubclass(fn, Function) else fn
    try:
        params = list(inspect.signature(target).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return names
    modern = isinstance(fn, type) and fn.setup_context is not Function.setup_context  # type: ignore[attr-defined]
    if isinstance(fn, type) and not modern and params:
        params = params[1:]  # the classic forward(ctx, ...) receives ctx first
    for i, param in enumerate(params[:count]):
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            names[i] = param.name
    return names


def spy(fn: type[Function], record: list[tuple[object, bool]]) -> type[Function]:
    """A subclass of ``fn`` whose backward also records what ``fn``'s backward returned.

    The engine silently casts a gradient's dtype and turns other mistakes into terse errors;
    the raw return value lets the checker say exactly what was wrong. Each record is
    ``(returned, changed)``, where ``changed`` says whether backward modified a
    ``grad_output`` in place (a tensor the engine owns, and may pass to other nodes).
    """
    overrides_vjp = fn.backward is Function.backward and fn.vjp is not Function.vjp
    method = "vjp" if overrides_vjp else "backward"
    original = getattr(fn, method)

    def recording(ctx: Any, *grad_outputs: Any) -> Any:
        before = [g.clone() if isinstance(g, Tensor) else g for g in grad_outputs]
        result = original(ctx, *grad_outputs)
        changed = any(
            isinstance(g, Tensor) and not same_values(g, b)
            for g, b in zip(grad_outputs, before, strict=True)
        )
        record.append((result, changed))
        return result

    return type(fn.__name__, (fn,), {method: staticmethod(recording)})


def entry_points(
    fn: object, record: list[tuple[object, bool]]
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(call, plain_call)``: ``call`` records backward's raw return (Functions only)."""
    if isinstance(fn, type) and issubclass(fn, Function):
        return spy(fn, record).apply, fn.apply
    assert callable(fn)
    return fn, fn
