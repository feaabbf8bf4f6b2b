"""Tests of the hierarchical-kaminpar order (ttgnn.partition.kaminpar): ParHIP files, strict
capacities, bijection, caching, seeds and bad arguments."""
import math

import numpy as np
import pytest

kaminpar = pytest.importorskip("kaminpar")

from ttgnn.partition import canonical_csr, hierarchical_order  # noqa: E402
from ttgnn.partition import reorder as reorder_module  # noqa: E402
from ttgnn.partition.kaminpar import KaMinParSplitter, write_parhip  # noqa: E402

from partition_graphs import check_order, sbm_edges  # noqa: E402


@pytest.fixture
def kaminpar_everywhere(monkeypatch):
    """Send every subgraph to KaMinPar (by default small ones go to METIS)."""
    monkeypatch.setattr(reorder_module, "_KAMINPAR_MIN_NODES", 0)


def _inside(labels, csr):
    rows = csr.edge_rows()
    return float(np.mean(labels[rows] == labels[csr.indices]))


# ----------------------------------------------------------------------------- the ParHIP file
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parhip_file_round_trips_through_kaminpar(tmp_path, seed):
    edge_index, _ = sbm_edges(5, 40, 900, 0.7, seed=seed)
    csr = canonical_csr(edge_index, 200)
    path = tmp_path / "g.parhip"
    size = write_parhip(path, csr.indptr, csr.indices)
    assert path.stat().st_size == size == 24 + 8 * 201 + 4 * csr.num_entries
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    assert graph.n() == 200 and graph.m() == csr.num_entries
    for node in (0, 57, 199):
        neighbours = sorted(v for v, _ in graph.neighbors(node))
        assert neighbours == csr.indices[csr.indptr[node]:csr.indptr[node + 1]].tolist()


def test_parhip_writer_refuses_inconsistent_csr(tmp_path):
    with pytest.raises(ValueError, match="len\\(indices\\)=3"):
        write_parhip(tmp_path / "g.parhip", np.array([0, 1, 2]), np.array([1, 0, 0]))


# ----------------------------------------------------------------------------- one split
@pytest.mark.parametrize("nparts,capacity", [(4, 50), (4, 51), (7, 30), (3, 100)])
def test_splitter_capacities_are_strict(nparts, capacity):
    edge_index, _ = sbm_edges(4, 50, 1500, 0.8, seed=nparts)
    csr = canonical_csr(edge_index, 200)
    with KaMinParSplitter(num_threads=1, seed=0, min_nodes=0) as splitter:
        labels = splitter(csr.indptr, csr.indices, nparts, capacity)
        assert splitter.calls == {"kaminpar": 1, "metis": 0}
    assert labels.shape == (200,) and labels.min() >= 0 and labels.max() < nparts
    assert np.bincount(labels, minlength=nparts).max() <= capacity


def test_splitter_finds_planted_blocks():
    edge_index, block = sbm_edges(4, 200, 6000, 0.95, seed=1)
    csr = canonical_csr(edge_index, 800)
    with KaMinParSplitter(num_threads=2, seed=0, min_nodes=0) as splitter:
        labels = splitter(csr.indptr, csr.indices, 4, 200)
    assert _inside(labels, csr) > 0.9  # random labels keep about 1/4 of the edges inside
    # Every planted block lands (almost) whole in one part.
    for b in range(4):
        assert np.bincount(labels[block == b], minlength=4).max() >= 190


def test_small_subgraphs_go_to_metis():
    edge_index, _ = sbm_edges(4, 50, 1500, 0.8)
    csr = canonical_csr(edge_index, 200)
    with KaMinParSplitter(num_threads=1, min_nodes=201) as splitter:
        splitter(csr.indptr, csr.indices, 4, 50)
        assert splitter.calls == {"kaminpar": 0, "metis": 1}


def test_large_subgraphs_are_compressed_and_use_the_large_preset(monkeypatch):
    loads = []
    original = kaminpar.load_graph

    def recording_load(path, fmt, compress=False):
        loads.append(compress)
        return original(path, fmt, compress=compress)

    monkeypatch.setattr(kaminpar, "load_graph", recording_load)
    edge_index, block = sbm_edges(4, 200, 6000, 0.95, seed=1)
    csr = canonical_csr(edge_index, 800)
    with KaMinParSplitter(num_threads=1, seed=0, min_nodes=0, large_entries=csr.num_entries) as splitter:
        labels = splitter(csr.indptr, csr.indices, 4, 200)
        smaller = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
        small = splitter(smaller.indptr, smaller.indices, 4, 50)
        presets = sorted(splitter._solvers)
    assert loads == [True, False] and presets == ["fast", "terapart"]
    assert np.bincount(labels, minlength=4).max() <= 200 and np.bincount(small, minlength=4).max() <= 50
    for b in range(4):  # terapart finds the planted blocks too
        assert np.bincount(labels[block == b], minlength=4).max() >= 190


@pytest.mark.parametrize("kwargs,match", [(dict(preset="slowest"), "preset"), (dict(large_preset="x"), "large_preset"), (dict(num_threads=0), "num_threads"),
                                          (dict(num_threads=1.5), "num_threads")])
def test_splitter_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KaMinParSplitter(**kwargs)


def test_splitter_outside_with_block_and_too_small_capacity():
    splitter = KaMinParSplitter(num_threads=1)
    with pytest.raises(RuntimeError, match="with"):
        splitter(np.array([0, 1, 2]), np.array([1, 0]), 2, 1)
    with KaMinParSplitter(num_threads=1) as splitter:
        with pytest.raises(ValueError, match="cannot hold 2 nodes"):
            splitter(np.array([0, 1, 2]), np.array([1, 0]), 1, 1)


# ----------------------------------------------------------------------------- the whole order
@pytest.mark.parametrize("row_shape", [(4, 8, 8), (5, 5, 10), (3, 3, 3, 9), (16, 16)])
def test_order_is_a_bijection_with_strict_capacities(kaminpar_everywhere, row_shape):
    edge_index, _ = sbm_edges(4, 60, 2500, 0.85, seed=len(row_shape))
    order = hierarchical_order(edge_index, row_shape, method="hierarchical-kaminpar", num_threads=1)
    check_order(order, 240, row_shape)
    assert order.method == "hierarchical-kaminpar"
    assert 0.0 <= order.quality["shared_prefix_1"] <= 1.0


def test_order_beats_random_and_matches_metis_on_planted_communities(kaminpar_everywhere):
    edge_index, _ = sbm_edges(8, 125, 12000, 0.9, seed=3)
    shape = (8, 10, 13)
    ours = hierarchical_order(edge_index, shape, method="hierarchical-kaminpar", num_threads=2)
    metis = hierarchical_order(edge_index, shape, method="hierarchical-metis")
    random = hierarchical_order(edge_index, shape, method="random")
    assert ours.quality["shared_prefix_1"] > 0.85 > 3 * random.quality["shared_prefix_1"]
    assert ours.quality["shared_prefix_1"] >= metis.quality["shared_prefix_1"] - 0.03


def test_same_seed_same_order_and_node_count_not_a_product(kaminpar_everywhere):
    edge_index, _ = sbm_edges(3, 70, 2000, 0.8, seed=5)
    first = hierarchical_order(edge_index, (4, 6, 10), method="hierarchical-kaminpar", seed=7, num_threads=1)
    second = hierarchical_order(edge_index, (4, 6, 10), method="hierarchical-kaminpar", seed=7, num_threads=1)
    np.testing.assert_array_equal(first.perm, second.perm)
    check_order(first, 210, (4, 6, 10))  # 210 nodes on 240 rows: 30 padding rows


def test_isolated_nodes_and_edgeless_graph(kaminpar_everywhere):
    edge_index, _ = sbm_edges(2, 50, 400, 0.9)
    order = hierarchical_order(edge_index, (4, 5, 8), method="hierarchical-kaminpar", num_nodes=150, num_threads=1)
    check_order(order, 150, (4, 5, 8))  # nodes 100..149 have no edges
    empty = hierarchical_order(np.zeros((2, 0), dtype=np.int64), (3, 4), method="hierarchical-kaminpar",
                               num_nodes=10, num_threads=1)
    check_order(empty, 10, (3, 4))


def test_cached_like_metis(tmp_path, kaminpar_everywhere, monkeypatch):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    first = hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path,
                               seed=3, num_threads=1)
    metis = hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-metis", cache_dir=tmp_path, seed=3)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and any("hierarchical-kaminpar" in name for name in files)

    def no_compute(*args, **kwargs):
        raise AssertionError("recomputed")

    monkeypatch.setattr(reorder_module, "_compute_perm", no_compute)
    again = hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path, seed=3)
    np.testing.assert_array_equal(again.perm, first.perm)
    assert again.quality == first.quality
    with pytest.raises(AssertionError, match="recomputed"):  # another seed is another key
        hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path, seed=4)


def test_corrupted_cache_file_is_recomputed(tmp_path, kaminpar_everywhere, caplog):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    first = hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path,
                               num_threads=1)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"not an npz")
    again = hierarchical_order(edge_index, (4, 4, 8), method="hierarchical-kaminpar", cache_dir=tmp_path,
                               num_threads=1)
    assert "corrupted" in caplog.text
    np.testing.assert_array_equal(again.perm, first.perm)


def test_large_graph_mixes_kaminpar_and_metis(caplog):
    """Default threshold: the top level (60,000 nodes) goes to KaMinPar, the small parts to METIS."""
    import logging

    edge_index, _ = sbm_edges(6, 10_000, 300_000, 0.9, seed=2)
    shape = (6, 100, 101)
    with caplog.at_level(logging.INFO, logger="ttgnn.partition.reorder"):
        order = hierarchical_order(edge_index, shape, method="hierarchical-kaminpar", num_threads=2)
    check_order(order, 60_000, shape)
    assert "KaMinPar split 1 subgraphs, METIS 6" in caplog.text
    assert order.quality["shared_prefix_1"] > 0.85
    assert math.isfinite(order.quality["seconds"])
