"""Tensors a Function's code reaches by name, and what forward wrote into them.

Used by ``check_saved_bytes`` (``_memory``). A version counter misses writes
through ``.data`` (its own counter), through a NumPy view (none) and into a tensor made
under ``inference_mode`` (no counter at all): :func:`versions` keeps a copy of each tensor
along ``_routes``' routes, and :func:`written` compares values too, and puts each
back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.leaves import fresh_leaf
from autograd_helpers.checks._core.submission import forward_parameter_names
from autograd_helpers.checks.profiler._routes import routes

__all__ = ["kept_by_name", "versions", "written"]


def _version(tensor: Tensor) -> int:
    """The version counter, or -1 for a tensor without one (made under inference_mode)."""
    try:
        return int(tensor._version)
    except Exception:
        return -1


def versions(reached: list[tuple[str, object]]) -> list[tuple[str, Tensor, int, Tensor]]:
    """``(route, tensor, version, copy)`` for each tensor the code can reach before forward."""
    found, seen = [], set()
    for route, value in reached:
        if not isinstance(value, Tensor) or id(value) in seen or value.layout != torch.strided:
            continue
        seen.add(id(value))
        try:
            with torch.inference_mode(value.is_inference()):
                found.append((route, value, _version(value), value.detach().clone()))
        except Exception:  # a tensor without values (meta, fake) holds nothing
            continue
    return found


def _same(tensor: Tensor, copy: Tensor) -> bool:
    """Same shape, dtype and values (NaN equal to NaN), compared bit for bit."""
    try:
        return (
            tensor.shape == copy.shape
            and tensor.dtype == copy.dtype
            and bool(torch.equal(tensor.detach(), copy) or _same_bits(tensor.detach(), copy))
        )
    except Exception:  # values that cannot be read: nothing to compare
        return True


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return bool(a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))  # fmt: skip


def written(existing: list[tuple[str, Tensor, int, Tensor]]) -> list[tuple[str, Tensor]]:
    """``(route, tensor)`` for each tensor of :func:`versions` whose version or values moved
    since; each is put back as it was."""
    found = []
    for route, tensor, version, copy in existing:
        if _version(tensor) == version and _same(tensor, copy):
            continue
        found.append((route, tensor))
        with torch.no_grad(), torch.inference_mode(tensor.is_inference()):
            if tensor.shape != copy.shape:  # resize_ in forward
                tensor.data.resize_(copy.shape)
            tensor.data.copy_(copy)
    return found


@contextlib.contextmanager
def kept_by_name(fn: object, inputs: tuple[Tensor, ...]) -> Iterator[None]:
    """Put back, by content, every tensor ``fn``'s code reaches by name along this chapter's
    routes (a class's attribute, ``torch.cache``, deep in a container), whatever the block
    wrote into it (``.data``, a NumPy view, under ``inference_mode``)."""
    if not (isinstance(fn, type) and issubclass(fn, Function)):
        yield
        return
    leaves = [fresh_leaf(x) for x in inputs]
    names = forward_parameter_names(fn, len(leaves))
    existing = versions(list(routes(fn, None, leaves, names)))
    try:
        yield
    finally:
        written(existing)
