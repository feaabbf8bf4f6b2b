"""Tests of ttgnn.partition.cache: hits, misses, one entry per key, corrupted files."""
import logging

import numpy as np
import pytest

from ttgnn.partition import canonical_csr, hierarchical_order
from ttgnn.partition import reorder as reorder_module
from ttgnn.partition.cache import cache_file

from partition_graphs import check_order, sbm_edges


# ----------------------------------------------------------------------------- caching
def _no_compute(*args, **kwargs):
    raise AssertionError("the order was recomputed instead of loaded from the cache")


def test_a_cache_folder_that_cannot_be_written_warns_and_the_order_is_returned(tmp_path, caplog):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    (tmp_path / "file").write_text("x")  # a folder below a regular file cannot be created
    with caplog.at_level(logging.WARNING):
        order = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path / "file" / "cache")
    assert np.array_equal(order.perm, hierarchical_order(edge_index, (4, 4, 8)).perm)
    assert "could not write the node order cache file" in caplog.text and "going on without" in caplog.text


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
    why = {"tampered_perm": "(ValueError: the perm checksum does not match)",
           "other_key": "(ValueError: it was computed for {"}.get(damage, "")
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    np.testing.assert_array_equal(again.perm, expected.perm)
    # The file was rewritten: the next call is a clean hit without a warning.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    assert not caplog.records
    assert not list(tmp_path.glob("*.tmp"))


def test_cache_keeps_one_entry_per_seed_and_method(tmp_path, monkeypatch, caplog):
    # Two seeds and two methods of one graph and shape: four files, each a clean hit afterwards
    # (a key missing from the file name would make later entries overwrite earlier ones).
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    keys = [("hierarchical-metis", 3), ("hierarchical-metis", 4), ("random", 3), ("random", 4)]
    computed = {key: hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, method=key[0], seed=key[1])
                for key in keys}
    assert len(list(tmp_path.glob("*.npz"))) == len(keys)
    assert np.any(computed["random", 3].perm != computed["random", 4].perm)
    monkeypatch.setattr(reorder_module, "_compute_perm", _no_compute)
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        for (method, seed), first in computed.items():
            again = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, method=method, seed=seed)
            np.testing.assert_array_equal(again.perm, first.perm)
            assert (again.method, again.seed) == (method, seed)
    assert not caplog.records


def test_cache_file_name_spells_out_its_key(tmp_path):
    graph_hash = "0123456789abcdef" * 3
    path = cache_file(tmp_path, graph_hash, (4, 4, 8), "random", 3)
    assert path == tmp_path / "order-0123456789abcdef01234567-4x4x8-random-seed3.npz"


def test_cache_file_format(tmp_path):
    # The on-disk format is a contract with files written earlier: perm as int64 and a JSON meta
    # record holding the key, a 16-byte blake2b checksum of perm, and the quality figures.
    import hashlib
    import json

    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    order = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path, method="random", seed=3)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path, allow_pickle=False) as archive:
        perm = archive["perm"]
        meta = json.loads(str(archive["meta"][()]))
    np.testing.assert_array_equal(perm, order.perm)
    assert perm.dtype == np.int64
    assert meta["format_version"] == 1
    assert meta["graph_hash"] == canonical_csr(edge_index).content_hash()
    assert (meta["row_shape"], meta["method"], meta["seed"]) == ([4, 4, 8], "random", 3)
    assert meta["perm_checksum"] == hashlib.blake2b(perm.tobytes(), digest_size=16).hexdigest()
    assert meta["quality"] == pytest.approx({k: float(v) for k, v in order.quality.items() if k != "seconds"}
                                            | {"seconds": meta["quality"]["seconds"]})


def test_cache_file_with_pickled_objects_is_not_loaded(tmp_path, caplog):
    # A cache file is data: one holding a pickled object array is rejected, never unpickled.
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    expected = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as archive:
        perm, meta = archive["perm"], archive["meta"]
    np.savez(path, perm=perm, meta=np.array([str(meta[()])], dtype=object).reshape(()))
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        again = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    assert any("corrupted or mismatched" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(again.perm, expected.perm)


@pytest.mark.parametrize("damage,reason", [
    ("out_of_range", r"perm leaves the row range \[0, 128\)"),
    ("negative", r"perm leaves the row range \[0, 128\)"),
    ("duplicate", "perm maps two nodes to one row"),
    ("int32", r"perm has dtype int32 and shape \(120,\), expected int64 \(120,\)"),
    ("short", r"perm has dtype int64 and shape \(119,\), expected int64 \(120,\)"),
])
def test_cache_file_with_a_consistent_checksum_but_a_bad_perm_is_recomputed(tmp_path, caplog, damage, reason):
    # The checksum only proves the file is the one written; the perm itself is checked too.
    import json

    from ttgnn.partition.cache import _checksum

    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    expected = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as archive:
        perm, meta = archive["perm"].copy(), json.loads(str(archive["meta"][()]))
    if damage == "out_of_range":
        perm[0] = 128
    elif damage == "negative":
        perm[0] = -1
    elif damage == "duplicate":
        perm[0] = perm[1]
    elif damage == "int32":
        perm = perm.astype(np.int32)
    else:
        perm = perm[:-1]
    meta["perm_checksum"] = _checksum(perm)
    np.savez(path, perm=perm, meta=np.array(json.dumps(meta)))
    with caplog.at_level(logging.WARNING, logger="ttgnn.partition.cache"):
        again = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"cache file {path} is corrupted or mismatched (ValueError: " in m for m in messages), messages
    assert any(__import__("re").search(reason, m) for m in messages), messages
    np.testing.assert_array_equal(again.perm, expected.perm)


def test_cache_hit_restores_integer_counts(tmp_path):
    edge_index, _ = sbm_edges(4, 30, 500, 0.8)
    hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    hit = hierarchical_order(edge_index, (4, 4, 8), cache_dir=tmp_path)
    assert type(hit.quality["num_nodes"]) is int and type(hit.quality["num_edges"]) is int
    assert hit.quality["num_nodes"] == 120


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_saved_perm_of_any_integer_dtype_loads_back_as_int64(tmp_path, dtype):
    from ttgnn.partition.cache import load_cached, save_cached

    perm = np.random.default_rng(0).permutation(100).astype(dtype)
    path = tmp_path / "order.npz"
    save_cached(path, perm, {"num_nodes": 100}, "0" * 32, (4, 5, 5), "random", 0)
    loaded = load_cached(path, "0" * 32, (4, 5, 5), "random", 0, 100)
    assert loaded is not None, "a perm saved as int32 must be stored as int64 and its checksum match"
    assert loaded[0].dtype == np.int64
    np.testing.assert_array_equal(loaded[0], perm)


def test_a_cache_path_that_is_no_regular_file_is_recomputed_without_blocking_or_losing_the_order(tmp_path, caplog):
    import os
    import threading

    edges = np.array([[0, 1, 2], [1, 2, 3]])
    first = hierarchical_order(edges, (2, 2), cache_dir=tmp_path)
    (path,) = [p for p in tmp_path.iterdir() if p.suffix == ".npz"]
    path.unlink()
    os.mkfifo(path)  # np.load's open blocked for ever
    result = []
    worker = threading.Thread(target=lambda: result.append(hierarchical_order(edges, (2, 2), cache_dir=tmp_path)),
                              daemon=True)
    with caplog.at_level(logging.WARNING):
        worker.start()
        worker.join(60)
    assert result and np.array_equal(result[0].perm, first.perm), "the order blocked on a FIFO in the cache"
    assert any("is not a regular file; recomputing" in r.getMessage() for r in caplog.records)
    path.unlink()
    path.symlink_to("/dev/null")  # the finished order was lost to "is a device, not a regular file"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = hierarchical_order(edges, (2, 2), cache_dir=tmp_path)
    assert np.array_equal(again.perm, first.perm)
    assert any("could not write the node order cache file" in r.getMessage() for r in caplog.records)


def test_more_kaminpar_threads_than_cpus_run_as_many_as_there_are(monkeypatch, caplog):
    import os

    from ttgnn.partition import kaminpar

    seen = []

    class Splitter(kaminpar.KaMinParSplitter):
        def __init__(self, num_threads=1, **kwargs):
            seen.append(num_threads)
            super().__init__(num_threads=num_threads, **kwargs)

    monkeypatch.setattr(kaminpar, "KaMinParSplitter", Splitter)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with caplog.at_level(logging.WARNING):
        hierarchical_order(sbm_edges(4, 50, 600, 0.9)[0], (10, 20), method="hierarchical-kaminpar",
                           num_threads=10**6)
    assert seen == [2]  # 10**6 threads ran for minutes (2**40 a pybind TypeError)
    assert any("num_threads=1000000 is more than this machine's 2 CPU(s); KaMinPar runs 2" in r.getMessage()
               for r in caplog.records)
