"""A NaN hidden rather than fixed: replaced in the learner's forward, backward or hook.

Chapter 04's exercises ask for a computation whose backward makes no NaN. Replacing the NaN
by a number can give the right numbers at every point a checker tries, as 0 is sinc's
derivative at 0, and still teaches the symptom fix the chapter warns against. It is spelled
``torch.nan_to_num`` (``Tensor.nan_to_num_``), or as a selection on a NaN test:
``torch.where(d.isnan(), 0, d)``, ``g.masked_fill(~g.isfinite(), 0)``, ``g[g != g] = 0``.
:class:`NanHiding` sees both, in forward, in a custom backward or in a gradient hook: it
marks the results of NaN tests (``isnan``, ``isinf``, ``isfinite``, which runs as
``x == x`` and ``|x| != inf``, ``x != x``) and the masks built from them (``~``, ``&``,
``|``, ...), and notes a ``where``, ``masked_fill`` or indexed assignment that selects on
one. A NaN test of a tensor joined by "and" to an ordered comparison of the same tensor
(``isfinite(d) & (d <= tol)``, how ``torch.isclose`` runs) is no NaN test: the comparison is
False at NaN already, so the mask is a threshold's, as ``x.abs() < 1e-4`` is. Both checkers
of the chapter
(:func:`~autograd_helpers.checks.anomaly.check_finite_gradients` and
:func:`~autograd_helpers.checks.anomaly.check_safe_backward`) watch with it, and say it in
the same words: :func:`hidden_nan_verdict`.

A ``TorchDispatchMode`` sees the operation wherever it runs, inside a custom Function's
backward and a hook that autograd's engine calls too; a ``TorchFunctionMode`` does not.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from autograd_helpers.checks._core.feedback import CheckResult, failed

__all__ = ["HIDDEN_NAN_HINT", "NanHiding", "hidden_nan_verdict", "warm_up"]

HIDDEN_NAN_HINT = (
    "Hint: `nan_to_num` hides a NaN instead of removing its cause, and so does selecting "
    "on a NaN test (`torch.where(d.isnan(), 0, d)`, `masked_fill(~d.isfinite(), 0)`, "
    "`d[d != d] = 0`): the number put in its place is not the gradient, and it hides every "
    "other NaN with it, one from an unrelated bug too. Find the operation that makes the "
    "NaN (`ah.anomaly.find_nan_origin`) and give it a safe input where it breaks (the "
    "double `torch.where`), or use a function that handles that point itself."
)


# Operations whose result tests for NaN (isfinite runs as `x == x` and `|x| != inf`).
_TESTS = ("isnan", "isinf", "isposinf", "isneginf", "isfinite")
# Operations that select with a mask, and which of their arguments is the mask.
_SELECTS = {
    "where": 0,
    "masked_fill": 1,
    "masked_fill_": 1,
    "masked_scatter": 1,
    "masked_scatter_": 1,
    "index_put": 1,
    "index_put_": 1,
    "_index_put_impl_": 1,
}


def _name(func: Any) -> str:
    """``"where"`` for ``aten.where.self``: the operation's name without its overload."""
    packet = getattr(func, "overloadpacket", None)
    return str(getattr(packet, "__name__", getattr(func, "__name__", func)))


# Ordered comparisons (False wherever an operand is NaN), and the ways masks are joined by
# "and" (a bool `mul` is how `isfinite` joins its two tests).
_ORDERED = ("lt", "le", "gt", "ge")
_AND = ("bitwise_and", "bitwise_and_", "logical_and", "logical_and_", "mul", "mul_")


def _tested(name: str, args: tuple[Any, ...]) -> torch.Tensor | None:
    """The tensor a NaN test tests, or ``None`` when the operation is no NaN test."""
    if name in _TESTS and args and isinstance(args[0], torch.Tensor):
        return args[0]
    if name in ("eq", "ne") and len(args) == 2:
        a, b = args
        if a is b and isinstance(a, torch.Tensor):
            return a  # x == x, x != x: False, True only at NaN
        if isinstance(a, torch.Tensor) and isinstance(b, float) and math.isinf(b):
            return a  # |x| != inf
    return None


class NanHiding(TorchDispatchMode):
    """Records whether a NaN was replaced inside the block: ``nan_to_num`` (any overload,
    in place too) ran, or a ``where``, ``masked_fill`` or indexed assignment selected on a
    NaN test (``how``: ``"nan_to_num"`` or ``"a NaN test"``).

    Example::

        >>> x = torch.zeros(2, requires_grad=True)
        >>> y = x.sqrt()
        >>> _ = y.register_hook(torch.nan_to_num)
        >>> with NanHiding() as hiding:
        ...     y.sum().backward()
        >>> hiding.ran
        True
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    def __init__(self) -> None:
        super().__init__()
        self.ran = False
        self.how = ""
        # NaN tests' results (and masks made from them), kept alive by id, each with the
        # tensor it tests (None once masks of different tensors are joined)
        self._masks: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._abs_of: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # |x| -> (|x|, x)
        # ordered comparisons' results -> (result, the tensors compared)
        self._compared: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = _name(func)
        if "nan_to_num" in name:
            self._found("nan_to_num")
        masked = [t for t in tree_leaves((args, kwargs)) if id(t) in self._masks]
        where = _SELECTS.get(name)
        if (
            where is not None
            and len(args) > where
            and any(id(t) in self._masks for t in tree_leaves(args[where]))
        ):
            self._found("a NaN test")
        out = func(*args, **(kwargs or {}))
        self._note(name, args, out, masked)
        return out

    def _root(self, t: torch.Tensor) -> torch.Tensor:
        """``x`` for ``|x|`` (and ``||x||``): a test or a comparison of either is of ``x``."""
        while id(t) in self._abs_of:
            t = self._abs_of[id(t)][1]
        return t

    def _note(self, name: str, args: tuple[Any, ...], out: Any, masked: list[Any]) -> None:
        """Mark what ``out`` is: a NaN test's mask (and of what), a comparison, an ``|x|``."""
        if isinstance(out, torch.Tensor) and name == "abs" and isinstance(args[0], torch.Tensor):
            self._abs_of[id(out)] = (out, args[0])
        elif isinstance(out, torch.Tensor) and name in _ORDERED:
            compared = [self._root(a) for a in args if isinstance(a, torch.Tensor)]
            self._compared[id(out)] = (out, compared)
        tested = _tested(name, args)
        if tested is None and masked and name in _AND and self._a_threshold(args):
            if isinstance(out, torch.Tensor):
                self._masks.pop(id(out), None)  # `isfinite(d) & (d <= tol)`: a threshold
            return
        if tested is None and masked:
            roots = {id(self._masks[id(m)][1]) for m in masked}
            tested = self._masks[id(masked[0])][1] if len(roots) == 1 else None
        elif tested is not None:
            tested = self._root(tested)
        if tested is None and not masked:
            return
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.dtype == torch.bool:
                self._masks[id(t)] = (t, tested)

    def _a_threshold(self, args: tuple[Any, ...]) -> bool:
        """Whether two joined masks are a NaN test of a tensor and an ordered comparison of
        the same tensor: that comparison is False at NaN already."""
        if len(args) != 2:
            return False
        for test, other in (args, args[::-1]):
            if id(test) in self._masks and id(other) in self._compared:
                tested = self._masks[id(test)][1]
                if tested is not None and any(t is tested for t in self._compared[id(other)][1]):
                    return True
        return False

    def _found(self, how: str) -> None:
        self.ran = True
        self.how = self.how or how


def warm_up() -> None:
    """Run one operation under :class:`NanHiding` before anything is snapshot: the first
    operation under a dispatch mode imports ``torch._dynamo``, which rebinds attributes of
    the torch module (``torch.manual_seed``), and that is not the learner's doing."""
    with NanHiding():
        torch.zeros(1).add(0)


def hidden_nan_verdict(label: str, where: str, how: str = "nan_to_num") -> CheckResult:
    """The verdict for a NaN replaced; ``where`` says in which code, ``how`` by what
    (:attr:`NanHiding.how`).

    Example::

        >>> print(hidden_nan_verdict("f", "in its backward").title)
        f: it replaces NaN with `nan_to_num` (in its backward).
        >>> print(hidden_nan_verdict("f", "in its forward", "a NaN test").title)
        f: it replaces NaN by selecting on a NaN test (`isnan`, `isfinite`) (in its forward).
    """
    what = (
        "by selecting on a NaN test (`isnan`, `isfinite`)"
        if how == "a NaN test"
        else "with `nan_to_num`"
    )
    return failed(label, f"it replaces NaN {what} ({where}).", HIDDEN_NAN_HINT)
