"""Node orders that map graph locality onto TT row digits.

A TT row index ``i`` has digits ``(t_1, ..., t_K)`` in the row shape ``(n_1, ..., n_K)``, first
digit most significant (see :mod:`ttgnn.shapes`). Rows sharing leading digits share leading core
slices, so an order that gives graph neighbours such rows lets the TT table follow the graph.

``hierarchical-metis`` (and ``hierarchical-kaminpar``, the same hierarchy with KaMinPar as the
splitter, see :mod:`ttgnn.partition.kaminpar`) builds the digits top-down: the graph is split
into ``n_1`` parts of at most ``n_2 * ... * n_K`` nodes (digit ``t_1``), the subgraph induced by each part into ``n_2``
parts of at most ``n_3 * ... * n_K`` nodes (digit ``t_2``), and so on; the last digit is the slot
inside the innermost part. All levels are processed together: after each level the surviving
(intra-part) edges are relabelled in one vectorised pass, so every part's subgraph is a
contiguous slice of one CSR array.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .checks import check_perm, check_row_shape
from .coarsen import _check_int
from .graph import CSRGraph, GraphInput, canonical_csr
from .quality import shared_prefix_fractions
from .split import chunk_split, metis_split

__all__ = ["METHODS", "NodeOrder", "check_perm", "check_row_shape", "hierarchical_order", "order_from_perm"]

log = logging.getLogger(__name__)

# Subgraphs with fewer nodes are split by METIS inside the KaMinPar order (see KaMinParSplitter).
_KAMINPAR_MIN_NODES = 50_000
# Rows per block when the edges inside the new parts are picked out after each level.
_FILTER_ROWS = 1 << 20

METHODS = ("identity", "random", "rcm", "metis-flat", "hierarchical-metis", "hierarchical-kaminpar")



@dataclass(frozen=True, eq=False)
class NodeOrder:
    """A node order: which TT row every node gets, and the part hierarchy behind it.

    Attributes:
        perm (np.ndarray): ``int64``, shape ``(N,)``: node id -> TT row index in
            ``[0, prod(row_shape))``, injective.
        inv_perm (np.ndarray): ``int64``, shape ``(prod(row_shape),)``: TT row -> node id, ``-1``
            for unused (padding) rows.
        parts (list of np.ndarray): ``K - 1`` arrays of shape ``(N,)``; ``parts[l]`` is the part
            of each node at level ``l``, the first ``l + 1`` digits read as one integer
            (``perm // (n_{l+2} * ... * n_K)``).
        row_shape (tuple of int): ``(n_1, ..., n_K)``.
        method (str): one of :data:`METHODS`.
        seed (int): the seed used (METIS and the random order).
        quality (dict): ``shared_prefix_l`` (fraction of edges whose endpoints share their first
            ``l`` digits, for ``l = 1 .. K-1``), ``seconds`` (time to compute the order),
            ``num_nodes`` and ``num_edges`` (undirected, after symmetrisation).
        from_cache (bool): read from the cache (``seconds`` is then the time it took when computed).
    """

    perm: np.ndarray
    inv_perm: np.ndarray
    parts: list
    row_shape: tuple
    method: str
    seed: int
    quality: dict = field(default_factory=dict)
    from_cache: bool = False

    @property
    def num_nodes(self) -> int:
        return int(self.perm.shape[0])

    def digits(self) -> np.ndarray:
        """TT digits of every node's row, ``int64`` of shape ``(N, K)``."""
        out = np.empty((self.num_nodes, len(self.row_shape)), dtype=np.int64)
        rest = self.perm.copy()
        for k in range(len(self.row_shape) - 1, -1, -1):
            out[:, k] = rest % self.row_shape[k]
            rest //= self.row_shape[k]
        return out


def order_from_perm(perm: np.ndarray, row_shape: Sequence[int], method: str, seed: int,
                    quality: dict) -> NodeOrder:
    """Wrap a node -> row map into a :class:`NodeOrder` (derives ``inv_perm`` and ``parts``).

    Raises:
        TypeError, ValueError: ``perm`` is not an injective integer map into the rows
            (:func:`check_perm`), or ``row_shape`` is not a sequence of ints >= 1 (:func:`check_row_shape`:
            a float factor was truncated).
        MemoryError: the row-sized ``inv_perm`` does not fit (a row shape far above the node count).
    """
    row_shape = check_row_shape(row_shape, 0)
    check_perm(np.asarray(perm), math.prod(row_shape))
    perm = np.ascontiguousarray(perm, dtype=np.int64)
    try:
        inv_perm = np.full(math.prod(row_shape), -1, dtype=np.int64)
    except (MemoryError, ValueError) as error:  # ValueError: numpy's "array is too big" (>= 2^63 bytes)
        raise _rows_memory_error(row_shape, perm.shape[0]) from error
    inv_perm[perm] = np.arange(perm.shape[0], dtype=np.int64)
    parts = [perm // math.prod(row_shape[level + 1:]) for level in range(len(row_shape) - 1)]
    # The arrays stay writable: torch.from_numpy warns on read-only arrays, and it is how the
    # order reaches TTNodeEmbedding.
    return NodeOrder(perm, inv_perm, parts, row_shape, method, int(seed), dict(quality))


def _rows_memory_error(row_shape: Sequence[int], num_nodes: int) -> MemoryError:
    rows = math.prod(row_shape)
    return MemoryError(
        f"the node order maps each of the row shape's {rows:,} TT rows back to a node ({8 * rows / 2**30:,.1f} "
        f"GiB) and that memory is not there: row shape {list(row_shape)} for {num_nodes:,} nodes; give one "
        "whose product is nearer the number of nodes (left out, it is factored from it)")


def _physical_memory() -> Optional[int]:
    """The machine's memory in bytes, ``None`` where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None


def check_rows_fit(row_shape: Sequence[int], num_nodes: int) -> None:
    """Refuse, before any partitioning, a row shape whose row-sized arrays (the order's
    ``inv_perm``, 8 bytes a row) exceed the machine's memory: a ``--row-shape`` far above the node
    count would otherwise fail (or swap) only after the partitioner ran.

    Raises:
        MemoryError: naming the row shape, the memory it needs and the remedy.
    """
    memory = _physical_memory()
    if memory is not None and 8 * math.prod(row_shape) > memory:
        raise _rows_memory_error(row_shape, num_nodes)


def _intra_group_entries(indptr: np.ndarray, indices: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which CSR entries join two nodes of one group (a bool mask over ``indices``), and how many
    of them each row keeps (``int64``, shape ``(n,)``).

    Computed in blocks of rows: beyond the mask, no temporary holds a value per entry (on a
    4.4 x 10^8-entry graph, the two ``int64`` group lookups alone would take 7 GB).
    """
    num_nodes = indptr.shape[0] - 1
    keep = np.empty(indices.shape[0], dtype=bool)
    kept_per_row = np.empty(num_nodes, dtype=np.int64)
    for first in range(0, num_nodes, _FILTER_ROWS):
        last = min(first + _FILTER_ROWS, num_nodes)
        lo, hi = int(indptr[first]), int(indptr[last])
        local_rows = np.repeat(np.arange(last - first), np.diff(indptr[first:last + 1]))
        block = keep[lo:hi]
        np.equal(group[first:last][local_rows], group[indices[lo:hi]], out=block)
        kept_per_row[first:last] = np.bincount(local_rows[block], minlength=last - first)
    return keep, kept_per_row


def _hierarchical_perm(csr: CSRGraph, row_shape: tuple[int, ...], metis_levels: int, seed: int,
                       progress: bool, splitter: Optional[Callable] = None, name: str = "METIS") -> np.ndarray:
    """Rows from nested splits; levels ``>= metis_levels`` are cut into chunks in node-id order.

    ``splitter(indptr, indices, nparts, capacity)`` splits one subgraph (default: METIS).
    """
    if splitter is None:
        def splitter(sub_indptr, sub_indices, nparts, capacity):
            return metis_split(sub_indptr, sub_indices, nparts, capacity, seed=seed)
    num_nodes = csr.num_nodes
    num_levels = len(row_shape) - 1
    # `order[p]` is the node at position p; positions are sorted by group (the digits fixed so
    # far, read as one integer). `indptr`/`indices` hold the intra-group edges in positions.
    order = np.arange(num_nodes, dtype=np.int64)
    group = np.zeros(num_nodes, dtype=np.int64)
    indptr, indices = csr.indptr, csr.indices
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency; progress is optional anyway
        tqdm = None

    for level in range(num_levels):
        nparts = row_shape[level]
        capacity = math.prod(row_shape[level + 1:])
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], num_nodes]
        use_metis = level < metis_levels and indices.shape[0] > 0
        new_group = np.empty(num_nodes, dtype=np.int64)
        bar = None
        if progress and tqdm is not None and use_metis:
            bar = tqdm(total=len(starts), desc=f"{name} level {level + 1}/{num_levels}", unit="part")
        for start, end in zip(starts.tolist(), ends.tolist()):
            if use_metis:
                lo, hi = int(indptr[start]), int(indptr[end])
                # Views where nothing shifts (the whole graph at the top level): copies of a
                # 4.4 x 10^8-entry CSR would cost 2.6 GB. Splitters only read their input.
                sub_indptr = indptr[start:end + 1] - lo if lo else indptr[start:end + 1]
                sub_indices = indices[lo:hi] - start if start else indices[lo:hi]
                labels = splitter(sub_indptr, sub_indices, nparts, capacity)
            else:
                labels = chunk_split(end - start, nparts)
            new_group[start:end] = group[start] * nparts + labels
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()

        # New positions: stable sort by the new group (groups nest, so old groups stay contiguous
        # and the order inside a part is kept). Then keep only edges inside a new group.
        new_position_order = np.argsort(new_group, kind="stable")
        order = order[new_position_order]
        group = new_group[new_position_order]
        if level + 1 < num_levels and level + 1 < metis_levels and indices.shape[0] > 0:
            keep, kept_per_row = _intra_group_entries(indptr, indices, new_group)
            kept_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
            np.cumsum(kept_per_row, out=kept_indptr[1:])
            position = np.empty(num_nodes, dtype=indices.dtype)
            position[new_position_order] = np.arange(num_nodes, dtype=indices.dtype)
            kept = sp.csr_matrix((np.ones(int(kept_indptr[-1]), dtype=np.int8), position[indices[keep]],
                                  kept_indptr), shape=(num_nodes, num_nodes))
            del keep
            kept = kept[new_position_order]  # row permutation (C++), columns already relabelled
            indptr = kept.indptr.astype(np.int64, copy=False)
            indices = kept.indices
            del kept
        log.debug("level %d: %d groups split into parts of at most %d nodes, %d intra-part edge "
                  "entries left", level + 1, len(starts), capacity, indices.shape[0])

    # The last digit is the slot inside the innermost part.
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])  # num_nodes >= 1 (canonical_csr)
    run_lengths = np.diff(np.r_[starts, num_nodes])
    slot = np.arange(num_nodes, dtype=np.int64) - np.repeat(starts, run_lengths)
    perm = np.empty(num_nodes, dtype=np.int64)
    perm[order] = group * row_shape[-1] + slot
    return perm


def _compute_perm(csr: CSRGraph, row_shape: tuple[int, ...], method: str, seed: int,
                  progress: bool, num_threads: Optional[int] = None,
                  coarsen_entries: Optional[int] = None) -> np.ndarray:
    num_nodes = csr.num_nodes
    if method == "identity":
        return np.arange(num_nodes, dtype=np.int64)
    if method == "random":
        return np.random.default_rng(seed).permutation(num_nodes).astype(np.int64)
    if method == "rcm":
        matrix = sp.csr_matrix((np.ones(csr.num_entries, dtype=np.int8), csr.indices.astype(np.int32),
                                csr.indptr.astype(np.int32) if csr.num_entries < 2**31 else csr.indptr),
                               shape=(num_nodes, num_nodes))
        rcm_order = reverse_cuthill_mckee(matrix, symmetric_mode=True)
        perm = np.empty(num_nodes, dtype=np.int64)
        perm[rcm_order] = np.arange(num_nodes, dtype=np.int64)
        return perm
    if method == "metis-flat":
        return _hierarchical_perm(csr, row_shape, metis_levels=1, seed=seed, progress=progress)
    if method == "hierarchical-metis":
        return _hierarchical_perm(csr, row_shape, metis_levels=len(row_shape) - 1, seed=seed,
                                  progress=progress)
    if method == "hierarchical-kaminpar":
        from .kaminpar import KaMinParSplitter

        # Subgraphs of at least `coarsen_entries` entries are coarsened before KaMinPar sees
        # them (its whole-graph call ran out of 24 GiB at 4.4 x 10^8 entries, docs/scale.md).
        # One thread unless asked: KaMinPar's parallel runs differ from run to run (0.6767 and
        # 0.6764 of arxiv's edges inside a part, same seed, 2 threads), and exact resume needs
        # the same order again; one thread was still faster than METIS on arxiv.
        with KaMinParSplitter(num_threads=num_threads or 1, seed=seed, min_nodes=_KAMINPAR_MIN_NODES,
                              coarsen_entries=coarsen_entries) as splitter:
            perm = _hierarchical_perm(csr, row_shape, metis_levels=len(row_shape) - 1, seed=seed,
                                      progress=progress, splitter=splitter, name="KaMinPar")
            log.info("KaMinPar split %d subgraphs, METIS %d (those under %d nodes)%s", splitter.calls["kaminpar"],
                     splitter.calls["metis"], splitter.min_nodes,
                     f"; {splitter.calls['kaminpar-coarsened']} of the KaMinPar calls coarsened first"
                     if splitter.calls["kaminpar-coarsened"] else "")
        return perm
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")  # pragma: no cover


def hierarchical_order(
    graph: Union[GraphInput, CSRGraph],
    row_shape: Sequence[int],
    *,
    method: str = "hierarchical-metis",
    seed: int = 0,
    num_nodes: Optional[int] = None,
    cache_dir: Optional[Union[str, Path]] = None,
    progress: bool = False,
    num_threads: Optional[int] = None,
    coarsen_entries: Optional[int] = None,
) -> NodeOrder:
    r"""Order the nodes of a graph onto TT rows so that neighbours share leading TT digits.

    The hierarchy follows the row shape :math:`(n_1, \dots, n_K)`: the graph is split by METIS
    (recursive bisection) into :math:`n_1` parts of at most :math:`n_2 \cdots n_K` nodes, each
    part's induced subgraph into :math:`n_2` parts of at most :math:`n_3 \cdots n_K` nodes, and so
    on; the last digit is the slot inside the innermost part. Parts are asked to be balanced, and
    capacities are strict: METIS's approximate balance is repaired by moving the fewest,
    least-connected nodes out of over-full parts. Where the parts have room to spare (:math:`N`
    well below :math:`\prod n_k`), METIS and KaMinPar may leave some parts empty, so a few digits
    of a level can go unused (e.g. 90-92 of 100 second digits in groups of 101 nodes); the coarsened
    KaMinPar splits fill empty parts. Subgraphs without edges or with no more nodes than parts are
    cut into chunks without METIS.

    Other methods, for comparison: ``identity`` (node ``i`` -> row ``i``), ``random`` (a seeded
    random permutation of the first ``N`` rows), ``rcm`` (reverse Cuthill-McKee, bandwidth
    reducing), ``hierarchical-kaminpar`` (the same hierarchy, strict capacities and cache, each
    split by `KaMinPar <https://github.com/KaHIP/KaMinPar>`_, which scales to graphs of
    :math:`10^8` nodes on one machine; the graph reaches it as a ParHIP binary file in a temporary
    folder), ``metis-flat`` (one METIS level of :math:`n_1` parts; inside a part, nodes keep
    their id order, as in the TT-GNN research code, with its faults fixed).

    Args:
        graph (tuple, scipy.sparse, array or DGLGraph): a CSR tuple ``(indptr, indices)`` of
            integer arrays, a square scipy sparse adjacency, an edge index of shape ``(2, E)``
            (numpy array or torch tensor), or a homogeneous ``dgl.DGLGraph``. Directed input is
            symmetrised; self-loops and duplicate edges are ignored.
        row_shape (sequence of int): ``(n_1, ..., n_K)`` with product ``>= N``.
        method (str): one of :data:`METHODS`; ``hierarchical-kaminpar`` kept more edges inside
            parts than ``hierarchical-metis`` on ogbn-arxiv, in less time (docs/scale.md), and
            is the training default (:class:`ttgnn.config.TrainConfig`).
            (default: ``"hierarchical-metis"``)
        seed (int): seed for METIS and the random order; the same seed gives the same order.
            (default: ``0``)
        num_nodes (int, optional): the node count; required for an edge index whose largest ids
            are isolated nodes; for CSR input (a tuple or a ``CSRGraph``) it must match the
            graph. (default: ``max id + 1``)
        cache_dir (str or Path, optional): folder caching results by the graph's content hash,
            row shape, method and seed. Corrupted or mismatched files are reported (warning) and
            recomputed. (default: no caching)
        progress (bool): show a tqdm progress bar over the METIS/KaMinPar calls.
            (default: ``False``)
        num_threads (int, optional): KaMinPar's threads (the other methods run on one). With
            one thread the same seed gives the same order; with more, KaMinPar's parts vary a
            little from run to run (a cached order stays fixed). More than the machine's CPUs run
            as many as it has (a warning says so). (default: ``1``)
        coarsen_entries (int, optional): ``hierarchical-kaminpar`` only: subgraphs with at
            least this many stored entries are clustered by label propagation and KaMinPar
            partitions the weighted quotient graph (:class:`~ttgnn.partition.kaminpar.KaMinParSplitter`),
            so no partitioner holds the whole large graph. A graph that reaches the threshold
            is cached under a key naming it (``hierarchical-kaminpar-coarsen<threshold>``);
            smaller graphs keep the plain key. (default:
            :data:`~ttgnn.partition.kaminpar.COARSEN_ENTRIES`, ``200_000_000``)

    Returns:
        NodeOrder: ``perm``, ``inv_perm``, ``parts`` and ``quality``.

    Shapes:
        - **perm**: ``(N,)``; **inv_perm**: ``(n_1 * ... * n_K,)``; **parts**: ``K - 1`` x ``(N,)``.

    Raises:
        TypeError: non-integer arrays, a non-sequence ``row_shape``, a non-int seed, a
            ``cache_dir`` that is no path (or the empty string).
        ValueError: ids out of range or negative, malformed CSR, wrong array shapes, an unknown
            method, a row shape whose product is below ``N``, ``num_threads`` below 1.
        MemoryError: the row shape's row-sized ``inv_perm`` (8 bytes a row) exceeds the
            machine's memory, before any partitioning (:func:`check_rows_fit`).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**31:
        raise ValueError(f"seed must be in [0, 2**31), got {seed}")
    if num_threads is not None:  # 0 became one thread silently
        num_threads = _check_int("num_threads", num_threads, 1)
        cpus = os.cpu_count() or 1
        if num_threads > cpus:  # KaMinPar's cost grows with its threads: 10^6 of them ran for minutes
            log.warning("num_threads=%d is more than this machine's %d CPU(s); KaMinPar runs %d", num_threads,
                        cpus, cpus)
            num_threads = cpus
    if cache_dir is not None and (not isinstance(cache_dir, (str, os.PathLike)) or not str(cache_dir)):
        # "" cached into the working folder; a number failed inside os.path
        raise TypeError(f"cache_dir must be a folder path (str or PathLike) or None, got {cache_dir!r}")
    if coarsen_entries is not None:
        coarsen_entries = _check_int("coarsen_entries", coarsen_entries, 1)
    elif method == "hierarchical-kaminpar":
        from .kaminpar import COARSEN_ENTRIES

        coarsen_entries = COARSEN_ENTRIES
    csr = canonical_csr(graph, num_nodes)  # a canonical CSRGraph passes through, checked against num_nodes
    shape = check_row_shape(row_shape, csr.num_nodes)
    check_rows_fit(shape, csr.num_nodes)

    cache_path = None
    if cache_dir is not None:
        from .cache import cache_file, load_cached, save_cached

        graph_hash = csr.content_hash()
        cache_method = method
        if method == "hierarchical-kaminpar" and csr.num_entries >= coarsen_entries:
            cache_method = f"{method}-coarsen{coarsen_entries}"  # some subgraph may be coarsened: another order
        cache_path = cache_file(cache_dir, graph_hash, shape, cache_method, seed)
        cached = load_cached(cache_path, graph_hash, shape, cache_method, seed, csr.num_nodes)
        if cached is not None:
            perm, quality = cached
            log.info("loaded the %s order from %s", method, cache_path)
            return dataclasses.replace(order_from_perm(perm, shape, method, seed, quality), from_cache=True)

    started = time.perf_counter()
    perm = _compute_perm(csr, shape, method, seed, progress, num_threads, coarsen_entries)
    seconds = time.perf_counter() - started
    quality = shared_prefix_fractions(csr, perm, shape)
    quality["seconds"] = seconds
    quality["num_nodes"] = csr.num_nodes
    quality["num_edges"] = csr.num_entries // 2
    log.info("%s order of %d nodes onto row shape %s in %.2f s: %s", method, csr.num_nodes,
             list(shape), seconds, ", ".join(f"{k}={v:.4f}" for k, v in quality.items()
                                             if k.startswith("shared_prefix")))
    if cache_path is not None:
        save_cached(cache_path, perm, quality, graph_hash, shape, cache_method, seed)
    return order_from_perm(perm, shape, method, seed, quality)
