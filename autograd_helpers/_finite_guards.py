"""What central differences need from ``f`` beyond a formula, checked in one place.

Kept apart from ``finite_differences`` (the formula). A central difference subtracts two
evaluations of ``f`` and divides by ``2 eps``: it means something only when ``f`` is one
fixed function. A random ``f`` (dropout in train mode) draws another mask at every
evaluation, and the difference of two masks, divided by ``2 eps``, is noise of size
``1 / eps``: every evaluation here starts from the same random state, and a warning says
so. A module in train mode that updates buffers (batch norm's running statistics) would
update them at every evaluation: the modules ``f`` reaches are put back afterwards. And a
float32 (or float16) point rounds each value to about ``u |f|``, which the division by
``2 eps`` magnifies: a warning gives the size. And the sweep's steps must be positive numbers.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.parameter import is_lazy

from autograd_helpers._common.reach import modules_reachable
from autograd_helpers._profiling_state import every_module, modules_as_found
from autograd_helpers._randomness import output_is_random, random_states_kept, seed_everything

__all__ = [
    "module_dtypes",
    "positive_steps",
    "precision_note",
    "require_module_dtype",
    "steady",
]


@contextlib.contextmanager
def steady(caller: str, f: Callable[..., Any], args: Sequence[object]) -> Iterator[Any]:
    """Yield ``f`` made repeatable: each call starts from the random state found at the start,
    and from the modules ``f`` reaches as the caller has them.

    The caller's random states (torch's, Python's, NumPy's) and those modules (their
    buffers, flags, parameters and other attributes: a counter, a cursor, a cache, a list of
    hooks, an attribute set on a parameter) are put back afterwards, and before every call:
    a forward that moves a cursor (detectron2's ``CycleBatchNormList``) is one function.
    When ``f``'s values change with the random draws from torch's generator (judged from
    its values: a model that only reseeds torch is not random), a warning says that every
    evaluation used the same draw; an ``f`` that gives another value at the same point even
    so (its own ``torch.Generator``, NumPy's or Python's random, a global counter) is
    refused with a ``ValueError``: ``f`` is evaluated twice at the first points to find
    out. A lazy module not yet materialised is refused with a ``ValueError``.
    """
    modules = modules_reachable(f, *args)
    _refuse_lazy(caller, every_module(modules))
    with random_states_kept(), modules_as_found(modules) as found:
        start = torch.get_rng_state()
        drew: list[bool] = []
        calls: list[None] = []

        def from_found(*inputs: Any) -> Any:
            found.reset()  # a cursor or a cache a call moved must not move the next one
            return f(*inputs)

        def repeatable(*inputs: Any) -> Any:
            # The first point and the first perturbed ones are evaluated twice: an f random
            # only away from the point (`x + random.random() if x.sum() > 1`) is found too.
            checked = len(calls) < _TWICE
            calls.append(None)
            again = [_copy(x) for x in inputs] if checked else None  # before f changes them
            probe = [_copy(x) for x in inputs] if not drew else None
            torch.set_rng_state(start)
            value = from_found(*inputs)
            if again is not None:
                _require_same(caller, from_found, value, again, start)
            if probe is not None:
                moved = not torch.equal(start, torch.get_rng_state())
                drew.append(moved and _random(from_found, probe))
                if drew[0]:
                    warnings.warn(
                        f"{caller}(): f draws random numbers (dropout in train mode, say): "
                        "every evaluation started from the same random state, so these are "
                        "the differences of f with one fixed draw (one dropout mask); for "
                        "the deterministic function, call model.eval() first",
                        stacklevel=4,
                    )
            return value

        yield repeatable


def _random(f: Callable[..., Any], inputs: list[Any]) -> bool:
    """Whether ``f``'s values at ``inputs`` change with its random draws: judged from the
    values, since an ``f`` may move torch's random state without being random (a model
    that reseeds torch in its forward, as revtorch's ``fix_random_seed`` does)."""

    def run(seed: int) -> list[Tensor]:
        seed_everything(seed)
        with torch.no_grad():
            return _flat(f(*[_copy(x) for x in inputs]))

    def same(a: list[Tensor], b: list[Tensor]) -> bool:
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))

    return output_is_random(run, 0, same)


_TWICE = 3  # evaluations checked twice: the point, then one step either side of it


def _refuse_lazy(caller: str, modules: list[torch.nn.Module]) -> None:
    """Refuse an ``f`` whose modules are lazy and not yet materialised (``nn.LazyLinear``):
    its first call would shape them from a perturbed copy, and putting them back afterwards
    would leave a module that no longer runs."""
    lazy = [
        type(m).__name__
        for m in modules
        if any(is_lazy(t) for t in (*m.parameters(recurse=False), *m.buffers(recurse=False)))
    ]
    if lazy:
        raise ValueError(
            f"{caller}(): f uses a {lazy[0]} whose lazy parameters are not initialised yet: "
            "call it once (model(x)) to materialise them before taking differences"
        )


def _copy(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, Tensor) else value


def _flat(value: Any) -> list[Tensor]:
    values = value if isinstance(value, tuple | list) else (value,)
    return [v.detach().clone() for v in values if isinstance(v, Tensor)]


def _equal(a: Tensor, b: Tensor) -> bool:
    """The same values, NaN where the other has NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


def _require_same(
    caller: str, f: Callable[..., Any], value: Any, inputs: list[Any], start: Tensor
) -> None:
    """Refuse an ``f`` that gives another value at the same point from the same torch random
    state: a random ``f`` with its own generator, NumPy's or Python's, or one with memory."""
    first = _flat(value)
    torch.set_rng_state(start)
    with torch.no_grad():
        second = _flat(f(*inputs))
    same = len(first) == len(second) and all(
        _equal(a, b) for a, b in zip(first, second, strict=True)
    )
    if not same:
        raise ValueError(
            f"{caller}(): f returned different values when evaluated twice at the same point "
            "from the same torch random state (it draws from its own torch.Generator, NumPy "
            "or Python's random, or keeps state between calls), so its differences would be "
            "noise divided by eps, not derivatives: make f deterministic (seed its generator "
            "inside f, or pass it a fixed noise tensor)"
        )


def precision_note(caller: str, args: Sequence[object], eps: float) -> None:
    """Warn when a point is in a dtype coarser than float64: how large rounding can get."""
    for i, x in enumerate(args):
        if isinstance(x, Tensor) and x.is_floating_point() and x.dtype != torch.float64:
            unit = torch.finfo(x.dtype).eps
            name = str(x.dtype).removeprefix("torch.")
            warnings.warn(
                f"{caller}(): inputs[{i}] is {name}: each value of f is rounded to about "
                f"{unit:.1e} × |f|, and the division by 2·eps = {2 * eps:.0e} magnifies that "
                f"to about {unit / (2 * eps):.0e} × |f| in each derivative; for digits you can "
                "trust, pass float64 inputs (x.double(), and model.double())",
                stacklevel=3,
            )
            return


def require_module_dtype(caller: str, f: Callable[..., Any], dtype: torch.dtype) -> None:
    """Refuse a point in ``dtype`` for an ``f`` whose modules hold another floating dtype."""
    for module in modules_reachable(f):
        held = {
            t.dtype
            for t in (*module.parameters(), *module.buffers())
            if t.is_floating_point() and t.dtype != dtype
        }
        if held:
            own = ", ".join(sorted(str(d).removeprefix("torch.") for d in held))
            name = str(dtype).removeprefix("torch.")
            raise ValueError(
                f"{caller}(): dtypes holds {name}, but f uses a {type(module).__name__} whose "
                f"parameters are {own}: the point would be {name} and the module {own}, a "
                f"mix no dtype measures; pass dtypes=({_listed(held)}) or convert the module "
                f"first (model.to(torch.{name}))"
            )


def module_dtypes(f: Callable[..., Any]) -> tuple[torch.dtype, ...]:
    """The floating dtypes of the parameters of the modules ``f`` reaches (none: ``()``)."""
    held = {
        t.dtype
        for module in modules_reachable(f)
        for t in module.parameters()
        if t.is_floating_point()
    }
    return tuple(sorted(held, key=str))


def _listed(held: set[torch.dtype]) -> str:
    return ", ".join(str(d) for d in sorted(held, key=str)) + ","


def positive_steps(caller: str, eps_values: object) -> list[float]:
    """``eps_values`` as a list of floats: any 1-D sequence, array or tensor of positives."""
    tolist = getattr(eps_values, "tolist", None)  # a NumPy array or a tensor: Python floats
    one_dimensional = getattr(eps_values, "ndim", 1) == 1
    steps = tolist() if callable(tolist) and one_dimensional else eps_values
    if (
        not one_dimensional
        or not isinstance(steps, Iterable)
        or isinstance(steps, str | bytes | dict)
    ):
        shape = tuple(getattr(eps_values, "shape", ()))
        raise ValueError(
            f"{caller}(): eps_values must be a 1-D sequence, array or tensor of positive "
            f"numbers, got {type(eps_values).__name__}" + (f" of shape {shape}" if shape else "")
        )
    if not (steps := list(steps)):
        raise ValueError(f"{caller}(): eps_values must hold at least one positive number")
    positive = []
    for eps in steps:
        try:  # a Python or NumPy number; True is not one here
            value = math.nan if isinstance(eps, bool | str | bytes) else float(eps)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{caller}(): eps_values must be positive numbers, got {eps!r}")
        positive.append(value)
    return positive
