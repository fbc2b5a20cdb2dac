"""How a learner may spell a dtype and a step, and what each other spelling is.

Used by ``check_gradcheck_settings``. Every spelling torch itself reads as the same thing
is read (Python's ``float`` is float64; a step may be a one-element tensor, a NumPy number,
``10 ** -7``); anything else is described in the learner's terms, with what to write
instead: a string, NumPy's dtype, a float8 storage format, an integer or complex dtype, a
step that is negative, zero, NaN, a list or one step per point.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from autograd_helpers.checks.gradcheck._errors import dtype_name

__all__ = ["as_dtype", "dtype_problem", "eps_problem", "is_number"]


def is_number(value: object) -> bool:
    if isinstance(value, Tensor):
        return value.numel() == 1
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _shown(given: object) -> str:
    """``None``, ``64.0 (float)``: how to name a value given as a dtype (its type alone when
    its repr is long or fails)."""
    if given is None:
        return "None"
    kind = type(given).__name__
    try:
        text = repr(given)
    except Exception:
        return f"a {kind}"
    return f"{text} ({kind})" if len(text) <= 60 else f"a {kind}"


def as_dtype(value: object) -> torch.dtype | None:
    """A torch dtype for ``value`` where torch itself reads it as one (``float`` too)."""
    if isinstance(value, torch.dtype):
        return value
    python = {float: torch.float64, int: torch.int64, complex: torch.complex128, bool: torch.bool}
    return python.get(value) if isinstance(value, type) else None


def dtype_problem(given: object) -> tuple[str, str] | None:
    """``(what it is, what to write)`` for a dtype that cannot make a meaningful check."""
    dtype = as_dtype(given)
    if dtype is None:
        if isinstance(given, str):
            spelled = f"torch.{given.removeprefix('torch.')}"
            return f"the string {given!r}", f"Write the dtype object, `{spelled}` (no quotes)."
        if (isinstance(given, type) and issubclass(given, np.generic)) or isinstance(
            given, np.dtype
        ):
            return (
                f"NumPy's {np.dtype(given).name}",
                "torch does not take NumPy dtypes: write `torch.float64`.",
            )
        return _shown(given), "The dtype is a torch dtype object: write `torch.float64`."
    if dtype.is_complex:
        return (
            f"{dtype} (complex)",
            "For a complex dtype gradcheck checks Wirtinger derivatives, and this function "
            "is real: use the real `torch.float64`.",
        )
    if not dtype.is_floating_point:
        return (
            f"{dtype}, an integer dtype" if dtype != torch.bool else f"{dtype}, True or False",
            "It cannot hold x ± eps, and gradients need floating point: use `torch.float64`.",
        )
    if dtype.itemsize < 2 or dtype_name(dtype).startswith(("float8", "float4")):
        return (
            f"{dtype}, a float8/float4 storage format",
            "It keeps 1 to 3 significant bits and most operations do not run in it (it is "
            "for storing weights, not for computing); finite differences mean nothing there: "
            "use `torch.float64`.",
        )
    return None


def eps_problem(given: object) -> tuple[str, str] | float:
    """The step as a float, or ``(what it is, what to write)``.

    Example::

        >>> eps_problem(np.float64(1e-6)), eps_problem(10**-7)
        (1e-06, 1e-07)
        >>> eps_problem("1e-6")
        ("the string '1e-6'", 'Write the number without quotes, such as `1e-6`.')
    """
    advice = "Give eps as one small positive number, such as `1e-6`."
    if isinstance(given, Tensor | np.ndarray):
        size = given.numel() if isinstance(given, Tensor) else given.size
        kind = "a tensor" if isinstance(given, Tensor) else "an array"
        if size != 1:
            return f"{kind} of {size} numbers", "Give one number, not one step per point."
        if isinstance(given, Tensor) and given.is_meta:
            return "a tensor on the meta device (it has a shape but no values)", advice
        try:
            given = given.item()
        except Exception as error:  # a fake or sparse tensor, an array of objects...
            return f"{kind} whose value cannot be read ({type(error).__name__})", advice
    if isinstance(given, bool | np.bool_):
        return f"{given} (a bool: True or False, not a step)", advice
    if isinstance(given, str | bytes | bytearray):
        kind = "string" if isinstance(given, str) else type(given).__name__
        return f"the {kind} {given!r}", "Write the number without quotes, such as `1e-6`."
    if isinstance(given, list | tuple | set | dict):
        return f"a {type(given).__name__} ({given!r})", advice
    if isinstance(given, complex | np.complexfloating):
        return f"the complex {given}", advice
    try:
        number = float(given)  # type: ignore[arg-type]
    except OverflowError:
        return "a number too large for a float", advice
    except Exception:  # no __float__, or one that raises
        shown = "None" if given is None else type(given).__name__
        return shown, advice
    if math.isnan(number):
        return "nan", "nan poisons every difference: give a number, such as `1e-6`."
    if number <= 0:
        what = "0" if number == 0 else f"{number:g}, a negative number"
        return what, (
            "gradcheck steps to x + eps and x - eps: the step must be positive, such as `1e-6` "
            "(with 0 both points coincide and the difference is 0/0)."
        )
    if number >= 1:
        return f"{number:g}", (
            "A step of 1 or more is not small: the central difference would average the "
            "function's shape over the whole step. Give a small positive number, such as `1e-6`."
        )
    return number
