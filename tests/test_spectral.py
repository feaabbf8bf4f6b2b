"""Tests of ttgnn.spectral: eigenvectors against a dense solver, caching, and the TT-SVD of the table."""
import io
import json
import logging
import re

import numpy as np
import scipy.sparse as sp
import pytest
import torch

from ttgnn import TTNodeEmbedding, spectral
from ttgnn.data import planted_partition
from ttgnn.spectral import leading_eigenvectors, normalized_adjacency_scipy, spectral_table, trivial_eigenvectors


@pytest.fixture(scope="module")
def graph():
    ds = planted_partition(300, num_classes=4, avg_degree=8, homophily=0.9, seed=1)
    indptr, indices = ds.csr()
    return indptr, indices, ds.num_nodes


@pytest.fixture(scope="module")
def disconnected():
    """Two planted graphs side by side, a 2-node component and an isolated node: 3 components with edges."""
    import scipy.sparse as sp

    parts = []
    for seed, n in ((1, 120), (2, 90)):
        indptr, indices = planted_partition(n, num_classes=3, avg_degree=6, homophily=0.9, seed=seed).csr()
        parts.append(sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n)))
    parts.append(sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]])))
    parts.append(sp.csr_matrix((1, 1)))
    adjacency = sp.block_diag(parts, format="csr")
    adjacency.sort_indices()
    return adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64), adjacency.shape[0]


def _check_against_dense(indptr, indices, n, k, skip_trivial):
    dense = normalized_adjacency_scipy(indptr, indices, n).toarray()
    assert np.allclose(dense, dense.T)
    values, vectors = np.linalg.eigh(dense)
    order = np.argsort(-values)
    skipped = int(np.sum(values > 1 - 1e-9)) if skip_trivial else 0
    top = vectors[:, order[skipped:skipped + k]]
    ours = leading_eigenvectors(indptr, indices, n, k, tol=1e-10, skip_trivial=skip_trivial)
    assert ours.shape == (n, k)
    np.testing.assert_allclose(ours.T @ ours, np.eye(k), atol=1e-8)
    # same subspace: the projection of ours onto the dense top-k keeps all of it
    np.testing.assert_allclose(np.linalg.norm(top.T @ ours, axis=0), np.ones(k), atol=1e-6)
    # and the eigenvalues, column by column
    np.testing.assert_allclose(np.einsum("ij,ij->j", ours, dense @ ours), values[order[skipped:skipped + k]], atol=1e-8)
    return ours, skipped


def test_eigenvectors_span_the_dense_leading_subspace(graph):
    indptr, indices, n = graph
    _, skipped = _check_against_dense(indptr, indices, n, 6, skip_trivial=False)
    assert skipped == 0
    # connected: one trivial eigenvector (eigenvalue 1, sqrt(degree)), left out by default
    ours, skipped = _check_against_dense(indptr, indices, n, 6, skip_trivial=True)
    assert skipped == 1
    root_degree = np.sqrt(np.diff(indptr))
    np.testing.assert_allclose(root_degree @ ours, np.zeros(6), atol=1e-8)


def test_trivial_eigenvectors_of_every_component_are_skipped(disconnected):
    indptr, indices, n = disconnected
    labels, trivial, count = trivial_eigenvectors(indptr, indices, n)
    isolated = np.diff(indptr) == 0
    assert count == 3 and isolated[-1] and len(np.unique(labels)) == 3 + isolated.sum()
    np.testing.assert_array_equal(trivial[isolated], 0.0)
    dense = normalized_adjacency_scipy(indptr, indices, n).toarray()
    for component in np.unique(labels[~isolated]):
        vector = np.where(labels == component, trivial, 0.0)
        np.testing.assert_allclose(np.linalg.norm(vector), 1.0)
        np.testing.assert_allclose(dense @ vector, vector, atol=1e-12)  # eigenvalue 1
    ours, skipped = _check_against_dense(indptr, indices, n, 5, skip_trivial=True)
    assert skipped == 3
    assert np.abs(np.bincount(labels, weights=trivial * ours[:, 0])).max() < 1e-8
    # without skipping, the leading eigenvector is a mix of the trivial ones (eigenvalue 1, repeated:
    # which mix, and how many copies the solver finds, depends on its start)
    first = leading_eigenvectors(indptr, indices, n, 3, tol=1e-10, skip_trivial=False)[:, 0]
    np.testing.assert_allclose(first @ dense @ first, 1.0, atol=1e-8)
    coefficients = np.bincount(labels, weights=trivial * first)
    np.testing.assert_allclose(np.sum(coefficients ** 2), 1.0, atol=1e-8)


def test_a_cache_folder_that_cannot_be_written_warns(graph, tmp_path, caplog):
    indptr, indices, n = graph
    (tmp_path / "file").write_text("x")
    vectors = leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path / "file" / "cache")
    assert vectors.shape == (n, 4) and "could not write the eigenvector cache file" in caplog.text


def test_cache_round_trip_and_corruption(graph, tmp_path, caplog, monkeypatch):
    indptr, indices, n = graph
    first = leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path)
    files = list(tmp_path.glob("spectral-*.npz"))
    assert len(files) == 1
    with monkeypatch.context() as patch:  # a cache hit neither solves nor finds the connected components
        patch.setattr(spectral, "trivial_eigenvectors", _must_not_run)
        patch.setattr(spectral, "normalized_adjacency_scipy", _must_not_run)
        np.testing.assert_array_equal(leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path), first)
    files[0].write_bytes(b"garbage")
    again = leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path)
    assert "corrupted" in caplog.text
    np.testing.assert_allclose(np.abs(again.T @ first), np.eye(4), atol=1e-6)


def _must_not_run(*args, **kwargs):
    raise AssertionError("called on a cache hit")


def test_table_scale_sign_and_tt_svd_exact_at_full_rank(graph):
    indptr, indices, n = graph
    table = spectral_table(indptr, indices, n, 8, std=0.5)
    assert table.shape == (n, 8) and table.dtype == torch.float32
    assert abs(float(table.pow(2).mean().sqrt()) - 0.5) < 1e-4
    assert (table[table.abs().argmax(0), torch.arange(8)] > 0).all()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    tt = TTNodeEmbedding.from_pretrained(table.double(), ranks=64, row_shape=[7, 7, 7], col_shape=[2, 2, 2],
                                         node_order=order)
    assert tt.svd_relative_error < 1e-10
    torch.testing.assert_close(tt.full_weight(), table.double(), rtol=1e-9, atol=1e-9)


def test_fewer_vectors_fill_the_first_columns_and_zeros_the_rest(graph):
    indptr, indices, n = graph
    all8 = spectral_table(indptr, indices, n, 8, std=0.5)
    three = spectral_table(indptr, indices, n, 8, std=0.5, vectors=3)
    assert three.shape == (n, 8) and three.dtype == torch.float32
    assert not three[:, 3:].any()
    torch.testing.assert_close(three[:, :3].pow(2).mean(0).sqrt(), torch.full((3,), 0.5), rtol=1e-4, atol=0)
    # the same three leading eigenvectors as in the full table (the solver's start differs with k)
    overlap = (three[:, :3].double().T @ all8[:, :3].double()) / (0.25 * n)
    torch.testing.assert_close(overlap.abs(), torch.eye(3, dtype=torch.float64), atol=1e-4, rtol=0)
    for bad in (0, 9, 2.5, True):
        with pytest.raises(ValueError, match="vectors must be an integer in"):
            spectral_table(indptr, indices, n, 8, vectors=bad)


def test_bad_k(graph, disconnected):
    indptr, indices, n = graph
    with pytest.raises(ValueError, match=r"k must be in \[1, 300\)"):
        leading_eigenvectors(indptr, indices, n, 300, skip_trivial=False)
    with pytest.raises(ValueError, match=r"k must be in \[1, 300\) for a graph of 300 nodes, got 0"):
        leading_eigenvectors(indptr, indices, n, 0)
    with pytest.raises(ValueError, match=r"k must be in \[1, 299\) .* less the 1 trivial eigenvectors skipped"):
        leading_eigenvectors(indptr, indices, n, 299)
    with pytest.raises(ValueError, match=r"k must be in \[1, 299\) .* less the 1 trivial eigenvectors skipped"):
        leading_eigenvectors(indptr, indices, n, 300)  # one message, with the limit that holds (was [1, 300) first)
    indptr, indices, n = disconnected
    with pytest.raises(ValueError, match=r"k must be in \[1, 210\) for a graph of 213 nodes less the 3 trivial"):
        leading_eigenvectors(indptr, indices, n, 210)


def test_a_table_asking_more_eigenvectors_than_the_graph_has_names_vectors_and_the_limit(disconnected):
    # the train command showed eigsh's "k must be in [1, 213) ..." for --dim 256, then another limit for fewer
    indptr, indices, n = disconnected
    past = r"eigenvectors to give past its trivial ones \(one per connected component\)"
    with pytest.raises(ValueError, match=rf"^vectors=None \(dim=256 of them\): a graph of 213 nodes has at most 209 "
                                         rf"{past}; give vectors=209 or fewer$"):
        spectral_table(indptr, indices, n, 256)
    with pytest.raises(ValueError, match=r"^vectors=210: a graph of 213 nodes has at most 209 eigenvectors"):
        spectral_table(indptr, indices, n, 256, vectors=210)
    assert spectral_table(indptr, indices, n, 256, vectors=209).shape == (213, 256)
    ones = np.isclose(np.linalg.eigvalsh(normalized_adjacency_scipy(indptr, indices, n).toarray()), 1.0).sum()
    assert ones == 3 and spectral.eigenvector_limit(indptr, indices, n) == n - ones - 1 == 209
    # named as the caller names them: the train command's settings
    with pytest.raises(spectral.TooManyEigenvectors, match=r"^spectral_vectors=210: .*; give spectral_vectors=209 or"):
        spectral_table(indptr, indices, n, 256, vectors=210, names=("spectral_vectors", "dim"))
    with pytest.raises(ValueError, match=r"^spectral_vectors must be an integer in \[1, dim=256\], got 300$"):
        spectral_table(indptr, indices, n, 256, vectors=300, names=("spectral_vectors", "dim"))


def test_a_graph_with_no_eigenvectors_past_its_trivial_ones_says_so():
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])  # one edge: its one eigenvector is trivial
    assert spectral.eigenvector_limit(indptr, indices, 2) == 0
    with pytest.raises(ValueError, match=r"^vectors=1: a graph of 2 nodes has no eigenvectors to give past its "
                                         r"trivial ones \(one per connected component\); use another init$"):
        spectral_table(indptr, indices, 2, 4, vectors=1)


def test_available_memory_is_positive_and_a_table_too_large_is_refused_up_front(monkeypatch):
    import ttgnn.spectral as spectral

    have = spectral.available_memory()
    assert have is None or have > 0
    monkeypatch.setattr(spectral, "available_memory", lambda: 10 * 2**30)
    spectral.check_table_fits(1_000_000, 128, 28)  # 3.3 GiB of 10: fine
    with pytest.raises(MemoryError, match=r"^the spectral init builds a dense 111,059,956 x 128 table \(53\.0 GiB.*10\.0 GiB is available.*--init"):
        spectral.check_table_fits(111_059_956, 128, 4)
    monkeypatch.setattr(spectral, "available_memory", lambda: None)
    spectral.check_table_fits(111_059_956, 128, 4)  # unknown memory: no refusal


@pytest.mark.parametrize("dim, std, message", [
    (0, 1.0, "dim must be an integer >= 1, got 0"),
    (4.0, 1.0, "dim must be an integer >= 1, got 4.0"),
    (4, float("inf"), "std must be a finite number > 0, got inf"),
    (4, 0.0, "std must be a finite number > 0, got 0.0"),
    (4, -1.0, "std must be a finite number > 0, got -1.0"),
])
def test_spectral_table_names_a_bad_width_or_scale(graph, dim, std, message):
    # An infinite std filled the table with inf; dim 0 was reported as "vectors ... got None".
    indptr, indices, n = graph
    with pytest.raises(ValueError, match=message):
        spectral_table(indptr, indices, n, dim, std)


# ---------------------------------------------------------------------- the cache's key, the solver's start, the log
def test_the_cache_file_is_named_and_keyed_by_graph_k_seed_and_trivial_vectors(graph, tmp_path):
    indptr, indices, n = graph
    leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path)
    leading_eigenvectors(indptr, indices, n, 4, seed=3, cache_dir=tmp_path)
    leading_eigenvectors(indptr, indices, n, 5, cache_dir=tmp_path)
    leading_eigenvectors(indptr, indices, n, 4, skip_trivial=False, cache_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    digest = names[0].split("-")[2]
    assert re.fullmatch(r"[0-9a-f]{24}", digest)
    assert names == sorted(f"spectral-v2-{digest}-{tail}.npz" for tail in
                           ("k4-seed0", "k4-seed3", "k5-seed0", "k4-seed0-with-trivial"))
    # the key inside, which a load compares in full (the name holds part of the graph's hash only)
    with np.load(tmp_path / f"spectral-v2-{digest}-k4-seed0.npz") as archive:
        key = json.loads(str(archive["meta"][()]))
    graph_hash = key.pop("graph")
    assert re.fullmatch(r"[0-9a-f]{32}", graph_hash) and graph_hash.startswith(digest)
    assert key == {"format_version": 2, "k": 4, "tol": 1e-6, "seed": 0, "skip_trivial": True}


def test_the_same_graph_as_int32_or_int64_hits_one_cache_file(graph, tmp_path, monkeypatch):
    indptr, indices, n = graph
    first = leading_eigenvectors(indptr.astype(np.int64), indices.astype(np.int64), n, 4, cache_dir=tmp_path)
    monkeypatch.setattr(spectral, "normalized_adjacency_scipy", _must_not_run)
    again = leading_eigenvectors(indptr.astype(np.int32), indices.astype(np.int32), n, 4, cache_dir=tmp_path)
    np.testing.assert_array_equal(again, first)
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("change, reason", [
    ("meta", r"it holds \{.*'k': 5.*\}, shape \(300, 4\)"),   # a key of another k, vectors of the right shape
    ("shape", r"it holds \{.*\}, shape \(300, 3\)"),           # the right key, vectors of another shape
    ("nan", r"it holds \{.*\}, shape \(300, 4\)"),             # the right key and shape, a NaN inside
])
def test_a_cache_file_of_another_key_shape_or_with_nan_is_recomputed(graph, tmp_path, caplog, change, reason):
    indptr, indices, n = graph
    first = leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    with np.load(path) as archive:
        key = json.loads(str(archive["meta"][()]))
    vectors = first.copy()
    if change == "meta":
        key["k"] = 5
    elif change == "shape":
        vectors = vectors[:, :3]
    else:
        vectors[7, 2] = np.nan
    np.savez(path, vectors=vectors, meta=np.array(json.dumps(key)))
    with caplog.at_level(logging.WARNING, logger="ttgnn.spectral"):
        again = leading_eigenvectors(indptr, indices, n, 4, cache_dir=tmp_path)
    assert np.isfinite(again).all() and again.shape == (n, 4)
    np.testing.assert_allclose(np.abs(again.T @ first), np.eye(4), atol=1e-6)
    (message,) = [r.getMessage() for r in caplog.records]
    assert re.fullmatch(rf"spectral cache {re.escape(str(path))} is corrupted or mismatched \({reason}\); "
                        r"recomputing", message), message


def test_the_solver_starts_from_the_seed_so_results_repeat_bit_for_bit(graph):
    indptr, indices, n = graph
    a = leading_eigenvectors(indptr, indices, n, 4)
    np.testing.assert_array_equal(leading_eigenvectors(indptr, indices, n, 4), a)
    b = leading_eigenvectors(indptr, indices, n, 4, seed=1)
    assert not np.array_equal(b, a)  # another start: the same subspace, other rounding (or signs)
    np.testing.assert_allclose(np.abs(b.T @ a), np.eye(4), atol=1e-5)


def test_the_default_tolerance_is_accurate_and_one_vector_is_allowed(graph):
    indptr, indices, n = graph
    dense = normalized_adjacency_scipy(indptr, indices, n).toarray()
    values, vectors = np.linalg.eigh(dense)
    top = vectors[:, np.argsort(-values)[1:4]]  # after the one trivial vector
    ours = leading_eigenvectors(indptr, indices, n, 3)
    np.testing.assert_allclose(np.linalg.norm(top.T @ ours, axis=0), np.ones(3), atol=1e-6)
    one = leading_eigenvectors(indptr, indices, n, 1)
    assert one.shape == (n, 1) and abs(abs(float(one[:, 0] @ top[:, 0])) - 1) < 1e-6


def test_k_up_to_all_but_one_without_skipping(graph):
    # n - 1 vectors: the most eigsh finds; with skip_trivial=False nothing is subtracted from n
    ds = planted_partition(14, num_classes=2, avg_degree=4, homophily=0.9, seed=0)
    indptr, indices = ds.csr()
    vectors = leading_eigenvectors(indptr, indices, 14, 13, tol=1e-10, skip_trivial=False)
    assert vectors.shape == (14, 13)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(13), atol=1e-8)
    with pytest.raises(ValueError, match=r"^k must be in \[1, 14\) for a graph of 14 nodes, got 14$"):
        leading_eigenvectors(indptr, indices, 14, 14, skip_trivial=False)


def test_the_log_line_names_k_the_graph_the_eigenvalues_and_the_trivial_vectors(graph, caplog):
    indptr, indices, n = graph
    dense = normalized_adjacency_scipy(indptr, indices, n).toarray()
    values = np.sort(np.linalg.eigvalsh(dense))[::-1]
    with caplog.at_level(logging.INFO, logger="ttgnn.spectral"):
        leading_eigenvectors(indptr, indices, n, 4, tol=1e-10)
    (message,) = [r.getMessage() for r in caplog.records]
    match = re.fullmatch(r"4 leading eigenvectors of a 300-node graph in (\d+\.\d) s \(eigenvalues (\S+) to (\S+); "
                         r"1 trivial skipped\)", message)
    assert match, message
    assert float(match[1]) < 60
    assert match[2] == f"{values[1]:.4f}" and match[3] == f"{values[4]:.4f}"


def test_no_cache_folder_writes_nothing_and_warns_nothing(graph, tmp_path, monkeypatch, caplog):
    indptr, indices, n = graph
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING):
        leading_eigenvectors(indptr, indices, n, 2)
    assert caplog.records == [] and list(tmp_path.iterdir()) == []


def test_spectral_table_passes_seed_trivial_choice_and_cache_on(graph, tmp_path):
    indptr, indices, n = graph
    table = spectral_table(indptr, indices, n, 4, cache_dir=tmp_path)  # defaults: std 1, seed 0, trivial skipped
    assert abs(float(table.pow(2).mean().sqrt()) - 1.0) < 1e-4
    root_degree = np.sqrt(np.diff(indptr))
    np.testing.assert_allclose(root_degree @ table.double().numpy(), np.zeros(4), atol=1e-3)
    spectral_table(indptr, indices, n, 4, seed=2, skip_trivial=False, vectors=1, cache_dir=tmp_path)
    tails = sorted(p.name.split("-", 3)[3] for p in tmp_path.iterdir())
    assert tails == ["k1-seed2-with-trivial.npz", "k4-seed0.npz"]
    with_trivial = spectral_table(indptr, indices, n, 4, skip_trivial=False)
    first = with_trivial[:, 0].double().numpy()
    np.testing.assert_allclose(np.abs(first @ root_degree) / (np.linalg.norm(first) * np.linalg.norm(root_degree)),
                               1.0, atol=1e-6)  # the trivial vector leads when it is kept
    assert not with_trivial[:, 1:].eq(0).all(0).any()


def test_spectral_table_signs_make_each_columns_largest_entry_positive_and_keep_the_scale(graph):
    indptr, indices, n = graph
    vectors = leading_eigenvectors(indptr, indices, n, 3)
    table = spectral_table(indptr, indices, n, 3, std=2.0).double().numpy()
    np.testing.assert_allclose(np.abs(table), np.abs(vectors) * 2.0 * np.sqrt(n), rtol=1e-5)
    assert (table[np.abs(table).argmax(0), np.arange(3)] > 0).all()


# ---------------------------------------------------------------------- available memory
def test_available_memory_reads_memavailable_then_falls_back_to_sysconf(monkeypatch):
    meminfo = "MemTotal:       1000 kB\nMemFree:         300 kB\nMemAvailable:    2048 kB\n"
    monkeypatch.setattr(spectral, "open", lambda path, *a, **k: io.StringIO(meminfo) if path == "/proc/meminfo"
                        else pytest.fail(f"opened {path}"), raising=False)
    assert spectral.available_memory() == 2048 * 1024

    def no_proc(path, *a, **k):
        raise OSError("no /proc")

    sysconf = {"SC_AVPHYS_PAGES": 10, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(spectral, "open", no_proc, raising=False)
    monkeypatch.setattr(spectral.os, "sysconf", lambda name: sysconf[name])
    assert spectral.available_memory() == 10 * 4096
    monkeypatch.setattr(spectral, "open", lambda path, *a, **k: io.StringIO("MemTotal: 1 kB\n"), raising=False)
    assert spectral.available_memory() == 10 * 4096  # no MemAvailable line: sysconf too

    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(spectral.os, "sysconf", unknown)
    assert spectral.available_memory() is None


def test_a_table_of_exactly_the_available_memory_is_allowed(monkeypatch):
    monkeypatch.setattr(spectral, "available_memory", lambda: 1000 * 8 * 4)
    spectral.check_table_fits(1000, 8, 4)
    with pytest.raises(MemoryError):
        spectral.check_table_fits(1001, 8, 4)


class _RunsOnLoad:
    """Unpickling this calls ``_ran_on_load``: what a crafted cache file could make a loader run."""

    def __reduce__(self):
        return (_ran_on_load, ())


RAN = []


def _ran_on_load():
    RAN.append(True)
    return "not a key"


def test_a_cache_file_never_unpickles(graph, tmp_path, caplog):
    indptr, indices, n = graph
    first = leading_eigenvectors(indptr, indices, n, 2, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    np.savez(path, vectors=first, meta=np.array([_RunsOnLoad()], dtype=object))  # a pickled object inside
    RAN.clear()
    again = leading_eigenvectors(indptr, indices, n, 2, cache_dir=tmp_path)
    assert RAN == [] and "is corrupted or mismatched" in caplog.text
    np.testing.assert_allclose(np.abs(again.T @ first), np.eye(2), atol=1e-6)


def test_spectral_vectors_left_unread_by_the_auto_init_are_warned_of(planted, caplog):
    # --spectral-vectors 4 on a graph of many labels, where --init auto picks gaussian, was dropped
    # without a word (metrics recorded spectral_vectors None).
    import logging

    import ttgnn.train as ttrain
    from configs import small_config

    config = small_config(None, init="auto", spectral_vectors=4)
    settled = ttrain.settle_by_graph(config, planted)
    assert settled.init == "gaussian"  # half the planted graph's nodes are training nodes
    with caplog.at_level(logging.WARNING, logger="ttgnn.train"):
        ttrain._log_settled(config, settled, planted)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "spectral_vectors=4: not read, the table init is gaussian (give init='spectral' to use eigenvectors); ignored"]


@pytest.mark.parametrize("edges, num_nodes, k", [
    ([(0, 1), (2, 3), (4, 5), (6, 7), (7, 8)], 9, 3),  # four bipartite components: -1 four times
    ([(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)], 8, 5),  # two 4-cycles
])
def test_eigenvectors_that_reach_eigenvalue_minus_one_are_not_mixed_with_the_trivial_ones(edges, num_nodes, k):
    # the trivial eigenvectors, moved to -1, tied with S's own there: columns came back with residuals of 0.5-0.9
    rows = [a for a, b in edges] + [b for a, b in edges]
    cols = [b for a, b in edges] + [a for a, b in edges]
    adjacency = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(num_nodes, num_nodes))
    vectors = leading_eigenvectors(adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64), num_nodes, k)
    degree = np.sqrt(np.asarray(adjacency.sum(1)).ravel())
    dense = adjacency.toarray() / np.outer(degree, degree)
    eigenvalues = np.linalg.eigvalsh(dense)
    nontrivial = np.sort(eigenvalues[~np.isclose(eigenvalues, 1.0)])[::-1]  # one eigenvalue 1 per component
    values = np.diag(vectors.T @ dense @ vectors)
    np.testing.assert_allclose(values, nontrivial[:k], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(dense @ vectors - vectors * values, axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(k), atol=1e-8)


def test_a_graph_without_edges_and_a_float_k_are_refused_before_the_solver():
    empty = (np.zeros(7, dtype=np.int64), np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match=r"^a graph of 6 nodes without edges has no spectrum"):  # ARPACK error -9
        spectral_table(*empty, 6, dim=2)
    with pytest.raises(TypeError, match=r"^k must be an int, got float 1.0$"):  # SystemError inside ARPACK
        leading_eigenvectors(np.array([0, 1, 2, 2]), np.array([1, 0]), 3, 1.0)


def test_a_spectral_cache_path_that_is_no_regular_file_is_recomputed_without_blocking(tmp_path, caplog):
    import os
    import threading

    graph = planted_partition(60, num_classes=3, seed=0)
    indptr, indices = graph.csr()
    first = leading_eigenvectors(indptr, indices, 60, 3, cache_dir=tmp_path)
    (path,) = list(tmp_path.glob("*.npz"))
    path.unlink()
    os.mkfifo(path)  # np.load's open blocked for ever
    result = []
    worker = threading.Thread(target=lambda: result.append(leading_eigenvectors(indptr, indices, 60, 3,
                                                                                cache_dir=tmp_path)), daemon=True)
    with caplog.at_level(logging.WARNING):
        worker.start()
        worker.join(60)
    assert result and np.array_equal(result[0], first), "the solve blocked on a FIFO in the cache"
    assert any("is not a regular file; recomputing" in r.getMessage() for r in caplog.records)
