"""Compiled CPU kernels of the tensor GNN layers' message passing.

The tensor layers (:mod:`ttgnn.layers`) aggregate messages with sparse-times-dense products
(``torch.sparse.mm`` on CSR, one head at a time) and compute GAT's attention with scatters over
the edges. On the CPU, when the ``ttgnn._C`` extension is loaded, four ops of ours do the same
work in fewer passes over memory (``kernels/cpu/graph_ops_cpu.cpp``):

* ``torch.ops.ttgnn.csr_aggregate``: weighted sums over each destination's in-edges, all heads
  in one pass over each source row;
* ``torch.ops.ttgnn.csr_edge_dot``: per-edge dot products (the gradient of the edge weights);
* ``torch.ops.ttgnn.gat_attention``: leaky ReLU of the two score terms and the softmax over each
  destination's edges, fused;
* ``torch.ops.ttgnn.gat_attention_backward``: its gradients with respect to both score terms.

The layers' pure-PyTorch path stays the definition (and the test oracle); it runs on other
devices (cuSPARSE on CUDA), for other dtypes, without the extension, and inside
:func:`reference_only`. Results agree to float rounding (sums are taken in the same edge order).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional

import torch
from torch import Tensor

from . import _ext
from .ops import KERNEL_DTYPES, in_transform

__all__ = ["OPS", "ThreadSwitch", "available", "applies", "reference_only", "csr_aggregate", "csr_edge_dot",
           "gat_attention", "gat_attention_backward", "csr_matmul"]

#: The compiled graph ops (``torch.ops.ttgnn.<name>``).
OPS = ("csr_aggregate", "csr_edge_dot", "gat_attention", "gat_attention_backward")

_available: Optional[bool] = None


class ThreadSwitch:
    """A per-thread off switch for compiled kernels: :meth:`off` is a context manager that turns
    them off in the calling thread for its block (blocks nest); :meth:`is_off` says whether one is
    open in this thread."""

    def __init__(self) -> None:
        self._depth = threading.local()

    def is_off(self) -> bool:
        return getattr(self._depth, "value", 0) > 0

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        self._depth.value = getattr(self._depth, "value", 0) + 1
        try:
            yield
        finally:
            self._depth.value -= 1


_switch = ThreadSwitch()


def available() -> bool:
    """Whether the loaded extension has the CPU kernels of every op in :data:`OPS` (a ``ttgnn._C``
    built before they existed does not; the layers then use the reference path)."""
    global _available
    if _available is None:
        _available = all(_ext.has_op_kernel(name) for name in OPS)
        if _available:
            _register_fakes()
    return _available


def applies(*tensors: Tensor) -> bool:
    """Whether the layers run the compiled kernels on these value tensors: all on the CPU, of one
    dtype in :data:`ttgnn.ops.KERNEL_DTYPES` (those of the lookup kernels), outside
    :func:`reference_only`, outside ``torch.func``
    transforms and without forward-mode tangents (the kernels have neither a batching rule nor a
    forward derivative; the reference path has both), and not while ``torch.compile`` traces
    (it cannot see whether a transform is active, so a traced graph takes the reference)."""
    if _switch.is_off() or not tensors or torch.compiler.is_compiling() or not available():
        return False
    dtype = tensors[0].dtype
    if dtype not in KERNEL_DTYPES or not all(t.device.type == "cpu" and t.dtype == dtype for t in tensors):
        return False
    return not in_transform(*tensors)


def reference_only() -> contextlib.AbstractContextManager:
    """Within this block the tensor layers use their pure-PyTorch path on every device (for tests
    and side-by-side benchmarks). It holds for the calling thread only."""
    return _switch.off()


def csr_aggregate(indptr: Tensor, indices: Tensor, weight: Tensor, edge_ids: Optional[Tensor], x: Tensor) -> Tensor:
    """``out[v, h] = sum over the edges j of v of weight[e, h] * x[indices[j], h]`` with ``e =
    edge_ids[j]`` (``j`` when ``None``).

    Args:
        indptr (LongTensor): ``(num_dst + 1,)``. indices (LongTensor): ``(E,)`` sources.
        weight (Tensor): ``(E', H)``. edge_ids (LongTensor, optional): ``(E,)`` rows of ``weight``.
        x (Tensor): ``(num_src, H, F)``.

    Returns:
        ``(num_dst, H, F)``.
    """
    return torch.ops.ttgnn.csr_aggregate(indptr, indices, weight, edge_ids, x)


def csr_edge_dot(indptr: Tensor, indices: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``out[j, h] = <a[v, h], b[indices[j], h]>`` for each edge ``j`` of destination ``v``:
    ``a`` ``(num_dst, H, F)``, ``b`` ``(num_src, H, F)``; returns ``(E, H)``."""
    return torch.ops.ttgnn.csr_edge_dot(indptr, indices, a, b)


def gat_attention(indptr: Tensor, indices: Tensor, score_src: Tensor, score_dst: Tensor,
                  negative_slope: float) -> Tensor:
    """Softmax over each destination ``v``'s edges ``j`` of
    ``leaky_relu(score_src[indices[j]] + score_dst[v], negative_slope)``: ``score_src``
    ``(num_src, H)``, ``score_dst`` ``(num_dst, H)``; returns ``(E, H)``."""
    return torch.ops.ttgnn.gat_attention(indptr, indices, score_src, score_dst, float(negative_slope))


def gat_attention_backward(grad: Tensor, attention: Tensor, indptr: Tensor, indices: Tensor, t_indptr: Tensor,
                           t_perm: Tensor, score_src: Tensor, score_dst: Tensor,
                           negative_slope: float, check_transpose: bool = True) -> tuple[Tensor, Tensor]:
    """Gradients of ``sum(grad * attention)`` with respect to ``score_src`` and ``score_dst``
    (``attention``: :func:`gat_attention`'s output; ``t_indptr``, ``t_perm``: the edges by source,
    as :class:`ttgnn.layers.SparseGraph` keeps them).

    ``check_transpose`` (default ``True``) checks, in O(E), that ``t_perm`` lists every edge once and
    each under its own source (the op checks only ranges and order: a wrong transpose gave wrong
    gradients silently); :mod:`ttgnn.layers` passes ``False`` for the transpose it built itself.
    """
    if check_transpose:
        _check_transpose(indices, t_indptr, t_perm)
    grad_src, grad_dst = torch.ops.ttgnn.gat_attention_backward(grad, attention, indptr, indices, t_indptr, t_perm,
                                                                score_src, score_dst, float(negative_slope))
    return grad_src, grad_dst


def _check_transpose(indices: Tensor, t_indptr: Tensor, t_perm: Tensor) -> None:
    """Raise ``RuntimeError`` unless ``t_perm`` is a permutation of the ``E`` edges that lists, under
    each source ``u`` (``t_perm[t_indptr[u]:t_indptr[u + 1]]``), the edges whose source is ``u``. Shapes,
    dtypes and ranges that are wrong otherwise are left to the op, which names them."""
    num_edges = indices.numel()
    if (indices.dim() != 1 or t_perm.dim() != 1 or t_indptr.dim() != 1 or t_perm.numel() != num_edges
            or t_indptr.numel() < 1 or t_perm.is_floating_point() or t_indptr.is_floating_point() or num_edges == 0):
        return
    perm, bounds = t_perm.long(), t_indptr.long()
    if perm.min() < 0 or perm.max() >= num_edges or bounds[-1] != num_edges or (bounds.diff() < 0).any():
        return
    if not torch.equal(torch.bincount(perm, minlength=num_edges), torch.ones_like(perm)):
        raise RuntimeError("gat_attention_backward: t_perm must list every edge once (a permutation of the "
                           f"{num_edges} edges), as SparseGraph's transpose does")
    sources = torch.repeat_interleave(torch.arange(bounds.numel() - 1, device=perm.device), bounds.diff())
    if not torch.equal(indices.long()[perm], sources):
        raise RuntimeError("gat_attention_backward: t_perm must list under each source the edges from it "
                           "(indices[t_perm[t_indptr[u]:t_indptr[u + 1]]] == u), as SparseGraph's transpose does")


#: Narrower products take torch's in :func:`csr_matmul` (measured: 1.4-3x slower in the kernel at
#: 4-16 columns on Cora and PubMed, 0.3x torch's time at 24 columns on PubMed).
CSR_MATMUL_MIN_WIDTH = 24


def csr_matmul(matrix: Tensor, dense: Tensor) -> Tensor:
    """``matrix @ dense`` for a sparse CSR ``matrix`` ``(M, N)`` and a dense ``(N, C)``: through
    :func:`csr_aggregate` where the kernels apply (int64 indices, ``C >=``
    :data:`CSR_MATMUL_MIN_WIDTH`, no gradient wanted of ``dense`` or of the values),
    ``torch.sparse.mm`` otherwise (which also raises on shapes that do not multiply). Label
    propagation (:mod:`ttgnn.smoothing`) uses it."""
    values = matrix.values() if matrix.layout == torch.sparse_csr else None
    if (values is None or matrix.dim() != 2 or values.dim() != 1 or matrix.crow_indices().dtype != torch.int64
            or dense.dim() != 2 or dense.shape[0] != matrix.shape[1] or dense.shape[1] < CSR_MATMUL_MIN_WIDTH
            or (torch.is_grad_enabled() and (dense.requires_grad or values.requires_grad))
            or not applies(values, dense)):
        return torch.sparse.mm(matrix, dense)
    return csr_aggregate(matrix.crow_indices(), matrix.col_indices(), values.unsqueeze(1), None,
                         dense.unsqueeze(1)).squeeze(1)


def _register_fakes() -> None:
    """Fake (meta) kernels, so that ``torch.compile`` and fake tensors trace the ops when called
    directly (called once, by :func:`available`)."""

    @torch.library.register_fake("ttgnn::csr_aggregate")
    def _csr_aggregate_fake(indptr, indices, weight, edge_ids, x):
        return x.new_empty((indptr.shape[0] - 1, x.shape[1], x.shape[2]))

    @torch.library.register_fake("ttgnn::csr_edge_dot")
    def _csr_edge_dot_fake(indptr, indices, a, b):
        return b.new_empty((indices.shape[0], b.shape[1]))

    @torch.library.register_fake("ttgnn::gat_attention")
    def _gat_attention_fake(indptr, indices, score_src, score_dst, negative_slope):
        return score_src.new_empty((indices.shape[0], score_src.shape[1]))

    @torch.library.register_fake("ttgnn::gat_attention_backward")
    def _gat_attention_backward_fake(grad, attention, indptr, indices, t_indptr, t_perm, score_src, score_dst,
                                     negative_slope):
        return score_src.new_empty(score_src.shape), score_dst.new_empty(score_dst.shape)


available()  # decided once, at import: the fake kernels are then registered before any trace
