"""Autograd's side of :func:`~autograd_helpers.finite_differences.eps_sweep`: the Jacobian
that central differences are compared with, and what makes it impossible to take.

Kept apart from ``_finite_guards`` (what ``f`` must be for central differences).
:func:`torch.autograd.functional.jacobian` runs one backward pass per output element on
one forward's graph. A backward that runs only once on a graph (revtorch's reversible
blocks delete what they kept on ``ctx``; memcnn's pop it from a list) fails from the second
row on, deep inside ``torch.autograd.functional``, with an ``AttributeError`` or an
``IndexError``; a backward that refuses :func:`torch.autograd.grad` ("please use
.backward()") fails on the first. Both are said in one sentence.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from autograd_helpers._grads_kept import refusals

__all__ = ["analytical_jacobian", "unconnected_jacobian"]


def analytical_jacobian(caller: str, f: Callable[[Tensor], Tensor], point: Tensor) -> Tensor | None:
    """Autograd's Jacobian of ``f`` at ``point``; ``None`` when ``f``'s output is not
    connected to ``point`` by the graph (``f`` detached it, or left torch). A backward that
    cannot run once per output element is refused with a ``ValueError``."""
    with refusals() as refused:
        try:
            return torch.autograd.functional.jacobian(f, point, strict=True)  # type: ignore[no-any-return]
        except Exception as error:
            text = str(error)
            if "independent of input" in text or "does not require gradients" in text:
                return None
            failure = f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".strip()
            if refused:
                raise ValueError(
                    f"{caller}(): f's backward refuses torch.autograd.grad ({failure}), which "
                    "autograd's Jacobian runs, so there is no analytical Jacobian to compare "
                    "with"
                ) from error
            if _runs_twice(f, point):
                raise
            raise ValueError(
                f"{caller}(): f's backward runs only once on a graph (a second backward of "
                f"the same forward raised {failure}: it deletes or frees what it kept, as a "
                "reversible block's does), and autograd's Jacobian runs one backward per "
                "output element: sweep a function with one output element "
                "(`lambda t: f(t).sum()`)"
            ) from error


def _runs_twice(f: Callable[[Tensor], Tensor], point: Tensor) -> bool:
    """Whether two backward passes of one forward of ``f`` at ``point`` both run (``True``
    also when the first fails: then ``f``'s backward is broken, not single-use)."""
    leaf = point.detach().clone().requires_grad_()
    output = f(leaf)
    ones = torch.ones_like(output)
    for attempt in range(2):
        try:
            torch.autograd.grad(output, leaf, ones, retain_graph=True, allow_unused=True)
        except Exception:
            return attempt == 0
    return True


def unconnected_jacobian(caller: str, numerical: Tensor) -> Tensor:
    """The analytical Jacobian of an ``f`` not connected to its input: zero, which is right
    only when its values do not move either; refused otherwise."""
    if bool((numerical != 0).any()):
        raise ValueError(
            f"{caller}(): f's output does not depend on x through autograd (f cuts the graph: "
            "`.detach()`, `.numpy()`, `.item()`, `torch.no_grad()`), so its analytical "
            "Jacobian is zero while its values do change with x: compute f with "
            "differentiable torch operations"
        )
    return torch.zeros_like(numerical)
