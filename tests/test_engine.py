"""autograd_helpers.engine.replay_backward: the same gradients as torch.autograd.grad.

Every graph is built in float64 and compared with ``torch.autograd.grad(..., allow_unused=
True)``; afterwards the graph must still be usable and no ``.grad`` may have been written.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import Function
from torch.utils.checkpoint import checkpoint

from autograd_helpers import functions as fns
from autograd_helpers.engine import ReplayStep, replay_backward
from autograd_helpers.wrap import wrap_builtin
from tests.real_world import AdditiveCoupling, InvertibleModuleWrapper, ReversibleSequence

DOUBLE = torch.float64


def _randn(*shape: int, seed: int = 0, grad: bool = True) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=DOUBLE).requires_grad_(grad)


def assert_same_as_torch(output, inputs, grad_output=None):
    mine = replay_backward(output, inputs, grad_output)
    theirs = torch.autograd.grad(output, inputs, grad_output, allow_unused=True, retain_graph=True)
    assert len(mine) == len(theirs)
    for got, want in zip(mine, theirs, strict=True):
        assert (got is None) == (want is None), (got, want)
        if want is not None:
            torch.testing.assert_close(got, want)
    for t in inputs:
        assert not t.is_leaf or t.grad is None  # replay never accumulates into .grad
    return mine


def test_an_mlp_whose_weight_is_used_twice():
    x, w, b = _randn(4, 3), _randn(3, 3, seed=1), _randn(3, seed=2)
    hidden = torch.tanh(x @ w + b)
    loss = (torch.relu(hidden @ w) ** 2).mean()
    assert_same_as_torch(loss, (x, w, b))


def test_a_deep_diamond_chain_runs_each_node_once():
    # every level uses the previous tensor twice: 2**40 paths, 40 levels of nodes
    y = _randn(5)
    z = y
    for _ in range(40):
        z = torch.sin(z) * z
    steps: list[ReplayStep] = []
    replay_backward(z.sum(), y, trace=steps)
    names = [step.node for step in steps]
    assert names.count("MulBackward0") == 40 and names.count("SinBackward0") == 40
    assert_same_as_torch(z.sum(), (y,))


def test_broadcasting_is_summed_down_to_each_input():
    m, v, s = _randn(3, 4), _randn(4, seed=1), _randn(1, 1, seed=2)
    assert_same_as_torch((m * v + v * s).exp().sum(), (m, v, s))


def test_split_unbind_cat_and_a_multi_output_node_with_an_unused_output():
    a = _randn(6)
    first, _unused, last = a.split(2)  # the middle part never gets a gradient
    rows = torch.stack([first * 2, last]).unbind(0)
    out = torch.cat([rows[0], rows[1] ** 2])
    assert_same_as_torch(out, (a,), _randn(4, seed=3, grad=False))


def test_an_unused_input_gets_none_and_non_leaf_inputs_get_their_gradient():
    a, unused = _randn(3), _randn(2, seed=1)
    hidden = a.exp()
    out = (hidden * a).sum()
    grads = assert_same_as_torch(out, (a, unused, hidden))
    assert grads[1] is None


def test_a_non_scalar_output_with_grad_output_is_a_vector_jacobian_product():
    x = _randn(3)
    w = _randn(2, 3, seed=1)
    assert_same_as_torch(w @ x, (x, w), torch.tensor([1.0, -2.0], dtype=DOUBLE))


def test_chapter_01_functions_are_run_through_their_backward():
    x, w, b = _randn(2, 4), _randn(3, 4, seed=1), _randn(3, seed=2)
    out = fns.linear(fns.sigmoid(x), w, b).sum() + fns.square_and_max_pool1d(x, 2).sum()
    steps: list[ReplayStep] = []
    grads = replay_backward(out, (x, w, b), trace=steps.append)  # a callable trace
    assert {"LinearFunctionBackward", "SigmoidBackward", "SquareAndMaxPool1dBackward"} <= {
        s.node for s in steps
    }
    assert_same_as_torch(out, (x, w, b))
    assert len(grads) == 3


class TwoOutputsWithoutMaterialising(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        grad = 0
        if grad_a is not None:
            grad = grad + 2 * grad_a
        if grad_b is not None:
            grad = grad + 3 * grad_b
        return grad


def test_a_function_that_asked_for_none_gets_its_gradient_for_an_unused_output():
    # the replay cannot read set_materialize_grads(False) back, so backward gets zeros
    x = _randn(3)
    a, _ = TwoOutputsWithoutMaterialising.apply(x)
    assert_same_as_torch(a.sum(), (x,))


def test_the_graph_survives_the_replay():
    x = _randn(3)
    out = (x.exp() * x).sum()
    replay_backward(out, x)
    out.backward()  # the saved tensors are still there
    torch.testing.assert_close(x.grad, (x.exp() * (x + 1)).detach())


def test_the_trace_names_each_node_with_its_incoming_gradient_shapes():
    x = _randn(2, 3)
    steps: list[ReplayStep] = []
    replay_backward((x * 2).sum(), x, trace=steps)
    assert [str(s) for s in steps] == ["SumBackward0 <- ()", "MulBackward0 <- (2, 3)"]


def test_an_output_that_is_itself_an_input():
    x, y = _randn(3), _randn(3, seed=1)
    ones = torch.ones(3, dtype=DOUBLE)
    got = replay_backward(x, (x, y), ones)
    assert torch.equal(got[0], ones) and got[1] is None


class SkipsItsFirstArgument(Function):
    """``first`` may be anything; only ``x`` and ``y`` get gradients, 2 and 3."""

    @staticmethod
    def forward(ctx, first, x, constant, y):
        return x * 2 + y * 3 + constant

    @staticmethod
    def backward(ctx, grad):
        return None, grad * 2, None, grad * 3


@pytest.mark.parametrize(
    "first",
    [None, 4, 2.5, torch.ones(3, dtype=DOUBLE), _randn(3, seed=5)],
    ids=["None", "int", "float", "tensor without grad", "tensor with grad"],
)
def test_custom_function_gradients_go_to_their_own_arguments(first):
    # backward returns one value per forward argument; next_functions has an edge per
    # tensor argument only: the gradients must be lined up by argument, not by index
    x, y = _randn(3), _randn(3, seed=1)
    constant = torch.ones(3, dtype=DOUBLE)  # a tensor that needs no gradient, between the two
    out = SkipsItsFirstArgument.apply(first, x, constant, y).sum()
    grads = assert_same_as_torch(out, (x, y))
    assert torch.equal(grads[0], torch.full((3,), 2.0, dtype=DOUBLE))


def test_a_built_in_wrapped_in_a_function_with_a_callable_first_argument():
    linear = wrap_builtin(torch.nn.functional.linear)  # forward(ctx, call, count, *tensors)
    x, w, b = _randn(2, 4), _randn(3, 4, seed=1), _randn(3, seed=2)
    assert_same_as_torch(linear(x, w, b).tanh().sum(), (x, w, b))


class ReturnsTooFew(Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad * 2  # one gradient for two forward arguments


def test_a_backward_that_returns_too_few_gradients_is_named():
    x = _randn(3)
    with pytest.raises(RuntimeError, match="ReturnsTooFewBackward's backward returned 1"):
        replay_backward(ReturnsTooFew.apply(x, 2.0).sum(), x)


def test_a_reentrant_checkpoint_is_refused_before_it_writes_grad():
    x, w = _randn(3), _randn(3, seed=1)
    out = checkpoint(lambda t: (t * w).sin().sum(), x, use_reentrant=True)
    with pytest.raises(NotImplementedError, match="use_reentrant=False"):
        replay_backward(out, (x, w))
    assert x.grad is None and w.grad is None


def test_a_non_reentrant_checkpoint_is_replayed():
    x, w = _randn(3), _randn(3, seed=1)
    out = checkpoint(lambda t: (t * w).sin().sum(), x, use_reentrant=False)
    assert_same_as_torch(out, (x, w))


def _double(grad):
    return grad * 2


def test_a_hook_on_a_leaf_input_changes_its_gradient_as_in_torch():
    x, y = _randn(3), _randn(3, seed=1)
    x.register_hook(_double)
    grads = assert_same_as_torch((x.sin() * y).sum(), (x, y))
    torch.testing.assert_close(grads[0], 2 * (x.cos() * y).detach())


def test_hooks_on_a_non_leaf_input_and_on_the_output_act_as_in_torch():
    x = _randn(3)
    hidden = x.exp()
    hidden.register_hook(_double)
    out = (hidden * 3).sum()
    out.register_hook(lambda grad: grad * 5)
    grads = assert_same_as_torch(out, (hidden,))
    torch.testing.assert_close(grads[0], torch.full((3,), 30.0, dtype=DOUBLE))
    # hidden's node runs on to x here: the engine reads hidden's gradient before the hook
    # and passes on the hooked one, and so does the replay
    grads = assert_same_as_torch(out, (hidden, x))
    torch.testing.assert_close(grads[0], torch.full((3,), 15.0, dtype=DOUBLE))
    torch.testing.assert_close(grads[1], 30 * x.exp().detach())


def test_a_hook_on_a_leaf_output_acts_as_in_torch():
    x = _randn(3)
    x.register_hook(_double)
    assert_same_as_torch(x, (x,), torch.ones(3, dtype=DOUBLE))


def test_a_hook_that_returns_none_watches_each_gradient_once():
    x = _randn(3)
    seen = []
    x.register_hook(seen.append)
    replay_backward((x * x).sum(), x)  # two paths into x, one summed gradient
    assert len(seen) == 1
    torch.testing.assert_close(seen[0], 2 * x.detach())


def test_retain_grad_is_not_written():
    x = _randn(3)
    hidden = x.exp()
    hidden.retain_grad()
    replay_backward(hidden.sum(), (x, hidden))
    assert hidden.grad is None and x.grad is None
    torch.autograd.grad(hidden.sum(), x)  # where torch fills it: the docstring says so
    assert hidden.grad is not None
    doc = " ".join((replay_backward.__doc__ or "").split())
    assert "on which ``retain_grad()`` was called" in doc and "keeps the ``.grad`` it had" in doc


def test_a_float32_grad_output_is_cast_like_the_engine_does():
    x = _randn(3)
    got = assert_same_as_torch(x * 2, (x,), torch.ones(3))
    assert got[0].dtype == DOUBLE


def test_sparse_gradients_are_added_to_dense_ones():
    weight = _randn(5, 3)
    rows = torch.tensor([1, 1, 2])
    looked_up = torch.nn.functional.embedding(rows, weight, sparse=True)  # sparse gradient
    assert_same_as_torch(looked_up.sum() + (weight * 2).sum(), (weight,))


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_a_gradient_already_in_shape_is_not_summed():
    # sum is not implemented for complex32, so a needless sum_to_size fails
    x = _randn(())
    pair = torch.view_as_real(x.chalf())
    assert_same_as_torch((pair * torch.tensor([1.0, 2.0], dtype=pair.dtype)).sum(), (x,))


# --- what the audit found: module hooks, a wrong gradient shape, inputs as an iterable ---------


@pytest.mark.parametrize(
    "register", ["register_full_backward_hook", "register_full_backward_pre_hook"]
)
def test_a_module_backward_hook_is_refused_before_anything_runs(register):
    layer = torch.nn.Linear(3, 2).double()
    calls = []
    getattr(layer, register)(lambda *args: calls.append(args) and None)
    x = _randn(4, 3)
    out = layer(x).sum()
    with pytest.raises(NotImplementedError, match=f"BackwardHookFunctionBackward.*{register}"):
        replay_backward(out, (x, layer.weight))
    assert not calls and x.grad is None and layer.weight.grad is None
    torch.autograd.grad(out, x)  # PyTorch's engine runs the hook
    assert calls


class WrongShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.sum()  # a scalar for an input of shape (3,)


class NotATensor(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return "gradient"


def test_a_gradient_of_the_wrong_shape_is_named_as_the_engine_names_it():
    x = _randn(3)
    message = (
        r"Function WrongShapeBackward returned an invalid gradient at index 0 - got \[\] but "
        r"expected shape compatible with \[3\]"
    )
    with pytest.raises(RuntimeError, match=message):
        replay_backward(WrongShape.apply(x).sum(), x)
    with pytest.raises(RuntimeError, match=message.split(" - ")[0]):  # torch says the same
        torch.autograd.grad(WrongShape.apply(x).sum(), x)
    with pytest.raises(TypeError, match="NotATensorBackward returned str at index 0"):
        replay_backward(NotATensor.apply(x).sum(), x)


def test_inputs_may_be_any_iterable_of_tensors_such_as_parameters():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    loss = model(torch.randn(5, 3)).sum()
    got = replay_backward(loss, model.parameters())  # a generator, as autograd.grad takes
    want = torch.autograd.grad(loss, model.parameters(), retain_graph=True)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    x = _randn(3)
    assert len(replay_backward((x * 2).sum(), iter([x, x]))) == 2


OPS = st.sampled_from(["add", "mul", "sin", "exp", "broadcast", "split"])


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(OPS, st.integers(0, 10), st.integers(0, 10)), max_size=12))
def test_random_graphs_match_torch(ops):
    """Each step combines two earlier tensors (any of them, so paths share nodes)."""
    a, b = _randn(4, seed=1), _randn(4, seed=2)
    row = _randn(1, 4, seed=3)
    tensors = [a, b]
    for op, i, j in ops:
        u, v = tensors[i % len(tensors)], tensors[j % len(tensors)]
        if op == "add":
            tensors.append(u + v)
        elif op == "mul":
            tensors.append(u * v)
        elif op == "sin":
            tensors.append(torch.sin(u))
        elif op == "exp":
            tensors.append(torch.exp(u * 0.1))
        elif op == "broadcast":
            tensors.append((u * row).sum(0))  # (4,) * (1, 4) -> (1, 4) -> (4,)
        else:
            left, right = u.split(2)
            tensors.append(torch.cat([right, left * 2]))
    out = sum(t.sum() for t in tensors[2:]) if len(tensors) > 2 else a.sum()
    assert_same_as_torch(out, (a, b, row))


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda x: replay_backward(x * 2, x), ValueError, "grad_output is needed"),
        (lambda x: replay_backward((x * 2).sum(), x, torch.ones(2)), ValueError, "must match"),
        (lambda x: replay_backward([x], x), TypeError, "output must be a tensor"),
        (lambda x: replay_backward(x.detach().sum(), x), ValueError, "does not require grad"),
        (lambda x: replay_backward(x.sum(), [x, 3]), TypeError, r"inputs\[1\] must be a tensor"),
        (lambda x: replay_backward(x.sum(), x.detach()), ValueError, r"inputs\[0\] does not"),
        (lambda x: replay_backward(x.sum(), []), TypeError, "non-empty iterable.*an empty list"),
        (lambda x: replay_backward(x.sum(), 3), TypeError, "inputs must be a tensor or a non"),
        (lambda x: replay_backward(x.sum(), x, trace="steps"), TypeError, "trace"),
        (
            lambda x: replay_backward(x * 2, x, torch.ones(3, dtype=torch.int64)),
            TypeError,
            r"grad_output has dtype torch.int64, output torch.float64.*floating-point",
        ),
        (
            lambda x: replay_backward(x * 2, x, torch.ones(3, dtype=torch.bool)),
            TypeError,
            "grad_output has dtype torch.bool",
        ),
        (
            lambda x: replay_backward(x * 2, x, torch.ones(3, dtype=torch.complex128)),
            TypeError,
            "grad_output has dtype torch.complex128",
        ),
        (
            lambda x: replay_backward(x * 1j, x, torch.ones(3, dtype=DOUBLE)),
            TypeError,
            "must be complex like its output",
        ),
        (
            lambda x: replay_backward(x * 2, x, torch.ones(3, dtype=DOUBLE).to_sparse()),
            ValueError,
            "grad_output has layout torch.sparse_coo",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(_randn(3))


# --- the re-audit on real-world code -------------------------------------------------------


def test_a_multi_grad_hook_is_refused_in_a_sentence_not_an_assertion_error():
    p = torch.ones(2, requires_grad=True)
    q = torch.ones(2, requires_grad=True)
    torch.autograd.graph.register_multi_grad_hook((p, q), lambda grads: None)
    with pytest.raises(NotImplementedError, match="register_multi_grad_hook, which runs only"):
        replay_backward((p * 2 + q * 3).sum(), (p, q))


def _strided_nested(*parts):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype: torch says so
        return torch.nested.as_nested_tensor(list(parts))


def test_a_strided_nested_tensor_is_refused_in_a_sentence():
    x = torch.ones(5, requires_grad=True)
    padded = (_strided_nested(x[:2], x[2:]) * 2).to_padded_tensor(0.0).sum()
    with pytest.raises(NotImplementedError, match=r"nested tensor of layout torch\.strided"):
        replay_backward(padded, x)


def test_a_jagged_nested_tensor_replays_as_the_engine_computes():
    nested = torch.nested.nested_tensor(
        [torch.ones(2), torch.full((3,), 2.0)], layout=torch.jagged, requires_grad=True
    )
    out = nested.sin()
    (got,) = replay_backward(out, nested, torch.ones_like(out) * 3)
    (expected,) = torch.autograd.grad(out, nested, torch.ones_like(out) * 3)
    torch.testing.assert_close(got.values(), expected.values())


def test_the_docstring_warns_that_hooks_in_between_are_not_seen():
    doc = replay_backward.__doc__ or ""
    assert "neither run nor" in doc and "cannot even" in doc and "tell that it is there" in doc


# --- issue 25: the library on real code --------------------------------------------------------


def test_a_backward_that_writes_parameters_grad_itself_has_it_put_back_with_a_warning():
    # revtorch: backward calls .backward() on a recomputed subgraph (the blocks' parameters)
    torch.manual_seed(0)
    model = ReversibleSequence().double()
    x = _randn(3, 4)
    out = model(x).sum()
    expected = torch.autograd.grad(model(x).sum(), x)
    model.zero_grad(set_to_none=True)
    with pytest.warns(UserWarning, match="`ReversibleModuleFunctionBackward`'s backward writes"):
        (grad,) = replay_backward(out, x)
    torch.testing.assert_close(grad, expected[0])
    assert all(p.grad is None for p in model.parameters()) and x.grad is None


def test_a_backward_that_writes_its_inputs_grad_itself_has_it_put_back():
    # memcnn: the input's and the output's .grad are set by hand, "mimic backwards"
    torch.manual_seed(0)
    block = InvertibleModuleWrapper(AdditiveCoupling()).double()
    x = _randn(3, 4)
    kept = torch.zeros(3, 4, dtype=DOUBLE)
    x.grad = kept
    with pytest.warns(UserWarning, match="InvertibleCheckpointBackward`'s backward writes"):
        grads = replay_backward(block(x).sum(), [x, *block.parameters()])
    assert x.grad is kept and all(p.grad is None for p in block.parameters())
    assert all(g is not None for g in grads)


def test_no_warning_where_no_function_writes_grad(recwarn):
    x = _randn(3)
    replay_backward((x * x).sum(), x)
    assert not [w for w in recwarn if "writes `.grad`" in str(w.message)]
