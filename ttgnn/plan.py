"""Capacity planning: what a training configuration costs before it runs (``ttgnn plan``).

:func:`plan` estimates, per data-parallel rank, the memory of every part of a mini-batch (or
full-graph) run for a TT table and for the full table side by side, the bytes all-reduced per
step, the lookup FLOPs per step, and whether each fits a given device memory. The estimates are
upper bounds of the sampled neighbourhood (fan-outs multiply without deduplication, capped at
``N``), so they hold for any graph with that degree; docs/scale.md compares them with measured
runs.

Terms (bytes, float32 values, int64 ids as DGL holds them):

* ``table``: the node table (TT cores, or ``N x D``); ``gradients``: one copy of it (the full
  table's gradient is dense, as ``nn.Embedding`` makes it and DDP all-reduces it);
  ``optimizer``: Adam's two moments (``adagrad`` one, ``sgd`` none) of table and GNN;
  ``optimizer step``: the step's temporaries (:data:`STEP_SCRATCH`);
* ``gnn``: the GNN's weights, gradients and optimiser state;
* ``graph``: the symmetric graph (the ``int32`` CSR every rank loads plus DGL's ``int64``
  ``csc`` copy with self-loops that sampling reads);
* ``blocks``: the sampled blocks (ids of nodes and edges per layer);
* ``activations``: input rows, every layer's outputs and what backward keeps (GAT: attention
  per edge and head), plus the TT kernel's scratch (about its output);
* ``evaluation``: what evaluating needs beyond the training step's ``blocks`` and
  ``activations`` (freed before it runs), 0 when it needs less. Exact layer-wise inference (the
  default below :data:`~ttgnn.config.SAMPLED_EVAL_MIN_NODES` nodes) holds two ``(N, width)``
  layers at once; sampled evaluation (``eval_fanouts``, the default in mini-batch mode above that
  size) one batch of ``eval_batch_size`` nodes, forward only, plus 16 bytes per split node (not
  counted). Correct and Smooth and label reuse (every node's class probabilities) are not counted;
* ``runtime``: the interpreter, torch and DGL (a constant measured here, see
  :data:`RUNTIME_BYTES`).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

__all__ = ["OPTIMIZERS", "STEP_SCRATCH", "RUNTIME_BYTES", "Plan", "plan", "format_plan", "as_dict"]

#: Optimiser state per parameter, in parameter copies.
OPTIMIZERS = {"adam": 2, "adamw": 2, "adagrad": 1, "sgd": 0, "momentum": 1}
#: Temporaries of one optimiser step, in copies of the largest parameter (the table): PyTorch's
#: Adam on the CPU forms ``exp_avg_sq.sqrt() / bias_correction`` (two table-sized tensors at
#: once), Adagrad ``state_sum.sqrt()``. Measured: a full-table step at products' size peaked
#: 2.3 GiB above the other terms (docs/scale.md).
STEP_SCRATCH = {"adam": 2, "adamw": 2, "adagrad": 1, "sgd": 0, "momentum": 0}
#: Resident memory of a process that has imported torch, DGL and ttgnn (0.45 GiB measured on
#: the CPU build; a CUDA context adds about as much on the host, not on the device).
RUNTIME_BYTES = int(0.45 * 2**30)

_FLOAT = 4
_ID = 8


@dataclass
class Plan:
    """The estimate of one configuration for one embedding kind (``"tt"`` or ``"full"``).

    Attributes:
        embedding (str): ``"tt"`` or ``"full"``.
        memory (dict): bytes per rank by term (see the module), and ``"total"``.
        allreduce_bytes (int): gradient bytes each step's all-reduce carries (0 on one rank).
        lookup_flops (int): floating-point operations of the table lookup per step (forward
            and backward).
        sampled_nodes (list of int): nodes per layer input, outermost first (upper bounds).
        fits (bool, optional): whether ``memory["total"]`` fits the given device memory.
        details (dict): table and GNN parameters, the TT shape, and the evaluation counted:
            ``"evaluation"`` (``"exact"``, ``"sampled"`` or ``"full graph"``), its
            ``"evaluation_peak"`` in bytes and its ``"eval_fanouts"``.
    """

    embedding: str
    memory: dict
    allreduce_bytes: int
    lookup_flops: int
    sampled_nodes: list
    fits: Optional[bool] = None
    details: dict = field(default_factory=dict)


def _sampled(num_nodes: int, batch_size: int, fanouts: Sequence[int]) -> tuple[list, list]:
    """Nodes at every layer's input (outermost first) and edges of every block, upper bounds."""
    nodes = [min(batch_size, num_nodes)]
    edges = []
    for fanout in reversed(list(fanouts)):
        dst = nodes[0]
        edges.insert(0, dst * (fanout + 1))  # sampled neighbours plus the self-loop
        nodes.insert(0, min(num_nodes, dst * (fanout + 1)))
    return nodes, edges


def _block_bytes(nodes: list, edges: list) -> int:
    """Bytes of sampled blocks: three ids per edge (source, destination, edge id), two per node."""
    return sum(edges) * 3 * _ID + sum(nodes) * 2 * _ID


def _evaluation_bytes(num_nodes: int, entries: int, widths: list, model: str, heads: int, mode: str,
                      eval_fanouts: Optional[list], eval_batch_size: int, tt: bool) -> tuple[int, str]:
    """Peak bytes of one evaluation (no gradients kept) and its kind: ``"sampled"``, ``"exact"``
    (layer-wise over node batches) or ``"full graph"`` (one layer over all nodes at a time)."""
    num_layers = len(widths) - 1
    if eval_fanouts is not None:
        nodes, edges = _sampled(num_nodes, eval_batch_size, eval_fanouts)
        peak = max(nodes[i] * widths[i] + nodes[i + 1] * widths[i + 1] for i in range(num_layers)) * _FLOAT
        if model == "gat":
            peak += max(edges) * heads * 3 * _FLOAT
        lookup = nodes[0] * widths[0] * _FLOAT * (2 if tt else 1)  # TT: rows plus the kernel's scratch
        return _block_bytes(nodes, edges) + max(peak, lookup), "sampled"
    # Every node's input rows, then each layer's input and output for all nodes at once: in full-graph
    # mode as the layers compute them (GAT's last layer before the heads' mean), while layer-wise
    # inference keeps every node's classes after the mean.
    if mode != "full" and model == "gat":
        widths = widths[:-1] + [widths[-1] // heads]
    peak = max(num_nodes * (widths[i] + widths[i + 1]) for i in range(num_layers)) * _FLOAT
    lookup = num_nodes * widths[0] * _FLOAT * (2 if tt else 1)
    if mode == "full":
        per_layer = (entries + num_nodes) * (heads * 3 * _FLOAT if model == "gat" else 0)
        return max(peak + per_layer, lookup), "full graph"
    # One batch of destination nodes with all their neighbours: its block and gathered inputs.
    dst = min(num_nodes, eval_batch_size)
    batch_edges = min(entries + num_nodes, int(dst * (entries / num_nodes + 1)))
    batch_src = min(num_nodes, batch_edges)
    batch = batch_edges * 3 * _ID + max(batch_src * w for w in widths[:-1]) * _FLOAT
    if model == "gat":
        batch += batch_edges * heads * 3 * _FLOAT
    return max(peak + batch, lookup), "exact"


def _tt_lookup_flops(shape, rows: int) -> int:
    """FLOPs (forward + backward) of ``rows`` TT rows contracted left to right, no prefix shared
    (an upper bound: the fused kernel computes a shared prefix once)."""
    cols, ranks = list(shape.col_shape), list(shape.ranks)
    flops = 0
    width = 1  # prod(col_shape[:k])
    for k in range(len(cols)):
        flops += 2 * width * ranks[k] * cols[k] * ranks[k + 1]
        width *= cols[k]
    # Backward: the gradient of both factors of every product, twice the forward's work.
    return 3 * flops * rows


# The graph :func:`plan` assumes when not told: ogbn-papers100M's 172 classes, a sparse graph's mean degree.
DEFAULT_CLASSES = 172
DEFAULT_AVG_DEGREE = 10.0


def plan(num_nodes: int, dim: int = 128, rank: int = 16, *, model: str = "sage", num_layers: int = 3,
         hidden: int = 256, heads: int = 4, num_classes: int = DEFAULT_CLASSES,
         fanouts: Optional[Sequence[int]] = None, batch_size: int = 1024, optimizer: str = "adam",
         world_size: int = 1, avg_degree: Optional[float] = None,
         mode: str = "minibatch", num_cores: Optional[int] = None, row_shape=None, col_shape=None,
         device_memory: Optional[float] = None, eval_fanouts: Optional[Sequence[int]] = None,
         eval_batch_size: int = 8192) -> dict:
    """Estimate the per-rank memory, all-reduce bytes and lookup FLOPs of a run, TT and full.

    Args:
        num_nodes (int): ``N``. dim (int): ``D``. rank (int): TT rank. (defaults ``128``, ``16``)
        model (str): ``"sage"`` or ``"gat"``. num_layers, hidden, heads, num_classes (int): the GNN.
        fanouts (sequence of int, optional): neighbours sampled per layer (default ``10`` each).
        batch_size (int): seed nodes per step and rank. optimizer (str): a key of :data:`OPTIMIZERS`.
        world_size (int): data-parallel ranks (GPUs or machines). avg_degree (float, optional): mean
            degree of the symmetric graph (default: :data:`DEFAULT_AVG_DEGREE`, at most
            ``num_nodes - 1``). mode (str): ``"minibatch"`` or ``"full"`` (every node every step).
        num_cores, row_shape, col_shape: TT shape overrides (:meth:`ttgnn.shapes.TTShape.build`).
        device_memory (float, optional): bytes available per rank; sets each plan's ``fits``.
        eval_fanouts (sequence of int, optional): sampled evaluation's fan-outs, as ``ttgnn train
            --eval-fanouts`` (default: as training chooses, :func:`ttgnn.config.eval_fanouts_for`).
        eval_batch_size (int): nodes per evaluation batch. (default: ``8192``)

    Returns:
        dict: ``{"tt": Plan, "full": Plan}``.

    Raises:
        ValueError: a value out of range (named in the message).
    """
    from .config import check_eval_fanouts, check_gat_width, check_int, eval_fanouts_for
    from .shapes import TTShape

    for name, value in (("num_nodes", num_nodes), ("dim", dim), ("rank", rank), ("num_layers", num_layers),
                        ("hidden", hidden), ("heads", heads), ("num_classes", num_classes),
                        ("batch_size", batch_size), ("world_size", world_size),
                        ("eval_batch_size", eval_batch_size)):
        check_int(name, value, 1)
    if model not in ("sage", "gat"):
        raise ValueError(f"model must be 'sage' or 'gat', got {model!r}")
    if model == "gat":  # ttgnn train refuses it
        check_gat_width(hidden, heads)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    if mode not in ("minibatch", "full"):
        raise ValueError(f"mode must be 'minibatch' or 'full', got {mode!r}")
    if device_memory is not None and not (isinstance(device_memory, numbers.Real) and not isinstance(device_memory, bool)
                                          and math.isfinite(device_memory) and device_memory > 0):
        # NaN or -1 made every plan "does not fit" without a word
        raise ValueError(f"device_memory must be a finite number of bytes > 0, got {device_memory!r}")
    if avg_degree is None:  # the default, capped for tiny graphs (a node has at most num_nodes - 1 neighbours)
        avg_degree = min(DEFAULT_AVG_DEGREE, num_nodes - 1)
    if not (isinstance(avg_degree, numbers.Real) and math.isfinite(avg_degree) and avg_degree >= 0):
        raise ValueError(f"avg_degree must be a finite number >= 0, got {avg_degree!r}")
    if avg_degree > num_nodes - 1:  # a graph without self-loops or duplicate edges
        raise ValueError(f"avg_degree must be at most {num_nodes - 1:,} (num_nodes - 1: each node has at most "
                         f"every other as a neighbour), got {avg_degree:g}")
    fanouts = list(fanouts) if fanouts is not None else [10] * num_layers
    if len(fanouts) != num_layers:
        raise ValueError(f"need {num_layers} fan-outs >= 1 (one per layer), got {fanouts}")
    for fanout in fanouts:  # a float one gave fractional sampled-node counts
        check_int("every fan-out", fanout, 1)
    if eval_fanouts is not None:
        check_eval_fanouts(list(eval_fanouts), mode, num_layers)
    eval_fanouts = eval_fanouts_for(eval_fanouts, mode, fanouts, num_nodes)

    entries = int(num_nodes * avg_degree)
    if mode == "full":
        nodes = [num_nodes] * (num_layers + 1)
        edges = [entries + num_nodes] * num_layers
    else:
        nodes, edges = _sampled(num_nodes, batch_size, fanouts)
    # Each layer's output width. GAT's hidden layers concatenate their heads into ``hidden`` (hidden /
    # heads each, as ttgnn.models.GAT); its last layer has ``heads`` outputs of num_classes, then averages.
    widths = [dim] + [hidden] * (num_layers - 1) + [num_classes * (heads if model == "gat" else 1)]
    layer_params = 0
    for i in range(num_layers):
        # SAGE: self and neighbour weights and a bias; GAT: one weight, two attention vectors and a
        # bias of the output width (no residual).
        layer_params += (2 * widths[i] * widths[i + 1] + widths[i + 1] if model == "sage"
                         else widths[i] * widths[i + 1] + 3 * widths[i + 1])
    state = OPTIMIZERS[optimizer]
    gnn_bytes = layer_params * _FLOAT * (2 + state)
    graph_bytes = (num_nodes + 1) * 8 + entries * 4 + (num_nodes + 1) * _ID + (entries + num_nodes) * _ID
    block_bytes = _block_bytes(nodes, edges)
    activations = 0
    for i in range(num_layers):
        out = nodes[i + 1] * widths[i + 1]
        # Kept for backward: the layer input's aggregate, the output before and after the
        # non-linearity, dropout masks and norms (about four outputs' worth).
        activations += 4 * out * _FLOAT
        if model == "gat":
            activations += 3 * edges[i] * heads * _FLOAT
    activations += 3 * nodes[0] * dim * _FLOAT  # looked-up rows, their gradient, dropout

    result = {}
    shape = TTShape.build(num_nodes, dim, rank, num_cores, row_shape, col_shape)
    rows = nodes[0]
    for kind in ("tt", "full"):
        if kind == "tt":
            params = shape.num_parameters
            flops = _tt_lookup_flops(shape, rows)
            # The fused kernel keeps no per-row partial products: a scratch of about the output.
            extra = rows * dim * _FLOAT
        else:
            params = num_nodes * dim
            flops, extra = 0, 0
        memory = {"table": params * _FLOAT, "gradients": params * _FLOAT, "optimizer": params * _FLOAT * state,
                  "optimizer step": params * _FLOAT * STEP_SCRATCH[optimizer],
                  "gnn": gnn_bytes, "graph": graph_bytes, "blocks": block_bytes,
                  "activations": activations + extra}
        evaluation, evaluation_kind = _evaluation_bytes(num_nodes, entries, widths, model, heads, mode,
                                                        eval_fanouts, eval_batch_size, kind == "tt")
        memory["evaluation"] = max(0, evaluation - memory["blocks"] - memory["activations"])
        memory["runtime"] = RUNTIME_BYTES
        memory["total"] = sum(memory.values())
        allreduce = (params + layer_params) * _FLOAT if world_size > 1 else 0
        fits = None if device_memory is None else memory["total"] <= device_memory
        result[kind] = Plan(kind, memory, allreduce, int(flops), list(nodes), fits,
                            {"parameters": params, "gnn_parameters": layer_params,
                             "row_shape": list(shape.row_shape), "col_shape": list(shape.col_shape),
                             "ranks": list(shape.ranks), "evaluation": evaluation_kind,
                             "evaluation_peak": evaluation, "eval_fanouts": eval_fanouts})
    return result


def _gib(num: float) -> str:
    return f"{num / 2**30:,.2f} GiB" if num >= 2**27 else f"{num / 2**20:,.1f} MiB"


def format_plan(plans: dict, world_size: int = 1) -> str:
    """A Markdown table of :func:`plan`'s result: terms as rows, TT and full as columns."""
    kinds = list(plans)
    lines = ["| per rank | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for term in plans[kinds[0]].memory:
        lines.append(f"| {term} | " + " | ".join(_gib(plans[k].memory[term]) for k in kinds) + " |")
    lines.append("| all-reduced per step | " + " | ".join(
        _gib(plans[k].allreduce_bytes) if world_size > 1 else "0 (one rank)" for k in kinds) + " |")
    lines.append("| lookup GFLOP per step | " + " | ".join(f"{plans[k].lookup_flops / 1e9:,.2f}" for k in kinds) + " |")
    if plans[kinds[0]].fits is not None:
        lines.append("| fits | " + " | ".join("yes" if plans[k].fits else "no" for k in kinds) + " |")
    return "\n".join(lines)


def as_dict(plans: dict) -> dict:
    """JSON-ready form of :func:`plan`'s result."""
    return {kind: asdict(p) for kind, p in plans.items()}

