"""Graph convolutions on plain index tensors: they run wherever torch runs (CPU, CUDA, ...).

DGL's PyPI wheels are CPU-only and its CUDA builds stop at torch 2.4, so a DGL graph or block
cannot move to a GPU on the pinned stack. Here DGL stays the graph container and the sampler (on
the CPU); each graph or block is turned into a :class:`SparseGraph` (CSR by destination, its
transpose, and per-edge destinations: index tensors only), which is pinned and copied to the
device. The layers compute the same function as DGL's, with the same parameter names, shapes
and initialisation (so a checkpoint of one backend loads into the other unchanged, and the same
seed gives the same initial weights):

* :class:`TensorSAGEConv` = ``dgl.nn.SAGEConv(aggregator_type="mean")``:
  ``fc_self(h_dst) + fc_neigh(mean of the in-neighbours' h)``; the bias is ``fc_self.bias``.
* :class:`TensorGATConv` = ``dgl.nn.GATConv``: separate ``attn_l`` / ``attn_r``, leaky ReLU,
  softmax over each node's in-edges, optional residual, bias per head and channel.

Message passing is sparse-times-dense products (``torch.sparse.mm`` on CSR, which is MKL on the
CPU and cuSPARSE on CUDA) inside one autograd function whose backward uses the stored transpose
and, for attention weights, a sampled dense-dense product (``torch.sparse.sampled_addmm``): no
``(E, D)`` message tensor is ever built (except for second derivatives, under ``torch.func``
transforms or forward-mode AD, and in ``torch.compile``'s traced graphs, which take a
gather-and-``index_add`` form of the same sum). On the CPU, when the ``ttgnn._C`` extension is loaded,
compiled kernels of ours (:mod:`ttgnn.graph_ops`) replace those products (all heads in one pass)
and GAT's attention (gathers, leaky ReLU and edge softmax in one pass per node); that path is
equal to the pure-PyTorch one above to float rounding, which the tests compare them with.

Written here rather than taken from PyTorch Geometric: PyG's layers compute the same values, but
under other parameter names (``lin_l``/``lin_r``, ``att_src``/``att_dst``) and, for an averaged
last GAT layer, with the bias added after the mean instead of per head; and without torch-scatter
its aggregation materialises per-edge messages.
"""
from __future__ import annotations

import logging
import warnings
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import graph_ops
from .dropout import Dropout
from .ops import in_transform

__all__ = ["SparseGraph", "aggregate", "edge_softmax", "gat_attention", "TensorSAGEConv", "TensorGATConv"]

log = logging.getLogger(__name__)

_INDEX_FIELDS = ("indptr", "indices", "dst", "t_indptr", "t_indices", "t_perm", "mean_weight")


class SparseGraph:
    r"""The message-passing structure of a graph or a block, as index tensors.

    Edges go from source to destination nodes and are stored by destination (CSR):
    the in-edges of destination ``v`` are ``indptr[v] .. indptr[v + 1]``, their sources
    ``indices[...]``. As in a DGL block, the first ``num_dst`` source nodes are the destination
    nodes (a full graph has ``num_src == num_dst``). Built once on the CPU, then moved whole
    with :meth:`to` (after :meth:`pin_memory` for an asynchronous copy to a GPU).

    Args:
        indptr (LongTensor): ``(num_dst + 1,)`` row pointers.
        indices (LongTensor): ``(E,)`` source node of each edge, grouped by destination.
        num_src (int): number of source nodes (``>= num_dst``).

    Attributes:
        dst (LongTensor): ``(E,)`` destination of each edge.
        t_indptr, t_indices, t_perm (LongTensor): the transpose (CSR by source): in-edge
            pointers ``(num_src + 1,)``, destinations ``(E,)`` and the edge ids ``(E,)`` in that
            order.
        mean_weight (Tensor): ``(E,)`` float32, ``1 / in-degree`` of each edge's destination.
        edge_ids (LongTensor or None): ``(E,)`` each edge's id in the DGL graph it was built from
            (:meth:`from_dgl`, whose edges DGL numbers in another order), else ``None``; edge
            dropout draws by these ids, so both GNN backends leave out the same edges.

    Raises:
        ValueError: inconsistent shapes, or indices out of range.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, num_src: int, *, _derived: Optional[dict] = None,
                 edge_ids: Optional[torch.Tensor] = None):
        self.indptr = indptr
        self.indices = indices
        self.num_src = int(num_src)
        self.num_dst = int(indptr.numel()) - 1
        self.edge_ids = edge_ids
        if _derived is not None:  # a copy (to / pin_memory): everything already computed
            for key, value in _derived.items():
                setattr(self, key, value)
            return
        if indptr.dim() != 1 or indptr.numel() < 1 or indices.dim() != 1:
            raise ValueError(f"indptr must be (num_dst + 1,) and indices (E,), got shapes {tuple(indptr.shape)} "
                             f"and {tuple(indices.shape)}")
        if indptr.dtype != torch.int64 or indices.dtype != torch.int64:
            raise TypeError(f"indptr and indices must be int64, got {indptr.dtype} and {indices.dtype}")
        if int(indptr[0]) != 0 or int(indptr[-1]) != indices.numel():
            raise ValueError(f"indptr must run from 0 to E={indices.numel()}, got {int(indptr[0])} .. {int(indptr[-1])}")
        if self.num_src < self.num_dst:
            raise ValueError(f"num_src ({self.num_src}) must be >= num_dst ({self.num_dst}): the destination nodes "
                             "are the first source nodes")
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= self.num_src):
            raise ValueError(f"source indices must lie in [0, {self.num_src}), got values in "
                             f"[{int(indices.min())}, {int(indices.max())}]")
        degree = indptr[1:] - indptr[:-1]
        if degree.numel() and int(degree.min()) < 0:
            raise ValueError("indptr must be non-decreasing")
        self.dst = torch.repeat_interleave(torch.arange(self.num_dst, device=indptr.device), degree)
        self.t_indices, self.t_perm = _stable_sort(indices, self.dst)
        counts = torch.bincount(indices, minlength=self.num_src)
        self.t_indptr = torch.zeros(self.num_src + 1, dtype=torch.int64, device=indptr.device)
        torch.cumsum(counts, 0, out=self.t_indptr[1:])
        self.mean_weight = (1.0 / degree.clamp(min=1).to(torch.float32))[self.dst]

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dgl(cls, graph) -> "SparseGraph":
        """The structure of a DGL graph or block (one edge type), on the CPU.

        Edge order within a destination is DGL's CSC order; sums over in-edges are therefore
        taken in the same order as DGL's, up to float rounding of the kernels.
        """
        if len(graph.canonical_etypes) != 1:
            raise ValueError(f"expected a graph with one edge type, got {graph.canonical_etypes}")
        if graph.device.type != "cpu":
            graph = graph.to("cpu")
        indptr, indices, edge_ids = graph.adj_tensors("csc")
        num_src = graph.num_src_nodes() if graph.is_block else graph.num_nodes()
        return cls(indptr.long(), indices.long(), num_src, edge_ids=edge_ids.long())

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    def _map(self, fn) -> "SparseGraph":
        tensors = {key: fn(getattr(self, key)) for key in _INDEX_FIELDS}
        indptr, indices = tensors.pop("indptr"), tensors.pop("indices")
        return SparseGraph(indptr, indices, self.num_src, _derived=tensors,
                           edge_ids=None if self.edge_ids is None else fn(self.edge_ids))

    def to(self, device, non_blocking: bool = False) -> "SparseGraph":
        """A copy on ``device`` (``self`` when already there); ``non_blocking`` from pinned memory."""
        device = torch.device(device)
        if self.device == device:
            return self
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "SparseGraph":
        """A copy in page-locked memory (a CPU graph; needs an accelerator to be present)."""
        return self._map(lambda t: t.pin_memory())

    def is_pinned(self) -> bool:
        return all(getattr(self, key).is_pinned() for key in _INDEX_FIELDS) and (
            self.edge_ids is None or self.edge_ids.is_pinned())

    def in_degrees(self) -> torch.Tensor:
        """``(num_dst,)`` in-degree of each destination."""
        return self.indptr[1:] - self.indptr[:-1]

    def edge_subgraph(self, keep: torch.Tensor) -> "SparseGraph":
        """The same nodes with only the edges where ``keep`` (BoolTensor ``(E,)``) is true.

        Kept edges stay in their order, by destination and in the transpose, so nothing is
        sorted again: ``O(E)``. A destination may end with no in-edge (its mean is zero).
        """
        if keep.dtype != torch.bool or keep.shape != self.indices.shape:
            raise ValueError(f"keep must be a bool tensor of shape ({self.num_edges},), got {keep.dtype} "
                             f"{tuple(keep.shape)}")
        keep = keep.to(self.device)
        kept_before = torch.zeros(self.num_edges + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(keep, 0, out=kept_before[1:])
        indptr = kept_before[self.indptr]
        dst = self.dst[keep]
        keep_t = keep[self.t_perm]
        kept_before_t = torch.zeros(self.num_edges + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(keep_t, 0, out=kept_before_t[1:])
        degree = (indptr[1:] - indptr[:-1]).clamp(min=1).to(torch.float32)
        derived = dict(dst=dst, t_indptr=kept_before_t[self.t_indptr], t_indices=self.t_indices[keep_t],
                       t_perm=kept_before[self.t_perm[keep_t]], mean_weight=(1.0 / degree)[dst])
        return SparseGraph(indptr, self.indices[keep], self.num_src, _derived=derived,
                           edge_ids=None if self.edge_ids is None else self.edge_ids[keep])

    def mean_weight_in(self, dtype: torch.dtype) -> torch.Tensor:
        """:attr:`mean_weight` in ``dtype``: the stored float32 one, else ``1 / in-degree`` computed in
        ``dtype`` (a float32 weight cast to float64 left the mean float32-accurate, 1e-8 from DGL's)."""
        if dtype == self.mean_weight.dtype:
            return self.mean_weight
        degree = (self.indptr[1:] - self.indptr[:-1]).clamp(min=1).to(dtype)
        return (1.0 / degree)[self.dst]

    def csr(self, values: torch.Tensor) -> torch.Tensor:
        """``(num_dst, num_src)`` sparse CSR matrix with ``values`` ``(E,)`` on the edges."""
        return _csr(self.indptr, self.indices, values, (self.num_dst, self.num_src))

    def csr_t(self, values: torch.Tensor) -> torch.Tensor:
        """``(num_src, num_dst)`` transpose, ``values`` ``(E,)`` given in edge-id order."""
        return _csr(self.t_indptr, self.t_indices, values[self.t_perm], (self.num_src, self.num_dst))

    def __repr__(self) -> str:
        return (f"SparseGraph(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges}, "
                f"device={self.device})")


def _csr(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, size: tuple) -> torch.Tensor:
    # contiguous values: a head's column of an (E, H) weight is strided, and torch's CUDA sparse
    # kernels read the values buffer as if it were dense
    values = values.contiguous()
    with warnings.catch_warnings():  # torch calls sparse CSR "beta" on every first use
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
        return torch.sparse_csr_tensor(indptr, indices, values, size, check_invariants=False)


def _stable_sort(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values sorted by keys, stably; the permutation)``."""
    _, perm = torch.sort(keys, stable=True)
    return values[perm], perm


def _spmm(matrix: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    if matrix._nnz() == 0:  # sparse kernels differ on empty inputs; the answer is zero
        return dense.new_zeros(matrix.shape[0], dense.shape[1])
    return torch.sparse.mm(matrix, dense)


def _reference_aggregate(graph: SparseGraph, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """What :class:`_Aggregate` computes, with per-edge messages (``(E, H, F)``) summed by
    ``index_add``: every op has derivatives of any order, a forward derivative and a batching rule,
    and traces into one graph, so second derivatives, ``torch.func`` transforms and
    ``torch.compile`` take this path."""
    messages = weight.unsqueeze(-1) * x[graph.indices]
    return x.new_zeros(graph.num_dst, *x.shape[1:]).index_add(0, graph.dst, messages)


def _differentiable_grads(reference, graph: SparseGraph, inputs: tuple, extra: tuple, needed: tuple,
                          grad: torch.Tensor) -> tuple:
    """The gradients of ``reference(graph, *inputs, *extra)`` with respect to ``inputs`` (``None``
    where ``needed`` is false), themselves differentiable (``create_graph``): what an autograd
    Function's backward returns for a second derivative. It differentiates fresh views of the inputs,
    so each gradient is a partial derivative, also where one input was computed from another."""
    with torch.enable_grad():
        fresh = tuple(t.view_as(t) for t in inputs)
        again = reference(graph, *fresh, *extra)
    wanted = [t for t, need in zip(fresh, needed) if need]
    grads = iter(torch.autograd.grad(again, wanted, grad, create_graph=True))
    return tuple(next(grads) if need else None for need in needed)


class _Aggregate(torch.autograd.Function):
    """``out[v, h] = sum over in-edges e = (u, v) of weight[e, h] * x[u, h]``, by head."""

    @staticmethod
    def forward(graph: SparseGraph, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if graph_ops.applies(weight, x):
            return graph_ops.csr_aggregate(graph.indptr, graph.indices, weight, None, x)
        heads = x.shape[1]
        if heads == 1:  # no per-head copies
            out = _spmm(graph.csr(weight[:, 0]), x[:, 0]).unsqueeze(1)
        else:
            out = x.new_empty(graph.num_dst, heads, x.shape[2])
            for head in range(heads):
                out[:, head] = _spmm(graph.csr(weight[:, head]), x[:, head].contiguous())
        return out

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        graph, weight, x = inputs
        ctx.graph = graph
        ctx.save_for_backward(weight, x)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        graph = ctx.graph
        weight, x = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph
            return None, *_differentiable_grads(_reference_aggregate, graph, (weight, x), (),
                                                ctx.needs_input_grad[1:3], grad_out)
        if graph_ops.applies(weight, x, grad_out):
            grad_x = grad_weight = None
            if ctx.needs_input_grad[2]:
                grad_x = graph_ops.csr_aggregate(graph.t_indptr, graph.t_indices, weight, graph.t_perm, grad_out)
            if ctx.needs_input_grad[1]:
                grad_weight = graph_ops.csr_edge_dot(graph.indptr, graph.indices, grad_out, x)
            return None, grad_weight, grad_x
        grad_weight = grad_x = None
        heads = x.shape[1]
        if ctx.needs_input_grad[2] and heads == 1:
            grad_x = _spmm(graph.csr_t(weight[:, 0]), grad_out[:, 0].contiguous()).unsqueeze(1)
        elif ctx.needs_input_grad[2]:
            grad_x = x.new_empty(x.shape)
            for head in range(heads):
                grad_x[:, head] = _spmm(graph.csr_t(weight[:, head]), grad_out[:, head].contiguous())
        if ctx.needs_input_grad[1]:
            # grad_weight[e, h] = <grad_out[dst_e, h], x[src_e, h]>: a product sampled on the edges
            grad_weight = weight.new_zeros(weight.shape)
            if graph.num_edges:
                pattern = graph.csr(weight.new_zeros(graph.num_edges))
                for head in range(heads):
                    sampled = torch.sparse.sampled_addmm(pattern, grad_out[:, head].contiguous(),
                                                         x[:, head].t().contiguous(), beta=0.0)
                    grad_weight[:, head] = sampled.values()
        return None, grad_weight, grad_x


def aggregate(graph: SparseGraph, weight: Optional[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    r"""Weighted sum over each destination's in-edges: ``out[v] = sum_{(u, v)} w_{uv} x[u]``.

    Args:
        graph (SparseGraph): the structure, on ``x``'s device.
        weight (Tensor, optional): ``(E, H)`` edge weights per head (differentiable), or
            ``None`` for the mean (``1 / in-degree``, zero rows for nodes without in-edges).
        x (Tensor): ``(num_src, H, F)`` or ``(num_src, F)`` source features.

    Shapes:
        - **output:** ``(num_dst, H, F)`` (or ``(num_dst, F)`` for a 2-D ``x``).
    """
    if x.shape[0] != graph.num_src:
        raise ValueError(f"x must have one row per source node ({graph.num_src}), got {x.shape[0]}")
    if x.device != graph.device:
        raise ValueError(f"x is on {x.device} but the graph is on {graph.device}: move the graph with .to()")
    flat = x.dim() == 2
    x3 = x.unsqueeze(1) if flat else x
    if weight is None:
        weight = graph.mean_weight_in(x.dtype).unsqueeze(1).expand(-1, x3.shape[1])
    if weight.shape != (graph.num_edges, x3.shape[1]):
        raise ValueError(f"weight must be (E, H) = ({graph.num_edges}, {x3.shape[1]}), got {tuple(weight.shape)}")
    # torch.compile traces the gather form whole (it cannot tell whether a torch.func transform is active,
    # and the CSR path breaks its graph); torch.func and forward-mode AD need its batching rules and derivatives
    if torch.compiler.is_compiling() or in_transform(weight, x3):
        out = _reference_aggregate(graph, weight, x3)
    else:
        out = _Aggregate.apply(graph, weight, x3)
    return out.squeeze(1) if flat else out


def edge_softmax(graph: SparseGraph, scores: torch.Tensor) -> torch.Tensor:
    r"""Softmax of edge scores over each destination's in-edges (what DGL's ``edge_softmax`` does).

    Shapes:
        - **input:** ``(E, H)``. **output:** ``(E, H)``.
    """
    index = graph.dst.unsqueeze(1).expand_as(scores)
    # The subtracted maximum only guards exp() against overflow; softmax does not depend on it.
    peak = scores.new_zeros(graph.num_dst, scores.shape[1]).scatter_reduce_(0, index, scores.detach(), "amax",
                                                                           include_self=False)
    exp = torch.exp(scores - peak[graph.dst])
    total = scores.new_zeros(graph.num_dst, scores.shape[1]).index_add_(0, graph.dst, exp)
    return exp / total[graph.dst]


class _GATAttention(torch.autograd.Function):
    """:func:`edge_softmax` of ``leaky_relu(score_src[u] + score_dst[v])`` over each destination
    ``v``'s in-edges ``(u, v)``, in the compiled CPU kernels (:mod:`ttgnn.graph_ops`)."""

    @staticmethod
    def forward(graph: SparseGraph, score_src: torch.Tensor, score_dst: torch.Tensor,
                negative_slope: float) -> torch.Tensor:
        return graph_ops.gat_attention(graph.indptr, graph.indices, score_src, score_dst, negative_slope)

    @staticmethod
    def setup_context(ctx, inputs, attention) -> None:
        graph, score_src, score_dst, negative_slope = inputs
        ctx.graph = graph
        ctx.negative_slope = negative_slope
        ctx.save_for_backward(score_src, score_dst, attention)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        score_src, score_dst, attention = ctx.saved_tensors
        graph = ctx.graph
        if torch.is_grad_enabled():  # create_graph
            return None, *_differentiable_grads(_reference_attention, graph, (score_src, score_dst),
                                                (ctx.negative_slope,), ctx.needs_input_grad[1:3], grad), None
        grad_src, grad_dst = graph_ops.gat_attention_backward(grad, attention, graph.indptr, graph.indices,
                                                              graph.t_indptr, graph.t_perm, score_src, score_dst,
                                                              ctx.negative_slope, check_transpose=False)
        return None, grad_src, grad_dst, None


def _reference_attention(graph: SparseGraph, score_src: torch.Tensor, score_dst: torch.Tensor,
                         negative_slope: float) -> torch.Tensor:
    scores = F.leaky_relu(score_src[graph.indices] + score_dst[graph.dst], negative_slope)
    return edge_softmax(graph, scores)


def gat_attention(graph: SparseGraph, score_src: torch.Tensor, score_dst: torch.Tensor,
                  negative_slope: float = 0.2) -> torch.Tensor:
    r"""GAT's attention weights: over each destination ``v``'s in-edges ``e = (u, v)``, the softmax
    of ``leaky_relu(score_src[u] + score_dst[v], negative_slope)``. On the CPU the compiled kernels
    compute it in one pass per destination (:mod:`ttgnn.graph_ops`; a second derivative
    differentiates the reference); elsewhere, or inside :func:`ttgnn.graph_ops.reference_only`,
    gathers and :func:`edge_softmax`.

    Shapes:
        - **input:** ``score_src`` ``(num_src, H)``, ``score_dst`` ``(num_dst, H)``.
        - **output:** ``(E, H)``, in edge order.
    """
    if graph_ops.applies(score_src, score_dst):
        return _GATAttention.apply(graph, score_src, score_dst, negative_slope)
    return _reference_attention(graph, score_src, score_dst, negative_slope)


def _dst_features(graph: SparseGraph, h: torch.Tensor) -> torch.Tensor:
    return h[:graph.num_dst]


class TensorSAGEConv(nn.Module):
    r"""GraphSAGE convolution with the mean aggregator, on a :class:`SparseGraph`
    (`Hamilton et al., 2017 <https://arxiv.org/abs/1706.02216>`_).

    .. math::
        h'_v = W_{self} h_v + b + W_{neigh} \frac{1}{|N(v)|} \sum_{u \in N(v)} h_u

    Same parameters (``fc_self.weight``, ``fc_self.bias``, ``fc_neigh.weight``), initialisation
    and function as ``dgl.nn.SAGEConv(in_feats, out_feats, "mean")``.

    Args:
        in_feats (int): input width. out_feats (int): output width.
        feat_drop (float, optional): dropout on the input. (default: ``0.0``)
        bias (bool, optional): learn a bias. (default: ``True``)

    Shapes:
        - **input:** graph with ``num_src`` sources; ``h`` ``(num_src, in_feats)``.
        - **output:** ``(num_dst, out_feats)``.
    """

    def __init__(self, in_feats: int, out_feats: int, feat_drop: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.in_feats = in_feats
        self.out_feats = out_feats
        self.feat_drop = Dropout(feat_drop)
        self.fc_neigh = nn.Linear(in_feats, out_feats, bias=False)  # creation order = DGL's (same RNG draws)
        self.fc_self = nn.Linear(in_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def forward(self, graph: SparseGraph, h: torch.Tensor) -> torch.Tensor:
        h = self.feat_drop(h)
        # Project first when that shrinks the aggregated width (DGL does the same).
        if self.in_feats > self.out_feats:
            neigh = aggregate(graph, None, self.fc_neigh(h))
        else:
            neigh = self.fc_neigh(aggregate(graph, None, h))
        return self.fc_self(_dst_features(graph, h)) + neigh

    def extra_repr(self) -> str:
        return f"{self.in_feats}, {self.out_feats}, aggregator=mean"


class TensorGATConv(nn.Module):
    r"""Multi-head graph attention on a :class:`SparseGraph`
    (`Velickovic et al., 2018 <https://arxiv.org/abs/1710.10903>`_).

    .. math::
        \alpha_{uv}^{k} = \mathrm{softmax}_{u \in N(v)}\big(\mathrm{LeakyReLU}(a_l^{k\top} W^k h_u
        + a_r^{k\top} W^k h_v)\big), \qquad h'^{k}_v = \sum_{u \in N(v)} \alpha_{uv}^k W^k h_u
        \;(+\, \mathrm{res}(h_v)) + b^k

    Same parameters (``fc.weight``, ``attn_l``, ``attn_r``, ``bias``, ``res_fc.*``),
    initialisation and function as ``dgl.nn.GATConv(in_feats, out_feats, num_heads, ...)`` with a
    single input width. A node without in-edges gets zero messages (DGL's
    ``allow_zero_in_degree=True``).

    Args:
        in_feats (int): input width. out_feats (int): width per head. num_heads (int): heads.
        feat_drop (float, optional): dropout on the input. (default: ``0.0``)
        attn_drop (float, optional): dropout on the attention weights. (default: ``0.0``)
        negative_slope (float, optional): of the leaky ReLU. (default: ``0.2``)
        residual (bool, optional): add ``res_fc(h_dst)`` (a linear map, or the identity when
            ``in_feats == num_heads * out_feats``). (default: ``False``)
        bias (bool, optional): learn a bias per head and channel. (default: ``True``)

    Shapes:
        - **input:** graph with ``num_src`` sources; ``h`` ``(num_src, in_feats)``.
        - **output:** ``(num_dst, num_heads, out_feats)``.
    """

    def __init__(self, in_feats: int, out_feats: int, num_heads: int, feat_drop: float = 0.0, attn_drop: float = 0.0,
                 negative_slope: float = 0.2, residual: bool = False, bias: bool = True) -> None:
        super().__init__()
        if num_heads < 1 or out_feats < 1:
            raise ValueError(f"num_heads and out_feats must be >= 1, got {num_heads} and {out_feats}")
        self.in_feats = in_feats
        self.out_feats = out_feats
        self.num_heads = num_heads
        self.negative_slope = negative_slope
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = Dropout(feat_drop)
        self.attn_drop = Dropout(attn_drop)
        self.has_linear_res = False
        if residual:
            if in_feats != out_feats * num_heads:
                self.res_fc = nn.Linear(in_feats, num_heads * out_feats, bias=bias)
                self.has_linear_res = True
            else:
                self.res_fc = nn.Identity()
        else:
            self.register_buffer("res_fc", None)
        if bias and not self.has_linear_res:
            self.bias = nn.Parameter(torch.empty(num_heads * out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if isinstance(self.bias, nn.Parameter):
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.zeros_(self.res_fc.bias)

    def forward(self, graph: SparseGraph, h: torch.Tensor) -> torch.Tensor:
        h = self.feat_drop(h)
        feat_src = self.fc(h).view(-1, self.num_heads, self.out_feats)
        feat_dst = _dst_features(graph, feat_src)
        score_src = (feat_src * self.attn_l).sum(-1)  # (num_src, H)
        score_dst = (feat_dst * self.attn_r).sum(-1)  # (num_dst, H)
        attention = self.attn_drop(gat_attention(graph, score_src, score_dst, self.negative_slope))
        out = aggregate(graph, attention, feat_src)
        if self.res_fc is not None:
            out = out + self.res_fc(_dst_features(graph, h)).view(graph.num_dst, -1, self.out_feats)
        if self.bias is not None:
            out = out + self.bias.view(1, self.num_heads, self.out_feats)
        return out

    def extra_repr(self) -> str:
        return f"{self.in_feats}, {self.out_feats}, num_heads={self.num_heads}"
