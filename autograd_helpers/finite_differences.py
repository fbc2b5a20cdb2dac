r"""Finite differences: derivatives from function values alone, the idea behind gradcheck.

Introduced in ``03_gradcheck.ipynb``. Nudge one input element by :math:`\pm\varepsilon` and
watch the output move:

.. math:: \frac{\partial f}{\partial x_j} \approx
          \frac{f(x + \varepsilon e_j) - f(x - \varepsilon e_j)}{2\varepsilon}.

This *central* difference is off by :math:`O(\varepsilon^2)` (truncation: the Taylor terms it
ignores); the one-sided one by :math:`O(\varepsilon)`. But the two values subtracted agree in most
digits, each rounded to about machine epsilon times :math:`|f|`, and dividing by
:math:`\varepsilon` blows that up like :math:`1/\varepsilon`: too large an :math:`\varepsilon`
and truncation dominates, too small and rounding does (the V of :func:`plot_eps_sweep`).

:func:`central_difference` is the formula here, in one place: the course's exercise checker
estimates gradients with it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.validate import require_callable, require_option
from autograd_helpers._finite_analytical import analytical_jacobian, unconnected_jacobian
from autograd_helpers._finite_guards import (
    module_dtypes,
    positive_steps,
    precision_note,
    require_module_dtype,
    steady,
)
from autograd_helpers._finite_views import (
    DerivativeComparison,
    compare_derivatives,
    plot_eps_sweep,
)

__all__ = [
    "DerivativeComparison",
    "central_columns",
    "central_difference",
    "compare_derivatives",
    "eps_sweep",
    "evaluate_copied",
    "plot_eps_sweep",
]


def _outputs(value: object, caller: str) -> tuple[Tensor, ...]:
    outputs = value if isinstance(value, tuple) else (value,)
    if not outputs or not all(isinstance(o, Tensor) for o in outputs):
        raise TypeError(
            f"{caller}(): f must return a tensor or a tuple of tensors, got {type(value).__name__}"
        )
    return outputs


def central_columns(
    f: Callable[..., object], args: Sequence[object], positions: Sequence[int], eps: float
) -> Iterator[tuple[int, int, tuple[Tensor, ...]]]:
    """For each element ``j`` of each input ``args[p]`` (``p`` in ``positions``): ``(p, j,
    columns)``, where ``columns[k]`` is output ``k``'s central difference along that element.

    The arithmetic stays in the inputs' and outputs' own dtype (in float32, the rounding
    error is float32's). ``f`` runs under ``torch.no_grad`` on copies: ``args`` is unchanged.

    Example::

        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> for p, j, (column,) in central_columns(lambda t: t**2, [x], [0], 1e-6):
        ...     print(p, j, column.round(decimals=6).tolist())
        0 0 [2.0, 0.0]
        0 1 [0.0, 4.0]
    """
    me = "central_columns"
    require_callable(me, "f", f)
    require_option(me, "eps", eps, "a positive number", lambda v: v > 0)
    for p in positions:
        if not (isinstance(p, int) and 0 <= p < len(args)):
            raise ValueError(f"{me}(): positions must index args, got {p!r}")
        x = args[p]
        if not isinstance(x, Tensor) or not x.is_floating_point():
            kind = x.dtype if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(f"{me}(): args[{p}] must be a floating-point tensor, got {kind}")
    return _columns(f, args, positions, eps)


def _copies(args: Sequence[object]) -> list[object]:
    # A fresh copy per call: f may write into its inputs, which must not move the point.
    return [x.clone() if isinstance(x, Tensor) else x for x in args]


def _contiguous_copy(x: Tensor) -> Tensor:
    # Contiguous, so that a flat view writes through; a sparse tensor has no such layout,
    # and is only ever passed along as a constant.
    if x.layout != torch.strided:
        return x.detach().clone()
    return x.detach().clone(memory_format=torch.contiguous_format)


def evaluate_copied(f: Callable[..., object], args: Sequence[object]) -> tuple[Tensor, ...]:
    """``f``'s outputs at ``args``, as tensors that share memory with nothing.

    ``f`` gets copies of ``args``, and what it returns is copied too: a function that
    returns its input, a view of it (``t[0]``, ``t.t()``) or a buffer it reuses would
    otherwise hand back the same memory for the point ``+eps`` as for ``-eps``, and every
    difference would be 0.

    Example::

        >>> x = torch.zeros(2)
        >>> (out,) = evaluate_copied(lambda t: t.add_(1), [x])  # writes into its input...
        >>> x, out  # ...a copy of x, so x itself is unchanged
        (tensor([0., 0.]), tensor([1., 1.]))
    """
    require_callable("evaluate_copied", "f", f)
    if not isinstance(args, list | tuple):
        raise TypeError(
            f"evaluate_copied(): args must be a list or tuple of arguments, got "
            f"{type(args).__name__}"
        )
    return tuple(o.detach().clone() for o in _outputs(f(*_copies(args)), "central_difference"))


def _columns(
    f: Callable[..., object], args: Sequence[object], positions: Sequence[int], eps: float
) -> Iterator[tuple[int, int, tuple[Tensor, ...]]]:
    with torch.no_grad():
        base = [_contiguous_copy(x) if isinstance(x, Tensor) else x for x in args]
        for p in positions:
            x = base[p]
            assert isinstance(x, Tensor)
            flat = x.view(-1)  # contiguous: writing into the view moves x
            for j in range(flat.numel()):
                original = flat[j].clone()
                flat[j] = original + eps
                plus = evaluate_copied(f, base)
                flat[j] = original - eps
                minus = evaluate_copied(f, base)
                flat[j] = original
                yield p, j, tuple((a - b) / (2 * eps) for a, b in zip(plus, minus, strict=True))


def central_difference(
    f: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], eps: float = 1e-6
) -> Any:
    r"""The Jacobian of ``f`` at ``inputs`` by central differences, with no autograd at all.

    The result is shaped like :func:`torch.autograd.functional.jacobian`'s: for one input
    and one output, a tensor of shape ``output.shape + input.shape``; for a tuple of inputs,
    one Jacobian per input; for a tuple of outputs, one entry (as before) per output.

    Args:
        f: a function of ``inputs`` (called as ``f(*inputs)`` for a tuple) returning a
            tensor or a tuple of tensors.
        inputs: a floating-point tensor, or a tuple of them.
        eps: the step, positive. In float64, ``1e-6`` gives about nine correct digits.
            Inputs in float32 (or float16) get a warning with the size of the rounding
            error the step magnifies.

    ``f`` must be one fixed function. A random ``f`` (dropout in train mode) gets the same
    torch random state at every evaluation, with a warning: the result is the Jacobian of
    ``f`` with that one draw (one dropout mask). An ``f`` that returns other values at the
    same point even so (it draws from its own ``torch.Generator``, from NumPy or Python's
    ``random``) is refused with a ``ValueError``: it is evaluated twice at ``inputs`` first,
    and at its first perturbed points (an ``f`` random only away from ``inputs`` is found).
    A module not yet materialised (``nn.LazyLinear`` never called) is refused too: call it
    once first. Modules ``f`` reaches are put back afterwards: their parameters, buffers
    (batch norm in train mode updates its running statistics at each evaluation, and keeps
    none of those updates), flags and other attributes (a call counter, a cache, a list of
    hooks). The caller's random states, torch's, Python's and NumPy's, are left as they were.

    Example::

        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> central_difference(lambda t: t**2, x).round(decimals=6)  # diag(2x)
        tensor([[2., 0.],
                [0., 4.]], dtype=torch.float64)
    """
    me = "central_difference"
    require_callable(me, "f", f)
    require_option(me, "eps", eps, "a positive number", lambda v: v > 0)
    several = isinstance(inputs, tuple)
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    if not args:
        raise ValueError(f"{me}(): inputs must hold at least one tensor")
    for i, x in enumerate(args):
        if not isinstance(x, Tensor) or not x.is_floating_point():
            kind = x.dtype if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(f"{me}(): inputs[{i}] must be a floating-point tensor, got {kind}")
        if x.layout != torch.strided:
            layout = "sparse" if "sparse" in str(x.layout) else str(x.layout)
            raise TypeError(
                f"{me}(): inputs[{i}] is a {layout} tensor ({x.layout}); central_difference "
                f"nudges the elements of dense tensors: pass inputs[{i}].to_dense()"
            )
    with steady(me, f, args) as repeatable:
        precision_note(me, args, float(eps))
        return _jacobians(me, repeatable, args, float(eps), several)


def _jacobians(
    me: str, f: Callable[..., Any], args: tuple[Tensor, ...], eps: float, several: bool
) -> Any:
    with torch.no_grad():
        value = f(*_copies(args))
    outputs = _outputs(value, me)
    jacobians = [
        [out.new_zeros(out.numel(), x.numel()) for x in args]  # a column per input element
        for out in outputs
    ]
    for p, j, columns in central_columns(f, args, list(range(len(args))), eps):
        for k, column in enumerate(columns):
            jacobians[k][p][:, j] = column.reshape(-1)
    shaped = [
        tuple(jac.reshape((*out.shape, *x.shape)) for jac, x in zip(row, args, strict=True))
        for row, out in zip(jacobians, outputs, strict=True)
    ]
    per_output = [row if several else row[0] for row in shaped]
    return tuple(per_output) if isinstance(value, tuple) else per_output[0]


def eps_sweep(
    f: Callable[[Tensor], Tensor],
    x: Tensor,
    eps_values: Iterable[float],
    dtypes: Sequence[torch.dtype] | None = None,
) -> list[dict[str, Any]]:
    """How far central differences land from autograd's Jacobian, for each dtype and eps.

    For each dtype, ``x`` is converted to it, the analytical Jacobian is taken with autograd
    (as gradcheck does, in that dtype) and the numerical one with :func:`central_difference`
    at each step in ``eps_values``.

    Args:
        f: a differentiable function of one tensor, returning one tensor; it gets a copy of
            the point, so it may work on it in place.
        x: the point, a floating-point tensor.
        eps_values: positive steps, in any order: a list, a NumPy array or a 1-D tensor.
        dtypes: floating-point dtypes to compare; by default float32 and float64 for a
            function, and the parameters' own dtype for a module (or a function that uses
            one). A dtype other than a module's is refused: the point would be in one dtype
            and the module in another (convert the module first).

    Random ``f`` and modules ``f`` reaches are handled as :func:`central_difference` does
    them: one random state for every evaluation (the analytical Jacobian's too), a lazy
    module not yet materialised refused, and the modules put back afterwards. An error that
    is NaN (``f`` or its derivative is not finite at ``x``) is recorded as NaN. An ``f``
    whose output is not connected to ``x`` by autograd (``x.detach() * 2``, a detour through
    NumPy) but changes with ``x`` is refused with a ``ValueError``: its analytical Jacobian
    would be zero; so is one whose backward runs only once on a graph (a reversible block's)
    or refuses ``torch.autograd.grad``, which its Jacobian runs once per output element.

    Returns:
        A list of plain records, ``{"dtype": torch.float32, "eps": 1e-3, "error": 2.1e-6}``,
        where ``error`` is the largest absolute difference between the two Jacobians.

    Example::

        >>> records = eps_sweep(torch.sin, torch.ones(3), [1e-2, 1e-5], dtypes=(torch.float64,))
        >>> [f"{r['error']:.0e}" for r in records]  # the error shrinks with eps, here
        ['9e-06', '1e-11']
    """
    me = "eps_sweep"
    require_callable(me, "f", f)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{me}(): x must be a floating-point tensor, got {type(x).__name__}")
    steps = positive_steps(me, eps_values)
    if dtypes is None:
        dtypes = module_dtypes(f) or (torch.float32, torch.float64)
    if not dtypes or not all(isinstance(d, torch.dtype) and d.is_floating_point for d in dtypes):
        raise ValueError(f"{me}(): dtypes must be floating-point torch dtypes, got {dtypes!r}")
    for dtype in dtypes:
        require_module_dtype(me, f, dtype)

    def one_tensor(t: Tensor) -> Tensor:
        value = f(t.clone())  # a copy: f may work in place, autograd's leaf may not be
        if not isinstance(value, Tensor):
            raise TypeError(
                f"{me}(): f must return one tensor, got {type(value).__name__}: eps_sweep "
                "compares one Jacobian; sweep one output at a time (lambda t: f(t)[0])"
            )
        return value

    records = []
    for dtype in dtypes:
        point = x.detach().to(dtype).clone()  # its own memory, cut from x's graph
        with steady(me, one_tensor, (point,)) as repeatable:
            analytical = analytical_jacobian(me, repeatable, point)
            for eps in steps:
                numerical = _jacobians(me, repeatable, (point,), eps, several=False)
                if analytical is None:  # f's output is not connected to x by autograd
                    analytical = unconnected_jacobian(me, numerical)
                error = float((numerical - analytical).abs().max()) if numerical.numel() else 0.0
                records.append({"dtype": dtype, "eps": eps, "error": error})
    return records
