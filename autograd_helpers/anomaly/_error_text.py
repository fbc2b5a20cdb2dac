"""PyTorch's "modified by an inplace operation" error, read: the tensor's dtype and shape,
the versions, and the name the error gives it.

Kept apart from ``_inplace`` (the report), which builds on what is read here.
"""

from __future__ import annotations

import re

__all__ = ["VERSION", "dtype_name", "named"]

# "[torch.FloatTensor [3]]", "[torch.cuda.HalfTensor [2, 3]]", "[CPUBFloat16Type [3]]"...
VERSION = re.compile(
    r"\[([\w.]+) \[([\d, ]*)\]\](?:, which is output (\d+) of ([\w:]+),)? is at version (\d+); "
    r"expected version (\d+)"
)
_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
}


def dtype_name(kind: str) -> str:
    """``"float32"`` for ``"torch.FloatTensor"``, ``"bfloat16"`` for ``"CPUBFloat16Type"``."""
    base = re.sub(r"^(torch\.)?(cuda\.|mps\.|xpu\.)?(CPU|CUDA|MPS|XPU)?", "", kind)
    base = re.sub(r"(Tensor|Type)$", "", base)
    return _DTYPES.get(base, base.lower() or kind)


def named(output: str, op: str) -> str:
    """How PyTorch's error names the tensor. A view changed in place gets a new ``grad_fn``
    (``AsStrided``) when it is read; the error names that one while it is alive, as it is
    when backward keeps the graph (the tool's own backward runs with ``retain_graph=True``),
    and else the op that saved the view, when that op changed it in place (``relu_``:
    "output 0 of Relu"). Which one the caller's own error says cannot be told here: both."""
    if op == "AsStrided":
        return (
            f" (a view: PyTorch's error calls it output {output} of AsStrided, or of the op "
            "that saved it when that op changed it in place)"
        )
    return f" (PyTorch's error calls it output {output} of {op})"
