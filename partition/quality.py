"""Quality figures of a node order: how often graph neighbours share leading TT digits."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

from .checks import check_perm, check_row_shape
from .graph import CSRGraph, GraphInput, canonical_csr

__all__ = ["shared_prefix_fractions"]

# Stored entries per block of rows.
_BLOCK = 1 << 24


def shared_prefix_fractions(
    graph: Union[GraphInput, CSRGraph],
    perm: np.ndarray,
    row_shape: Sequence[int],
    num_nodes: Optional[int] = None,
) -> dict[str, float]:
    r"""Fraction of edges whose endpoints' TT rows share their first ``l`` digits.

    For a row shape :math:`(n_1, \dots, n_K)`, two rows share their first ``l`` digits exactly
    when ``row_u // (n_{l+1} * ... * n_K) == row_v // (n_{l+1} * ... * n_K)``. A random order of
    a graph with :math:`N \approx n_1 \cdots n_K` rows gives about :math:`1 / (n_1 \cdots n_l)`.

    Args:
        graph (tuple, np.ndarray or CSRGraph): the graph, in any form
            :func:`~ttgnn.partition.graph.canonical_csr` accepts (it is symmetrised; self-loops
            and duplicate edges do not count).
        perm (np.ndarray): node id -> TT row index, shape ``(N,)``, integers in
            ``[0, n_1 * ... * n_K)``, no two equal.
        row_shape (sequence of int): ``(n_1, ..., n_K)``, factors >= 1, product >= ``N``.
        num_nodes (int, optional): node count for an edge index input.

    Returns:
        dict: ``{"shared_prefix_1": ..., ..., "shared_prefix_{K-1}": ...}``, each in ``[0, 1]``;
        ``nan`` for a graph without edges.

    Raises:
        TypeError, ValueError: ``perm`` or ``row_shape`` is not as above (named).
    """
    csr = canonical_csr(graph, num_nodes)  # a canonical CSRGraph passes through, checked against num_nodes
    perm = np.asarray(perm)
    if perm.shape != (csr.num_nodes,):
        raise ValueError(f"perm must have shape ({csr.num_nodes},), got {perm.shape}")
    # an order that is no bijection into the rows scored as a perfect one
    row_shape = list(check_row_shape(row_shape, csr.num_nodes))
    check_perm(perm, math.prod(row_shape))
    strides = [math.prod(row_shape[level:]) for level in range(1, len(row_shape))]
    same = np.zeros(len(strides), dtype=np.int64)
    num_edges = 0
    # In blocks of rows, so that a graph of 10^9 entries needs no edge-sized int64 temporaries.
    # Each undirected edge is stored twice; counting the half with row < col gives the same fraction.
    row = 0
    while row < csr.num_nodes:
        end = int(np.searchsorted(csr.indptr, csr.indptr[row] + _BLOCK, side="right")) - 1
        end = min(max(end, row + 1), csr.num_nodes)
        lo, hi = int(csr.indptr[row]), int(csr.indptr[end])
        rows = np.repeat(np.arange(row, end, dtype=np.int64), np.diff(csr.indptr[row:end + 1]))
        cols = csr.indices[lo:hi]
        upper = rows < cols
        row_u = perm[rows[upper]].astype(np.int64, copy=False)
        row_v = perm[cols[upper]].astype(np.int64, copy=False)
        del rows, cols, upper
        num_edges += row_u.shape[0]
        for level, stride in enumerate(strides):
            same[level] += np.count_nonzero(row_u // stride == row_v // stride)
        row = end
    return {f"shared_prefix_{level + 1}": float(same[level] / num_edges) if num_edges else float("nan")
            for level in range(len(strides))}
