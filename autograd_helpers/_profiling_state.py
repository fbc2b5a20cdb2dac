"""The caller's state a tool puts back besides tensors: shared by every tool that runs modules.

``kept_as_found`` (``_common.state``) puts back a module's parameters, buffers, flags and
submodules, and an optimizer's state. Running a model changes more than that:

- a module's other attributes, its submodules' too: a counter (``self.calls += 1``), a
  cursor (detectron2's ``CycleBatchNormList`` moves ``self._pos`` at every call), a cache
  (``self.cache = x``), a list it appends to, a hook ``fn`` registered on it, an attribute
  forward creates (xformers' ``record_rng`` sets ``self.cpu_state``);
- attributes set on its parameters and buffers (BinaryNet's ``self.bias.org = ...``);
- a gradient scaler's state (``torch.amp.GradScaler``, ``torch.cuda.amp.GradScaler``): its
  scale grows or backs off at every ``update()``, and a fresh scaler makes its scale on
  first use;
- the environment variables the profiler's log levels are set through.

:class:`OtherState` is the module part of that; :class:`ModulesFound` adds what
``kept_as_found`` keeps, and puts all of it back as often as needed, so that a tool that
runs the caller's modules several times (``mode_table``'s rows, each evaluation of
``central_difference``) starts every run from the caller's state:
:func:`modules_as_found`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from torch import Tensor, nn
from torch.amp import GradScaler
from torch.nn.parameter import is_lazy
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from autograd_helpers._common.reach import reachable
from autograd_helpers._common.state import ModuleState, kept_as_found

__all__ = [
    "ModulesFound",
    "OtherState",
    "every_module",
    "modules_as_found",
    "scalers_reachable",
    "state_kept",
]

# What kept_as_found puts back itself, by name: a module's tensors, its children, its flag.
_KEPT_ELSEWHERE = frozenset({"_parameters", "_buffers", "_modules", "training"})


def scalers_reachable(*roots: object) -> list[GradScaler]:
    """The gradient scalers calling ``roots`` can reach by name (a training step's ``scaler``)."""
    return [item for _, item in reachable(*roots, kinds=(GradScaler,))]


def every_module(modules: Iterable[nn.Module]) -> list[nn.Module]:
    """``modules`` and all their submodules, each once, in order."""
    return list(dict.fromkeys(m for root in modules for m in root.modules()))


def _shallow(value: Any) -> Any:
    """A copy of a container's contents (to put back into the same object), or ``None``."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):  # an OrderedDict of hooks, a defaultdict: same type back
        return dict(value)
    if isinstance(value, set):
        return set(value)
    return None


def _put_back(value: Any, contents: Any) -> None:
    if isinstance(value, list):
        value[:] = contents
    elif isinstance(value, dict | set):
        value.clear()
        value.update(contents)


class _Attributes:
    """An object's attributes but ``skipped``: each value, and the contents of a list, dict
    or set (put back into the same object); those added later are removed."""

    def __init__(self, owner: object, skipped: frozenset[str] = frozenset()) -> None:
        self.owner, self.skipped = owner, skipped
        self.values = {k: v for k, v in vars(owner).items() if k not in skipped}
        self.contents = {k: _shallow(v) for k, v in self.values.items()}

    def restore(self) -> None:
        attributes = vars(self.owner)
        for name in [k for k in attributes if k not in self.skipped]:
            if name not in self.values:
                del attributes[name]  # added meanwhile
        for name, value in self.values.items():
            attributes[name] = value
            if self.contents[name] is not None:
                _put_back(value, self.contents[name])


class OtherState:
    """What ``kept_as_found`` does not keep of ``modules`` and their submodules: their
    train/eval flags, their other attributes, and the attributes set on their parameters
    and buffers; with ``buffers``, also copies of the buffers' values.

    :meth:`restore` puts them back, as often as needed; the buffers' values go into fresh
    tensors in the modules' tables, never into the tensors the modules hold (a graph may
    have saved those): only inside ``kept_as_found``, which puts the modules' own back.
    """

    def __init__(self, modules: Iterable[nn.Module], *, buffers: bool = False) -> None:
        everything = every_module(modules)
        self._flags = [(module, module.training) for module in everything]
        self._modules = [_Attributes(module, _KEPT_ELSEWHERE) for module in everything]
        tables = [(m, m._parameters, m._buffers) for m in everything]
        tensors = {
            id(t): t
            for _, parameters, found in tables
            for t in itertools.chain(parameters.values(), found.values())
            if t is not None
        }
        self._tensors = [_Attributes(t) for t in tensors.values()]
        self._buffers = [
            (found, key, buffer.detach().clone())
            for _, _, found in (tables if buffers else [])
            for key, buffer in found.items()
            if buffer is not None and not is_lazy(buffer)
        ]

    def restore(self) -> None:
        for kept in (*self._modules, *self._tensors):
            kept.restore()
        for module, training in self._flags:
            module.training = training
        for table, key, values in self._buffers:
            table[key] = values.clone()


class ModulesFound:
    """``modules`` (and their submodules) as found: what ``kept_as_found`` keeps and
    :class:`OtherState`, put back by :meth:`restore` as often as needed."""

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        modules = list(modules)
        self._tensors = ModuleState(modules)
        self._other = OtherState(modules)

    def restore(self) -> None:
        """Put the modules back as found: their own buffers, not copies."""
        self._tensors.restore()
        self._other.restore()

    def reset(self) -> None:
        """Put the modules back as found, then give them copies of their buffers to run on
        (a train-mode batch norm updates its running statistics in place)."""
        self.restore()
        self._tensors.lend_buffer_copies()


@contextlib.contextmanager
def modules_as_found(
    modules: Iterable[nn.Module], optimizers: Iterable[Optimizer | LRScheduler] = ()
) -> Iterator[ModulesFound]:
    """Run a block with the modules on copies of their buffers, then put the modules back
    as found (:class:`ModulesFound`), and the optimizers' and schedulers' state.

    The block gets the :class:`ModulesFound`: its :meth:`~ModulesFound.reset` starts
    another run from the caller's state.

    Example::

        >>> layer = torch.nn.Linear(2, 2)
        >>> with modules_as_found([layer]):
        ...     layer.cache = torch.ones(2)  # what a forward may leave
        >>> hasattr(layer, "cache")
        False
    """
    with kept_as_found((), optimizers):  # loaded back after the parameters: their dtype
        found = ModulesFound(modules)
        found.reset()
        try:
            yield found
        finally:
            found.restore()


@contextlib.contextmanager
def state_kept(
    modules: Iterable[nn.Module], scalers: Iterable[GradScaler], environment: Mapping[str, str]
) -> Iterator[None]:
    """Run a block, then put back the modules' :class:`OtherState` (their submodules' too),
    the scalers' state and the environment variables named in ``environment``."""
    other = OtherState(modules)
    scaled = [(scaler, copy.deepcopy(vars(scaler))) for scaler in scalers]
    variables = {key: os.environ.get(key) for key in environment}
    try:
        yield
    finally:
        other.restore()
        for scaler, state in scaled:
            vars(scaler).clear()
            vars(scaler).update(state)
        for key, value in variables.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def differentiable_outputs(output: object) -> list[Tensor]:
    """The tensors that require grad in what ``fn`` returned: the tensor itself, or those a
    tuple, list or dict holds, at any depth (an LSTM's ``(output, (h, c))``, a dict of fields)."""
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(output) if isinstance(t, Tensor) and t.requires_grad]


def described(output: object) -> str:
    """What ``fn`` returned, in a few words for an error message."""
    if isinstance(output, Tensor):
        return "a tensor that does not require grad"
    return f"a {type(output).__name__} with no tensor that requires grad"
