"""Reading a learner's answer that names a profile's row: the chapter 06 checkers' spellings.

An answer that names a row (a region's label, an operator) is accepted in every spelling
that means the same row: surrounding spaces, another capitalisation, the Python spelling of
an operator (``torch.ops.aten.fill_``), or the row itself (a ``key_averages()`` event, one
of ``profile_ops``' row dicts).
"""

from __future__ import annotations

import re

import torch

__all__ = ["read_name"]


def read_name(answer: object) -> tuple[str, str] | None:
    """The row name an answer gives, and how it was read (``""`` for a plain str).

    A str (spaces and a trailing ``()`` dropped; ``torch.ops.aten.x`` read as ``aten::x``),
    a profiler event (its ``key`` or ``name``), a ``profile_ops`` row (its ``"name"``), or an
    operator object such as ``torch.ops.aten.fill_``. ``None`` for anything else.

    Example::

        >>> read_name("  torch.ops.aten.fill_() ")
        ('aten::fill_', 'the Python spelling of the operator')
        >>> read_name(torch.ops.aten.addmm.default)
        ('aten::addmm', 'the Python spelling of the operator')
        >>> read_name("aten::fill_.Scalar")[1].split(" (")[0]
        "the operator's name without its overload `.Scalar`"
        >>> read_name("Tensor.fill_")
        ('aten::fill_', 'the Python spelling of the operator')
        >>> read_name(torch.Tensor.fill_)
        ('aten::fill_', 'the Python spelling of the operator')
        >>> read_name("aten::fill_.bogus")  # no such overload: judged as it is written
        ('aten::fill_.bogus', '')
        >>> read_name({"name": "aten::mm", "calls": 6})
        ('aten::mm', "the row's name")
        >>> read_name(["aten::mm"]) is None
        True
    """
    how = ""
    if isinstance(answer, dict) and isinstance(answer.get("name"), str):
        answer, how = answer["name"], "the row's name"
    elif not isinstance(answer, str):
        for attribute in ("key", "name"):
            try:  # an object's __getattr__ may raise anything: then it names no row
                value = getattr(answer, attribute, None)
            except Exception:
                value = None
            if isinstance(value, str) and type(answer).__module__.startswith("torch"):
                answer, how = value, f"the event's `.{attribute}`"
                break
        else:
            if type(answer).__module__.startswith("torch._ops"):
                answer = str(answer)  # torch.ops.aten.fill_ prints as "aten.fill_"
            elif (method := _torch_method(answer)) is not None:
                answer = method  # torch.Tensor.fill_, torch.fill_: the operator they call
            else:
                return None
    assert isinstance(answer, str)
    text = answer.strip().removesuffix("()").strip()
    for prefix in _PYTHON_PREFIXES:
        if text.startswith(prefix):
            text, how = "aten::" + text.removeprefix(prefix), "the Python spelling of the operator"
            break
    overload = _OVERLOAD.match(text)
    if overload is not None and _is_overload(overload["operator"], overload["overload"]):
        # aten::addmm.default, addmm.out: one row, whatever the overload
        text = overload["prefix"] + overload["operator"]
        how = how or (
            f"the operator's name without its overload `.{overload['overload']}` (the "
            "profiler's rows name operators, not which overload ran: any of them is read "
            "as the row)"
        )
    return text, how


def _torch_method(answer: object) -> str | None:
    """``"torch.Tensor.fill_"`` for the method ``torch.Tensor.fill_`` (or ``torch.fill_``)."""
    try:  # an object's __getattr__ may raise anything: then it names no operator
        name = getattr(answer, "__name__", None)
        owner = getattr(answer, "__objclass__", None) or getattr(answer, "__self__", None)
        module = getattr(answer, "__module__", None)
    except Exception:
        return None
    if not isinstance(name, str) or not callable(answer):
        return None
    if isinstance(owner, type) and issubclass(owner, torch._C.TensorBase):
        return f"torch.Tensor.{name}"
    if module == "torch" and getattr(torch, name, None) is answer:
        return f"torch.{name}"
    return None


def _is_overload(operator: str, overload: str) -> bool:
    """Is ``overload`` one of ``aten::operator``'s overloads (``default`` for the plain one)?"""
    try:
        packet = getattr(torch.ops.aten, operator)
        return overload in ("default", *packet.overloads())
    except Exception:  # no such operator: the name is kept whole, and judged as a typo
        return False


# The Python spellings of an operator, longest first: ``torch.ops.aten.mm``, ``Tensor.mm``.
_PYTHON_PREFIXES = ("torch.ops.aten.", "torch.Tensor.", "Tensor.", "torch.", "aten.")


# An operator named with one of its overloads: ``aten::addmm.default``, ``fill_.Scalar``.
_OVERLOAD = re.compile(
    r"^(?P<prefix>(aten::)?)(?P<operator>[A-Za-z_]\w*)\.(?P<overload>[A-Za-z_]\w*)$"
)
