"""A NaN that forward made, explained: the op that made it, a hook's, or a tensor that fn
did not compute (a parameter or a global that already held it).

Kept apart from ``_nan``, whose longer part explains a NaN made in backward.
"""

from __future__ import annotations

from autograd_helpers.anomaly._causes import forward_nan
from autograd_helpers.anomaly._nan_other import iteration, lines
from autograd_helpers.anomaly._origin import NanOrigin
from autograd_helpers.anomaly._quiet import stepped_origin
from autograd_helpers.anomaly._tracing import Run

__all__ = ["in_forward"]


def in_forward(run: Run) -> NanOrigin:
    watch = run.watch
    made = watch.first_nan
    if made is None:
        op, line = watch.nan_use or ("an operation", "")
        where = f" ({line})" if line else ""
        message = (
            f"No operation of fn made the NaN: `{op}`{where} received a tensor that already "
            "held it and that fn did not compute (a model's parameter, or a global tensor). "
            "Find where that tensor got its NaN."
        )
        title = f"NaN in forward, from a tensor fn did not make (first used by `{op}`)"
        return NanOrigin(True, message, title, (message,), stage="forward", node=op, source=line)
    where = f" ({made.line})" if made.line else ""
    if made.hook:  # the learner's hook, not the model's op, made it
        message = (
            f"The NaN appears in forward, made by a {made.hook}{where}: the hook's own "
            f"`{made.op}` made it, not an operation of the model. Fix the hook: it must "
            f"return finite values (or None, to leave the output as it is). Its `{made.op}` "
            f"made NaN because {forward_nan(made)}"
        )
        node, title = made.hook, f"NaN in forward: a {made.hook}"
    elif made.step is not None:  # an optimizer step made a parameter infinite before
        return stepped_origin(made, run)
    else:
        message = f"The NaN appears in forward, made by `{made.op}`{where}: {forward_nan(made)}"
        node, title = made.op, f"NaN in forward: `{made.op}`"
    message += iteration(made.backwards_before, "forward pass", lines(run))
    return NanOrigin(True, message, title, (message,), stage="forward", node=node, source=made.line)
