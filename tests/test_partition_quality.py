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
