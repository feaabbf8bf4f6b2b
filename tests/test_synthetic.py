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
    # (the exact messages of the other checks: test_bad_arguments_have_exact_messages)
    (dict(num_nodes=100, branching=(5, 5), mixing=(0.5,)), "mixing"), (dict(num_nodes=100, exponent=1.5), "exponent"),
    (dict(num_nodes=100, label_noise=2.0), "label_noise"), (dict(num_nodes=100, split_sizes=(90, 10, 10)), "split_sizes"),
    (dict(num_nodes=100, seed=-1), "seed must be an int >= 0, got -1"),  # was numpy's "expected non-negative integer"
    (dict(num_nodes=100, seed=1.5), "seed must be an int >= 0, got 1.5"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nested_communities(**kwargs)


def _spy_chunks(monkeypatch):
    """Record what nested_communities hands to csr_from_edge_chunks: its arguments and the edges
    of the first pass over the chunks."""
    seen = {}
    real = graph_module.csr_from_edge_chunks

    def spy(chunks, num_nodes, num_chunks=None, progress=False):
        pairs = list(chunks())
        seen.update(num_nodes=num_nodes, num_chunks=num_chunks, progress=progress, chunks=len(pairs),
                    src=np.concatenate([s for s, _ in pairs]), dst=np.concatenate([d for _, d in pairs]))
        return real(chunks, num_nodes, num_chunks=num_chunks, progress=progress)

    monkeypatch.setattr(graph_module, "csr_from_edge_chunks", spy)
    return seen


def test_edges_are_drawn_in_the_chunks_announced(monkeypatch):
    from ttgnn import synthetic

    monkeypatch.setattr(synthetic, "_CHUNK_EDGES", 1000)
    seen = _spy_chunks(monkeypatch)
    nested_communities(1_000, avg_degree=5.1, branching=(4, 5), seed=1)  # round(1000 * 5.1 / 2) = 2550 edges
    assert seen["num_chunks"] == seen["chunks"] == 3 and seen["progress"] is False
    assert seen["src"].shape == seen["dst"].shape == (2550,)
    assert seen["src"].dtype == np.int32 and 0 <= seen["src"].min() and seen["dst"].max() < 1_000


def test_both_ends_of_an_edge_are_drawn_by_weight(monkeypatch):
    seen = _spy_chunks(monkeypatch)
    nested_communities(20_000, avg_degree=10, branching=(2, 2), mixing=(0.0, 0.0), exponent=2.5, seed=4)
    # 100,000 edges: a uniform end puts about 5 (at most ~20) on any node; the hubs of the four
    # leaf blocks (offset 0, weight 1 against (j + 1)^(-2/3)) take about 1% of each end.
    for ends in (seen["src"], seen["dst"]):
        assert np.bincount(ends, minlength=20_000).max() > 500


def test_every_leaf_block_and_every_node_in_it_is_an_end():
    # Uniform weights, leaves of 2 nodes, 50 edge ends per node: a node with no edge (probability
    # e^-50) means some leaf or offset is never drawn.
    ds = nested_communities(200, avg_degree=50, branching=(4, 25), mixing=(0.0, 0.0), exponent=None, seed=5)
    assert np.diff(ds.csr().indptr).min() > 0
    # Leaf blocks as classes (one sub-community each, no noise): every class as well connected.
    ds = nested_communities(8_000, avg_degree=20, branching=(8, 1), mixing=(0.0, 0.0), exponent=None,
                            label_noise=0.0, seed=6)
    degree = np.diff(ds.csr().indptr)
    per_class = np.array([degree[ds.labels.numpy() == c].mean() for c in range(8)])
    assert np.all(np.abs(per_class / degree.mean() - 1) < 0.1)


def test_mixing_sends_each_share_to_its_level():
    # Top level 0.3, the rest anywhere: an edge stays in its top community (of 6) with probability
    # 0.3 + 0.7 / 6.
    ds = nested_communities(30_000, 10, branching=(6, 5), mixing=(0.3, 0.0), exponent=None, label_noise=0.0, seed=2)
    indptr, indices = ds.csr()
    rows = np.repeat(np.arange(30_000), np.diff(indptr))
    labels = ds.labels.numpy()
    assert abs(np.mean(labels[rows] == labels[indices]) - (0.3 + 0.7 / 6)) < 0.02


def test_edges_inside_a_community_spread_over_its_leaves():
    # Every edge ends in the start's top community (of 2), at a uniform one of its 4 leaf blocks:
    # degrees are about Poisson(20) (coefficient of variation ~0.22), not piled on one leaf.
    ds = nested_communities(8_000, avg_degree=20, branching=(2, 4), mixing=(1.0, 0.0), exponent=None, seed=7)
    degree = np.diff(ds.csr().indptr)
    assert degree.std() / degree.mean() < 0.35


@pytest.mark.parametrize("noise,same", [(0.0, 1.0), (0.5, 0.25 + 0.5 / 4 + 0.25 / 4), (1.0, 0.25)])
def test_label_noise_redraws_a_share_of_labels_uniformly(noise, same):
    # All edges inside their top community (4, as classes): the endpoints' labels agree with
    # probability (1 - p)^2 + (1 - (1 - p)^2) / 4.
    ds = nested_communities(8_000, avg_degree=20, branching=(4, 2), mixing=(1.0, 0.0), exponent=None,
                            label_noise=noise, seed=8)
    indptr, indices = ds.csr()
    labels = ds.labels.numpy()
    rows = np.repeat(np.arange(8_000), np.diff(indptr))
    assert abs(np.mean(labels[rows] == labels[indices]) - same) < 0.015
    counts = np.bincount(labels, minlength=4)
    assert counts.min() > 0.9 * 2_000  # every class, class 0 included, about a quarter


def test_quantile_table_inverts_the_weights_cdf():
    from ttgnn.synthetic import _quantile_table

    assert _quantile_table(None) is None
    for exponent in (2.5, 3.0, 5.0):
        table = _quantile_table(exponent)
        assert table.dtype == np.float32 and table.shape == (2**20,)
        one = 1.0 - 1.0 / (exponent - 1.0)
        # The offsets' CDF on a block of 10^6 nodes, weight (x + 1)^(-beta), at each entry: the
        # midpoints (k + 1/2) / 2^20, to float32's precision.
        x = table.astype(np.float64) * 1e6
        cdf = ((x + 1.0) ** one - 1.0) / ((1e6 + 1.0) ** one - 1.0)
        midpoints = (np.arange(2**20) + 0.5) / 2**20
        np.testing.assert_allclose(cdf, midpoints, rtol=0, atol=2e-7)


def test_documented_defaults():
    plain = nested_communities(3_000)
    explicit = nested_communities(3_000, avg_degree=10.0, branching=default_branching(3_000, 2), mixing=(0.3, 0.5),
                                  exponent=2.5, num_classes=2, label_noise=0.1, split_sizes=(1500, 750, 750), seed=0)
    np.testing.assert_array_equal(plain.csr().indices, explicit.csr().indices)
    assert torch.equal(plain.labels, explicit.labels)
    assert all(torch.equal(plain.split[k], explicit.split[k]) for k in ("train", "valid", "test"))


def test_default_branching_follows_the_graph_and_levels():
    assert nested_communities(40_000, avg_degree=2).num_classes == default_branching(40_000, 2)[0] == 4
    three = nested_communities(40_000, avg_degree=2, mixing=(0.2, 0.2, 0.2))  # three levels of 3
    assert three.num_classes == 3 and default_branching(40_000, 3) == (3, 3, 3)
    assert default_branching(100, 2, leaf_size=1) == (10, 10) and default_branching(100, 2, leaf_size=0) == (10, 10)


def test_default_splits_are_half_and_quarters():
    ds = nested_communities(23, avg_degree=2, branching=(2, 2))
    assert [ds.split[k].numel() for k in ("train", "valid", "test")] == [11, 5, 7]


def test_progress_logs_each_phase(monkeypatch, caplog):
    seen = _spy_chunks(monkeypatch)
    caplog.set_level("INFO", logger="ttgnn.synthetic")
    ds = nested_communities(5_000, 6, branching=(4, 4), seed=3, progress=True)
    assert seen["progress"] is True
    entries = ds.csr().num_entries
    assert caplog.messages == ["drawing 15000 edges of 5000 nodes in 1 chunks (branching [4, 4])",
                               f"graph ready: 5000 nodes, {entries} symmetric entries (mean degree {entries / 5000:.2f})"]
    caplog.clear()
    nested_communities(5_000, 6, branching=(4, 4), seed=3)
    assert caplog.text == "" and seen["progress"] is False


@pytest.mark.parametrize("kwargs", [dict(num_nodes=2, avg_degree=1, branching=(1, 1)),
                                    dict(num_nodes=16, avg_degree=2, branching=(4, 4)),  # one node per leaf
                                    dict(num_nodes=100, avg_degree=0.5),
                                    dict(num_nodes=100, branching=(1, 5), mixing=(0.0, 0.0)),
                                    dict(num_nodes=100, mixing=(0.5, 0.5)),
                                    dict(num_nodes=100, exponent=2.01),
                                    dict(num_nodes=100, num_classes=1),
                                    dict(num_nodes=100, label_noise=1.0),
                                    dict(num_nodes=100, split_sizes=(1, 0, 0))])
def test_edge_values_are_accepted(kwargs):
    ds = nested_communities(**kwargs)
    assert ds.num_nodes == kwargs["num_nodes"]


@pytest.mark.parametrize("kwargs,message", [
    (dict(num_nodes=1), "num_nodes must be an int in [2, 2**31 - 1), got 1"),
    (dict(num_nodes=2**31 - 1), "num_nodes must be an int in [2, 2**31 - 1), got 2147483647"),
    (dict(num_nodes=100, avg_degree=0), "avg_degree must be a number in (0, 100), got 0"),
    (dict(num_nodes=100, avg_degree=100), "avg_degree must be a number in (0, 100), got 100"),
    (dict(num_nodes=100, branching=(20, 20)),
     "branching must be factors >= 1 whose product is at most num_nodes=100, got [20, 20]"),
    (dict(num_nodes=100, branching=(0, 5)),
     "branching must be factors >= 1 whose product is at most num_nodes=100, got [0, 5]"),
    (dict(num_nodes=100, mixing=(0.8, 0.5)),
     "mixing must be 2 probabilities >= 0 (one per level) summing to <= 1, got [0.8, 0.5]"),
    (dict(num_nodes=100, mixing=(-0.1, 0.5)),
     "mixing must be 2 probabilities >= 0 (one per level) summing to <= 1, got [-0.1, 0.5]"),
    (dict(num_nodes=100, exponent=2), "exponent must be None or a number > 2, got 2"),
    (dict(num_nodes=100, num_classes=-1), "num_classes must be an int >= 1, got -1"),
    (dict(num_nodes=100, label_noise=1.5), "label_noise must be in [0, 1], got 1.5"),
    (dict(num_nodes=100, split_sizes=(0, 1, 1)),
     "split_sizes must be (train >= 1, valid >= 0, test >= 0) with a sum <= num_nodes=100, got [0, 1, 1]"),
])
def test_bad_arguments_have_exact_messages(kwargs, message):
    with pytest.raises(ValueError) as err:
        nested_communities(**kwargs)
    assert str(err.value) == message


def test_largest_node_count_passes_its_check():
    # 2**31 - 2 nodes pass the num_nodes check: the next check (a bad seed) is the one that fails.
    with pytest.raises(ValueError, match="^seed must be an int >= 0"):
        nested_communities(2**31 - 2, seed=-1)


@pytest.mark.parametrize("change, message", [
    (dict(mixing=()), r"^mixing must be one probability per level, at least one level, got \(\)$"),  # ZeroDivisionError
    (dict(num_classes=0), r"^num_classes must be an int >= 1, got 0$"),  # became branching[0]
    (dict(branching=(2.7, 2)), r"^branching must be a sequence of ints, got \(2.7, 2\)$"),  # truncated to 2
    (dict(split_sizes=(10.7, 5, 5)), r"^split_sizes must be three ints, got \(10.7, 5, 5\)$"),  # truncated to 10
])
def test_nested_communities_refuses_what_it_would_have_changed_silently(change, message):
    with pytest.raises(ValueError, match=message):
        nested_communities(100, **change)
