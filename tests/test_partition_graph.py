"""Tests of ttgnn.partition.graph: accepted inputs, symmetrisation, validation, content hash."""
import numpy as np
import pytest

from ttgnn.partition import METHODS, canonical_csr, hierarchical_order

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
