"""Watching a forward and backward pass: the learner's lines, NaNs, in-place operations."""

from __future__ import annotations

import re
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from autograd_helpers._checking.feedback import box_html, box_text
from autograd_helpers._checking.runner import is_learner_file, run_learner_code

__all__ = [
    "FRAME",
    "BackwardRecord",
    "Report",
    "Watch",
    "learner_frame_in",
    "learner_frame_now",
    "run_watched",
]

FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s+(.+)')


def _code(line: str) -> str:
    """A line of code without its trailing comment."""
    return line.split("  #")[0].strip()


def learner_frame_now() -> str:
    """``"in loss: y = torch.log(x)"`` for the innermost learner frame of the current stack."""
    for frame in reversed(traceback.extract_stack()):
        if is_learner_file(frame.filename) and frame.line:
            return f"in {frame.name}: {_code(frame.line)}"
    return ""


def learner_frame_in(trace: str) -> str:
    """The innermost learner frame of a formatted traceback (anomaly mode's), as above."""
    found = ""
    for filename, _line, function, code in FRAME.findall(trace):
        if is_learner_file(filename):
            found = f"in {function}: {_code(code)}"
    return found


def _leaves(inputs: Sequence[Any]) -> list[Any]:
    """Floating-point tensors as fresh leaves that require grad; other inputs as they are."""
    return [
        x.detach().clone().requires_grad_()
        if isinstance(x, Tensor) and x.is_floating_point()
        else x
        for x in inputs
    ]


def _op_name(func: Any) -> str:
    name = str(getattr(func, "__name__", func))
    return name.strip("_")


def _makes_nan(result: object, arguments: Sequence[object]) -> bool:
    """A floating-point result with a NaN made from arguments without one."""
    if not isinstance(result, Tensor) or not result.is_floating_point():
        return False
    if not bool(result.isnan().any()):
        return False
    return not any(
        isinstance(a, Tensor) and a.is_floating_point() and bool(a.isnan().any()) for a in arguments
    )


class Watch(TorchFunctionMode):
    """Records the first op that makes a NaN from NaN-free inputs, and every in-place op."""

    def __init__(self) -> None:
        super().__init__()
        self.first_nan: tuple[str, str] | None = None  # (op, learner line)
        self.inplace: list[dict[str, Any]] = []

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        name = str(getattr(func, "__name__", ""))
        target = args[0] if args and isinstance(args[0], Tensor) else None
        in_place = target is not None and (
            name == "__setitem__"
            or (name.endswith("_") and not name.startswith("_"))
            or (name.startswith("__i") and name.endswith("__"))
        )
        if in_place and target is not None:
            self.inplace.append(
                {
                    "op": name,
                    "shape": tuple(target.shape),
                    "made_by": type(target.grad_fn).__name__ if target.grad_fn else "a leaf",
                    "version": target._version,
                    "line": learner_frame_now(),
                }
            )
        result = func(*args, **kwargs)
        if self.first_nan is None and _makes_nan(result, (*args, *kwargs.values())):
            self.first_nan = (_op_name(func), learner_frame_now())
        return result


def _graph_nodes(root: Any) -> list[Any]:
    """Every node below ``root`` except the leaves' ``AccumulateGrad``."""
    seen, stack, nodes = {root}, [root], []
    while stack:
        node = stack.pop()
        if not hasattr(node, "variable"):
            nodes.append(node)
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return nodes


@dataclass
class BackwardRecord:
    """What happened in backward: each node that produced a NaN or inf, in the order it ran."""

    events: list[tuple[str, str, str]] = field(default_factory=list)  # (node, kind, line)


def _watch_backward(output: Tensor) -> tuple[BackwardRecord, list[Any]]:
    record = BackwardRecord()

    def hook_for(node: Any) -> Callable[..., None]:
        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            made = [g for g in grad_inputs if isinstance(g, Tensor)]
            if any(bool(g.isnan().any()) for g in made):
                kind = "nan"
            elif any(bool(g.isinf().any()) for g in made):
                kind = "inf"
            else:
                return
            trace = "".join(node.metadata.get("traceback_", []))
            record.events.append((type(node).__name__, kind, learner_frame_in(trace)))

        return hook

    handles = [node.register_hook(hook_for(node)) for node in _graph_nodes(output.grad_fn)]
    return record, handles


def run_watched(
    fn: Callable[..., Any], inputs: Sequence[Any], check_nan: bool
) -> tuple[Any, Watch, BackwardRecord, str]:
    """Forward and backward under anomaly mode: (outcome, forward watch, backward record,
    the forward traceback anomaly mode reported with an error)."""
    watch, backward = Watch(), BackwardRecord()
    leaves = _leaves(inputs)

    def forward_and_backward() -> Tensor:
        nonlocal backward
        with watch:
            output = fn(*leaves)
        if not isinstance(output, Tensor):
            raise TypeError(f"fn must return a tensor, got {type(output).__name__}")
        if output.requires_grad and not bool(output.isnan().any()):
            backward, handles = _watch_backward(output)
            try:
                output.backward(torch.ones_like(output))
            finally:
                for handle in handles:
                    handle.remove()
        return output

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly(check_nan=check_nan):
            outcome = run_learner_code(forward_and_backward)
    trace = next(
        (str(w.message) for w in caught if str(w.message).startswith("Error detected in")), ""
    )
    return outcome, watch, backward, trace


@dataclass(frozen=True)
class Report:
    found: bool
    message: str
    title: str = field(default="", repr=False)
    details: tuple[str, ...] = field(default=(), repr=False)
    raised: bool = field(default=False, repr=False)  # fn itself raised: nothing was traced

    def _look(self) -> tuple[str, str]:
        if self.raised:
            return "❌", "#cf222e"
        return ("🔎", "#9a6700") if self.found else ("✅", "#1a7f37")

    def __repr__(self) -> str:
        return box_text(self._look()[0], self.title, self.details)

    def _repr_html_(self) -> str:
        icon, colour = self._look()
        return box_html(icon, colour, self.title, self.details)
