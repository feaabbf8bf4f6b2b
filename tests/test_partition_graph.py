"""Tests of ttgnn.partition.graph: accepted inputs, symmetrisation, validation, content hash."""
import hashlib

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from ttgnn.partition import METHODS, canonical_csr, hierarchical_order
from ttgnn.partition import graph as graph_module
from ttgnn.partition.graph import CSRGraph, csr_from_edge_chunks

from partition_graphs import sbm_edges


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


# Invalid graphs: the error comes from canonical_csr, reached through the public entry point.
@pytest.mark.parametrize("graph,kwargs,error,match", [
    (np.array([[0, 1], [1, 5]]), {"num_nodes": 4}, ValueError, r"node id 5, out of range.*\[0, 4\)"),
    (np.array([[0, -1], [1, 2]]), {}, ValueError, "negative node id -1"),
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
    (np.array([[0], [1]]), {"num_nodes": 0}, ValueError, "num_nodes must be >= 1"),
])
def test_bad_graph_raises_clear_errors(graph, kwargs, error, match):
    with pytest.raises(error, match=match):
        hierarchical_order(graph, (4, 4), **kwargs)


# --- the lean CSR builder, against scipy ------------------------------------------------------------


def _scipy_symmetric(src, dst, num_nodes):
    """The canonical form by scipy: symmetric, no self-loops, no duplicates, sorted rows."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    adj = sp.csr_matrix((np.ones(2 * src.shape[0]), (np.r_[src, dst], np.r_[dst, src])),
                        shape=(num_nodes, num_nodes))
    adj.sum_duplicates()
    adj.sort_indices()
    return adj.indptr.astype(np.int64), adj.indices


def _random_edges(num_nodes, num_edges, seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    # duplicates in both directions, self-loops, and a hub whose row spans many sort blocks
    src = np.r_[src, dst[:50], src[:50], np.arange(20), np.zeros(40, dtype=np.int64)]
    dst = np.r_[dst, src[:50], dst[:50], np.arange(20), np.arange(1, 41)]
    return src, dst


def _chunked(src, dst, size):
    def chunks():
        for start in range(0, src.shape[0], size):
            yield src[start:start + size], dst[start:start + size]
    return chunks


@pytest.mark.parametrize("chunk,block", [(10**6, 1 << 24), (37, 1 << 24), (37, 16), (1, 5), (500, 1)])
def test_csr_from_edge_chunks_equals_scipy(monkeypatch, chunk, block):
    # Any chunking of the edges and any sort-block size give scipy's canonical CSR; the last
    # nodes are isolated, so rows past the last entry must stay empty.
    monkeypatch.setattr(graph_module, "_EDGE_CHUNK", block)
    num_nodes = 130
    src, dst = _random_edges(120, 700, seed=chunk + block)
    csr = csr_from_edge_chunks(_chunked(src, dst, chunk), num_nodes)
    indptr, indices = _scipy_symmetric(src, dst, num_nodes)
    assert isinstance(csr, CSRGraph)
    assert csr.indptr.dtype == np.int64 and csr.indices.dtype == np.int32
    np.testing.assert_array_equal(csr.indptr, indptr)
    np.testing.assert_array_equal(csr.indices, indices)
    assert csr.num_nodes == num_nodes and csr.num_entries == indices.shape[0]


@pytest.mark.parametrize("block", [1, 3, 1 << 24])
def test_canonical_csr_of_edges_and_of_csr_equals_scipy_with_any_sort_block(monkeypatch, block):
    monkeypatch.setattr(graph_module, "_EDGE_CHUNK", block)
    src, dst = _random_edges(60, 300, seed=block)
    indptr, indices = _scipy_symmetric(src, dst, 64)
    from_edges = canonical_csr(np.stack([src, dst]), 64)
    np.testing.assert_array_equal(from_edges.indptr, indptr)
    np.testing.assert_array_equal(from_edges.indices, indices)
    # a directed CSR with self-loops and repeats, as a tuple: symmetrised the same way
    directed = sp.csr_matrix((np.ones(src.shape[0]), (src, dst)), shape=(64, 64))
    directed.sum_duplicates()
    from_csr = canonical_csr((directed.indptr, directed.indices))
    np.testing.assert_array_equal(from_csr.indptr, indptr)
    np.testing.assert_array_equal(from_csr.indices, indices)


def test_csr_from_edge_chunks_progress_bars_and_chunk_count(capsys):
    src, dst = _random_edges(50, 100, seed=1)
    num_chunks = -(-src.shape[0] // 40)
    csr_from_edge_chunks(_chunked(src, dst, 40), 50, num_chunks=num_chunks, progress=True)
    err = capsys.readouterr().err
    for desc in ("CSR: degrees:", "CSR: placing:"):
        last = [line for line in err.replace("\r", "\n").splitlines() if desc in line][-1]
        assert f"{num_chunks}/{num_chunks}" in last  # the total is known, so the bar shows it
        assert "chunk/s" in last or "s/chunk" in last
    csr_from_edge_chunks(_chunked(src, dst, 40), 50)
    assert capsys.readouterr().err == ""


def test_graph_without_edges_and_index_dtype_boundary():
    csr = csr_from_edge_chunks(lambda: iter([(np.zeros(0, np.int64), np.zeros(0, np.int64))]), 4)
    np.testing.assert_array_equal(csr.indptr, [0, 0, 0, 0, 0])
    assert csr.indices.shape == (0,)
    only_loops = canonical_csr(np.array([[0, 1, 2], [0, 1, 2]]))
    np.testing.assert_array_equal(only_loops.indptr, [0, 0, 0, 0])
    # int32 holds every id and the builder's placeholder id N below 2^31 - 1 nodes
    assert graph_module._index_dtype(2**31 - 2) == np.int32
    assert graph_module._index_dtype(2**31 - 1) == np.int64
    assert graph_module._index_dtype(2**33) == np.int64
    # the packed (row, column) sort key holds 32-bit columns: refused before anything is allocated
    with pytest.raises(ValueError, match=r"^graphs of 4294967296 >= 2\*\*32 nodes are not supported$"):
        canonical_csr(np.array([[0], [1]]), num_nodes=2**32)


def test_csr_graph_unpacks_indexes_and_lists_rows():
    csr = canonical_csr(np.array([[0, 0, 2], [1, 2, 3]]))
    indptr, indices = csr
    assert indptr is csr.indptr and indices is csr.indices
    assert len(csr) == 2 and csr[0] is csr.indptr and csr[1] is csr.indices and csr[-1] is csr.indices
    rows = csr.edge_rows()
    np.testing.assert_array_equal(rows, [0, 0, 1, 2, 2, 3])
    assert rows.dtype == csr.indices.dtype
    wide = CSRGraph(csr.indptr, csr.indices.astype(np.int64))
    assert wide.edge_rows().dtype == np.int64


def test_canonical_csr_passes_a_csr_graph_through_and_checks_num_nodes():
    csr = canonical_csr(np.array([[0, 1], [1, 2]]))
    assert canonical_csr(csr) is csr
    assert canonical_csr(csr, num_nodes=3) is csr
    assert canonical_csr(csr, num_nodes=np.int64(3)) is csr
    with pytest.raises(ValueError, match="num_nodes=4 does not match the CSRGraph's 3 nodes"):
        canonical_csr(csr, num_nodes=4)


def test_a_csr_graph_made_elsewhere_is_checked_and_symmetrised():
    # canonical_csr passed any CSRGraph through: a one-directional one crashed METIS (segmentation
    # fault, exit 139), id -1 wrapped to the last node, a short indptr failed in a broadcast
    one_way = sp.triu(sp.random(100, 100, density=0.05, random_state=0), 1).tocsr()
    made = CSRGraph(one_way.indptr.astype(np.int64), one_way.indices.astype(np.int32))
    expected = canonical_csr((one_way.indptr, one_way.indices))
    got = canonical_csr(made)
    assert got.canonical and not made.canonical and got is not made
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    perm = hierarchical_order(made, (10, 10), method="hierarchical-metis").perm  # was a crash of the process
    assert sorted(perm.tolist()) == list(range(100))
    with pytest.raises(ValueError, match=r"indices contains the negative node id -1; ids must be in \[0, 2\)"):
        canonical_csr(CSRGraph(np.array([0, 1, 2]), np.array([-1, 0], dtype=np.int32)))
    with pytest.raises(ValueError, match="indptr must start at 0 and end at len"):
        canonical_csr(CSRGraph(np.array([0, 1, 5]), np.array([1, 0], dtype=np.int32)))
    trusted = CSRGraph(expected.indptr, expected.indices, canonical=True)  # declared canonical: not checked
    assert canonical_csr(trusted) is trusted


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_an_unsigned_indptr_is_read_as_offsets(dtype):
    # np.diff of unsigned offsets wraps: a decreasing indptr passed the check (uint32: a 16 GiB
    # allocation for 3 nodes) and a valid uint64 one failed in np.repeat
    with pytest.raises(ValueError, match="indptr must be non-decreasing"):
        canonical_csr((np.array([0, 3, 1, 4], dtype=dtype), np.array([1, 2, 0, 1])))
    valid = canonical_csr((np.array([0, 1, 2], dtype=dtype), np.array([1, 0])))
    assert valid.indptr.tolist() == [0, 1, 2] and valid.indices.tolist() == [1, 0]


@pytest.mark.parametrize("graph,num_nodes,error,match", [
    (np.array([[0], [1]]), True, TypeError, "num_nodes must be an int, got bool"),
    (np.array([[0], [4]]), 4, ValueError,
     r"^edge_index contains node id 4, out of range for num_nodes=4 \(ids must be in \[0, 4\)\)$"),
    (np.array([[0], [-1]]), 4, ValueError, r"^edge_index contains the negative node id -1"),
    ((np.array([0, 1, 2]), np.array([1, 2])), None, ValueError, r"^indices contains node id 2, out of range"),
    ((np.array([0, 1, 2]), np.array([1.0, 0.0])), None, TypeError, r"^indices must hold integers, got dtype float64$"),
    ((np.array([0, 1, 2]), np.array([[1, 0]])), None, ValueError, r"^indices must be 1-dimensional"),
    ((np.array([0, 1, 3]), np.array([1, 0])), None, ValueError,
     r"^indptr must start at 0 and end at len\(indices\)=2, got 0 and 3$"),
    ((np.array([0, 2, 1, 2]), np.array([1, 0])), None, ValueError, r"^indptr must be non-decreasing$"),
    (np.zeros((2, 0), dtype=np.int64), None, ValueError, r"^num_nodes is required for an edge index without edges$"),
    ("edges", None, TypeError,
     r"^graph must be a CSR tuple \(indptr, indices\), a scipy sparse adjacency, a DGLGraph or an edge index \(numpy "
     r"array or torch tensor\) of shape \(2, E\), got str$"),
    (sp.csr_matrix((3, 4)), None, ValueError, r"^a sparse adjacency must be square, got shape \(3, 4\)$"),
    (sp.csr_array((0, 0)), None, ValueError, "at least one node"),
    (sp.coo_array(([1.0], ([0], [2])), shape=(3, 3)), 4, ValueError, "num_nodes=4 does not match"),
    (np.array([[0], [1]]), 2.0, TypeError, "num_nodes must be an int, got float"),
    (np.array([[0], [1]]), -1, ValueError, "num_nodes must be >= 1, got -1"),
    ((np.array([0, 1]), np.array([0]), np.array([0])), None, ValueError, "tuple \\(indptr, indices\\), got 3 items"),
    ((np.array([0]), np.array([], dtype=np.int64)), None, ValueError, "N \\+ 1 >= 2 entries, got shape \\(1,\\)"),
    ((np.array([1, 1]), np.array([0])), None, ValueError, "start at 0 and end at len\\(indices\\)=1, got 1 and 1"),
    ((np.array([0, 2]), np.array([0])), None, ValueError, "got 0 and 2"),
    ((np.array([[0, 1]]), np.array([0])), None, ValueError, "indptr must be 1-dimensional, got shape \\(1, 2\\)"),
    ((np.array([0, 1, 2]), np.array([1, 3])), None, ValueError,
     r"indices contains node id 3, out of range for num_nodes=2 \(ids must be in \[0, 2\)\)"),
    ((np.array([0, 1, 2]), np.array([1, -2])), None, ValueError,
     r"indices contains the negative node id -2; ids must be in \[0, 2\)"),
    ((np.array([0, 1, 2]), np.array([1, 0])), 3, ValueError,
     "num_nodes=3 does not match the CSR indptr, which has 2 rows"),
    ([[0, 1], [1, 2, 3]], None, TypeError, "edge_index must be a numpy integer array, got list"),
    (np.array([[0.5], [1.0]]), None, TypeError, "edge_index must hold integers, got dtype float64"),
    (np.zeros((3, 2), dtype=np.int64), None, ValueError, r"edge_index must have shape \(2, E\), got \(3, 2\)"),
    ({0: 1}, None, TypeError, "got dict"),
])
def test_canonical_csr_names_what_is_wrong(graph, num_nodes, error, match):
    with pytest.raises(error, match=match):
        canonical_csr(graph, num_nodes)


def test_canonical_csr_accepts_lists_and_empty_edge_lists():
    as_lists = canonical_csr(([0, 1, 2], [1, 0]))
    np.testing.assert_array_equal(as_lists.indptr, [0, 1, 2])
    np.testing.assert_array_equal(as_lists.indices, [1, 0])
    empty = canonical_csr([[], []], num_nodes=3)
    np.testing.assert_array_equal(empty.indptr, [0, 0, 0, 0])
    one = canonical_csr(np.zeros((2, 0), dtype=np.int64), num_nodes=1)  # the smallest graph
    np.testing.assert_array_equal(one.indptr, [0, 0])
    # num_nodes defaults to the largest id + 1; isolated nodes past it need num_nodes
    assert canonical_csr(np.array([[0, 4], [1, 2]])).num_nodes == 5
    assert canonical_csr(np.array([[0, 4], [1, 2]]), 9).num_nodes == 9
    np.testing.assert_array_equal(canonical_csr(np.array([[1], [0]]), 2).indptr, [0, 1, 2])


@pytest.mark.parametrize("kind", ["csr_matrix", "csr_array", "coo_matrix", "csc_array", "lil_matrix"])
def test_canonical_csr_of_a_scipy_adjacency_equals_its_edge_index(kind):
    edge_index, _ = sbm_edges(3, 20, 150, 0.8, seed=5)
    values = np.random.default_rng(0).uniform(0.5, 2.0, edge_index.shape[1])  # weights are ignored
    adjacency = getattr(sp, kind)(sp.coo_array((values, (edge_index[0], edge_index[1])), shape=(60, 60)))
    expected = canonical_csr(edge_index, 60)
    got = canonical_csr(adjacency)
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(hierarchical_order(adjacency, (4, 4, 4)).perm,
                                  hierarchical_order(edge_index, (4, 4, 4), num_nodes=60).perm)


def test_stored_zeros_of_a_sparse_adjacency_are_not_edges():
    adjacency = sp.csr_array((np.array([1.0, 0.0, 2.0]), (np.array([0, 1, 2]), np.array([1, 2, 0]))), shape=(4, 4))
    csr = canonical_csr(adjacency)
    np.testing.assert_array_equal(csr.indptr, [0, 2, 3, 4, 4])  # edges 0-1 and 2-0; the zero 1-2 is dropped
    np.testing.assert_array_equal(csr.indices, [1, 2, 0, 0])


def test_canonical_csr_of_a_torch_edge_index_equals_numpys():
    edge_index, _ = sbm_edges(3, 20, 150, 0.8, seed=6)
    expected = canonical_csr(edge_index, 60)
    got = canonical_csr(torch.from_numpy(edge_index), 60)
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    with pytest.raises(TypeError, match="integers"):
        canonical_csr(torch.zeros(2, 3), 4)


def test_canonical_csr_of_a_dgl_graph_equals_its_edge_index_and_keeps_isolated_nodes():
    # DGL is ttgnn's graph container, so its graphs go in as they are (before: a TypeError)
    import dgl  # ttgnn (imported above) has set DGLBACKEND

    edge_index, _ = sbm_edges(3, 20, 150, 0.8, seed=6)
    g = dgl.graph((torch.from_numpy(edge_index[0]), torch.from_numpy(edge_index[1])), num_nodes=64)
    expected = canonical_csr(edge_index, 64)  # nodes 60-63 have no edges
    got = canonical_csr(g)
    assert got.num_nodes == 64
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(hierarchical_order(g, (4, 4, 4)).perm,
                                  hierarchical_order(edge_index, (4, 4, 4), num_nodes=64).perm)
    with pytest.raises(ValueError, match="num_nodes=60 does not match the DGL graph's 64 nodes"):
        canonical_csr(g, 60)
    hetero = dgl.heterograph({("a", "x", "b"): ([0], [1]), ("b", "y", "a"): ([1], [0])})
    with pytest.raises(ValueError, match="must be homogeneous"):
        canonical_csr(hetero)


def test_content_hash_is_stable_and_covers_nodes_and_edges():
    csr = canonical_csr(np.array([[0, 1], [1, 2]]))
    # The cache key of a graph must not change between versions (orders cached on disk would be
    # recomputed): blake2b-160 of the node count, the int64 offsets and the int32 neighbours.
    expected = hashlib.blake2b(digest_size=20)
    expected.update(np.int64(3).tobytes())
    expected.update(np.array([0, 1, 3, 4], dtype=np.int64).tobytes())
    expected.update(np.array([1, 0, 2, 1], dtype=np.int32).tobytes())
    assert csr.content_hash() == expected.hexdigest()
    assert len(csr.content_hash()) == 40
    # the same graph from other inputs hashes alike; another edge or another node count does not
    assert canonical_csr((np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]))).content_hash() == csr.content_hash()
    assert canonical_csr(np.array([[0, 0], [1, 2]])).content_hash() != csr.content_hash()
    assert canonical_csr(np.array([[0, 1], [1, 2]]), 4).content_hash() != csr.content_hash()
    # int64 neighbours (graphs of 2^31 nodes or more) are hashed as int64
    wide = CSRGraph(csr.indptr, csr.indices.astype(np.int64))
    expected = hashlib.blake2b(digest_size=20)
    expected.update(np.int64(3).tobytes())
    expected.update(np.array([0, 1, 3, 4], dtype=np.int64).tobytes())
    expected.update(np.array([1, 0, 2, 1], dtype=np.int64).tobytes())
    assert wide.content_hash() == expected.hexdigest()


def test_a_csr_graph_of_lists_is_checked_like_a_tuple_of_them():
    # canonical_csr(CSRGraph([0, 1, 2], [1, 0])) failed with "'list' object has no attribute 'shape'"
    graph = canonical_csr(CSRGraph([0, 1, 2], [1, 0]))
    expected = canonical_csr(([0, 1, 2], [1, 0]))
    assert graph.indptr.tolist() == expected.indptr.tolist() == [0, 1, 2]
    assert graph.indices.tolist() == expected.indices.tolist() == [1, 0]
    assert CSRGraph([0, 1, 2], [1, 0]).num_entries == 2
