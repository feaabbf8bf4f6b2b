"""Splitting a (sub)graph with KaMinPar, the graph handed over as a ParHIP binary file.

`KaMinPar <https://github.com/KaHIP/KaMinPar>`_ (PyPI ``kaminpar``) is a shared-memory multilevel
partitioner built for graphs with billions of edges. Its Python ``Graph`` has no constructor: it
is loaded from a file. :func:`write_parhip` writes the binary ParHIP format with numpy in chunks
(no text, no Python loop per node), which KaMinPar reads in parallel.

ParHIP binary layout (KaMinPar's extension of it, ``kaminpar-io/parhip_parser.cc``)::

    header          3 x uint64: version, n, m   (m = stored entries = 2 x undirected edges)
    offsets         (n + 1) x EID: byte address (from the start of the file) of each node's
                    first neighbour
    adjacency       m x VID: neighbour ids
    vertex weights  n x VW, only if present
    edge weights    m x EW, only if present, in adjacency order

``version`` is a bit field, lowest bit first, each bit set for the lean choice: no edge weights
(1), no vertex weights (2), 32-bit EID (4), 32-bit VID (8), 32-bit vertex weights (16), 32-bit
edge weights (32); a clear width bit means 64 bits. The PyPI build (``kaminpar.__64bit__``) holds
64-bit ids and weights and widens 32-bit ones on reading. We write 64-bit offsets, 32-bit
neighbour ids where ``n < 2**32``, and each weight array in 32 bits where its largest value is
below ``2**31``, else in 64 (tests/test_partition_coarsen.py checks both widths through KaMinPar).

Graphs of very many entries are coarsened first (:mod:`ttgnn.partition.coarsen`): KaMinPar then
partitions the weighted quotient graph and the parts are projected back to the nodes.
"""
from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .coarsen import CoarseLevel, coarsen_graph
from .refine import balance_labels, fill_empty_parts, project_labels
from .split import chunk_split, metis_split, rebalance

__all__ = ["COARSEN_ENTRIES", "PRESETS", "KaMinParSplitter", "write_parhip"]

log = logging.getLogger(__name__)

#: KaMinPar presets offered here (``kaminpar.<name>_context``); ``default`` is the library's.
PRESETS = ("default", "fast", "strong", "terapart")

_NO_EDGE_WEIGHTS = 1
_NO_VERTEX_WEIGHTS = 2
_EID_32BIT = 4
_VID_32BIT = 8
_VW_32BIT = 16
_EW_32BIT = 32
# Rows written per chunk: the offsets of a chunk are computed in a temporary of this many uint64.
_CHUNK = 1 << 22
#: Subgraphs with at least this many stored entries are coarsened before KaMinPar sees them
#: (:class:`KaMinParSplitter`'s ``coarsen_entries``). KaMinPar's whole-graph call needed more
#: than 19 GiB on 4.36 x 10^8 entries (1.1 x 10^8 nodes) and ran out of a 24 GiB machine; a
#: 10^7-node graph of 9.7 x 10^7 entries was ordered uncoarsened in 6.5 GiB (docs/scale.md).
#: 2 x 10^8 lies between: graphs up to about 10^8 entries keep the uncoarsened (measured) path,
#: and at ~45 bytes an entry KaMinPar would need ~9 GiB at the threshold.
COARSEN_ENTRIES = 200_000_000


def _imbalance(num_nodes: int, nparts: int, capacity: int) -> float:
    """KaMinPar's allowed imbalance: the slack the capacity leaves, clamped to [1%, 3%] (forcing
    exact balance cost twice the time and cut more edges on ogbn-arxiv, docs/scale.md)."""
    slack = nparts * capacity / num_nodes - 1.0
    return min(max(slack, 0.01), 0.03)


def _weights_array(name: str, weights, length: int, minimum: int) -> np.ndarray:
    """``weights`` as a checked integer array of shape ``(length,)``, all ``>= minimum``."""
    weights = np.asarray(weights)
    if not np.issubdtype(weights.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {weights.dtype}")
    if weights.shape != (length,):
        raise ValueError(f"{name} must have shape ({length},), got {weights.shape}")
    if length and int(weights.min()) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(weights.min())}")
    return weights


def _write_chunked(fh, array: np.ndarray, dtype) -> None:
    for start in range(0, array.shape[0], 8 * _CHUNK):
        piece = array[start:start + 8 * _CHUNK]
        (piece if piece.dtype == dtype else piece.astype(dtype)).tofile(fh)


def write_parhip(path: Union[str, os.PathLike], indptr: np.ndarray, indices: np.ndarray,
                 vertex_weights: Optional[np.ndarray] = None,
                 edge_weights: Optional[np.ndarray] = None) -> int:
    """Write a symmetric CSR graph as a ParHIP binary file; returns the bytes written.

    Args:
        path (str or PathLike): the file to write (replaced if present).
        indptr (np.ndarray): integer row offsets, shape ``(n + 1,)``.
        indices (np.ndarray): integer neighbour ids, shape ``(m,)``; every undirected edge stored
            in both directions, no self-loops (KaMinPar's input contract).
        vertex_weights (np.ndarray, optional): integer weight ``>= 0`` of every node, shape
            ``(n,)``. (default: none, every node weighs 1)
        edge_weights (np.ndarray, optional): integer weight ``>= 1`` of every stored entry,
            shape ``(m,)``, in ``indices`` order; both directions of an edge must carry the same
            weight. (default: none, every edge weighs 1)

    Raises:
        ValueError: ``indptr`` does not end at ``len(indices)``; weights of the wrong shape or
            below their minimum.
        TypeError: non-integer weights.
    """
    num_nodes = int(indptr.shape[0] - 1)
    num_entries = int(indices.shape[0])
    if int(indptr[-1]) != num_entries or int(indptr[0]) != 0:
        raise ValueError(f"indptr must run from 0 to len(indices)={num_entries}, got "
                         f"{int(indptr[0])} .. {int(indptr[-1])}")
    vid32 = num_nodes < 2**32
    vid_dtype = np.uint32 if vid32 else np.uint64
    version = _VID_32BIT if vid32 else 0
    weight_arrays = []  # vertex weights first: the file's order
    for name, weights, length, minimum, absent_bit, narrow_bit in (
            ("vertex_weights", vertex_weights, num_nodes, 0, _NO_VERTEX_WEIGHTS, _VW_32BIT),
            ("edge_weights", edge_weights, num_entries, 1, _NO_EDGE_WEIGHTS, _EW_32BIT)):
        if weights is None:
            version |= absent_bit
            continue
        weights = _weights_array(name, weights, length, minimum)
        narrow = length == 0 or int(weights.max()) < 2**31
        version |= narrow_bit if narrow else 0
        weight_arrays.append((weights, np.uint32 if narrow else np.uint64))
    base = 24 + 8 * (num_nodes + 1)  # first byte of the adjacency
    vid_bytes = np.dtype(vid_dtype).itemsize
    with open(path, "wb") as fh:
        np.array([version, num_nodes, num_entries], dtype=np.uint64).tofile(fh)
        for start in range(0, num_nodes + 1, _CHUNK):
            chunk = indptr[start:start + _CHUNK].astype(np.uint64)
            chunk *= vid_bytes
            chunk += base
            chunk.tofile(fh)
        _write_chunked(fh, indices, vid_dtype)
        for weights, dtype in weight_arrays:
            _write_chunked(fh, weights, dtype)
    return (24 + 8 * (num_nodes + 1) + vid_bytes * num_entries
            + sum(np.dtype(dtype).itemsize * weights.shape[0] for weights, dtype in weight_arrays))


class KaMinParSplitter:
    """Splits graphs into parts of strict capacity with KaMinPar; one temporary folder for its files.

    Use as a context manager (the folder is removed on exit)::

        with KaMinParSplitter(num_threads=2, seed=0) as splitter:
            labels = splitter(indptr, indices, nparts=55, capacity=3080)

    Args:
        num_threads (int, optional): KaMinPar's threads. (default: ``os.cpu_count()``)
        seed (int): KaMinPar's random seed, set before every call. With one thread the same
            seed gives the same parts; with more they vary a little between runs. (default: ``0``)
        preset (str): one of :data:`PRESETS`; on ogbn-arxiv ``fast`` cut as well as ``default``
            in about 60% of the time (docs/scale.md). (default: ``"fast"``)
        large_entries (int): graphs KaMinPar gets with at least this many stored entries (whole
            subgraphs when ``coarsen_entries`` is above it, else coarse graphs) are held
            compressed by KaMinPar and split with ``large_preset``. (default: ``200_000_000``)
        large_preset (str): the preset for those: ``terapart``, KaMinPar's memory-lean one, took
            24% less peak memory than ``fast`` on a 10^7-node graph, in 38% more time
            (docs/scale.md); on a 1.1 x 10^8-node graph ``fast`` ran out of this machine's
            24 GiB. (default: ``"terapart"``)
        temp_dir (str or Path, optional): where the ParHIP files go. (default: the system's)
        min_nodes (int): subgraphs with fewer nodes go to METIS instead: KaMinPar's set-up costs
            about 0.1 s a call, which dominates on small graphs (the last levels of a
            10^8-node hierarchy are thousands of subgraphs of ~10^4 nodes), where METIS is as
            fast and as good. (default: ``50_000``)
        coarsen_entries (int): subgraphs with at least this many stored entries are never
            handed to KaMinPar whole: they are clustered by label propagation and contracted,
            level after level, until at most half this many entries are left
            (:func:`~ttgnn.partition.coarsen.coarsen_graph`); KaMinPar partitions the weighted
            coarsest graph, the parts are projected back and refined on every level
            (:func:`~ttgnn.partition.refine.project_labels`), and strict capacities are restored
            (:func:`~ttgnn.partition.refine.balance_labels`, then
            :func:`~ttgnn.partition.split.rebalance`). See :data:`COARSEN_ENTRIES` for the
            default. (default: ``200_000_000``)
        coarse_cluster_fraction (float): clusters hold at most this share of ``capacity``
            (at least one node): small against a part, so a balanced partition of the clusters
            stays reachable. (default: ``0.125``)
        coarsen_rounds (int): label-propagation rounds of the clustering. (default: ``5``)
        refine_rounds (int): label-propagation rounds over the projected parts. (default: ``3``)

    Attributes:
        calls (collections.Counter): calls per path: ``kaminpar`` (every KaMinPar call),
            ``kaminpar-coarsened`` (those of them made on a coarsened graph; ``0`` until the
            first), ``metis``.
    """

    def __init__(self, num_threads: Optional[int] = None, seed: int = 0, preset: str = "fast",
                 temp_dir: Optional[Union[str, Path]] = None, min_nodes: int = 50_000,
                 large_entries: int = 200_000_000, large_preset: str = "terapart",
                 coarsen_entries: int = COARSEN_ENTRIES, coarse_cluster_fraction: float = 0.125,
                 coarsen_rounds: int = 5, refine_rounds: int = 3) -> None:
        for name, value in (("preset", preset), ("large_preset", large_preset)):
            if value not in PRESETS:
                raise ValueError(f"{name} must be one of {PRESETS}, got {value!r}")
        for name, value, minimum in (("coarsen_entries", coarsen_entries, 1), ("coarsen_rounds", coarsen_rounds, 0),
                                     ("refine_rounds", refine_rounds, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        if (isinstance(coarse_cluster_fraction, bool) or not isinstance(coarse_cluster_fraction, (int, float))
                or not 0 < coarse_cluster_fraction <= 1):
            raise ValueError(f"coarse_cluster_fraction must be a number in (0, 1], got {coarse_cluster_fraction!r}")
        if num_threads is None:
            num_threads = os.cpu_count() or 1
        if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)) or num_threads < 1:
            raise ValueError(f"num_threads must be an int >= 1, got {num_threads!r}")
        self.num_threads = int(num_threads)
        self.seed = int(seed)
        self.preset = preset
        self.large_preset = large_preset
        self.large_entries = int(large_entries)
        self._temp_root = temp_dir
        self.min_nodes = int(min_nodes)
        self.coarsen_entries = int(coarsen_entries)
        self.coarse_cluster_fraction = float(coarse_cluster_fraction)
        self.coarsen_rounds = int(coarsen_rounds)
        self.refine_rounds = int(refine_rounds)
        self.calls = Counter({"kaminpar": 0, "metis": 0})
        self._folder: Optional[tempfile.TemporaryDirectory] = None
        self._solvers: Optional[dict] = None
        self._kaminpar = None

    def __enter__(self) -> "KaMinParSplitter":
        try:
            import kaminpar
        except ImportError as err:
            raise ImportError("the hierarchical-kaminpar order needs the kaminpar package "
                              "(pip install kaminpar==3.7.3)") from err
        self._kaminpar = kaminpar
        self._folder = tempfile.TemporaryDirectory(prefix="ttgnn-kaminpar-", dir=self._temp_root)
        self._solvers = {}
        return self

    def _solver(self, preset: str):
        """One KaMinPar solver per preset, made on first use."""
        if preset not in self._solvers:
            context = getattr(self._kaminpar, f"{preset}_context")()
            self._solvers[preset] = self._kaminpar.KaMinPar(self.num_threads, context)
        return self._solvers[preset]

    def __exit__(self, *exc) -> None:
        self._solvers = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def __call__(self, indptr: np.ndarray, indices: np.ndarray, nparts: int, capacity: int) -> np.ndarray:
        """Labels in ``[0, nparts)``, shape ``(n,)``, every part holding at most ``capacity`` nodes.

        Edgeless graphs, or graphs with no more nodes than parts, are cut into chunks; graphs
        under ``min_nodes`` nodes go to METIS. KaMinPar is asked for an imbalance of at most the
        slack the capacity leaves (at least 1%: forcing exact balance on it cost twice the time
        and cut more edges on ogbn-arxiv), and :func:`~ttgnn.partition.split.rebalance` then
        moves the fewest, least-connected nodes out of parts above ``capacity``. Graphs of at
        least ``coarsen_entries`` stored entries are coarsened first (:meth:`_split_coarsened`).
        """
        if self._solvers is None:
            raise RuntimeError("KaMinParSplitter must be used inside a `with` block")
        num_nodes = int(indptr.shape[0] - 1)
        if nparts * capacity < num_nodes:
            raise ValueError(f"{nparts} parts of capacity {capacity} cannot hold {num_nodes} nodes")
        if nparts == 1:
            return np.zeros(num_nodes, dtype=np.int64)
        if num_nodes <= nparts or indices.shape[0] == 0:
            return chunk_split(num_nodes, nparts)
        if num_nodes < self.min_nodes:
            self.calls["metis"] += 1
            return metis_split(indptr, indices, nparts, capacity, seed=self.seed)
        self.calls["kaminpar"] += 1
        if indices.shape[0] >= self.coarsen_entries:
            return self._split_coarsened(indptr, indices, nparts, capacity)
        path = Path(self._folder.name) / "graph.parhip"
        write_parhip(path, indptr, indices)
        kaminpar = self._kaminpar
        large = indices.shape[0] >= self.large_entries
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=large)
        path.unlink()
        kaminpar.reseed(self.seed)
        solver = self._solver(self.large_preset if large else self.preset)
        blocks = solver.compute_partition(graph, int(nparts), float(_imbalance(num_nodes, nparts, capacity)))
        del graph
        labels = np.fromiter(blocks, dtype=np.int64, count=num_nodes)
        del blocks
        return rebalance(indptr, indices, labels, nparts, capacity)

    def _spill(self, levels: list) -> list:
        """The hierarchy's arrays (all but the caller's input graph) moved to files in the
        temporary folder and mapped back read-only: while KaMinPar runs they hold no anonymous
        memory (their pages are the kernel's to drop), and refinement reads them back."""
        spilled = []
        for depth, level in enumerate(levels):
            arrays = {}
            for name in ("indptr", "indices", "edge_weights", "node_weights", "clusters"):
                value = getattr(level, name)
                if value is None or (depth == 0 and name != "clusters"):
                    arrays[name] = value
                    continue
                path = Path(self._folder.name) / f"level{depth}-{name}.npy"
                np.save(path, value)
                arrays[name] = np.load(path, mmap_mode="r")
                path.unlink()  # the mapping keeps the data until it is dropped
            spilled.append(CoarseLevel(**arrays))
        levels.clear()
        return spilled

    def _split_coarsened(self, indptr: np.ndarray, indices: np.ndarray, nparts: int, capacity: int) -> np.ndarray:
        """Coarsen, partition the coarsest graph with KaMinPar, project and refine, balance.

        The graph is coarsened (:func:`~ttgnn.partition.coarsen.coarsen_graph`) until it has at
        most half of ``coarsen_entries`` stored entries; the levels wait on disk (mapped) while
        KaMinPar partitions the coarsest graph. KaMinPar's block weight limit is the
        uncoarsened call's (the mean part plus the capacity's slack, clamped to [1%, 3%]);
        refinement on every level may fill parts to the larger of that limit and ``capacity``:
        label propagation moves nothing between full parts, and parts filled exactly to a zero-
        slack capacity left 0.686 of a planted graph's edges inside parts where 1% of room
        gave 0.787. :func:`~ttgnn.partition.refine.balance_labels` then moves the excess out in
        bounded memory, and :func:`~ttgnn.partition.split.rebalance` (whose temporaries are
        per entry of the over-full parts: what this path is there to avoid on the whole graph)
        places what is left, if anything.
        """
        self.calls["kaminpar-coarsened"] += 1
        num_nodes = int(indptr.shape[0] - 1)
        seconds = {}
        started = time.perf_counter()
        max_cluster_size = max(1, int(capacity * self.coarse_cluster_fraction))
        levels, coarse = coarsen_graph(indptr, indices, max_cluster_size, self.coarsen_entries // 2,
                                       rounds=self.coarsen_rounds, seed=self.seed)
        c_indptr, c_indices, c_edge_weights, c_node_weights = coarse
        del coarse
        num_clusters, coarse_entries = int(c_indptr.shape[0] - 1), int(c_indices.shape[0])
        if not levels:
            log.warning("label propagation could not shrink a graph of %d nodes (clusters of <= %d nodes); "
                        "KaMinPar gets it whole", num_nodes, max_cluster_size)
        levels = self._spill(levels)
        seconds["coarsen"] = time.perf_counter() - started

        started = time.perf_counter()
        path = Path(self._folder.name) / "coarse.parhip"
        write_parhip(path, c_indptr, c_indices, vertex_weights=c_node_weights, edge_weights=c_edge_weights)
        del c_indptr, c_indices, c_edge_weights, c_node_weights
        kaminpar = self._kaminpar
        large = coarse_entries >= self.large_entries
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=large)
        path.unlink()
        kaminpar.reseed(self.seed)
        limit = int(math.floor((1 + _imbalance(num_nodes, nparts, capacity)) * math.ceil(num_nodes / nparts)))
        solver = self._solver(self.large_preset if large else self.preset)
        blocks = solver.compute_partition(graph, [limit] * int(nparts))
        del graph
        coarse_labels = np.fromiter(blocks, dtype=np.int64, count=num_clusters)
        del blocks
        seconds["kaminpar"] = time.perf_counter() - started

        started = time.perf_counter()
        num_levels = len(levels)
        labels = project_labels(levels, coarse_labels, nparts, max(limit, int(capacity)), rounds=self.refine_rounds,
                                seed=self.seed)
        del coarse_labels, levels
        seconds["project+refine"] = time.perf_counter() - started

        started = time.perf_counter()
        over = int(np.maximum(np.bincount(labels, minlength=nparts) - capacity, 0).sum())
        labels = balance_labels(indptr, indices, labels, nparts, capacity, seed=self.seed)
        left = int(np.maximum(np.bincount(labels, minlength=nparts) - capacity, 0).sum())
        labels = rebalance(indptr, indices, labels, nparts, capacity)
        labels = fill_empty_parts(indptr, indices, labels, nparts)  # refinement can drain a part
        seconds["balance"] = time.perf_counter() - started
        log.info("coarsened KaMinPar split of %d nodes (%d entries) into %d parts of <= %d: %d levels to %d "
                 "coarse nodes (<= %d nodes each) and %d coarse entries; %d nodes over capacity balanced, %d "
                 "left to rebalance; seconds: %s", num_nodes, indices.shape[0], nparts, capacity, num_levels,
                 num_clusters, max_cluster_size, coarse_entries, over, left,
                 ", ".join(f"{stage} {value:.1f}" for stage, value in seconds.items()))
        return labels
