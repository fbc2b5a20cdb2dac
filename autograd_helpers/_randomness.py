"""Whether a computation is random, judged from its outputs; the random states kept.

Shared by ``modes`` (the table's "dropout active") and ``finite_differences`` (a random
``f``). Random-number use is not the test: a deterministic model may reseed torch inside
its forward (revtorch's ``fix_random_seed`` draws a seed from Python's ``random`` and calls
``torch.manual_seed``) or draw numbers it never uses. The test is whether the output
changes when the draws change: another seed, and, for a draw of zeros and ones (every
dropout's mask is one), the opposite draw, which a dropout with a small ``p`` on a small
output may otherwise keep every element for, seed after seed.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["RandomStates", "output_is_random", "random_states_kept", "seed_everything"]

Output = TypeVar("Output")

# Another seed or two besides the first: a small dropout can draw the same mask twice.
_OTHER_SEEDS = 3
_aten = torch.ops.aten
_BERNOULLI = (_aten.bernoulli_, _aten.bernoulli)


class RandomStates:
    """torch's CPU generator, Python's ``random`` and (when imported) NumPy's global
    generator, as they are now: :meth:`restore` sets them back to that, as often as needed.

    Example::

        >>> states = RandomStates()
        >>> first = torch.rand(1)
        >>> states.restore()
        >>> torch.equal(torch.rand(1), first)
        True
    """

    def __init__(self) -> None:
        self.torch = torch.get_rng_state()
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = None if numpy is None else numpy.random.get_state()

    def restore(self) -> None:
        torch.set_rng_state(self.torch)
        random.setstate(self.python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy is not None:
            numpy.random.set_state(self.numpy)


@contextlib.contextmanager
def random_states_kept() -> Iterator[None]:
    """Run a block, then put back torch's CPU generator, Python's ``random`` and NumPy's
    global generator (when NumPy is imported) as they were.

    Example::

        >>> before = random.getstate()
        >>> with random_states_kept():
        ...     seed_everything(3)
        >>> random.getstate() == before
        True
    """
    states = RandomStates()
    try:
        yield
    finally:
        states.restore()


def seed_everything(seed: int) -> None:
    """Seed torch's, Python's and (when imported) NumPy's global generators with ``seed``."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


class _Draws(TorchDispatchMode):
    """Notes the operations that draw from a torch generator; with ``flip``, gives every
    draw of zeros and ones (``bernoulli``) the opposite value where it could have had it."""

    def __init__(self, flip: bool = False) -> None:
        super().__init__()
        self.flip = flip
        self.seeded = False
        self.bernoulli = False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded not in func.tags:
            return result
        self.seeded = True
        if func.overloadpacket is _aten.native_dropout:  # (output, mask), fused dropout
            self.bernoulli = True
            return _opposite_dropout(args, result) if self.flip else result
        if func.overloadpacket not in _BERNOULLI:
            return result
        self.bernoulli = True
        if not self.flip:
            return result
        chance = _probability(func, args, kwargs)
        # Only where the other value was possible: bernoulli(1.0) always draws 1.
        possible = (chance > 0) & (chance < 1)
        opposite = torch.where(possible.to(result.device), 1 - result, result).to(result.dtype)
        if func.overloadpacket is _aten.bernoulli_ or "out" in kwargs:
            return result.copy_(opposite)
        return opposite


def _probability(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
    """The probability of a one in a ``bernoulli`` call, as a tensor."""
    if func.overloadpacket is _aten.bernoulli and func._overloadname in ("default", "out"):
        chance = args[0]  # bernoulli(probabilities)
    else:  # bernoulli_(p), bernoulli(self, p)
        chance = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    return torch.as_tensor(chance, dtype=torch.float64)


def _opposite_dropout(args: tuple[Any, ...], result: Any) -> Any:
    """``native_dropout``'s result with the opposite mask, where one was possible."""
    source, p = args[0], float(args[1])
    train = args[2] if len(args) > 2 else True
    if train is False or not 0 < p < 1:
        return result
    mask = ~result[1]
    return source * mask / (1 - p), mask


def output_is_random(
    run: Callable[[int], Output], seed: int, same: Callable[[Output, Output], bool]
) -> bool:
    """Whether ``run(seed)``'s output changes with the random draws inside it.

    ``run`` seeds what it needs from its argument (:func:`seed_everything`) and returns an
    output that ``same`` compares. Random when another seed changes the output, or when
    the opposite draw of zeros and ones does; a ``run`` that drew nothing from a torch
    generator is tried with one other seed only (Python's or NumPy's random shows there).

    Example::

        >>> def dropout(seed):
        ...     seed_everything(seed)
        ...     return torch.nn.functional.dropout(torch.ones(2), 0.01)
        >>> output_is_random(dropout, 0, torch.equal)  # keeps both, seed after seed
        True
        >>> output_is_random(lambda seed: torch.ones(2), 0, torch.equal)
        False
    """
    with _Draws() as draws:
        first = run(seed)
    for offset in range(1, _OTHER_SEEDS + 1):
        if not same(first, run(seed + offset)):
            return True
        if not draws.seeded:
            return False
    if not draws.bernoulli:
        return False
    with _Draws(flip=True):
        flipped = run(seed)
    return not same(first, flipped)
