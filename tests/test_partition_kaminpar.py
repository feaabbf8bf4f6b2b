"""Tests of the hierarchical-kaminpar order (ttgnn.partition.kaminpar): ParHIP files, strict
capacities, bijection, caching, seeds and bad arguments."""
import math
import os
import re
import sys

import numpy as np
import pytest

kaminpar = pytest.importorskip("kaminpar")

from ttgnn.partition import canonical_csr, hierarchical_order  # noqa: E402
from ttgnn.partition import reorder as reorder_module  # noqa: E402
from ttgnn.partition import kaminpar as kaminpar_module  # noqa: E402
from ttgnn.partition.kaminpar import KaMinParSplitter, write_parhip  # noqa: E402
from ttgnn.partition.split import chunk_split, metis_split  # noqa: E402

from partition_graphs import check_order, sbm_edges  # noqa: E402


@pytest.fixture
def kaminpar_everywhere(monkeypatch):
    """Send every subgraph to KaMinPar (by default small ones go to METIS)."""
    monkeypatch.setattr(reorder_module, "_KAMINPAR_MIN_NODES", 0)


def _inside(labels, csr):
    rows = csr.edge_rows()
    return float(np.mean(labels[rows] == labels[csr.indices]))


# ----------------------------------------------------------------------------- the ParHIP file
def _parhip_reference(indptr, indices):
    """The ParHIP bytes built independently: header, byte offsets, 32-bit neighbour ids."""
    n, m = len(indptr) - 1, len(indices)
    header = np.array([1 | 2 | 8, n, m], dtype=np.uint64)
    offsets = 24 + 8 * (n + 1) + 4 * np.asarray(indptr, dtype=np.uint64)
    return header.tobytes() + offsets.astype(np.uint64).tobytes() + np.asarray(indices, dtype=np.uint32).tobytes()


@pytest.fixture(scope="module", autouse=True)
def _parhip_writer_is_sound(tmp_path_factory):
    """KaMinPar aborts the whole process (SIGABRT) on a malformed ParHIP file: check the writer's
    bytes before any test of this module hands it a file, so a broken writer fails a test instead."""
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
    path = tmp_path_factory.mktemp("parhip") / "g.parhip"
    write_parhip(path, csr.indptr, csr.indices)
    if path.read_bytes() != _parhip_reference(csr.indptr, csr.indices):
        pytest.fail("write_parhip wrote a malformed ParHIP file; not handing it to KaMinPar")


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 5, 1 << 22])
@pytest.mark.parametrize("num_nodes", [0, 1, 2, 3, 7, 8, 9])
def test_parhip_bytes_match_the_format_for_every_chunk_size(tmp_path, monkeypatch, chunk, num_nodes):
    """Offsets and neighbours are written in chunks; the file is the same whatever the chunk size,
    including a graph of no node or one node (offsets only) and chunks that end exactly at n + 1."""
    monkeypatch.setattr(kaminpar_module, "_CHUNK", chunk)
    rng = np.random.default_rng(num_nodes)
    degrees = rng.integers(0, 4, size=num_nodes)
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = rng.integers(0, max(num_nodes, 1), size=int(indptr[-1])).astype(np.int64)
    path = tmp_path / "g.parhip"
    size = write_parhip(path, indptr, indices)
    expected = _parhip_reference(indptr, indices)
    assert path.read_bytes() == expected and size == len(expected)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_parhip_neighbours_are_32_bit_whatever_the_input_dtype(tmp_path, monkeypatch, dtype):
    monkeypatch.setattr(kaminpar_module, "_CHUNK", 2)  # several neighbour chunks of 16 entries
    csr = canonical_csr(sbm_edges(2, 10, 40, 0.8, seed=1)[0], 20)
    path = tmp_path / "g.parhip"
    write_parhip(path, csr.indptr, csr.indices.astype(dtype))
    assert csr.num_entries > 16
    assert path.read_bytes() == _parhip_reference(csr.indptr, csr.indices)
    version, n, m = np.fromfile(path, dtype=np.uint64, count=3)
    assert (version, n, m) == (11, 20, csr.num_entries)  # no weights, 64-bit offsets, 32-bit ids


@pytest.mark.parametrize("indptr,indices,message", [
    ([0, 1, 2], [1, 0, 0], "indptr must run from 0 to len(indices)=3, got 0 .. 2"),
    ([1, 2, 3], [1, 0, 0], "indptr must run from 0 to len(indices)=3, got 1 .. 3"),
    ([0, 2, 4], [1, 0, 0], "indptr must run from 0 to len(indices)=3, got 0 .. 4"),
])
def test_parhip_writer_names_both_ends_of_a_bad_indptr(tmp_path, indptr, indices, message):
    path = tmp_path / "g.parhip"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        write_parhip(path, np.array(indptr), np.array(indices))
    assert not path.exists()


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
def test_splitter_defaults(monkeypatch):
    splitter = KaMinParSplitter()
    assert splitter.num_threads == (os.cpu_count() or 1) and splitter.seed == 0
    assert (splitter.preset, splitter.large_preset) == ("fast", "terapart")
    assert (splitter.min_nodes, splitter.large_entries) == (50_000, 200_000_000)
    assert splitter.calls == {"kaminpar": 0, "metis": 0}
    monkeypatch.setattr(kaminpar_module.os, "cpu_count", lambda: None)  # unknown: one thread
    assert KaMinParSplitter().num_threads == 1
    monkeypatch.setattr(kaminpar_module.os, "cpu_count", lambda: 3)
    assert KaMinParSplitter().num_threads == 3
    assert KaMinParSplitter(num_threads=np.int64(2)).num_threads == 2


@pytest.mark.parametrize("kwargs,message", [
    (dict(preset="slowest"), f"preset must be one of {kaminpar_module.PRESETS}, got 'slowest'"),
    (dict(large_preset="x"), f"large_preset must be one of {kaminpar_module.PRESETS}, got 'x'"),
    (dict(num_threads=True), "num_threads must be an int >= 1, got True"),
    (dict(num_threads=-1), "num_threads must be an int >= 1, got -1"),
    (dict(num_threads="2"), "num_threads must be an int >= 1, got '2'"),
])
def test_splitter_bad_argument_messages(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        KaMinParSplitter(**kwargs)


def test_missing_kaminpar_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "kaminpar", None)  # `import kaminpar` raises ImportError
    message = "the hierarchical-kaminpar order needs the kaminpar package (pip install kaminpar==3.7.3)"
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        with KaMinParSplitter(num_threads=1):
            pass


def test_temporary_folder_lives_in_temp_dir_for_the_with_block_only(tmp_path):
    splitter = KaMinParSplitter(num_threads=1, temp_dir=tmp_path, min_nodes=0)
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
    with splitter:
        (folder,) = tmp_path.iterdir()
        assert folder.is_dir() and folder.name.startswith("ttgnn-kaminpar-")
        splitter(csr.indptr, csr.indices, 4, 50)
        assert list(folder.iterdir()) == []  # the ParHIP file is removed once loaded
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="^KaMinParSplitter must be used inside a `with` block$"):
        splitter(csr.indptr, csr.indices, 4, 50)
    splitter.__exit__(None, None, None)  # closing again is harmless
    with splitter:  # and the splitter can be used again
        labels = splitter(csr.indptr, csr.indices, 4, 50)
        assert len(list(tmp_path.iterdir())) == 1
    assert np.bincount(labels, minlength=4).max() <= 50 and splitter.calls == {"kaminpar": 2, "metis": 0}


def test_one_part_edgeless_and_tiny_graphs_need_no_partitioner():
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
    with KaMinParSplitter(num_threads=1, min_nodes=0) as splitter:
        one = splitter(csr.indptr, csr.indices, 1, 200)
        edgeless = splitter(np.zeros(201, dtype=np.int64), np.zeros(0, dtype=np.int64), 7, 29)
        tiny = canonical_csr(np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]]), 5)
        own_parts = splitter(tiny.indptr, tiny.indices, 5, 3)
        assert splitter.calls == {"kaminpar": 0, "metis": 0}
    assert one.dtype == np.int64 and np.array_equal(one, np.zeros(200, dtype=np.int64))
    np.testing.assert_array_equal(edgeless, chunk_split(200, 7))
    np.testing.assert_array_equal(own_parts, np.arange(5))


def test_two_parts_respect_the_capacity():
    edge_index, block = sbm_edges(2, 100, 2000, 0.9, seed=4)
    csr = canonical_csr(edge_index, 200)
    with KaMinParSplitter(num_threads=1, min_nodes=0) as splitter:
        labels = splitter(csr.indptr, csr.indices, 2, 100)
    assert np.array_equal(np.bincount(labels, minlength=2), [100, 100])
    assert _inside(labels, csr) > 0.8


def test_min_nodes_is_the_smallest_graph_kaminpar_gets_and_calls_are_counted():
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
    with KaMinParSplitter(num_threads=1, min_nodes=200) as splitter:
        splitter(csr.indptr, csr.indices, 4, 50)
        splitter(csr.indptr, csr.indices, 4, 60)
        assert splitter.calls == {"kaminpar": 2, "metis": 0}
    with KaMinParSplitter(num_threads=1, min_nodes=201) as splitter:
        splitter(csr.indptr, csr.indices, 4, 50)
        splitter(csr.indptr, csr.indices, 4, 60)
        assert splitter.calls == {"kaminpar": 0, "metis": 2}


def test_small_graphs_get_metis_with_the_splitters_seed():
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8, seed=2)[0], 200)
    default = metis_split(csr.indptr, csr.indices, 4, 60, seed=0)
    seeded = metis_split(csr.indptr, csr.indices, 4, 60, seed=3)
    assert not np.array_equal(default, seeded)  # seed 3 gives other parts than the default
    with KaMinParSplitter(num_threads=1, seed=3) as splitter:
        np.testing.assert_array_equal(splitter(csr.indptr, csr.indices, 4, 60), seeded)


@pytest.mark.parametrize("nparts,capacity,eps", [(4, 50, 0.01), (4, 51, 0.02), (4, 100, 0.03), (8, 26, 0.03),
                                                 (5, 40, 0.01)])
def test_kaminpar_is_asked_for_the_slack_the_capacity_leaves(monkeypatch, nparts, capacity, eps):
    """The imbalance asked of KaMinPar: the capacity's slack, clamped to [1%, 3%]."""
    asked = []
    original = kaminpar.KaMinPar

    class Recording:
        def __init__(self, num_threads, context):
            asked.append(("threads", num_threads))
            self.solver = original(num_threads, context)

        def compute_partition(self, graph, k, epsilon):
            asked.append((graph.n(), k, epsilon))
            return self.solver.compute_partition(graph, k, epsilon)

    monkeypatch.setattr(kaminpar, "KaMinPar", Recording)
    csr = canonical_csr(sbm_edges(4, 50, 1500, 0.8)[0], 200)
    with KaMinParSplitter(num_threads=1, min_nodes=0) as splitter:
        labels = splitter(csr.indptr, csr.indices, nparts, capacity)
    assert asked[0] == ("threads", 1) and asked[1][:2] == (200, nparts) and len(asked) == 2
    assert isinstance(asked[1][1], int) and asked[1][2] == pytest.approx(eps)
    assert np.bincount(labels, minlength=nparts).max() <= capacity


def test_rebalance_repairs_kaminpars_one_percent_overshoot(monkeypatch):
    """Three planted blocks of 100 into two parts of 150: KaMinPar, allowed 1% imbalance, puts 151
    nodes in one part; the splitter moves exactly that one node out."""
    raw = []
    original = kaminpar.KaMinPar

    class Recording:
        def __init__(self, num_threads, context):
            self.solver = original(num_threads, context)

        def compute_partition(self, graph, k, epsilon):
            blocks = self.solver.compute_partition(graph, k, epsilon)
            raw.append(np.array(blocks))
            return blocks

    monkeypatch.setattr(kaminpar, "KaMinPar", Recording)
    csr = canonical_csr(sbm_edges(3, 100, 4500, 0.95, seed=0)[0], 300)
    with KaMinParSplitter(num_threads=1, seed=0, min_nodes=0) as splitter:
        labels = splitter(csr.indptr, csr.indices, 2, 150)
    (blocks,) = raw
    assert np.bincount(blocks, minlength=2).max() == 151  # the overshoot this test is about
    assert np.array_equal(np.bincount(labels, minlength=2), [150, 150])
    assert int(np.sum(labels != blocks)) == 1


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

