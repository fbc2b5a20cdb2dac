"""check_function against hostile learner code: every kind of broken Function, never a crash.

Each row is one broken Function or callable, a variant of a correct ``Cube`` with a single
mistake, and a phrase the verdict must contain. Every row must come back as a plain
``CheckResult`` with ``passed == False`` and its own specific message: the checker may not
raise, hang, or blame the wrong thing.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import autograd_helpers as ah
from autograd_helpers.checks import CheckResult, check_function
from tests.learner_code import Cube, ScaleForgettingNone, X, cube, saved, variant


def raises(error):
    def method(*args):
        raise error

    return method


def forward_recursing(ctx, x):
    return RECURSING_FORWARD.apply(x)


def backward_calling_backward(ctx, grad_output):
    with torch.enable_grad():
        RECURSING_BACKWARD.apply(saved(ctx).detach().requires_grad_()).sum().backward()
    return grad_output


def mark_result(ctx, result):
    ctx.mark_non_differentiable(result)
    return result


def printing_forever(ctx, x):
    while True:
        print("debug" * 100)


RECURSING_FORWARD = variant(forward=forward_recursing)
RECURSING_BACKWARD = variant(backward=backward_calling_backward)


class NotAFunction:
    forward = staticmethod(Cube.forward)
    backward = staticmethod(Cube.backward)


# (kind, broken fn, extra inputs, phrase the verdict must contain)
HOSTILE = [
    ("too many gradients", variant(backward=lambda ctx, g: (g, g)), (), "returned 2 gradients"),
    (
        "too few gradients",
        ScaleForgettingNone,
        (2.0,),
        "one gradient per forward input (`x`, `c`), in the same order.\n"
        "   Inputs that are not tensors get `None`: `c`",
    ),
    (
        "gradient for a non-tensor",
        type(
            "Scale",
            (ScaleForgettingNone,),
            {"backward": staticmethod(lambda ctx, g: (g * ctx.c, g))},
        ),
        (2.0,),
        "`c` is not a tensor (it is a float)",
    ),
    ("backward returns a list", variant(backward=lambda ctx, g: [g]), (), "returned a list"),
    ("gradient is a float", variant(backward=lambda ctx, g: 1.0), (), "is a float, not a tensor"),
    ("gradient shape", variant(backward=lambda ctx, g: g[:3]), (), "has shape (3,)"),
    (
        "gradient dtype",
        variant(backward=lambda ctx, g: (g * 3 * saved(ctx) ** 2).float()),
        (),
        "dtype torch.float32",
    ),
    ("gradient device", variant(backward=lambda ctx, g: g.to("meta")), (), "on `meta`"),
    ("None gradient", variant(backward=lambda ctx, g: None), (), "returned None for `x`"),
    ("NaN gradient", variant(backward=lambda ctx, g: g * float("nan")), (), "contains nan"),
    ("inf gradient", variant(backward=lambda ctx, g: g / (saved(ctx) * 0)), (), "contains inf"),
    (
        "wrong gradient values",
        variant(backward=lambda ctx, g: g * saved(ctx)),
        (),
        "is off compared with",
    ),
    ("forward returns numpy", variant(forward=lambda ctx, x: x.detach().numpy()), (), "numpy"),
    ("forward returns a float", variant(forward=lambda ctx, x: 1.0), (), "returned a float"),
    ("forward returns a list", variant(forward=lambda ctx, x: [x**3]), (), "returned a list"),
    (
        "forward returns a tuple",
        variant(forward=lambda ctx, x: (x**3, x)),
        (),
        "tuple of 2 values, but one tensor is expected",
    ),
    ("output shape", variant(forward=lambda ctx, x: x[:2] ** 3), (), "has shape (2,)"),
    ("output dtype", variant(forward=lambda ctx, x: (x**3).float()), (), "dtype torch.float32"),
    ("output device", variant(forward=lambda ctx, x: torch.empty(5, device="meta")), (), "`meta`"),
    ("output NaN", variant(forward=lambda ctx, x: x * float("nan")), (), "contains nan"),
    ("output inf", variant(forward=lambda ctx, x: x / 0), (), "contains inf"),
    ("wrong output values", variant(forward=lambda ctx, x: x**2), (), "does not match"),
    ("in-place input change", variant(forward=lambda ctx, x: x.mul_(2)), (), "in place"),
    (
        "exception in forward",
        variant(forward=raises(KeyError("k"))),
        (),
        "forward raised an exception",
    ),
    (
        "exception in backward",
        variant(backward=raises(ZeroDivisionError("z"))),
        (),
        "backward raised an exception",
    ),
    ("recursion in forward", RECURSING_FORWARD, (), "RecursionError"),
    ("backward calls backward", RECURSING_BACKWARD, (), "nested 16 deep"),
    ("printing without end", variant(forward=printing_forever), (), "printed too much"),
    ("graph cut", lambda x: x.detach() ** 3, (), "does not require grad"),
    (
        "x where grad_output belongs",
        variant(backward=lambda ctx, g: saved(ctx) * 3 * saved(ctx) ** 2),
        (),
        "is off compared with",
    ),
    ("a lambda for a Function", lambda x: x**3, (), "asks for a `torch.autograd.Function`"),
    ("a built-in for a Function", torch.sin, (), "`broken` is a built-in function"),
    (
        "integer output",
        variant(forward=lambda ctx, x: (x**3).long()),
        (),
        "an integer tensor (torch.int64) cannot carry a gradient",
    ),
    ("empty output", variant(forward=lambda ctx, x: x[:0] ** 3), (), "has shape (0,), but"),
    (
        "right only for positive inputs",
        variant(backward=lambda ctx, g: g * 3 * saved(ctx) * saved(ctx).abs()),
        (),
        "is off compared with",
    ),
    (
        "the result marked non-differentiable",
        variant(forward=lambda ctx, x: mark_result(ctx, x**3)),
        (),
        "forward marked it with `ctx.mark_non_differentiable(...)`",
    ),
    (
        "integer gradient",
        variant(backward=lambda ctx, g: (g * 3 * saved(ctx) ** 2).long()),
        (),
        "an integer tensor (torch.int64) cannot carry a gradient",
    ),
    ("a module for a Function", torch.nn.Tanh, (), "is an `nn.Module`"),
    ("not a Function subclass", NotAFunction, (), "not a subclass of `torch.autograd.Function`"),
    ("an instance", None, (), "not an instance"),  # built in the test (instantiation warns)
    ("None instead of code", None, (), "got None"),
    ("a number instead of code", 42, (), "got int"),
]
KINDS = [row[0] for row in HOSTILE]
CALLABLES_ON_PURPOSE = {"graph cut"}  # checked as a plain callable, as notebooks may ask


def test_there_are_at_least_15_distinct_kinds():
    assert len(set(KINDS)) == len(KINDS) >= 15


@pytest.mark.parametrize(("kind", "fn", "extra", "phrase"), HOSTILE, ids=KINDS)
def test_hostile_code_gets_a_specific_verdict_and_never_a_crash(kind, fn, extra, phrase):
    if kind == "an instance":
        with pytest.warns(DeprecationWarning):
            fn = Cube()
    reference = None if extra else cube
    allow_callable = kind in CALLABLES_ON_PURPOSE
    result = check_function(
        fn, X, *extra, reference=reference, name="broken", allow_callable=allow_callable
    )
    assert isinstance(result, CheckResult)
    assert result.passed is False and result.status == "failed", result.message
    assert phrase in result.message, f"{kind}: {result.message}"
    assert len(result.message) < 3000  # feedback, not a flood


# --- right after setup_notebook: the learner's seed must not become the checker's ------------


class TanhSavingBoth(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return x * (1 - y * y)  # x where grad_output belongs


CUBE_WITH_X_FOR_GRAD_OUTPUT = variant(backward=lambda ctx, g: saved(ctx) * 3 * saved(ctx) ** 2)
SEEDS = [0, 1, 2, 42, 1234, 7919, 7920]  # 7919 is the checker's own seed
SHAPES = [(5,), (6,), (3, 4), (2, 3, 2)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_x_for_grad_output_fails_right_after_setup_notebook(seed, shape):
    ah.setup_notebook(seed=seed)
    x = torch.randn(shape)  # the draw a notebook makes right after its setup cell
    for wrong, reference in ((CUBE_WITH_X_FOR_GRAD_OUTPUT, cube), (TanhSavingBoth, torch.tanh)):
        result = check_function(wrong, x, reference=reference)
        assert not result.passed, f"seed {seed}, shape {shape}: {result.message}"
        assert "is off compared with" in result.message
