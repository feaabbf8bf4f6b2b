"""Tests of ttgnn.synthetic: the streaming nested-community generator."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from ttgnn.partition import graph as graph_module
from ttgnn.synthetic import default_branching, nested_communities


def test_graph_is_canonical_and_has_the_asked_degree():
    ds = nested_communities(20_000, avg_degree=8, branching=(8, 10), seed=1)
    indptr, indices = ds.csr()
    assert indptr.dtype == np.int64 and indices.dtype == np.int32 and ds.edge_index is None
    matrix = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(20_000, 20_000))
    assert (matrix != matrix.T).nnz == 0  # symmetric
    assert matrix.diagonal().sum() == 0  # no self-loops
    assert matrix.max() == 1  # no duplicates
    for row in (0, 123, 19_999):  # sorted rows
        cols = indices[indptr[row]:indptr[row + 1]]
        assert np.all(np.diff(cols) > 0)
    assert 7.0 < indices.shape[0] / 20_000 <= 8.0  # duplicates at hubs of small leaf blocks cost a little
    assert ds.num_edges == indices.shape[0] // 2


def test_degrees_follow_a_power_law_and_uniform_weights_do_not():
    heavy = np.diff(nested_communities(50_000, 10, branching=(5, 10), exponent=2.5).csr().indptr)
    flat = np.diff(nested_communities(50_000, 10, branching=(5, 10), exponent=None).csr().indptr)
    assert heavy.max() > 10 * flat.max()
    assert np.percentile(heavy, 50) < np.percentile(flat, 50)


def test_communities_are_planted_and_labels_follow_them():
    ds = nested_communities(30_000, 10, branching=(6, 5), mixing=(0.3, 0.6), label_noise=0.0, seed=2)
    indptr, indices = ds.csr()
    labels = ds.labels.numpy()
    rows = np.repeat(np.arange(30_000), np.diff(indptr))
    same = np.mean(labels[rows] == labels[indices])
    assert same > 0.85  # 90% of edges stay in the top community; random: 1/6
    assert ds.num_classes == 6 and set(np.unique(labels)) == set(range(6))


def test_ids_are_shuffled():
    ds = nested_communities(10_000, 10, branching=(10, 10), label_noise=0.0)
    labels = ds.labels.numpy()
    # Planted positions are contiguous; node ids must not be.
    assert np.mean(labels[1:] == labels[:-1]) < 0.3


def test_same_seed_same_graph_and_chunks_do_not_change_it(monkeypatch):
    first = nested_communities(5_000, 6, branching=(4, 4), seed=3)
    second = nested_communities(5_000, 6, branching=(4, 4), seed=3)
    other = nested_communities(5_000, 6, branching=(4, 4), seed=4)
    np.testing.assert_array_equal(first.csr().indices, second.csr().indices)
    assert torch.equal(first.labels, second.labels)
    assert not np.array_equal(first.csr().indices[:100], other.csr().indices[:100])
    monkeypatch.setattr(graph_module, "_EDGE_CHUNK", 1000)  # many CSR blocks: same result
    small_blocks = nested_communities(5_000, 6, branching=(4, 4), seed=3)
    np.testing.assert_array_equal(first.csr().indptr, small_blocks.csr().indptr)
    np.testing.assert_array_equal(first.csr().indices, small_blocks.csr().indices)


def test_splits_are_disjoint_and_sized():
    ds = nested_communities(4_000, 6, branching=(4, 4), split_sizes=(1000, 300, 200))
    sizes = [ds.split[k].numel() for k in ("train", "valid", "test")]
    assert sizes == [1000, 300, 200]
    together = torch.cat([ds.split[k] for k in ("train", "valid", "test")])
    assert together.unique().numel() == 1500 and int(together.max()) < 4000


def test_trains_through_dgl_sampling():
    dgl = pytest.importorskip("dgl")
    ds = nested_communities(3_000, 8, branching=(4, 5), split_sizes=(512, 100, 100))
    graph = ds.dgl_graph(self_loops=True, edge_ids=False)
    assert graph.num_edges() == ds.csr().num_entries + 3_000
    sampler = dgl.dataloading.NeighborSampler([5, 5])
    loader = dgl.dataloading.DataLoader(graph, ds.split["train"], sampler, batch_size=256)
    _, output_nodes, blocks = next(iter(loader))
    conv = dgl.nn.SAGEConv(4, 3, "mean")
    out = conv(blocks[0], torch.randn(blocks[0].num_src_nodes(), 4))
    assert out.shape == (blocks[0].num_dst_nodes(), 3) and torch.isfinite(out).all()


def test_default_branching():
    assert default_branching(111_059_956) == (236, 236)
    assert default_branching(1000) == (2, 2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_nodes=1), "num_nodes"), (dict(num_nodes=100, avg_degree=0), "avg_degree"),
    (dict(num_nodes=100, branching=(20, 20)), "branching"), (dict(num_nodes=100, mixing=(0.8, 0.5)), "mixing"),
    (dict(num_nodes=100, branching=(5, 5), mixing=(0.5,)), "mixing"), (dict(num_nodes=100, exponent=1.5), "exponent"),
    (dict(num_nodes=100, label_noise=2.0), "label_noise"), (dict(num_nodes=100, split_sizes=(0, 1, 1)), "split_sizes"),
    (dict(num_nodes=100, split_sizes=(90, 10, 10)), "split_sizes"),
    (dict(num_nodes=100, seed=-1), "seed must be an int >= 0, got -1"),  # was numpy's "expected non-negative integer"
    (dict(num_nodes=100, seed=1.5), "seed must be an int >= 0, got 1.5"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nested_communities(**kwargs)
