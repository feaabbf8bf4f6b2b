"""Splitting a (sub)graph with KaMinPar, the graph handed over as a ParHIP binary file.

`KaMinPar <https://github.com/KaHIP/KaMinPar>`_ (PyPI ``kaminpar``) is a shared-memory multilevel
partitioner built for graphs with billions of edges. Its Python ``Graph`` has no constructor: it
is loaded from a file. :func:`write_parhip` writes the binary ParHIP format with numpy in chunks
(no text, no Python loop per node), which KaMinPar reads in parallel.

ParHIP binary layout (KaMinPar's extension of it)::

    header   3 x uint64: version, n, m          (m = stored entries = 2 x undirected edges)
    offsets  (n + 1) x EID: byte address (from the start of the file) of each node's first neighbour
    adjacency m x VID: neighbour ids

``version`` is a bit field, lowest bit first: no edge weights, no vertex weights, 32-bit EID,
32-bit VID. We write no weights, 64-bit offsets and 32-bit neighbour ids where ``n < 2**32``.
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .split import chunk_split, metis_split, rebalance

__all__ = ["PRESETS", "KaMinParSplitter", "write_parhip"]

log = logging.getLogger(__name__)

#: KaMinPar presets offered here (``kaminpar.<name>_context``); ``default`` is the library's.
PRESETS = ("default", "fast", "strong", "terapart")

_NO_EDGE_WEIGHTS = 1
_NO_VERTEX_WEIGHTS = 2
_EID_32BIT = 4
_VID_32BIT = 8
# Rows written per chunk: the offsets of a chunk are computed in a temporary of this many uint64.
_CHUNK = 1 << 22


def write_parhip(path: Union[str, os.PathLike], indptr: np.ndarray, indices: np.ndarray) -> int:
    """Write a symmetric CSR graph as a ParHIP binary file (no weights); returns the bytes written.

    Args:
        path (str or PathLike): the file to write (replaced if present).
        indptr (np.ndarray): integer row offsets, shape ``(n + 1,)``.
        indices (np.ndarray): integer neighbour ids, shape ``(m,)``; every undirected edge stored
            in both directions, no self-loops (KaMinPar's input contract).

    Raises:
        ValueError: ``indptr`` does not end at ``len(indices)``.
    """
    num_nodes = int(indptr.shape[0] - 1)
    num_entries = int(indices.shape[0])
    if int(indptr[-1]) != num_entries or int(indptr[0]) != 0:
        raise ValueError(f"indptr must run from 0 to len(indices)={num_entries}, got "
                         f"{int(indptr[0])} .. {int(indptr[-1])}")
    vid32 = num_nodes < 2**32
    vid_dtype = np.uint32 if vid32 else np.uint64
    version = _NO_EDGE_WEIGHTS | _NO_VERTEX_WEIGHTS | (_VID_32BIT if vid32 else 0)
    base = 24 + 8 * (num_nodes + 1)  # first byte of the adjacency
    vid_bytes = np.dtype(vid_dtype).itemsize
    with open(path, "wb") as fh:
        np.array([version, num_nodes, num_entries], dtype=np.uint64).tofile(fh)
        for start in range(0, num_nodes + 1, _CHUNK):
            chunk = indptr[start:start + _CHUNK].astype(np.uint64)
            chunk *= vid_bytes
            chunk += base
            chunk.tofile(fh)
        for start in range(0, num_entries, 8 * _CHUNK):
            piece = indices[start:start + 8 * _CHUNK]
            (piece if piece.dtype == vid_dtype else piece.astype(vid_dtype)).tofile(fh)
    return 24 + 8 * (num_nodes + 1) + vid_bytes * num_entries


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
        large_entries (int): subgraphs with at least this many stored entries are held
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
    """

    def __init__(self, num_threads: Optional[int] = None, seed: int = 0, preset: str = "fast",
                 temp_dir: Optional[Union[str, Path]] = None, min_nodes: int = 50_000,
                 large_entries: int = 200_000_000, large_preset: str = "terapart") -> None:
        for name, value in (("preset", preset), ("large_preset", large_preset)):
            if value not in PRESETS:
                raise ValueError(f"{name} must be one of {PRESETS}, got {value!r}")
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
        self.calls = {"kaminpar": 0, "metis": 0}
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
        moves the fewest, least-connected nodes out of parts above ``capacity``.
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
        path = Path(self._folder.name) / "graph.parhip"
        write_parhip(path, indptr, indices)
        kaminpar = self._kaminpar
        large = indices.shape[0] >= self.large_entries
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=large)
        path.unlink()
        kaminpar.reseed(self.seed)
        slack = nparts * capacity / num_nodes - 1.0
        eps = min(max(slack, 0.01), 0.03)
        solver = self._solver(self.large_preset if large else self.preset)
        blocks = solver.compute_partition(graph, int(nparts), float(eps))
        del graph
        labels = np.fromiter(blocks, dtype=np.int64, count=num_nodes)
        del blocks
        return rebalance(indptr, indices, labels, nparts, capacity)
