"""The named checks both of chapter 02's function exercises run, one small function each.

Used by :mod:`._loop` and :mod:`._hvp`, whose tables put these in order
with their own. Each takes a :class:`~autograd_helpers.checks._core.problems.Run` and returns a
:class:`~autograd_helpers.checks._core.problems.Finding` when it finds a problem, ``None``
otherwise. The factories (:func:`refused`, :func:`raised`, :func:`finite_differences`...) take
what differs between the exercises: the shortcuts' names, the hints, the words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from autograd_helpers._common.runner import OutputLimitError
from autograd_helpers.checks._core.feedback import outlived, printed_lines
from autograd_helpers.checks._core.numeric import Mismatch, worst_mismatch
from autograd_helpers.checks._core.problems import Check, Finding, Run

__all__ = [
    "FORWARD_MODE",
    "Hints",
    "changed_arguments",
    "changed_notebook",
    "compare",
    "finite_differences",
    "left_settings",
    "lower_precision",
    "no_derivative",
    "not_a_tensor",
    "raised",
    "refused",
    "wrong_dtype",
]

# Forward-mode routes: a derivative without a backward pass.
FORWARD_MODE = ("torch.func.jvp", "torch.func.linearize", "torch.autograd.forward_ad.make_dual")
# How close is right, per dtype: (rtol, atol relative to the largest entry of the answer).
# float64's are near its rounding (16 digits), as check_function's are: another right route
# differs in the last bits only, and an answer off by one part in a million is wrong.
_TOLERANCE = {torch.float64: (1e-7, 1e-12), torch.float32: (1e-4, 1e-5)}


def refused(shortcuts: Mapping[str, str], why: str) -> Check:
    """A check that fails a run calling one of ``shortcuts`` (name -> what it does)."""

    def shortcut(run: Run) -> Finding | None:
        taken = run.usage.took(tuple(shortcuts))
        if taken is None:
            return None
        return Finding(f"it calls `{taken}`, which {shortcuts[taken]}.", (why,))

    return shortcut


Hints = tuple[tuple[str, str | Callable[[Run], str]], ...]


def raised(hints: Hints) -> Check:
    """A check that fails a run that raised, with the hint whose pattern is in the message
    (a hint may be a function of the run: what it says depends on the problem)."""

    def exception(run: Run) -> Finding | None:
        error = run.outcome.error
        if error is None:
            return None
        where = (error.where,) if error.where else ()
        on = f"on {run.problem.description}"
        if isinstance(error.exception, OutputLimitError):
            return Finding(f"{on} it printed too much.", (str(error.exception), *where))
        message = str(error.exception)
        found = next((h for pattern, h in hints if pattern in message), None)
        hint = found(run) if callable(found) else found
        details = (error.describe(), *where, *printed_lines(run.outcome.printed))
        return Finding(f"{on} it raised an exception.", (*details, *([hint] if hint else [])))

    return exception


def left_settings(run: Run) -> Finding | None:
    """A global setting the call left changed (the shared snapshot's: grad and anomaly mode,
    dtype, threads, flushing denormals, deterministic algorithms...; saved-tensor hooks), a
    reseed or random numbers drawn
    (:class:`~autograd_helpers.checks._contain.global_calls.GlobalCalls`)."""
    changes = (*run.outcome.side_effects, *run.settings_changes)
    if not changes:
        return None
    title, advice = outlived("your function", changes)
    return Finding(title, (advice,))


def lower_precision(run: Run) -> Finding | None:
    """``f`` evaluated in a dtype less precise than ``x``'s (``x.float()``)."""
    if run.usage.lower_precision is None:
        return None
    low = str(run.usage.lower_precision).removeprefix("torch.")
    mine = str(run.problem.x.dtype).removeprefix("torch.")
    return Finding(
        f"on {run.problem.description} it evaluates f in {low}, a lower precision than x's {mine}.",
        (
            f"Every number then carries {low}'s rounding error, whatever dtype the result is "
            "converted back to: the caller chose x's dtype for its precision. Differentiate "
            "in x's own dtype: `x = x.detach().requires_grad_()`.",
        ),
    )


def changed_notebook(run: Run) -> Finding | None:
    """A global variable, list, tensor or module of the notebook that the call changed."""
    if not run.notebook_changes:
        return None
    return Finding(
        f"your function {run.notebook_changes[0].removeprefix('it ')}.",
        (
            "The checker put it back, but in your notebook it would stay. Return what you "
            "computed and keep the rest local: a tensor kept in a global stays alive, with "
            "its graph, and the next call changes what an earlier result relied on.",
        ),
    )


def changed_arguments(run: Run) -> Finding | None:
    """A change to the tensors the call was given: they are the caller's."""
    if not run.argument_changes:
        return None
    name, _, what = run.argument_changes[0].partition(": ")
    if "requires_grad" in what:
        hint = (
            f"`{name}` is the caller's tensor, and now it requires grad for good. Work on a "
            f"copy that requires grad: `{name} = {name}.detach().requires_grad_()`."
        )
    elif ".grad" in what:
        hint = (
            f"Backward passes filled the caller's `{name}.grad`. Differentiate a copy "
            f"(`{name}.detach().requires_grad_()`), or use `torch.autograd.grad`, which "
            "returns gradients instead of storing them."
        )
    elif "values" in what:
        hint = f"Compute new tensors (`{name} + step`), never `{name}.add_(...)` on the caller's."
    elif "attribute" in what:
        hint = (
            f"`{name}` is the caller's function: an attribute set on it stays (with the "
            "tensors it holds, and their graphs) after the call. Keep what you compute "
            "in local variables and return it."
        )
    else:
        hint = f"Leave the caller's `{name}` as it was: work on a copy."
    return Finding(f"your function changed the `{name}` it was given ({what}).", (hint,))


def finite_differences(why: str) -> Check:
    """A check that fails a run that evaluated ``f`` a step away from ``x``: an estimate."""

    def estimate(run: Run) -> Finding | None:
        moved = run.usage.moved
        if not moved:
            return None
        points = "a point" if moved == 1 else f"{moved} points"
        return Finding(
            f"it evaluates f at {points} a small step away from x: that is finite "
            "differences, an estimate, not a derivative.",
            (why,),
        )

    return estimate


def no_derivative(why: str) -> Check:
    """A check that fails a run that made no backward pass and no forward-mode product."""

    def underived(run: Run) -> Finding | None:
        if run.usage.backward_passes or run.usage.took(FORWARD_MODE):
            return None
        return Finding(f"on {run.problem.description} it runs no backward pass.", (why,))

    return underived


def not_a_tensor(run: Run) -> Finding | None:
    """The result is not a (dense) tensor."""
    value, on = run.value, f"on {run.problem.description}"
    if isinstance(value, Tensor):
        if value.is_meta:
            return Finding(f"{on} it returned a meta tensor, which holds no values.")
        if value.layout == torch.strided:
            return None
        return Finding(f"{on} it returned a {value.layout} tensor.", ("Return a dense tensor.",))
    hint = ""
    if value is None:
        hint = (
            " (did the function end without `return`? `torch.autograd.grad(..., "
            "allow_unused=True)` also gives None, for an input the output does not depend on)"
        )
    elif isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], Tensor):
        hint = " (`torch.autograd.grad` returns a tuple: take its element, `(g,) = ...`)"
    elif isinstance(value, list | tuple):
        hint = " (stack the rows into one tensor: `torch.stack(rows)`)"
    elif isinstance(value, np.ndarray | np.generic):
        hint = " (keep the result in torch: no `.numpy()`)"
    return Finding(f"{on} it returned {_kind(value)}, not a tensor{hint}.")


def _kind(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, np.ndarray | np.generic):
        return "a NumPy value"
    name = type(value).__name__
    return f"a{'n' if name[0] in 'aeiou' else ''} {name}"


def wrong_dtype(run: Run) -> Finding | None:
    """The result's dtype is not ``x``'s."""
    assert isinstance(run.value, Tensor)
    got, want = run.value.dtype, run.problem.x.dtype
    if got == want:
        return None
    on = f"on {run.problem.description}"
    if want == torch.float64 and got == torch.float32:
        hint = (
            "`torch.zeros(...)` and `torch.empty(...)` take the default dtype, float32: "
            "give them `dtype=x.dtype` (or stack the results, which keeps theirs)."
        )
    elif want == torch.float32 and got == torch.float64:
        hint = (
            "Computing in float64 is fine, but return the result in x's dtype "
            "(`.to(x.dtype)`): a caller's float32 should not silently become float64."
        )
    else:
        hint = "Return the result in x's dtype."
    return Finding(f"{on} it returned dtype {got}, expected {want}, the dtype of x.", (hint,))


def compare(run: Run) -> Mismatch | None:
    """Where the (right-shaped, right-dtype) result is off, beyond the dtype's tolerance."""
    assert isinstance(run.value, Tensor)
    want = run.problem.expected
    rtol, atol = _TOLERANCE.get(run.problem.x.dtype, (1e-3, 1e-3))
    scale = float(want.abs().max()) if want.numel() else 1.0
    return worst_mismatch(run.value, want, atol=atol * (scale or 1.0), rtol=rtol)


def nan_hint(mismatch: Mismatch, extra: Callable[[], str] | None = None) -> str | None:
    """A hint for a NaN or inf where the answer is finite, or ``None``."""
    if not (np.isnan(mismatch.got) or np.isinf(mismatch.got)):
        return None
    return extra() if extra else "Look for a division by something that is 0 here."
