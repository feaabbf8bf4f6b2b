"""Checks of the inputs every node-order function shares: a row shape that holds the graph's nodes,
and a node -> row map that is injective into its rows (``TypeError`` / ``ValueError`` naming the
problem)."""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

__all__ = ["check_perm", "check_row_shape"]


def check_row_shape(row_shape: Sequence[int], num_nodes: int) -> tuple[int, ...]:
    """``row_shape`` as a tuple of ints after checking that it can hold ``num_nodes`` rows
    (``TypeError`` / ``ValueError`` naming the problem otherwise)."""
    if isinstance(row_shape, (str, bytes)) or not hasattr(row_shape, "__len__"):
        raise TypeError(f"row_shape must be a sequence of ints, got {type(row_shape).__name__}")
    try:
        shape = tuple(operator.index(n) for n in row_shape)
    except TypeError:
        raise TypeError(f"row_shape must contain ints, got {list(row_shape)}") from None
    if len(shape) == 0:
        raise ValueError("row_shape must have at least one factor")
    if any(n < 1 for n in shape):
        raise ValueError(f"row_shape factors must be >= 1, got {list(shape)}")
    if math.prod(shape) < num_nodes:
        raise ValueError(f"row_shape {list(shape)} covers {math.prod(shape)} rows, fewer than the "
                         f"graph's {num_nodes} nodes; its product must be >= {num_nodes}")
    if math.prod(shape) > np.iinfo(np.int64).max:  # "perm leaves the row range" or an OverflowError before
        raise ValueError(f"row_shape {list(shape)} covers {math.prod(shape):,} rows, more than int64 row "
                         f"indices reach ({np.iinfo(np.int64).max:,})")
    return shape


def check_perm(perm: np.ndarray, num_rows: int) -> None:
    """Raise unless ``perm`` is a node -> row map a :class:`NodeOrder` can hold: a 1-D integer
    array with values in ``[0, num_rows)``, no two equal.

    Raises:
        TypeError: ``perm`` is not an integer array.
        ValueError: it is not 1-D, leaves the row range, or maps two nodes to one row.
    """
    if not isinstance(perm, np.ndarray) or perm.dtype == np.bool_ or not np.issubdtype(perm.dtype, np.integer):
        raise TypeError(f"perm must be an integer array, got {getattr(perm, 'dtype', type(perm).__name__)}")
    if perm.ndim != 1:
        raise ValueError(f"perm must be 1-D (one row per node), got shape {perm.shape}")
    if perm.size and (perm.min() < 0 or perm.max() >= num_rows):
        raise ValueError(f"perm leaves the row range [0, {num_rows})")
    if num_rows <= 8 * perm.size + (1 << 20):
        taken = np.zeros(num_rows, dtype=np.bool_)  # one byte a row: a 10^8-row order checks in about a second
        taken[perm] = True
        distinct = np.count_nonzero(taken)
    else:  # far more rows than nodes: sorting the nodes' rows costs less than a byte per row
        distinct = np.unique(perm).size
    if distinct != perm.size:
        raise ValueError("perm maps two nodes to one row")
