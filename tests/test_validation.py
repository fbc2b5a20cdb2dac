"""Every public helper that takes arguments refuses bad ones, naming the argument.

One representative bad call per public callable (each module's own tests try more). The
completeness test fails when a public callable is added without a row here or a stated
reason for being exempt, so validation cannot silently be forgotten.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

import autograd_helpers as ah

# The public submodules (ah.checks, ah.functions, ...): those without a leading underscore.
PUBLIC_MODULES = [importlib.import_module(f"autograd_helpers.{name}") for name in ah.SUBMODULES]
X = torch.ones(2, 3)

# name -> (bad call, exception, argument named in the message)
BAD_CALLS = {
    "setup_notebook": (lambda: ah.setup_notebook(seed=-1), ValueError, "seed"),
    "show_source": (lambda: ah.show_source(3), TypeError, "obj"),
    "check_function": (lambda: ah.checks.check_function(torch.sin, X, atol=-1), ValueError, "atol"),
    "check_tensor": (lambda: ah.checks.check_tensor(X, "expected"), TypeError, "expected"),
    "course_pins": (lambda: ah.environment.course_pins("lab"), TypeError, "extras"),
    "exp": (lambda: ah.functions.exp(torch.arange(3)), TypeError, "input"),
    "sigmoid": (lambda: ah.functions.sigmoid("x"), TypeError, "input"),
    "relu": (lambda: ah.functions.relu(None), TypeError, "input"),
    "mul_constant": (lambda: ah.functions.mul_constant(X, "2"), TypeError, "constant"),
    "linear": (lambda: ah.functions.linear(X, torch.ones(4, 5)), ValueError, "weight"),
    "scale_grad": (lambda: ah.functions.scale_grad(X, float("nan")), ValueError, "coeff"),
    "square_and_max_pool1d": (
        lambda: ah.functions.square_and_max_pool1d(torch.ones(1, 4), 2, stride=0),
        ValueError,
        "stride",
    ),
    "autograd_graph": (lambda: ah.graph.autograd_graph(X), ValueError, "tensor"),
    "saved_tensor_bytes": (lambda: ah.memory.saved_tensor_bytes("f"), TypeError, "fn"),
    "Linear": (lambda: ah.modules.Linear(0, 2), ValueError, "in_features"),
    "plot_curves": (
        lambda: ah.plot.plot_curves(torch.ones(2), {"a": torch.ones(2)}, title=3),
        TypeError,
        "title",
    ),
    "CheckResult": (lambda: ah.checks.CheckResult("done", "title"), ValueError, "status"),
    "nested_backward_limit": (
        lambda: ah.guards.nested_backward_limit(0).__enter__(),
        ValueError,
        "max_depth",
    ),
    "tangent_explorer": (
        lambda: ah.widgets.tangent_explorer(torch.sin, step=-1),
        ValueError,
        "step",
    ),
    "wrap_builtin": (lambda: ah.wrap.wrap_builtin("max_pool1d"), TypeError, "fn"),
    "replay_backward": (lambda: ah.engine.replay_backward(X.sum(), X), ValueError, "inputs"),
    "jacobian_by_rows": (lambda: ah.jacobians.jacobian_by_rows(torch.sin, [1.0]), TypeError, "x"),
    "strategy_named": (lambda: ah.jacobians.strategy_named("fast"), ValueError, "name"),
    "saved_tensors_of": (lambda: ah.graph.saved_tensors_of(X), TypeError, "node"),
    "plot_heatmaps": (lambda: ah.plot.plot_heatmaps({}), ValueError, "matrices"),
    "check_jacobian_loop": (
        lambda: ah.checks.check_jacobian_loop(len, name=3),
        TypeError,
        "name",
    ),
    "check_hvp": (lambda: ah.checks.check_hvp(len, name=3), TypeError, "name"),
    "set_up_jacobian_shapes": (
        lambda: ah.checks.set_up_jacobian_shapes({}),
        ValueError,
        "problems",
    ),
    "central_difference": (
        lambda: ah.finite_differences.central_difference(torch.sin, X, eps=-1),
        ValueError,
        "eps",
    ),
    "central_columns": (
        lambda: ah.finite_differences.central_columns(torch.sin, [X], [1], 1e-6),
        ValueError,
        "positions",
    ),
    "eps_sweep": (lambda: ah.finite_differences.eps_sweep(torch.sin, X, []), ValueError, "eps"),
    "evaluate_copied": (
        lambda: ah.finite_differences.evaluate_copied(torch.sin, X),
        TypeError,
        "args",
    ),
    "plot_eps_sweep": (lambda: ah.finite_differences.plot_eps_sweep([]), ValueError, "records"),
    "compare_derivatives": (
        lambda: ah.finite_differences.compare_derivatives(torch.sin, X, dtype=torch.float64, eps=1),
        TypeError,
        "xs",
    ),
    "explain_gradcheck": (lambda: ah.checks.explain_gradcheck(torch.sin, X), ValueError, "input"),
    "gradcheck_explorer": (lambda: ah.widgets.gradcheck_explorer("cos"), ValueError, "function"),
    "check_gradcheck_settings": (
        lambda: ah.checks.check_gradcheck_settings(torch.float64, 1e-6, fn=3, x=X),
        TypeError,
        "fn",
    ),
    "check_double_backward": (
        lambda: ah.checks.check_double_backward(ah.functions.Exp, X, X),
        ValueError,
        "input",
    ),
    "check_finite_gradients": (
        lambda: ah.checks.check_finite_gradients(len, X, reference=3, regular=[X]),
        TypeError,
        "reference",
    ),
    "check_training_step": (
        lambda: ah.checks.check_training_step(len, reference=len, make_inputs=len, steps=0),
        ValueError,
        "steps",
    ),
    "check_safe_backward": (
        lambda: ah.checks.check_safe_backward(ah.functions.Exp, X, reference=3),
        TypeError,
        "reference",
    ),
    "check_evaluate": (lambda: ah.checks.check_evaluate(len, name=3), TypeError, "name"),
    "check_frozen": (lambda: ah.checks.check_frozen(len, name=3), TypeError, "name"),
    "check_mode_predictions": (
        lambda: ah.checks.check_mode_predictions([], [], None, X),
        ValueError,
        "questions",
    ),
    "check_regions": (
        lambda: ah.checks.check_regions(len, "data", torch.nn.Linear(3, 1), None, X),
        TypeError,
        "optimizer",
    ),
    "check_saved_bytes": (
        lambda: ah.checks.check_saved_bytes(len, X, reference=torch.sin, max_bytes=-1),
        ValueError,
        "max_bytes",
    ),
    "check_dominant_op": (lambda: ah.checks.check_dominant_op("aten::mm", X), TypeError, "report"),
    "mode_table": (lambda: ah.modes.mode_table(len, X), TypeError, "model"),
    "preserved_state": (lambda: ah.modes.preserved_state(3).__enter__(), TypeError, "model"),
    "swish": (lambda: ah.functions.swish([1.0]), TypeError, "input"),
    "profile_ops": (
        lambda: ah.profiling.profile_ops(torch.sin, X, backward=1),
        TypeError,
        "backward",
    ),
    "compare": (lambda: ah.profiling.compare({}, X), ValueError, "candidates"),
    "region_times": (lambda: ah.profiling.region_times(X, ["data"]), TypeError, "profile"),
    "find_nan_origin": (lambda: ah.anomaly.find_nan_origin("loss", X), TypeError, "fn"),
    "explain_inplace_error": (
        lambda: ah.anomaly.explain_inplace_error(None, X),
        TypeError,
        "fn",
    ),
    "check_jacobian_shapes": (
        lambda: ah.checks.check_jacobian_shapes([], {}),
        ValueError,
        "problems",
    ),
}

# Function classes are exempt: .apply checks nothing by design; their wrappers validate.
FUNCTION_WRAPPERS = {
    "Exp": "exp",
    "Sigmoid": "sigmoid",
    "ReLU": "relu",
    "MulConstant": "mul_constant",
    "LinearFunction": "linear",
    "ScaleGrad": "scale_grad",
    "SquareAndMaxPool1d": "square_and_max_pool1d",
    "Swish": "swish",
    "IsolatedSubgraph": "wrap_builtin",
    "SigmoidWithWrongBackward": "gradcheck_explorer",
}

# name -> why it needs no validation of its own
EXEMPT = {
    **{
        cls: f"a Function class; {wrapper}() validates"
        for cls, wrapper in FUNCTION_WRAPPERS.items()
    },
    "check_environment": "takes no arguments",
    "EnvironmentReport": "a result type, built by check_environment",
    "AutogradGraph": "a result type, built by autograd_graph",
    "ReplayStep": "a result type, built by replay_backward",
    "JacobianStrategy": "a record type; STRATEGIES holds the instances",
    "DerivativeComparison": "a result type, built by compare_derivatives",
    "GradcheckReport": "a result type, built by explain_gradcheck",
    "NanOrigin": "a result type, built by find_nan_origin",
    "ModeTable": "a result type, built by mode_table",
    "ProfileReport": "a result type, built by profile_ops",
    "Comparison": "a result type, built by compare",
    "Timing": "a result type, built by compare",
    "RegionTime": "a result type, built by region_times",
    "PROFILE_COLUMNS": "a constant",
    "MODE_COLUMNS": "a constant",
    "InplaceReport": "a result type, built by explain_inplace_error",
    "EXPLORER_FUNCTIONS": "a constant",
    "STRATEGIES": "a constant",
    "NestedBackwardError": "an exception type",
    "MAX_NESTED_BACKWARD": "a constant",
    "QUIET_NATIVE_LOGS": "a constant",
}


def _public_callables() -> dict[str, object]:
    found = {"setup_notebook": ah.setup_notebook, "show_source": ah.show_source}
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            found[name] = getattr(module, name)
    return found


def test_the_public_submodules_are_exactly_the_modules_without_an_underscore():
    on_disk = {m.name for m in pkgutil.iter_modules(ah.__path__) if not m.name.startswith("_")}
    assert set(ah.SUBMODULES) == on_disk


def test_every_public_callable_is_validated_or_exempt_with_a_reason():
    missing = sorted(set(_public_callables()) - set(BAD_CALLS) - set(EXEMPT))
    assert not missing, f"public helpers without a bad-argument test: {missing}"
    stale = sorted((set(BAD_CALLS) | set(EXEMPT)) - set(_public_callables()))
    assert not stale, f"rows for names that are no longer public: {stale}"


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_bad_argument_raises_naming_it(name):
    call, error, argument = BAD_CALLS[name]
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{name}(): "), f"the message should name {name}(): {message}"
    assert argument in message, message


def test_every_function_class_has_a_validated_wrapper():
    assert set(FUNCTION_WRAPPERS.values()) <= set(BAD_CALLS)
