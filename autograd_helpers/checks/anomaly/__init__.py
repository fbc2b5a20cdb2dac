"""The checkers of ``04_anomaly_mode.ipynb``'s exercises (public in ``ah.checks``).

Each runs its named checks from a table, at the example and at probes beyond it:
:mod:`._finite` and :mod:`._points` for :func:`check_finite_gradients`,
:mod:`._training`, :mod:`._step` and :mod:`._settings` for :func:`check_training_step`,
:mod:`._backward` around ``check_function`` for :func:`check_safe_backward`; what
learner code does is watched by :mod:`autograd_helpers.checks._contain.watch`, and what it could
leave behind is judged and undone by :mod:`autograd_helpers.checks._contain.contained` (said in
:data:`~._backward.CHAPTER_WORDS`). A NaN hidden with ``nan_to_num`` fails both NaN exercises in
the same words (:mod:`._hidden`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor

from autograd_helpers._common.validate import require_callable, require_float_tensor
from autograd_helpers.checks._contain.global_calls import flushing_denormals
from autograd_helpers.checks._core.feedback import (
    CheckResult,
    callable_verdict,
    failed,
    first_found,
)
from autograd_helpers.checks._core.problems import label_of
from autograd_helpers.checks.anomaly._backward import chapter_contained, run_safe_backward
from autograd_helpers.checks.anomaly._finite import POINT_CHECKS, run_trial
from autograd_helpers.checks.anomaly._points import Point, probe_points, truth_at
from autograd_helpers.checks.anomaly._training import run_training_step
from autograd_helpers.checks.function import check_function

__all__ = ["check_finite_gradients", "check_safe_backward", "check_training_step"]

CUSTOM_NOTE = (
    "Note: your loss uses a custom Function (`torch.autograd.Function`) with a safe backward, "
    "a valid fix. "
    "The chapter's fixes need none: a function that handles the singular point "
    "(`torch.linalg.vector_norm`), or the double `torch.where`."
)


# How the pass message names the probes of each kind (see _points).
_PROBED = (
    ("regular", "a regular point"),
    ("beside", "beside the singular point"),
    ("near", "near it"),
    ("alone", "at the singular point alone"),
    ("wider", "with a coordinate more"),
    ("batch", "as a longer batch"),
)


def _flushing(label: str) -> CheckResult | None:
    """A verdict when flush-denormal is on as the check starts: the probes near 0 would
    blame the learner's formula for what the setting does."""
    if not flushing_denormals():
        return None
    return failed(
        label,
        "flush-denormal is on in this notebook, so the check cannot run: a "
        "`torch.set_flush_denormal(True)` outlived its cell (this one or one before).",
        "It rounds every number below float's smallest normal one to 0, in every operation "
        "of the process, and the check probes just there. Run "
        "`torch.set_flush_denormal(False)`, then this check again.",
    )


def _tensors(caller: str, name: str, values: object) -> tuple[Tensor, ...]:
    if isinstance(values, Tensor) or not isinstance(values, list | tuple):
        raise TypeError(
            f"{caller}(): {name} must be a list or tuple of tensors (one per input), got "
            f"{type(values).__name__}"
        )
    return tuple(require_float_tensor(caller, f"{name}[{k}]", x) for k, x in enumerate(values))


def check_finite_gradients(
    fn: object,
    *inputs: Tensor,
    reference: Callable[..., Tensor],
    regular: Sequence[Tensor],
    name: str | None = None,
) -> CheckResult:
    """Check a learner's NaN-free version of a loss: same values, finite gradients.

    ``fn`` must agree with ``reference`` in value (up to a rounding error) at ``inputs``,
    where the reference's gradient is NaN, and at ``regular``, where it is not; its gradient
    must be finite everywhere, and equal to the reference's wherever that one is finite.
    Beyond these two points it is held to the same at probes (see ``_points``):
    the regular point with one element set to 0, points near the singular one (1e-6, -1e-8,
    and ±1e-30 in float64, where an epsilon, a clamp or a threshold shows), both inputs as
    one longer batch, and float64. Its call must leave nothing changed (global settings,
    global variables, the notebook's tensors), register no hook and run no backward of its
    own. A custom Function with a safe backward passes, with a note.

    Args:
        fn: the learner's loss function; ``...`` means "not implemented yet".
        *inputs: the inputs at which the reference's gradient is NaN.
        reference: the original loss.
        regular: inputs at which the reference is well behaved, one per input.
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Example::

        >>> def distance(x):
        ...     return torch.sqrt((x**2).sum())
        >>> def with_epsilon(x):  # a finite gradient at 0, but the loss is no longer exact
        ...     return torch.sqrt((x**2).sum() + 1e-12)
        >>> result = check_finite_gradients(
        ...     with_epsilon, torch.zeros(3), reference=distance, regular=[torch.ones(3)]
        ... )
        >>> print(result.message.splitlines()[0])
        ❌ with_epsilon: at the singular point its value is 1e-06, the original loss's 0.
        >>> norm = torch.linalg.vector_norm  # exact everywhere, its gradient at 0 is 0
        >>> check_finite_gradients(
        ...     norm, torch.zeros(3), reference=distance, regular=[torch.ones(3)]
        ... ).passed
        True
    """
    caller = "check_finite_gradients"
    label = label_of(fn, name, caller)
    require_callable(caller, "reference", reference)
    if not inputs:
        raise TypeError(f"{caller}(): give the inputs at which the reference's gradient is NaN")
    singular_inputs = _tensors(caller, "inputs", inputs)
    regular_inputs = _tensors(caller, "regular", regular)
    if len(regular_inputs) != len(singular_inputs):
        raise ValueError(
            f"{caller}(): regular must hold one tensor per input ({len(singular_inputs)}), "
            f"got {len(regular_inputs)}"
        )
    singular = truth_at(reference, singular_inputs, "inputs")
    if not bool(singular.value.isfinite()):
        raise ValueError(f"{caller}(): the reference's value at inputs must be finite")
    if singular.finite:
        raise ValueError(
            f"{caller}(): inputs must be a point where the reference's gradient is NaN (the "
            "point the learner's loss must make safe); there it is finite"
        )
    plain = truth_at(reference, regular_inputs, "regular")
    if not plain.finite:
        raise ValueError(f"{caller}(): the reference's gradient at regular must be finite")
    if (problem := callable_verdict(label, fn) or _flushing(label)) is not None:
        return problem
    assert callable(fn)
    points = [
        (Point("at the singular point", singular_inputs, "singular"), singular),
        (Point("at a regular point", regular_inputs, "regular"), plain),
        *probe_points(reference, singular_inputs, regular_inputs, singular),
    ]
    given = {f"the tensor you passed as inputs[{k}]": x for k, x in enumerate(singular_inputs)}
    given |= {f"the tensor you passed as regular[{k}]": x for k, x in enumerate(regular_inputs)}
    contained = chapter_contained(fn, given)
    custom = False
    for k, (point, truth) in enumerate(points):
        trial = run_trial(fn, label, point, truth, contained, plain=k == 0)
        if (verdict := first_found(POINT_CHECKS, trial)) is not None:
            return verdict
        custom = custom or trial.custom
    kinds = {point.kind for point, _ in points}
    probed = [text for kind, text in _PROBED if kind in kinds]
    return CheckResult(
        "passed",
        f"{label} passed: the same loss, a finite gradient at the singular point, and the "
        f"original gradient at {len(points) - 1} further points ({', '.join(probed)}, and in "
        "float64).",
        (CUSTOM_NOTE,) if custom else (),
    )


def check_safe_backward(
    fn: object,
    x: Tensor,
    *,
    reference: Callable[[Tensor], Tensor],
    name: str | None = None,
) -> CheckResult:
    """Check a one-input Function whose backward was made safe at a singular point.

    ``check_function(fn, x, reference=reference, probes="edges")`` judges the numbers: the
    output and the gradient against the reference's at ``x`` and at the edge probes (0,
    ±1e-30, ±1e-8, large values), in float64 and float32. After it, the gradient near 0
    is held to the reference's derivative relative to its own size, where a formula that
    cancels is far off and still within an absolute tolerance (1e-8, -1e-6 and 5e-3 in
    float64; 2e-4 to 2e-3 in float32), and in float64 where x² underflows to 0 (±1e-170,
    ±1e-160). Before it, the chapter's own
    checks: a NaN replaced with ``nan_to_num`` in forward or backward fails (in the words
    :func:`check_finite_gradients` uses), and so does a change that outlives the call (a
    global list appended to, a dict written into, a global set, the notebook's tensors),
    each said in plain words and put back.

    Args:
        fn: the learner's ``torch.autograd.Function`` subclass (one tensor in, one out).
        x: the example input, a floating-point tensor.
        reference: the expected forward, built from torch operations.
        name: how to call ``fn`` in the feedback (default: its ``__name__``).

    Raises:
        TypeError, ValueError: ``x``, ``reference`` or ``name`` are wrong (the notebook's
            mistake).

    Example::

        >>> class Sin(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return torch.sin(x)
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (x,) = ctx.saved_tensors
        ...         return torch.nan_to_num(grad_output * torch.cos(x))
        >>> result = check_safe_backward(Sin, torch.linspace(-1, 1, 5), reference=torch.sin)
        >>> print(result.title)
        Sin: it replaces NaN with `nan_to_num` (in its backward).
    """
    caller = "check_safe_backward"
    require_float_tensor(caller, "x", x)
    require_callable(caller, "reference", reference)
    label = label_of(fn, name, caller)
    if (problem := _flushing(label)) is not None:
        return problem
    return run_safe_backward(
        fn,
        x,
        label,
        lambda: check_function(fn, x, reference=reference, probes="edges", name=name),
        reference,
    )


def check_training_step(
    step: object,
    *,
    reference: Callable[..., Tensor],
    make_inputs: Callable[[], tuple[Tensor, ...]],
    steps: int = 3,
    name: str | None = None,
) -> CheckResult:
    """Check a learner's training step against a reference: the example, then probes.

    ``make_inputs()`` returns ``(parameters..., data...)``; each step function takes copies
    of them, updates the parameters in place (as an optimizer does) and returns the loss (a
    tensor of one element; a Python or NumPy number passes too). The step runs ``steps``
    times from the example, then once at each probe (batches of other sizes, other weights,
    a large gradient, float64 with digits float32 cannot hold). After every step its loss
    must be the reference's; it must run one backward pass, on that loss; leave the data,
    global settings and variables as it found them, and no hook on the parameters; and move
    the parameters as the reference's moved. A wrong update is explained when its numbers
    show the classic cause: no update at all, gradients accumulating across steps, the wrong
    sign, a learning rate off by a factor, the update applied twice, the gradient divided by
    its norm, another update rule (an optimizer such as Adam or SGD with Nesterov momentum, a
    clamp or a clip of the gradient, weight decay), float32 on the way.

    The reference may be the broken step itself: it runs with every tensor it saves for
    backward copied (:func:`torch.autograd.graph.saved_tensors_hooks`), so that a later
    in-place change cannot touch them, which gives the gradients its code means. A step
    that calls the reference itself fails: it has not been fixed.

    Example::

        >>> def step(w, x):
        ...     loss = (x @ w).pow(2).mean()
        ...     loss.backward()
        ...     with torch.no_grad():
        ...         w -= 0.1 * w.grad
        ...     w.grad = None
        ...     return loss
        >>> make = lambda: (torch.ones(3, requires_grad=True), torch.eye(3))
        >>> check_training_step(step, reference=step, make_inputs=make).passed
        True
    """
    caller = "check_training_step"
    label = label_of(step, name, caller)
    require_callable(caller, "reference", reference)
    require_callable(caller, "make_inputs", make_inputs)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{caller}(): steps must be a positive int, got {steps!r}")
    if (problem := callable_verdict(label, step)) is not None:
        return problem
    assert callable(step)
    return run_training_step(step, label, reference, make_inputs, steps)
