"""Graph input handling: validation, symmetrisation and a content hash.

Every method in :mod:`ttgnn.partition` works on one canonical form: a symmetric CSR adjacency
without self-loops or duplicate edges, with sorted column indices. :func:`canonical_csr` builds it
from any accepted input (CSR arrays, a scipy sparse adjacency or an edge index).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

__all__ = ["CSRGraph", "GraphInput", "canonical_csr", "csr_from_edge_chunks"]

log = logging.getLogger(__name__)

# CSR arrays, an edge index (numpy, list or torch tensor), a scipy sparse adjacency, a DGLGraph or a CSRGraph.
GraphInput = Union[Tuple[np.ndarray, np.ndarray], np.ndarray, "sp.sparray", "sp.spmatrix", "CSRGraph"]


@dataclass(frozen=True)
class CSRGraph:
    """A symmetric graph in CSR form, without self-loops or duplicate edges.

    Attributes:
        indptr (np.ndarray): ``int64`` row offsets, shape ``(N + 1,)``.
        indices (np.ndarray): ``int32`` (or ``int64`` for ``N >= 2**31``) neighbours, shape
            ``(nnz,)``, sorted within each row. Every undirected edge appears twice.
        canonical (bool): the arrays are known to be as above: set by :func:`canonical_csr` and
            :func:`csr_from_edge_chunks`, or by a caller that built them so (nothing is checked).
            A ``CSRGraph`` without it is checked and symmetrised by :func:`canonical_csr` like a
            CSR tuple. (default: ``False``)
    """

    indptr: np.ndarray
    indices: np.ndarray
    canonical: bool = field(default=False, repr=False, compare=False)

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1  # len, not .shape: a CSRGraph of lists is checked by canonical_csr

    @property
    def num_entries(self) -> int:
        """Stored adjacency entries: twice the number of undirected edges."""
        return len(self.indices)

    def content_hash(self) -> str:
        """A hex digest of the node count and the adjacency structure (for caching)."""
        digest = hashlib.blake2b(digest_size=20)
        digest.update(np.int64(self.num_nodes).tobytes())
        # the arrays' buffers themselves (tobytes() copied them: gigabytes for papers100M), same digest
        digest.update(np.ascontiguousarray(self.indptr, dtype=np.int64))
        digest.update(np.ascontiguousarray(self.indices, dtype=np.int64 if self.indices.dtype == np.int64
                                           else np.int32))
        return digest.hexdigest()

    def __iter__(self):
        """Unpacks like the tuple ``(indptr, indices)``."""
        return iter((self.indptr, self.indices))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, item):
        return (self.indptr, self.indices)[item]

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


# Edges handled per chunk while building a CSR: bounds the temporaries, not the result.
_EDGE_CHUNK = 1 << 24


def csr_from_edge_chunks(chunks, num_nodes: int, num_chunks: Optional[int] = None,
                         progress: bool = False) -> CSRGraph:
    """The canonical symmetric CSR of a graph given as a re-iterable of edge chunks, built lean.

    Two passes over ``chunks()`` (a callable returning a fresh iterator of ``(src, dst)`` integer
    array pairs, e.g. a seeded generator): the first counts degrees, the second places every
    entry (both directions) by a counting sort; rows are then sorted and deduplicated in blocks,
    in place. Memory: the result (``int32`` indices below ``2**31`` nodes, ``int64`` offsets),
    one ``int64`` cursor per node, and temporaries of one chunk; no ``(2, E)`` copy, no loop per node.

    Args:
        chunks (callable): returns an iterator of ``(src, dst)`` arrays; self-loops are dropped,
            duplicates (in either direction) merged.
        num_nodes (int): ``N``; every id must lie in ``[0, N)`` (the caller checks).
        num_chunks (int, optional): how many chunks ``chunks()`` yields (for the progress bar).
        progress (bool): tqdm bars over both passes. (default: ``False``)

    Returns:
        CSRGraph: sorted, duplicate-free rows.
    """
    from tqdm.auto import tqdm

    dtype = _index_dtype(num_nodes)
    degree = np.zeros(num_nodes, dtype=np.int64)
    for src, dst in tqdm(chunks(), total=num_chunks, desc="CSR: degrees", unit="chunk", disable=not progress):
        keep = src != dst
        degree += np.bincount(src[keep], minlength=num_nodes)
        degree += np.bincount(dst[keep], minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    del degree
    # Slots left empty (scipy merges a chunk's duplicates) hold the out-of-range id N, dropped below.
    indices = np.full(int(indptr[-1]), num_nodes, dtype=dtype)
    cursor = indptr[:-1].copy()
    for src, dst in tqdm(chunks(), total=num_chunks, desc="CSR: placing", unit="chunk", disable=not progress):
        keep = src != dst
        src = src[keep].astype(dtype, copy=False)
        dst = dst[keep].astype(dtype, copy=False)
        # scipy's counting sort (C++) groups the chunk's entries by row; each row's run is then
        # copied to that row's cursor in the result.
        part = sp.csr_matrix((np.ones(2 * src.shape[0], dtype=np.int8), (np.concatenate([src, dst]),
                              np.concatenate([dst, src]))), shape=(num_nodes, num_nodes))
        del src, dst, keep
        part_indptr = part.indptr.astype(np.int64, copy=False)
        counts = np.diff(part_indptr)
        positions = np.repeat(cursor - part_indptr[:-1], counts)
        positions += np.arange(positions.shape[0], dtype=np.int64)
        indices[positions] = part.indices
        cursor += counts
        del part, part_indptr, counts, positions
    del cursor
    return _sort_dedupe_rows(indptr, indices)


def _sort_dedupe_rows(indptr: np.ndarray, indices: np.ndarray) -> CSRGraph:
    """Sort every row and drop repeated entries, in place, in blocks of about ``_EDGE_CHUNK`` entries."""
    num_nodes = indptr.shape[0] - 1
    new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    write = 0
    row = 0
    while row < num_nodes:
        end = int(np.searchsorted(indptr, indptr[row] + _EDGE_CHUNK, side="right")) - 1
        end = min(max(end, row + 1), num_nodes)
        lo, hi = int(indptr[row]), int(indptr[end])
        local_rows = np.repeat(np.arange(end - row, dtype=np.int64), np.diff(indptr[row:end + 1]))
        key = (local_rows << 32) | indices[lo:hi].astype(np.int64)
        del local_rows
        key.sort()
        fresh = np.r_[True, key[1:] != key[:-1]] if key.shape[0] else np.zeros(0, dtype=bool)
        fresh &= (key & 0xFFFFFFFF) != num_nodes
        key = key[fresh]
        counts = np.bincount((key >> 32).astype(np.int64), minlength=end - row)
        indices[write:write + key.shape[0]] = (key & 0xFFFFFFFF).astype(indices.dtype)
        new_indptr[row + 1:end + 1] = write + np.cumsum(counts)
        write += key.shape[0]
        row = end
    if num_nodes:
        new_indptr[0] = 0
    indices = indices[:write].copy() if write < indices.shape[0] else indices
    return CSRGraph(new_indptr, indices, canonical=True)


def _symmetric_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> CSRGraph:
    if num_nodes >= 2**32:  # the packed (row, col) sort key holds 32-bit columns
        raise ValueError(f"graphs of {num_nodes} >= 2**32 nodes are not supported")

    def chunks():
        for start in range(0, src.shape[0], _EDGE_CHUNK):
            yield src[start:start + _EDGE_CHUNK], dst[start:start + _EDGE_CHUNK]

    return csr_from_edge_chunks(chunks, num_nodes)


def canonical_csr(graph: GraphInput, num_nodes: Optional[int] = None) -> CSRGraph:
    """Validate a graph and return its symmetric CSR form without self-loops or duplicates.

    Args:
        graph (tuple, scipy.sparse or array): a CSR tuple ``(indptr, indices)`` of integer
            arrays, a square scipy sparse adjacency (its nonzero pattern; values are ignored), or
            an edge index of shape ``(2, E)`` (numpy array, list or torch tensor), or a
            homogeneous ``dgl.DGLGraph`` (its edges and node count). Directed input is
            symmetrised; self-loops and duplicate edges are dropped.
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

    if isinstance(graph, CSRGraph):
        if graph.num_nodes < 1:
            raise ValueError(f"a graph needs at least one node, got a CSRGraph of {graph.num_nodes}")
        if num_nodes is not None and num_nodes != graph.num_nodes:
            raise ValueError(f"num_nodes={num_nodes} does not match the CSRGraph's {graph.num_nodes} nodes")
        if graph.canonical:  # built by this module (or declared so)
            return graph
        # made elsewhere: checked and symmetrised as CSR arrays (METIS crashed on a one-directional one)
        graph = (graph.indptr, graph.indices)
    if sp.issparse(graph):  # a scipy sparse adjacency (matrix or array, any format): its pattern
        if graph.ndim != 2 or graph.shape[0] != graph.shape[1]:
            raise ValueError(f"a sparse adjacency must be square, got shape {graph.shape}")
        if graph.shape[0] < 1:
            raise ValueError("a graph needs at least one node, got a 0 x 0 sparse adjacency")
        csr = sp.csr_array(graph)
        csr.eliminate_zeros()  # stored zeros are not edges
        graph = (csr.indptr, csr.indices)
    elif type(graph).__module__.split(".")[0] == "dgl" and hasattr(graph, "edges"):
        # a DGLGraph, ttgnn's graph container (told by its module: partition does not import dgl)
        if len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
            raise ValueError(f"a DGL graph must be homogeneous (one node and one edge type), got node "
                             f"types {graph.ntypes} and edge types {graph.etypes}")
        if num_nodes is not None and num_nodes != graph.num_nodes():
            raise ValueError(f"num_nodes={num_nodes} does not match the DGL graph's {graph.num_nodes()} nodes")
        num_nodes = int(graph.num_nodes())
        if num_nodes < 1:
            raise ValueError("a graph needs at least one node, got a DGL graph with none")
        src, dst = graph.edges()
        graph = np.stack([src.cpu().numpy(), dst.cpu().numpy()])
    elif type(graph).__module__.split(".")[0] == "torch" and hasattr(graph, "numpy"):
        # a torch edge index, as PyTorch Geometric keeps it (told by its module: partition does not import torch)
        graph = graph.detach().cpu().numpy()
    # Only a tuple is CSR: a nested list [[src...], [dst...]] is an edge index.
    if isinstance(graph, tuple):
        if len(graph) != 2:
            raise ValueError(f"a CSR graph must be a tuple (indptr, indices), got {len(graph)} items")
        indptr = _as_int_array("indptr", graph[0], 1)
        indices = _as_int_array("indices", graph[1], 1)
        if indptr.dtype.kind == "u":  # np.diff of unsigned offsets wraps instead of going negative
            if indptr.size and int(indptr.max()) > np.iinfo(np.int64).max:
                raise ValueError(f"indptr holds {int(indptr.max())}, beyond 64-bit signed offsets")
            indptr = indptr.astype(np.int64)
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

    raise TypeError("graph must be a CSR tuple (indptr, indices), a scipy sparse adjacency, a DGLGraph or an edge "
                    f"index (numpy array or torch tensor) of shape (2, E), got {type(graph).__name__}")
