"""The inputs ``check_function`` is handed: which to differentiate, and which probes to run.

Part of :mod:`autograd_helpers.checks.function`. A wrong ``wrt`` or ``probes`` is the
notebook's mistake, raised as a ``TypeError``/``ValueError`` that names it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from autograd_helpers.checks._core.numeric import same_values
from autograd_helpers.checks._core.probes import edge_probes
from autograd_helpers.checks._core.trial import Trial

__all__ = ["checked_wrt", "probe_inputs", "written_inputs_notes"]


def checked_wrt(inputs: tuple[object, ...], wrt: Sequence[int] | None) -> tuple[int, ...]:
    me = "check_function"
    if not inputs:
        raise ValueError(f"{me}(): give at least one example input")
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.is_complex():
            raise ValueError(f"{me}(): input {i} is complex; only real inputs are checked")
        if isinstance(x, Tensor) and x.is_meta:
            raise ValueError(f"{me}(): input {i} is a meta tensor, which has no values to check")
    floating = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.is_floating_point()]
    # A sparse (or other non-strided) input is passed as it is, a constant: finite
    # differences nudge one stored element at a time, which only a dense tensor has.
    dense = [i for i in floating if getattr(inputs[i], "layout", None) == torch.strided]
    if wrt is None:
        if not dense:
            raise ValueError(f"{me}(): no floating-point tensor among the inputs (dense ones)")
        chosen = dense
    else:
        if isinstance(wrt, str | bytes) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in wrt
        ):
            raise TypeError(f"{me}(): wrt must be a sequence of input indices, got {wrt!r}")
        bad = [i for i in wrt if i not in floating]
        if bad:
            raise ValueError(f"{me}(): wrt {bad} are not floating-point tensor inputs")
        for i in wrt:
            x = inputs[i]
            if i not in dense and isinstance(x, Tensor):
                raise ValueError(
                    f"{me}(): wrt includes input {i}, a {x.layout} tensor, whose gradient "
                    "cannot be checked element by element: check the dense inputs' "
                    "gradients (leave it out of wrt), or pass `.to_dense()` of it"
                )
        chosen = list(wrt)
    for i in chosen:
        x = inputs[i]
        if isinstance(x, Tensor) and x.numel() == 0:
            raise ValueError(
                f"{me}(): input {i} has no elements, so no gradient would be compared; "
                "give an example input with at least one element"
            )
    return tuple(chosen)


def probe_inputs(probes: object) -> list[tuple[object, ...]]:
    if probes is None:
        return []
    if probes == "edges":
        return list(edge_probes())
    if isinstance(probes, str) or not isinstance(probes, list | tuple):
        raise TypeError(
            f'check_function(): probes must be "edges" or a list of input tuples, got {probes!r}'
        )
    if not all(isinstance(p, tuple) for p in probes):
        raise TypeError("check_function(): probes must be a list of input tuples")
    return list(probes)


def written_inputs_notes(trial: Trial, value: object) -> list[str]:
    """A note for each input a plain callable wrote into and returned (``out.add_(src)``,
    torch_scatter's ``out=``): as a Function's ``mark_dirty``, the caller's tensor is
    overwritten. (A Function that does so without marking it fails: autograd needs it.)"""
    if trial.is_function:
        return []  # mark_dirty is noted by what forward called
    returned = value if isinstance(value, tuple) else (value,)
    notes = []
    for i, (now, before) in enumerate(zip(trial.args, trial.originals, strict=True)):
        if (
            isinstance(now, Tensor)
            and isinstance(before, Tensor)
            and any(out is now for out in returned)
            and not same_values(now, before)
        ):
            name = trial.names[i]
            notes.append(
                f"Note: it writes the result into its input `{name}` in place and returns it: "
                f"the caller's `{name}` is overwritten and no longer holds its input (the "
                "checker gave it a copy). Right for an `out=` argument; otherwise return a "
                "new tensor."
            )
    return notes
