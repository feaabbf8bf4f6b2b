"""Tests of ttgnn.layers: index-tensor graphs, aggregation, and the tensor SAGE/GAT convolutions
against DGL's (same weights -> same outputs and gradients, full graphs and sampled blocks)."""
import os

import re

import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")
import dgl  # noqa: E402
from dgl.nn import GATConv, SAGEConv  # noqa: E402

from ttgnn.layers import SparseGraph, TensorGATConv, TensorSAGEConv, aggregate, edge_softmax  # noqa: E402

DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                    reason="no CUDA device"))]
TOL = dict(rtol=1e-5, atol=1e-5)


def random_graph(num_nodes=60, num_edges=300, seed=0, self_loops=True, isolated=()):
    """A directed multigraph-free random graph; nodes in ``isolated`` get no in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    graph = dgl.to_simple(dgl.graph((src, dst), num_nodes=num_nodes))
    if self_loops:
        graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    if isolated:
        keep = ~torch.isin(graph.edges()[1], torch.tensor(list(isolated)))
        graph = dgl.graph((graph.edges()[0][keep], graph.edges()[1][keep]), num_nodes=num_nodes)
    return graph


def sampled_blocks(graph, seeds, fanouts):
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DataLoader(graph, seeds, sampler, batch_size=len(seeds), shuffle=False)
    return next(iter(loader))


# ---------------------------------------------------------------------- SparseGraph
def test_sparse_graph_matches_dgl_structure():
    graph = random_graph()
    sg = SparseGraph.from_dgl(graph)
    src, dst = graph.edges()
    assert (sg.num_src, sg.num_dst, sg.num_edges) == (60, 60, graph.num_edges())
    assert torch.equal(sg.in_degrees(), graph.in_degrees())
    # the same edge set, as (src, dst) pairs, through the CSR and through the transpose
    edges = set(zip(src.tolist(), dst.tolist()))
    assert set(zip(sg.indices.tolist(), sg.dst.tolist())) == edges
    t_dst = sg.t_indices
    t_src = torch.repeat_interleave(torch.arange(sg.num_src), sg.t_indptr[1:] - sg.t_indptr[:-1])
    assert set(zip(t_src.tolist(), t_dst.tolist())) == edges
    assert torch.equal(sg.indices[sg.t_perm], t_src) and torch.equal(sg.dst[sg.t_perm], t_dst)
    torch.testing.assert_close(sg.mean_weight, 1.0 / sg.in_degrees()[sg.dst].float())


def test_sparse_graph_of_a_block():
    graph = random_graph(80, 500)
    input_nodes, output_nodes, blocks = sampled_blocks(graph, torch.tensor([1, 4, 9]), [3, 2])
    sg = SparseGraph.from_dgl(blocks[1])
    assert (sg.num_src, sg.num_dst) == (blocks[1].num_src_nodes(), blocks[1].num_dst_nodes())
    assert torch.equal(sg.in_degrees(), blocks[1].in_degrees())
    assert int(sg.in_degrees().max()) <= 2


def test_sparse_graph_rejects_bad_structure():
    with pytest.raises(ValueError, match=r"source indices must lie in \[0, 3\)"):
        SparseGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 3]), 3)
    with pytest.raises(ValueError, match="indptr must run from 0 to E=2"):
        SparseGraph(torch.tensor([0, 1, 3]), torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match="num_src"):
        SparseGraph(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1]), 2)
    with pytest.raises(ValueError, match="non-decreasing"):
        SparseGraph(torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1]), 3)
    with pytest.raises(TypeError, match="int64"):
        SparseGraph(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32), 1)
    with pytest.raises(TypeError, match=r"^indptr and indices must be int64, got torch.int64 and torch.int32$"):
        SparseGraph(torch.tensor([0, 1]), torch.tensor([0], dtype=torch.int32), 1)
    for indptr, indices in ((torch.tensor([[0, 1]]), torch.tensor([0])), (torch.tensor([0, 1]), torch.tensor([[0]])),
                            (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))):
        with pytest.raises(ValueError, match=rf"^indptr must be \(num_dst \+ 1,\) and indices \(E,\), got shapes "
                                             rf"{re.escape(str(tuple(indptr.shape)))} and {re.escape(str(tuple(indices.shape)))}$"):
            SparseGraph(indptr, indices, 2)
    with pytest.raises(ValueError, match=r"^indptr must run from 0 to E=2, got 1 \.\. 2$"):
        SparseGraph(torch.tensor([1, 1, 2]), torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match=r"^indptr must run from 0 to E=2, got 0 \.\. 3$"):
        SparseGraph(torch.tensor([0, 1, 3]), torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match=r"^num_src \(2\) must be >= num_dst \(3\): the destination nodes are the "
                                         r"first source nodes$"):
        SparseGraph(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1]), 2)
    with pytest.raises(ValueError, match=r"^indptr must be non-decreasing$"):
        SparseGraph(torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1]), 3)


def test_a_graph_without_destination_nodes_is_valid():
    graph = SparseGraph(torch.tensor([0]), torch.zeros(0, dtype=torch.long), 4)
    assert (graph.num_dst, graph.num_src, graph.num_edges) == (0, 4, 0)
    assert aggregate(graph, None, torch.randn(4, 3)).shape == (0, 3)


def test_to_same_device_is_identity_and_copies_carry_every_index():
    sg = SparseGraph.from_dgl(random_graph())
    assert sg.to("cpu") is sg
    copy = sg._map(lambda t: t.clone())
    for key in ("indptr", "indices", "dst", "t_indptr", "t_indices", "t_perm", "mean_weight"):
        assert torch.equal(getattr(copy, key), getattr(sg, key)) and getattr(copy, key) is not getattr(sg, key)
    assert (copy.num_src, copy.num_dst) == (sg.num_src, sg.num_dst)


@pytest.mark.parametrize("p", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("block", [False, True])
def test_edge_subgraph_equals_the_graph_built_from_the_kept_edges(p, block):
    graph = random_graph(50, 300, seed=3)
    if block:
        graph = sampled_blocks(graph, torch.tensor([0, 7, 11, 30]), [4, 6])[2][0]
    sg = SparseGraph.from_dgl(graph)
    keep = torch.rand(sg.num_edges, generator=torch.Generator().manual_seed(1)) >= p
    sub = sg.edge_subgraph(keep)
    assert (sub.num_src, sub.num_dst, sub.num_edges) == (sg.num_src, sg.num_dst, int(keep.sum()))
    # the kept edges, in their order, and every derived index as a fresh build would make it
    assert torch.equal(sub.indices, sg.indices[keep]) and torch.equal(sub.dst, sg.dst[keep])
    built = SparseGraph(sub.indptr, sub.indices, sg.num_src)
    for key in ("indptr", "indices", "dst", "t_indptr", "t_indices", "t_perm", "mean_weight"):
        # torch.equal does not compare dtypes: an index held as float would pass it
        assert torch.equal(getattr(sub, key), getattr(built, key)) and getattr(sub, key).dtype == getattr(built, key).dtype, key
    with pytest.raises(ValueError, match="keep must be a bool tensor"):
        sg.edge_subgraph(keep.float())


def test_csr_of_one_head_stores_contiguous_values():
    # A head's column of an (E, H) weight is strided; torch's CUDA sparse-dense product reads the
    # values buffer as if it were dense (seen on an H100, 2026-11-24: errors of order 1), so the
    # CSR matrices must hold a contiguous copy.
    sg = SparseGraph.from_dgl(random_graph(20, 60))
    weight = torch.rand(sg.num_edges, 3, dtype=torch.float64)
    for head in range(3):
        for matrix, want in ((sg.csr(weight[:, head]), weight[:, head]),
                             (sg.csr_t(weight[:, head]), weight[:, head][sg.t_perm])):
            assert matrix.values().is_contiguous()
            assert torch.equal(matrix.values(), want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs an accelerator")
def test_pinned_copy_to_cuda():
    sg = SparseGraph.from_dgl(random_graph()).pin_memory()
    assert sg.is_pinned()
    on_gpu = sg.to("cuda", non_blocking=True)
    assert on_gpu.device.type == "cuda" and torch.equal(on_gpu.indices.cpu(), sg.indices)


# ---------------------------------------------------------------------- aggregate, edge softmax
@pytest.mark.parametrize("device", DEVICES)
def test_aggregate_gradients_float64(device):
    graph = SparseGraph.from_dgl(random_graph(20, 60, isolated=(3, 7))).to(device)
    gen = torch.Generator().manual_seed(1)
    weight = torch.rand(graph.num_edges, 2, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    x = torch.randn(20, 2, 3, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda w, v: aggregate(graph, w, v), (weight, x))
    out = aggregate(graph, weight, x)
    want = torch.zeros(20, 2, 3, dtype=torch.float64, device=device).index_add_(
        0, graph.dst, weight.unsqueeze(-1) * x[graph.indices])
    torch.testing.assert_close(out, want)
    assert torch.equal(out[3], torch.zeros_like(out[3]))  # no in-edges: zero


def test_aggregate_mean_and_errors():
    graph = SparseGraph.from_dgl(random_graph(30, 90, isolated=(0,)))
    x = torch.randn(30, 5)
    out = aggregate(graph, None, x)
    want = torch.stack([x[graph.indices[graph.dst == v]].mean(0) if (graph.dst == v).any() else torch.zeros(5)
                        for v in range(30)])
    torch.testing.assert_close(out, want)
    with pytest.raises(ValueError, match=r"^x must have one row per source node \(30\), got 10$"):
        aggregate(graph, None, x[:10])
    with pytest.raises(ValueError, match=rf"^weight must be \(E, H\) = \({graph.num_edges}, 1\), got \(3, 1\)$"):
        aggregate(graph, torch.ones(3, 1), x)
    with pytest.raises(ValueError, match="is on meta but the graph is on cpu"):
        aggregate(graph, None, torch.empty(30, 5, device="meta"))


def test_aggregate_on_a_graph_without_edges():
    graph = SparseGraph(torch.zeros(5, dtype=torch.long), torch.zeros(0, dtype=torch.long), 6)
    x = torch.randn(6, 2, 3, requires_grad=True)
    weight = torch.zeros(0, 2, requires_grad=True)
    out = aggregate(graph, weight, x)
    assert out.shape == (4, 2, 3) and not out.any()
    out.sum().backward()
    assert not x.grad.any() and weight.grad.shape == (0, 2)


def test_aggregate_gives_the_weights_their_gradient_when_only_they_need_one():
    graph = SparseGraph.from_dgl(random_graph(20, 60, isolated=(3,)))
    gen = torch.Generator().manual_seed(2)
    weight = torch.rand(graph.num_edges, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    x = torch.randn(20, 2, 3, generator=gen, dtype=torch.float64)  # a constant: no gradient wanted
    grad_out = torch.randn(20, 2, 3, generator=gen, dtype=torch.float64)
    (aggregate(graph, weight, x) * grad_out).sum().backward()
    want = (grad_out[graph.dst] * x[graph.indices]).sum(-1)  # <grad_out[dst_e, h], x[src_e, h]>
    torch.testing.assert_close(weight.grad, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("multigraph", [False, True])
def test_aggregate_second_derivatives_float64(device, multigraph):
    # both inputs differentiated twice, also when the features are computed from the weights
    gen = torch.Generator().manual_seed(3)
    if multigraph:  # repeated edges: a CSR built from them would merge their values
        src, dst = torch.randint(0, 20, (80,), generator=gen), torch.randint(0, 20, (80,), generator=gen)
        graph = SparseGraph.from_dgl(dgl.graph((src, dst), num_nodes=20)).to(device)
        assert len(set(zip(src.tolist(), dst.tolist()))) < 80
    else:
        graph = SparseGraph.from_dgl(random_graph(20, 60, isolated=(3,))).to(device)
    weight = torch.rand(graph.num_edges, 2, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    x = torch.randn(20, 2, 3, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda w, v: aggregate(graph, w, v), (weight, x))
    assert torch.autograd.gradgradcheck(lambda w, v: aggregate(graph, w, v * w.sum()), (weight, x))
    assert torch.autograd.gradgradcheck(lambda v: aggregate(graph, None, v), (x[:, 0].detach().requires_grad_(),))


LAYERS = pytest.mark.parametrize("make", [lambda: TensorSAGEConv(6, 4), lambda: TensorSAGEConv(3, 5),
                                          lambda: TensorGATConv(6, 3, 2, residual=True)],
                                 ids=["sage", "sage-wide", "gat"])


@LAYERS
def test_layers_under_torch_func_transforms(make):
    # torch.func.grad, jvp and vmap over whole layers give what autograd and a loop give
    graph = SparseGraph.from_dgl(random_graph(20, 60, isolated=(3,)))
    torch.manual_seed(0)
    conv = make().double()
    h = torch.randn(20, conv.in_feats, dtype=torch.float64)
    params = {name: p.detach() for name, p in conv.named_parameters()}

    def loss(p, h):
        return torch.func.functional_call(conv, p, (graph, h)).pow(2).sum()

    got_params, got_h = torch.func.grad(loss, argnums=(0, 1))(params, h)
    leaf = h.clone().requires_grad_()
    conv(graph, leaf).pow(2).sum().backward()
    torch.testing.assert_close(got_h, leaf.grad, rtol=1e-10, atol=1e-12)
    for name, p in conv.named_parameters():
        torch.testing.assert_close(got_params[name], p.grad, rtol=1e-10, atol=1e-12)
        assert p.grad.abs().sum() > 0
    direction = torch.randn_like(h)
    out, tangent = torch.func.jvp(lambda v: conv(graph, v), (h,), (direction,))
    jacobian = torch.autograd.functional.jacobian(lambda v: conv(graph, v), h).reshape(out.numel(), h.numel())
    torch.testing.assert_close(tangent.reshape(-1), jacobian @ direction.reshape(-1), rtol=1e-10, atol=1e-12)
    batch = torch.randn(3, 20, conv.in_feats, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(lambda v: conv(graph, v))(batch),
                               torch.stack([conv(graph, v) for v in batch]), rtol=1e-10, atol=1e-12)


@LAYERS
def test_layers_compile_into_one_graph_also_under_torch_func(make):
    # the CSR path broke torch.compile's graph, and a compiled torch.func.grad over a layer failed inside dynamo
    graph = SparseGraph.from_dgl(random_graph(20, 60, isolated=(3,)))
    torch.manual_seed(0)
    conv = make().double()
    h = torch.randn(20, conv.in_feats, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda v: conv(graph, v), backend="eager", fullgraph=True)
    out = compiled(h)
    want = conv(graph, h)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12)
    inputs = [h, *conv.parameters()]
    for got, expected in zip(torch.autograd.grad(out.square().sum(), inputs),
                             torch.autograd.grad(want.square().sum(), inputs)):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    params = {name: p.detach() for name, p in conv.named_parameters()}

    def loss(p, v):
        return torch.func.functional_call(conv, p, (graph, v)).pow(2).sum()

    got = torch.compile(torch.func.grad(loss), backend="eager", fullgraph=True)(params, h.detach())
    for name, expected in torch.func.grad(loss)(params, h.detach()).items():
        torch.testing.assert_close(got[name], expected, rtol=1e-10, atol=1e-12)


def test_edge_softmax_of_very_negative_scores_is_finite():
    # exp() of scores far below 0 underflows unless the maximum subtracted is the in-edges' own
    graph = SparseGraph.from_dgl(random_graph(20, 80, isolated=(5,)))
    scores = torch.full((graph.num_edges, 2), -1000.0)
    scores[:, 1] -= torch.arange(graph.num_edges, dtype=torch.float32) % 3
    out = edge_softmax(graph, scores)
    assert torch.isfinite(out).all()
    totals = torch.zeros(graph.num_dst, 2).index_add_(0, graph.dst, out)
    has_edges = torch.bincount(graph.dst, minlength=graph.num_dst) > 0
    torch.testing.assert_close(totals[has_edges], torch.ones(int(has_edges.sum()), 2))


def test_edge_softmax_equals_dgl():
    from dgl.ops import edge_softmax as dgl_edge_softmax

    graph = random_graph(40, 200, isolated=(5,))
    sg = SparseGraph.from_dgl(graph)
    scores = torch.randn(sg.num_edges, 3) * 30  # large scores: the maximum must be subtracted
    ours = edge_softmax(sg, scores)
    # DGL's edge ids are in its own order: compare per (src, dst) pair
    theirs = dgl_edge_softmax(graph, scores[_dgl_to_ours(graph, sg)])
    torch.testing.assert_close(ours[_dgl_to_ours(graph, sg)], theirs, **TOL)
    sums = torch.zeros(40, 3).index_add_(0, sg.dst, ours)
    has_edges = sg.in_degrees() > 0
    torch.testing.assert_close(sums[has_edges], torch.ones(int(has_edges.sum()), 3))


def _dgl_to_ours(graph, sg):
    """For each DGL edge id, the position of the same (src, dst) edge in ``sg``."""
    key = sg.dst * sg.num_src + sg.indices
    order = torch.argsort(key)
    src, dst = graph.edges()
    return order[torch.searchsorted(key[order], dst * sg.num_src + src)]


# ---------------------------------------------------------------------- convolutions = DGL's
def _compare(dgl_conv, tensor_conv, graph, num_src, in_feats, reshape=lambda t: t):
    tensor_conv.load_state_dict(dgl_conv.state_dict())  # same names and shapes
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(num_src, in_feats, generator=gen)
    h_dgl, h_ours = h.clone().requires_grad_(), h.clone().requires_grad_()
    out_dgl = reshape(dgl_conv(graph, h_dgl))
    out_ours = reshape(tensor_conv(SparseGraph.from_dgl(graph), h_ours))
    torch.testing.assert_close(out_ours, out_dgl, **TOL)
    weights = torch.randn(out_dgl.shape, generator=gen)
    (out_dgl * weights).sum().backward()
    (out_ours * weights).sum().backward()
    torch.testing.assert_close(h_ours.grad, h_dgl.grad, **TOL)
    grads_dgl = {name: p.grad for name, p in dgl_conv.named_parameters()}
    for name, p in tensor_conv.named_parameters():
        torch.testing.assert_close(p.grad, grads_dgl[name], **TOL, msg=name)
    assert h_ours.grad.abs().max() > 0


@pytest.mark.parametrize("in_feats,out_feats,bias", [(16, 8, True), (8, 16, True), (16, 8, False)])  # projection before / after the mean
@pytest.mark.parametrize("kind", ["full", "block"])
def test_sage_equals_dgl(in_feats, out_feats, bias, kind):
    torch.manual_seed(0)
    graph = random_graph(70, 400, isolated=(2,))
    if kind == "block":
        _, _, blocks = sampled_blocks(graph, torch.tensor([0, 2, 5, 33, 69]), [4])
        graph = blocks[0]
    num_src = graph.num_src_nodes()
    torch.manual_seed(1)
    dgl_conv = SAGEConv(in_feats, out_feats, "mean", bias=bias)
    torch.manual_seed(1)
    ours = TensorSAGEConv(in_feats, out_feats, bias=bias)
    assert list(dgl_conv.state_dict()) == list(ours.state_dict())
    for (name, a), (name_b, b) in zip(dgl_conv.state_dict().items(), ours.state_dict().items()):
        assert name == name_b and torch.equal(a, b), name  # the same initialisation from the same seed
    _compare(dgl_conv, ours, graph, num_src, in_feats)


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("residual,in_feats,bias", [(False, 10, True), (True, 10, True), (True, 12, True),
                                                    (True, 10, False), (False, 10, False)])  # linear / identity residual
@pytest.mark.parametrize("kind", ["full", "block"])
def test_gat_equals_dgl(heads, residual, in_feats, bias, kind):
    graph = random_graph(70, 400, isolated=(4,))
    if kind == "block":
        _, _, blocks = sampled_blocks(graph, torch.tensor([1, 4, 8, 50]), [5])
        graph = blocks[0]
    out_feats = 12 // heads
    torch.manual_seed(2)
    dgl_conv = GATConv(in_feats, out_feats, heads, residual=residual, allow_zero_in_degree=True, bias=bias)
    torch.manual_seed(2)
    ours = TensorGATConv(in_feats, out_feats, heads, residual=residual, bias=bias)
    assert list(dgl_conv.state_dict()) == list(ours.state_dict())
    for name, value in dgl_conv.state_dict().items():
        assert torch.equal(value, ours.state_dict()[name]), name
    with torch.no_grad():  # a non-zero bias, so that its placement is tested
        if dgl_conv.bias is not None:
            dgl_conv.bias.normal_()
        elif isinstance(dgl_conv.res_fc, torch.nn.Linear) and dgl_conv.res_fc.bias is not None:
            dgl_conv.res_fc.bias.normal_()
    _compare(dgl_conv, ours, graph, graph.num_src_nodes(), in_feats)


def test_gat_attention_dropout_is_applied_in_training_only():
    graph = SparseGraph.from_dgl(random_graph())
    conv = TensorGATConv(8, 4, 2, attn_drop=0.5)
    h = torch.randn(60, 8)
    conv.eval()
    torch.testing.assert_close(conv(graph, h), conv(graph, h))
    conv.train()
    torch.manual_seed(0)
    first = conv(graph, h)
    torch.manual_seed(1)
    assert not torch.allclose(first, conv(graph, h))


def test_gat_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_heads and out_feats must be >= 1, got 0 and 4"):
        TensorGATConv(8, 4, 0)
    one = TensorGATConv(8, 1, 2)  # one channel per head is allowed
    graph = random_graph()
    assert one(SparseGraph.from_dgl(graph), torch.randn(graph.num_nodes(), 8)).shape == (graph.num_nodes(), 2, 1)
    assert repr(one) == "TensorGATConv(\n  8, 1, num_heads=2\n  (fc): Linear(in_features=8, out_features=2, bias=False)\n" \
        "  (feat_drop): Dropout(p=0.0, inplace=False)\n  (attn_drop): Dropout(p=0.0, inplace=False)\n)"


def test_a_graph_of_one_edge_and_sources_without_edges_after_it():
    # one edge 0 -> 1 among four sources: the sparse matrices keep all four columns, and a single
    # stored entry is summed (only an empty matrix is the zero shortcut)
    graph = SparseGraph(torch.tensor([0, 0, 1]), torch.tensor([0]), 4)
    assert graph.t_indptr.tolist() == [0, 1, 1, 1, 1]
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.full((1, 2), 0.5, dtype=torch.float64, requires_grad=True)
    out = aggregate(graph, weight, x)
    torch.testing.assert_close(out, torch.stack([torch.zeros(2, 3, dtype=torch.float64), 0.5 * x[0].detach()]))
    assert torch.autograd.gradcheck(lambda w, v: aggregate(graph, w, v), (weight, x))
    torch.testing.assert_close(aggregate(graph, None, x[:, 0]), torch.stack([torch.zeros(3, dtype=torch.float64),
                                                                             x[0, 0].detach()]))


def test_a_graph_of_several_edge_types_is_refused_by_name():
    hetero = dgl.heterograph({("a", "to", "b"): ([0], [0]), ("b", "to", "a"): ([0], [0])})
    with pytest.raises(ValueError, match=r"^expected a graph with one edge type, got \[\('a', 'to', 'b'\), "
                                         r"\('b', 'to', 'a'\)\]$"):
        SparseGraph.from_dgl(hetero)


def test_sage_in_float64_equals_dgl_to_float64_rounding():
    # the mean's 1/in-degree was kept in float32 and cast: a float64 layer was 1e-8 from DGL's
    torch.manual_seed(0)
    graph = random_graph(70, 400, isolated=(2,))
    dgl_conv = SAGEConv(8, 8, "mean").double()
    ours = TensorSAGEConv(8, 8).double()
    ours.load_state_dict(dgl_conv.state_dict())
    h = torch.randn(graph.num_src_nodes(), 8, dtype=torch.float64)
    torch.testing.assert_close(ours(SparseGraph.from_dgl(graph), h), dgl_conv(graph, h), rtol=1e-13, atol=1e-13)


def test_layer_wise_inference_of_a_float64_model():
    # its output buffer was float32 whatever the model's dtype: index_put refused the float64 rows
    from ttgnn.models import GraphSAGE

    graph = random_graph(30, 120, isolated=(3,))
    torch.manual_seed(0)
    model = GraphSAGE(6, 8, 3, num_layers=2).double().eval()
    h = torch.randn(30, 6, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model.inference(graph, h, batch_size=7), model(graph, h), rtol=1e-12, atol=1e-12)
