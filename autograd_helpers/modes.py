"""Grad mode and ``model.eval()``: two switches that are easy to confuse, tabulated.

Introduced in ``05_grad_mode_vs_eval.ipynb``. :func:`mode_table` runs a model under every
combination of the module mode (``train()``/``eval()``, which changes what dropout and batch
norm *compute*) and the grad mode (enabled, ``torch.no_grad()``, ``torch.inference_mode()``,
which changes what autograd *records*), and reports what each combination did. Nothing is
left changed: the model's train/eval flags, parameters, buffers (batch norm's running
statistics) and gradients, the input's ``.grad``, and the random states (torch's,
Python's, NumPy's).

Outputs are compared up to rounding: two kernels for one computation (a Transformer's eval
fast path, MKLDNN's LSTM under ``no_grad``) differ in the last bits, and that is not the mode
changing what the model computes.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import Iterator
from typing import Any

from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from autograd_helpers._common.tables import html_table, text_table
from autograd_helpers._modes_rows import GRAD_MODES, dropout_active, row
from autograd_helpers._profiling_state import modules_as_found
from autograd_helpers._randomness import random_states_kept

__all__ = ["MODE_COLUMNS", "ModeTable", "mode_table", "preserved_state"]

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
_ROUNDING_NOTE = "within rounding"


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
    """Run a block, then put back ``model``'s train/eval flags, parameters, buffers and grads,
    and its other attributes.

    Every submodule's flag, and every parameter and buffer (persistent or not) is put back:
    the very tensor object the module held, its values, dtype, ``requires_grad`` and
    ``.grad`` (after a ``model.double()`` inside, all of it is float32 again), and what the
    module has by name (a parameter deleted, a buffer added or a submodule replaced inside
    is undone). So are the other attributes of the model and its submodules (a counter or a
    cursor that forward moves, as detectron2's ``CycleBatchNormList`` does with
    ``self._pos``; an attribute forward creates is removed) and those set on parameters and
    buffers (BinaryNet's ``self.bias.org``). Inside the block the model works on copies of
    its buffers, so batch norm's running statistics are never written back into: a graph
    recorded inside still runs backward after it. Parameters are the model's own (an
    optimizer must step them): values that changed inside (an optimizer step) are copied
    back into them, so a graph recorded inside that saved such a parameter fails backward
    afterwards with PyTorch's "modified by an inplace operation", as after any other
    in-place change to it.

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
    with modules_as_found([model]):
        yield


def _cut_from_callers_graph(x: Tensor) -> Tensor:
    """``x`` as a leaf of its own: the table's backward passes stop at it.

    A non-leaf ``x`` (``w.exp()``) carries the caller's graph: a backward run through it would
    free that graph's saved tensors, and the caller's own ``backward`` would then fail. A
    leaf ``x`` may carry the caller's hooks (``x.register_hook``), which the table's backward
    would run. The copy shares ``x``'s values and requires grad as ``x`` does, so every row
    reads the same.
    """
    if not x.requires_grad:
        return x
    return x.detach().requires_grad_(x.requires_grad)


@contextlib.contextmanager
def _tensor_hooks_held(model: nn.Module) -> Iterator[None]:
    """Run a block with the hooks registered on the model's parameters (``p.register_hook``)
    held back, so that the table's backward passes do not run them; put back afterwards."""
    held = [
        (hooks, dict(hooks))
        for p in model.parameters()
        if isinstance(hooks := getattr(p, "_backward_hooks", None), dict) and hooks
    ]
    for hooks, _ in held:
        hooks.clear()
    try:
        yield
    finally:
        for hooks, kept in held:
            hooks.clear()
            hooks.update(kept)


def _require_one_input(model: nn.Module, x: Tensor) -> None:
    """Refuse a model whose forward needs more than the one input the table gives it."""
    try:
        inspect.signature(model.forward).bind(x)
    except TypeError:
        name = type(model).__name__
        raise TypeError(
            f"mode_table(): {name}.forward needs more than one input, and mode_table calls "
            f"model(x) with x alone: wrap it in a module whose forward takes x (for "
            "attention: `def forward(self, x): return self.attn(x, x, x)[0]`)"
        ) from None
    except ValueError:  # no signature to read (a builtin): let the call say what it needs
        return


class ModeTable(list[dict[str, Any]]):
    """The records of :func:`mode_table`: a list of dicts that displays as a table.

    Attributes:
        notes: ``{(row index, column): note}`` for the cells whose plain value needs a word
            more; the table shows it after the value: ``True (within rounding)`` where an
            output equals the train output only up to rounding.
    """

    def __init__(self) -> None:
        super().__init__()
        self.notes: dict[tuple[int, str], str] = {}

    def _cells(self) -> list[list[str]]:
        def cell(index: int, column: str) -> str:
            note = self.notes.get((index, column))
            value = str(self[index][column])
            return f"{value} ({note})" if note else value

        return [[cell(index, column) for column in MODE_COLUMNS] for index in range(len(self))]

    def __str__(self) -> str:
        return text_table(MODE_COLUMNS, self._cells())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return html_table(MODE_COLUMNS, self._cells())


def mode_table(model: nn.Module, x: Tensor, *, seed: int = 0) -> ModeTable:
    """What ``model(x)`` does under each of {train, eval} × {grad enabled, no_grad, inference_mode}.

    Each of the six rows runs the forward pass from the same random state, torch's, Python's
    and NumPy's (so dropout draws the same masks), on a fresh copy of ``x`` (a first layer
    that works in place, such as ``nn.ReLU(inplace=True)``, changes neither ``x`` nor the
    next row), then runs backward from the sum of the output. Its record says:

    - ``output requires grad``: whether the output does (autograd recorded it);
    - ``equal to train output``: whether it equals the train-mode output (computed first,
      with grad enabled), bit for bit or up to rounding: no element further off than a few
      units in the last place of its own magnitude, or of the output's typical magnitude
      for an element near 0 (another kernel for the same computation, such as a
      Transformer's eval fast path or MKLDNN's LSTM under ``no_grad``, rounds
      differently). The value is then ``True`` too, and the table's cell reads
      ``True (within rounding)`` (:attr:`ModeTable.notes`);
    - ``dropout active``: whether the output is random, judged from outputs: running the
      forward from other seeds changes it, or, for a forward that drew zeros and ones (every
      dropout's mask), the opposite draw does. So a dropout that happened to keep every
      element (a small output, a small ``p``) still counts, as do every kind of dropout
      (``nn.Dropout``, ``F.dropout(x, training=self.training)``, an RNN's ``dropout=``) and
      any other random layer (``nn.RReLU`` in train mode); a deterministic forward that
      merely reseeds torch (revtorch's ``fix_random_seed``) or draws numbers it never uses
      does not;
    - ``batch-norm stats updated``: whether any buffer of the model changed but spectral
      norm's power-iteration vectors (``weight_u``, ``_u``: an estimate, not statistics),
      judged by behaviour: the running statistics of batch norm (a train-mode forward sets
      ``running_mean = (1 - momentum) * running_mean + momentum * batch mean``, and
      ``running_var`` the same way from the batch's *unbiased* variance, divided by n − 1,
      while it normalises with the biased one, divided by n), of instance norm with
      ``track_running_stats=True``, and of any other module that keeps them in buffers;
    - ``bytes saved for backward``: what the recorded graph keeps alive;
    - ``backward``: ``"works"``, or in a few words why not (``"fails: no graph was recorded"``
      under ``no_grad``; ``"fails: neither x nor any parameter requires grad"`` when grad is
      enabled but there is nothing to record). It runs with ``torch.autograd.grad``; where a
      Function refuses that ("please use .backward()": memcnn's invertible blocks, a
      reentrant checkpoint) with ``backward()``, as the model's user runs it, and the cell
      says so in a note, as it does for a Function whose backward writes ``.grad`` itself.

    An output that is a tuple, list or dict of tensors (an RNN's ``(output, h_n)``) counts as
    all of its tensors: it requires grad if any of them does, equals the train output if all
    of them do, is random if any of them is, and backward runs from the sum of all of them.

    Nothing is changed, and every forward the table runs starts from the model as the caller
    has it: the model's state (:func:`preserved_state`: its flags, parameters, buffers and
    other attributes, a cursor that forward moves or an attribute it creates included) is
    put back after every row and every run (also when it raises), every ``.grad`` is left as
    found (the parameters' and ``x``'s), and so are torch's, Python's and NumPy's random
    states.

    The cost: the model runs forward ten times (each module mode's three rows, and two
    runs that tell whether its output is random), and up to sixteen when it draws random
    numbers (other seeds, and the opposite dropout masks); backward twice.

    The table's backward passes are measurements, not training steps: hooks registered with
    ``register_hook`` on ``x`` or on the model's parameters are not run by them (the table
    works on a detached copy of ``x`` and holds the parameters' hooks back meanwhile), so
    they fire only when the caller's own code runs backward. Module hooks (forward hooks,
    ``register_full_backward_hook``) are part of the model and run in every row. An ``x``
    that is not a leaf (computed from tensors that require grad) keeps its graph: the
    table's backward passes stop at ``x``, so the caller's own ``backward`` through ``x``
    still runs afterwards.

    Args:
        model: an ``nn.Module`` taking ``x`` alone (a module whose forward needs more, such
            as ``nn.MultiheadAttention``, is refused: wrap it), with its lazy modules
            (``nn.LazyLinear``) already materialised.
        x: an input batch, of any dtype: token ids for an ``nn.Embedding`` work too (the
            gradients go to the parameters). With batch norm in the model, a batch of at
            least 2 (train mode normalises with the batch's own statistics).
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
    if not isinstance(x, Tensor):  # of any dtype: token ids work, the gradients go to weights
        raise TypeError(
            f"mode_table(): x must be a torch.Tensor, the model's input batch; got "
            f"{type(x).__name__} (make it one with torch.tensor(...))"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"mode_table(): seed must be an int in [0, 2**63), got {seed!r}")
    _check_materialised("mode_table", model)
    _require_one_input(model, x)
    x = _cut_from_callers_graph(x)
    table = ModeTable()
    reference: list[Tensor] | None = None  # the train output: the first row's
    with random_states_kept(), preserved_state(model), _tensor_hooks_held(model):
        for mode in ("train", "eval"):
            with preserved_state(model):
                random_output = dropout_active(model, x, mode, seed)
            for grad in GRAD_MODES:
                with preserved_state(model):
                    record, output, agreement, note = row(
                        model, x, (mode, grad), reference, seed, random_output
                    )
                reference = output if reference is None else reference
                if agreement == "rounding":
                    table.notes[len(table), "equal to train output"] = _ROUNDING_NOTE
                if note:
                    table.notes[len(table), "backward"] = note
                table.append(record)
    return table
