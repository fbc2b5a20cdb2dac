"""Grad mode and ``model.eval()``: two switches that are easy to confuse, tabulated.

Introduced in ``05_grad_mode_vs_eval.ipynb``. :func:`mode_table` runs a model under every
combination of the module mode (``train()``/``eval()``, which changes what dropout and batch
norm *compute*) and the grad mode (enabled, ``torch.no_grad()``, ``torch.inference_mode()``,
which changes what autograd *records*), and reports what each combination did. Nothing is
left changed: the model's train/eval flags, parameters, buffers (batch norm's running
statistics) and gradients, the input's ``.grad``, and the global random state.
"""

from __future__ import annotations

import contextlib
import html
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from autograd_helpers._checking.validate import check_float_tensor
from autograd_helpers._graph_walk import graph_leaves

__all__ = ["MODE_COLUMNS", "ModeTable", "mode_table", "preserved_state"]

GRAD_MODES: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "enabled": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}
MODE_COLUMNS = (
    "mode",
    "grad mode",
    "output requires grad",
    "equal to train output",
    "dropout active",
    "batch-norm stats updated",
    "bytes saved for backward",
    "backward",
)
_BATCH_NORM = nn.modules.batchnorm._BatchNorm
# More than one other seed: a small dropout can draw the same mask twice by chance.
_OTHER_SEEDS = 3


def _check_materialised(caller: str, model: nn.Module) -> None:
    # A lazy module's parameters have no shape yet: cloning or comparing them fails obscurely.
    lazy = [
        name
        for name, value in itertools.chain(model.named_parameters(), model.named_buffers())
        if is_lazy(value)
    ]
    if lazy:
        raise ValueError(
            f"{caller}(): model has uninitialised lazy parameters or buffers "
            f"({', '.join(lazy[:4])}): call `model(x)` once to materialise them first"
        )


@contextlib.contextmanager
def preserved_state(model: nn.Module) -> Iterator[None]:
    """Run a block, then put back ``model``'s train/eval flags, parameters, buffers and grads.

    Example::

        >>> model = torch.nn.BatchNorm1d(2)
        >>> with preserved_state(model):
        ...     _ = model(torch.randn(4, 2) + 5)  # train mode: updates the running mean
        >>> model.running_mean
        tensor([0., 0.])
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"preserved_state(): model must be an nn.Module, got {type(model).__name__}"
        )
    _check_materialised("preserved_state", model)
    flags = {module: module.training for module in model.modules()}
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    grads = {p: None if p.grad is None else p.grad.clone() for p in model.parameters()}
    try:
        yield
    finally:
        with torch.no_grad():
            for name, value in model.state_dict().items():
                value.copy_(state[name])
        for parameter, grad in grads.items():
            parameter.grad = grad
        for module, training in flags.items():
            module.training = training


def _statistics(model: nn.Module) -> list[Tensor]:
    return [
        buffer.detach().clone()
        for module in model.modules()
        if isinstance(module, _BATCH_NORM)
        for buffer in (module.running_mean, module.running_var)
        if buffer is not None
    ]


def _tensors(output: object) -> list[Tensor]:
    """The tensors in a model's output: itself, or those in a (nested) tuple, list or dict."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []


def _forward(model: nn.Module, x: Tensor, grad: str, seed: int) -> list[Tensor]:
    torch.manual_seed(seed)  # the caller forks the RNG: this never reaches the notebook's
    with GRAD_MODES[grad]():
        output = model(x)
    tensors = _tensors(output)
    if not tensors:
        raise TypeError(
            "mode_table(): model(x) must return a tensor, or a tuple, list or dict of tensors; "
            f"it returned {type(output).__name__}"
        )
    return tensors


def _equal(first: list[Tensor], second: list[Tensor]) -> bool:
    def same(a: Tensor, b: Tensor) -> bool:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point() or a.is_complex():  # NaN where the other has NaN is equal
            return bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())
        return torch.equal(a, b)

    return len(first) == len(second) and all(map(same, first, second))


def _backward(output: list[Tensor], grad: str, anything_requires_grad: bool) -> str:
    roots = [t for t in output if t.requires_grad]
    if not roots:
        if grad != "enabled":
            return "fails: no graph was recorded"
        if not anything_requires_grad:
            return "fails: neither x nor any parameter requires grad"
        return "fails: the output depends on nothing that requires grad"
    loss = sum((t.real if t.is_complex() else t).sum() for t in roots)
    assert isinstance(loss, Tensor)
    try:
        # autograd.grad runs the whole backward but fills no .grad (x's and parameters' stay).
        torch.autograd.grad(loss, graph_leaves(loss), allow_unused=True)
    except RuntimeError as error:
        return _short_error(error)
    return "works"


def _short_error(error: Exception) -> str:
    text = str(error)
    if "Inference tensors" in text:
        return "fails: inference tensors cannot be saved for backward"
    return f"fails: {text.splitlines()[0][:60]}"


def _row(
    model: nn.Module, x: Tensor, mode: str, grad: str, reference: list[Tensor], seed: int
) -> dict[str, Any]:
    model.train(mode == "train")
    # Behavioural, not a search for nn.Dropout: F.dropout(training=self.training) and an
    # RNN's dropout= count too. Each other-seed run starts from the state as found.
    others = []
    for offset in range(1, _OTHER_SEEDS + 1):
        with preserved_state(model):
            others.append(_forward(model, x, grad, seed + offset))
    before = _statistics(model)
    storages: dict[tuple[int, str], int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = _forward(model, x, grad, seed)  # every row draws the same dropout masks
    updated = any(not torch.equal(a, b) for a, b in zip(before, _statistics(model), strict=True))
    anything = x.requires_grad or any(p.requires_grad for p in model.parameters())
    return {
        "mode": mode,
        "grad mode": grad,
        "output requires grad": any(t.requires_grad for t in output),
        "equal to train output": _equal([t.detach() for t in output], reference),
        "dropout active": any(not _equal(output, other) for other in others),
        "batch-norm stats updated": updated,
        "bytes saved for backward": sum(storages.values()),
        "backward": _backward(output, grad, anything),
    }


class ModeTable(list[dict[str, Any]]):
    """The records of :func:`mode_table`: a list of dicts that displays as a table."""

    def _cells(self) -> list[list[str]]:
        return [[str(record[column]) for column in MODE_COLUMNS] for record in self]

    def __str__(self) -> str:
        rows = [list(MODE_COLUMNS), *self._cells()]
        widths = [max(len(row[k]) for row in rows) for k in range(len(MODE_COLUMNS))]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in MODE_COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
            for row in self._cells()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def mode_table(model: nn.Module, x: Tensor, *, seed: int = 0) -> ModeTable:
    """What ``model(x)`` does under each of {train, eval} × {grad enabled, no_grad, inference_mode}.

    Each of the six rows runs the forward pass from the same random state (so dropout draws
    the same masks), then runs backward from the sum of the output. Its record says:

    - ``output requires grad``: whether the output does (autograd recorded it);
    - ``equal to train output``: whether it equals the train-mode output (computed first,
      with grad enabled);
    - ``dropout active``: whether the output is random, found by running the same forward
      from other seeds and comparing. That covers every kind of active dropout (``nn.Dropout``,
      ``F.dropout(x, training=self.training)``, an RNN's ``dropout=``), and any other random
      layer too (``nn.RReLU`` in train mode);
    - ``batch-norm stats updated``: whether batch norm's running statistics changed;
    - ``bytes saved for backward``: what the recorded graph keeps alive;
    - ``backward``: ``"works"``, or in a few words why not (``"fails: no graph was recorded"``
      under ``no_grad``; ``"fails: neither x nor any parameter requires grad"`` when grad is
      enabled but there is nothing to record).

    An output that is a tuple, list or dict of tensors (an RNN's ``(output, h_n)``) counts as
    all of its tensors: it requires grad if any of them does, equals the train output if all
    of them do, is random if any of them is, and backward runs from the sum of all of them.

    Nothing is changed: the model's state is restored after every row (also when it raises),
    backward fills no ``.grad`` (neither the parameters' nor ``x``'s), and the global random
    state is the one the caller had.

    Args:
        model: an ``nn.Module`` taking ``x``, with its lazy modules (``nn.LazyLinear``)
            already materialised.
        x: a floating-point input batch.
        seed: the seed every row's dropout starts from.

    Returns:
        A :class:`ModeTable`: a list of plain dicts (keys :data:`MODE_COLUMNS`) that displays
        as an HTML table in Jupyter and as text elsewhere.

    Example::

        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5))
        >>> table = mode_table(model, torch.ones(4, 3))
        >>> [(r["mode"], r["grad mode"], r["dropout active"]) for r in table][:2]
        [('train', 'enabled', True), ('train', 'no_grad', True)]
        >>> [r["dropout active"] for r in table if r["mode"] == "eval"]
        [False, False, False]
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"mode_table(): model must be an nn.Module, got {type(model).__name__}")
    check_float_tensor("mode_table", "x", x)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"mode_table(): seed must be an int in [0, 2**63), got {seed!r}")
    _check_materialised("mode_table", model)
    table = ModeTable()
    with torch.random.fork_rng(devices=[]), preserved_state(model):
        with preserved_state(model):
            model.train()
            reference = [t.detach() for t in _forward(model, x, "enabled", seed)]
        for mode in ("train", "eval"):
            for grad in GRAD_MODES:
                with preserved_state(model):
                    table.append(_row(model, x, mode, grad, reference, seed))
    return table
