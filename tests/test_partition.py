"""Tests of ttgnn.partition: node orders onto TT rows, capacities, quality, caching, bad input."""
import dataclasses
import logging
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttgnn.partition import METHODS, NodeOrder, canonical_csr, hierarchical_order, shared_prefix_fractions
from ttgnn.partition import reorder as reorder_module
from ttgnn.partition.cache import cache_file
from ttgnn.partition.split import metis_split, rebalance


def check_order(order: NodeOrder, num_nodes: int, row_shape) -> None:
    """perm is an injection into the rows, inv_perm its inverse, parts its digit prefixes."""
    num_rows = math.prod(row_shape)
    assert order.row_shape == tuple(row_shape)
    assert order.perm.dtype == np.int64 and order.perm.shape == (num_nodes,)
    assert order.inv_perm.dtype == np.int64 and order.inv_perm.shape == (num_rows,)
    assert order.perm.min() >= 0 and order.perm.max() < num_rows
    assert np.unique(order.perm).shape[0] == num_nodes
    np.testing.assert_array_equal(order.inv_perm[order.perm], np.arange(num_nodes))
    assert np.count_nonzero(order.inv_perm == -1) == num_rows - num_nodes
    assert len(order.parts) == len(row_shape) - 1
    for level, part in enumerate(order.parts):
        stride = math.prod(row_shape[level + 1:])
        np.testing.assert_array_equal(part, order.perm // stride)
        # The capacity of a level-`level` part is the rows below it.
        assert np.bincount(part).max() <= stride
        assert part.max() < math.prod(row_shape[:level + 1])


def sbm_edges(num_blocks, block_size, num_edges, p_in, seed=0):
    """Planted partition with shuffled node ids; returns (edge_index, block of every node)."""
    rng = np.random.default_rng(seed)
    num_nodes = num_blocks * block_size
    src = rng.integers(0, num_nodes, num_edges)
    inside = rng.random(num_edges) < p_in
    dst = np.where(inside, (src // block_size) * block_size + rng.integers(0, block_size, num_edges),
                   rng.integers(0, num_nodes, num_edges))
    relabel = rng.permutation(num_nodes)
    block = np.empty(num_nodes, dtype=np.int64)
    block[relabel] = np.arange(num_nodes) // block_size
    return np.stack([relabel[src], relabel[dst]]), block


# ----------------------------------------------------------------------------- bijection
@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_a_bijection_onto_used_rows(method):
    edge_index, _ = sbm_edges(6, 50, 1500, 0.8)
    row_shape = (7, 7, 7)
    order = hierarchical_order(edge_index, row_shape, method=method)
    check_order(order, 300, row_shape)
    assert order.method == method and order.seed == 0
    assert set(order.quality) >= {"shared_prefix_1", "shared_prefix_2", "seconds"}


@st.composite
def graphs_and_shapes(draw):
    num_nodes = draw(st.integers(1, 70))
    num_edges = draw(st.integers(0, 4 * num_nodes))
    ids = st.integers(0, num_nodes - 1)
    edges = draw(st.lists(st.tuples(ids, ids), min_size=num_edges, max_size=num_edges))
    num_cores = draw(st.integers(1, 4))
    row_shape = draw(st.lists(st.integers(1, 9), min_size=num_cores, max_size=num_cores))
    # Grow the first factor until the shape covers the nodes (it may stay far above N).
    while math.prod(row_shape) < num_nodes:
        row_shape[draw(st.integers(0, num_cores - 1))] += 1
    edge_index = np.array(edges, dtype=np.int64).reshape(-1, 2).T
    return edge_index, num_nodes, tuple(row_shape)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=graphs_and_shapes(), method=st.sampled_from(METHODS), seed=st.integers(0, 5))
def test_random_graphs_give_injective_orders_within_capacity(data, method, seed):
    edge_index, num_nodes, row_shape = data
    order = hierarchical_order(edge_index, row_shape, method=method, seed=seed, num_nodes=num_nodes)
    check_order(order, num_nodes, row_shape)


@pytest.mark.parametrize("method", METHODS)
def test_csr_input_equals_edge_index_input(method):
    edge_index, _ = sbm_edges(4, 40, 600, 0.8, seed=3)
    csr = canonical_csr(edge_index, 160)
    from_csr = hierarchical_order((csr.indptr, csr.indices), (6, 6, 6), method=method)
    from_edges = hierarchical_order(edge_index, (6, 6, 6), method=method)
    np.testing.assert_array_equal(from_csr.perm, from_edges.perm)


def test_nested_list_is_an_edge_index_and_tuple_is_csr():
    as_list = canonical_csr([[0, 1], [1, 2]])
    np.testing.assert_array_equal(as_list.indptr, [0, 1, 3, 4])
    as_tuple = canonical_csr((np.array([0, 1, 2]), np.array([1, 0])))
    np.testing.assert_array_equal(as_tuple.indptr, [0, 1, 2])


def test_directed_duplicate_and_self_loop_edges_are_normalised():
    edges = np.array([[0, 1, 1, 2, 3, 3], [1, 0, 2, 2, 0, 0]])
    csr = canonical_csr(edges, 5)
    np.testing.assert_array_equal(csr.indptr, [0, 2, 4, 5, 6, 6])
    np.testing.assert_array_equal(csr.indices, [1, 3, 0, 2, 1, 0])


# ----------------------------------------------------------------------------- capacities
def test_rebalance_moves_exactly_the_excess_and_prefers_loosely_connected_nodes():
    # Part 0: a 5-clique {0..4} and node 5, which hangs off the clique by one edge but has two
    # edges into part 1. Capacity 5 forces one node out: it must be node 5, and it goes to part 1.
    clique = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    edges = np.array(clique + [(4, 5), (5, 6), (5, 7), (6, 7)]).T
    csr = canonical_csr(edges, 10)
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 2])
    out = rebalance(csr.indptr, csr.indices, labels, nparts=3, capacity=5)
    assert np.bincount(out, minlength=3).max() <= 5
    assert np.count_nonzero(out != labels) == 1
    assert out[5] == 1


def test_rebalance_moves_the_fewest_nodes_on_heavy_overload():
    rng = np.random.default_rng(0)
    edge_index = rng.integers(0, 400, size=(2, 3000))
    csr = canonical_csr(edge_index, 400)
    labels = np.zeros(400, dtype=np.int64)
    labels[:40] = rng.integers(1, 8, 40)  # part 0 holds 360 of 400 nodes
    out = rebalance(csr.indptr, csr.indices, labels, nparts=8, capacity=50)
    counts = np.bincount(out, minlength=8)
    assert counts.max() <= 50 and counts.sum() == 400
    assert np.count_nonzero(out != labels) == 360 - 50  # only part 0's excess moves


def test_rebalance_rejects_impossible_capacity():
    with pytest.raises(ValueError, match="cannot hold"):
        rebalance(np.array([0, 0, 0]), np.array([], dtype=np.int64), np.array([0, 0]), nparts=1, capacity=1)


@pytest.mark.parametrize("nparts,capacity", [(55, 56), (7, 100), (2, 350), (64, 11)])
def test_metis_split_respects_tight_capacities(nparts, capacity):
    edge_index, _ = sbm_edges(10, 70, 5000, 0.7, seed=1)
    csr = canonical_csr(edge_index, 700)
    labels = metis_split(csr.indptr, csr.indices, nparts, capacity, seed=0)
    assert labels.shape == (700,) and labels.min() >= 0 and labels.max() < nparts
    assert np.bincount(labels).max() <= capacity


def test_tight_shape_on_a_larger_graph():
    # 3,000 nodes onto 3,024 rows: every level is nearly full, so METIS's slack must be repaired.
    edge_index, _ = sbm_edges(12, 250, 30_000, 0.6, seed=2)
    order = hierarchical_order(edge_index, (12, 14, 18))
    check_order(order, 3000, (12, 14, 18))


# ----------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_order(method):
    edge_index, _ = sbm_edges(5, 60, 1500, 0.8, seed=4)
    first = hierarchical_order(edge_index, (6, 7, 8), method=method, seed=7)
    second = hierarchical_order(edge_index, (6, 7, 8), method=method, seed=7)
    np.testing.assert_array_equal(first.perm, second.perm)


def test_random_order_depends_on_seed():
    edge_index, _ = sbm_edges(5, 60, 1500, 0.8, seed=4)
    first = hierarchical_order(edge_index, (6, 7, 8), method="random", seed=1)
    second = hierarchical_order(edge_index, (6, 7, 8), method="random", seed=2)
    assert np.any(first.perm != second.perm)


# ----------------------------------------------------------------------------- quality
def test_planted_blocks_share_their_first_digit():
    num_blocks, block_size = 12, 240  # capacity of a first digit: 16 * 16 = 256
    edge_index, block = sbm_edges(num_blocks, block_size, 25_000, 0.9, seed=5)
    order = hierarchical_order(edge_index, (num_blocks, 16, 16))
    first_digit = order.parts[0]
    majority = []
    for b in range(num_blocks):
        counts = np.bincount(first_digit[block == b], minlength=num_blocks)
        assert counts.max() / block_size >= 0.95, f"block {b}: {counts.max()} of {block_size}"
        majority.append(int(counts.argmax()))
    assert len(set(majority)) == num_blocks  # distinct blocks get distinct digits


def test_hierarchy_beats_flat_and_baselines_at_the_second_digit():
    edge_index, _ = sbm_edges(8, 200, 16_000, 0.9, seed=6)
    quality = {m: hierarchical_order(edge_index, (8, 16, 16), method=m).quality for m in METHODS}
    assert quality["hierarchical-metis"]["shared_prefix_1"] >= 0.85
    assert quality["metis-flat"]["shared_prefix_1"] >= 0.85
    assert quality["hierarchical-metis"]["shared_prefix_2"] > 2 * quality["metis-flat"]["shared_prefix_2"]
    assert quality["hierarchical-metis"]["shared_prefix_1"] > 4 * quality["random"]["shared_prefix_1"]


def test_shared_prefix_fractions_match_brute_force():
    rng = np.random.default_rng(8)
    edge_index = rng.integers(0, 90, size=(2, 400))
    perm = rng.permutation(5 * 4 * 6)[:90]
    got = shared_prefix_fractions(edge_index, perm, (5, 4, 6), num_nodes=90)
    pairs = {(min(u, v), max(u, v)) for u, v in edge_index.T.tolist() if u != v}
    for level, stride in ((1, 24), (2, 6)):
        expected = np.mean([perm[u] // stride == perm[v] // stride for u, v in pairs])
        assert got[f"shared_prefix_{level}"] == pytest.approx(expected, abs=1e-12)


def test_digits_and_frozen_result():
    edge_index, _ = sbm_edges(3, 20, 200, 0.8)
    order = hierarchical_order(edge_index, (3, 4, 5))
    digits = order.digits()
    np.testing.assert_array_equal((digits[:, 0] * 4 + digits[:, 1]) * 5 + digits[:, 2], order.perm)
    with pytest.raises(dataclasses.FrozenInstanceError):
        order.perm = order.perm


# ----------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", ["isolated", "components", "sparse_rows", "one_node", "edgeless",
                                  "more_parts_than_nodes", "nparts_one", "single_core"])
def test_edge_cases(method, case):
    if case == "isolated":  # ids 40..59 never appear in an edge
        edge_index, _ = sbm_edges(2, 20, 200, 0.9)
        num_nodes, row_shape = 60, (4, 4, 4)
    elif case == "components":  # five disjoint cliques
        edge_index = np.array([(10 * c + a, 10 * c + b) for c in range(5) for a in range(10)
                               for b in range(a + 1, 10)]).T
        num_nodes, row_shape = 50, (5, 2, 5)
    elif case == "sparse_rows":  # N far below the rows
        edge_index = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
        num_nodes, row_shape = 10, (10, 10, 10)
    elif case == "one_node":
        edge_index = np.zeros((2, 0), dtype=np.int64)
        num_nodes, row_shape = 1, (2, 2, 2)
    elif case == "edgeless":
        edge_index = np.zeros((2, 0), dtype=np.int64)
        num_nodes, row_shape = 50, (5, 5, 2)
    elif case == "more_parts_than_nodes":  # 30 nodes, 8 * 8 second-level parts
        edge_index, _ = sbm_edges(3, 10, 100, 0.9)
        num_nodes, row_shape = 30, (8, 8, 8)
    elif case == "nparts_one":
        edge_index, _ = sbm_edges(3, 10, 100, 0.9)
        num_nodes, row_shape = 30, (1, 6, 1, 5)
    else:
        edge_index, _ = sbm_edges(3, 10, 100, 0.9)
        num_nodes, row_shape = 30, (31,)
    order = hierarchical_order(edge_index, row_shape, method=method, num_nodes=num_nodes)
    check_order(order, num_nodes, row_shape)


def test_components_land_in_their_own_parts():
    edge_index = np.array([(10 * c + a, 10 * c + b) for c in range(5) for a in range(10)
                           for b in range(a + 1, 10)]).T
    order = hierarchical_order(edge_index, (5, 2, 5))
    assert order.quality["shared_prefix_1"] == 1.0
    for c in range(5):
        assert np.unique(order.parts[0][10 * c:10 * c + 10]).shape[0] == 1


def test_one_node_csr_and_empty_quality():
    order = hierarchical_order((np.array([0, 0]), np.array([], dtype=np.int64)), (1, 1))
    np.testing.assert_array_equal(order.perm, [0])
    assert math.isnan(order.quality["shared_prefix_1"])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("graph,kwargs,error,match", [
    (np.array([[0, 1], [1, 5]]), {"num_nodes": 4}, ValueError, r"node id 5, out of range.*\[0, 4\)"),
    (np.array([[0, -1], [1, 2]]), {}, ValueError, "negative node id -1"),
    (np.array([[0, 1], [1, 2]]), {"row_shape": (1, 2)}, ValueError, r"covers 2 rows, fewer than.*3 nodes"),
    (np.array([[0, 1, 2], [1, 2, 0], [0, 0, 0]]), {}, ValueError, r"shape \(2, E\)"),
    (np.array([0, 1, 2]), {}, ValueError, "2-dimensional"),
    (np.array([[0.0, 1.0], [1.0, 2.0]]), {}, TypeError, "integers"),
    (np.array([[True, False], [False, True]]), {}, TypeError, "integers"),
    ("edges", {}, TypeError, "CSR tuple"),
    ((np.array([0, 2, 1, 2]), np.array([1, 0])), {}, ValueError, "non-decreasing"),
    ((np.array([0, 1, 3]), np.array([1, 0])), {}, ValueError, "end at len"),
    ((np.array([0, 1, 2]), np.array([1, 7])), {}, ValueError, "out of range"),
    ((np.array([0, 1, 2]), np.array([1.0, 0.0])), {}, TypeError, "integers"),
    ((np.array([0, 1, 2]), np.array([1, 0])), {"num_nodes": 3}, ValueError, "does not match"),
    (np.zeros((2, 0), dtype=np.int64), {}, ValueError, "num_nodes is required"),
    (np.array([[0], [1]]), {"method": "louvain"}, ValueError, "unknown method 'louvain'"),
    (np.array([[0], [1]]), {"row_shape": 4}, TypeError, "row_shape must be a sequence"),
    (np.array([[0], [1]]), {"row_shape": (2.0, 2)}, TypeError, "row_shape must contain ints"),
    (np.array([[0], [1]]), {"row_shape": (0, 4)}, ValueError, ">= 1"),
    (np.array([[0], [1]]), {"seed": 1.5}, TypeError, "seed must be an int"),
    (np.array([[0], [1]]), {"seed": -1}, ValueError, "seed must be in"),
    (np.array([[0], [1]]), {"num_nodes": 0}, ValueError, "num_nodes must be >= 1"),
])
def test_bad_input_raises_clear_errors(graph, kwargs, error, match):
    kwargs = dict(kwargs)
    row_shape = kwargs.pop("row_shape", (4, 4))
    with pytest.raises(error, match=match):
        hierarchical_order(graph, row_shape, **kwargs)


# ----------------------------------------------------------------------------- caching
def _no_compute(*args, **kwargs):
    raise AssertionError("the order was recomputed instead of loaded from the cache")


def test_cache_hit_skips_the_computation(tmp_path, monkeypatch):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    first = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, seed=3)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"
    monkeypatch.setattr(reorder_module, "_compute_perm", _no_compute)
    second = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, seed=3)
    np.testing.assert_array_equal(first.perm, second.perm)
    assert second.quality == first.quality
    check_order(second, 120, (4, 4, 8))
    # Another key (seed, shape, method or graph) is a miss, not a stale hit.
    with pytest.raises(AssertionError, match="recomputed"):
        hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, seed=4)
    with pytest.raises(AssertionError, match="recomputed"):
        hierarchical_order(edge_index[:, :-50], (4, 4, 8), cache_dir=tmp_path, seed=3, num_nodes=120)


def _cached_path(tmp_path, edge_index, row_shape, method, seed):
    graph_hash = canonical_csr(edge_index).content_hash()
    return cache_file(tmp_path, graph_hash, row_shape, method, seed)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tampered_perm", "other_key"])
def test_corrupted_or_mismatched_cache_is_reported_and_recomputed(tmp_path, caplog, damage):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    expected = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    path = _cached_path(tmp_path, edge_index, (4, 4, 8), "hierarchical-metis", 0)
    assert path.exists()
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "tampered_perm":
        with np.load(path) as archive:
            meta, perm = archive["meta"], archive["perm"].copy()
        perm[[0, 1]] = perm[[1, 0]]  # still a valid injection: only the checksum can tell
        np.savez(path, perm=perm, meta=meta)
    else:
        hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, method="random")
        other = _cached_path(tmp_path, edge_index, (4, 4, 8), "random", 0)
        other.replace(path)
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        again = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    assert any("corrupted or mismatched" in r.getMessage() and str(path) in r.getMessage()
               for r in caplog.records)
    np.testing.assert_array_equal(again.perm, expected.perm)
    # The file was rewritten: the next call is a clean hit without a warning.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    assert not caplog.records
    assert not list(tmp_path.glob("*.tmp"))


# ----------------------------------------------------------------------------- real data
@pytest.mark.data
def test_ogbn_arxiv_hierarchical_metis_is_10x_random(data_root, tmp_path):
    from ttgnn.data import load_dataset

    dataset = load_dataset("ogbn-arxiv", root=data_root, cache_dir=tmp_path)
    assert dataset.num_nodes == 169_343
    row_shape = (55, 55, 56)
    ours = hierarchical_order(dataset.edge_index, row_shape, num_nodes=dataset.num_nodes)
    rand = hierarchical_order(dataset.edge_index, row_shape, method="random", num_nodes=dataset.num_nodes)
    check_order(ours, dataset.num_nodes, row_shape)
    assert rand.quality["shared_prefix_1"] == pytest.approx(1 / 55, rel=0.1)
    assert ours.quality["shared_prefix_1"] >= 10 * rand.quality["shared_prefix_1"]
    assert ours.quality["shared_prefix_2"] >= 10 * rand.quality["shared_prefix_2"]


# ----------------------------------------------------------------------------- CLI
def _write_raw_folder(folder, edge_index, num_nodes):
    """A minimal dataset in OGB's raw layout (what ttgnn.data reads)."""
    import gzip

    def write(path, lines):
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as fh:
            fh.write("".join(f"{line}\n" for line in lines))

    write(folder / "raw" / "num-node-list.csv.gz", [num_nodes])
    write(folder / "raw" / "edge.csv.gz", [f"{u},{v}" for u, v in edge_index.T.tolist()])
    write(folder / "raw" / "node-label.csv.gz", [0] * num_nodes)
    for name, ids in (("train", range(0, 100)), ("valid", range(100, 150)), ("test", range(150, num_nodes))):
        write(folder / "split" / "random" / f"{name}.csv.gz", list(ids))


def test_cli_partition_prints_quality_and_uses_the_cache(tmp_path, capsys):
    from ttgnn.cli import main

    edge_index, _ = sbm_edges(4, 50, 1200, 0.9, seed=9)
    _write_raw_folder(tmp_path / "toy", edge_index, 200)
    args = ["partition", "--dataset", str(tmp_path / "toy"), "--cache-dir", str(tmp_path / "cache"),
            "--row-shape", "4,8,8", "--method", "random", "hierarchical-metis", "--output", str(tmp_path / "perm")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "200 nodes" in out and "[4, 8, 8]" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    expected = hierarchical_order(edge_index, (4, 8, 8), num_nodes=200).quality
    assert float(lines["hierarchical-metis"][1]) == pytest.approx(expected["shared_prefix_1"], abs=5e-5)
    assert float(lines["hierarchical-metis"][2]) == pytest.approx(expected["shared_prefix_2"], abs=5e-5)
    perm = np.load(tmp_path / "perm.hierarchical-metis")
    np.testing.assert_array_equal(perm, hierarchical_order(edge_index, (4, 8, 8), num_nodes=200).perm)
    assert len(list((tmp_path / "cache").glob("order-*.npz"))) == 2
    # Bad input is an error message and exit status 2, not a traceback.
    assert main(["partition", "--dataset", str(tmp_path / "toy"), "--row-shape", "4,4,4", "--no-cache"]) == 2
    assert "covers 64 rows, fewer than the graph's 200 nodes" in capsys.readouterr().err
