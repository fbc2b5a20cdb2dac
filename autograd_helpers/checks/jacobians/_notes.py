"""Valid routes other than the one an exercise teaches: each passes, with a note that says so.

Used by chapter 02's exercise tables (:mod:`._loop`, :mod:`._hvp`).
Each note is a check that returns a :class:`~autograd_helpers.checks._core.problems.Finding`
whose title is the note, for the first run that shows it: rows batched with ``torch.func.vmap``
or with ``is_grads_batched=True`` (the legacy vmap), columns from forward mode or from
``torch.autograd.functional.jvp`` (the double-backward trick, not forward mode),
forward-over-reverse, ``f`` evaluated again for every row, a result that keeps its graph
alive, a NaN replaced (``nan_to_num``, a selection on ``isnan``:
:mod:`autograd_helpers.checks._contain.nan_patching`).
"""

from __future__ import annotations

from torch import Tensor

from autograd_helpers.checks._core.problems import Check, Finding, Run
from autograd_helpers.checks.jacobians._checks import FORWARD_MODE

__all__ = [
    "batched_rows",
    "forward_columns",
    "forward_over_reverse",
    "kept_graph",
    "nan_patched",
    "repeated_forwards",
]

_DOUBLE_BACKWARD_JVP = "torch.autograd.functional.jvp"


def batched_rows(run: Run) -> Finding | None:
    """Note: the rows as one batched pass (``torch.func.vmap`` or ``is_grads_batched``)."""
    if run.usage.took(("torch.func.vmap",)):
        return Finding(
            "Note: it computes the rows as one batched pass with `torch.func.vmap`, which is "
            "what `jacrev` does inside: right. The loop is the definition it vectorises."
        )
    if not run.usage.batched_passes:
        return None
    return Finding(
        "Note: it computes the rows as one batched pass with `is_grads_batched=True`: right. "
        "That option batches with the legacy vmap (`torch._vmap_internals`, section 3), not "
        "`torch.func.vmap`: for an operator it has no batching rule for, such as "
        "`tanh_backward`, it falls back to a loop, one call per row. The loop is the definition "
        "it vectorises."
    )


def forward_columns(run: Run) -> Finding | None:
    """Note: columns from Jacobian-vector products instead of rows from backward passes."""
    if run.usage.took(FORWARD_MODE):
        return Finding(
            "Note: it builds the columns with Jacobian-vector products in forward mode: exact "
            "and right, and the better choice when there are few inputs (section 4). The "
            "exercise's way is the rows, one `torch.autograd.grad` each."
        )
    if not run.usage.took((_DOUBLE_BACKWARD_JVP,)):
        return None
    return Finding(
        "Note: it builds the columns with `torch.autograd.functional.jvp`: right, but that is "
        "not forward mode; it is the double-backward trick (section 3), two backward passes "
        "per column. Forward mode is `torch.func.jvp`. The exercise's way is the rows, one "
        "`torch.autograd.grad` each."
    )


def repeated_forwards(run: Run) -> Finding | None:
    """Note: ``f`` evaluated again for the rows, where one forward pass is enough."""
    forwards = run.usage.forwards
    if forwards <= 2 or run.usage.took((*FORWARD_MODE, _DOUBLE_BACKWARD_JVP)):
        return None
    return Finding(
        f"Note: it evaluates f {forwards} times on {run.problem.description}. One forward "
        "pass is enough: keep its graph for every row with `retain_graph=True`."
    )


def forward_over_reverse(run: Run) -> Finding | None:
    """Note: ``torch.func.jvp`` of the gradient, a valid H v without H."""
    if not run.usage.took(FORWARD_MODE):
        return None
    return Finding(
        "Note: forward-over-reverse (a forward-mode Jacobian-vector product of the gradient, "
        "`torch.func.jvp` or `linearize`) also gives H v without forming H: right. The "
        "exercise's way is double backward."
    )


def kept_graph(what: str) -> Check:
    """A note for a result that requires grad (``create_graph=True`` where not needed)."""

    def graph_kept(run: Run) -> Finding | None:
        if not (isinstance(run.value, Tensor) and run.value.requires_grad):
            return None
        return Finding(
            f"Note: the {what} it returns requires grad (`create_graph=True`), which keeps "
            "the graph alive as long as the result. Only a gradient you differentiate again "
            "needs it."
        )

    return graph_kept


def nan_patched(avoid: str) -> Check:
    """A note for a right result that replaced a NaN; ``avoid`` says how not to make one."""

    def note(run: Run) -> Finding | None:
        if not run.nan_patched:
            return None
        return Finding(
            f"Note: it {run.nan_patched}: the result is right, but that hides a NaN instead "
            "of avoiding it, and it hides every NaN, a real bug's too. " + avoid
        )

    return note
