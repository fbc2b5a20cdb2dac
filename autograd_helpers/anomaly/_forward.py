"""Watching forward: the ops that make a NaN or an infinity, and those that change a tensor."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from autograd_helpers.anomaly._frames import (
    hook_running,
    learner_frame_now,
    module_forward_running,
    optimizer_running,
)
from autograd_helpers.anomaly._own import OwnBackward, backward_call
from autograd_helpers.anomaly._records import InPlace, Made
from autograd_helpers.anomaly._saved import SavedValues
from autograd_helpers.anomaly._tensors import infinity_in, kind_of, storage_of, version_of

__all__ = ["InPlace", "Made", "Watch"]

MAX_MADE = 64  # non-finite values remembered per run: the first ones explain a NaN
# In-place ops remembered per run: an optimizer's step makes a few per parameter (Adam: 5),
# and the one that matters may come after a model's worth of them.
MAX_INPLACE = 1024


def _op_name(func: Any) -> str:
    name = str(getattr(func, "__name__", func))
    return name.strip("_")


def _tensors(values: Sequence[Any]) -> Iterator[Tensor]:
    """The tensors among ``values``, and inside lists and tuples among them (``torch.cat``)."""
    for value in values:
        if isinstance(value, Tensor):
            yield value
        elif isinstance(value, list | tuple):
            yield from (v for v in value if isinstance(v, Tensor))


def _in_place_by_name(name: str, kwargs: dict[str, Any]) -> bool:
    """Whether an op says that it changes an argument: `add_`, `+=`, `x[0] = 1`, `out=`."""
    dunder = name.startswith("__") and name.endswith("__")
    return (
        (name.endswith("_") and not dunder)
        or name.startswith("__i")
        or name == "__setitem__"
        or name.endswith("(inplace=True)")
        or kwargs.get("out") is not None
    )


def _written(name: str, args: tuple[Any, ...], tensor: Tensor) -> Tensor | None:
    """The part of ``tensor`` that ``y[index] = value`` wrote, as a view of it, or ``None``
    (another op, an index that gives a copy, not a view: a mask, a list)."""
    if name != "__setitem__" or len(args) < 2 or args[0] is not tensor:
        return None
    try:
        with torch.no_grad():
            part = tensor[args[1]]
    except (IndexError, RuntimeError, TypeError, ValueError):
        return None
    same = isinstance(part, Tensor) and storage_of(part) == storage_of(tensor)
    return part if same and part._base is not None else None


def _first_line(heard: Sequence[warnings.WarningMessage]) -> str:
    """What the first of ``heard`` says, without PyTorch's "(Triggered internally at ...)";
    deprecations left out (torch's lazy imports raise some: nothing about the values)."""
    said = [w for w in heard if not issubclass(w.category, DeprecationWarning)]
    if not said:
        return ""
    return str(said[0].message).split(" (Triggered internally")[0].strip()


def _reads_gradient(func: Any) -> bool:
    """Whether ``func`` is the getter of ``Tensor.grad`` (an optimizer reads it)."""
    owner = getattr(func, "__self__", None)
    return getattr(func, "__name__", "") == "__get__" and getattr(owner, "__name__", "") == "grad"


class Watch(TorchFunctionMode):
    """Records the forward ops that make NaN or inf, and every op that changes a tensor.

    With ``keep_saved``, it also copies what each new node saves (:class:`SavedValues`), so
    that a change autograd cannot see (through ``.data``) shows before backward. The
    backward passes fn runs itself are watched node by node (:class:`OwnBackward`), the
    nodes in ``skip`` (the copies standing for fn's inputs) left out.
    """

    def __init__(self, keep_saved: bool = False) -> None:
        super().__init__()
        self.made: list[Made] = []
        self.nan_use: tuple[str, str] | None = None  # first op given a NaN nobody here made
        self.nan_use_after = 0  # how many backward passes fn had run itself by then
        self.inplace: list[InPlace] = []
        self.ops: set[str] = set()  # the names of every op forward called (`where`, `log`)
        self.saved = SavedValues() if keep_saved else None
        self.backwards: list[OwnBackward] = []  # the backward passes fn ran itself
        self.skip: set[Any] = set()
        # `Tensor.register_hook` calls in forward: the node (or leaf) hooked, and the line.
        self.hooks: list[tuple[Any, str]] = []
        # The leaves that require grad forward used (parameters), by id: a backward that
        # must fill `.grad` (through a reentrant checkpoint) puts theirs back afterwards.
        self.leaves: dict[int, Tensor] = {}
        # The warnings recorded meanwhile (`warnings.catch_warnings(record=True)`'s list):
        # those an op raised are noted with it (std's "degrees of freedom is <= 0").
        self.caught: list[warnings.WarningMessage] = []

    @property
    def first_nan(self) -> Made | None:
        return next((made for made in self.made if made.kind == "nan"), None)

    def made_for(self, tensor: Tensor, kind: str) -> Made | None:
        """The record of the op that made ``tensor``'s NaN (or inf), if it made it."""
        return next((m for m in reversed(self.made) if m.kind == kind and m.holds(tensor)), None)

    def first(self, kind: str) -> Made | None:
        return next((made for made in self.made if made.kind == kind), None)

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if backward_call(func):
            own = OwnBackward.start(func, args, kwargs, self.saved)
            self.backwards.append(own)  # kept, should the backward raise
            return own.run(func, args, kwargs, self.skip)
        if getattr(func, "__name__", "") == "register_hook" and args:
            hooked = args[0]
            if isinstance(hooked, Tensor):
                self.hooks.append((hooked.grad_fn or hooked, learner_frame_now()))
        arguments = list(_tensors((*args, *kwargs.values())))
        for tensor in arguments:
            if tensor.requires_grad and tensor.is_leaf:
                self.leaves[id(tensor)] = tensor
        # In place is seen in the version counter, whatever the op is called: `add_`,
        # `__setitem__`, `F.relu(inplace=True)`, `out=`, a change through a view.
        before = [version_of(t) for t in arguments]
        name = str(getattr(func, "__name__", func))  # `add_`, `__setitem__`: as written
        if kwargs.get("inplace") is True:
            name += "(inplace=True)"
        # An op that writes into an argument overwrites what it was given: what it met (an
        # infinity that `mul_(0)` turns into NaN) is read before it runs.
        kinds = [kind_of(t) for t in arguments] if _in_place_by_name(name, kwargs) else None
        heard = len(self.caught)
        result = func(*args, **kwargs)
        self.ops.add(_op_name(func))
        changed: set[int] = set()
        for tensor, version in zip(arguments, before, strict=True):
            after = version_of(tensor)
            if version is not None and after is not None and after > version:
                storage = storage_of(tensor)
                if storage not in changed and len(self.inplace) < MAX_INPLACE:
                    changed.add(storage)
                    self.inplace.append(
                        InPlace(
                            name,
                            learner_frame_now(),
                            tuple(tensor.shape),
                            tensor.dtype,
                            version,
                            tensor,
                            (by_optimizer := optimizer_running()),
                            not _in_place_by_name(name, kwargs),
                            kind_of(tensor) if by_optimizer else "",
                            len(self.backwards),
                            module_forward_running(),
                            _written(name, args, tensor),
                        )
                    )
        if self.saved is not None:
            self.saved.note(_tensors([result]), len(self.inplace))
        if not _reads_gradient(func):  # reading `p.grad` is no op of forward
            warned = _first_line(self.caught[heard:])
            self._note_non_finite(_op_name(func), arguments, result, kwargs, kinds, warned)
        return result

    def _note_non_finite(
        self,
        name: str,
        arguments: list[Tensor],
        result: Any,
        kwargs: dict[str, Any],
        kinds_before: list[str] | None = None,
        warned: str = "",
    ) -> None:
        if len(self.made) >= MAX_MADE:
            return
        written = arguments if kinds_before is not None and result is None else []
        results = [t for t in _tensors([result, *written]) if t.is_floating_point()]
        kinds = {kind_of(t) for t in results} - {""}
        if not kinds or optimizer_running():  # a step's update is no op of forward
            return
        before = kinds_before or [kind_of(t) for t in arguments]
        given = list(zip(arguments, before, strict=True))
        if "nan" in kinds and any(kind == "nan" for _, kind in given):
            if self.nan_use is None and self.first_nan is None:
                self.nan_use = (name, learner_frame_now())
                self.nan_use_after = len(self.backwards)
            return
        infinite = [t for t, kind in given if kind == "inf"]
        # The op that made the infinity it met, or the optimizer step that put it into a
        # parameter, or else (it was passed along, by `sum` say) the first op that made one.
        source = next((m for t in infinite if (m := self.made_for(t, "inf"))), None)
        step = self._stepped_into(infinite) if infinite and source is None else None
        if "nan" in kinds:
            kind, value = "nan", "NaN"
            dtype = next(t for t in results if kind_of(t) == "nan").dtype
        elif not infinite or step is not None:  # made here, or passed on from a parameter
            holder = next(t for t in results if kind_of(t) == "inf")
            kind, value, dtype = "inf", infinity_in(holder), holder.dtype
        else:
            return  # an infinity passed along, not made here
        if infinite and source is None and step is None:
            source = self.first("inf")
        self.made.append(
            Made(
                kind,
                name,
                learner_frame_now(),
                value,
                tuple(t.untyped_storage() for t in results),
                infinite_argument=bool(infinite),
                from_op=source,
                dtype=dtype,
                hook=hook_running(),
                backwards_before=len(self.backwards),
                masks=tuple(
                    (key, value)
                    for key, value in kwargs.items()
                    if "mask" in key and isinstance(value, Tensor)
                ),
                from_step=step,
                warned=warned,
            )
        )

    def _stepped_into(self, tensors: list[Tensor]) -> InPlace | None:
        """The first optimizer step that left one of ``tensors`` (a parameter) non-finite."""
        storages = {storage_of(t) for t in tensors}
        return next(
            (
                r
                for r in self.inplace
                if r.by_optimizer and r.kind_after and storage_of(r.target) in storages
            ),
            None,
        )
