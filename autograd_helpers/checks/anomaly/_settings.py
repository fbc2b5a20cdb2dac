"""Where ``check_training_step`` runs a step (the example, probes beyond it) and what a
step hands back.

The example is what the notebook's ``make_inputs()`` returns, run for a few steps. A step
that writes the example's sizes into its code (``/ 10``, ``torch.full((5, 2), 0.5)``) or
converts its inputs (``x.float()``) is right there and wrong elsewhere, so one step also
runs at each probe of :func:`probe_settings`: batches whose sizes do not divide the
example's (new rows drawn near the example's, with a generator of their own), other
weights, and the example's tensors in float64. What a step returns as its loss is read by
:func:`loss_problem` and :func:`loss_value`: a tensor of one element, a Python or a NumPy
number mean the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from autograd_helpers._common.leaves import fresh_leaf

__all__ = [
    "BATCH_HINT",
    "DTYPE_HINT",
    "Setting",
    "argument_names",
    "as_meant",
    "copies",
    "example_inputs",
    "loss_problem",
    "loss_value",
    "probe_settings",
]

PROBE_SEED = 20_04  # the probes' own generator: the same rows at every check
LARGE = 10.0  # the large-gradient probe: data this many times larger, parameters smaller
BATCH_HINT = (
    "Hint: the example's batch passed and this one did not: is a size of the example "
    "written into your step (`/ 10`, `torch.full((5, 2), ...)`)? Take sizes from the "
    "inputs (`len(x)`), or let `.mean()` count."
)
DTYPE_HINT = (
    "Hint: a step must work in the dtype its inputs come in: do not convert them "
    "(`x.float()`) or make tensors of a fixed dtype; `torch.zeros_like(x)` and plain "
    "numbers (`+ 0.5`) follow the inputs."
)


@dataclass(frozen=True)
class Setting:
    """Where a run of steps starts: ``where`` (``""`` for the example), inputs, steps."""

    where: str
    inputs: tuple[Tensor, ...]
    steps: int
    kind: str  # "example", "batch", "large" or "float64"


def copies(tensors: Sequence[Tensor]) -> list[Tensor]:
    """Fresh leaves with the same values and ``requires_grad``: what a step is handed."""
    return [fresh_leaf(t, requires_grad=t.requires_grad) for t in tensors]


def as_meant(reference: Callable[..., Any], inputs: Sequence[Tensor]) -> Tensor:
    """Run ``reference`` with copies of what it saves: in-place changes cannot reach them.

    Its loss, as float64. A reference that fails is the check's mistake (``ValueError``).
    """
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
            loss = reference(*inputs)
    except Exception as exc:
        raise ValueError(
            f"check_training_step(): the reference raised {type(exc).__name__}: {exc}. The "
            "check is set up wrong, not the step it checks."
        ) from exc
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        raise TypeError(
            "check_training_step(): the reference must return its loss, a tensor of one "
            f"element, got {type(loss).__name__}"
        )
    return loss.detach().double().reshape(())


def reference_gradient(
    reference: Callable[..., Any], inputs: Sequence[Tensor], trained: Sequence[int]
) -> list[Tensor]:
    """The gradient the reference steps with, for each of ``inputs``' ``trained`` tensors,
    caught as backward accumulates it (the reference may clear ``.grad`` after its update);
    empty where it cannot be had."""
    leaves = [t.detach().clone().requires_grad_(k in trained) for k, t in enumerate(inputs)]
    caught: dict[int, Tensor] = {}

    def catch(k: int) -> Callable[[Tensor], None]:
        def hook(leaf: Tensor) -> None:  # a post-accumulate-grad hook must return None
            if leaf.grad is not None:
                caught.setdefault(k, leaf.grad.detach().clone())

        return hook

    handles = [leaves[k].register_post_accumulate_grad_hook(catch(k)) for k in trained]
    try:
        as_meant(reference, leaves)
    except (TypeError, ValueError):
        return []
    finally:
        for handle in handles:
            handle.remove()
    return [caught[k] for k in trained] if all(k in caught for k in trained) else []


def example_inputs(make_inputs: Callable[[], Any]) -> tuple[Tensor, ...]:
    """What ``make_inputs()`` returns, checked: tensors, some of them parameters."""
    try:
        made = make_inputs()
    except Exception as exc:
        raise ValueError(
            f"check_training_step(): make_inputs raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(made, tuple | list) or not all(isinstance(t, Tensor) for t in made):
        raise TypeError(
            "check_training_step(): make_inputs must return a tuple of tensors "
            f"(parameters..., data...), got {type(made).__name__}"
        )
    if not any(t.requires_grad for t in made):
        raise ValueError(
            "check_training_step(): make_inputs must return the parameters with "
            "requires_grad=True (none of its tensors requires grad)"
        )
    if not all(t.is_floating_point() for t in made if t.requires_grad):
        raise TypeError("check_training_step(): make_inputs' parameters must be floating-point")
    return tuple(made)


def _rows(data: Tensor, count: int, generator: torch.Generator) -> Tensor:
    """``count`` rows near the example's: its rows in turn, each moved a little."""
    index = torch.arange(count) % data.shape[0]
    base = data.detach()[index]
    if not base.is_floating_point():
        return base.clone()
    noise = torch.randn(base.shape, generator=generator, dtype=torch.float64)
    return base + (0.1 * noise).to(base.dtype)


def _batch_size(example: tuple[Tensor, ...]) -> int | None:
    """The example's batch: the first size its data tensors share, or ``None``."""
    data = [t for t in example if not t.requires_grad]
    sizes = {t.shape[0] if t.dim() > 0 else -1 for t in data}
    return sizes.pop() if len(sizes) == 1 and -1 not in sizes else None


def _probe_tensor(t: Tensor, count: int, move: bool, generator: torch.Generator) -> Tensor:
    if not t.requires_grad:
        return _rows(t, count, generator)
    values = t.detach().clone()
    if move:
        noise = torch.randn(values.shape, generator=generator, dtype=torch.float64)
        values = values + (0.3 * noise).to(values.dtype)
    return values.requires_grad_()


def _large(example: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The data :data:`LARGE` times larger, the parameters as many times smaller: the
    products ``x @ w`` stay, the residuals and the gradient grow (a clip shows there)."""
    return tuple(
        fresh_leaf(t.detach() / LARGE, requires_grad=True)
        if t.requires_grad
        else t.detach() * LARGE
        if t.is_floating_point()
        else t.detach().clone()
        for t in example
    )


def _beyond_float32(t: Tensor, generator: torch.Generator) -> Tensor:
    """``t`` in float64, each entry moved in its 7th digit: values float32 cannot hold, so a
    step that rounds them to float32 on the way (`target.float()`) loses what they carry."""
    values = t.detach().to(torch.float64)
    noise = torch.randn(values.shape, generator=generator, dtype=torch.float64)
    return (values * (1 + 1e-6 * noise)).requires_grad_(t.requires_grad)


def probe_settings(example: tuple[Tensor, ...]) -> list[Setting]:
    """Two batches of other sizes (the second with other weights too), a large gradient, then
    float64 with digits that float32 cannot hold."""
    generator = torch.Generator().manual_seed(PROBE_SEED)
    settings = []
    size = _batch_size(example)
    if size is not None:
        for k, count in enumerate([n for n in (3, 7, 2, 9) if n != size][:2]):
            inputs = tuple(_probe_tensor(t, count, k == 1, generator) for t in example)
            weights = " and other weights" if k == 1 else ""
            where = f", with a batch of {count} rows{weights} (a probe beyond the example's {size})"
            settings.append(Setting(where, inputs, 1, "batch"))
    where = (
        f", with the data {LARGE:g} times larger and the parameters {LARGE:g} times smaller "
        "(a probe where the gradient is large)"
    )
    settings.append(Setting(where, _large(example), 1, "large"))
    in64 = tuple(_beyond_float32(t, generator) if t.is_floating_point() else t for t in example)
    where = (
        ", in float64 (a probe: the example's tensors in float64, moved in their 7th digit, "
        "which float32 cannot hold)"
    )
    settings.append(Setting(where, in64, 1, "float64"))
    return settings


def argument_names(step: object, count: int) -> list[str]:
    """The step's own names for its arguments (``w, x, target``), else ``input 0``..."""
    try:
        names = list(inspect.signature(step).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        names = []
    return [names[k] if k < len(names) else f"input {k}" for k in range(count)]


def loss_problem(value: object) -> tuple[str, str] | None:
    """What is wrong with what a step returned as its loss, and the hint; ``None`` if
    nothing is: a tensor of one element, or a Python or NumPy number, mean the same."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            return (
                f"a tensor of shape {tuple(value.shape)}; the loss is one number",
                "Hint: return the loss the step minimises, reduced as the original (`.mean()`).",
            )
        if not value.is_floating_point() or value.dtype.itemsize < 4:
            return (
                f"the loss as {value.dtype}, which keeps too few digits",
                "Hint: return the loss in the dtype it was computed in (no `.to(...)`).",
            )
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return None
    if value is None:
        return "None, not the loss", "Hint: end the step with `return loss`."
    hint = (
        "Hint: return the loss alone: the step updates the parameters in place, so the "
        "caller has them already."
        if isinstance(value, tuple | list)
        else ""
    )
    return f"a {type(value).__name__}, not the loss", hint


def loss_value(value: object) -> Tensor:
    """The returned loss (one that :func:`loss_problem` accepts) as a float64 0-d tensor."""
    if isinstance(value, Tensor):
        return value.detach().double().reshape(())
    return torch.tensor(float(value), dtype=torch.float64)  # type: ignore[arg-type]
