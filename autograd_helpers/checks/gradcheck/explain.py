"""``explain_gradcheck``: gradcheck's comparison, told in words (public in ``ah.checks``).

Introduced in ``03_gradcheck.ipynb``. It compares what :func:`torch.autograd.gradcheck`
compares in its default (slow) mode: for every input that requires grad, the numerical
Jacobian from central differences against the analytical one that backward gives, row by
row, entry by entry, with gradcheck's test ``|analytical - numerical| <= atol + rtol *
|numerical|``. Instead of gradcheck's dump of two matrices, it names the worst entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.autograd import Function

from autograd_helpers._common.runner import run_learner_code
from autograd_helpers._common.validate import require_callable, require_option
from autograd_helpers.checks._core.feedback import CheckResult, failed, from_learner_error, outlived
from autograd_helpers.checks._core.hints import value_hint
from autograd_helpers.checks._core.numeric import format_number, index_text
from autograd_helpers.checks._core.submission import forward_parameter_names
from autograd_helpers.finite_differences import central_columns

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["GradcheckReport", "explain_gradcheck"]

WORST_SHOWN = 3


@dataclass(frozen=True, repr=False)  # repr=False: keep CheckResult's, the message
class GradcheckReport(CheckResult):
    """The verdict of :func:`explain_gradcheck`, with both Jacobians to look at.

    Attributes:
        numerical, analytical: one 2-D Jacobian per input that requires grad (a row per
            output element, a column per input element), as a tuple in input order.
        names: the names of those inputs.
    """

    numerical: tuple[Tensor, ...] = field(default=(), repr=False)
    analytical: tuple[Tensor, ...] = field(default=(), repr=False)
    names: tuple[str, ...] = field(default=(), repr=False)

    def plot(self, input: int = 0) -> Figure:
        """Numerical, analytical and their difference for input ``input``, as three heatmaps.

        Example::

            >>> x = torch.randn(3, dtype=torch.float64, requires_grad=True)
            >>> explain_gradcheck(torch.sin, x).plot()
            <Figure size 960x280 with 6 Axes>
        """
        from autograd_helpers.plot import plot_heatmaps

        if not self.numerical:
            raise ValueError("plot(): there are no Jacobians to draw (the function raised)")
        if (
            isinstance(input, bool)
            or not isinstance(input, int)
            or not 0 <= input < len(self.names)
        ):
            raise ValueError(
                f"plot(): input must be an int in 0..{len(self.names) - 1}, got {input!r}"
            )
        numerical, analytical = self.numerical[input], self.analytical[input]
        return plot_heatmaps(
            {
                "numerical": numerical,
                "analytical (backward)": analytical,
                "analytical − numerical": analytical - numerical,
            },
            title=f"Jacobian with respect to {self.names[input]}: a row per output element",
            shared=True,
        )


def _analytical_rows(
    fn: Callable[..., Any], inputs: tuple[Any, ...], positions: list[int]
) -> tuple[list[Tensor], torch.Size]:
    """The Jacobian row by row: one backward pass per output element, as gradcheck does."""
    output = fn(*inputs)
    if not isinstance(output, Tensor):
        raise TypeError(
            f"explain_gradcheck() checks a function returning one tensor, got "
            f"{type(output).__name__}; check each output on its own: lambda *a: fn(*a)[k]"
        )
    differentiable = [inputs[p] for p in positions]
    flat = output.reshape(-1)
    jacobians = [x.new_zeros(flat.numel(), x.numel()) for x in differentiable]
    for i in range(flat.numel()):
        if not flat.requires_grad:
            break
        grads = torch.autograd.grad(flat[i], differentiable, retain_graph=True, allow_unused=True)
        for jac, grad in zip(jacobians, grads, strict=True):
            if grad is not None:
                jac[i] = grad.detach().reshape(-1)
    return jacobians, output.shape


def _numerical(
    fn: Callable[..., Any], inputs: tuple[Any, ...], positions: list[int], rows: int, eps: float
) -> list[Tensor]:
    columns = [inputs[p].new_zeros(rows, inputs[p].numel()) for p in positions]
    slot = {p: k for k, p in enumerate(positions)}
    for p, j, (column,) in central_columns(fn, inputs, positions, eps):
        columns[slot[p]][:, j] = column.reshape(-1)
    return columns


def explain_gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
) -> GradcheckReport:
    r"""Run gradcheck's comparison on ``fn`` and explain it: passed, or where and by how much.

    One difference from gradcheck: finite differences here nudge *copies* of the inputs, where
    gradcheck nudges the inputs themselves. A "constant" that shares memory with an input
    (``x.detach()`` captured by ``fn``) moves along under gradcheck, and makes a correct
    function fail there; here it stays put, and the function's own derivative is judged.

    Args:
        fn: the function to check (a Function's ``apply``, or any differentiable function),
            returning one tensor.
        *inputs: its inputs; the tensors that require grad are checked (use float64).
        eps: the finite-difference step, as gradcheck's ``eps``.
        atol, rtol: gradcheck's tolerances: an entry passes when
            :math:`|a - n| \le \mathrm{atol} + \mathrm{rtol}\,|n|`.

    Returns:
        A :class:`GradcheckReport` (``.passed``, ``.message``, ``.numerical``,
        ``.analytical``, ``.plot()``); it displays itself in Jupyter.

    Example::

        >>> x = torch.randn(4, dtype=torch.float64, requires_grad=True)
        >>> explain_gradcheck(torch.sigmoid, x).passed
        True
    """
    me = "explain_gradcheck"
    require_callable(me, "fn", fn)
    require_option(me, "eps", eps, "a positive number", lambda v: v > 0)
    require_option(me, "atol", atol, "a non-negative number", lambda v: v >= 0)
    require_option(me, "rtol", rtol, "a non-negative number", lambda v: v >= 0)
    positions = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not positions:
        raise ValueError(f"{me}(): no input requires grad; give at least one such tensor")
    for p in positions:
        if not inputs[p].is_floating_point():
            raise ValueError(f"{me}(): input {p} must be a real floating-point tensor")
    owner = getattr(fn, "__self__", None)  # MyFunction.apply is bound to MyFunction
    is_apply = isinstance(owner, type) and issubclass(owner, Function)
    subject = owner if is_apply else fn
    label = str(getattr(subject, "__name__", type(fn).__name__))
    all_names = forward_parameter_names(subject, len(inputs))
    names = tuple(all_names[p] for p in positions)
    outcome = run_learner_code(_analytical_rows, fn, inputs, positions)
    if outcome.error is not None:
        result = from_learner_error(label, "forward or backward", outcome)
        return GradcheckReport(result.status, result.title, result.details)
    analytical, output_shape = outcome.value
    rows = analytical[0].shape[0]
    numerical_outcome = run_learner_code(_numerical, fn, inputs, positions, rows, float(eps))
    if numerical_outcome.error is not None:
        result = from_learner_error(label, "forward (during finite differences)", numerical_outcome)
        return GradcheckReport(result.status, result.title, result.details)
    numerical = numerical_outcome.value
    changed = (*outcome.side_effects, *numerical_outcome.side_effects)
    if changed:
        title, advice = outlived("", changed, by="check")
        return GradcheckReport("failed", f"{label}: {title}", (advice,))
    shapes = tuple(inputs[p].shape for p in positions)
    dtypes = tuple(inputs[p].dtype for p in positions)
    jacobians = (tuple(numerical), tuple(analytical))
    return _report(label, names, shapes, dtypes, output_shape, jacobians, (atol, rtol, eps))


def _report(
    label: str,
    names: tuple[str, ...],
    shapes: tuple[torch.Size, ...],
    dtypes: tuple[torch.dtype, ...],
    output_shape: torch.Size,
    jacobians: tuple[tuple[Tensor, ...], tuple[Tensor, ...]],
    tolerances: tuple[float, float, float],
) -> GradcheckReport:
    """Name the worst entries beyond tolerance, or say that every entry agrees."""
    numerical, analytical = jacobians
    atol, rtol, eps = tolerances
    entries = sum(n.numel() for n in numerical)
    notes = [
        f"Note: `{name}` is {dtype}, not float64: finite differences are coarse in "
        "lower precision, so even a correct backward can fail (chapter 03, section 3)."
        for name, dtype in zip(names, dtypes, strict=True)
        if dtype != torch.float64
    ]
    worst: list[tuple[float, str]] = []
    failing: list[int] = []  # the inputs whose block of the Jacobian has bad entries
    bad_count = 0
    for k, (num, ana) in enumerate(zip(numerical, analytical, strict=True)):
        bad, worst_here = _bad_entries(num, ana, (atol, rtol), names[k], shapes[k], output_shape)
        bad_count += bad
        if bad:
            failing.append(k)
        worst += worst_here
    settings = f"eps={eps:g}, atol={atol:g}, rtol={rtol:g}"
    if not bad_count:
        return GradcheckReport(
            "passed",
            f"{label} passes gradcheck: all {entries} Jacobian entries agree ({settings}).",
            tuple(notes),
            numerical,
            analytical,
            names,
        )
    worst.sort(key=lambda item: -item[0])
    details = [
        "The worst entries (a row per output element, a column per input element):",
        *(f"  {text}" for _, text in worst[:WORST_SHOWN]),
    ]
    for k in failing:
        hint = value_hint(analytical[k], numerical[k], None)
        if hint:
            details.append(f"Hint for `{names[k]}`: {hint.removeprefix('Hint: ')}")
    result = failed(
        label,
        f"gradcheck fails: {bad_count} of {entries} Jacobian entries differ by more than "
        f"atol + rtol·|numerical| ({settings}).",
        *details,
        *notes,
    )
    return GradcheckReport(
        result.status, result.title, result.details, numerical, analytical, names
    )


def _bad_entries(
    num: Tensor,
    ana: Tensor,
    tolerances: tuple[float, float],
    name: str,
    shape: torch.Size,
    output_shape: torch.Size,
) -> tuple[int, list[tuple[float, str]]]:
    """One input's block of the Jacobian: how many entries fail gradcheck's test, and the
    worst few (at most ``WORST_SHOWN``), each as (error over what is allowed, a line naming
    the entry and both values)."""
    atol, rtol = tolerances
    error = (ana - num).abs()
    allowed = atol + rtol * num.abs()
    bad = ~(error <= allowed)
    badness = torch.where(bad, (error / allowed).nan_to_num(nan=float("inf")), -1.0)
    worst: list[tuple[float, str]] = []
    for flat in badness.reshape(-1).argsort(descending=True)[:WORST_SHOWN].tolist():
        if badness.reshape(-1)[flat] < 0:
            break
        i, j = divmod(flat, num.shape[1])
        element = index_text(j, shape)
        where_in = (
            f"input `{name}{element}`"
            if name.isidentifier()
            else f"{name} {element or '(a scalar)'}"  # "input 0 [3]"
        )
        where_out = index_text(i, output_shape) or "the output"
        worst.append(
            (
                float(badness.reshape(-1)[flat]),
                f"output {where_out}, {where_in}: numerical "
                f"{format_number(float(num[i, j]))}, analytical "
                f"{format_number(float(ana[i, j]))} (off by "
                f"{format_number(float(error[i, j]))})",
            )
        )
    return int(bad.sum()), worst
