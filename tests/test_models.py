"""Tests of ttgnn.models: dense TT table, input modules, SAGE/GAT on full graphs and blocks."""
import os

import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")
import dgl  # noqa: E402

from ttgnn import TTNodeEmbedding  # noqa: E402
from ttgnn.data import planted_partition  # noqa: E402
from ttgnn.models import GAT, GraphSAGE, LabelInput, NodeInput, build_model  # noqa: E402
from ttgnn.ops import tt_dense_table  # noqa: E402


@pytest.mark.parametrize("row_shape,col_shape,ranks", [([5, 6, 7], [2, 4, 2], 3), ([4, 9], [8, 2], 5),
                                                       ([3, 2, 4, 2], [2, 2, 2, 2], [2, 3, 2])])
def test_dense_table_matches_reference_lookup(row_shape, col_shape, ranks):
    torch.manual_seed(0)
    rows = 1
    for n in row_shape:
        rows *= n
    emb = TTNodeEmbedding(rows, int(torch.tensor(col_shape).prod()), ranks=ranks, row_shape=row_shape,
                          col_shape=col_shape, dtype=torch.float64)
    dense = tt_dense_table(list(emb.cores))
    torch.testing.assert_close(dense, emb.full_weight(), rtol=1e-12, atol=1e-12)


def test_dense_table_gradient_matches_lookup():
    torch.manual_seed(0)
    emb = TTNodeEmbedding(100, 16, ranks=4, row_shape=[5, 4, 5], col_shape=[2, 4, 2], dtype=torch.float64)
    weights = torch.randn(100, 16, dtype=torch.float64)
    (tt_dense_table(list(emb.cores)) * weights).sum().backward()
    grads = [c.grad.clone() for c in emb.cores]
    for c in emb.cores:
        c.grad = None
    (emb.full_weight() * weights).sum().backward()
    for got, want in zip(grads, emb.cores):
        torch.testing.assert_close(got, want.grad, rtol=1e-10, atol=1e-12)


def test_node_input_tt_dense_and_gather_paths_agree():
    torch.manual_seed(0)
    order = torch.randperm(90)
    inp = NodeInput("tt", 90, 16, ranks=4, row_shape=[4, 5, 5], col_shape=[2, 4, 2], node_order=order,
                    dense_fraction=0.5)
    few = torch.tensor([3, 7, 89])
    many = torch.arange(60)
    table = inp(None)
    assert table.shape == (90, 16)
    # all rows: the kernel (when built) and the dense contraction + gather give the same values and gradients
    dense = tt_dense_table(list(inp.table.cores))[order]
    torch.testing.assert_close(table, dense, rtol=1e-5, atol=1e-6)
    weights = torch.randn(90, 16)
    grads = torch.autograd.grad((table * weights).sum(), list(inp.table.cores))
    dense_grads = torch.autograd.grad((dense * weights).sum(), list(inp.table.cores))
    for got, want in zip(grads, dense_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(inp(few), table[few], rtol=1e-5, atol=1e-6)  # float32 sum order
    torch.testing.assert_close(inp(many), table[many], rtol=1e-5, atol=1e-6)
    with pytest.raises(IndexError):
        inp(torch.arange(85, 91).repeat(10))
    assert inp.compression_ratio == pytest.approx(inp.table.compression_ratio)


def test_node_input_kinds_and_errors():
    full = NodeInput("full", 10, 8)
    assert full(torch.tensor([1, 2])).shape == (2, 8) and full.compression_ratio == 1.0
    assert full.num_parameters == 80
    feats = NodeInput("features", 4, features=torch.ones(4, 3))
    assert feats.dim == 3 and feats.num_parameters == 0 and feats(None).shape == (4, 3)
    with pytest.raises(ValueError, match="features"):
        NodeInput("features", 4)
    with pytest.raises(ValueError, match="kind"):
        NodeInput("sparse", 4)
    with pytest.raises(TypeError, match="ranks"):
        NodeInput("full", 4, ranks=4)


@pytest.fixture(scope="module")
def small_graph():
    ds = planted_partition(300, num_classes=4, avg_degree=6, seed=1)
    return ds, ds.dgl_graph(self_loops=True)


@pytest.mark.parametrize("model", ["sage", "gat"])
@pytest.mark.parametrize("norm,residual", [("batch", False), ("layer", True), ("none", False)])
def test_blocks_equal_full_graph_and_layerwise_inference(small_graph, model, norm, residual):
    ds, graph = small_graph
    torch.manual_seed(0)
    inp = NodeInput("tt", ds.num_nodes, 16, ranks=4, init_scale=10.0)
    clf = build_model(model, inp, ds.num_classes, hidden=16, num_layers=2, norm=norm, residual=residual, heads=2)
    clf.eval()
    full = clf(graph)
    assert full.shape == (ds.num_nodes, ds.num_classes)
    # Full-neighbour blocks for some seeds give the same logits as the full graph.
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
    seeds = torch.tensor([0, 5, 17, 299])
    input_nodes, output_nodes, blocks = sampler.sample_blocks(graph, seeds)
    from_blocks = clf(blocks, input_nodes.long())
    torch.testing.assert_close(from_blocks, full[output_nodes.long()], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(clf.inference(graph, batch_size=64), full, rtol=1e-4, atol=1e-5)


def test_gat_heads_and_shapes(small_graph):
    ds, graph = small_graph
    gnn = GAT(8, 12, 4, num_layers=3, heads=3)
    assert gnn(graph, torch.randn(ds.num_nodes, 8)).shape == (ds.num_nodes, 4)
    with pytest.raises(ValueError, match="heads"):
        GAT(8, 10, 4, heads=3)
    with pytest.raises(ValueError, match="num_layers"):
        GraphSAGE(8, 8, 4, num_layers=0)
    with pytest.raises(ValueError, match="blocks"):
        GraphSAGE(8, 8, 4, num_layers=2)([graph], torch.randn(ds.num_nodes, 8))


def test_parameter_groups_split_embedding_from_gnn():
    inp = NodeInput("tt", 100, 16, ranks=4)
    clf = build_model("sage", inp, 3, hidden=8, num_layers=2)
    emb, gnn = clf.parameter_groups()
    assert sum(p.numel() for p in emb) == inp.table.num_parameters
    assert {id(p) for p in emb}.isdisjoint({id(p) for p in gnn})
    assert len(emb) + len(gnn) == len(list(clf.parameters()))


def test_label_input_table_and_errors():
    labels = LabelInput(3, 5)
    assert labels.unknown == 3 and labels.table.weight.shape == (4, 5)
    out = labels(torch.tensor([0, 3, 2, 3]))
    assert torch.equal(out[1], torch.zeros(5)) and torch.equal(out[3], torch.zeros(5))
    assert torch.equal(out[0], labels.table.weight[0]) and torch.equal(out[2], labels.table.weight[2])
    out.sum().backward()
    assert torch.equal(labels.table.weight.grad[3], torch.zeros(5))  # "unknown" stays zero
    with pytest.raises(IndexError, match=r"\[0, 3\]"):
        labels(torch.tensor([0, 4]))
    with pytest.raises(IndexError):
        labels(torch.tensor([-1]))
    with pytest.raises(TypeError, match="int32 or int64"):
        labels(torch.tensor([0.0]))


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_label_input_model_full_blocks_and_inference_agree(small_graph, model):
    ds, graph = small_graph
    torch.manual_seed(0)
    inp = NodeInput("tt", ds.num_nodes, 16, ranks=4, init_scale=10.0)
    clf = build_model(model, inp, ds.num_classes, hidden=16, num_layers=2, heads=2, label_input=True)
    clf.eval()
    known = torch.full((ds.num_nodes,), ds.num_classes)
    known[:150] = ds.labels[:150]
    full = clf(graph, input_labels=known)
    # the labels change the output, and only through the label table: with no known label the
    # model is the plain one
    assert not torch.allclose(full, clf(graph, input_labels=torch.full_like(known, ds.num_classes)))
    torch.testing.assert_close(clf(graph, input_labels=torch.full_like(known, ds.num_classes)),
                               clf.gnn(graph, inp(None)), rtol=1e-5, atol=1e-6)
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
    input_nodes, output_nodes, blocks = sampler.sample_blocks(graph, torch.tensor([0, 5, 149, 150, 299]))
    from_blocks = clf(blocks, input_nodes.long(), input_labels=known)
    torch.testing.assert_close(from_blocks, full[output_nodes.long()], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(clf.inference(graph, batch_size=64, input_labels=known), full, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="input_labels"):
        clf(graph)
    with pytest.raises(ValueError, match="shape"):
        clf(graph, input_labels=known[:10])
    plain = build_model(model, inp, ds.num_classes, hidden=16, num_layers=2, heads=2)
    with pytest.raises(ValueError, match="no label input"):
        plain(graph, input_labels=known)
    # the per-class table trains with the GNN's settings, not the embedding's
    emb, gnn = clf.parameter_groups()
    assert any(p is clf.label_input.table.weight for p in gnn)
    assert not any(p is clf.label_input.table.weight for p in emb)
