"""The TT-lookup op: rows of a TT table from its cores.

:func:`tt_lookup_reference` is the pure-PyTorch definition (gather the core slices, batched
matmul). It is always available, differentiable by autograd, and the oracle the compiled kernels
are tested against. :func:`tt_lookup` is what :class:`ttgnn.TTNodeEmbedding` calls.

Core layout and digit convention: see :mod:`ttgnn.shapes`.
"""
from __future__ import annotations

from typing import Sequence

import torch

from .shapes import index_to_digits

__all__ = ["tt_lookup", "tt_lookup_reference"]


def tt_lookup_reference(cores: Sequence[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """Materialise the TT-table rows ``rows``, in plain PyTorch.

    Args:
        cores (sequence of Tensor): ``K`` cores, core ``k`` of shape ``(n_k, r_{k-1}, m_k, r_k)``
            with ``r_0 = r_K = 1``.
        rows (LongTensor): row indices in ``[0, n_1 * ... * n_K)``, shape ``(B,)``. Not checked
            here: callers validate.

    Returns:
        Tensor of shape ``(B, m_1 * ... * m_K)``.
    """
    row_shape = [c.shape[0] for c in cores]
    digits = index_to_digits(rows, row_shape)  # (B, K)
    batch = rows.shape[0]
    first = cores[0]
    # (B, 1, m_1, r_1) -> (B, m_1, r_1): rows of the partial product, columns its rank index.
    partial = first[digits[:, 0]].reshape(batch, first.shape[2], first.shape[3])
    width = first.shape[2]  # m_1 * ... * m_k so far (explicit: -1 is ambiguous for empty batches)
    for k in range(1, len(cores)):
        core = cores[k]
        _, r_in, m, r_out = core.shape
        slices = core[digits[:, k]].reshape(batch, r_in, m * r_out)
        width *= m
        partial = torch.bmm(partial, slices).reshape(batch, width, r_out)
    return partial.reshape(batch, width)


def tt_lookup(cores: Sequence[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` of the TT table, through the compiled kernel when present.

    Same contract as :func:`tt_lookup_reference`.
    """
    return tt_lookup_reference(cores, rows)
