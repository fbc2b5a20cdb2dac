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
