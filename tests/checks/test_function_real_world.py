"""check_function on Functions nobody here wrote: PyTorch's documentation and tests.

Each test is a case where the checker once gave a wrong verdict on a correct or broken
Function of the kind found in the wild: views of the input, outputs marked
non-differentiable, inputs written in place and marked dirty, sparse constants, inputs too
large to nudge one element at a time.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.autograd import Function

from autograd_helpers.checks import check_function
from autograd_helpers.checks.function._projected import ELEMENTWISE_LIMIT

DOUBLE = torch.float64


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=DOUBLE)


# --- 1. a forward that returns a view or alias of its input ----------------------------------


class Select(Function):
    """PyTorch's own ``Select`` (autograd_function_db): ``x[idx]``, a view of the input."""

    @staticmethod
    def forward(x, idx):
        return x[idx]

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, idx = inputs
        ctx.x_shape, ctx.idx = x.shape, idx

    @staticmethod
    def backward(ctx, grad_output):
        result = grad_output.new_zeros(ctx.x_shape)
        result[ctx.idx] = grad_output
        return result, None


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class TimesGradient(Identity):
    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 666


def test_a_function_returning_a_view_of_its_input_passes():
    assert check_function(Select, _randn(3, 5), 2).passed
    assert check_function(Identity, _randn(4)).passed


def test_an_identity_with_a_wrong_gradient_is_off_by_the_real_amount():
    result = check_function(TimesGradient, _randn(4))
    assert not result.passed
    assert "finite differences" in result.message
    assert "off by 0" not in result.message


# --- 2. outputs marked non-differentiable (indices, masks) -----------------------------------


class Sort(Function):
    """The ``mark_non_differentiable`` example of PyTorch's documentation: values, indices."""

    @staticmethod
    def forward(ctx, x):
        values, indices = x.sort()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        grad_x = torch.zeros_like(grad_values)
        grad_x.index_add_(0, indices, grad_values)
        return grad_x


class UnsortedSort(Sort):
    """PyTorch's buggy ``NumpySort``: the indices are right, the values are not sorted."""

    @staticmethod
    def forward(ctx, x):
        _, indices = x.sort()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return x.clone(), indices


class ReluWithMask(Function):
    @staticmethod
    def forward(ctx, x):
        mask = x > 0
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)
        return x.clamp(min=0), mask

    @staticmethod
    def backward(ctx, grad_output, grad_mask):
        (mask,) = ctx.saved_tensors
        return grad_output * mask


class FloatMask(Function):
    """A float mask marked non-differentiable, beside the result that carries the gradient."""

    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)
        return x * mask, mask

    @staticmethod
    def backward(ctx, grad_output, grad_mask):
        (mask,) = ctx.saved_tensors
        return grad_output * mask


def test_index_and_mask_outputs_are_compared_by_value_and_left_out_of_the_gradients():
    x = _randn(6)
    assert check_function(Sort, x).passed
    assert check_function(Sort, x, reference=lambda t: tuple(t.sort())).passed
    assert check_function(ReluWithMask, x, reference=lambda t: (t.relu(), t > 0)).passed
    assert check_function(FloatMask, x).passed


def test_a_wrong_index_output_is_caught_by_value():
    result = check_function(Sort, _randn(6), reference=lambda t: (t.sort()[0], t.argsort() + 1))
    assert not result.passed
    assert "output 1 does not match the reference" in result.message


def test_the_unsorted_sort_is_blamed_on_its_values_not_its_indices():
    result = check_function(UnsortedSort, _randn(6))
    assert not result.passed
    assert "the gradient for `x` is off compared with finite differences" in result.message
    assert "dtype" not in result.message and "output 1" not in result.message


def test_marking_the_result_itself_non_differentiable_still_fails():
    class MarkedResult(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.mark_non_differentiable(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2

    result = check_function(MarkedResult, _randn(3), reference=lambda t: t * 2)
    assert not result.passed
    assert "mark_non_differentiable" in result.message


# --- 3. a Function that writes into its input and marks it dirty ------------------------------


class ExpInPlace(Function):
    """The ``mark_dirty`` example of PyTorch's documentation."""

    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class ExpInPlaceUnmarked(ExpInPlace):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.save_for_backward(x)
        return x.view_as(x)


def test_a_function_that_marks_its_input_dirty_is_checked():
    x = _randn(4)
    before = x.clone()
    assert check_function(ExpInPlace, x, reference=torch.exp).passed
    assert torch.equal(x, before), "the notebook's tensor was changed"


def test_writing_into_the_input_without_marking_it_dirty_is_named():
    result = check_function(ExpInPlaceUnmarked, _randn(4), reference=torch.exp)
    assert not result.passed
    assert "changed its input `x` in place" in result.message
    assert "mark_dirty" in result.message


# --- 4. a sparse input -----------------------------------------------------------------------


class SparseTimesDense(Function):
    @staticmethod
    def forward(ctx, sparse, dense):
        ctx.save_for_backward(sparse)
        return torch.sparse.mm(sparse, dense)

    @staticmethod
    def backward(ctx, grad_output):
        (sparse,) = ctx.saved_tensors
        return None, torch.sparse.mm(sparse.t(), grad_output)


class SparseTimesDenseWrong(SparseTimesDense):
    @staticmethod
    def backward(ctx, grad_output):
        (sparse,) = ctx.saved_tensors
        return None, torch.sparse.mm(sparse.t(), grad_output) * 2


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("wrt", [None, [1]])
def test_a_sparse_constant_input_is_passed_along_and_the_dense_gradient_checked(wrt):
    sparse = _randn(4, 3).relu().to_sparse()
    dense = _randn(3, 2, seed=1)
    reference = lambda s, d: s.to_dense() @ d  # noqa: E731
    assert check_function(SparseTimesDense, sparse, dense, wrt=wrt, reference=reference).passed
    wrong = check_function(SparseTimesDenseWrong, sparse, dense, wrt=wrt)
    assert not wrong.passed and "the gradient for `dense` is off" in wrong.message


def test_asking_for_a_sparse_inputs_gradient_is_refused_in_one_sentence():
    sparse = _randn(4, 3).relu().to_sparse()
    with pytest.raises(ValueError, match=r"wrt includes input 0, a torch.sparse_coo tensor"):
        check_function(SparseTimesDense, sparse, _randn(3, 2), wrt=[0])


# --- 14. inputs too large to nudge one element at a time -------------------------------------


class LinearFunction(Function):
    """The ``LinearFunction`` of PyTorch's "Extending PyTorch" page."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class LinearOneElementOff(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        grad_input, grad_weight, grad_bias = LinearFunction.backward(ctx, grad_output)
        grad_weight = grad_weight.clone()
        grad_weight[3, 7] += 0.05
        return grad_input, grad_weight, grad_bias


def _linear_inputs(n):
    return _randn(n, n), _randn(n, n, seed=1), _randn(n, seed=2)


def test_large_inputs_are_checked_along_random_directions():
    inputs = _linear_inputs(128)
    assert sum(t.numel() for t in inputs) > ELEMENTWISE_LIMIT
    result = check_function(LinearFunction, *inputs)
    assert result.passed, result.message
    assert "along random directions" in result.message


def test_one_wrong_element_of_a_large_gradient_is_still_seen():
    result = check_function(LinearOneElementOff, *_linear_inputs(128))
    assert not result.passed
    assert "the gradient for `weight` is off" in result.message
    assert "random direction" in result.message
    assert "In the run from `weight[0, 0]` to `weight[3, 127]`" in result.message


def test_small_inputs_are_still_checked_element_by_element():
    result = check_function(LinearOneElementOff, *_linear_inputs(8))
    assert not result.passed
    assert "worst element `weight[3, 7]`" in result.message


# --- found by an audit on real code ----------------------------------------------------------


class LinearMissingTranspose(Function):
    """The docs' LinearFunction with the classic slip: ``g.mm(weight.t())`` for ``g.mm(weight)``."""

    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        return input.mm(weight.t())

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        return grad_output.mm(weight.t()), grad_output.t().mm(input)


@pytest.mark.parametrize("size", [32, 64])
def test_a_missing_transpose_is_seen_along_random_directions(size):
    # The directions once came from grad_output's own seed: a missing transpose, v(Wᵀ − W),
    # is orthogonal to v row by row, so it never showed.
    result = check_function(LinearMissingTranspose, _randn(64, size), _randn(size, size, seed=1))
    assert not result.passed
    assert "the gradient for `input` is off" in result.message


class Dropoutish(Function):
    @staticmethod
    def forward(ctx, x):
        mask = (torch.rand_like(x) > 0.5).to(x.dtype) * 2
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        return grad_output * mask


def test_a_random_forward_is_named_as_such_and_the_random_state_is_kept():
    state = torch.get_rng_state()
    result = check_function(Dropoutish, _randn(8))
    assert not result.passed
    assert "different outputs for the same input" in result.message
    assert torch.equal(torch.get_rng_state(), state)


class _Threshold(torch.autograd.Function):
    """`x * (x > t)`: the threshold's gradient is zero almost everywhere, spelled `None`."""

    @staticmethod
    def forward(ctx, x, t):
        mask = x > t
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        return grad_output * mask, None


def test_none_for_an_input_whose_gradient_is_zero_passes_also_when_it_alone_requires_grad():
    x, t = torch.tensor([-1.0, 0.3, 0.8, 2.0]), torch.tensor(0.5)
    assert torch.autograd.gradcheck(
        _Threshold.apply, (x.double().requires_grad_(), t.double().requires_grad_())
    )
    result = check_function(_Threshold, x, t)
    assert result.passed, result.message


class _SparseLookup(torch.autograd.Function):
    """`w[idx]` whose backward returns a sparse gradient, as `nn.Embedding(sparse=True)`."""

    scale = 1.0

    @staticmethod
    def forward(ctx, w, idx):
        ctx.save_for_backward(idx)
        ctx.shape = w.shape
        return w[idx]

    @classmethod
    def backward(cls, ctx, grad_output):
        (idx,) = ctx.saved_tensors
        sparse = torch.sparse_coo_tensor(idx.unsqueeze(0), grad_output, ctx.shape).coalesce()
        return cls.scale * sparse, None


class _WrongSparseLookup(_SparseLookup):
    scale = 2.0


def test_a_sparse_gradient_for_a_dense_input_is_judged_by_its_values():
    w, idx = torch.randn(5, 2), torch.tensor([1, 3, 1])
    assert check_function(_SparseLookup, w, idx).passed
    wrong = check_function(_WrongSparseLookup, w, idx)
    assert not wrong.passed and "is off" in wrong.message


def test_edge_probes_for_a_function_of_several_inputs_is_the_callers_mistake():
    with pytest.raises(ValueError, match=r'probes="edges" tries edge values for a function of one'):
        check_function(_Threshold, torch.randn(3), torch.tensor(0.5), probes="edges")


class _ScaledRelu(torch.autograd.Function):
    """`x * relu(y)` whose backward never computes `y`'s gradient: `None` for it."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(y)
        return x * torch.relu(y)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * torch.relu(y), None


def test_none_accepted_because_the_gradient_is_zero_here_is_said_not_claimed_checked():
    x, y = torch.linspace(-2, 2, 6), -torch.linspace(0.5, 2, 6)  # y < 0: dL/dy is zero
    result = check_function(_ScaledRelu, x, y, reference=lambda a, b: a * torch.relu(b))
    assert result.passed, result.message
    assert "returned `None` for `y`, accepted because the gradient is zero" in result.message
    result = check_function(_ScaledRelu, x, -y, reference=lambda a, b: a * torch.relu(b))
    assert not result.passed  # where it is not zero, None fails


# --- issue 25: kinks, inputs forward never reads, single-use backward, .grad, freed memory ---


class _Relu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0).to(grad_output.dtype)


class _ReluWrongSign(_Relu):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return -grad_output * (x > 0).to(grad_output.dtype)


class _ReluTwoAtZero(_Relu):
    """2 at x = 0: outside the one-sided derivatives (0 and 1), so no convention."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.where(x == 0, 2.0, (x > 0).to(x.dtype))


class _TimmHardSigmoid(Function):
    """timm's memory-efficient HardSigmoid: its gradient at ±3 is 1/6 (torch's is 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.relu6(x + 3.0) / 6.0

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (((x >= -3.0) & (x <= 3.0)) / 6.0)


class _TimmHardSwish(Function):
    """timm's memory-efficient HardSwish: at 3 its gradient is 3/3 + 1/2 (torch's is 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.nn.functional.relu6(x + 3.0) / 6.0

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        m = torch.ones_like(x) * (x >= 3.0)
        return grad_output * torch.where((x >= -3.0) & (x <= 3.0), x / 3.0 + 0.5, m)


@pytest.mark.parametrize("reference", [None, torch.relu], ids=["alone", "with torch.relu"])
def test_a_right_relu_passes_at_the_edges_where_finite_differences_straddle_its_kink(reference):
    result = check_function(_Relu, torch.linspace(-2, 2, 6), reference=reference, probes="edges")
    assert result.passed, result.message
    if reference is None:  # the kink is named, and why finite differences were not believed
        assert "Note: at `x` = 0" in result.message
        assert "the function has a kink, where finite differences cannot judge" in result.message


@pytest.mark.parametrize("fn", [torch.relu, torch.abs, torch.nn.functional.relu6])
def test_builtins_with_kinks_pass_at_the_edges(fn):
    for reference in (None, fn):
        result = check_function(
            fn, torch.linspace(-2, 2, 6), reference=reference, allow_callable=True, probes="edges"
        )
        assert result.passed, result.message


@pytest.mark.parametrize(
    ("function", "reference", "there"),
    [
        (_TimmHardSigmoid, torch.nn.functional.hardsigmoid, "0.1667, the reference 0"),
        (_TimmHardSwish, torch.nn.functional.hardswish, "1.5, the reference 1."),
    ],
)
def test_timms_convention_at_its_kinks_passes_and_is_named(function, reference, there):
    result = check_function(function, torch.linspace(-2, 2, 6), reference=reference, probes="edges")
    assert result.passed, result.message
    assert "Note: at `x` = 3" in result.message and "kink" in result.message
    assert f"there your gradient gives {there}" in result.message


def test_a_wrong_gradient_away_from_the_kink_still_fails_as_off():
    for reference in (None, torch.relu):
        result = check_function(
            _ReluWrongSign, torch.linspace(-2, 2, 6), reference=reference, probes="edges"
        )
        assert not result.passed
        assert "the gradient for `x` is off" in result.message


def test_a_gradient_at_a_kink_outside_its_one_sided_derivatives_fails_without_off():
    result = check_function(_ReluTwoAtZero, torch.tensor([-1.0, 0.0, 1.0]))
    assert not result.passed
    assert "at `x` = 0 the function has a kink" in result.message
    assert "not between its one-sided derivatives" in result.message
    assert "is off" not in result.message


class _AdditiveBlockFunction(Function):
    """memcnn's `AdditiveBlockFunction(x, Fm, Gm, *weights)`: the weights are passed for
    autograd's sake, forward reads them through the modules."""

    @staticmethod
    def forward(ctx, x, fm, gm, *weights):
        ctx.fm, ctx.gm = fm, gm
        ctx.save_for_backward(x)
        with torch.no_grad():
            x1, x2 = x.chunk(2, dim=1)
            y1 = x1 + fm(x2)
            return torch.cat([y1, x2 + gm(y1)], dim=1)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            x1, x2 = x.chunk(2, dim=1)
            y1 = x1 + ctx.fm(x2)
            y = torch.cat([y1, x2 + ctx.gm(y1)], dim=1)
            params = [*ctx.fm.parameters(), *ctx.gm.parameters()]
            grads = torch.autograd.grad(y, [x, *params], grad_output)
        return (grads[0], None, None, *grads[1:])


def test_weights_that_forward_reads_through_modules_are_named_not_called_off():
    fm, gm = torch.nn.Linear(2, 2).double(), torch.nn.Linear(2, 2).double()
    weights = [p.detach().clone() for p in [*fm.parameters(), *gm.parameters()]]
    result = check_function(_AdditiveBlockFunction, _randn(3, 4), fm, gm, *weights)
    assert not result.passed
    assert "the output does not change when `input 3` changes" in result.message
    assert "AdditiveBlockFunction(x, Fm, Gm, *weights)" in result.message
    assert "is off" not in result.message


class _SingleUse(Function):
    """revtorch's pattern: backward takes the output off ctx (`del ctx.y`) to free it early."""

    @staticmethod
    def forward(ctx, x):
        y = 2 * x + 1
        ctx.y = y.detach()
        return y

    @staticmethod
    def backward(ctx, grad_output):
        y = ctx.y
        del ctx.y
        return grad_output * 2 + 0 * y


def test_a_backward_that_deletes_what_it_needs_is_said_to_run_only_once():
    result = check_function(_SingleUse, _randn(5), reference=lambda x: 2 * x + 1)
    assert not result.passed
    assert "backward can run only once on a graph: it deletes `ctx.y`" in result.message
    assert "in place" not in result.message


class _WritesParameterGrads(Function):
    """revtorch's reversible block: backward runs `.backward()` on a graph it recomputes, so
    the block's parameters get their `.grad` there, not from what backward returns."""

    @staticmethod
    def forward(ctx, x, block):
        ctx.block = block
        ctx.save_for_backward(x)
        with torch.no_grad():
            return x + block(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            (x + ctx.block(x)).backward(grad_output)
        return x.grad, None


def test_a_backward_that_writes_parameters_grad_is_said_and_grad_is_put_back():
    block = torch.nn.Linear(3, 3).double()
    block.weight.grad = torch.ones_like(block.weight)  # a model in the middle of training
    kept = block.weight.grad.clone()
    result = check_function(_WritesParameterGrads, _randn(2, 3), block, wrt=[0])
    assert not result.passed
    assert "backward writes `.grad` itself (of `block.weight`, `block.bias`)" in result.message
    assert torch.equal(block.weight.grad, kept) and block.bias.grad is None


class _WritesInputGrad(Function):
    """A backward that sets its saved input's `.grad` (memcnn writes the input's)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        x.grad = grad_output * 3
        return grad_output * 3


def test_a_backward_that_writes_its_inputs_grad_is_said_and_the_callers_tensor_kept():
    x = _randn(4).requires_grad_()
    result = check_function(_WritesInputGrad, x)
    assert not result.passed
    assert "backward set `.grad` of its input `x`" in result.message
    assert x.grad is None


FREES_ITS_INPUT = """
import torch
from autograd_helpers.checks import check_function


class Additive(torch.autograd.Function):
    # memcnn's keep_input=False: forward frees its input, backward rebuilds it
    @staticmethod
    def forward(ctx, x):
        y = x + 1
        x.untyped_storage().resize_(0)
        ctx.save_for_backward(y)
        ctx.x = x
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        ctx.x.untyped_storage().resize_(y.numel() * y.element_size())
        ctx.x.copy_(y - 1)
        return grad_output


w = torch.linspace(-1, 1, 4)


def frees_a_notebook_tensor(t):
    w.untyped_storage().resize_(0)
    return t * 2


print(check_function(Additive, torch.linspace(-3, 3, 8)).title)
print(check_function(frees_a_notebook_tensor, torch.ones(3), allow_callable=True).title)
print(w.tolist() == torch.linspace(-1, 1, 4).tolist())
"""


def test_a_function_that_frees_its_inputs_memory_gets_a_verdict_not_a_crash():
    # In a process of its own: a crash (a segfault, once) fails the test instead of pytest.
    out = subprocess.run(
        [sys.executable, "-c", FREES_ITS_INPUT], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    freed, by_name, values = out.stdout.strip().splitlines()[-3:]
    assert freed == (
        "Additive: forward freed the memory of its input `x` (`untyped_storage().resize_(0)`), "
        "so that tensor holds no values and check_function cannot check this Function."
    )
    assert "changed the notebook's tensor `w`" in by_name
    assert values == "True"  # the notebook's tensor has its memory and values back


# --- issue 25: sources of truth where they have no say ----------------------------------------


def test_a_gradient_equal_to_the_references_passes_where_finite_differences_truncate():
    # pytorch3d's _sqrt_positive_part: sqrt(clamp(x, 0)), checked against itself at the edges.
    # At x = 1e-5 the central difference's step (1e-6) is 10% of x: finite differences are
    # 0.2 off 1 / (2 sqrt x), where the answer is the reference's exactly.
    def sqrt_positive(t):
        return torch.sqrt(torch.clamp(t, min=0))

    result = check_function(
        sqrt_positive,
        torch.rand(6, generator=torch.Generator().manual_seed(0)) + 0.1,
        reference=sqrt_positive,
        allow_callable=True,
        probes="edges",
    )
    assert result.passed, result.message
    assert "float32" not in result.message.replace("in float64 and float32", "")


def test_an_example_outside_the_references_domain_is_the_notebooks_mistake():
    # torch.log at -2 (pyro's _SafeLog checked at a negative example): no gradient is right.
    with pytest.raises(ValueError, match=r"outside the function's domain") as raised:
        check_function(
            lambda t: torch.log(t),
            torch.tensor([-2.0, 0.5, 1.5]),
            reference=torch.log,
            allow_callable=True,
        )
    assert "`t` = -2" in str(raised.value)


class _SafeLog(Function):
    """pyro's pyro/ops/special.py: forward log, backward divides by x clamped to eps."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.log()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x.clamp(min=torch.finfo(x.dtype).eps)


def test_probes_outside_the_domain_are_not_judged_and_the_real_difference_is():
    # log is NaN at the negative probes, as the reference's: the gradient there means
    # nothing. The clamp's real difference is at the tiny positive values.
    result = check_function(_SafeLog, torch.rand(6) + 0.1, reference=torch.log, probes="edges")
    assert not result.passed
    assert "off compared with the reference's gradient" in result.message
    assert "There `x` = 1e-30" in result.message
    assert "float32" not in result.title


def test_the_float32_sentence_is_not_said_for_code_that_never_left_float64():
    # the checker's own float32 work (copying a float32 example to float64, the runner's
    # probe of the process's denormal setting) is not the learner's
    from autograd_helpers.checks._core.trial import Options, Trial
    from autograd_helpers.checks.function._precision import precision_note

    trial = Trial.start((torch.rand(3) + 0.5,), Options(label="log", wrt=(0,)), ["x"], False)
    trial.differentiable = (0,)
    trial.grad_outputs = [torch.ones(3, dtype=DOUBLE)]
    expected = [1 / trial.leaves[0].detach()]
    assert precision_note(trial, torch.log, expected) is None
    assert precision_note(trial, lambda t: torch.log(t.float()).double(), expected) is not None


def _new_empty_op(fill):
    """detectron2's _NewEmptyTensorOp (layers/wrappers.py), its gradient's memory ``fill``ed:
    ``new_empty`` gives whatever the memory held, set here so that the test is repeatable."""

    class NewEmpty(Function):
        @staticmethod
        def forward(ctx, x, new_shape):
            ctx.shape = x.shape
            return x.new_empty(new_shape)

        @staticmethod
        def backward(ctx, grad):
            return grad.new_empty(ctx.shape).fill_(fill), None

    return NewEmpty


@pytest.mark.parametrize("fill", [0.0, 6.9e-310, 3.5])
def test_an_empty_output_like_the_references_is_checked_and_its_gradient_must_be_zero(fill):
    result = check_function(
        _new_empty_op(fill),
        _randn(3, 4),
        (0, 4),
        reference=lambda x, s: x.new_zeros(s) + 0 * x.sum(),
    )
    assert result.passed == (fill == 0.0), result.message
    if fill:
        assert "the output is empty, yet backward's gradient for `x` is not zero" in result.title


class _StochasticBinarize(Function):
    """BinaryNet's Binarize, quant_mode='stoch': a random forward, straight-through backward."""

    @staticmethod
    def forward(ctx, x, quant_mode="stoch"):
        noise = torch.rand(x.shape, dtype=x.dtype) - 0.5
        return ((x + 1) / 2 + noise).clamp(0, 1).round() * 2 - 1

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def test_a_random_forward_with_only_a_grad_reference_is_judged_by_its_gradient():
    # no finite differences and no output compared: the reason "finite differences need
    # the same output" would be false; the straight-through gradient is deterministic
    before = torch.get_rng_state()
    result = check_function(
        _StochasticBinarize, _randn(3, 4), "stoch", grad_reference=lambda x, m: x
    )
    assert result.passed, result.message
    assert (
        "its output was not checked, only its gradient against `grad_reference`" in result.message
    )
    assert torch.equal(torch.get_rng_state(), before)


def test_a_random_forward_with_a_reference_names_the_output_comparison():
    result = check_function(
        _StochasticBinarize,
        _randn(3, 4),
        "stoch",
        reference=lambda x, m: torch.sign(x),
        grad_reference=lambda x, m: x,
    )
    assert not result.passed
    assert "finite differences" not in result.message


def test_a_callable_writing_into_its_out_argument_is_noted_and_the_callers_tensor_kept():
    # torch_scatter's scatter_sum(..., out=out), with a trivial index
    def scatter_into(src, out):
        return out.add_(src)

    src, out = _randn(3), _randn(3, seed=1)
    kept = out.clone()
    result = check_function(
        scatter_into, src, out, reference=lambda s, o: s + o, allow_callable=True
    )
    assert result.passed, result.message
    assert "writes the result into its input `out` in place" in result.message
    assert torch.equal(out, kept)


class _Float32Only(Function):
    """pytorch3d's _PackedToPadded guard: anything but float32 is refused."""

    @staticmethod
    def forward(ctx, x):
        if x.dtype != torch.float32:
            raise ValueError("input has to be of type torch.float32.")
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2


def test_a_function_that_refuses_float64_is_a_limit_of_the_check_said_as_such():
    result = check_function(_Float32Only, torch.randn(4), reference=lambda x: 2 * x)
    assert not result.passed
    assert "this Function refuses float64" in result.message
    assert "a limit of the check" in result.message


def test_torchs_own_dtype_error_in_forward_is_not_called_a_limit_of_the_check():
    class FixedWeight(Function):
        @staticmethod
        def forward(ctx, x):
            return x @ torch.ones(4, 2)  # float32 weight: float64 inputs fail, float32 run

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output @ torch.ones(2, 4, dtype=grad_output.dtype)

    result = check_function(
        FixedWeight, torch.randn(3, 4), reference=lambda x: x @ torch.ones(4, 2, dtype=x.dtype)
    )
    assert not result.passed
    assert "a limit of the check" not in result.message


# --- an approximation judged at the tolerances its caller gives ----------------------------


class RoundedSin(Function):
    """An approximate forward (gpytorch's ``LogNormalCDF`` is a rational approximation,
    about 1e-4 off): here sin rounded to 6 decimals, with sin's exact gradient."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.round(torch.sin(x), decimals=6)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.cos(x) * (1 + 1e-6)  # an approximate gradient too


def test_tolerances_the_caller_gives_hold_against_the_reference_too():
    x = torch.tensor([0.3, 1.2, -2.0])
    # by default, against a reference: float64's rounding, and the approximation is off
    strict = check_function(RoundedSin, x, reference=torch.sin)
    assert not strict.passed and "does not match the reference" in strict.message
    # allclose at these tolerances holds, so the check must too, output and gradient alike
    assert torch.allclose(RoundedSin.apply(x.double()), torch.sin(x.double()), 1e-2, 1e-3)
    assert check_function(RoundedSin, x, reference=torch.sin, atol=1e-3, rtol=1e-2).passed
    loose_atol_only = check_function(RoundedSin, x, reference=torch.sin, atol=1e-3)
    assert loose_atol_only.passed, loose_atol_only.message
    with pytest.raises(ValueError, match="atol"):
        check_function(RoundedSin, x, reference=torch.sin, atol=2.0)


def test_a_reference_that_draws_leaves_every_random_state_as_it_was():
    """An audit's case (a dropout-like reference): the notebook's generators are its own."""
    import random

    import numpy as np

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2

    def noisy_reference(t):
        return t * 2 + 0 * torch.rand_like(t) + 0 * float(np.random.rand()) + 0 * random.random()

    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    result = check_function(Twice, torch.linspace(-1, 1, 5), reference=noisy_reference)
    assert result.passed, result.message
    assert torch.equal(torch.get_rng_state(), states[0])
    assert np.array_equal(np.random.get_state()[1], states[1][1])
    assert random.getstate() == states[2]
