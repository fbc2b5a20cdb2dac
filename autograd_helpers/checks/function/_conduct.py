"""How a learner's Function behaves beyond its numbers: what it changes, reseeds, calls.

Part of ``check_function`` (:mod:`._steps`). Right numbers can come from code that:

- changes what outlives the call: a global variable, a global list or dict it appends to,
  a notebook tensor it reaches by name, a class attribute
  (:class:`~autograd_helpers.checks._contain.contained.Contained` snapshots and restores them;
  :data:`WORDS` says each change);
- sets ``.grad`` of a tensor itself (``x.grad = ...``), where autograd adds its own;
- reseeds a global random number generator (``torch.manual_seed``, ``torch.set_rng_state``,
  ``np.random.seed``, ``random.seed``), so that the notebook's next "random" numbers are
  always the same (the runner puts the states back; drawing numbers is no reseed, nor is a
  state set back or ``fork_rng``: :mod:`._seeding`);
- hides a NaN with ``nan_to_num`` (or ``torch.where`` on ``isnan``), or calls autograd
  inside ``backward`` where the exercise is to write the derivative: numbers right, a note
  (not a failure);
- marks its input dirty (``ctx.mark_dirty``): right for an in-place Function, a note;

:func:`conduct` watches a stage for the calls (a profile function, chained to any Python
profiler already on, as :func:`~autograd_helpers.checks._contain.watch.watching` sets one).
"""

from __future__ import annotations

import contextlib
import inspect
import random
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx

from autograd_helpers._common.globals import GlobalState
from autograd_helpers.checks._contain.contained import Contained, Words
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._seeding import (
    TorchSeeding,
    announced,
    by_learner,
    numpy_reseeded,
)

__all__ = [
    "WORDS",
    "Conduct",
    "conduct",
    "conduct_notes",
    "grad_set_verdict",
    "stage_verdict",
    "tensors_on_ctx",
]

# How check_function says what a forward or backward changed that outlives the call.
WORDS = Words(
    container="it changed {label} (it held {before} items, now {now})",
    tensor="it changed {label} ({what})",
    reached="the notebook's tensor {label}",
    attribute="",
)
# Methods of torch's global generator that reseed it or set its state, as the learner calls them.
_SEEDING = {
    "manual_seed": "`torch.manual_seed`",
    "seed": "`torch.seed`",
    "set_state": "`torch.set_rng_state`",
}
_PYTHON_SEED, _PYTHON_SETSTATE = random.Random.seed.__code__, random.Random.setstate.__code__
_NUMPY_SEEDING = {"seed": "`np.random.seed`", "set_state": "`np.random.set_state`"}
# Whose generator each call reseeds, and how to draw repeatable numbers without it.
_GENERATORS = {
    "`torch": (
        "torch's random number generator",
        "(`g = torch.Generator().manual_seed(0)`, then `torch.rand(..., generator=g)`)",
    ),
    "`np.": (
        "NumPy's global random number generator",
        "(`rng = np.random.default_rng(0)`, then `rng.random(...)`)",
    ),
    "`random": (
        "Python's global random number generator",
        "(`rng = random.Random(0)`, then `rng.random()`)",
    ),
}
# torch.func's transforms that differentiate (reverse mode, and forward mode: jvp, linearize)
_FUNC = ("grad", "grad_and_value", "vjp", "jacrev", "hessian", "jvp", "linearize", "jacfwd")
_NAN_TO_NUM = frozenset({"nan_to_num", "nan_to_num_"})
_MASKING = frozenset({"where", "masked_fill", "masked_fill_"})  # with isnan: a NaN patched


def _code_of(function: Any) -> CodeType:
    code = getattr(inspect.unwrap(function), "__code__", None)
    assert isinstance(code, CodeType)
    return code


@dataclass
class Conduct:
    """What a stage of learner code called, as :func:`conduct` saw it."""

    reseeded: bool = False  # a global generator reseeded or its state set, and left so
    reseeded_by: str = ""  # the call, as the learner wrote it: "`torch.manual_seed`"
    nan_to_num: bool = False
    isnan: bool = False  # torch.isnan / Tensor.isnan
    masked: bool = False  # torch.where / masked_fill: with isnan, a NaN patched by hand
    passes: int = 0  # torch.autograd.grad / backward / torch.func calls by learner code
    engines: list[str] = field(default_factory=list)  # those calls, as the learner wrote them
    marked_dirty: bool = False


@contextlib.contextmanager
def conduct() -> Iterator[Conduct]:
    """Watch a block for reseeding, ``nan_to_num``, backward passes and ``mark_dirty``.

    Example::

        >>> from autograd_helpers._common.runner import run_learner_code
        >>> with conduct() as seen:
        ...     _ = run_learner_code(lambda: torch.manual_seed(3))
        >>> seen.reseeded
        True
    """
    seen = Conduct()
    engines = {
        _code_of(torch.autograd.grad): "`torch.autograd.grad`",
        _code_of(torch.autograd.backward): "`.backward()`",
        **{_code_of(getattr(torch.func, n)): f"`torch.func.{n}`" for n in _FUNC},
    }
    dirty = _code_of(FunctionCtx.mark_dirty)
    forked = _code_of(torch.random.fork_rng)  # sets the state back: no reseed
    restore = _code_of(GlobalState.restore)
    torch_seeding = TorchSeeding()
    previous = sys.getprofile()
    chained = previous if inspect.isfunction(previous) or inspect.ismethod(previous) else None

    def reseeded(call: str) -> None:
        seen.reseeded, seen.reseeded_by = True, seen.reseeded_by or call

    def seen_numpy(call: str) -> None:
        numpy_calls.append(call)

    numpy_calls: list[str] = []  # np.random.seed / set_state as the learner named them

    def torch_state_call(frame: FrameType, name: str) -> None:
        caller = frame.f_back
        if caller is not None and caller.f_code is restore:
            # the runner puts the state back: the learner's call has ended here
            kept = caller.f_locals.get("self")
            if not isinstance(kept, GlobalState):
                return
            if torch_seeding.call and torch_seeding.left_changed(kept.rng):
                reseeded(torch_seeding.call)
            if kept.numpy_rng is not None and numpy_reseeded(kept.numpy_rng):
                reseeded(numpy_calls[0] if numpy_calls else "`np.random.seed`")
            torch_seeding.call, torch_seeding.states = "", []
        elif by_learner(frame, forked):
            torch_seeding.call = torch_seeding.call or _SEEDING[name]
            torch_seeding.states.append(torch.get_rng_state())

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if chained is not None:
            chained(frame, event, arg)
        if event == "c_call":
            name = getattr(arg, "__name__", None)
            if name in _SEEDING and getattr(arg, "__self__", None) is torch.default_generator:
                torch_state_call(frame, name)
            elif name in _NAN_TO_NUM:
                seen.nan_to_num = seen.nan_to_num or by_learner(frame, forked)
            elif name == "isnan":
                seen.isnan = seen.isnan or by_learner(frame, forked)
            elif name in _MASKING:
                seen.masked = seen.masked or by_learner(frame, forked)
        elif event == "call":
            code = frame.f_code
            engine = engines.get(code)
            if engine is not None and by_learner(frame.f_back, forked):
                seen.passes += 1
                seen.engines.append(engine)
            elif code is dirty:
                seen.marked_dirty = True
            elif code is forked and frame not in torch_seeding.entered:
                torch_seeding.entered.append(frame)  # the state it will set back
                torch_seeding.states.append(torch.get_rng_state())
            elif (
                (code is _PYTHON_SEED or code is _PYTHON_SETSTATE)
                and frame.f_locals.get("self") is getattr(random, "_inst", None)
                and by_learner(frame.f_back, forked)
            ):
                reseeded("`random.seed`" if code is _PYTHON_SEED else "`random.setstate`")

    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    originals = {name: getattr(numpy_random, name, None) for name in _NUMPY_SEEDING}
    # torch's state moved on for the stage (and put back after it): a state the notebook
    # saved before (`torch.set_rng_state(STATE0)`) is then a change, not a coincidence
    notebook_state = torch.get_rng_state()
    torch.rand(7)  # not deterministic_verdict's one draw: forward's second run differs
    numpy_state = None if numpy_random is None else numpy_random.get_state()
    if numpy_random is not None:
        numpy_random.random_sample(3)
    sys.setprofile(profile)
    try:
        for name, original in originals.items():  # Cython functions: no profile event
            if original is not None:
                setattr(numpy_random, name, announced(original, _NUMPY_SEEDING[name], seen_numpy))
        yield seen
    finally:
        _put_back(previous)
        torch.set_rng_state(notebook_state)
        if numpy_random is not None:
            numpy_random.set_state(numpy_state)
        for name, original in originals.items():
            if original is not None:
                setattr(numpy_random, name, original)


def _put_back(previous: Any) -> None:
    """The profile function that was on before (a C one, cProfile's, cannot be: none)."""
    try:
        sys.setprofile(previous)
    except TypeError:
        sys.setprofile(None)


def stage_verdict(
    trial: Trial, contained: Contained, seen: Conduct, stage: str
) -> CheckResult | None:
    """A reseed, or a change that outlives the call, in ``stage`` (``"forward"``...)."""
    if seen.reseeded:
        call = seen.reseeded_by or "`torch.manual_seed`"
        whose, own = next(v for k, v in _GENERATORS.items() if call.startswith(k))
        return trial.fail(
            f"{stage} reseeds {whose} ({call}).",
            "The generator is global: after every call of your Function the notebook's next "
            "random numbers would be the same ones. The checker put the random state back. "
            f"Random numbers that must repeat come from a generator of their own {own}.",
        )
    changes = contained.changes()
    if not changes:
        return None
    return trial.fail(
        f"{stage} {changes[0].removeprefix('it ')}, which outlives the call.",
        "A Function should change nothing but what it returns. A cache outside `ctx` keeps "
        "tensors (and their graphs) alive after the call, and every call shares it: the next "
        "forward overwrites what an earlier backward still needs. Keep what backward needs "
        "on `ctx` (`ctx.save_for_backward(...)` for tensors). The checker has put it back.",
    )


def _has_grad(t: Tensor) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading `.grad` of a non-leaf warns
        return t.grad is not None


def grad_set_verdict(trial: Trial) -> CheckResult | None:
    """backward set ``.grad`` of a tensor it was handed (its input, a leaf, the output)."""
    names = [*trial.names, *trial.names, *["the output"] * len(trial.outputs)]
    for name, t in zip(names, (*trial.args, *trial.leaves, *trial.outputs), strict=True):
        if isinstance(t, Tensor) and _has_grad(t):
            what = name if name.startswith("the ") else f"its input `{name}`"
            return trial.fail(
                f"backward set `.grad` of {what}.",
                "backward only returns gradients; autograd decides where they go and adds "
                "them into the leaves' `.grad`. Setting `.grad` yourself puts a gradient "
                "where autograd adds its own: a leaf would end up with twice its gradient. "
                "Return the gradient instead.",
            )
    return None


def conduct_notes(trial: Trial, forward: Conduct, backward: Conduct) -> list[str]:
    """Notes for a right answer that got there by a route the exercise does not teach."""
    if not trial.is_function:
        return []
    notes = []
    if forward.marked_dirty:
        notes.append(
            "Note: forward marks its input dirty (`ctx.mark_dirty`): it writes the result "
            "into the caller's tensor, which then no longer holds the input. Right for an "
            "in-place Function (the checker gave it a copy); otherwise return a new tensor."
        )
    if backward.nan_to_num or (backward.isnan and backward.masked):
        call = "calls `nan_to_num`" if backward.nan_to_num else "replaces NaN (`isnan`)"
        notes.append(
            f"Note: backward {call}. It hides a NaN instead of avoiding it, and "
            "it hides every NaN, those of a real bug too: where the formula divides by 0, "
            "use a form that does not (`3 * x**2`, not `3 * x**3 / x`), or choose by the "
            "input (`torch.where(x == 0, ...)`), not by `isnan` of the result."
        )
    if backward.passes:
        transforms = sorted({e for e in backward.engines if e.startswith("`torch.func.")})
        names = ", ".join(transforms) or "`torch.autograd.grad` or `.backward()`"
        notes.append(
            f"Note: backward runs autograd itself ({names}), "
            "so autograd, not your formula, computes the gradient. The numbers are right, "
            "but the exercise is to write the derivative: return `grad_output` times it."
        )
    return notes


def tensors_on_ctx(trial: Trial) -> list[str]:
    """A note for each tensor forward stored as a plain attribute of ``ctx``."""
    if not trial.is_function:
        return []
    node = next((o.grad_fn for o in trial.outputs if o.grad_fn is not None), None)
    attributes = vars(node) if node is not None and hasattr(node, "__dict__") else {}
    return [
        f"Note: forward stored a tensor as `ctx.{name}`. Save tensors with "
        "`ctx.save_for_backward(...)`: it detects in-place changes that would make the "
        "gradient silently wrong, and does not keep the graph alive in a reference cycle."
        for name, value in attributes.items()
        if isinstance(value, Tensor)
    ]
