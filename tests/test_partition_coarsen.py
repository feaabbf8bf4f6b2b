"""Tests of ttgnn.partition.coarsen (label propagation, contraction, refinement, balancing), the
weighted ParHIP file, and the coarsened KaMinPar split inside the hierarchical order."""
import logging
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ttgnn.partition import canonical_csr, hierarchical_order
from ttgnn.partition import coarsen as coarsen_module
from ttgnn.partition import reorder as reorder_module
from ttgnn.partition.coarsen import cluster_label_propagation, coarsen_graph, contract
from ttgnn.partition.refine import balance_labels, project_labels, refine_labels
from ttgnn.partition import kaminpar as kaminpar_module
from ttgnn.partition.kaminpar import KaMinParSplitter, write_parhip
from ttgnn.partition.split import rebalance

from partition_graphs import check_order, sbm_edges

try:
    import kaminpar
except ImportError:  # pragma: no cover - kaminpar is a dependency of the KaMinPar order
    kaminpar = None

needs_kaminpar = pytest.mark.skipif(kaminpar is None, reason="the kaminpar package is not installed")


def _inside(labels, csr):
    """Share of stored entries whose two ends carry the same label."""
    return float(np.mean(labels[csr.edge_rows()] == labels[csr.indices]))


def _cliques(num_cliques, size, bridges, seed=0):
    """Disjoint cliques joined by `bridges` random edges; node ids shuffled. Returns (csr, clique)."""
    rng = np.random.default_rng(seed)
    local = np.array([(a, b) for a in range(size) for b in range(a + 1, size)]).T
    edges = [local + c * size for c in range(num_cliques)]
    edges.append(rng.integers(0, num_cliques * size, size=(2, bridges)))
    relabel = rng.permutation(num_cliques * size)
    clique = np.empty(num_cliques * size, dtype=np.int64)
    clique[relabel] = np.arange(num_cliques * size) // size
    return canonical_csr(relabel[np.concatenate(edges, axis=1)], num_cliques * size), clique


def _random_csr(num_nodes, num_edges, num_isolated, seed):
    """A random symmetric graph whose last `num_isolated` nodes have no edges."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes - num_isolated, size=(2, num_edges))
    return canonical_csr(edges, num_nodes)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 entries: every block boundary case is exercised on small graphs."""
    monkeypatch.setattr(coarsen_module, "_BLOCK_ENTRIES", 7)


# ----------------------------------------------------------------------------- label propagation
@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("max_size", [1, 2, 5, 40])
def test_clusters_respect_the_cap_and_are_dense_and_deterministic(monkeypatch, blocks, max_size):
    if blocks == "tiny":
        monkeypatch.setattr(coarsen_module, "_BLOCK_ENTRIES", 7)
    csr = canonical_csr(sbm_edges(6, 50, 1500, 0.9, seed=max_size)[0], 300)
    clusters = cluster_label_propagation(csr.indptr, csr.indices, max_size, seed=3)
    assert clusters.dtype == np.int32 and clusters.shape == (300,)
    sizes = np.bincount(clusters)
    assert sizes.max() <= max_size and sizes.min() >= 1  # ids 0..C-1, none empty
    np.testing.assert_array_equal(clusters, cluster_label_propagation(csr.indptr, csr.indices, max_size, seed=3))
    if max_size == 1:
        np.testing.assert_array_equal(clusters, np.arange(300))
    else:
        assert sizes.shape[0] < 300 / 1.5  # it did cluster


def test_clusters_follow_planted_cliques():
    csr, clique = _cliques(60, 10, bridges=40)
    for resolution in (0.0, 4.0):
        clusters = cluster_label_propagation(csr.indptr, csr.indices, 10, resolution=resolution)
        pure = np.array([np.unique(clique[clusters == c]).shape[0] == 1 for c in range(clusters.max() + 1)])
        assert pure.mean() >= 0.95, resolution
        assert clusters.max() + 1 <= 90  # mostly whole cliques (60 would be perfect)


def test_clusters_follow_planted_blocks_of_a_sparse_graph():
    edge_index, block = sbm_edges(20, 500, 40000, 0.9, seed=1)
    csr = canonical_csr(edge_index, 10000)
    clusters = cluster_label_propagation(csr.indptr, csr.indices, 100)
    majority = sp.csr_matrix((np.ones(10000), (clusters, block))).max(axis=1).sum() / 10000
    assert majority >= 0.9  # nodes sharing their cluster's majority block (random: ~0.05)
    assert clusters.max() + 1 < 10000 / 4


def test_isolated_nodes_are_grouped_without_weights_and_stay_alone_with_them():
    csr = _random_csr(30, 40, num_isolated=11, seed=0)
    isolated = np.flatnonzero(np.diff(csr.indptr) == 0)
    assert isolated.shape[0] >= 11
    clusters = cluster_label_propagation(csr.indptr, csr.indices, 4)
    # Chunks of 4 in id order, apart from every other node's cluster.
    chunk = np.arange(isolated.shape[0]) // 4
    np.testing.assert_array_equal(np.unique(clusters[isolated], return_inverse=True)[1], chunk)
    assert not np.isin(clusters[isolated], np.delete(clusters, isolated)).any()
    weighted = cluster_label_propagation(csr.indptr, csr.indices, 4, node_weights=np.ones(30, dtype=np.int64))
    assert np.unique(weighted[isolated]).shape[0] == isolated.shape[0]
    pairs = cluster_label_propagation(csr.indptr, csr.indices, 2)
    chunk = np.arange(isolated.shape[0]) // 2
    np.testing.assert_array_equal(np.unique(pairs[isolated], return_inverse=True)[1], chunk)


def test_weighted_clusters_respect_the_cap_in_node_weight(small_blocks):
    csr = canonical_csr(sbm_edges(4, 40, 800, 0.9, seed=2)[0], 160)
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 6, size=160)
    edge_weights = np.ones(csr.num_entries, dtype=np.int64)
    clusters = cluster_label_propagation(csr.indptr, csr.indices, 12, node_weights=weights,
                                         edge_weights=edge_weights, resolution=1.0)
    assert np.bincount(clusters, weights=weights).max() <= 12
    assert clusters.max() + 1 < 160 / 2



def test_label_propagation_defaults_are_five_rounds_and_seed_0():
    # a random graph on which a sixth round and another seed change the clusters
    csr = canonical_csr(np.random.default_rng(7).integers(0, 300, size=(2, 900)), 300)
    default = cluster_label_propagation(csr.indptr, csr.indices, 6)
    assert default.dtype == np.int32
    np.testing.assert_array_equal(default, cluster_label_propagation(csr.indptr, csr.indices, 6, rounds=5, seed=0))
    assert not np.array_equal(default, cluster_label_propagation(csr.indptr, csr.indices, 6, rounds=6))
    assert not np.array_equal(default, cluster_label_propagation(csr.indptr, csr.indices, 6, seed=1))


def test_nodes_of_weight_0_are_accepted():
    clusters = cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 1, node_weights=np.array([0, 1]))
    assert clusters.tolist() == [0, 0]  # the weightless node fits with the other under a cap of 1


def test_weighted_degrees_are_summed_in_blocks_of_2_22_rows():
    num_nodes = (1 << 22) + 5
    counts = np.ones(num_nodes, dtype=np.int64)
    counts[0] = 3
    counts[(1 << 22) - 1] = counts[-1] = 0  # the last row of each block has no entry
    counts[(1 << 22) + 1] = 2
    indptr = np.concatenate([[0], np.cumsum(counts)])
    weights = np.random.default_rng(0).integers(1, 6, size=int(indptr[-1]))
    rows = np.repeat(np.arange(num_nodes), counts)
    expect = np.bincount(rows, weights=weights, minlength=num_nodes)
    np.testing.assert_array_equal(coarsen_module._weighted_degrees(indptr, weights), expect)
    np.testing.assert_array_equal(coarsen_module._weighted_degrees(indptr, None), counts)


def test_resolution_rates_a_cluster_without_the_nodes_own_degree():
    # Two nodes, one edge (2m = 2, every degree 1): joining the other's cluster is worth
    # 1 - gamma / 2 * 1 * 1 against 0 for staying alone (its own degree left out of its own
    # cluster's volume). At gamma = 2 that is not strictly more: both stay; below 2 they merge.
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    assert cluster_label_propagation(indptr, indices, 2, resolution=2.0).tolist() == [0, 1]
    assert cluster_label_propagation(indptr, indices, 2, resolution=1.9).tolist() == [0, 0]
    # The same with edge weight 2 (degrees and volumes in edge weight) and an isolated third node.
    indptr, weights = np.array([0, 1, 2, 2]), np.array([2, 2])
    assert cluster_label_propagation(indptr, indices, 2, resolution=2.0, edge_weights=weights).tolist() == [0, 1, 2]
    assert cluster_label_propagation(indptr, indices, 2, resolution=1.9, edge_weights=weights).tolist() == [0, 0, 1]


@pytest.mark.parametrize("node_weights", [None, np.ones(4, dtype=np.int64)])
@pytest.mark.parametrize("seed", [0, 3, 4])
def test_a_cluster_with_room_for_two_takes_the_largest_gains(seed, node_weights):
    # Node 0 (cap 3) links to 3 with weight 10, to 1 with 3, to 2 with 1. On these seeds 1 and 2
    # ask to join node 0 in the same group of rows of the one round: the larger gain gets the room.
    indptr, indices = np.array([0, 3, 4, 5, 6]), np.array([1, 2, 3, 0, 0, 0])
    clusters = cluster_label_propagation(indptr, indices, 3, rounds=1, seed=seed, node_weights=node_weights,
                                         edge_weights=np.array([3, 1, 10, 3, 1, 10]))
    assert clusters[0] == clusters[1] == clusters[3] != clusters[2]


def test_priorities_are_31_bit_hashes_and_phases_go_by_degree_class():
    hashes = coarsen_module._mix(np.arange(100_000), salt=5)
    assert hashes.dtype == np.int64 and hashes.min() >= 0 and 2**30 <= hashes.max() < 2**31
    degree = np.array([0, 1, 2, 3, 4, 7, 8, 1000])
    phases = coarsen_module._row_phases(degree, np.random.default_rng(0))
    assert (phases // 2).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]  # log2 classes, capped at the last


def test_row_blocks_end_at_the_first_row_reaching_each_multiple_of_the_block_size():
    indptr = np.arange(0, 42, 2)  # 20 rows of 2 entries
    assert coarsen_module._row_blocks(indptr, 7).tolist() == [0, 4, 7, 11, 14, 18, 20]


def test_row_blocks_cover_every_row():
    csr = _random_csr(60, 150, 5, seed=2)  # the last five rows are empty
    bounds = coarsen_module._row_blocks(csr.indptr, 7)
    assert bounds[0] == 0 and bounds[-1] == 60 and np.all(np.diff(bounds) > 0)


def test_propagation_logs_numbered_rounds_and_returns_the_nodes_moved(caplog):
    csr = canonical_csr(np.random.default_rng(7).integers(0, 300, size=(2, 900)), 300)
    labels, sizes = np.arange(300, dtype=np.int32), np.ones(300, dtype=np.int32)
    caplog.set_level(logging.DEBUG, logger="ttgnn.partition.coarsen")
    moved = coarsen_module._propagate(csr.indptr, csr.indices, labels, sizes, 6, rounds=5, seed=0)
    lines = [re.fullmatch(r"label propagation round (\d+): (\d+) nodes moved", r.getMessage())
             for r in caplog.records]
    assert [int(m.group(1)) for m in lines] == [1, 2, 3, 4, 5]
    assert moved == sum(int(m.group(2)) for m in lines) > int(lines[0].group(2))
    caplog.clear()  # converged before the last round: the total still comes back
    converged = coarsen_module._propagate(csr.indptr, csr.indices, labels, sizes, 6, rounds=100, seed=0)
    assert isinstance(converged, int) and len(caplog.records) < 100
    assert converged == sum(int(re.fullmatch(r".* (\d+) nodes moved", r.getMessage()).group(1))
                            for r in caplog.records)
    caplog.clear()  # no entries: nothing to do, nothing logged
    edgeless = np.zeros(5, dtype=np.int64)
    assert coarsen_module._propagate(edgeless, edgeless[:0], labels[:4], sizes[:4], 6, rounds=5, seed=0) == 0
    assert not caplog.records
    # a block of rows without entries moves nothing
    csr = _random_csr(60, 150, 5, seed=2)  # the last five rows are empty
    rng = np.random.default_rng(0)
    assert coarsen_module._propagate_block(csr.indptr, csr.indices, np.arange(60), np.ones(60, dtype=np.int64),
                                           55, 60, 4, rng, 1, None, None) == 0


# The rules of label propagation (cluster_label_propagation's docstring) written row by row, as
# the oracle of the vectorised passes. It shares only the random draws with the module (which
# rows go in which group, the round's salt and the hash priorities), whose helpers are tested
# above.
def _reference_pass(indptr, indices, labels, sizes, first, last, max_size, rng, salt, node_weights,
                    edge_weights, volumes, penalty):
    phases = coarsen_module._row_phases(np.diff(indptr[first:last + 1]), rng)
    if indptr[last] == indptr[first]:
        return 0

    def weight(u):
        return 1 if node_weights is None else int(node_weights[u])

    def degree(u):
        return float(indptr[u + 1] - indptr[u] if edge_weights is None else edge_weights[indptr[u]:indptr[u + 1]].sum())

    moved = 0
    for phase in range(2 * coarsen_module._DEGREE_CLASSES):
        wishes = []  # (target cluster, -gain, node)
        for u in (first + np.flatnonzero(phases == phase)).tolist():
            own = int(labels[u])
            links = {}
            for entry in range(indptr[u], indptr[u + 1]):
                cluster = int(labels[indices[entry]])
                links[cluster] = links.get(cluster, 0) + (1 if edge_weights is None else int(edge_weights[entry]))
            # clusters without room are left out; the node's own is always rated
            links = {c: w for c, w in links.items() if c == own or sizes[c] + weight(u) <= max_size}
            if not links:
                continue
            if volumes is None:
                rating = dict(links)
                own_rating = links.get(own, 0)
            else:
                d = degree(u)
                rating = {c: w - penalty * d * (volumes[c] - (d if c == own else 0.0)) for c, w in links.items()}
                own_rating = links.get(own, 0) - penalty * d * (volumes[own] - d)
            priority = dict(zip(rating, coarsen_module._mix(np.array(list(rating), dtype=np.int64), salt).tolist()))
            best = max(rating, key=lambda c: (rating[c], priority[c]))
            if rating[best] - own_rating > 1e-9:
                wishes.append((best, -(rating[best] - own_rating), u))
        # Each cluster takes the largest gains first (ties by node id) while they fit.
        filled, moves = {}, []
        for target, _, u in sorted(wishes):
            filled[target] = filled.get(target, 0) + weight(u)
            if filled[target] <= max_size - sizes[target]:
                moves.append((u, target))
        for u, target in moves:
            sizes[labels[u]] -= weight(u)
            sizes[target] += weight(u)
            if volumes is not None:
                volumes[labels[u]] -= degree(u)
                volumes[target] += degree(u)
            labels[u] = target
        moved += len(moves)
    return moved


def _reference_clusters(indptr, indices, max_size, rounds, seed, node_weights=None, edge_weights=None,
                        resolution=0.0):
    """(clusters, nodes moved) of cluster_label_propagation, row by row."""
    num_nodes = indptr.shape[0] - 1
    labels = np.arange(num_nodes)
    sizes = np.ones(num_nodes, dtype=np.int64) if node_weights is None else node_weights.astype(np.int64)
    volumes, penalty = None, 0.0
    if resolution > 0 and indices.shape[0]:
        entry_weights = np.ones(indices.shape[0]) if edge_weights is None else edge_weights
        volumes = np.array([float(entry_weights[indptr[u]:indptr[u + 1]].sum()) for u in range(num_nodes)])
        penalty = resolution / volumes.sum()
    total = 0
    if (max_size > 1 or node_weights is not None) and indices.shape[0]:
        bounds = coarsen_module._row_blocks(indptr, coarsen_module._BLOCK_ENTRIES).tolist()
        for round_index in range(rounds):
            rng = np.random.default_rng([seed, round_index])
            salt = int(rng.integers(0, 2**63))
            moved = sum(_reference_pass(indptr, indices, labels, sizes, first, last, max_size, rng, salt,
                                        node_weights, edge_weights, volumes, penalty)
                        for first, last in zip(bounds[:-1], bounds[1:]))
            total += moved
            if moved == 0:
                break
    if node_weights is None and max_size > 1:  # isolated nodes in chunks of max_size, in id order
        isolated = np.flatnonzero(np.diff(indptr) == 0)
        labels[isolated] = isolated[np.arange(isolated.shape[0]) // max_size * max_size]
    return np.unique(labels, return_inverse=True)[1], total


def _propagation_case(seed, weighted_nodes, weighted_edges):
    """A 90-node planted-partition graph with 4 isolated nodes, and optional random weights."""
    csr = canonical_csr(sbm_edges(6, 15, 260, 0.8, seed=seed)[0] % 86, 90)
    rng = np.random.default_rng(seed)
    node_weights = rng.integers(0, 4, size=90) if weighted_nodes else None
    edge_weights = None
    if weighted_edges:  # symmetric: the weight of {u, v} on both of its entries
        rows = csr.edge_rows()
        pair_weight = rng.integers(1, 6, size=(90, 90))
        pair_weight = np.triu(pair_weight) + np.triu(pair_weight, 1).T
        edge_weights = pair_weight[rows, csr.indices]
    return csr, node_weights, edge_weights


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("weighted_nodes, weighted_edges", [(False, False), (True, False), (False, True),
                                                             (True, True)])
@pytest.mark.parametrize("resolution", [0.0, 0.5, 1.0, 4.0])
def test_label_propagation_matches_its_rules_row_by_row(monkeypatch, blocks, weighted_nodes, weighted_edges,
                                                        resolution):
    # Tight caps make clusters fill up (a node then joins its second choice, and a cluster takes
    # only some of those who ask); tiny blocks put rows after the first block (first > 0) and
    # make a round's later blocks see the labels its earlier ones changed.
    if blocks == "tiny":
        monkeypatch.setattr(coarsen_module, "_BLOCK_ENTRIES", 7)
    for seed, cap in [(1, 3), (2, 5), (3, 8)]:
        csr, node_weights, edge_weights = _propagation_case(seed, weighted_nodes, weighted_edges)
        expect, _ = _reference_clusters(csr.indptr, csr.indices, cap, 4, seed, node_weights, edge_weights,
                                        resolution)
        clusters = cluster_label_propagation(csr.indptr, csr.indices, cap, rounds=4, seed=seed,
                                             node_weights=node_weights, edge_weights=edge_weights,
                                             resolution=resolution)
        np.testing.assert_array_equal(clusters, expect, err_msg=f"seed {seed}, cap {cap}")


def test_propagation_counts_the_moves_of_every_block_of_a_round(small_blocks):
    csr, node_weights, edge_weights = _propagation_case(4, True, True)
    labels, sizes = np.arange(90, dtype=np.int32), node_weights.astype(np.int64)
    moved = coarsen_module._propagate(csr.indptr, csr.indices, labels, sizes, 6, rounds=20, seed=4,
                                      node_weights=node_weights, edge_weights=edge_weights)
    expect, expect_moved = _reference_clusters(csr.indptr, csr.indices, 6, 20, 4, node_weights, edge_weights)
    np.testing.assert_array_equal(np.unique(labels, return_inverse=True)[1], expect)
    assert moved == expect_moved >= np.count_nonzero(labels != np.arange(90))


@pytest.mark.parametrize("length, rise", [
    ((1 << 24) + 10, (1 << 24) + 5),  # a fall inside the second piece of 2^24 rows
    ((1 << 24) + 10, (1 << 24) - 1),  # a fall across the first piece's last pair
    ((1 << 24) + 2, 1 << 24),  # a last piece of one pair
])
def test_indptr_is_checked_for_order_past_its_first_2_24_rows(length, rise):
    indptr = np.zeros(length, dtype=np.int32)
    indptr[rise] = 1  # rises, then falls back to 0
    with pytest.raises(ValueError, match="indptr must be non-decreasing"):
        cluster_label_propagation(indptr, np.zeros(0, dtype=np.int32), 2)

@pytest.mark.parametrize("call,error,message", [
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0, 0]), 2), ValueError,
     "indptr must run from 0 to len(indices)=3, got 0 .. 2"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 2]), 2), ValueError,
     "indices must lie in [0, 2), got 1 .. 2"),
    (lambda: cluster_label_propagation(np.array([0, 2, 1, 2]), np.array([1, 0]), 2), ValueError,
     "indptr must be non-decreasing"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 0), ValueError,
     "max_cluster_size must be >= 1, got 0"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2, rounds=-1), ValueError,
     "rounds must be >= 0, got -1"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1.0, 0.0]), 2), TypeError,
     "indices must be an integer numpy array, got float64"),
    (lambda: cluster_label_propagation(np.array([0.0, 1.0, 2.0]), np.array([1, 0]), 2), TypeError,
     "indptr must be an integer numpy array, got float64"),
    (lambda: cluster_label_propagation([0, 1, 2], np.array([1, 0]), 2), TypeError,
     "indptr must be an integer numpy array, got list"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([[1, 0]]), 2), ValueError,
     "indices must be one-dimensional, got shape (1, 2)"),
    (lambda: cluster_label_propagation(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 2), ValueError,
     "indptr must have at least one entry (n + 1 >= 1)"),
    (lambda: cluster_label_propagation(np.array([0, -1, 2]), np.array([1, 0]), 2), ValueError,
     "indptr must be non-decreasing"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2.5), TypeError,
     "max_cluster_size must be an int, got float"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2, node_weights=np.array([1])),
     ValueError, "node_weights must have shape (2,), got (1,)"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2, seed=-1), ValueError,
     "seed must be >= 0, got -1"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2, edge_weights=np.array([1])),
     ValueError, "edge_weights must have shape (2,), got (1,)"),
    (lambda: cluster_label_propagation(np.array([0, 1, 2]), np.array([1, 0]), 2, edge_weights=np.array([1, 0])),
     ValueError, "edge_weights must be >= 1, got 0"),
    (lambda: contract(np.array([0, 1, 2]), np.array([1, 0]), np.array([0, 2]), 2), ValueError,
     "clusters must lie in [0, 2), got 0 .. 2"),
    (lambda: contract(np.array([0, 1, 2]), np.array([1, 0]), np.array([0]), 1), ValueError,
     "clusters must have shape (2,), got (1,)"),
    (lambda: contract(np.array([0, 1, 2]), np.array([1, 0]), np.array([0, 0]), 1, edge_weights=np.array([1, 0])),
     ValueError, "edge_weights must be >= 1, got 0"),
])
def test_bad_input_is_named_in_the_error(call, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


# ----------------------------------------------------------------------------- contraction
def _quotient_reference(csr, clusters, num_clusters, edge_weights=None, node_weights=None):
    """P^T A P with P the cluster indicator, diagonal dropped; node weights P^T w."""
    data = np.ones(csr.num_entries) if edge_weights is None else edge_weights.astype(float)
    adjacency = sp.csr_matrix((data, csr.indices, csr.indptr), shape=(csr.num_nodes,) * 2)
    indicator = sp.csr_matrix((np.ones(csr.num_nodes), (np.arange(csr.num_nodes), clusters)),
                              shape=(csr.num_nodes, num_clusters))
    quotient = (indicator.T @ adjacency @ indicator).tolil()
    quotient.setdiag(0)
    quotient = quotient.tocsr()
    quotient.eliminate_zeros()
    quotient.sort_indices()
    weights = np.ones(csr.num_nodes) if node_weights is None else node_weights
    return quotient, indicator.T @ weights


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weighted", [False, True])
def test_contraction_equals_the_scipy_quotient(small_blocks, seed, weighted):
    rng = np.random.default_rng(seed)
    csr = _random_csr(60, 150, num_isolated=7, seed=seed)
    num_clusters = int(rng.integers(1, 25))
    clusters = rng.integers(0, num_clusters, size=60)  # some clusters may be empty
    edge_weights = node_weights = None
    if weighted:  # symmetric edge weights: a function of the unordered pair
        rows = csr.edge_rows()
        low, high = np.minimum(rows, csr.indices), np.maximum(rows, csr.indices)
        edge_weights = (low * 7 + high * 3) % 5 + 1
        node_weights = rng.integers(0, 4, size=60)
    c_indptr, c_indices, c_edge_weights, c_node_weights = contract(
        csr.indptr, csr.indices, clusters, num_clusters, node_weights=node_weights, edge_weights=edge_weights)
    quotient, expected_node_weights = _quotient_reference(csr, clusters, num_clusters, edge_weights, node_weights)
    assert c_indptr.dtype == np.int64 and c_indices.dtype == np.int32 and c_node_weights.dtype == np.int64
    np.testing.assert_array_equal(c_indptr, quotient.indptr)
    np.testing.assert_array_equal(c_indices, quotient.indices)
    np.testing.assert_array_equal(c_edge_weights, quotient.data)
    np.testing.assert_array_equal(c_node_weights, expected_node_weights)
    coarse = sp.csr_matrix((c_edge_weights, c_indices, c_indptr), shape=(num_clusters,) * 2)
    assert (coarse != coarse.T).nnz == 0  # symmetric, equal weights both ways


def test_contraction_goes_on_after_a_block_without_cut_edges(small_blocks):
    # Cluster 0 is a clique with no edge leaving it: its block (90 entries, more than the 7 of a
    # block) contributes no coarse edge, and the blocks after it must still be contracted.
    rng = np.random.default_rng(0)
    clique = np.array([(a, b) for a in range(10) for b in range(a + 1, 10)]).T
    rest = rng.integers(10, 60, size=(2, 120))
    csr = canonical_csr(np.concatenate([clique, rest], axis=1), 60)
    clusters = np.r_[np.zeros(10, dtype=np.int64), rng.integers(1, 6, size=50)]
    c_indptr, c_indices, c_edge_weights, _ = contract(csr.indptr, csr.indices, clusters, 6)
    quotient, _ = _quotient_reference(csr, clusters, 6, None, None)
    assert quotient.nnz > 0 and c_indptr[1] == 0  # cluster 0 has no coarse edge, the others do
    np.testing.assert_array_equal(c_indptr, quotient.indptr)
    np.testing.assert_array_equal(c_indices, quotient.indices)
    np.testing.assert_array_equal(c_edge_weights, quotient.data)


def test_contraction_keeps_32_bit_ids_and_weights_below_2_31():
    # 200 clusters and a total edge weight of 3,000: both far below 2^31, so int32 (half the
    # memory of int64) for the coarse ids and weights.
    csr = _random_csr(400, 1500, num_isolated=0, seed=1)
    clusters = np.arange(400) % 200
    _, c_indices, c_edge_weights, _ = contract(csr.indptr, csr.indices, clusters, 200)
    assert c_indices.dtype == np.int32 and c_edge_weights.dtype == np.int32
    assert c_edge_weights.sum() > 62


def test_contracting_label_propagation_clusters_keeps_every_cut_edge():
    csr = canonical_csr(sbm_edges(5, 60, 1200, 0.85, seed=4)[0], 300)
    clusters = cluster_label_propagation(csr.indptr, csr.indices, 15)
    num_clusters = int(clusters.max()) + 1
    c_indptr, c_indices, c_edge_weights, c_node_weights = contract(csr.indptr, csr.indices, clusters, num_clusters)
    cut = int(np.count_nonzero(clusters[csr.edge_rows()] != clusters[csr.indices]))
    assert c_edge_weights.sum() == cut and c_node_weights.sum() == 300
    assert not np.any(c_indices == np.repeat(np.arange(num_clusters), np.diff(c_indptr)))  # no self-loops


def test_contraction_of_an_edgeless_graph():
    indptr = np.zeros(6, dtype=np.int64)
    c_indptr, c_indices, c_edge_weights, c_node_weights = contract(indptr, np.zeros(0, np.int32),
                                                                   np.array([0, 1, 1, 2, 2]), 3)
    np.testing.assert_array_equal(c_indptr, [0, 0, 0, 0])
    assert c_indices.shape == c_edge_weights.shape == (0,)
    np.testing.assert_array_equal(c_node_weights, [1, 2, 2])


@pytest.mark.parametrize("call,error,message", [
    (lambda: contract(*_P3_GRAPH, np.array([0, 0, 0]), -1), ValueError, "num_clusters must be >= 0, got -1"),
    (lambda: contract(*_P3_GRAPH, np.array([0, 0, 0]), 1, node_weights=np.array([1, 1])), ValueError,
     "node_weights must have shape (3,), got (2,)"),
    (lambda: contract(*_P3_GRAPH, np.array([0, 0, 0]), 1, node_weights=np.array([1, -2, 1])), ValueError,
     "node_weights must be >= 0, got -2"),
    (lambda: coarsen_graph(*_P3_GRAPH, 0, 0), ValueError, "max_cluster_size must be >= 1, got 0"),
    (lambda: coarsen_graph(*_P3_GRAPH, 2, -1), ValueError, "target_entries must be >= 0, got -1"),
    (lambda: coarsen_graph(*_P3_GRAPH, 2, 0, max_levels=-1), ValueError, "max_levels must be >= 0, got -1"),
])
def test_contraction_and_hierarchy_arguments_are_named_in_the_error(call, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


_P3_GRAPH = (np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]))


def test_contraction_keeps_empty_clusters_and_an_empty_graph():
    c_indptr, c_indices, c_edge_weights, c_node_weights = contract(*_P3_GRAPH, np.array([0, 0, 1]), 4)
    np.testing.assert_array_equal(c_indptr, [0, 1, 2, 2, 2])  # clusters 2 and 3 are empty
    np.testing.assert_array_equal(c_indices, [1, 0])
    np.testing.assert_array_equal(c_edge_weights, [1, 1])
    np.testing.assert_array_equal(c_node_weights, [2, 1, 0, 0])
    empty = contract(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
    assert [a.shape for a in empty] == [(1,), (0,), (0,), (0,)]


def test_hierarchy_levels_cluster_and_contract_the_previous_weighted_graph(small_blocks):
    csr = canonical_csr(sbm_edges(8, 60, 2500, 0.8, seed=10)[0], 480)
    levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 12, target_entries=0, max_levels=3, rounds=4,
                                     seed=7, resolution=2.0)
    assert len(levels) >= 2 and levels[1].node_weights is not None  # weighted levels are checked
    graph = (csr.indptr, csr.indices, None, None)
    for depth, level in enumerate(levels):
        for got, expected in zip((level.indptr, level.indices, level.edge_weights, level.node_weights), graph):
            assert (got is None) == (expected is None)
            if got is not None:
                np.testing.assert_array_equal(got, expected)
        clusters = cluster_label_propagation(graph[0], graph[1], 12, rounds=4, seed=7 + depth, node_weights=graph[3],
                                             edge_weights=graph[2], resolution=2.0)
        np.testing.assert_array_equal(level.clusters, clusters)
        graph = contract(graph[0], graph[1], clusters, int(clusters.max()) + 1, node_weights=graph[3],
                         edge_weights=graph[2])
    for got, expected in zip(coarsest, graph):
        np.testing.assert_array_equal(got, expected)
    assert coarsest[3].sum() == 480 and coarsest[3].max() <= 12
    # The defaults: 8 levels at most, 5 rounds, seed 0, resolution 4.
    default = coarsen_graph(csr.indptr, csr.indices, 12, target_entries=0)
    explicit = coarsen_graph(csr.indptr, csr.indices, 12, target_entries=0, max_levels=8, rounds=5, seed=0,
                             min_shrink=0.9, resolution=4.0)
    assert len(default[0]) == len(explicit[0]) and len(default[0]) <= 8
    for got, expected in zip(default[1], explicit[1]):
        np.testing.assert_array_equal(got, expected)
    assert coarsen_graph(csr.indptr, csr.indices, 12, target_entries=0, max_levels=0) == ([], (csr.indptr, csr.indices, None, None))
    assert len(coarsen_graph(csr.indptr, csr.indices, 12, target_entries=0, max_levels=1)[0]) == 1


def test_hierarchy_stops_and_logs_when_a_level_does_not_shrink(caplog):
    csr = canonical_csr(sbm_edges(2, 30, 200, 0.8, seed=11)[0], 60)
    with caplog.at_level(logging.DEBUG, logger="ttgnn.partition.coarsen"):
        levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 1, target_entries=0)
    assert levels == [] and coarsest[0] is csr.indptr  # clusters of one node: nothing shrinks
    assert "coarsening stalled at level 1: 60 clusters of 60 nodes" in caplog.messages
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="ttgnn.partition.coarsen"):
        levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 1, target_entries=0, min_shrink=1.0, max_levels=2)
    assert len(levels) == 2  # "more than min_shrink of the nodes" stops it; all of them is not more
    assert f"coarsening level 1: 60 nodes / {csr.num_entries} entries -> 60 / {csr.num_entries}" in caplog.messages
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="ttgnn.partition.coarsen"):
        levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 30, target_entries=0, max_levels=1)
    num_clusters = int(levels[0].clusters.max()) + 1
    assert num_clusters == coarsest[0].shape[0] - 1 < 60
    assert (f"coarsening level 1: 60 nodes / {csr.num_entries} entries -> {num_clusters} / "
            f"{coarsest[1].shape[0]}") in caplog.messages


# ----------------------------------------------------------------------------- refinement, balance
def test_refinement_repairs_a_perturbed_partition_within_capacity(small_blocks):
    edge_index, block = sbm_edges(4, 50, 1500, 0.95, seed=3)
    csr = canonical_csr(edge_index, 200)
    rng = np.random.default_rng(0)
    labels = block.copy()
    swapped = rng.choice(200, size=30, replace=False)
    labels[swapped] = rng.permutation(labels[swapped])  # part sizes stay 50
    refined = refine_labels(csr.indptr, csr.indices, labels, 4, 55)
    assert np.bincount(refined, minlength=4).max() <= 55
    assert _inside(refined, csr) > _inside(labels, csr) + 0.05
    assert _inside(refined, csr) >= _inside(block, csr) - 0.02
    # Parts already full stay full-or-less: with capacity 50 no part may grow.
    assert np.bincount(refine_labels(csr.indptr, csr.indices, labels, 4, 50), minlength=4).max() <= 50


def test_balance_moves_exactly_the_excess_to_neighbouring_parts(small_blocks):
    edge_index, block = sbm_edges(4, 50, 1500, 0.9, seed=5)
    csr = canonical_csr(edge_index, 200)
    labels = block.copy()
    labels[np.flatnonzero(block == 1)[:12]] = 0  # part 0: 62 nodes, part 1: 38
    balanced = balance_labels(csr.indptr, csr.indices, labels, 4, 55)
    counts = np.bincount(balanced, minlength=4)
    assert counts.max() <= 55 and counts.sum() == 200
    assert np.count_nonzero(balanced != labels) == 62 - 55
    assert np.all(labels[balanced != labels] == 0)
    # Cheapest first: it does no worse than rebalance, which picks the same way in one pass.
    assert _inside(balanced, csr) >= _inside(rebalance(csr.indptr, csr.indices, labels, 4, 55), csr) - 0.01


def test_balance_moves_nodes_whose_neighbours_all_sit_in_full_parts():
    # Nodes 0 and 1 of the over-full part 0 link only to part 1, which is full: no useful move is
    # left, and summing the empty set of moves raised IndexError (the coarsened order of a star graph)
    labels = np.array([0, 0, 1])
    balanced = balance_labels(np.array([0, 1, 2, 4]), np.array([2, 2, 0, 1]), labels, 3, 1)
    assert balanced.tolist() == labels.tolist()  # they stay, as documented: rebalance's fallback places them


def test_hierarchical_kaminpar_coarsened_orders_a_star():
    n = 60_000  # (at 6,000 and 20,000 nodes the coarsened split did not meet the empty case)
    star = np.stack([np.zeros(n - 1, dtype=np.int64), np.arange(1, n)])
    order = hierarchical_order(star, (245, 245), method="hierarchical-kaminpar", coarsen_entries=1000)
    check_order(order, n, (245, 245))


def test_fill_empty_parts_moves_the_least_linked_node_of_the_largest_part():
    from ttgnn.partition.refine import fill_empty_parts

    # path 0-1-2-3-4, all in part 0 of 3: nodes 0 and 4 have one link inside, 1-3 two; node 0 goes
    # (lowest id), then node 1 has one link left inside, as node 4 does: node 1 goes
    csr = canonical_csr(np.array([[0, 1, 2, 3], [1, 2, 3, 4]]), 5)
    labels = np.zeros(5, dtype=np.int64)
    filled = fill_empty_parts(csr.indptr, csr.indices, labels, 3)
    assert filled.tolist() == [1, 2, 0, 0, 0] and labels.tolist() == [0] * 5
    assert fill_empty_parts(csr.indptr, csr.indices, np.array([0, 0, 1, 1, 2]), 3).tolist() == [0, 0, 1, 1, 2]
    assert fill_empty_parts(csr.indptr, csr.indices, labels, 9).tolist().count(0) == 1  # more parts than nodes


def test_the_coarsened_order_uses_every_first_digit():
    # Refinement up to the capacity drained a part: first-digit parts of 0-1,600 nodes, one empty
    rng = np.random.default_rng(0)
    n = 60_000
    edges = np.stack([np.repeat(np.arange(n), 3), rng.integers(0, n, 3 * n)])
    order = hierarchical_order(edges, (40, 40, 40), method="hierarchical-kaminpar", num_nodes=n,
                               coarsen_entries=100_000)
    check_order(order, n, (40, 40, 40))
    assert np.bincount(order.perm // 1600, minlength=40).min() >= 1


def test_balance_rejects_impossible_capacity():
    with pytest.raises(ValueError, match="^2 parts of capacity 1 cannot hold 3 nodes$"):
        balance_labels(np.array([0, 1, 2, 2]), np.array([1, 0]), np.array([0, 0, 1]), 2, 1)


# Path 0-1-2 (labels [0, 0, 1]) for the argument checks of refine_labels and balance_labels.
_P3 = (np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]))


@pytest.mark.parametrize("function", [refine_labels, balance_labels])
@pytest.mark.parametrize("kwargs,error,message", [
    (dict(nparts=0), ValueError, "nparts must be >= 1, got 0"),
    (dict(capacity=0), ValueError, "capacity must be >= 1, got 0"),
    (dict(rounds=-1), ValueError, "rounds must be >= 0, got -1"),
    (dict(seed=-1), ValueError, "seed must be >= 0, got -1"),
    (dict(labels=np.array([0.0, 0.0, 1.0])), TypeError, "labels must be an integer numpy array, got float64"),
    (dict(labels=np.array([0, 1])), ValueError, "labels must have shape (3,), got (2,)"),
    (dict(labels=np.array([-1, 0, 1])), ValueError, "labels must lie in [0, 2), got -1 .. 1"),
    (dict(labels=np.array([0, 1, 2])), ValueError, "labels must lie in [0, 2), got 0 .. 2"),
])
def test_partition_arguments_are_named_in_the_error(function, kwargs, error, message):
    args = dict(labels=np.array([0, 0, 1]), nparts=2, capacity=2, rounds=3, seed=0, **{})
    args.update(kwargs)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        function(*_P3, args["labels"], args["nparts"], args["capacity"], rounds=args["rounds"], seed=args["seed"])


@pytest.mark.parametrize("kwargs,message", [
    (dict(node_weights=np.array([1, 1])), "node_weights must have shape (3,), got (2,)"),
    (dict(node_weights=np.array([1, -1, 1])), "node_weights must be >= 0, got -1"),
    (dict(edge_weights=np.array([1, 1, 1])), "edge_weights must have shape (4,), got (3,)"),
    (dict(edge_weights=np.array([1, 0, 0, 1])), "edge_weights must be >= 1, got 0"),
])
def test_refinement_weights_are_named_in_the_error(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        refine_labels(*_P3, np.array([0, 0, 1]), 2, 2, **kwargs)


def test_refinement_edge_cases_of_the_arguments():
    labels = np.array([0, 0, 0])
    np.testing.assert_array_equal(refine_labels(*_P3, labels, 1, 3), labels)  # one part: nothing to do
    np.testing.assert_array_equal(balance_labels(*_P3, labels, 1, 3), labels)
    labels = np.array([0, 1, 1])  # node 0's only link is to part 1: moved when a round runs
    np.testing.assert_array_equal(refine_labels(*_P3, labels, 2, 3, rounds=0), labels)
    np.testing.assert_array_equal(refine_labels(*_P3, labels, 2, 3), [1, 1, 1])
    # Zero node weights are allowed: weightless nodes fit anywhere.
    np.testing.assert_array_equal(refine_labels(*_P3, labels, 2, 2, node_weights=np.array([0, 1, 1])), [1, 1, 1])


def test_refinement_counts_node_and_edge_weights():
    # Triangle 1-2-0 plus 0-3; node 0 (part 0) has 2 links to part 1 and 1 to its own part.
    csr = canonical_csr(np.array([[0, 0, 1, 0], [1, 2, 2, 3]]), 4)
    labels = np.array([0, 1, 1, 0])
    assert refine_labels(csr.indptr, csr.indices, labels, 2, 4)[0] == 1
    # Node weights: node 0 weighs 2 and part 1 (weight 2) has room for 2 more only at capacity 4.
    np.testing.assert_array_equal(
        refine_labels(csr.indptr, csr.indices, labels, 2, 3, node_weights=np.array([2, 1, 1, 1])), labels)
    assert refine_labels(csr.indptr, csr.indices, labels, 2, 4, node_weights=np.array([2, 1, 1, 1]))[0] == 1
    # Edge weights: the 0-3 link weighs 5, more than node 0's two links into part 1.
    rows = csr.edge_rows()
    heavy = ((rows == 0) & (csr.indices == 3)) | ((rows == 3) & (csr.indices == 0))
    np.testing.assert_array_equal(
        refine_labels(csr.indptr, csr.indices, labels, 2, 4, edge_weights=np.where(heavy, 5, 1)), labels)
    np.testing.assert_array_equal(labels, [0, 1, 1, 0])  # the input is not modified


def test_refinement_defaults_and_seed():
    edge_index, block = sbm_edges(4, 50, 1500, 0.7, seed=8)
    csr = canonical_csr(edge_index, 200)
    labels = np.random.default_rng(1).permutation(block)
    default = refine_labels(csr.indptr, csr.indices, labels, 4, 55)
    np.testing.assert_array_equal(default, refine_labels(csr.indptr, csr.indices, labels, 4, 55, rounds=3, seed=0))
    assert not np.array_equal(default, refine_labels(csr.indptr, csr.indices, labels, 4, 55, rounds=3, seed=1))
    assert not np.array_equal(default, refine_labels(csr.indptr, csr.indices, labels, 4, 55, rounds=4, seed=0))


def test_projection_refines_every_level_with_its_weights_and_seed(small_blocks):
    csr = canonical_csr(sbm_edges(8, 60, 2500, 0.8, seed=9)[0], 480)
    levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 8, target_entries=csr.num_entries // 16)
    assert len(levels) >= 2 and levels[1].node_weights is not None
    coarse_labels = np.random.default_rng(2).integers(0, 8, size=coarsest[0].shape[0])
    expected = coarse_labels
    for depth in reversed(range(len(levels))):
        level = levels[depth]
        expected = refine_labels(level.indptr, level.indices, expected[level.clusters], 8, 66, rounds=2,
                                 seed=5 + depth, node_weights=level.node_weights, edge_weights=level.edge_weights)
    got = project_labels(list(levels), coarse_labels.astype(np.int32), 8, 66, rounds=2, seed=5)
    assert got.dtype == np.int64
    assert project_labels(list(levels), coarse_labels.astype(np.int32), 8, 66, rounds=0).dtype == np.int64
    np.testing.assert_array_equal(got, expected)
    # Defaults: three rounds, seed 0.
    np.testing.assert_array_equal(project_labels(list(levels), coarse_labels, 8, 66),
                                  project_labels(list(levels), coarse_labels, 8, 66, rounds=3, seed=0))


def _star_case():
    """Part 0 (nodes 0-4) is 2 over capacity 3; part 1 = {5, 6} (room 1); part 2 = {7, 8} (room 1),
    not linked to part 0. Node 0 has 2 links to part 1 and none to its own part (gain 2); node 1
    has 1 link to part 1 and 1 to its own part (gain 0); nodes 2-4 link only inside part 0."""
    edges = np.array([[0, 0, 1, 1, 2, 3, 5, 7], [5, 6, 5, 2, 3, 4, 6, 8]])
    return canonical_csr(edges, 9), np.array([0, 0, 0, 0, 0, 1, 1, 2, 2])


def test_balance_sends_the_best_gain_up_to_the_room_and_returns_what_it_cannot_place():
    csr, labels = _star_case()
    balanced = balance_labels(csr.indptr, csr.indices, labels, 3, 3)
    expected = labels.copy()
    expected[0] = 1  # the best gain fills part 1's one place; part 2 has no link from part 0
    np.testing.assert_array_equal(balanced, expected)
    np.testing.assert_array_equal(labels, [0, 0, 0, 0, 0, 1, 1, 2, 2])  # the input is not modified


def test_balance_moves_a_single_node_of_excess_to_the_part_with_room():
    # Part 0 = {0, 1, 2, 3} is one over capacity 3. Node 0 links three times to part 1 = {4, 5, 6}
    # (full) and once to part 2 = {7} (room 2): it goes to part 2, the part with room.
    edges = np.array([[0, 0, 0, 0, 1, 2, 1, 4], [4, 5, 6, 7, 2, 3, 3, 5]])
    csr = canonical_csr(edges, 8)
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    expected = labels.copy()
    expected[0] = 2
    np.testing.assert_array_equal(balance_labels(csr.indptr, csr.indices, labels, 3, 3), expected)
    np.testing.assert_array_equal(balance_labels(csr.indptr, csr.indices, labels, 3, 4), labels)  # none over


def test_balance_leaves_a_node_without_a_neighbour_in_a_part_with_room(small_blocks):
    # Part 1 = {0, 1, 2} is one over capacity 2; node 0 is isolated, nodes 1-2 link only to each
    # other; part 0 = {3} has room but no link from part 1; part 2 = {4, 5} is full.
    csr = canonical_csr(np.array([[1, 4], [2, 5]]), 6)
    labels = np.array([1, 1, 1, 0, 2, 2])
    np.testing.assert_array_equal(balance_labels(csr.indptr, csr.indices, labels, 3, 2), labels)


def _best_moves_reference(csr, labels, room, over):
    """(node, target, gain) of every node of an over-full part that links to a part with room:
    the part with room it has most links to (no ties in the tests' graphs), links there minus
    links to its own part."""
    rows = csr.edge_rows()
    moves = {}
    for node in np.flatnonzero(over[labels]):
        parts = labels[csr.indices[rows == node]]
        own = int(np.count_nonzero(parts == labels[node]))
        counts = np.bincount(parts[(room[parts] > 0) & (parts != labels[node])], minlength=room.shape[0])
        if counts.max() > 0:
            assert np.count_nonzero(counts == counts.max()) == 1
            moves[int(node)] = (int(counts.argmax()), int(counts.max()) - own)
    return moves


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block_entries", [7, 20])
def test_each_candidate_picks_the_part_with_room_it_links_to_most(monkeypatch, seed, block_entries):
    from ttgnn.partition import refine as refine_module
    from ttgnn.partition.coarsen import _row_blocks

    # Part 0 (nodes 0-11) is over-full; parts 1-4 (20 nodes each) have room except part 4.
    # Each node of part 0 links to parts 1-4 with distinct counts (a permutation of 0, 1, 2, 3)
    # and to k of its own part, so its best part with room is unique.
    monkeypatch.setattr(coarsen_module, "_BLOCK_ENTRIES", block_entries)  # blocks of one row and of several
    rng = np.random.default_rng(seed)
    labels = np.r_[np.zeros(12, np.int64), np.repeat(np.arange(1, 5), 20)]
    members = {p: np.flatnonzero(labels == p) for p in range(5)}
    edges = []
    for node in range(12):
        for part, count in zip(range(1, 5), rng.permutation(4)):
            edges += [(node, other) for other in rng.choice(members[part], size=count, replace=False)]
        edges += [(node, other) for other in rng.choice(np.arange(12, dtype=np.int64)[np.arange(12) != node],
                                                         size=int(rng.integers(0, 3)), replace=False)]
    csr = canonical_csr(np.array(edges).T, 92)
    room = np.array([0, 5, 1, 3, 0])
    over = np.array([True, False, False, False, False])
    bounds = _row_blocks(csr.indptr, coarsen_module._BLOCK_ENTRIES)
    assert bounds.shape[0] > 3  # several blocks, so row offsets are exercised
    found = [refine_module._moves_out_of_block(csr.indptr, csr.indices, labels, room, over, first, last, 7)
             for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    got = {int(n): (int(t), int(g)) for f in found for n, t, g in zip(*f)}
    assert all(f[0].dtype == np.int64 for f in found)
    assert got == _best_moves_reference(csr, labels, room, over)


def test_hierarchy_shrinks_and_projection_composes_the_cluster_maps(small_blocks):
    csr = canonical_csr(sbm_edges(8, 60, 2500, 0.9, seed=6)[0], 480)
    levels, coarsest = coarsen_graph(csr.indptr, csr.indices, 30, target_entries=csr.num_entries // 4)
    assert levels and levels[0].indptr is csr.indptr and levels[0].edge_weights is None
    sizes = [level.indptr.shape[0] - 1 for level in levels] + [coarsest[0].shape[0] - 1]
    assert all(a > b for a, b in zip(sizes, sizes[1:]))
    assert coarsest[3].sum() == 480 and coarsest[3].max() <= 30  # node weights: input nodes, capped
    coarse_labels = np.arange(sizes[-1]) % 8
    expected = coarse_labels
    for level in reversed(levels):
        expected = expected[level.clusters]
    np.testing.assert_array_equal(project_labels(levels, coarse_labels, 8, 60, rounds=0), expected)
    assert coarsen_graph(csr.indptr, csr.indices, 30, target_entries=csr.num_entries)[0] == []


# ----------------------------------------------------------------------------- weighted ParHIP


def _weighted_reference(indptr, indices, vertex_weights, edge_weights, wide_vertex, wide_edge):
    """KaMinPar's layout built independently: header, offsets, ids, vertex then edge weights."""
    n, m = len(indptr) - 1, len(indices)
    version = 8 | (0 if wide_vertex else 16) | (0 if wide_edge else 32)
    parts = [np.array([version, n, m], dtype=np.uint64),
             (24 + 8 * (n + 1) + 4 * np.asarray(indptr, dtype=np.uint64)).astype(np.uint64),
             np.asarray(indices, dtype=np.uint32),
             np.asarray(vertex_weights, dtype=np.uint64 if wide_vertex else np.uint32),
             np.asarray(edge_weights, dtype=np.uint64 if wide_edge else np.uint32)]
    return b"".join(p.tobytes() for p in parts)


# Path 0-1-2-3 with weighted nodes and edges; the second case needs 64-bit weights.
_PATH = (np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2]))
_WEIGHT_CASES = {"32-bit": (np.array([5, 6, 7, 8]), np.array([10, 10, 1, 1, 30, 30]), False, False),
                 "64-bit vertex": (np.array([5, 2**31, 7, 8]), np.array([10, 10, 1, 1, 30, 30]), True, False),
                 "64-bit edge": (np.array([5, 6, 7, 8]), np.array([10, 10, 2**33, 2**33, 30, 30]), False, True)}


@pytest.fixture(scope="module", autouse=True)
def _weighted_writer_is_sound(tmp_path_factory):
    """KaMinPar aborts the process on a malformed file: check the bytes before any load."""
    for vertex_weights, edge_weights, wide_vertex, wide_edge in _WEIGHT_CASES.values():
        path = tmp_path_factory.mktemp("parhip") / "g.parhip"
        write_parhip(path, *_PATH, vertex_weights=vertex_weights, edge_weights=edge_weights)
        if path.read_bytes() != _weighted_reference(*_PATH, vertex_weights, edge_weights, wide_vertex, wide_edge):
            pytest.fail("write_parhip wrote a malformed weighted ParHIP file; not handing it to KaMinPar")


@needs_kaminpar
@pytest.mark.parametrize("case", list(_WEIGHT_CASES))
def test_weighted_parhip_round_trips_through_kaminpar(tmp_path, case):
    vertex_weights, edge_weights, wide_vertex, wide_edge = _WEIGHT_CASES[case]
    path = tmp_path / "g.parhip"
    size = write_parhip(path, *_PATH, vertex_weights=vertex_weights, edge_weights=edge_weights)
    weight_bytes = (8 if wide_vertex else 4) * 4 + (8 if wide_edge else 4) * 6
    assert size == path.stat().st_size == 24 + 8 * 5 + 4 * 6 + weight_bytes
    for compress in (False, True):
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=compress)
        assert graph.is_node_weighted() and graph.is_edge_weighted()
        assert [graph.node_weight(u) for u in range(4)] == vertex_weights.tolist()
        indptr, indices = _PATH
        for u in range(4):
            row = slice(indptr[u], indptr[u + 1])
            assert sorted(graph.neighbors(u)) == list(zip(indices[row].tolist(), edge_weights[row].tolist()))


@needs_kaminpar
def test_kaminpar_cuts_where_the_weights_say(tmp_path):
    """An 8-cycle: unweighted, every bisection into two paths cuts two edges; weighted, only the
    two light edges (2,3) and (6,7) make a cheap cut. Vertex weights then shift the balance."""
    cycle = canonical_csr(np.array([np.arange(8), (np.arange(8) + 1) % 8]), 8)
    rows = cycle.edge_rows()
    light = {frozenset((2, 3)), frozenset((6, 7))}
    edge_weights = np.array([1 if frozenset((a, b)) in light else 100 for a, b in zip(rows, cycle.indices)])
    path = tmp_path / "cycle.parhip"
    write_parhip(path, cycle.indptr, cycle.indices, edge_weights=edge_weights)
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    solver = kaminpar.KaMinPar(1, kaminpar.fast_context())
    for seed in range(3):
        kaminpar.reseed(seed)
        blocks = np.array(solver.compute_partition(graph, [4, 4]))
        assert set(np.flatnonzero(blocks == blocks[3]).tolist()) == {3, 4, 5, 6}
    # Now (2,3) and (6,7) are the heavy edges and node 0 weighs 3, so a part of weight <= 5
    # holding node 0 has two more nodes: {6, 7, 0} cuts 2, {7, 0, 1} and {0, 1, 2} cut 101.
    # Unit vertex weights would also allow {6, 7, 0, 1} (cut 2, weight 6).
    vertex_weights = np.array([3, 1, 1, 1, 1, 1, 1, 1])
    write_parhip(path, cycle.indptr, cycle.indices, vertex_weights=vertex_weights,
                 edge_weights=np.where(edge_weights == 1, 100, 1))
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    for seed in range(3):
        kaminpar.reseed(seed)
        blocks = np.array(solver.compute_partition(graph, [5, 5]))
        assert set(np.flatnonzero(blocks == blocks[0]).tolist()) == {6, 7, 0}


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(vertex_weights=np.array([1, 2])), ValueError, "vertex_weights must have shape (4,), got (2,)"),
    (dict(edge_weights=np.array([1, 1, 0, 0, 1, 1])), ValueError, "edge_weights must be >= 1, got 0"),
    (dict(vertex_weights=np.array([1, -1, 1, 1])), ValueError, "vertex_weights must be >= 0, got -1"),
    (dict(edge_weights=np.ones(6)), TypeError, "edge_weights must be integers, got dtype float64"),
])
def test_parhip_writer_rejects_bad_weights(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        write_parhip(tmp_path / "g.parhip", *_PATH, **kwargs)


# ----------------------------------------------------------------------------- the coarsened split
@needs_kaminpar
def test_splitter_coarsens_large_graphs_counts_and_logs_it(caplog):
    edge_index, block = sbm_edges(40, 150, 20000, 0.9, seed=2)
    csr = canonical_csr(edge_index, 6000)
    assert kaminpar_module.COARSEN_ENTRIES == 200_000_000
    assert KaMinParSplitter().coarsen_entries == kaminpar_module.COARSEN_ENTRIES
    with caplog.at_level(logging.INFO, logger="ttgnn.partition.kaminpar"):
        with KaMinParSplitter(num_threads=1, min_nodes=0, coarsen_entries=csr.num_entries) as splitter:
            labels = splitter(csr.indptr, csr.indices, 8, 750)  # zero slack: 8 x 750 = 6000
            assert splitter.calls["kaminpar-coarsened"] == 1 and splitter.calls["kaminpar"] == 1
            assert list(Path(splitter._folder.name).iterdir()) == []  # spilled levels and file gone
            small = canonical_csr(sbm_edges(4, 50, 600, 0.9)[0], 200)
            splitter(small.indptr, small.indices, 4, 50)  # below the threshold: the plain path
            assert splitter.calls["kaminpar-coarsened"] == 1 and splitter.calls["kaminpar"] == 2
    np.testing.assert_array_equal(np.bincount(labels, minlength=8), [750] * 8)
    assert _inside(labels, csr) > 0.8  # 5 planted blocks a part keep ~0.9 of the edges inside
    (line,) = [r.getMessage() for r in caplog.records if "coarsened KaMinPar split" in r.getMessage()]
    assert re.search(r"of 6000 nodes \(\d+ entries\) into 8 parts of <= 750: \d+ levels to \d+ coarse nodes", line)


@needs_kaminpar
def test_a_graph_that_does_not_shrink_goes_to_kaminpar_whole_with_a_warning(caplog):
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.9, seed=1)[0], 200)
    with KaMinParSplitter(num_threads=1, min_nodes=0, coarsen_entries=1, coarse_cluster_fraction=0.01) as splitter:
        labels = splitter(csr.indptr, csr.indices, 4, 50)  # clusters of at most 1 node
    assert splitter.calls["kaminpar-coarsened"] == 1
    assert "label propagation could not shrink a graph of 200 nodes" in caplog.text
    np.testing.assert_array_equal(np.bincount(labels, minlength=4), [50] * 4)
    assert _inside(labels, csr) > 0.8


@pytest.mark.parametrize("kwargs,message", [
    (dict(coarsen_entries=0), "coarsen_entries must be an int >= 1, got 0"),
    (dict(coarsen_rounds=-1), "coarsen_rounds must be an int >= 0, got -1"),
    (dict(coarse_cluster_fraction=0.0), "coarse_cluster_fraction must be a number in (0, 1], got 0.0"),
    (dict(refine_rounds=1.5), "refine_rounds must be an int >= 0, got 1.5"),
])
def test_splitter_rejects_bad_coarsening_arguments(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        KaMinParSplitter(**kwargs)


@pytest.fixture
def kaminpar_everywhere(monkeypatch):
    """Send every subgraph to KaMinPar (by default those under 50,000 nodes go to METIS)."""
    monkeypatch.setattr(reorder_module, "_KAMINPAR_MIN_NODES", 0)


@needs_kaminpar
def test_coarsened_order_is_a_bijection_close_to_the_plain_one(kaminpar_everywhere, caplog):
    """40,000 nodes in 160 planted blocks of 250, row shape 20 x 40 x 50 (no slack): the top
    level coarsened keeps nearly as many edges inside first-digit parts as KaMinPar on the whole
    graph, and every capacity is strict."""
    edge_index, _ = sbm_edges(160, 250, 100_000, 0.8, seed=0)
    csr = canonical_csr(edge_index, 40_000)
    shape = (20, 40, 50)
    plain = hierarchical_order(csr, shape, method="hierarchical-kaminpar", num_threads=1)
    with caplog.at_level(logging.INFO, logger="ttgnn.partition"):
        coarse = hierarchical_order(csr, shape, method="hierarchical-kaminpar", num_threads=1,
                                    coarsen_entries=csr.num_entries)
    check_order(coarse, 40_000, shape)
    assert "1 of the KaMinPar calls coarsened first" in caplog.text  # the top level only
    assert not np.array_equal(coarse.perm, plain.perm)
    assert coarse.quality["shared_prefix_1"] >= plain.quality["shared_prefix_1"] - 0.05
    assert coarse.quality["shared_prefix_1"] > 0.7  # random: 1/20
    again = hierarchical_order(csr, shape, method="hierarchical-kaminpar", num_threads=1,
                               coarsen_entries=csr.num_entries)
    np.testing.assert_array_equal(again.perm, coarse.perm)


@needs_kaminpar
def test_cache_key_names_the_threshold_only_when_it_is_reached(tmp_path, kaminpar_everywhere, monkeypatch):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    csr = canonical_csr(edge_index, 120)
    plain = hierarchical_order(csr, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path, num_threads=1,
                               coarsen_entries=csr.num_entries + 1)
    (plain_file,) = tmp_path.iterdir()
    assert plain_file.name.endswith("-hierarchical-kaminpar-seed0.npz")  # the key of before
    coarse = hierarchical_order(csr, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path, num_threads=1,
                                coarsen_entries=csr.num_entries)
    check_order(coarse, 120, (4, 4, 8))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and any(f"-hierarchical-kaminpar-coarsen{csr.num_entries}-seed0" in n for n in names)

    def no_compute(*args, **kwargs):
        raise AssertionError("recomputed")

    monkeypatch.setattr(reorder_module, "_compute_perm", no_compute)
    for threshold, expected in ((csr.num_entries, coarse), (None, plain)):
        again = hierarchical_order(csr, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path,
                                   coarsen_entries=threshold)
        np.testing.assert_array_equal(again.perm, expected.perm)
        assert again.method == "hierarchical-kaminpar"


@pytest.mark.parametrize("value,error", [(0, ValueError), (-5, ValueError), ("10", TypeError), (True, TypeError)])
def test_order_rejects_a_bad_threshold(value, error):
    with pytest.raises(error, match="coarsen_entries"):
        hierarchical_order(np.array([[0, 1], [1, 2]]), (2, 2), method="hierarchical-kaminpar", coarsen_entries=value)


# ---------------------------------------------------------------------- refinement's log and defaults
def _path_csr(n):
    """CSR of the path 0 - 1 - ... - (n - 1)."""
    rows = np.arange(n - 1)
    adj = sp.coo_matrix((np.ones(2 * (n - 1)), (np.r_[rows, rows + 1], np.r_[rows + 1, rows])), shape=(n, n)).tocsr()
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int64)


def test_balance_moves_one_boundary_node_per_round_for_eight_rounds_by_default(caplog):
    # Path of 22 nodes: part 0 holds nodes 0-19, part 1 nodes 20-21; capacity 11 (9 over, 9 room).
    # Only the node of part 0 next to part 1 can move in a round, so each round moves one node;
    # the default 8 rounds leave part 0 one node over (rebalance's fallback places it).
    indptr, indices = _path_csr(22)
    labels = np.r_[np.zeros(20), np.ones(2)].astype(np.int64)
    with caplog.at_level(logging.DEBUG, logger="ttgnn.partition.refine"):
        out = balance_labels(indptr, indices, labels, 2, 20)  # capacity 20: nothing to do, no round logged
        assert np.array_equal(out, labels) and caplog.messages == []
        out = balance_labels(indptr, indices, labels, 2, 11)
    assert np.array_equal(out, np.r_[np.zeros(12), np.ones(10)])  # nodes 19, 18, ..., 12 moved
    assert np.array_equal(out, balance_labels(indptr, indices, labels, 2, 11, rounds=8, seed=0))
    assert caplog.messages == [f"balance round {r}: 1 nodes moved, {10 - r} over capacity before"
                               for r in range(1, 9)]
    nine = balance_labels(indptr, indices, labels, 2, 11, rounds=9)
    assert np.array_equal(nine, np.r_[np.zeros(11), np.ones(11)])


def test_balance_breaks_ties_by_its_seed_and_seed_0_is_the_default():
    # 40 nodes of part 0 (capacity 20: 20 must leave), each linked once to each of four hubs, one
    # hub per part 1-4: every mover has equal links to four parts with room, so where it goes is
    # the seeded tie-break; the default is seed 0.
    n_over, hubs = 40, 4
    rows, cols = [], []
    for node in range(n_over):
        for hub in range(hubs):
            rows.append(node)
            cols.append(n_over + hub)
    adj = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_over + hubs,) * 2)
    adj = (adj + adj.T).tocsr()
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    labels = np.r_[np.zeros(n_over), 1 + np.arange(hubs)].astype(np.int64)
    default = balance_labels(indptr, indices, labels, 1 + hubs, 20)
    assert np.array_equal(default, balance_labels(indptr, indices, labels, 1 + hubs, 20, seed=0))
    others = [balance_labels(indptr, indices, labels, 1 + hubs, 20, seed=s) for s in (1, 2, 3)]
    assert all(not np.array_equal(default, other) for other in others)
    for out in [default, *others]:  # every draw is a valid balance: 20 left, moved nodes spread over the hubs
        assert np.bincount(out, minlength=1 + hubs)[0] == 20 and np.bincount(out).max() <= 20


def test_refinement_logs_how_many_nodes_it_moved(caplog):
    csr, labels = _cliques(4, 10, bridges=2)
    swapped = np.array([0, 1, 10, 11])
    noisy = labels.copy()
    noisy[swapped] = (noisy[swapped] + 1) % 4
    with caplog.at_level(logging.DEBUG, logger="ttgnn.partition.refine"):
        out = refine_labels(csr.indptr, csr.indices, noisy, 4, 12, rounds=1)
    moved = int(np.sum(out != noisy))
    assert moved > 0 and caplog.messages == [f"refinement moved {moved} nodes"]


def test_coarsening_stops_after_eight_levels_by_default():
    # A path of 4,096 nodes asked to shrink to no entries at all keeps shrinking for 9 levels;
    # the default max_levels stops it after 8.
    indptr, indices = _path_csr(4096)
    levels, graph = coarsen_graph(indptr, indices, 4096, 0)
    assert len(levels) == 8
    capped, capped_graph = coarsen_graph(indptr, indices, 4096, 0, max_levels=8)
    assert all(np.array_equal(a, b) for a, b in zip(graph, capped_graph))
    assert len(coarsen_graph(indptr, indices, 4096, 0, max_levels=9)[0]) == 9


def test_ids_and_weights_switch_to_64_bits_at_2_31():
    # Labels, cluster ids and summed weights below 2**31 are int32; from 2**31 on (graphs far past
    # this machine's memory) int64: checked on the rule itself, the graphs cannot be built here.
    narrow = coarsen_module._narrow_dtype
    assert [narrow(n) for n in (0, 1, 2**31 - 1)] == [np.int32] * 3
    assert [narrow(n) for n in (2**31, 2**32, 2**40)] == [np.int64] * 3
