"""Tests of ttgnn.partition.reorder: node orders onto TT rows, capacities, determinism, quality, CLI."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttgnn.partition import METHODS, CSRGraph, canonical_csr, hierarchical_order, shared_prefix_fractions
from ttgnn.partition import reorder as reorder_module

from partition_graphs import check_order, sbm_edges


# ----------------------------------------------------------------------------- bijection
@pytest.mark.parametrize("perm, error, message", [
    ([0, 0, 1], ValueError, "perm maps two nodes to one row"),
    ([0, -1, 1], ValueError, r"perm leaves the row range \[0, 4\)"),
    ([0, 4, 1], ValueError, r"perm leaves the row range \[0, 4\)"),
    ([0.0, 3.0, 1.0], TypeError, "perm must be an integer array, got float64"),
    ([True, False], TypeError, "perm must be an integer array, got bool"),
    ([[0, 1]], ValueError, r"perm must be 1-D \(one row per node\), got shape \(1, 2\)"),
])
def test_order_from_perm_refuses_a_map_that_is_not_injective_into_the_rows(perm, error, message):
    # It is public: a duplicate used to become a silent non-bijection, -1 the last row.
    with pytest.raises(error, match=message):
        reorder_module.order_from_perm(np.array(perm), (2, 2), "given", 0, {})


def test_order_from_perm_derives_the_inverse_and_the_parts_of_a_valid_map():
    order = reorder_module.order_from_perm([3, 0, 1], (2, 2), "given", 5, {"seconds": 1.0})
    assert order.perm.dtype == np.int64 and order.perm.tolist() == [3, 0, 1]
    assert order.inv_perm.tolist() == [1, 2, -1, 0]
    assert [p.tolist() for p in order.parts] == [[1, 0, 0]]
    assert (order.method, order.seed, order.quality) == ("given", 5, {"seconds": 1.0})
    with pytest.raises(ValueError, match=r"row_shape factors must be >= 1, got \[0, 2\]"):
        reorder_module.order_from_perm([0], (0, 2), "given", 0, {})
    for row_shape in [(2.9, 2.5), ("2", "2")]:  # (2.9, 2.5) was truncated to (2, 2)
        with pytest.raises(TypeError, match="row_shape must contain ints"):
            reorder_module.order_from_perm([0], row_shape, "given", 0, {})


def test_a_row_shape_far_above_the_nodes_is_checked_without_a_row_sized_array_and_named_when_it_cannot_fit(
        monkeypatch):
    # --row-shape 1000000,1000000 on Cora failed with numpy's "Unable to allocate 931. GiB ... bool"
    # (check_perm's bitmap), then 7 TiB for inv_perm, naming neither the row shape nor what to change.
    rows = 10**12
    reorder_module.check_perm(np.array([rows - 1, 0, 5 * 10**11]), rows)  # no 931 GiB bitmap
    with pytest.raises(ValueError, match="perm maps two nodes to one row"):
        reorder_module.check_perm(np.array([rows - 1, 7, rows - 1]), rows)
    real_full = np.full

    def full(shape, *args, **kwargs):  # what numpy raises where the memory is not there
        if math.prod(np.atleast_1d(shape)) > 10**9:
            raise MemoryError("Unable to allocate 7.28 TiB for an array")
        return real_full(shape, *args, **kwargs)

    monkeypatch.setattr(reorder_module.np, "full", full)
    with pytest.raises(MemoryError, match=r"row shape's 1,000,000,000,000 TT rows .*7,450.6 GiB.*row shape "
                       r"\[1000000, 1000000\] for 3 nodes; give one whose product is nearer the number of nodes"):
        reorder_module.order_from_perm([0, 1, 2], (10**6, 10**6), "given", 0, {})


@pytest.mark.parametrize("method", METHODS)
def test_a_row_shape_beyond_the_machines_memory_is_refused_before_any_partitioning(method, monkeypatch):
    # (2**31, 2**31) on a small graph allocated 16 GiB in chunk_split before order_from_perm's guard;
    # identity, random and rcm ended in numpy's "array is too big" ValueError.
    edge_index, _ = sbm_edges(3, 20, 100, 0.8)
    monkeypatch.setattr(reorder_module, "_physical_memory", lambda: 2**34)  # 16 GiB
    monkeypatch.setattr(reorder_module, "_compute_perm", lambda *args, **kwargs: pytest.fail("partitioned"))
    with pytest.raises(MemoryError, match=r"row shape's 4,611,686,018,427,387,904 TT rows .* row shape "
                       r"\[2147483648, 2147483648\] for 60 nodes; give one"):
        hierarchical_order(edge_index, (2**31, 2**31), method=method)
    with pytest.raises(MemoryError, match=r"row shape's 4,294,967,296 TT rows back to a node \(32.0 GiB\)"):  # 8 bytes a row
        hierarchical_order(edge_index, (2**16, 2**16), method=method)


def test_order_from_perm_names_the_row_shape_when_numpy_calls_the_array_too_big():
    with pytest.raises(MemoryError, match=r"row shape \[2147483648, 2147483648\] for 2 nodes"):
        reorder_module.order_from_perm([0, 1], (2**31, 2**31), "given", 0, {})


def test_chunk_split_is_balanced_and_allocates_nothing_per_part():
    from ttgnn.partition.split import balanced_sizes, chunk_split

    for num_nodes in range(0, 40):
        for nparts in range(1, 45):
            labels = chunk_split(num_nodes, nparts)
            assert labels.dtype == np.int64
            np.testing.assert_array_equal(labels, np.repeat(np.arange(nparts), balanced_sizes(num_nodes, nparts)))
    np.testing.assert_array_equal(chunk_split(5, 2**62), np.arange(5))  # no 2**62-entry array


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


# ----------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_order(method):
    edge_index, _ = sbm_edges(5, 60, 1500, 0.8, seed=4)
    first = hierarchical_order(edge_index, (6, 7, 8), method=method, seed=7)
    second = hierarchical_order(edge_index, (6, 7, 8), method=method, seed=7)
    np.testing.assert_array_equal(first.perm, second.perm)


@pytest.mark.parametrize("method", ["random", "hierarchical-metis"])
def test_largest_seed_is_accepted(method):
    edge_index, _ = sbm_edges(2, 20, 100, 0.8)
    order = hierarchical_order(edge_index, (4, 4, 4), method=method, seed=2**31 - 1)
    assert order.seed == 2**31 - 1
    check_order(order, 40, (4, 4, 4))


def test_random_order_depends_on_seed():
    edge_index, _ = sbm_edges(5, 60, 1500, 0.8, seed=4)
    first = hierarchical_order(edge_index, (6, 7, 8), method="random", seed=1)
    second = hierarchical_order(edge_index, (6, 7, 8), method="random", seed=2)
    assert np.any(first.perm != second.perm)


@pytest.mark.parametrize("method", ["metis-flat", "hierarchical-metis"])
def test_metis_orders_depend_on_seed(method):
    # A random graph has many equally good splits, so METIS's seed shows. (Seeds 0 and 1 give the
    # same parts: METIS seeds the C library's generator, which treats 0 as 1.)
    edge_index = np.random.default_rng(0).integers(0, 300, size=(2, 900))
    first, again, other = (hierarchical_order(edge_index, (4, 8, 10), method=method, seed=seed).perm
                           for seed in (2, 2, 3))
    np.testing.assert_array_equal(first, again)
    assert np.count_nonzero(first != other) > 100


def test_metis_flat_keeps_the_id_order_inside_a_part():
    edge_index, _ = sbm_edges(6, 500, 20_000, 0.8, seed=1)
    order = hierarchical_order(edge_index, (6, 25, 25), method="metis-flat")
    for part in range(6):
        rows = order.perm[order.parts[0] == part]  # in node-id order
        assert rows.shape[0] > 400 and np.all(np.diff(rows) > 0)


def test_rcm_gives_a_shuffled_path_bandwidth_one():
    ids = np.random.default_rng(0).permutation(200)
    edge_index = np.array([ids[:-1], ids[1:]])  # a path through the nodes in random id order
    order = hierarchical_order(edge_index, (10, 20), method="rcm")
    assert np.abs(order.perm[edge_index[0]] - order.perm[edge_index[1]]).max() == 1


def test_hierarchical_kaminpar_seed_threads_and_splitter(monkeypatch, caplog):
    import logging

    from ttgnn.partition import kaminpar

    edge_index = np.random.default_rng(0).integers(0, 300, size=(2, 900))
    threads = []
    real_init = kaminpar.KaMinParSplitter.__init__

    def spy_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        threads.append(self.num_threads)

    monkeypatch.setattr(kaminpar.KaMinParSplitter, "__init__", spy_init)
    # Small subgraphs go to METIS inside the KaMinPar order, with the same seed.
    first, other = (hierarchical_order(edge_index, (4, 8, 10), method="hierarchical-kaminpar", seed=seed).perm
                    for seed in (2, 3))
    assert np.count_nonzero(first != other) > 100
    monkeypatch.setattr("os.cpu_count", lambda: 8)  # more threads than CPUs run as many as there are
    hierarchical_order(edge_index, (4, 8, 10), method="hierarchical-kaminpar", num_threads=3)
    assert threads == [1, 1, 3]  # one thread unless asked (the same seed, the same order)
    # Every subgraph to KaMinPar: the top graph and its four parts.
    monkeypatch.setattr(reorder_module, "_KAMINPAR_MIN_NODES", 0)
    with caplog.at_level(logging.INFO, logger="ttgnn.partition.reorder"):
        order = hierarchical_order(edge_index, (4, 8, 10), method="hierarchical-kaminpar")
    assert "KaMinPar split 5 subgraphs, METIS 0 (those under 0 nodes)" in caplog.text
    check_order(order, 300, (4, 8, 10))
    assert order.quality["shared_prefix_2"] > 2 * hierarchical_order(edge_index, (4, 8, 10), method="random").quality[
        "shared_prefix_2"]


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


def test_quality_counts_nodes_undirected_edges_and_seconds():
    import time

    from ttgnn.partition import canonical_csr

    edge_index, _ = sbm_edges(3, 20, 200, 0.8)
    csr = canonical_csr(edge_index, 60)
    started = time.perf_counter()
    order = hierarchical_order(edge_index, (3, 4, 5))
    elapsed = time.perf_counter() - started
    assert 0.0 < order.quality["seconds"] <= elapsed
    assert order.quality["num_nodes"] == 60
    assert type(order.quality["num_edges"]) is int and order.quality["num_edges"] == csr.num_entries // 2


def test_digits_and_frozen_result():
    edge_index, _ = sbm_edges(3, 20, 200, 0.8)
    order = hierarchical_order(edge_index, (3, 4, 5))
    digits = order.digits()
    assert digits.dtype == np.int64 and digits.shape == (60, 3)
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


@pytest.mark.parametrize("method,name,levels", [("hierarchical-metis", "METIS", 2), ("metis-flat", "METIS", 1),
                                               ("hierarchical-kaminpar", "KaMinPar", 2)])
def test_progress_bars_count_the_splits_of_each_level(capsys, method, name, levels):
    edge_index, _ = sbm_edges(4, 30, 600, 0.9, seed=2)
    hierarchical_order(edge_index, (4, 5, 6), method=method)  # no bar unless asked
    assert capsys.readouterr().err == ""
    hierarchical_order(edge_index, (4, 5, 6), method=method, progress=True)
    err = capsys.readouterr().err
    assert f"{name} level 1/2: 100%" in err and "| 1/1 [" in err  # one graph split at level 1
    if levels == 2:
        assert f"{name} level 2/2: 100%" in err and "| 4/4 [" in err  # its four parts at level 2
    else:  # metis-flat cuts level 2 into chunks: no bar
        assert "level 2/2" not in err
    assert "part/s]" in err
    assert "level 3" not in err and "2/1" not in err and "8/4" not in err
    # Nothing to split: no bar.
    hierarchical_order(np.zeros((2, 0), dtype=np.int64), (4, 5, 6), method=method, num_nodes=100, progress=True)
    assert capsys.readouterr().err == ""


def test_progress_without_tqdm_still_orders(monkeypatch):
    import sys

    from ttgnn.partition import canonical_csr

    edge_index, _ = sbm_edges(4, 30, 600, 0.9, seed=2)
    csr = canonical_csr(edge_index, 120)  # building a CSR from edges needs tqdm itself
    expected = hierarchical_order(csr, (4, 5, 6)).perm
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # `from tqdm.auto import tqdm` fails
    np.testing.assert_array_equal(hierarchical_order(csr, (4, 5, 6), progress=True).perm, expected)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("graph,kwargs,error,match", [
    (np.array([[0, 1], [1, 2]]), {"row_shape": (1, 2)}, ValueError, r"covers 2 rows, fewer than.*3 nodes"),
    (np.array([[0], [1]]), {"method": "louvain"}, ValueError, "unknown method 'louvain'"),
    (np.array([[0], [1]]), {"row_shape": 4}, TypeError, "row_shape must be a sequence of ints, got int"),
    (np.array([[0], [1]]), {"row_shape": ()}, ValueError, "row_shape must have at least one factor"),
    (np.array([[0], [1]]), {"row_shape": (2.0, 2)}, TypeError, "row_shape must contain ints"),
    (np.array([[0], [1]]), {"row_shape": (0, 4)}, ValueError, ">= 1"),
    (np.array([[0], [1]]), {"seed": 1.5}, TypeError, "seed must be an int, got float"),
    (np.array([[0], [1]]), {"seed": -1}, ValueError, "seed must be in"),
    (np.array([[0], [1]]), {"seed": 2**31}, ValueError, r"seed must be in \[0, 2\*\*31\), got 2147483648"),
])
def test_bad_settings_raise_clear_errors(graph, kwargs, error, match):
    kwargs = dict(kwargs)
    row_shape = kwargs.pop("row_shape", (4, 4))
    with pytest.raises(error, match=match):
        hierarchical_order(graph, row_shape, **kwargs)


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
    perm = np.load(tmp_path / "perm.hierarchical-metis.npy")
    np.testing.assert_array_equal(perm, hierarchical_order(edge_index, (4, 8, 8), num_nodes=200).perm)
    assert len(list((tmp_path / "cache").glob("order-*.npz"))) == 2
    # Bad input is an error message and exit status 2, not a traceback.
    assert main(["partition", "--dataset", str(tmp_path / "toy"), "--row-shape", "4,4,4", "--no-cache"]) == 2
    assert "covers 64 rows, fewer than the graph's 200 nodes" in capsys.readouterr().err


# ----------------------------------------------------------------------------- intra-part edges in blocks
@pytest.mark.parametrize("block_rows", [1, 7, 1000])
def test_intra_group_entries_equal_brute_force_in_any_block_size(monkeypatch, block_rows):
    from ttgnn.partition import canonical_csr

    edge_index, _ = sbm_edges(5, 40, 1200, 0.7, seed=3)
    csr = canonical_csr(np.concatenate([edge_index, [[199], [199]]], axis=1), 203)  # isolated rows at the end
    group = np.random.default_rng(0).integers(0, 6, size=203)
    monkeypatch.setattr(reorder_module, "_FILTER_ROWS", block_rows)
    keep, kept_per_row = reorder_module._intra_group_entries(csr.indptr, csr.indices, group)
    rows = np.repeat(np.arange(203), np.diff(csr.indptr))
    expected = group[rows] == group[csr.indices]
    np.testing.assert_array_equal(keep, expected)
    np.testing.assert_array_equal(kept_per_row, np.bincount(rows[expected], minlength=203))
    assert kept_per_row.dtype == np.int64


def test_order_does_not_depend_on_the_filter_block_size(monkeypatch):
    edge_index, _ = sbm_edges(6, 50, 2000, 0.8, seed=4)
    default = hierarchical_order(edge_index, (4, 5, 4, 5), method="hierarchical-metis")
    monkeypatch.setattr(reorder_module, "_FILTER_ROWS", 13)
    blocked = hierarchical_order(edge_index, (4, 5, 4, 5), method="hierarchical-metis")
    np.testing.assert_array_equal(default.perm, blocked.perm)


def test_a_csrgraph_is_checked_like_any_other_input():
    # A CSRGraph passes through canonical_csr: a contradicting num_nodes and a graph without nodes
    # are errors, not an order of the wrong length or an IndexError deep in the splits.
    csr = canonical_csr(np.array([[0, 1], [1, 2]]), 3)
    perm = hierarchical_order(csr, (2, 2), num_nodes=3).perm  # a matching num_nodes is fine
    assert perm.shape == (3,) and len(set(perm.tolist())) == 3 and perm.max() < 4
    with pytest.raises(ValueError, match="num_nodes=5 does not match the CSRGraph's 3 nodes"):
        hierarchical_order(csr, (2, 2), num_nodes=5)
    with pytest.raises(ValueError, match="num_nodes=5 does not match the CSRGraph's 3 nodes"):
        shared_prefix_fractions(csr, np.arange(3), (2, 2), num_nodes=5)
    empty = CSRGraph(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    for row_shape in [(4,), (2, 2)]:
        with pytest.raises(ValueError, match="a graph needs at least one node, got a CSRGraph of 0"):
            hierarchical_order(empty, row_shape)


def test_thread_count_and_cache_folder_are_refused_when_they_cannot_be_meant(tmp_path, monkeypatch):
    edges = np.array([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="num_threads must be >= 1, got 0"):  # was one thread, silently
        hierarchical_order(edges, (2, 2), method="hierarchical-kaminpar", num_threads=0)
    with pytest.raises(TypeError, match="num_threads must be an int, got float"):
        hierarchical_order(edges, (2, 2), num_threads=1.5)
    monkeypatch.chdir(tmp_path)
    for bad in ("", 5):  # "" cached into the working folder; a number failed inside os.path
        message = rf"cache_dir must be a folder path \(str or PathLike\) or None, got {bad!r}"
        with pytest.raises(TypeError, match=message):
            hierarchical_order(edges, (2, 2), cache_dir=bad)
    assert list(tmp_path.iterdir()) == []
    assert hierarchical_order(edges, (2, 2), cache_dir=tmp_path / "c", num_threads=1).perm.shape == (4,)
    assert len(list((tmp_path / "c").iterdir())) == 1



@pytest.mark.parametrize("row_shape", [(3, 2**62), (1, 2**63)])
def test_a_row_shape_past_int64_rows_is_refused_up_front(row_shape):
    # "perm leaves the row range" and an OverflowError before
    with pytest.raises(ValueError, match=r"covers [\d,]+ rows, more than int64 row indices reach"):
        hierarchical_order(np.array([[0, 1, 2, 3], [1, 2, 3, 4]]), row_shape)
