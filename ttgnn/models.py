"""Featureless node classifiers: an input module (TT / full embedding / node features) + a GNN.

* :class:`NodeInput` gives the input vectors of nodes: rows of a :class:`ttgnn.TTNodeEmbedding`,
  of a :class:`torch.nn.Embedding`, or of a fixed feature matrix.
* :class:`GraphSAGE` (`Hamilton et al., 2017 <https://arxiv.org/abs/1706.02216>`_, mean aggregator)
  and :class:`GAT` (`Velickovic et al., 2018 <https://arxiv.org/abs/1710.10903>`_, multi-head) on one
  of two backends (:data:`ttgnn.choices.GNN_BACKENDS`): ``"dgl"`` (``dgl.nn.SAGEConv`` /
  ``dgl.nn.GATConv``, where DGL runs: the CPU with the pinned DGL wheel) or ``"torch"``
  (:mod:`ttgnn.layers`: the same math and parameter names on plain index tensors, any device).
  Both run on a full graph or on a list of blocks (mini-batch), and have a layer-wise
  full-neighbour :meth:`GNN.inference`. A state dict of one backend loads into the other.
* :class:`LabelInput` (optional) adds a learned vector per known training label to a node's input
  (the label trick): the labels of a random part of the training nodes are inputs, the loss is on
  the others; at evaluation every training label is an input, never a validation or test label.
  With ``reuse_iters > 0`` the model's own predicted class probabilities of the other nodes are
  fed back as their label input that many times (label reuse, :func:`ttgnn.evaluation.reuse_labels`);
  with ``spread_steps > 0`` the nodes without a known label start from the known labels spread
  over the graph instead of "unknown" (:func:`ttgnn.smoothing.spread_labels`).
* :class:`NodeClassifier` ties them together.

Only DGL APIs present in both DGL 1.1 and 2.x are used.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Optional

import torch
from torch import nn

os.environ.setdefault("DGLBACKEND", "pytorch")
import dgl  # noqa: E402
from dgl.nn import GATConv, SAGEConv  # noqa: E402

from .batches import loader_batches  # noqa: E402
from .embedding import TTNodeEmbedding  # noqa: E402
from .choices import EMBEDDINGS, GNN_BACKENDS, MODELS, NORMS, check_choice  # noqa: E402
from .config import check_gat_width, check_int  # noqa: E402
from .dropout import Dropout  # noqa: E402
from .layers import SparseGraph, TensorGATConv, TensorSAGEConv  # noqa: E402

__all__ = ["NodeInput", "LabelInput", "GNN", "GraphSAGE", "GAT", "NodeClassifier",
           "build_model", "drop_edges", "resolve_gnn_backend", "dgl_runs_on"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def dgl_runs_on(device: str) -> bool:
    """Whether this DGL build can hold a graph on ``device`` (the PyPI wheels are CPU-only)."""
    if torch.device(device).type == "cpu":
        return True
    try:
        dgl.graph(([0], [0])).to(device)
    except Exception as err:  # DGLError, or a torch error for a device torch lacks
        log.debug("DGL cannot run on %s: %s", device, err)
        return False
    return True


def resolve_gnn_backend(backend: str, device, model: Optional[str] = None, mode: str = "full") -> str:
    """``"dgl"`` or ``"torch"``: the GNN backend to use for ``backend`` on ``device``.

    ``"auto"`` is the tensor layers (:mod:`ttgnn.layers`) where DGL cannot run on the device, and
    for ``model="gat"`` in ``mode="full"`` (full-graph training) on every device: on the CPU,
    with the compiled graph kernels (:mod:`ttgnn.graph_ops`), they train a GAT epoch on ogbn-arxiv
    in 0.43-0.58x the time of DGL's layers and evaluate it in 0.45-0.52x (docs/gpu.md; 0.70-0.91x
    and 0.59-0.68x before those kernels). Elsewhere ``"auto"`` is DGL (GraphSAGE's mean: DGL's
    fused kernel was 1.2-1.26x faster than torch's products; with the compiled kernels the tensor
    layers took 0.87-0.96x of its epoch on one day and 1.05-1.15x on another, on the same machine).

    Raises:
        ValueError: an unknown backend, or ``"dgl"`` on a device this DGL build cannot use.
    """
    check_choice("gnn_backend", backend, GNN_BACKENDS)
    device = torch.device(device)
    if backend == "auto":
        if model == "gat" and mode == "full":
            return "torch"
        return "dgl" if dgl_runs_on(str(device)) else "torch"
    if backend == "dgl" and not dgl_runs_on(str(device)):
        raise ValueError(f"gnn_backend 'dgl' cannot run on {device}: this DGL build has no support for it "
                         "(the PyPI wheels are CPU-only); use gnn_backend 'torch' or 'auto'")
    return backend


class NodeInput(nn.Module):
    r"""Input vectors of nodes for a featureless (or feature-based) GNN.

    Args:
        kind (str): ``"tt"`` (:class:`ttgnn.TTNodeEmbedding`), ``"full"``
            (:class:`torch.nn.Embedding`) or ``"features"`` (a fixed feature matrix).
        num_nodes (int): ``N``.
        dim (int, optional): embedding dimension ``D`` (ignored for ``"features"``). (default: ``128``)
        features (Tensor, optional): ``(N, F)`` features, required for ``"features"``.
        dense_fraction (float, optional): for ``"tt"``, see
            :attr:`ttgnn.TTNodeEmbedding.dense_fraction`. (default: ``0.25``)
        full_init_std (float, optional): std of the ``"full"`` table's normal init. (default: ``1.0``)
        **tt_kwargs: passed to :class:`ttgnn.TTNodeEmbedding` (``ranks``, ``row_shape``,
            ``col_shape``, ``num_cores``, ``init``, ``init_scale``, ``node_order``, ``generator``).

    Shapes:
        - **input:** node ids ``(B,)`` or ``None`` for all nodes.
        - **output:** ``(B, D)`` or ``(N, D)``.
    """

    def __init__(self, kind: str, num_nodes: int, dim: int = 128, *, features: Optional[torch.Tensor] = None,
                 dense_fraction: float = 0.25, full_init_std: float = 1.0, **tt_kwargs) -> None:
        super().__init__()
        if kind not in EMBEDDINGS:
            raise ValueError(f"embedding kind must be one of {EMBEDDINGS}, got {kind!r}")
        self.kind = kind
        self.num_nodes = num_nodes
        if kind == "tt":
            self.table = TTNodeEmbedding(num_nodes, dim, **tt_kwargs)
            self.table.dense_fraction = dense_fraction
            self.dim = dim
        elif kind == "full":
            if tt_kwargs:
                raise TypeError(f"TT options {sorted(tt_kwargs)} do not apply to a full embedding")
            self.table = nn.Embedding(num_nodes, dim)
            nn.init.normal_(self.table.weight, 0.0, full_init_std)
            self.dim = dim
        else:
            if features is None:
                raise ValueError("embedding kind 'features' needs a feature matrix; this dataset has none")
            if features.shape[0] != num_nodes:
                raise ValueError(f"features must have {num_nodes} rows, got {features.shape[0]}")
            self.register_buffer("features", features.float())
            self.table = None
            self.dim = int(features.shape[1])

    @property
    def num_parameters(self) -> int:
        """Trainable scalars of the input (0 for features)."""
        return 0 if self.table is None else sum(p.numel() for p in self.table.parameters())

    @property
    def compression_ratio(self) -> float:
        """``N * D`` over the parameter count (1 for a full table and for features)."""
        return self.table.compression_ratio if self.kind == "tt" else 1.0

    def forward(self, nodes: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.kind == "features":
            return self.features if nodes is None else self.features[nodes.to(self.features.device)]
        if self.kind == "full":
            return self.table.weight if nodes is None else self.table(nodes)
        return self.table.all_rows() if nodes is None else self.table(nodes)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, num_nodes={self.num_nodes}, dim={self.dim}"


class LabelInput(nn.Module):
    r"""Known labels as a node input: one learned vector per class, zero for "unknown".

    A node's input becomes its embedding plus the vector of its label when its label is given.
    The table has ``num_classes + 1`` rows; row ``num_classes`` (:attr:`unknown`) is fixed at
    zero (``padding_idx``), so unlabelled nodes get the embedding alone. Its size depends on the
    classes, not on the nodes: ``(num_classes + 1) * dim`` parameters.

    Soft labels, class probabilities ``(B, C)``, give the probability-weighted sum of the class
    vectors (a one-hot row gives its class's vector, a zero row the unknown's zero): that is how
    predictions are fed back with label reuse.

    Args:
        num_classes (int): ``C``.
        dim (int): width of the node input it is added to.
        reuse_iters (int): how many times a model's predictions of the nodes without a known
            label are fed back as their input before its output is taken (label reuse; read by
            :func:`ttgnn.evaluation.all_logits` and training). (default: ``0``, no reuse)
        spread_steps (int): label propagation steps that give the nodes without a known label
            the class distribution of the known labels around them as their first label input
            (:func:`ttgnn.evaluation.label_inputs`; read like ``reuse_iters``). (default: ``0``,
            unknown)

    Shapes:
        - **input:** label ids ``(B,)`` in ``[0, C]`` (``C`` = unknown), or probabilities ``(B, C)``
          (floating point).
        - **output:** ``(B, dim)``.
    """

    def __init__(self, num_classes: int, dim: int, reuse_iters: int = 0, spread_steps: int = 0) -> None:
        super().__init__()
        if num_classes < 1 or dim < 1:
            raise ValueError(f"num_classes and dim must be >= 1, got {num_classes} and {dim}")
        for name, value in (("reuse_iters", reuse_iters), ("spread_steps", spread_steps)):
            check_int(name, value, 0)
        self.num_classes = num_classes
        self.reuse_iters = reuse_iters
        self.spread_steps = spread_steps
        self.table = nn.Embedding(num_classes + 1, dim, padding_idx=num_classes)

    @property
    def unknown(self) -> int:
        """The id of an unknown label."""
        return self.num_classes

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        if labels.is_floating_point():
            if labels.dim() != 2 or labels.shape[1] != self.num_classes:
                raise ValueError(f"soft labels must have shape (B, {self.num_classes}), got {tuple(labels.shape)}")
            weight = self.table.weight[: self.num_classes]
            return labels.to(device=weight.device, dtype=weight.dtype) @ weight
        if labels.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"label ids must be int32 or int64 (or floating-point probabilities), got {labels.dtype}")
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) > self.num_classes):
            raise IndexError(f"label ids must be in [0, {self.num_classes}] ({self.num_classes} = unknown), "
                             f"got values in [{int(labels.min())}, {int(labels.max())}]")
        return self.table(labels.to(self.table.weight.device))

    def extra_repr(self) -> str:
        reuse = f", reuse_iters={self.reuse_iters}" if self.reuse_iters else ""
        spread = f", spread_steps={self.spread_steps}" if self.spread_steps else ""
        return f"num_classes={self.num_classes}, dim={self.table.embedding_dim}{reuse}{spread}"


class GNN(nn.Module):
    r"""A stack of graph convolutions with normalisation, ReLU, dropout and optional residuals.

    Subclasses define :meth:`make_conv` and :meth:`conv_out`. ``forward`` takes either one
    ``DGLGraph`` (full graph, used by every layer) or a list of blocks (one per layer).

    Args:
        in_dim (int): input width.
        hidden (int): hidden width.
        num_classes (int): output width.
        num_layers (int, optional): number of convolutions (>= 1). (default: ``3``)
        dropout (float, optional): dropout on hidden layers. (default: ``0.5``)
        input_dropout (float, optional): dropout on the input vectors. (default: ``0.0``)
        norm (str, optional): ``"batch"``, ``"layer"`` or ``"none"``. (default: ``"batch"``)
        residual (bool, optional): add a linear skip from each layer's input. (default: ``False``)
        edge_dropout (float, optional): in training on a full graph, each layer sees the graph
            without a random share ``edge_dropout`` of its edges, drawn anew per layer and step
            (edge dropout: a mean or an attention softmax over the kept in-edges only);
            evaluation sees every edge. (default: ``0.0``)
        backend (str, optional): ``"dgl"`` (DGL's convolutions; graphs are DGL graphs or blocks)
            or ``"torch"`` (:mod:`ttgnn.layers`; graphs are :class:`~ttgnn.layers.SparseGraph`, or
            DGL graphs converted on each call). Parameter names and shapes are the same in both.
            (default: ``"dgl"``)
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int = 3, dropout: float = 0.5,
                 input_dropout: float = 0.0, norm: str = "batch", residual: bool = False, backend: str = "dgl",
                 edge_dropout: float = 0.0) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if not 0.0 <= edge_dropout < 1.0:
            raise ValueError(f"edge_dropout must be in [0, 1), got {edge_dropout}")
        if backend not in ("dgl", "torch"):
            raise ValueError(f"backend must be 'dgl' or 'torch' (resolve 'auto' with resolve_gnn_backend), "
                             f"got {backend!r}")
        self.backend = backend
        self.edge_dropout = edge_dropout
        self.num_layers = num_layers
        self.hidden = hidden
        self.num_classes = num_classes
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.skips = nn.ModuleList()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        for layer in range(num_layers):
            last = layer == num_layers - 1
            self.convs.append(self.make_conv(dims[layer], dims[layer + 1], last))
            if not last:
                if norm == "batch":
                    self.norms.append(nn.BatchNorm1d(hidden))
                elif norm == "layer":
                    self.norms.append(nn.LayerNorm(hidden))
                else:
                    self.norms.append(nn.Identity())
            self.skips.append(nn.Linear(dims[layer], dims[layer + 1], bias=False) if residual else nn.Identity())
        if norm == "batch":
            # Batch norm takes each channel's batch mean away, so the bias of the convolution before it has a
            # true gradient of 0; the computed one is rounding residue (~1e-8), which Adam, normalising by its
            # own size, turned into steps of about the learning rate: the bias drifted (0.17 after 40 epochs on
            # Cora) and the eval-mode outputs, which use the running mean, moved with the summation order. It
            # stays a parameter (checkpoints keep their layout) that takes no gradient (copies keep that too).
            for conv in self.convs[:-1]:
                for name, param in conv.named_parameters():
                    if name.rsplit(".", 1)[-1] == "bias":
                        param.requires_grad_(False)
        self.residual = residual
        self.dropout = Dropout(dropout)
        self.input_dropout = Dropout(input_dropout)

    def make_conv(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        raise NotImplementedError

    def conv_out(self, out: torch.Tensor, last: bool) -> torch.Tensor:
        return out

    def prepare_graph(self, graph, device):
        """``graph`` (one graph or block) in the form this backend's convolutions take.

        For ``"torch"``: a :class:`~ttgnn.layers.SparseGraph` on ``device`` (a DGL graph is
        converted; convert once and reuse it when the graph does not change). For ``"dgl"``: the
        DGL graph itself.

        Raises:
            TypeError: a :class:`~ttgnn.layers.SparseGraph` given to the DGL backend.
        """
        if self.backend == "torch":
            if not isinstance(graph, SparseGraph):
                graph = SparseGraph.from_dgl(graph)
            return graph.to(device)
        if isinstance(graph, SparseGraph):
            raise TypeError("the 'dgl' GNN backend takes DGL graphs or blocks, got a SparseGraph; build the "
                            "model with backend 'torch' to use index tensors")
        return graph

    def layer(self, index: int, graph, h: torch.Tensor) -> torch.Tensor:
        """Apply layer ``index`` on ``graph`` (a full graph or a block, in the backend's form, see
        :meth:`prepare_graph`) to source features ``h``."""
        last = index == self.num_layers - 1
        out = self.conv_out(self.convs[index](graph, h), last)
        if self.residual:
            if isinstance(graph, SparseGraph):
                num_dst = graph.num_dst
            else:
                num_dst = graph.num_dst_nodes() if graph.is_block else h.shape[0]
            out = out + self.skips[index](h[:num_dst])
        if not last:
            out = self.dropout(torch.relu(self.norms[index](out)))
        return out

    def forward(self, graph, h: torch.Tensor) -> torch.Tensor:
        """Logits of the destination nodes.

        Args:
            graph: a full graph (used by every layer) or a list of blocks (one per layer), as
                DGL graphs or (``"torch"`` backend) :class:`~ttgnn.layers.SparseGraph`.
            h (Tensor): ``(num_src, in_dim)`` inputs of the (first block's) source nodes.

        Shapes:
            - **output:** ``(num_dst, num_classes)`` (of the last block; all nodes for a full graph).
        """
        h = self.input_dropout(h)
        drop = self.training and self.edge_dropout > 0
        if isinstance(graph, (list, tuple)):
            if len(graph) != self.num_layers:
                raise ValueError(f"expected {self.num_layers} blocks, got {len(graph)}")
            if drop:
                raise ValueError("edge dropout applies to full-graph training; with blocks, neighbour sampling "
                                 "already leaves edges out (set edge_dropout=0)")
            for index, block in enumerate(graph):
                h = self.layer(index, self.prepare_graph(block, h.device), h)
            return h
        graph = self.prepare_graph(graph, h.device)
        for index in range(self.num_layers):
            h = self.layer(index, drop_edges(graph, self.edge_dropout) if drop else graph, h)
        return h

    @torch.no_grad()
    def inference(self, graph, h: torch.Tensor, batch_size: int = 8192, device=None,
                  progress: bool = False) -> torch.Tensor:
        """Layer-wise full-neighbour inference: every layer for all nodes, in node batches.

        Exact (each node sees all its neighbours) with memory ``O(N * hidden)`` instead of the
        neighbourhood explosion of a multi-layer forward.

        Args:
            graph (DGLGraph): the full graph (on the CPU for the ``"torch"`` backend: blocks are
                sampled there and moved to ``device`` as index tensors). A
                :class:`~ttgnn.layers.SparseGraph` is taken whole, one layer at a time.
            h (Tensor): ``(N, in_dim)`` input vectors.
            batch_size (int, optional): destination nodes per step. (default: ``8192``)
            device (torch.device, optional): where to compute. (default: ``h``'s device)
            progress (bool, optional): show a tqdm bar. (default: ``False``)

        Shapes:
            - **output:** ``(N, num_classes)``.
        """
        from tqdm.auto import tqdm

        device = device or h.device
        if isinstance(graph, SparseGraph):
            graph = self.prepare_graph(graph, device)
            h = h.to(device)
            for index in range(self.num_layers):
                h = self.layer(index, graph, h)
            return h
        sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
        nodes = torch.arange(graph.num_nodes(), dtype=graph.idtype)
        for index in range(self.num_layers):
            width = self.num_classes if index == self.num_layers - 1 else self.hidden
            out = torch.empty(graph.num_nodes(), width, device=device, dtype=h.dtype)  # a float64 model's too
            loader = dgl.dataloading.DataLoader(graph, nodes, sampler, batch_size=batch_size,
                                                shuffle=False, drop_last=False, num_workers=0)
            batches = tqdm(loader_batches(loader), total=len(loader), disable=not progress, leave=False,
                           desc=f"inference layer {index + 1}")
            for input_nodes, output_nodes, blocks in batches:
                if self.backend == "torch":
                    block = self.prepare_graph(SparseGraph.from_dgl(blocks[0]), device)
                else:
                    block = blocks[0].to(device)
                out[output_nodes.long()] = self.layer(index, block, h[input_nodes.long()].to(device))
            h = out
        return h


def drop_edges(graph, p: float):
    """``graph`` (a DGL graph or a :class:`~ttgnn.layers.SparseGraph`) without a random share
    ``p`` of its edges, each left out with probability ``p`` (torch's global generator, on the
    graph's device); the nodes stay the same."""
    num_edges = graph.num_edges if isinstance(graph, SparseGraph) else graph.num_edges()
    keep = torch.rand(num_edges, device=graph.device) >= p  # one draw per edge, by its DGL edge id
    if isinstance(graph, SparseGraph):
        if graph.edge_ids is not None:  # stored by destination: each edge takes the draw of its id, as DGL's
            keep = keep[graph.edge_ids.to(keep.device)]
        return graph.edge_subgraph(keep)
    return dgl.edge_subgraph(graph, keep.nonzero().squeeze(1).to(graph.idtype), relabel_nodes=False,
                             store_ids=False)


class GraphSAGE(GNN):
    r"""GraphSAGE with the mean aggregator (``dgl.nn.SAGEConv`` or
    :class:`~ttgnn.layers.TensorSAGEConv`); see :class:`GNN` for the arguments."""

    def make_conv(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        if self.backend == "torch":
            return TensorSAGEConv(in_dim, out_dim)
        return SAGEConv(in_dim, out_dim, aggregator_type="mean")


class GAT(GNN):
    r"""Multi-head GAT (``dgl.nn.GATConv`` or :class:`~ttgnn.layers.TensorGATConv`): hidden layers concatenate ``heads`` heads of
    ``hidden / heads`` channels, the last layer averages ``heads`` heads of ``num_classes``.

    Args:
        heads (int, optional): attention heads. (default: ``4``)
        attn_dropout (float, optional): dropout on attention weights. (default: ``0.0``)
        Others: see :class:`GNN`; ``hidden`` must be divisible by ``heads``.
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int = 3, *, heads: int = 4,
                 attn_dropout: float = 0.0, **kwargs) -> None:
        check_gat_width(hidden, heads)
        self.heads = heads
        self.attn_dropout = attn_dropout
        super().__init__(in_dim, hidden, num_classes, num_layers, **kwargs)

    def make_conv(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        per_head = out_dim if last else out_dim // self.heads
        if self.backend == "torch":
            return TensorGATConv(in_dim, per_head, self.heads, attn_drop=self.attn_dropout)
        return GATConv(in_dim, per_head, self.heads, attn_drop=self.attn_dropout, allow_zero_in_degree=True)

    def conv_out(self, out: torch.Tensor, last: bool) -> torch.Tensor:
        return out.mean(1) if last else out.flatten(1)


class NodeClassifier(nn.Module):
    r"""An input module (and optionally a :class:`LabelInput`) followed by a GNN.

    Args:
        node_input (NodeInput): gives the input vectors.
        gnn (GNN): the graph network.
        label_input (LabelInput, optional): adds the vectors of known labels to the inputs; the
            model then needs ``input_labels``. (default: ``None``)

    ``forward(graph_or_blocks, input_nodes=None, input_labels=None)``: with a full graph, all
    nodes' inputs are used; with blocks, ``input_nodes`` are the source nodes of the first block.
    ``input_labels`` is a ``(N,)`` tensor of label ids for every node of the graph, ``C`` (the
    number of classes) where the label is not to be seen, or a ``(N, C)`` floating-point tensor of
    class probabilities (label reuse); it is indexed by ``input_nodes``.
    """

    def __init__(self, node_input: NodeInput, gnn: GNN, label_input: Optional[LabelInput] = None) -> None:
        super().__init__()
        self.node_input = node_input
        self.gnn = gnn
        self.label_input = label_input

    def _inputs(self, input_nodes: Optional[torch.Tensor], input_labels: Optional[torch.Tensor]) -> torch.Tensor:
        h = self.node_input(input_nodes)
        if self.label_input is None:
            if input_labels is not None:
                raise ValueError("input_labels given, but this model has no label input")
            return h
        if input_labels is None:
            raise ValueError("this model takes known labels as input: pass input_labels, a (N,) tensor of "
                             f"label ids with {self.label_input.unknown} for unknown")
        n, c = self.node_input.num_nodes, self.label_input.num_classes
        expected = (n, c) if input_labels.is_floating_point() else (n,)
        if tuple(input_labels.shape) != expected:
            raise ValueError(f"input_labels must have shape ({n},) (label ids) or ({n}, {c}) (probabilities), "
                             f"got {tuple(input_labels.shape)} ({input_labels.dtype})")
        if input_nodes is not None:
            input_labels = input_labels[input_nodes.to(input_labels.device)]
        return h + self.label_input(input_labels)

    def forward(self, graph, input_nodes: Optional[torch.Tensor] = None,
                input_labels: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.gnn(graph, self._inputs(input_nodes, input_labels))

    @torch.no_grad()
    def inference(self, graph, batch_size: int = 8192, progress: bool = False,
                  input_labels: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits of all nodes by layer-wise full-neighbour inference, ``(N, num_classes)``."""
        return self.gnn.inference(graph, self._inputs(None, input_labels), batch_size=batch_size,
                                  progress=progress)

    def parameter_groups(self) -> tuple[list, list]:
        """``(embedding parameters, GNN parameters)`` for separate optimiser settings; the label
        input (a per-class table) belongs to the GNN's group."""
        gnn = list(self.gnn.parameters())
        if self.label_input is not None:
            gnn += list(self.label_input.parameters())
        return list(self.node_input.parameters()), gnn


def build_model(model: str, node_input: NodeInput, num_classes: int, *, hidden: int = 256, num_layers: int = 3,
                dropout: float = 0.5, input_dropout: float = 0.0, norm: str = "batch", residual: bool = False,
                heads: int = 4, attn_dropout: float = 0.0, edge_dropout: float = 0.0, label_input: bool = False,
                gnn_backend: str = "dgl", label_reuse_iters: int = 0,
                label_spread_steps: int = 0) -> NodeClassifier:
    """A :class:`NodeClassifier` with a ``"sage"`` or ``"gat"`` network on ``node_input`` (plus a
    :class:`LabelInput` of ``num_classes`` when ``label_input``, with ``label_reuse_iters`` rounds of
    label reuse and ``label_spread_steps`` steps of label spreading), on the ``gnn_backend``
    ``"dgl"`` or ``"torch"`` (see :func:`resolve_gnn_backend`
    for ``"auto"``)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    common = dict(num_layers=num_layers, dropout=dropout, input_dropout=input_dropout, norm=norm, residual=residual,
                  edge_dropout=edge_dropout, backend=gnn_backend)
    if model == "sage":
        gnn = GraphSAGE(node_input.dim, hidden, num_classes, **common)
    else:
        gnn = GAT(node_input.dim, hidden, num_classes, heads=heads, attn_dropout=attn_dropout, **common)
    labels = LabelInput(num_classes, node_input.dim, label_reuse_iters, label_spread_steps) if label_input else None
    return NodeClassifier(node_input, gnn, labels)
