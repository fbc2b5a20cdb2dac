"""One row of :func:`~autograd_helpers.modes.mode_table`: one forward, one backward, measured.

Kept apart from ``modes`` so that it reads as the table and its promises; what a row
measures, and how, is here: the output (on a fresh copy of ``x``), the buffers it changed,
the bytes its graph saved, and whether backward runs; and, once per module mode, whether
the output is random (:func:`dropout_active`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.parametrizations import _SpectralNorm
from torch.nn.utils.spectral_norm import SpectralNorm

from autograd_helpers._common.nodes import graph_leaves, graph_nodes
from autograd_helpers._common.rounding import Agreement, agree
from autograd_helpers._common.tensors import same_values
from autograd_helpers._grads_kept import backward_into_grads, grads_kept, refusals
from autograd_helpers._profiling_state import modules_as_found
from autograd_helpers._randomness import output_is_random, seed_everything

__all__ = ["GRAD_MODES", "dropout_active", "forward", "row"]

GRAD_MODES: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "enabled": torch.enable_grad,  # on even when the caller runs the table inside no_grad
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def _power_iteration(module: nn.Module) -> set[str]:
    """The names of ``module``'s own buffers that spectral norm's power iteration updates
    (``weight_u``, ``_u``): vectors of an estimate, not statistics of the data."""
    if isinstance(module, _SpectralNorm):
        return {"_u", "_v"}
    hooks = module._forward_pre_hooks.values()
    return {f"{h.name}_{end}" for h in hooks if isinstance(h, SpectralNorm) for end in "uv"}


def _running_stats(model: nn.Module) -> dict[str, Tensor]:
    """The model's buffers but spectral norm's power-iteration vectors: by behaviour, batch
    norm's and InstanceNorm(track_running_stats=True)'s running statistics, and any other
    module's buffer that a forward updates, count."""
    found = {}
    for prefix, module in model.named_modules():
        skip = _power_iteration(module)
        for name, buffer in module.named_buffers(recurse=False):
            if buffer is not None and name not in skip:
                found[f"{prefix}.{name}" if prefix else name] = buffer
    return found


def _buffers(model: nn.Module) -> dict[str, Tensor]:
    return {name: buffer.detach().clone() for name, buffer in _running_stats(model).items()}


def _buffers_changed(before: dict[str, Tensor], model: nn.Module) -> bool:
    after = _running_stats(model)
    return before.keys() != after.keys() or not all(
        same_values(after[name], value) for name, value in before.items()
    )


def _tensors(output: object) -> list[Tensor]:
    """The tensors in a model's output: itself, or those in a (nested) tuple, list or dict."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []


def forward(model: nn.Module, x: Tensor, grad: str, seed: int) -> list[Tensor]:
    """The output's tensors, computed from ``seed`` (torch's, Python's and NumPy's)."""
    seed_everything(seed)  # the caller keeps the random states: this never reaches the notebook
    with GRAD_MODES[grad]():
        try:  # a fresh copy each time: a first layer working in place must not change x
            output = model(x.clone())
        except ValueError as error:
            if "Expected more than 1 value per channel when training" not in str(error):
                raise
            raise ValueError(
                f"mode_table(): train-mode batch norm needs a batch of more than one value per "
                f"channel, and x (shape {tuple(x.shape)}) gives it one: it normalises with the "
                "batch's own mean and variance (the biased one, divided by n), and updates "
                "`running_var` with the unbiased one (divided by n − 1: undefined for one "
                "value), as running = (1 − momentum) × running + momentum × batch's; pass a "
                "batch of at least 2 samples"
            ) from error
    tensors = _tensors(output)
    if not tensors:
        raise TypeError(
            "mode_table(): model(x) must return a tensor, or a tuple, list or dict of tensors; "
            f"it returned {type(output).__name__}"
        )
    return tensors


def dropout_active(model: nn.Module, x: Tensor, mode: str, seed: int) -> bool:
    """Whether ``model``'s output in ``mode`` is random, judged from its outputs (not from
    its use of random numbers: a model may reseed torch in its forward, as revtorch's
    ``fix_random_seed`` does). Each run starts from the model as found."""
    model.train(mode == "train")

    def run(start: int) -> list[Tensor]:
        with modules_as_found([model]):
            return [t.detach() for t in forward(model, x, "no_grad", start)]

    return output_is_random(run, seed, lambda a, b: agree(a, b) != "different")


# The notes a backward cell can carry.
REFUSED = "run with .backward(): a Function refuses autograd.grad"
WRITES_GRAD = "a Function's backward writes .grad itself: put back"


def _backward(output: list[Tensor], grad: str, anything_requires_grad: bool) -> tuple[str, str]:
    """What the backward cell says, and its note (``""``, :data:`REFUSED`, :data:`WRITES_GRAD`)."""
    roots = [t for t in output if t.requires_grad]
    if not roots:
        if grad != "enabled":
            return "fails: no graph was recorded", ""
        if not anything_requires_grad:
            return "fails: neither x nor any parameter requires grad", ""
        return "fails: the output depends on nothing that requires grad", ""
    loss = sum((t.real if t.is_complex() else t).sum() for t in roots)
    assert isinstance(loss, Tensor)
    leaves = graph_leaves(loss)
    nodes = graph_nodes([loss.grad_fn]) if loss.grad_fn is not None else []
    with grads_kept(nodes) as kept, refusals() as refused:
        try:
            # autograd.grad runs the whole backward but fills no .grad (x's and parameters').
            torch.autograd.grad(loss, leaves, allow_unused=True, retain_graph=True)
        except Exception as error:
            if not refused:
                return _short_error(error), ""
            try:  # as the model's user runs it; the .grad it fills are put back
                backward_into_grads([loss], [torch.ones_like(loss)], leaves, kept)
            except Exception as again:
                return _short_error(again), ""
            return "works", REFUSED
    return "works", WRITES_GRAD if kept.written else ""


def _short_error(error: Exception) -> str:
    text = str(error)
    if "Inference tensors" in text:
        return "fails: inference tensors cannot be saved for backward"
    return f"fails: {text.splitlines()[0][:60]}"


def row(
    model: nn.Module,
    x: Tensor,
    position: tuple[str, str],
    reference: list[Tensor] | None,
    seed: int,
    random_output: bool,
) -> tuple[dict[str, Any], list[Tensor], Agreement, str]:
    """One record of the table (``position`` is its module mode and grad mode), the output,
    how it agrees with the train output (``reference``; ``None``: this is the train output),
    and the backward cell's note."""
    mode, grad = position
    model.train(mode == "train")
    before = _buffers(model)
    storages: dict[tuple[int, str], int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = forward(model, x, grad, seed)  # every row draws the same masks
    detached = [t.detach() for t in output]
    agreement = agree(detached, detached if reference is None else reference)
    anything = x.requires_grad or any(p.requires_grad for p in model.parameters())
    backward, note = _backward(output, grad, anything)
    record = {
        "mode": mode,
        "grad mode": grad,
        "output requires grad": any(t.requires_grad for t in output),
        "equal to train output": agreement != "different",
        "dropout active": random_output,
        "batch-norm stats updated": _buffers_changed(before, model),
        "bytes saved for backward": sum(storages.values()),
        "backward": backward,
    }
    return record, detached, agreement, note
