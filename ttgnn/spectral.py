"""Spectral initial tables: the leading eigenvectors of a graph's normalised adjacency.

A node table initialised from the eigenvectors of ``D^-1/2 A D^-1/2`` with the largest
eigenvalues (the smoothest eigenvectors of the normalised Laplacian ``I - D^-1/2 A D^-1/2``)
starts with graph neighbours close together, the classic Laplacian-eigenmap embedding. For a full
table the scaled eigenvectors are the initial weights; for a TT table they are compressed by
TT-SVD in TT-row order (:meth:`ttgnn.TTNodeEmbedding.from_pretrained`), so a node order that puts
neighbours on rows with shared digits also keeps the compressed table close to the original.

The largest eigenvalue, 1, belongs to the trivial eigenvectors ``D^1/2 1_C``, one per connected
component ``C`` with an edge: they say only which component a node is in and its degree. On a
graph of several components (Cora has 78, CiteSeer 438) the eigenvalue is repeated, and the solver
returns an arbitrary, start-dependent mix of some of them. They are left out by default
(``skip_trivial``): the solver then works on ``D^-1/2 A D^-1/2 - 2 U U^T``, with ``U`` the unit
trivial vectors, which moves them to eigenvalue -1 and leaves every other eigenpair as it is.

Eigenvectors are computed with SciPy's Lanczos solver (``eigsh``) and cached by the graph's
content hash, like node orders.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .config import check_int
from .fileio import write_cache_file

__all__ = ["normalized_adjacency_scipy", "trivial_eigenvectors", "leading_eigenvectors", "spectral_table",
           "available_memory", "check_table_fits"]

log = logging.getLogger(__name__)

_FORMAT_VERSION = 2


def normalized_adjacency_scipy(indptr: np.ndarray, indices: np.ndarray, num_nodes: int):
    """``D^-1/2 A D^-1/2`` of a symmetric CSR graph as a float64 SciPy CSR matrix (isolated nodes: zero rows)."""
    import scipy.sparse as sp

    from .smoothing import normalized_adjacency_values

    indptr, indices, values = normalized_adjacency_values(indptr, indices, num_nodes)
    return sp.csr_matrix((values, indices, indptr), shape=(num_nodes, num_nodes))


def _graph_hash(indptr: np.ndarray, indices: np.ndarray) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(np.ascontiguousarray(indptr, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
    return digest.hexdigest()


def trivial_eigenvectors(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The eigenvalue-1 eigenvectors of ``D^-1/2 A D^-1/2``, one per connected component with an edge.

    Returns:
        ``(labels, u, count)``: ``labels`` (``N``, int) the component of every node; ``u`` (``N``,
        float64) ``sqrt(degree)`` scaled to unit norm within each component (0 on isolated
        nodes), so the vector of component ``C`` is ``u`` restricted to ``C``; ``count`` the
        number of such components.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    adjacency = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=(num_nodes, num_nodes))
    num_components, labels = connected_components(adjacency, directed=False)
    root_degree = np.sqrt(np.diff(np.asarray(indptr)).astype(np.float64))
    norms = np.sqrt(np.bincount(labels, weights=root_degree ** 2, minlength=num_components))
    count = int((norms > 0).sum())
    norms[norms == 0] = 1.0
    return labels, root_degree / norms[labels], count


def eigenvector_limit(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> int:
    """The most eigenvectors :func:`leading_eigenvectors` gives for this graph past its trivial ones
    (``skip_trivial=True``): ``N - T - 1`` with ``T`` the connected components that have an edge; 0 or
    less where it gives none."""
    return num_nodes - trivial_eigenvectors(indptr, indices, num_nodes)[2] - 1


class TooManyEigenvectors(ValueError):
    """``k`` is more eigenvectors than the graph has to give (``limit``: the most it can, after the
    trivial ones skipped); a ``ValueError``."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


def leading_eigenvectors(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, k: int, *, seed: int = 0,
                         tol: float = 1e-6, skip_trivial: bool = True,
                         cache_dir: Optional[Union[str, Path]] = None) -> np.ndarray:
    """The ``k`` eigenvectors of ``D^-1/2 A D^-1/2`` with the largest eigenvalues, as columns.

    Args:
        indptr, indices (ndarray): symmetric CSR graph without self-loops.
        num_nodes (int): ``N``.
        k (int): number of eigenvectors, ``1 <= k < N - T`` with ``T`` the trivial eigenvectors
            skipped (0 with ``skip_trivial=False``).
        seed (int, optional): seed of the solver's start vector. (default: ``0``)
        tol (float, optional): the solver's relative accuracy. (default: ``1e-6``)
        skip_trivial (bool, optional): leave out the trivial eigenvectors (eigenvalue 1, one per
            connected component, see :func:`trivial_eigenvectors`): the ``k`` returned are the
            leading ones orthogonal to them. (default: ``True``)
        cache_dir (str or Path, optional): cache folder (keyed by graph, ``k``, ``tol``, ``seed``
            and ``skip_trivial``).

    Returns:
        ``(N, k)`` float64, orthonormal columns, eigenvalues descending from the first column.

    Raises:
        TypeError: ``k`` is not an int.
        TooManyEigenvectors: ``k`` is not in the range above (a ``ValueError``).
        ValueError: the graph has no edges (every vector is an eigenvector of eigenvalue 0).
    """
    from scipy.sparse.linalg import LinearOperator, eigsh

    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):  # a float k crashed inside ARPACK
        raise TypeError(f"k must be an int, got {type(k).__name__} {k!r}")
    if not 1 <= k:  # the upper limit is checked below, once the trivial eigenvectors are counted
        raise ValueError(f"k must be in [1, {num_nodes}) for a graph of {num_nodes} nodes, got {k}")
    key = {"format_version": _FORMAT_VERSION, "graph": _graph_hash(indptr, indices), "k": int(k),
           "tol": float(tol), "seed": int(seed), "skip_trivial": bool(skip_trivial)}
    path = None
    if cache_dir is not None:
        variant = "" if skip_trivial else "-with-trivial"
        name = f"spectral-v{_FORMAT_VERSION}-{key['graph'][:24]}-k{k}-seed{seed}{variant}.npz"
        path = Path(cache_dir).expanduser() / name
        cached = _load(path, key, num_nodes)
        if cached is not None:
            return cached
    # The connected components are needed only to solve (a cached k was valid when it was written).
    labels, trivial, num_trivial = (trivial_eigenvectors(indptr, indices, num_nodes) if skip_trivial
                                    else (None, None, 0))
    if not k < num_nodes - num_trivial:
        skipped = f" less the {num_trivial} trivial eigenvectors skipped" if skip_trivial else ""
        raise TooManyEigenvectors(f"k must be in [1, {num_nodes - num_trivial}) for a graph of {num_nodes} "
                                  f"nodes{skipped}, got {k}", num_nodes - num_trivial - 1)
    adjacency = normalized_adjacency_scipy(indptr, indices, num_nodes)
    if adjacency.nnz == 0:  # S = 0: every vector is an eigenvector, and ARPACK's start vector vanishes
        raise ValueError(f"a graph of {num_nodes} nodes without edges has no spectrum to start a table from "
                         "(every eigenvalue is 0): use another init")

    def operator_for(shift: float):
        """``S`` with the trivial eigenvectors moved from eigenvalue 1 to ``1 - shift``."""
        if not skip_trivial:
            return adjacency
        num_labels = int(labels.max()) + 1 if num_nodes else 0

        def deflated(x):
            x = np.asarray(x, dtype=np.float64).ravel()
            coefficients = np.bincount(labels, weights=trivial * x, minlength=num_labels)
            return adjacency @ x - shift * trivial * coefficients[labels]

        return LinearOperator((num_nodes, num_nodes), matvec=deflated, dtype=np.float64)

    start = np.random.default_rng(seed).standard_normal(num_nodes)
    started = time.perf_counter()
    values, vectors = eigsh(operator_for(2.0), k=k, which="LA", tol=tol, v0=start)
    if skip_trivial and num_trivial and values.min() < -1.0 + 1e-6:
        # Moved to -1, the trivial eigenvectors tie with S's own at -1 (a bipartite component's) once k reaches
        # down there, and the solver returned mixtures of both: moved below the spectrum (k this close to N only).
        values, vectors = eigsh(operator_for(3.0), k=k, which="LA", tol=tol, v0=start)
    order = np.argsort(-values)
    vectors = vectors[:, order]
    log.info("%d leading eigenvectors of a %d-node graph in %.1f s (eigenvalues %.4f to %.4f; %d trivial skipped)", k,
             num_nodes, time.perf_counter() - started, values[order[0]], values[order[-1]], num_trivial)
    if path is not None:
        write_cache_file(path, lambda fh: np.savez(fh, vectors=vectors, meta=np.array(json.dumps(key))),
                         "eigenvector")
    return vectors


def _load(path: Path, key: dict, num_nodes: int) -> Optional[np.ndarray]:
    if not path.exists():
        return None
    if not path.is_file():  # a FIFO's open blocked for ever; a device or a folder is no cache file
        log.warning("spectral cache %s is not a regular file; recomputing", path)
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["meta"][()]))
            vectors = np.array(archive["vectors"])
        if meta != key or vectors.shape != (num_nodes, key["k"]) or not np.isfinite(vectors).all():
            raise ValueError(f"it holds {meta}, shape {vectors.shape}")
    except Exception as err:  # noqa: BLE001 - an unreadable cache file is recomputed, never trusted
        log.warning("spectral cache %s is corrupted or mismatched (%s); recomputing", path, err)
        return None
    return vectors


def available_memory() -> Optional[int]:
    """Bytes of memory the system can give without swapping (``MemAvailable``), or ``None`` where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_table_fits(num_nodes: int, dim: int, bytes_per_entry: int, what: str = "spectral init") -> None:
    """Raise :class:`MemoryError` before building a dense ``(num_nodes, dim)`` table of
    ``bytes_per_entry`` bytes per entry (working copies included) that the available memory
    cannot hold, instead of running out of memory part way."""
    need = num_nodes * dim * bytes_per_entry
    have = available_memory()
    if have is not None and need > have:
        raise MemoryError(f"the {what} builds a dense {num_nodes:,} x {dim} table ({need / 2**30:.1f} GiB with its "
                          f"working copies) but {have / 2**30:.1f} GiB is available; use --init gaussian or ortho")


def spectral_table(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, dim: int, std: float = 1.0, *,
                   vectors: Optional[int] = None, seed: int = 0, skip_trivial: bool = True,
                   cache_dir: Optional[Union[str, Path]] = None, names: tuple[str, str] = ("vectors", "dim")):
    """An ``(N, dim)`` float32 torch table whose first ``vectors`` columns are the leading eigenvectors.

    Each eigenvector has unit norm, so its entries have a root mean square of ``1/sqrt(N)``; they
    are multiplied by ``std * sqrt(N)``. The sign of each eigenvector is fixed (largest entry
    positive) so the table does not depend on the solver's sign choice. Columns past ``vectors``
    are zero (they start untrained: only the smoothest eigenvectors are given).

    Args:
        vectors (int, optional): number of eigenvectors, ``1 <= vectors <= dim``. (default: ``dim``)
        skip_trivial (bool, optional): as :func:`leading_eigenvectors`. (default: ``True``)
        names (tuple of str, optional): what the messages call ``vectors`` and ``dim``: the caller's
            own names for them (:func:`ttgnn.train.train` gives ``("spectral_vectors", "dim")``).
            (default: ``("vectors", "dim")``)

    Raises:
        ValueError: ``dim`` below 1, ``std`` not a finite number > 0, ``vectors`` outside
            ``[1, dim]``; :class:`TooManyEigenvectors` (a ``ValueError``): more vectors than the
            graph has (:func:`eigenvector_limit`).
    """
    import torch

    from .init import check_scale

    vectors_name, dim_name = names
    check_int(dim_name, dim, 1)
    std = check_scale("std", std)
    k = dim if vectors is None else vectors
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= dim:
        raise ValueError(f"{vectors_name} must be an integer in [1, {dim_name}={dim}], got {vectors!r}")
    try:
        eigenvectors = leading_eigenvectors(indptr, indices, num_nodes, k, seed=seed, skip_trivial=skip_trivial,
                                            cache_dir=cache_dir)
    except TooManyEigenvectors as err:  # named as the caller gave the count: vectors, or dim without it
        given = f"{vectors_name}={k}" if vectors is not None else f"{vectors_name}=None ({dim_name}={dim} of them)"
        has = f"at most {err.limit:,}" if err.limit > 0 else "no"
        past = " past its trivial ones (one per connected component)" if skip_trivial else ""
        advice = f"give {vectors_name}={err.limit} or fewer" if err.limit > 0 else "use another init"
        raise TooManyEigenvectors(f"{given}: a graph of {num_nodes:,} nodes has {has} eigenvectors to give{past}; "
                                  f"{advice}", err.limit) from None
    signs = np.sign(eigenvectors[np.abs(eigenvectors).argmax(axis=0), np.arange(k)])
    signs[signs == 0] = 1.0
    table = np.zeros((num_nodes, dim), dtype=np.float32)
    table[:, :k] = eigenvectors * signs * (std * np.sqrt(num_nodes))
    return torch.from_numpy(table)
