"""What a Function's ``backward`` returned, judged before the engine touches it.

For :func:`autograd_helpers.checks.check_function`: one gradient per forward input, in a tuple
(not a list), ``None`` for an input that is not a tensor, and each gradient a tensor of its
input's shape (or one autograd can sum down to it: :func:`broadcast_notes` says so), dtype and
device. Apart from :mod:`._gradient_match`, which judges the gradients' values once the
engine has delivered them.
"""

from __future__ import annotations

from torch import Tensor

from autograd_helpers.checks._core.hints import dtype_hint, sum_to, swap_hint, transposed_hint
from autograd_helpers.checks._core.trial import Trial
from autograd_helpers.checks.function._wording import Verdict, kind_of, shape_text

__all__ = ["broadcast_notes", "inspect_raw_gradients"]


def _count(grads: tuple[object, ...], trial: Trial) -> Verdict | None:
    count = len(trial.inputs)
    if len(grads) >= count and all(g is None for g in grads[count:]):
        return None
    ins = ", ".join(f"`{n}`" for n in trial.names)
    details = [f"Return one gradient per forward input ({ins}), in the same order."]
    non_tensors = [
        f"`{trial.names[i]}`" for i, x in enumerate(trial.inputs) if not isinstance(x, Tensor)
    ]
    if non_tensors:
        details.append("Inputs that are not tensors get `None`: " + ", ".join(non_tensors) + ".")
    return Verdict(
        f"backward returned {len(grads)} gradient{'s' * (len(grads) != 1)}, but forward "
        f"takes {count} input{'s' * (count != 1)}.",
        tuple(details),
    )


def inspect_raw_gradients(raw: object, trial: Trial) -> Verdict | None:
    """Judge exactly what a Function's ``backward`` returned, before the engine touches it.

    A gradient whose shape is its input's broadcast up (``(3, 4)`` for a ``(4,)`` input) is
    fine: autograd sums it down, as for its own operations (see :func:`broadcast_notes`).
    """
    if isinstance(raw, list):
        return Verdict(
            "backward returned a list; return a tuple (or, for one input, just the tensor)."
        )
    grads = raw if isinstance(raw, tuple) else (raw,)
    verdict = _count(grads, trial)
    if verdict is not None:
        return verdict
    shapes = [x.shape if isinstance(x, Tensor) else None for x in trial.leaves]
    for i, grad in enumerate(grads[: len(trial.inputs)]):
        name, leaf = trial.names[i], trial.leaves[i]
        if not isinstance(leaf, Tensor):
            if grad is not None:
                return Verdict(
                    f"backward returned a gradient for `{name}`, but `{name}` is not a tensor "
                    f"(it is a {kind_of(trial.inputs[i])}).",
                    ("Return `None` in its place: only tensors get gradients.",),
                )
            continue
        if i not in trial.wrt or grad is None:
            continue  # None for an input that needs a gradient is judged by its values
        if not isinstance(grad, Tensor):
            return Verdict(f"the gradient for `{name}` is a {kind_of(grad)}, not a tensor.")
        if grad.shape != leaf.shape and sum_to(grad.detach(), leaf.shape) is None:
            tensor_shapes = [s for s in shapes if s is not None]
            hint = (
                swap_hint(grads, trial.names, shapes)  # type: ignore[arg-type]
                if len(tensor_shapes) == len(shapes)
                else None
            ) or transposed_hint(grad, leaf.shape)
            return Verdict(
                f"the gradient for `{name}` has shape {shape_text(grad)}, but `{name}` has shape "
                f"{shape_text(leaf)}.",
                (hint or "Each gradient has the shape of its input.",),
            )
        if grad.dtype != leaf.dtype:
            hint = (
                "Build gradients from `grad_output` or the saved tensors, not a fixed dtype."
                if grad.is_floating_point()
                else dtype_hint(grad.dtype)
            )
            return Verdict(
                f"the gradient for `{name}` has dtype {grad.dtype}, but `{name}` is {leaf.dtype}.",
                (hint,),
            )
        if grad.device != leaf.device:
            return Verdict(f"the gradient for `{name}` is on `{grad.device}`, not `{leaf.device}`.")
    return None


def broadcast_notes(raw: object, trial: Trial) -> list[str]:
    """A note for each gradient that autograd had to sum down to its input's shape."""
    grads = raw if isinstance(raw, tuple) else (raw,)
    notes = []
    for i, (grad, leaf) in enumerate(zip(grads, trial.leaves, strict=False)):
        if isinstance(grad, Tensor) and isinstance(leaf, Tensor) and grad.shape != leaf.shape:
            notes.append(
                f"Note: backward returned a gradient of shape {shape_text(grad)} for "
                f"`{trial.names[i]}`, which has shape {shape_text(leaf)}. Autograd summed it over "
                "the broadcast dimensions, as it does for its own operations, so that is fine."
            )
    return notes
