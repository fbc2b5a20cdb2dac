"""Grad mode and ``model.eval()``: two switches that are easy to confuse, tabulated.

Introduced in ``05_grad_mode_vs_eval.ipynb``. :func:`mode_table` runs a model under every
combination of the module mode (``train()``/``eval()``, which changes what dropout and batch
norm *compute*) and the grad mode (enabled, ``torch.no_grad()``, ``torch.inference_mode()``,
which changes what autograd *records*), and reports what each combination did. The model is
left exactly as it was found: its train/eval flags, its parameters and buffers (batch norm's
running statistics), and its gradients.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from autograd_helpers._checking.validate import check_float_tensor

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
_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
_BATCH_NORM = nn.modules.batchnorm._BatchNorm


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


def _short_error(error: Exception) -> str:
    text = str(error)
    if "does not require grad" in text:
        return "fails: no graph was recorded"
    if "Inference tensors" in text:
        return "fails: inference tensors cannot be saved for backward"
    return f"fails: {text.splitlines()[0][:60]}"


def _row(
    model: nn.Module, x: Tensor, mode: str, grad: str, reference: Tensor, seed: int
) -> dict[str, Any]:
    model.train(mode == "train")
    before = _statistics(model)
    storages: dict[tuple[int, str], int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # every row draws the same dropout masks
        with GRAD_MODES[grad](), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            output = model(x)
    updated = any(not torch.equal(a, b) for a, b in zip(before, _statistics(model), strict=True))
    try:
        output.sum().backward()
        backward = "works"
    except RuntimeError as error:
        backward = _short_error(error)
    return {
        "mode": mode,
        "grad mode": grad,
        "output requires grad": output.requires_grad,
        "equal to train output": bool(torch.equal(output.detach(), reference)),
        "dropout active": any(m.training for m in model.modules() if isinstance(m, _DROPOUT)),
        "batch-norm stats updated": updated,
        "bytes saved for backward": sum(storages.values()),
        "backward": backward,
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
    the same masks), then tries ``output.sum().backward()``. Its record says whether the
    output requires grad, whether it equals the train-mode output (computed first, with grad
    enabled), whether dropout was active, whether batch norm's running statistics changed,
    how many bytes the graph saved for backward, and whether backward works (or, in a few
    words, why not). The model's state is restored after every row, also when it raises.

    Args:
        model: an ``nn.Module`` taking ``x``.
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
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"mode_table(): model must be an nn.Module, got {type(model).__name__}")
    check_float_tensor("mode_table", "x", x)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"mode_table(): seed must be a non-negative int, got {seed!r}")
    table = ModeTable()
    with preserved_state(model):
        with preserved_state(model), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model.train()
            reference = model(x).detach()
        for mode in ("train", "eval"):
            for grad in GRAD_MODES:
                with preserved_state(model):
                    table.append(_row(model, x, mode, grad, reference, seed))
    return table
