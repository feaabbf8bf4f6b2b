"""Tests of ttgnn.partition.quality: the shared-prefix fractions against brute force."""
import math

import numpy as np
import pytest

from ttgnn.partition import hierarchical_order, shared_prefix_fractions


def test_shared_prefix_fractions_match_brute_force():
    rng = np.random.default_rng(8)
    edge_index = rng.integers(0, 90, size=(2, 400))
    perm = rng.permutation(5 * 4 * 6)[:90]
    got = shared_prefix_fractions(edge_index, perm, (5, 4, 6), num_nodes=90)
    pairs = {(min(u, v), max(u, v)) for u, v in edge_index.T.tolist() if u != v}
    for level, stride in ((1, 24), (2, 6)):
        expected = np.mean([perm[u] // stride == perm[v] // stride for u, v in pairs])
        assert got[f"shared_prefix_{level}"] == pytest.approx(expected, abs=1e-12)


def test_one_node_csr_and_empty_quality():
    order = hierarchical_order((np.array([0, 0]), np.array([], dtype=np.int64)), (1, 1))
    np.testing.assert_array_equal(order.perm, [0])
    assert math.isnan(order.quality["shared_prefix_1"])


def _brute_force(edge_index, perm, strides):
    pairs = {(min(u, v), max(u, v)) for u, v in edge_index.T.tolist() if u != v}
    return [np.mean([perm[u] // s == perm[v] // s for u, v in pairs]) for s in strides]


@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_edges_counted_once_across_blocks(monkeypatch, block):
    """The CSR is walked in blocks of about ``_BLOCK`` entries; small blocks make every boundary
    case (a row longer than a block, isolated rows, the last row) happen on a small graph."""
    from ttgnn.partition import quality
    from ttgnn.partition.graph import canonical_csr

    monkeypatch.setattr(quality, "_BLOCK", block)
    rng = np.random.default_rng(block)
    edge_index = rng.integers(0, 70, size=(2, 300))
    edge_index[:, :20] = [[5] * 20, list(range(40, 60))]  # node 5: a row longer than the blocks
    perm = rng.permutation(5 * 4 * 6)[:90]  # nodes 70-89 have no edges
    expected = _brute_force(edge_index, perm, (24, 6))
    for graph in (edge_index, canonical_csr(edge_index, 90)):
        got = shared_prefix_fractions(graph, perm, (5, 4, 6), num_nodes=90)
        assert [got["shared_prefix_1"], got["shared_prefix_2"]] == pytest.approx(expected, abs=1e-12)


def test_graph_without_edges_gives_nan_and_bad_perms_are_named():
    empty = np.zeros((2, 0), dtype=np.int64)
    got = shared_prefix_fractions(empty, np.arange(4), (2, 2), num_nodes=4)
    assert list(got) == ["shared_prefix_1"] and math.isnan(got["shared_prefix_1"])
    edges = np.array([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"perm must have shape \(3,\), got \(2,\)"):
        shared_prefix_fractions(edges, np.arange(2), (2, 2), num_nodes=3)
    with pytest.raises(TypeError, match="perm must be an integer array, got float64"):
        shared_prefix_fractions(edges, np.arange(3.0), (2, 2), num_nodes=3)
    # an order that is no bijection into the rows, or a shape that cannot hold the nodes, is refused, not
    # scored (two nodes on one row shared every digit: a "perfect" 1.0)
    ring = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    for perm, row_shape, message in ((np.zeros(4, dtype=int), (2, 2), "perm maps two nodes to one row"),
                                     (np.array([-1, -2, -3, -4]), (2, 2), r"perm leaves the row range \[0, 4\)"),
                                     (np.arange(4), (1, 2), r"covers 2 rows, fewer than the graph's 4 nodes"),
                                     (np.arange(4), (2, 0), r"factors must be >= 1, got \[2, 0\]")):
        with pytest.raises(ValueError, match=message):
            shared_prefix_fractions(ring, perm, row_shape)
    assert shared_prefix_fractions(ring, np.array([0, 1, 3, 2]), (2, 2)) == {"shared_prefix_1": 0.5}
