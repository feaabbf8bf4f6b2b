"""Tests of ttgnn.spectral: eigenvectors against a dense solver, caching, and the TT-SVD of the table."""
import numpy as np
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
    indptr, indices, n = disconnected
    with pytest.raises(ValueError, match=r"k must be in \[1, 210\) for a graph of 213 nodes less the 3 trivial"):
        leading_eigenvectors(indptr, indices, n, 210)


def test_available_memory_is_positive_and_a_table_too_large_is_refused_up_front(monkeypatch):
    import ttgnn.spectral as spectral

    have = spectral.available_memory()
    assert have is None or have > 0
    monkeypatch.setattr(spectral, "available_memory", lambda: 10 * 2**30)
    spectral.check_table_fits(1_000_000, 128, 28)  # 3.3 GiB of 10: fine
    with pytest.raises(MemoryError, match=r"111,059,956 x 128 table \(53\.0 GiB.*10\.0 GiB is available.*--init"):
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
