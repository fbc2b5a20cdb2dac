"""One call of a built-in that :func:`~autograd_helpers.wrap.wrap_builtin` wrapped.

Kept apart from ``wrap`` (the Function and its backward): what the call is made of. Its
arguments with the tensors taken out (in lists, tuples and dicts too), the modules it
reaches and their parameters (the Function's other inputs), and, for a second derivative,
the state its forward started from: the modules' attributes, flags and buffers, and the
random states. The built-in then runs again from exactly that, as forward ran it: a module
whose forward moves a cursor (detectron2's ``CycleBatchNormList`` alternates between two
batch norms with ``self._pos``), or one that draws a seed from Python's ``random`` (revtorch),
computes the same function again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from torch import Tensor, nn

from autograd_helpers._common.reach import reachable
from autograd_helpers._profiling_state import OtherState, modules_as_found
from autograd_helpers._randomness import RandomStates, random_states_kept

__all__ = ["BuiltinCall", "Start"]


def _tensors_in(value: Any) -> Iterator[Tensor]:
    """The tensors in an argument: itself, or in its lists, tuples and dicts, in order."""
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


def _rebuilt(value: Any, leaves: Iterator[Tensor]) -> Any:
    """``value`` with each tensor in it, in :func:`_tensors_in`'s order, the next leaf."""
    if isinstance(value, Tensor):
        return next(leaves)
    if isinstance(value, list):
        return [_rebuilt(item, leaves) for item in value]
    if isinstance(value, tuple):
        items = [_rebuilt(item, leaves) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)  # namedtuple
    if isinstance(value, dict):
        return {key: _rebuilt(item, leaves) for key, item in value.items()}
    return value


class BuiltinCall:
    """The built-in ``fn`` with ``args`` and ``kwargs`` bound but their tensors (``given``),
    which each call replaces (:meth:`__call__`); ``modules``, the modules calling it reaches
    (an argument, ``fn`` itself, a closure's), and ``used``, their parameters and the other
    tensors requiring grad it reaches, which it uses as they are."""

    def __init__(self, fn: Callable[..., Any], label: str, args: Any, kwargs: Any) -> None:
        self.fn, self.label, self.args, self.kwargs = fn, label, args, kwargs
        self.given = list(_tensors_in((args, kwargs)))
        found = [item for _, item in reachable(fn, args, kwargs, kinds=(Tensor, nn.Module))]
        self.modules = [item for item in found if isinstance(item, nn.Module)]
        skip = {id(t) for t in self.given}
        used: dict[int, Tensor] = {}
        for item in found:
            for t in item.parameters() if isinstance(item, nn.Module) else [item]:
                if t.requires_grad and id(t) not in skip:
                    used.setdefault(id(t), t)
        self.used = list(used.values())

    def __call__(self, tensors: Sequence[Tensor]) -> Any:
        new_args, new_kwargs = _rebuilt((self.args, self.kwargs), iter(tensors))
        result = self.fn(*new_args, **new_kwargs)
        outputs = result if isinstance(result, tuple) else (result,)
        if not outputs or not all(isinstance(o, Tensor) for o in outputs):
            raise TypeError(
                f"wrap_builtin({self.label}): the built-in must return a tensor or a tuple of "
                f"tensors, got {type(result).__name__}"
            )
        return result


class Start:
    """What a forward of ``call`` started from: its modules' attributes, flags and buffers,
    and the random states. Taken before the forward runs."""

    def __init__(self, call: BuiltinCall) -> None:
        self.call = call
        self.modules = OtherState(call.modules, buffers=True)
        self.random = RandomStates()

    def run_again(self, tensors: Sequence[Tensor]) -> Any:
        """``call`` on ``tensors``, from this start; everything is put back afterwards (the
        modules run on copies of their buffers: batch norm counts the batch once)."""
        with random_states_kept(), modules_as_found(self.call.modules):
            self.modules.restore()
            self.random.restore()
            return self.call(tensors)
