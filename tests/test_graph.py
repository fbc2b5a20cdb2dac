"""autograd_helpers.graph: the drawing is deterministic and matches the real graph."""

from __future__ import annotations

import pytest
import torch

from autograd_helpers.graph import autograd_graph, saved_tensors_of


def test_tree_and_mermaid_for_a_shared_leaf():
    x = torch.tensor(2.0, requires_grad=True)
    graph = autograd_graph(x**3 + 2 * x, names={"x": x})
    assert graph.to_text() == (
        "AddBackward0\n"
        "    PowBackward0\n"
        "        AccumulateGrad: x (scalar)\n"
        "    MulBackward0\n"
        "        AccumulateGrad: x (scalar) (seen)"
    )
    assert graph.nodes.count("AccumulateGrad: x (scalar)") == 1  # one node per leaf
    mermaid = graph.to_mermaid()
    assert mermaid.splitlines()[0] == "flowchart TD"
    assert "n1 --> n3" in mermaid and "n2 --> n3" in mermaid
    bundle = graph._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain"}


def test_inputs_without_grad_are_skipped_and_unnamed_leaves_labelled():
    w = torch.ones(2, 3, requires_grad=True)
    c = torch.ones(2, 3)  # no grad: next_functions holds None for it
    graph = autograd_graph((w * c).sum())
    assert graph.nodes == ("SumBackward0", "MulBackward0", "AccumulateGrad: leaf (2×3)")
    assert graph.edges == ((0, 1), (1, 2))


def test_same_graph_same_drawing():
    def make():
        a = torch.ones(2, requires_grad=True)
        b = torch.ones(2, requires_grad=True)
        return autograd_graph((a * b + a.exp()).sum(), names={"a": a, "b": b})

    assert make() == make()


def test_bad_arguments():
    with pytest.raises(TypeError, match="tensor"):
        autograd_graph([1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grad_fn"):
        autograd_graph(torch.ones(2, requires_grad=True))
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="names"):
        autograd_graph(x * 2, names={"x": 1.0})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"names must be a mapping from names to tensors.*got list"):
        autograd_graph(x * 2, names=[x])  # type: ignore[arg-type]


def test_saved_tensors_are_listed_with_shapes_and_freed_ones_said_so():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(2, 3, requires_grad=True)
    y = torch.tanh(w @ x).sum()
    graph = autograd_graph(y, names={"x": x, "w": w}, saved=True)
    assert str(graph).splitlines()[1:3] == [
        "    TanhBackward0  [saved: result 2]",
        "        MvBackward0  [saved: self 2×3, vec 3]",
    ]
    assert 'n2["MvBackward0<br/><small>saved: self 2×3, vec 3</small>"]' in graph.to_mermaid()
    y.backward()
    assert "TanhBackward0  [saved: freed]" in str(autograd_graph(y, saved=True))


def test_a_custom_functions_saved_tensors_are_listed():
    from autograd_helpers.functions import sigmoid

    x = torch.ones(3, requires_grad=True)
    assert saved_tensors_of(sigmoid(x).grad_fn) == ("saved[0] 3",)


def test_without_saved_the_drawing_is_unchanged():
    x = torch.ones(2, requires_grad=True)
    plain = autograd_graph((x * 3).sum(), names={"x": x})
    assert plain.saved == () and "saved" not in str(plain) + plain.to_mermaid()
    with pytest.raises(TypeError, match="saved must be a bool"):
        autograd_graph((x * 3).sum(), saved="yes")  # type: ignore[arg-type]


# --- small graphs draw exactly as the notebooks' stored outputs (strict nbval compares them) ---


def test_a_small_graph_draws_exactly_as_notebook_00_shows_it():
    x = torch.tensor(2.0, requires_grad=True)
    bundle = autograd_graph(x**3 + 2 * x, names={"x": x})._repr_mimebundle_()
    assert bundle["text/vnd.mermaid"] == (
        "flowchart TD\n"
        '    n0["AddBackward0"]\n'
        '    n1["PowBackward0"]\n'
        '    n2["MulBackward0"]\n'
        '    n3["AccumulateGrad: x (scalar)"]\n'
        "    n0 --> n1\n"
        "    n0 --> n2\n"
        "    n1 --> n3\n"
        "    n2 --> n3"
    )
    assert bundle["text/plain"].endswith(
        "    MulBackward0\n        AccumulateGrad: x (scalar) (seen)"
    )


def test_saved_tensors_draw_exactly_as_notebook_02_shows_them():
    x = torch.randn(3, requires_grad=True)
    W = torch.randn(2, 3, requires_grad=True)
    graph = autograd_graph(torch.tanh(W @ x).pow(2).sum(), names={"x": x, "W": W}, saved=True)
    assert graph.to_text() == (
        "SumBackward0\n"
        "    PowBackward0  [saved: self 2]\n"
        "        TanhBackward0  [saved: result 2]\n"
        "            MvBackward0  [saved: self 2×3, vec 3]\n"
        "                AccumulateGrad: W (2×3)\n"
        "                AccumulateGrad: x (3)"
    )
    assert graph.to_mermaid() == (
        "flowchart TD\n"
        '    n0["SumBackward0"]\n'
        '    n1["PowBackward0<br/><small>saved: self 2</small>"]\n'
        '    n2["TanhBackward0<br/><small>saved: result 2</small>"]\n'
        '    n3["MvBackward0<br/><small>saved: self 2×3, vec 3</small>"]\n'
        '    n4["AccumulateGrad: W (2×3)"]\n'
        '    n5["AccumulateGrad: x (3)"]\n'
        "    n0 --> n1\n"
        "    n1 --> n2\n"
        "    n2 --> n3\n"
        "    n3 --> n4\n"
        "    n3 --> n5"
    )


def test_a_chain_prints_exactly_as_notebook_01_shows_it():
    x = torch.randn(5, requires_grad=True)
    assert str(autograd_graph(1 / (1 + torch.exp(-x)))) == (
        "MulBackward0\n"
        "    ReciprocalBackward0\n"
        "        AddBackward0\n"
        "            ExpBackward0\n"
        "                NegBackward0\n"
        "                    AccumulateGrad: leaf (5)"
    )


# --- deep graphs: walked without recursion, drawn in part with a note that counts the rest ---


def _rnn_output(cell_type: type[torch.nn.Module], steps: int) -> torch.Tensor:
    torch.manual_seed(0)
    cell = cell_type(3, 4)
    h = c = torch.zeros(2, 4)
    for x_t in torch.randn(steps, 2, 3):
        if cell_type is torch.nn.LSTMCell:
            h, c = cell(x_t, (h, c))
        else:
            h = cell(x_t, h)
    return h.sum()


def test_a_350_step_gru_loop_prints_and_displays():
    graph = autograd_graph(_rnn_output(torch.nn.GRUCell, 350))  # over 1000 nodes deep
    total = len(graph.nodes)
    assert total > 5000  # the whole graph is collected; only the drawing is cut
    note = f"… {total - 100} more nodes not drawn (the graph has {total} nodes);"
    how = f"pass max_nodes={total} to autograd_graph() to draw them all"
    text = str(graph)
    assert text.splitlines()[-1] == f"{note} {how}"
    assert len(text.splitlines()) < 200 and "    …" in text
    bundle = graph._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert f"{note}<br/>{how}" in bundle["text/vnd.mermaid"]


@pytest.mark.parametrize("cell_type", [torch.nn.GRUCell, torch.nn.LSTMCell])
@pytest.mark.parametrize("saved", [False, True])
def test_a_100_step_rnn_loop_fits_mermaids_default_limits(cell_type, saved):
    graph = autograd_graph(_rnn_output(cell_type, 100), saved=saved)
    mermaid = graph.to_mermaid()
    # Mermaid's defaults, maxTextSize and maxEdges: it refuses to draw a larger source
    assert len(mermaid) < 50_000 and mermaid.count("-->") + mermaid.count("-.->") < 500
    lines = mermaid.splitlines()
    assert sum(line.startswith("    n") and '["' in line for line in lines) == 100
    total = len(graph.nodes)
    assert (
        f'    more(["… {total - 100} more nodes not drawn (the graph has {total} nodes);<br/>'
        f'pass max_nodes={total} to autograd_graph() to draw them all"])'
    ) in lines
    assert any(line.endswith(" -.-> more") for line in lines)


def test_a_cut_drawing_shows_the_nodes_nearest_the_output_exactly():
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(5):
        y = y * 2
    graph = autograd_graph(y.sum(), names={"x": x}, max_nodes=3)
    assert str(graph) == (
        "SumBackward0\n"
        "    MulBackward0\n"
        "        MulBackward0\n"
        "            …\n"
        "… 4 more nodes not drawn (the graph has 7 nodes); "
        "pass max_nodes=7 to autograd_graph() to draw them all"
    )
    assert graph.to_mermaid() == (
        "flowchart TD\n"
        '    n0["SumBackward0"]\n'
        '    n1["MulBackward0"]\n'
        '    n2["MulBackward0"]\n'
        "    n0 --> n1\n"
        "    n1 --> n2\n"
        '    more(["… 4 more nodes not drawn (the graph has 7 nodes);<br/>'
        'pass max_nodes=7 to autograd_graph() to draw them all"])\n'
        "    n2 -.-> more"
    )
    everything = autograd_graph(y.sum(), names={"x": x}, max_nodes=7)
    assert everything.nodes == graph.nodes and everything.edges == graph.edges
    assert "not drawn" not in str(everything) + everything.to_mermaid()
    assert str(everything).endswith("AccumulateGrad: x (2)")


def test_one_node_left_out_is_said_in_the_singular():
    x = torch.ones(2, requires_grad=True)
    text = str(autograd_graph((x * 2).sum(), max_nodes=2))
    assert text.endswith(
        "… 1 more node not drawn (the graph has 3 nodes); "
        "pass max_nodes=3 to autograd_graph() to draw them all"
    )


def test_a_deeper_chain_than_the_recursion_limit_is_drawn_whole():
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(1200):  # deeper than Python's default recursion limit of 1000
        y = y.exp()
    graph = autograd_graph(y.sum(), max_nodes=1202)
    lines = str(graph).splitlines()
    assert len(lines) == 1202 and lines[-1] == "    " * 24 + "[depth 1201] AccumulateGrad: leaf (1)"
    assert lines[24] == "    " * 24 + "ExpBackward0"  # indented up to depth 24, numbered after
    assert lines[25] == "    " * 24 + "[depth 25] ExpBackward0"
    assert graph.to_mermaid().count(" --> ") == 1201


@pytest.mark.parametrize("bad", [0, -5, 2.5, "100", True, None])
def test_max_nodes_must_be_a_positive_int(bad):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(
        ValueError, match=r"autograd_graph\(\): max_nodes must be an int of at least 1"
    ):
        autograd_graph(x * 2, max_nodes=bad)


# --- what the audit found ----------------------------------------------------------------


def test_saved_tensors_under_a_non_reentrant_checkpoint_are_not_recomputed():
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    x = torch.randn(4, 3, requires_grad=True)
    out = checkpoint(model, x, use_reentrant=False).sum()
    norm = model[1]
    tracked, running = norm.num_batches_tracked.item(), norm.running_mean.clone()
    text = str(autograd_graph(out, saved=True))
    assert norm.num_batches_tracked.item() == tracked == 1  # no forward run again
    assert torch.equal(norm.running_mean, running)
    assert "input recomputed by checkpoint" in text and "mat1 recomputed by checkpoint" in text
    out.backward()  # and the checkpoint still works
    assert x.grad is not None


def test_names_are_escaped_in_the_mermaid_source():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    injected = 'a"]\n    evil["injected'
    mermaid = autograd_graph((a * b).sum(), names={injected: a, "<b>bold</b> #1": b}).to_mermaid()
    lines = mermaid.splitlines()
    assert len(lines) == 8 and not any(line.startswith("    evil") for line in lines)
    assert 'AccumulateGrad: a#quot;]<br/>    evil[#quot;injected (2)"]' in mermaid
    assert "AccumulateGrad: #lt;b#gt;bold#lt;/b#gt; #35;1 (2)" in mermaid
    assert "<b>" not in mermaid


def test_a_tensor_given_two_names_shows_both():
    x = torch.ones(2, requires_grad=True)
    graph = autograd_graph((x * 2).sum(), names={"x": x, "inputs": x})
    assert graph.nodes[-1] == "AccumulateGrad: x, inputs (2)"


def test_a_drawing_over_mermaids_limits_says_so_and_displays_as_text():
    graph = autograd_graph(_rnn_output(torch.nn.GRUCell, 60), max_nodes=2000)
    mermaid = graph.to_mermaid()
    assert len(mermaid) > 50_000 or mermaid.count("-->") > 500
    assert mermaid.splitlines()[-1].startswith("    %% this drawing has ")
    assert "over Mermaid's default limits" in mermaid and "max_nodes" in mermaid
    bundle = graph._repr_mimebundle_()
    assert list(bundle) == ["text/plain"]
    assert bundle["text/plain"].splitlines()[-1].startswith("Not drawn as a flowchart: ")
    small = autograd_graph(_rnn_output(torch.nn.GRUCell, 3))
    assert "%%" not in small.to_mermaid() and "text/vnd.mermaid" in small._repr_mimebundle_()


def test_the_text_of_a_deep_loop_grows_linearly_with_its_size():
    graph = autograd_graph(_rnn_output(torch.nn.GRUCell, 400), max_nodes=100_000)
    text = str(graph)
    lines = text.splitlines()
    assert len(lines) > 6000
    assert max(len(line) for line in lines) < 200  # 9.7 MB when every level was indented
    assert len(text) < 200 * len(lines)


# --- the re-audit on real-world code -------------------------------------------------------


def test_a_saved_tensor_changed_in_place_is_not_called_freed():
    x = torch.ones(3, requires_grad=True)
    y = x * 1
    z = y.sin()  # saves y
    y.add_(1)
    assert saved_tensors_of(z.grad_fn) == (
        "self modified in place after it was saved (backward would fail)",
    )
    w = x * x
    w.sum().backward()
    assert saved_tensors_of(w.grad_fn) == ("freed",)


def test_a_strided_nested_tensor_is_drawn_not_crashed_on():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype: torch says so
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True)
    graph = autograd_graph(nested.sin(), {"nt": nested}, saved=True)
    assert str(graph) == (
        "SinBackward0  [saved: self nested: 2 tensors]\n    AccumulateGrad: nt (nested: 2 tensors)"
    )


def test_a_freed_custom_function_node_reads_freed_not_a_raw_error():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.ones(3, requires_grad=True)
    z = Square.apply(x)
    s = z.sum()
    assert saved_tensors_of(z.grad_fn) == ("saved[0] 3",)
    s.backward()
    assert saved_tensors_of(z.grad_fn) == ("freed",)
    assert "SquareBackward  [saved: freed]" in str(autograd_graph(s, saved=True))


def test_a_none_a_custom_function_saved_reads_none_not_an_error():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)  # allowed, and documented so
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            _, x = ctx.saved_tensors
            return grad * 2 * x.sign().abs()

    y = Scale.apply(torch.ones(3, requires_grad=True))
    assert saved_tensors_of(y.grad_fn) == ("saved[0] None", "saved[1] 3")
    assert "[saved: saved[0] None, saved[1] 3]" in str(autograd_graph(y, saved=True))


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class _DoubleSaidToSave(_Double):
    @staticmethod
    def forward(ctx, x):
        # nothing to save for backward here: the word in a comment decides nothing
        return x * 2


@pytest.mark.parametrize("function", [_Double, _DoubleSaidToSave], ids=["plain", "comment"])
def test_a_custom_function_node_is_read_from_the_node_never_from_its_source(function):
    # The issue: a comment that says "save" turned () into ('freed',) after backward. A freed
    # node no longer says whether it saved anything: both read as torch reads them.
    y = function.apply(torch.ones(3, requires_grad=True))
    assert saved_tensors_of(y.grad_fn) == ()
    y.sum().backward()
    assert saved_tensors_of(y.grad_fn) == ("freed",)
    with pytest.raises(RuntimeError, match="already been freed"):
        y.grad_fn.saved_tensors  # noqa: B018 (torch's own answer for the same node)


# --- issue 25: the fresh-eyes audit on real code ----------------------------------------------


def test_indexing_by_a_mask_or_an_index_lists_the_indices_it_saved():
    # pytorch3d's acos_linear_extrapolation indexes with masks: IndexBackward0 and
    # IndexPutBackward0 save their indices as a list of tensors, which read as nothing.
    x = torch.linspace(-1.2, 1.2, 1000, requires_grad=True)
    mask = x.detach() > 0.5
    picked = x[mask]
    assert saved_tensors_of(picked.grad_fn) == ("indices[0] 1000",)
    out = torch.empty_like(x)
    out[mask] = torch.acos(x[mask].clamp(-1, 1))
    assert saved_tensors_of(out.grad_fn) == ("indices[0] 1000",)
    columns = torch.ones(3, 4, requires_grad=True)[:, torch.tensor([0, 2])]
    assert saved_tensors_of(columns.grad_fn) == ("indices[1] 2",)  # None: a full slice
    assert "[saved: indices[0] 1000]" in str(autograd_graph(picked.sum(), saved=True))
    picked.sum().backward()
    assert saved_tensors_of(picked.grad_fn) == ("freed",)


def test_indices_packed_by_a_hook_are_said_so_never_unpacked():
    unpacked = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(t) or t):
        y = torch.ones(3, 4, requires_grad=True)[:, torch.tensor([0, 2])]
    assert saved_tensors_of(y.grad_fn) == ("indices[1] packed by a saved_tensors_hooks hook",)
    assert unpacked == []
