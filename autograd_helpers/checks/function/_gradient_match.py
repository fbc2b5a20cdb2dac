"""The gradients' values judged against expected ones, for ``check_function``.

:func:`compare_gradients` takes each gradient in turn (those of the inputs that need one) and
says the first thing wrong with it: missing (``None``), a NaN or inf where the expected one is
finite, or values off beyond the tolerances, with the numbers at the worst element and the
likely cause (gradients swapped, a factor off). Apart from what backward returned
(:mod:`._returned_gradients`): this needs the gradients the engine delivered and the expected
ones, from the reference, finite differences or a ``grad_reference`` (:mod:`._values`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from autograd_helpers.checks._core.hints import swap_hint, value_hint
from autograd_helpers.checks._core.numeric import format_number, index_text, worst_mismatch
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._wording import GRAPH_CUT, Verdict, first_non_finite

__all__ = ["compare_gradients"]


def compare_gradients(
    trial: Trial,
    expected: Sequence[Tensor],
    source: str,
    *,
    derivative: bool,
    atol: float | None = None,
    rtol: float | None = None,
) -> Verdict | None:
    """Judge the gradients' values against ``expected`` (from ``source``).

    ``derivative`` says that ``expected`` is ``grad_output`` times the derivative (not so for
    a ``grad_reference``); ``atol`` and ``rtol`` replace the notebook's tolerances. For an
    elementwise function the verdict quotes the input and ``grad_output`` at the worst
    element, so the learner can redo the arithmetic by hand.
    """
    tolerances = (
        trial.options.atol if atol is None else atol,
        trial.options.rtol if rtol is None else rtol,
    )
    names = trial.wrt_names
    for k, (grad, want, value) in enumerate(
        zip(trial.grads, expected, trial.wrt_leaves, strict=True)
    ):
        verdict = (
            _missing(trial, names[k], want)
            if grad is None
            else _non_finite(grad, want, value, names[k])
            or _off(trial, k, grad, expected, source, derivative=derivative, tolerances=tolerances)
        )
        if verdict is not None:
            return verdict
    return None


def _missing(trial: Trial, name: str, want: Tensor) -> Verdict | None:
    """No gradient for ``name``: fine where the expected one is all zero."""
    if bool((want == 0).all()):
        return None
    if trial.is_function:
        return Verdict(
            f"backward returned None for `{name}`, which needs a gradient.",
            ("Return a tensor for every input that requires grad.",),
        )
    return Verdict(
        f"`{name}` gets no gradient: the output does not depend on it through autograd.",
        (GRAPH_CUT,),
    )


def _non_finite(grad: Tensor, want: Tensor, value: Tensor, name: str) -> Verdict | None:
    """A NaN or inf in the gradient where the expected one is finite, and the input there."""
    bad = first_non_finite(grad, want.isfinite())
    if bad is None:
        return None
    element = index_text(bad[1], grad.shape)
    there = ""
    if value.shape == grad.shape and value.numel():
        there = f", where `{name}` = {format_number(float(value.detach().reshape(-1)[bad[1]]))}"
    return Verdict(
        f"the gradient for `{name}` contains {bad[0]} (first at `{name}{element}`{there}).",
        ("Look for a division by zero or a 0 × ∞ in backward at that value.",),
    )


def _off(
    trial: Trial,
    k: int,
    grad: Tensor,
    expected: Sequence[Tensor],
    source: str,
    *,
    derivative: bool,
    tolerances: tuple[float, float],
) -> Verdict | None:
    """Gradient ``k`` off ``expected[k]`` beyond ``tolerances``: where, by how much, and why.

    The worst element's numbers, then (for an elementwise function) the input and
    ``grad_output`` there, what the compared values are, and a hint at the likely cause.
    """
    want, value, names = expected[k], trial.wrt_leaves[k], trial.wrt_names
    mismatch = worst_mismatch(grad, want, atol=tolerances[0], rtol=tolerances[1])
    if mismatch is None:
        return None
    only_output = trial.grad_outputs[0] if len(trial.grad_outputs) == 1 else None
    details = [mismatch.describe(names[k], "yours", source)]
    if only_output is not None and value.shape == grad.shape == only_output.shape:
        at = mismatch.flat_index
        details.append(
            f"There `{names[k]}` = {format_number(float(value.detach().reshape(-1)[at]))} "
            f"and `grad_output` = {format_number(float(only_output.reshape(-1)[at]))}."
        )
    details.append(
        "(The check backpropagates a random `grad_output`, so these are `grad_output` "
        "times the derivative, not the derivative alone.)"
        if derivative
        else "(The check backpropagates a random `grad_output`; these are the gradients "
        "for it, not for `grad_output` = 1.)"
    )
    returned = (
        [trial.raw_gradients[i] for i in trial.wrt]
        if trial.raw_gradients is not None
        else list(trial.grads)
    )
    shapes = [s.shape for s in trial.wrt_leaves]
    hint = swap_hint(returned, names, shapes, expected) or value_hint(
        grad.detach(), want, only_output
    )
    if hint:
        details.append(hint)
    return Verdict(f"the gradient for `{names[k]}` is off compared with {source}.", tuple(details))
