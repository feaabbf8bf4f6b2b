"""Graph input handling: validation, symmetrisation and a content hash.

Every method in :mod:`ttgnn.partition` works on one canonical form: a symmetric CSR adjacency
without self-loops or duplicate edges, with sorted column indices. :func:`canonical_csr` builds it
from either accepted input (CSR arrays or an edge index).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

__all__ = ["CSRGraph", "GraphInput", "canonical_csr"]

log = logging.getLogger(__name__)

GraphInput = Union[Tuple[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class CSRGraph:
    """A symmetric graph in CSR form, without self-loops or duplicate edges.

    Attributes:
        indptr (np.ndarray): ``int64`` row offsets, shape ``(N + 1,)``.
        indices (np.ndarray): ``int32`` (or ``int64`` for ``N >= 2**31``) neighbours, shape
            ``(nnz,)``, sorted within each row. Every undirected edge appears twice.
    """

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_entries(self) -> int:
        """Stored adjacency entries: twice the number of undirected edges."""
        return int(self.indices.shape[0])

    def content_hash(self) -> str:
        """A hex digest of the node count and the adjacency structure (for caching)."""
        digest = hashlib.blake2b(digest_size=20)
        digest.update(np.int64(self.num_nodes).tobytes())
        digest.update(np.ascontiguousarray(self.indptr, dtype=np.int64).tobytes())
        digest.update(np.ascontiguousarray(self.indices, dtype=np.int64 if self.indices.dtype == np.int64
                                           else np.int32).tobytes())
        return digest.hexdigest()

    def edge_rows(self) -> np.ndarray:
        """Source node of every stored entry, shape ``(nnz,)``, same dtype as ``indices``."""
        return np.repeat(np.arange(self.num_nodes, dtype=self.indices.dtype), np.diff(self.indptr))


def _index_dtype(num_nodes: int) -> np.dtype:
    return np.dtype(np.int32) if num_nodes < 2**31 - 1 else np.dtype(np.int64)


def _as_int_array(name: str, values, ndim: int) -> np.ndarray:
    if not isinstance(values, np.ndarray):
        try:
            values = np.asarray(values)
        except Exception as err:  # noqa: BLE001 - anything unconvertible is a type error here
            raise TypeError(f"{name} must be a numpy integer array, got {type(values).__name__}") from err
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        if values.size == 0 and values.dtype == np.float64:
            values = values.astype(np.int64)  # an empty list converts to float64; it is harmless
        else:
            raise TypeError(f"{name} must hold integers, got dtype {values.dtype}")
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {values.shape}")
    return values


def _check_ids(name: str, ids: np.ndarray, num_nodes: int) -> None:
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        raise ValueError(f"{name} contains the negative node id {low}; ids must be in [0, {num_nodes})")
    if high >= num_nodes:
        raise ValueError(f"{name} contains node id {high}, out of range for num_nodes={num_nodes} "
                         f"(ids must be in [0, {num_nodes}))")


def _symmetric_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> CSRGraph:
    dtype = _index_dtype(num_nodes)
    keep = src != dst
    src = src[keep].astype(dtype, copy=False)
    dst = dst[keep].astype(dtype, copy=False)
    rows = np.concatenate([src, dst])
    cols = np.concatenate([dst, src])
    del src, dst, keep
    # The data values are never read: duplicate entries are merged by sum_duplicates and only the
    # sparsity structure is kept, so an int8 overflow on heavily duplicated edges is harmless.
    data = np.ones(rows.shape[0], dtype=np.int8)
    matrix = sp.csr_matrix((data, (rows, cols)), shape=(num_nodes, num_nodes))
    del rows, cols, data
    matrix.sum_duplicates()  # also sorts the indices of every row
    indptr = matrix.indptr.astype(np.int64, copy=False)
    indices = matrix.indices.astype(dtype, copy=False)
    return CSRGraph(indptr, indices)


def canonical_csr(graph: GraphInput, num_nodes: Optional[int] = None) -> CSRGraph:
    """Validate a graph and return its symmetric CSR form without self-loops or duplicates.

    Args:
        graph (tuple or np.ndarray): either a CSR tuple ``(indptr, indices)`` of integer arrays,
            or an edge index of shape ``(2, E)``. Directed input is symmetrised; self-loops and
            duplicate edges are dropped.
        num_nodes (int, optional): the node count. Required for an edge index whose largest
            ids are isolated nodes; defaults to ``max id + 1``. For CSR input it must equal
            ``len(indptr) - 1`` when given.

    Raises:
        TypeError: non-integer arrays or an unsupported container.
        ValueError: wrong shapes, ids out of ``[0, num_nodes)``, a malformed ``indptr``.
    """
    if num_nodes is not None:
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)):
            raise TypeError(f"num_nodes must be an int, got {type(num_nodes).__name__}")
        num_nodes = int(num_nodes)
        if num_nodes < 1:
            raise ValueError(f"num_nodes must be >= 1, got {num_nodes}")

    # Only a tuple is CSR: a nested list [[src...], [dst...]] is an edge index.
    if isinstance(graph, tuple):
        if len(graph) != 2:
            raise ValueError(f"a CSR graph must be a tuple (indptr, indices), got {len(graph)} items")
        indptr = _as_int_array("indptr", graph[0], 1)
        indices = _as_int_array("indices", graph[1], 1)
        if indptr.shape[0] < 2:
            raise ValueError(f"indptr must have N + 1 >= 2 entries, got shape {indptr.shape}")
        n = indptr.shape[0] - 1
        if num_nodes is not None and num_nodes != n:
            raise ValueError(f"num_nodes={num_nodes} does not match the CSR indptr, which has {n} rows")
        if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0]:
            raise ValueError(f"indptr must start at 0 and end at len(indices)={indices.shape[0]}, "
                             f"got {int(indptr[0])} and {int(indptr[-1])}")
        if np.any(np.diff(indptr) < 0):
            raise ValueError("indptr must be non-decreasing")
        _check_ids("indices", indices, n)
        rows = np.repeat(np.arange(n, dtype=_index_dtype(n)), np.diff(indptr))
        return _symmetric_from_edges(rows, indices, n)

    if isinstance(graph, np.ndarray) or isinstance(graph, list):
        edge_index = _as_int_array("edge_index", graph, 2)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E), got {edge_index.shape}")
        if num_nodes is None:
            if edge_index.shape[1] == 0:
                raise ValueError("num_nodes is required for an edge index without edges")
            num_nodes = int(edge_index.max()) + 1
        _check_ids("edge_index", edge_index, num_nodes)
        return _symmetric_from_edges(edge_index[0], edge_index[1], num_nodes)

    raise TypeError("graph must be a CSR tuple (indptr, indices) or an edge index array of shape "
                    f"(2, E), got {type(graph).__name__}")
