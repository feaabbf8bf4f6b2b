"""Training of featureless node classifiers: full-graph or mini-batch (neighbour sampling).

:func:`train` runs one :class:`~ttgnn.config.TrainConfig` end to end, in named steps:

1. :func:`setup_run`: load the dataset, build the node order, the model and the optimiser
   (separate settings for the embedding and the GNN) into a :class:`RunState`;
2. :func:`restore_run`: with ``resume``, continue from the run folder's checkpoint;
3. :func:`train_epoch`: one epoch, full-graph or in sampled mini-batches;
4. :func:`evaluate_and_checkpoint`: rank 0 evaluates, tracks the best validation epoch (its
   weights in ``best_model.pt``) and writes ``checkpoint.pt`` and ``metrics.json`` atomically;
5. :func:`finish_run`: Correct and Smooth on the best model (:mod:`ttgnn.smoothing`), the summary.

Exact resume: every epoch starts by seeding every random source from ``(seed, process rank,
epoch)`` (:mod:`ttgnn.seeding`), so an epoch's draws do not depend on what ran before it; with the
model, optimiser and metrics in the checkpoint, a run resumed after epoch ``k`` repeats an
uninterrupted run with the same seed.

Data parallel (``torchrun``, :mod:`ttgnn.distributed`): with ``world_size > 1`` the whole model is
wrapped in DDP, each rank trains on a disjoint, equally sized shard of the training nodes, the
epoch loss is averaged over ranks, and rank 0 alone evaluates, logs and writes, between two
barriers. Rank 0 reads the checkpoint on resume and broadcasts it; an elastic restart
(``TORCHELASTIC_RESTART_COUNT > 0``) resumes by itself.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import os
import re
import resource
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import torch

from . import distributed as tdist
from .averaging import WeightAverage
from .checkpoint import (BEST_MODEL_NAME, CHECKPOINT_NAME, LOCK_NAME, METRICS_NAME, STAGED_BEST_NAME, RunFolder,
                         check_resumable, commit_staged_best, differing_settings, load_checkpoint, save_best_model,
                         save_checkpoint, settle_staged_best)
from .choices import LR_SCHEDULES, ORDERS, check_choice
from .config import (AUTO_MIN_COMPRESSION, AUTO_RANK, AUTO_SPECTRAL_MAX_NODES,
                     LABEL_INPUT_MIN_TRAIN_FRACTION, SAMPLED_EVAL_MIN_NODES, TrainConfig, auto_rank,
                     check_label_inputs_with_sampled_eval, eval_fanouts_for, few_labels, from_full_for, init_for,
                     label_input_for, label_reuse_for, label_spread_for, loss_for, model_for, option_text,
                     preferred_rank)
from .data import NodeDataset, dataset_folder, default_cache_dir, load_dataset
from .batches import device_batches
from .evaluation import (Accuracy, all_logits, correct_and_smooth_metrics, evaluate, evaluate_sampled,
                         known_labels, model_label_inputs)
from .fileio import atomic_write_json
from .losses import check_probabilities, distill_loss, node_loss
from .seeding import derive_seed, generator, seed_everything

__all__ = ["TrainConfig", "RunState", "TrainingInterrupted", "TrainingDiverged", "train", "setup_run", "restore_run",
           "train_epoch", "evaluate_and_checkpoint", "finish_run", "build_classifier", "settle_by_graph", "split_known",
           "known_labels", "evaluate", "correct_and_smooth_metrics", "load_checkpoint", "lr_factor", "set_learning_rates",
           "ORDERS", "CHECKPOINT_NAME",
           "BEST_MODEL_NAME", "METRICS_NAME", "FULL_TABLE_DIR", "settle_from_full", "full_table_config", "finetune_config"]

log = logging.getLogger(__name__)

#: With ``from_full``, the full table's run goes into this subfolder of the run folder.
FULL_TABLE_DIR = "full-table"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`train`: where the last complete checkpoint is (``None`` when none was written).

    Attributes:
        checkpoint (Path, optional): the run folder's ``checkpoint.pt`` (or, stopped between the stages of
            ``from_full``, the full table's).
        epoch (int, optional): the last epoch it holds (``0`` when none; ``None`` when not known: a run
            stopped while it was setting up a resume, before reading the checkpoint).
    """

    def __init__(self, checkpoint: Optional[Path], epoch: Optional[int], reason: Optional[str] = None) -> None:
        super().__init__(f"interrupted after epoch {epoch}" + (f" ({reason})" if reason else ""))
        self.checkpoint = checkpoint
        self.epoch = epoch
        self.reason = reason  # None: Ctrl-C (or SIGTERM); else what stopped the run, e.g. a lost process


class TrainingDiverged(ValueError):
    """The training loss of an epoch was not finite (NaN or inf): :func:`train` stops there.

    The epoch's weights are lost to it, so that epoch is not saved; the run folder keeps the
    checkpoint and metrics of the epoch before and the best model. A resume would take the same
    step again: a new run (``overwrite``) with lower learning rates is the way on.

    Attributes:
        epoch (int): the epoch whose loss was not finite.
        loss (float): that loss.
        checkpoint (Path, optional): the run folder's ``checkpoint.pt`` (``None`` when none was written).
    """

    def __init__(self, epoch: int, loss: float, run: "RunState") -> None:
        config, metrics = run.config, run.metrics
        if not run.is_main:  # rank 0 alone saves, and knows what
            kept = "rank 0's message names what the run folder keeps"
        elif run.out_dir is None:
            kept = "nothing was saved (no output folder)"
        elif run.saved_epoch:
            kept = (f"{run.out_dir} keeps epoch {run.saved_epoch}'s checkpoint and the best model (epoch "
                    f"{metrics['best_epoch']}, validation accuracy {metrics['best_valid_acc']:.4f})")
        else:
            kept = f"no epoch finished, so {run.out_dir} holds no checkpoint"
        super().__init__(f"training diverged: the loss is {loss} in epoch {epoch}; start again with lower learning "
                         f"rates or a smaller init_scale (this run: lr {config.lr:g}, emb_lr {config.emb_lr:g}, "
                         f"init_scale {config.init_scale:g}); {kept}")
        self.epoch = epoch
        self.loss = loss
        self.checkpoint = run.path(CHECKPOINT_NAME) if run.saved_epoch else None


@dataclass
class RunState:
    """Everything one training run carries from step to step.

    Attributes:
        config (TrainConfig): the settings. dataset (NodeDataset): the graph and labels.
        model (NodeClassifier): the model; ``net`` is the same model or its DDP wrapper.
        graph: the DGL graph with self-loops (on ``device`` in full-graph mode).
        optimizer (torch.optim.Optimizer): Adam with an embedding and a GNN parameter group.
        accuracy (Accuracy): the dataset's accuracy measure.
        device (torch.device): where the model trains.
        process_rank (int), world_size (int): this process's place in a data-parallel job.
        metrics (dict): per-epoch records and the best epoch so far.
        out_dir (Path, optional): the run folder.
        best_state (dict, optional): state dict of the best-on-validation epoch (rank 0).
        teacher_probs (Tensor, optional): ``(N, C)`` class probabilities of the full table's best
            model, with ``from_full``: full-graph training steps add ``finetune_distill`` times the
            KL divergence of the model's from them over every node.
        average (WeightAverage, optional): the weights' moving average, with ``weight_average``
            (rank 0); it is what is evaluated, selected and saved as the best model.
        start_epoch (int): the first epoch to train.
        saved_epoch (int): the last epoch whose checkpoint is complete (``0``: none).
    """

    config: TrainConfig
    dataset: NodeDataset
    model: Any
    net: Any
    graph: Any
    optimizer: torch.optim.Optimizer
    accuracy: Accuracy
    device: torch.device
    process_rank: int
    world_size: int
    metrics: dict
    out_dir: Optional[Path] = None
    best_state: Optional[dict] = None
    teacher_probs: Optional[torch.Tensor] = None
    average: Optional[WeightAverage] = None
    start_epoch: int = 1
    saved_epoch: int = 0

    @property
    def is_main(self) -> bool:
        return self.process_rank == 0

    def path(self, name: str) -> Optional[Path]:
        """``out_dir / name``, ``None`` without a run folder."""
        return self.out_dir / name if self.out_dir is not None else None


# ---------------------------------------------------------------------- building blocks
def _build_order(config: TrainConfig, dataset: NodeDataset, row_shape,
                 progress: bool = False) -> Optional[torch.Tensor]:
    if config.order == "identity":
        return None
    from .partition import hierarchical_order

    order = hierarchical_order(dataset.csr(), list(row_shape), method=config.order, seed=config.seed,
                               cache_dir=default_cache_dir(config.cache_dir), progress=progress)
    return torch.from_numpy(np.asarray(order.perm, dtype=np.int64))


def build_classifier(config: TrainConfig, dataset: NodeDataset, gnn_backend: Optional[str] = None,
                     progress: bool = False):
    """The :class:`~ttgnn.models.NodeClassifier` of ``config`` for ``dataset`` (TT node order computed here);
    ``gnn_backend`` (``"dgl"`` or ``"torch"``) overrides ``config.gnn_backend`` resolved for the CPU;
    ``progress`` shows a bar over the node order's partitioner calls when it is not cached (minutes on
    graphs of 10^7-10^8 nodes). A TT table with ``from_full`` is left at its gaussian cores under
    ``init="spectral"``: :func:`train` replaces it by the full table's TT-SVD before any step."""
    from .models import NodeInput, build_model, resolve_gnn_backend

    config = settle_by_graph(config, dataset)  # setup_run settles it first; library callers may not
    if gnn_backend is None:
        gnn_backend = resolve_gnn_backend(config.gnn_backend, "cpu", config.model, config.mode)

    kwargs = {}
    if config.embedding == "tt":
        shape = tt_shape(config, dataset.num_nodes)
        init = "gaussian" if config.init == "spectral" else config.init  # replaced below
        scale = config.init_scale * (shape.num_rows_padded ** 0.5 if init == "ortho" else 1.0)
        kwargs = dict(ranks=list(shape.ranks), row_shape=shape.row_shape, col_shape=shape.col_shape, init=init,
                      init_scale=scale, node_order=_build_order(config, dataset, shape.row_shape, progress),
                      generator=generator(config.seed, "tt-init"))
    elif config.embedding == "full":
        kwargs = dict(full_init_std=config.init_scale)
    node_input = NodeInput(config.embedding, dataset.num_nodes, config.dim, features=dataset.features, **kwargs)
    if config.init == "spectral" and config.embedding == "tt" and config.from_full:
        log.info("spectral init: left to the full table's stage (this TT table starts from its TT-SVD)")
    elif config.init == "spectral" and config.embedding != "features":
        _spectral_init(node_input, config, dataset)
    return build_model(config.model, node_input, dataset.num_classes, hidden=config.hidden,
                       num_layers=config.num_layers, dropout=config.dropout, input_dropout=config.input_dropout,
                       norm=config.norm, residual=config.residual, heads=config.heads,
                       attn_dropout=config.attn_dropout, edge_dropout=config.edge_dropout, gnn_backend=gnn_backend,
                       label_input=config.label_input, label_reuse_iters=config.label_reuse,
                       label_spread_steps=config.label_spread)


def settle_by_graph(config: TrainConfig, dataset: NodeDataset) -> TrainConfig:
    """``config`` with the settings the graph decides made explicit: label input
    (:func:`~ttgnn.config.label_input_for`; always on with label reuse, and for GAT's full-graph
    label reuse on a graph of few training nodes) and, for TT and full tables,
    the init (:func:`~ttgnn.config.init_for`), by the share of training nodes (the init also by the
    graph's size); sampled evaluation by the graph's size (:func:`~ttgnn.config.eval_fanouts_for`);
    the model by the mode (:func:`~ttgnn.config.model_for`); label reuse by the model, label input
    and mode (:func:`~ttgnn.config.label_reuse_for`); label spreading by label input and the mode
    (:func:`~ttgnn.config.label_spread_for`); the loss by the model, the mode and the share of
    training nodes (:func:`~ttgnn.config.loss_for`); the TT rank by the share of training nodes, the
    compression and ``from_full`` (:func:`~ttgnn.config.auto_rank`).

    Raises:
        ValueError: label reuse or label spreading on a graph that is evaluated on sampled
            neighbourhoods.
    """
    num_train = int(dataset.split["train"].numel())
    model = model_for(config.model, config.mode)
    label_input = label_input_for(config.label_input, dataset.num_nodes, num_train, config.label_reuse, model,
                                  config.mode, config.label_spread)
    init, vectors = config.init, config.spectral_vectors
    if config.embedding != "features":
        init, vectors = init_for(init, vectors, dataset.num_nodes, num_train, config.dim)
        if init == "spectral" and config.init == "auto" and config.spectral_vectors is None:
            vectors = _vectors_the_graph_has(dataset, vectors)
    eval_fanouts = eval_fanouts_for(config.eval_fanouts, config.mode, config.fanouts, dataset.num_nodes)
    check_label_inputs_with_sampled_eval(config.label_reuse, eval_fanouts, config.label_spread or 0)
    sparse_labels = few_labels(dataset.num_nodes, num_train)
    label_reuse = label_reuse_for(config.label_reuse, model, label_input, config.mode, sparse_labels)
    label_spread = label_spread_for(config.label_spread, label_input, config.mode)
    loss = loss_for(config.loss, model, config.mode, sparse_labels)
    rank = config.rank
    if rank is None and config.embedding == "tt" and config.compression is None and config.max_params is None:
        rank = auto_rank(dataset.num_nodes, config.dim, config.num_cores, config.row_shape, config.col_shape,
                         sparse_labels, largest=bool(config.from_full))
    # from_full is settled by train(), which runs the full table's stage; the steps alone never do
    return dataclasses.replace(config, model=model, label_input=label_input, init=init, spectral_vectors=vectors,
                               eval_fanouts=eval_fanouts, label_reuse=label_reuse, label_spread=label_spread,
                               loss=loss, rank=rank, from_full=bool(config.from_full))


def _vectors_the_graph_has(dataset: NodeDataset, vectors: int) -> int:
    """The automatic spectral init's eigenvector count ``vectors``, capped at what the graph has to give
    (a graph of a few nodes, or of many components: :func:`~ttgnn.spectral.eigenvector_limit`). The
    rule picks spectral only where fewer than a tenth of the nodes train (:func:`few_labels`): on 11
    nodes or more, in at most half as many components, so a graph with at least 5 to give."""
    from .spectral import eigenvector_limit

    limit = eigenvector_limit(*dataset.csr(), dataset.num_nodes)
    if limit < vectors:
        log.info("table init: %d eigenvectors, not %d: all that a graph of %s nodes has to give past its trivial "
                 "ones (one per connected component)", limit, vectors, f"{dataset.num_nodes:,}")
    return min(vectors, limit)


@contextlib.contextmanager
def _naming_the_table(num_nodes: int, dim: int):
    """A shape error says which table it is about: the run's settings (``row_shape``, ``num_cores``,
    ...) meet the graph's node count only here, which the settings never name."""
    try:
        yield
    except ValueError as err:
        raise ValueError(f"the TT table of this graph ({num_nodes:,} rows, one per node; dim {dim}): {err}") from None


def tt_shape(config: TrainConfig, num_nodes: int):
    """The TT shape of ``config``: from ``rank``, or the largest rank under ``compression`` /
    ``max_params``. A default rank (``None``) is decided by the graph: settle ``config`` first
    (:func:`settle_by_graph`, as :func:`build_classifier` does)."""
    from .shapes import TTShape, shape_for_budget

    if config.compression is None and config.max_params is None:
        if config.rank is None:
            raise ValueError("rank=None is decided by the graph: settle the config first (settle_by_graph)")
        with _naming_the_table(num_nodes, config.dim):
            return TTShape.build(num_nodes, config.dim, config.rank, config.num_cores, config.row_shape,
                                 config.col_shape)
    with _naming_the_table(num_nodes, config.dim):
        shape = shape_for_budget(num_nodes, config.dim, max_params=config.max_params, compression=config.compression,
                                 num_cores=config.num_cores, row_shape=config.row_shape, col_shape=config.col_shape)
    log.info("TT rank %d: the largest within the budget (%s parameters, %.1fx compression)", max(shape.ranks),
             f"{shape.num_parameters:,}", shape.compression_ratio)
    return shape


@torch.no_grad()
def _spectral_init(node_input, config: TrainConfig, dataset: NodeDataset) -> None:
    """Overwrite the input table with Laplacian eigenvectors (TT: their TT-SVD in TT-row order)."""
    from .spectral import check_table_fits, spectral_table

    # float32 table; a TT table adds its float64 copy and the TT-SVD's working copies (about 3 more).
    check_table_fits(dataset.num_nodes, config.dim, 4 if node_input.kind == "full" else 28)
    table = spectral_table(*dataset.csr(), dataset.num_nodes, config.dim, std=config.init_scale,
                           vectors=config.spectral_vectors, seed=config.seed,
                           cache_dir=default_cache_dir(config.cache_dir), names=("spectral_vectors", "dim"))
    error = _load_table(node_input, table)
    if node_input.kind != "full":
        log.info("spectral init: TT-SVD of the eigenvector table, relative error %.3f", error)


@torch.no_grad()
def _load_table(node_input, table: torch.Tensor) -> float:
    """Overwrite ``node_input``'s table with the ``(N, D)`` ``table``: a full table copies it, a TT
    table takes the cores of its TT-SVD in TT-row order. Returns the relative error (``0.0``: a copy)."""
    if node_input.kind == "full":
        weight = node_input.table.weight
        weight.copy_(table.to(dtype=weight.dtype, device=weight.device))
        return 0.0
    from .embedding import TTNodeEmbedding

    tt = node_input.table
    compressed = TTNodeEmbedding.from_pretrained(table.double(), ranks=list(tt.ranks), row_shape=tt.row_shape,
                                                 col_shape=tt.col_shape, node_order=tt.node_order)
    for core, new in zip(tt.cores, compressed.cores):
        core.copy_(new.to(dtype=core.dtype, device=core.device))
    return compressed.svd_relative_error


def split_known(train_nodes: torch.Tensor, rate: float, seed: int, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(known, target)``: a random ``rate`` of ``train_nodes`` whose labels are inputs this epoch,
    and the rest, on which the loss is taken (at least one node). Drawn from ``(seed, epoch)`` alone, so
    every rank of a data-parallel run, and a resumed run, draws the same split."""
    draw = generator(seed, "known-labels", epoch)
    mask = torch.rand(train_nodes.numel(), generator=draw) < rate
    if mask.numel() and mask.all():  # a few training nodes all drawn as known: no loss (NaN), so keep one
        mask[int(torch.randint(mask.numel(), (1,), generator=draw))] = False
    nodes = train_nodes.cpu()
    return nodes[mask], nodes[~mask]


def _peak_memory(device: torch.device) -> dict:
    """Peak resident memory of this process so far (MiB), plus the peak CUDA allocation on a GPU."""
    peak = {"peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if device.type == "cuda":
        peak["peak_gpu_memory_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return peak


def _new_metrics(config: TrainConfig, dataset: NodeDataset, model, world_size: int) -> dict:
    node_input = model.node_input
    metrics = {
        "dataset": dataset.name, "model": config.model, "embedding": config.embedding,
        "order": config.order if config.embedding == "tt" else None,
        "rank": max(node_input.table.ranks) if config.embedding == "tt" else None,
        "compression_ratio": node_input.compression_ratio,
        "embedding_parameters": node_input.num_parameters,
        "gnn_parameters": sum(p.numel() for p in model.parameter_groups()[1]),
        "label_input": config.label_input, "gnn_backend": model.gnn.backend, "eval_fanouts": config.eval_fanouts,
        "best_valid_acc": 0.0, "test_acc": 0.0, "best_epoch": 0, "epochs": [], "settings": config.settings(),
        "world_size": world_size, "dataset_fingerprint": dataset.fingerprint(),
    }
    if config.embedding == "tt":
        from .ops import lookup_backend

        table = node_input.table
        metrics.update(row_shape=list(table.row_shape), col_shape=list(table.col_shape), ranks=list(table.ranks),
                       lookup_backend=lookup_backend(table.cores[0].device))  # the fast path, or the reference
    return metrics


def _log_settled(config: TrainConfig, settled: TrainConfig, dataset: NodeDataset) -> None:
    """Log each setting the graph decided (``settled``) where the run left it to the default (``config``)."""
    num_train = int(dataset.split["train"].numel())
    sparse = few_labels(dataset.num_nodes, num_train)
    share = f"training nodes are {100.0 * num_train / dataset.num_nodes:.1f}% of the graph"
    threshold = 100.0 * LABEL_INPUT_MIN_TRAIN_FRACTION
    if config.label_input is None and config.label_reuse:
        log.info("label input on: label reuse (%d rounds) needs it", config.label_reuse)
    elif config.label_input is None and config.label_spread:
        log.info("label input on: label spreading (%d steps) needs it", config.label_spread)
    elif config.label_input is None and settled.label_input and sparse:
        log.info("label input on: %s, under %.0f%%, but %s's label reuse in full-graph training spreads the few "
                 "labels (--no-label-input to turn it off)", share, threshold, settled.model)
    elif config.label_input is None:
        log.info("label input %s: %s (on from %.0f%%; --label-input or --no-label-input to choose)",
                 "on" if settled.label_input else "off", share, threshold)
    if settled.init != config.init:
        log.info("table init %s%s: %s, %s nodes (spectral below %.0f%% on graphs of at most %s nodes; "
                 "--init to choose)", settled.init,
                 f" ({settled.spectral_vectors} eigenvectors)" if settled.spectral_vectors else "", share,
                 f"{dataset.num_nodes:,}", threshold, f"{AUTO_SPECTRAL_MAX_NODES:,}")
        if config.spectral_vectors is not None and settled.init != "spectral":
            log.warning("spectral_vectors=%d: not read, the table init is %s (give init='spectral' to use "
                        "eigenvectors); ignored", config.spectral_vectors, settled.init)
    if settled.eval_fanouts is not None and config.eval_fanouts is None:
        log.info("evaluation on sampled neighbourhoods (fan-outs %s) of the split nodes: %s nodes, more than %s "
                 "for exact inference (--eval-fanouts to choose)", settled.eval_fanouts,
                 f"{dataset.num_nodes:,}", f"{SAMPLED_EVAL_MIN_NODES:,}")
    if settled.model != config.model:
        log.info("model %s: the default for %s training (--model sage or gat to choose)", settled.model,
                 "full-graph" if config.mode == "full" else "mini-batch")
    if config.label_reuse is None and settled.label_reuse:
        log.info("label reuse: %d round(s) for %s with label input in full-graph mode (--label-reuse 0 to "
                 "turn it off)", settled.label_reuse, settled.model)
    if config.label_spread is None and settled.label_spread:
        log.info("label spreading: %d steps with label input in full-graph mode: the nodes without a known "
                 "label start from the known labels around them (--label-spread 0 to turn it off)",
                 settled.label_spread)
    if config.loss is None and settled.loss != "ce":
        log.info("loss %s: the default for %s in full-graph mode where %s, at least %.0f%% (--loss ce to choose "
                 "the plain cross-entropy)", settled.loss, settled.model, share, threshold)
    if config.rank is None and settled.rank is not None and settled.rank != AUTO_RANK:
        why = [f"{share}, under {threshold:.0f}%"] if sparse else []
        largest = f"the largest that compresses the table at least {AUTO_MIN_COMPRESSION:.0f}x"
        if settled.rank == 1:  # the rule's floor: no rank may reach the ratio (a row shape far above the nodes)
            ratio = tt_shape(settled, dataset.num_nodes).compression_ratio
            if ratio < AUTO_MIN_COMPRESSION:
                largest = (f"the smallest rank; no rank compresses the table {AUTO_MIN_COMPRESSION:.0f}x with this "
                           f"shape (rank 1: {ratio:.1f}x)")
        if settled.from_full:
            why = [f"{largest}, for a TT table compressed from a trained full table"]
        elif settled.rank != preferred_rank(sparse):
            why.append(largest)
        log.info("TT rank %d: %s (rank %d otherwise; --rank to choose)", settled.rank, "; ".join(why), AUTO_RANK)
    if settled.embedding == "tt" and settled.row_shape is not None:
        rows = math.prod(settled.row_shape)
        if rows > 2 * dataset.num_nodes and rows - dataset.num_nodes > 2**16:
            log.warning("row shape %s covers %s TT rows for %s nodes (%.0fx): the padding rows cost memory and time "
                        "(a spectral or --from-full start factors the whole padded table); leave --row-shape out to "
                        "have it factored from the node count", list(settled.row_shape), f"{rows:,}",
                        f"{dataset.num_nodes:,}", rows / dataset.num_nodes)


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


# ---------------------------------------------------------------------- the steps
def _named_for(config: TrainConfig, dataset: Optional[NodeDataset]) -> TrainConfig:
    """``config`` with ``dataset`` set to the name of the graph given to :func:`train`.

    The run's saved settings name its dataset, and :func:`ttgnn.inference.load_run` (``ttgnn
    predict``) loads the graph by that name: a run given ``dataset`` records that graph's name,
    not the setting's default (``"ogbn-arxiv"``). A folder path whose last part is the graph's
    name is kept, since it says where the graph is. Without ``dataset``, ``config`` unchanged.

    Raises:
        TypeError: ``dataset`` is not a :class:`~ttgnn.data.NodeDataset`.
    """
    if dataset is None:
        return config
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"dataset must be a NodeDataset (ttgnn.data.load_dataset loads one), got "
                        f"{type(dataset).__name__}")
    if Path(os.fspath(config.dataset)).name == dataset.name:
        return config
    log.warning("the dataset given is %r but config.dataset is %r: the run trains on %r and records that name",
                dataset.name, config.dataset, dataset.name)
    return dataclasses.replace(config, dataset=dataset.name)


def setup_run(config: TrainConfig, dataset: Optional[NodeDataset], process_rank: int, world_size: int,
              device: torch.device) -> RunState:
    """Step 1: dataset, model (the same initial weights on every rank), optimiser, empty metrics.

    A given ``dataset`` names the run (:func:`_named_for`). Checked here too, for steps run without
    :func:`train`: the settings (:meth:`TrainConfig.validate`), the dataset again
    (:meth:`NodeDataset.check`: one changed since it was built), and on rank 0 an ``output_dir``
    that holds a run, refused unless ``resume`` or ``overwrite`` is set (:func:`train` also locks
    the folder; the steps alone do not).

    Raises:
        TypeError: ``config`` is not a :class:`TrainConfig`, or ``dataset`` not a ``NodeDataset``.
        ValueError: a bad setting or dataset, or a folder holding a run.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    config = _named_for(config, dataset)
    config.validate()
    if process_rank == 0 and config.output_dir and not (config.resume or config.overwrite):
        RunFolder(config.output_dir).check_existing()
    if config.num_threads:
        available = _usable_cpus()
        if config.num_threads > available:
            log.warning("--num-threads %d is more than the %d CPU(s) this process may use: the threads "
                        "will share them and run slower than %d would", config.num_threads, available, available)
        torch.set_num_threads(config.num_threads)
    if dataset is None:
        dataset = load_dataset(config.dataset, config.root, config.cache_dir)
    else:
        dataset.check()  # a notebook may have changed it since it was built
    if config.embedding != "tt" and config.order != "identity":
        log.info("order %r applies to TT embeddings only; ignored for %r", config.order, config.embedding)
    if dataset.split["train"].numel() == 0:
        raise ValueError(f"{dataset.name} has no training nodes (its training split is empty)")
    if dataset.split["valid"].numel() == 0:  # its accuracy (NaN) would never improve: the best model, epoch 1's
        raise ValueError(f"{dataset.name} has no validation nodes (its validation split is empty): a run keeps "
                         "the epoch of the best validation accuracy, and Correct and Smooth tunes on it")
    for key, name in (("train", "training"), ("valid", "validation"), ("test", "test")):
        # every node of a split is trained on or scored: one without a label has nothing to compare with
        unlabeled = int((dataset.labels[dataset.split[key]] < 0).sum())
        if unlabeled:
            raise ValueError(f"{name} nodes of {dataset.name} include {unlabeled:,} unlabeled node(s) (label -1)")
    if process_rank == 0:
        log.info("%s", dataset)
    # Label input and the table init may be decided by the graph; then fixed for the run (and its resume check).
    settled = settle_by_graph(config, dataset)
    if process_rank == 0:
        _log_settled(config, settled, dataset)
    config = settled
    from .models import resolve_gnn_backend

    gnn_backend = resolve_gnn_backend(config.gnn_backend, device, config.model, config.mode)
    seed_everything(derive_seed(config.seed, "init"))
    model = build_classifier(config, dataset, gnn_backend, progress=config.progress and process_rank == 0).to(device)
    graph = dataset.dgl_graph(self_loops=True)  # mini-batch mode: sampled on the CPU
    if device.type != "cpu":
        dataset = dataclasses.replace(dataset, labels=dataset.labels.to(device))
    if config.mode == "full":  # the graph lives on the device, converted once (index tensors for "torch")
        graph = model.gnn.prepare_graph(graph, device)
        if gnn_backend == "dgl" and device.type != "cpu":
            graph = graph.to(device)
    emb_params, gnn_params = model.parameter_groups()
    groups = [dict(params=gnn_params, lr=config.lr, weight_decay=config.weight_decay)]
    if emb_params:
        groups.append(dict(params=emb_params, lr=config.emb_lr, weight_decay=config.emb_weight_decay))
    return RunState(config=config, dataset=dataset, model=model, net=model, graph=graph,
                    optimizer=torch.optim.Adam(groups), accuracy=Accuracy(dataset.evaluator_name), device=device,
                    process_rank=process_rank, world_size=world_size,
                    metrics=_new_metrics(config, dataset, model, world_size),
                    out_dir=Path(config.output_dir) if config.output_dir else None,
                    # rank 0 alone evaluates and saves, so it alone keeps the average
                    average=WeightAverage(model, config.weight_average)
                    if config.weight_average and process_rank == 0 else None)


def _elastic_job(world_size: int) -> Optional[str]:
    """The identity of this data-parallel ``torchrun`` job, the same in each of its restarts (``None``
    outside one): its run id (``--rdzv-id``; a fresh one for each ``--standalone`` launch). Where that
    is torchrun's default ``"none"``, which any job may have, the host and the pid of torchrun's agent
    are added: with a static rendezvous rank 0 stays on its machine, under the same agent."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if world_size == 1 or run_id is None:
        return None
    if run_id in ("", "none"):
        run_id = f"none@{socket.gethostname()}:{os.getppid()}"
    return run_id


def restore_run(run: RunState) -> None:
    """Step 2: continue from ``checkpoint.pt`` (rank 0 reads it and broadcasts it), when resuming.

    A restart of an elastic job (``torchrun --max-restarts``) resumes from its last complete
    checkpoint too (:func:`train` sets ``resume`` for it).
    """
    ckpt_path = run.path(CHECKPOINT_NAME)
    resume = run.config.resume and ckpt_path is not None
    state = load_checkpoint(ckpt_path) if resume and run.is_main and ckpt_path.exists() else None
    if run.world_size > 1:
        state = tdist.broadcast_object(state)  # rank 0's file: no shared file system needed
    if state is None:
        if resume and run.is_main:
            log.info("no checkpoint at %s; starting from scratch", ckpt_path)
        return
    # The settings first, then the table's shapes, then the rank: a changed --row-shape is named as such,
    # not as the rank the run derives from it, and a changed dataset or embedding as itself.
    keys, settings = run.config.resume_keys(), _resume_settings(run.config, state, run.world_size)
    shown = FINETUNE_SETTINGS if run.config.from_full else None
    check_resumable(state, settings, [k for k in keys if k != "rank"], ckpt_path, TrainConfig.RESUME_ABSENT, shown)
    _check_same_table(state, run.metrics, ckpt_path)
    check_resumable(state, settings, [k for k in keys if k == "rank"], ckpt_path, TrainConfig.RESUME_ABSENT)
    saved_data = (state.get("metrics") or {}).get("dataset_fingerprint")  # None: written before it was recorded
    if saved_data is not None and saved_data != run.metrics["dataset_fingerprint"]:
        raise ValueError(f"checkpoint {ckpt_path} was trained on other data than {run.dataset.name} here (its edges, "
                         "labels or split differ, though the name and size match): resume with the dataset root it "
                         "was trained on (--root), or train anew in another output folder")
    if isinstance(state.get("epoch"), int) and state["epoch"] > run.config.epochs:
        # continuing would train nothing and record epochs past the run's own epoch count
        name = (shown or {}).get("epochs", "epochs")
        raise ValueError(f"{ckpt_path} holds epoch {state['epoch']}, past this run's last, {name}={run.config.epochs}: "
                         f"resume with {name} >= {state['epoch']}, or overwrite the run")
    try:
        run.model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
        for param_state in run.optimizer.state.values():  # saved on the CPU
            for key, value in param_state.items():
                if torch.is_tensor(value) and key != "step":
                    param_state[key] = value.to(run.device)
        for key in ("best_valid_acc", "test_acc", "best_epoch", "epochs"):
            run.metrics[key] = state["metrics"][key]
        if "from_full" in state["metrics"]:  # the start the run had, as recorded then
            run.metrics["from_full"] = state["metrics"]["from_full"]
        if run.average is not None:
            run.average.load_state_dict(state["weight_average"])
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
        raise ValueError(f"corrupted checkpoint {ckpt_path}: {err}") from None
    run.saved_epoch = int(state["epoch"])
    run.start_epoch = run.saved_epoch + 1
    saved = state["metrics"]  # (check_resumable refuses a checkpoint without it)
    saved_world = saved.get("world_size")
    if saved.get("world_size_changes"):  # kept over every later resume
        run.metrics["world_size_changes"] = list(saved["world_size_changes"])
    if run.is_main and isinstance(saved_world, int) and saved_world != run.world_size:
        # each process trains its own batches: the steps (and in mini-batches the global batch) change
        log.warning("checkpoint %s was written by a run of %d process(es), this one has %d: the epochs from %d on "
                    "take other steps than the run would have (in mini-batches %d x --batch-size nodes per step, "
                    "not %d x); resume with %d process(es) to continue it exactly", ckpt_path, saved_world,
                    run.world_size, run.start_epoch, run.world_size, saved_world, saved_world)
        run.metrics.setdefault("world_size_changes", []).append(
            {"epoch": run.start_epoch, "from": saved_world, "to": run.world_size})
    if run.is_main:
        log.info("resumed from %s at epoch %d", ckpt_path, run.start_epoch)
        run.best_state = _read_best_state(run, ckpt_path)


def _resume_settings(config: TrainConfig, state: dict, world_size: int) -> dict:
    """``config``'s settings as a resume compares them with checkpoint ``state``'s. The recorded dataset
    counts as this run's where both spellings read the same folder (a name under ``config.root`` and
    that folder's path: :func:`~ttgnn.data.dataset_folder`); and in a job of several processes, where a
    dataset folder may lie elsewhere on each machine (:func:`_job_settings`), where the two have the
    same name. (The data itself is compared by its fingerprint.)"""
    settings = config.settings()
    saved = state.get("settings", {}).get("dataset")
    if not isinstance(saved, str) or saved == settings["dataset"]:
        return settings
    if world_size > 1 and Path(saved).name == Path(str(config.dataset)).name:
        settings["dataset"] = saved
    elif _same_folder(dataset_folder(saved, config.root), dataset_folder(config.dataset, config.root)):
        settings["dataset"] = saved
    return settings


def _same_folder(first: Optional[Path], second: Optional[Path]) -> bool:
    try:
        return first is not None and second is not None and os.path.samefile(first, second)
    except OSError:  # either is missing: not known to be the same
        return False


def _check_same_table(state: dict, metrics: dict, ckpt_path: Path) -> None:
    """Refuse a resume whose TT table has other shapes than the checkpoint's (``--row-shape`` or
    ``--col-shape`` changed: its weights read as a "corrupted checkpoint" before). Another rank
    alone is left to :func:`~ttgnn.checkpoint.check_resumable`, which names the rank setting."""
    saved = state.get("metrics")
    keys = ("row_shape", "col_shape", "ranks")
    if not isinstance(saved, dict) or any(key not in saved for key in keys):
        return  # an older checkpoint: the weights' own shapes are checked when they load

    def shapes(source: dict) -> str:
        return ", ".join(f"{key} {source.get(key)}" for key in keys)

    if any(list(saved[key] or []) != list(metrics.get(key) or []) for key in keys[:2]):
        raise ValueError(f"checkpoint {ckpt_path} holds a TT table of {shapes(saved)}; this run builds "
                         f"{shapes(metrics)}: give the checkpoint's --row-shape / --col-shape (or leave them "
                         "automatic, as it did) to continue that run, or another output folder")


def _read_best_state(run: RunState, ckpt_path: Path) -> Optional[dict]:
    best_path = run.path(BEST_MODEL_NAME)
    if best_path is None:
        return None
    settle_staged_best(run.out_dir, run.metrics["best_epoch"])  # a run stopped between its two writes
    if not best_path.exists():
        return None
    best = load_checkpoint(best_path)
    if best.get("epoch") != run.metrics["best_epoch"]:
        raise ValueError(f"corrupted checkpoint {best_path}: it holds epoch {best.get('epoch')}, "
                         f"{ckpt_path} says the best epoch is {run.metrics['best_epoch']}")
    return best["model"]


def lr_factor(schedule: str, epoch: int, epochs: int) -> float:
    """The learning-rate multiplier of ``epoch`` (1-based) of ``epochs`` under ``schedule``.

    ``"constant"``: 1. ``"cosine"``: ``(1 + cos(pi * (epoch - 1) / epochs)) / 2``, 1 in the first
    epoch and ``(1 - cos(pi / epochs)) / 2`` (near 0, never 0) in the last.
    """
    check_choice("lr_schedule", schedule, LR_SCHEDULES)
    if schedule == "constant":
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * (epoch - 1) / epochs))


def set_learning_rates(run: RunState, epoch: int) -> None:
    """Set the optimiser's rates for ``epoch``: ``lr`` (GNN) and ``emb_lr`` (table) times :func:`lr_factor`.

    Computed from the settings alone, so a resumed run continues the schedule exactly.
    """
    config = run.config
    factor = lr_factor(config.lr_schedule, epoch, config.epochs)
    # The groups as setup_run builds them: the GNN's, then the table's (absent without parameters).
    for group, base in zip(run.optimizer.param_groups, (config.lr, config.emb_lr)):
        group["lr"] = base * factor


def train_epoch(run: RunState, epoch: int, show_progress: bool = False) -> float:
    """Step 3: one epoch of training; returns the mean training loss (averaged over ranks)."""
    config, dataset = run.config, run.dataset
    set_learning_rates(run, epoch)
    seed_everything(derive_seed(config.seed, run.process_rank, epoch))
    train_nodes = dataset.split["train"]
    input_labels = None
    if config.label_input:  # labels of the known part are inputs; the loss is on the rest
        known, train_nodes = split_known(train_nodes, config.label_rate, config.seed, epoch)
        # spread from the known with label_spread; with label_reuse the model's predictions of the others
        input_labels = model_label_inputs(run.model, run.graph, config.mode, config.eval_batch_size, dataset,
                                          known_labels(dataset, known))
    if run.world_size > 1:  # disjoint, equally sized shards: every rank runs the same number of steps
        train_nodes = tdist.epoch_shard(train_nodes, epoch, config.seed, run.process_rank, run.world_size)
    train_nodes = train_nodes.to(dataset.split["train"].device)
    with torch.enable_grad():  # called under torch.no_grad() (a notebook's), the backward pass had no graph
        if config.mode == "full":
            tdist.maybe_inject_fault(epoch, 0)  # test hook, inert unless $TTGNN_FAULT is set
            loss = _full_graph_step(run, train_nodes, input_labels)
        else:
            loss = _minibatch_epoch(run, train_nodes, input_labels, epoch, show_progress)
    if run.world_size > 1:  # equal shard sizes: the mean of the ranks' means is the epoch mean
        loss = tdist.all_reduce_sums({"loss": loss})["loss"] / run.world_size
    return loss


def _full_graph_step(run: RunState, nodes: torch.Tensor, input_labels) -> float:
    run.net.train()
    run.optimizer.zero_grad(set_to_none=True)
    logits = run.net(run.graph, input_labels=input_labels)
    loss = node_loss(logits[nodes], run.dataset.labels[nodes], run.config.loss, run.config.label_smoothing)
    if run.teacher_probs is not None and run.config.finetune_distill:
        # checked once, when _start_from_full set them (a softmax), not in every step
        loss = loss + run.config.finetune_distill * distill_loss(logits, run.teacher_probs, check_teacher=False)
    loss.backward()
    run.optimizer.step()
    return float(loss.detach())


#: Mini-batch steps between looks at the epoch's running loss (one host sync each): a loss gone NaN
#: or inf ends the epoch within this many steps, not at its end (then :func:`train` stops).
FINITE_CHECK_STEPS = 64


def _not_finite_on_any_rank(total: torch.Tensor, world_size: int) -> bool:
    bad = 0.0 if math.isfinite(float(total)) else 1.0
    if world_size > 1:  # every rank looks at the same steps (equal shards), so all stop together
        bad = tdist.all_reduce_sums({"bad": bad})["bad"]
    return bad > 0


def _minibatch_epoch(run: RunState, nodes: torch.Tensor, input_labels, epoch: int, show_progress: bool) -> float:
    import dgl
    from tqdm.auto import tqdm

    config = run.config
    run.net.train()
    sampler = dgl.dataloading.NeighborSampler(list(config.fanouts))
    dgl_on_device = run.model.gnn.backend == "dgl" and run.device.type != "cpu"  # a CUDA build of DGL
    loader = dgl.dataloading.DataLoader(run.graph, nodes.to(run.graph.idtype), sampler, batch_size=config.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0,
                                        device=run.device if dgl_on_device else None)
    # The loss is summed on the device (float64, the same sums as Python floats): reading it each
    # step would wait for the device and stop the next batch's sampling from overlapping compute.
    total = torch.zeros((), dtype=torch.float64, device=run.device)
    count = 0
    batches = tqdm(device_batches(loader, run.model.gnn, run.device), disable=not show_progress, leave=False,
                   desc=f"epoch {epoch}", total=len(loader))
    for step, (input_nodes, output_nodes, blocks) in enumerate(batches):
        tdist.maybe_inject_fault(epoch, step)  # test hook, inert unless $TTGNN_FAULT is set
        run.optimizer.zero_grad(set_to_none=True)
        logits = run.net(blocks, input_nodes, input_labels=input_labels)
        labels = run.dataset.labels[output_nodes]
        loss = node_loss(logits, labels, config.loss, config.label_smoothing)
        loss.backward()
        run.optimizer.step()
        total += loss.detach().double() * labels.numel()
        count += labels.numel()
        if (step + 1) % FINITE_CHECK_STEPS == 0 and _not_finite_on_any_rank(total, run.world_size):
            break  # the epoch's loss is NaN or inf: train() stops the run
    return float(total) / max(count, 1)


def evaluate_and_checkpoint(run: RunState, epoch: int, loss: float, train_time: float) -> None:
    """Step 4 (rank 0): evaluate, keep the best epoch's weights, write checkpoint and metrics.

    Raises:
        ValueError: ``epoch`` is not the one after the last recorded (``run.start_epoch`` for the first):
            a repeated or skipped epoch would leave a record that no resume can repeat.
    """
    started = time.perf_counter()
    metrics = run.metrics
    expected = metrics["epochs"][-1]["epoch"] + 1 if metrics["epochs"] else run.start_epoch
    if epoch != expected:
        raise ValueError(f"epoch {epoch} cannot be recorded next: the run's next epoch is {expected} (epochs are "
                         "trained and recorded in order, once each)")
    raw = None  # with weight averaging: the trained weights' accuracies, for the record
    swapped = contextlib.nullcontext()
    if run.average is not None:
        raw = _evaluate_run(run, epoch)
        swapped = run.average.swapped_into(run.model)
    with swapped:  # the averaged weights are evaluated, selected and saved
        result = _evaluate_run(run, epoch)
        # the first epoch is the best so far whatever it scores (a validation accuracy of exactly 0
        # left the run without a best model and reported test 0)
        first = metrics["best_epoch"] == 0 and run.best_state is None
        improved = first or result["valid"] > metrics["best_valid_acc"]
        if improved:
            run.best_state = _cpu_state(run.model)
    record = {"epoch": epoch, "loss": loss, "train_acc": result["train"], "valid_acc": result["valid"],
              "test_acc": result["test"], "valid_loss": result["valid_loss"], "epoch_time": train_time,
              "eval_time": time.perf_counter() - started, "lr": run.optimizer.param_groups[0]["lr"],
              **_peak_memory(run.device)}
    if raw is not None:
        record.update(raw_valid_acc=raw["valid"], raw_test_acc=raw["test"])
    metrics["epochs"].append(record)
    if improved:
        metrics.update(best_valid_acc=result["valid"], test_acc=result["test"], best_epoch=epoch)
    log.info("epoch %3d | loss %.4f | train %.4f valid %.4f test %.4f | best valid %.4f (test %.4f, epoch %d) | "
             "%.2fs train + %.2fs eval | peak mem %.0f MiB", epoch, loss, result["train"], result["valid"],
             result["test"], metrics["best_valid_acc"], metrics["test_acc"], metrics["best_epoch"], train_time,
             record["eval_time"], record["peak_memory_mib"])
    if raw is not None:
        log.info("epoch %3d | weights as trained (not averaged): valid %.4f test %.4f", epoch, raw["valid"],
                 raw["test"])
    if run.out_dir is not None:
        # Ctrl-C waits until the best model, the checkpoint and its metrics are all written (an
        # interrupted torch.save raises its own error, not KeyboardInterrupt).
        with _deferred_interrupt(), _naming_the_last_checkpoint(run, epoch):
            if improved:  # staged, and made best_model.pt once the checkpoint naming this epoch the best is written
                save_best_model(run.path(STAGED_BEST_NAME), epoch=epoch, model=run.best_state,
                                settings=run.config.settings(), dataset_fingerprint=metrics["dataset_fingerprint"])
            save_checkpoint(run.path(CHECKPOINT_NAME), epoch=epoch, model=run.model.state_dict(),
                            optimizer=run.optimizer.state_dict(), metrics=metrics, settings=run.config.settings(),
                            weight_average=run.average.state_dict() if run.average is not None else None)
            if improved:
                commit_staged_best(run.out_dir)
            run.saved_epoch = epoch
            atomic_write_json(summarize(metrics), run.path(METRICS_NAME))


@contextlib.contextmanager
def _naming_the_last_checkpoint(run: RunState, epoch: int) -> Iterator[None]:
    """Re-raise an ``OSError`` from writing the run's files after ``epoch`` (a full disk, a folder made
    read-only) as one that also says what the folder still holds and how to go on: the bare error named
    a temporary file, not the checkpoint, and not that ``--resume`` continues the run."""
    try:
        yield
    except OSError as err:
        reason = f"{err.strerror or err}: {err.filename}" if err.filename else str(err.strerror or err)
        kept = (f"the last complete checkpoint is epoch {run.saved_epoch}'s ({run.path(CHECKPOINT_NAME)}): make room "
                "or make the folder writable, then --resume (resume=True) continues the run" if run.saved_epoch else
                "no epoch's checkpoint was written yet")
        raise OSError(f"could not write the run's files after epoch {epoch} ({reason}); {kept}") from err


def _evaluate_run(run: RunState, epoch: int) -> dict:
    """:func:`~ttgnn.evaluation.evaluate` (or its sampled form) of ``run.model`` as it is now."""
    config = run.config
    if config.eval_fanouts is not None:  # the same neighbourhoods on a resume: seeded by the epoch
        seed_everything(derive_seed(config.seed, "eval", epoch))
        return evaluate_sampled(run.model, run.graph, run.dataset, config.eval_fanouts, config.eval_batch_size,
                                run.device, run.accuracy, progress=config.progress)
    return evaluate(run.model, run.graph, run.dataset, config.mode, config.eval_batch_size, run.accuracy,
                    progress=config.progress)


def _cpu_state(model) -> dict:
    """A copy of ``model``'s state dict on the CPU."""
    return {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}


@contextlib.contextmanager
def _deferred_interrupt():
    """Hold back SIGINT (Ctrl-C), and SIGTERM where Python handles it (``ttgnn train`` does), for
    the duration of the block, then deliver the first one received to its own handler (which raises
    ``KeyboardInterrupt``).

    Only in the main thread (where Python delivers signals), and only for a signal with a Python
    handler: a process started with SIGINT ignored (a shell's background job, ``nohup``) keeps
    ignoring it, and a SIGTERM left to the operating system still ends the process at once.
    Elsewhere the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = [signum for signum in (signal.SIGINT, signal.SIGTERM) if callable(signal.getsignal(signum))]
    received = []
    previous = {signum: signal.signal(signum, lambda number, frame: received.append(number)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        signal.raise_signal(received[0])


def finish_run(run: RunState) -> dict:
    """Step 5: Correct and Smooth on the best model (rank 0), the summary on every rank, ``metrics.json``."""
    metrics = run.metrics
    if run.is_main and run.config.correct_smooth and metrics["epochs"]:
        if run.config.eval_fanouts is not None:
            log.info("correct and smooth skipped: it needs every node's prediction, and this run's evaluation "
                     "is sampled (eval_fanouts %s)", run.config.eval_fanouts)
        else:
            metrics["correct_smooth"] = _final_correct_smooth(run)
    if run.world_size > 1:
        metrics = tdist.broadcast_object(metrics)  # every rank returns rank 0's metrics
    summary = summarize(metrics)
    if run.is_main and run.out_dir is not None:
        atomic_write_json(summary, run.path(METRICS_NAME))
    return summary


def _final_correct_smooth(run: RunState) -> dict:
    """Correct and Smooth on the best epoch's model (a copy; ``run.model`` keeps its last weights)."""
    evaluated = copy.deepcopy(run.model)
    epoch = run.metrics["best_epoch"]
    if run.best_state is not None:
        evaluated.load_state_dict(run.best_state)
    else:  # a run resumed from a checkpoint written before best_model.pt existed
        log.warning("best model weights not found; Correct and Smooth uses the last epoch's model")
        epoch = run.metrics["epochs"][-1]["epoch"]
    log.info("correct and smooth on the epoch %s model: tuning its two strengths on validation "
             "(--no-correct-smooth to skip)", epoch)
    result = correct_and_smooth_metrics(evaluated, run.graph, run.dataset, run.config.mode,
                                        run.config.eval_batch_size, run.accuracy,
                                        progress=run.config.progress)
    result["epoch"] = epoch
    log.info("correct and smooth (epoch %s model, alphas %.2f/%.2f): train %.4f valid %.4f test %.4f | %.1fs",
             epoch, result["correct_alpha"], result["smooth_alpha"], result["train_acc"], result["valid_acc"],
             result["test_acc"], result["seconds"])
    return result


def summarize(metrics: dict) -> dict:
    """``metrics`` plus the median epoch time, the peak memory and ``valid_acc_at_best``."""
    summary = dict(metrics)
    records = metrics["epochs"]
    times = [r["epoch_time"] for r in records]
    # The first epoch includes one-off warm-up; the median is the representative epoch time.
    summary["epoch_time"] = float(np.median(times)) if times else None
    summary["peak_memory_mib"] = max((r["peak_memory_mib"] for r in records), default=None)
    summary["valid_acc_at_best"] = metrics["best_valid_acc"]
    return summary


# ---------------------------------------------------------------------- the run
#: Settings each process of a data-parallel job may have its own of: where it reads and caches, its threads
#: and bars, and what rank 0 alone decides or does (the run folder, evaluation batches, Correct and Smooth).
PER_PROCESS_SETTINGS = TrainConfig.PLACE_KEYS + ("eval_batch_size", "correct_smooth")


def _job_settings(config: TrainConfig) -> dict:
    """The settings every process of a data-parallel job must share (a dataset folder by its name: it may
    lie elsewhere on each machine)."""
    settings = {key: value for key, value in config.settings().items() if key not in PER_PROCESS_SETTINGS}
    settings["dataset"] = Path(str(config.dataset)).name
    return settings


def _stop_together(problem: Optional[str], others: str, world_size: int) -> None:
    """Raise a ``ValueError`` on every process of the job when any has a ``problem``: its own message where it
    has one, else ``others`` (formatted with ``count`` and ``world_size``). Every process must call it at the
    same point: it all-reduces one count (a process raising alone left the others waiting at a collective)."""
    count = int(tdist.all_reduce_sums({"differ": float(problem is not None)})["differ"])
    if problem is not None:
        raise ValueError(problem)
    if count:
        raise ValueError(others.format(count=count, world_size=world_size))


def _check_same_settings(main: dict, config: TrainConfig, world_size: int) -> None:
    """Raise the same ``ValueError`` on every process when any was started with other settings than rank
    0's (``main``): each process would train another model, and the job's collectives would stop matching
    (another ``--epochs`` waited for ``--dist-timeout``, another ``--lr`` left the replicas apart)."""
    mine = _job_settings(config)
    differ = differing_settings(main, mine, main)
    named = ", ".join(f"{key}={mine.get(key)!r} (rank 0: {main[key]!r})" for key in differ[:4])
    _stop_together(f"this process was started with other settings than rank 0 of the job: {named}; start every "
                   "process of the job with the same options" if differ else None,
                   "{count} of {world_size} processes of the job were started with other settings than rank 0 (their "
                   "errors name them); start every process of the job with the same options", world_size)


def _load_same_data(config: TrainConfig, dataset: Optional[NodeDataset], is_main: bool, world_size: int) -> NodeDataset:
    """The dataset of a job of several processes, loaded on each (``dataset`` when given) and compared with
    rank 0's by :meth:`~ttgnn.data.NodeDataset.fingerprint` before anything is worked out from it; every
    process raises a ``ValueError`` when any could not load it or read other data (each may read its own
    copy of the folder: a stale one trained silently on mixed data, or the settings worked out from it
    differed and the job died in DDP's constructor or a collective)."""
    mine, problem = None, None
    try:
        if dataset is None:
            dataset = load_dataset(config.dataset, config.root, config.cache_dir)
        if not isinstance(dataset, NodeDataset):
            raise TypeError(f"dataset must be a NodeDataset (ttgnn.data.load_dataset loads one), got "
                            f"{type(dataset).__name__}")
        mine = dataset.fingerprint()
    except (ValueError, TypeError, OSError) as err:  # the others must not wait for this process at a collective
        problem = f"this process could not load the dataset: {err}"
    main = tdist.broadcast_object(mine if is_main else None)
    if problem is None and main is not None and mine != main:
        problem = (f"this process read other data than rank 0 of the job (dataset fingerprint {mine}, rank 0: {main}): "
                   "every process must read the same dataset; copy rank 0's dataset folder to this machine again")
    _stop_together(problem, "{count} of {world_size} processes of the job could not load the dataset or read other "
                   "data than rank 0 (their errors say which); every process must read the same dataset", world_size)
    return dataset


def _claim_run_folder(config: TrainConfig, is_main: bool, world_size: int,
                      stack: contextlib.ExitStack) -> tuple[Optional[RunFolder], TrainConfig]:
    """Rank 0 locks the run folder and checks it may write there; every rank raises the same error, and
    in a job of several processes the same one when their settings differ (:func:`_check_same_settings`).
    Returns rank 0's folder (``None`` elsewhere, or without ``output_dir``) and ``config``, set to
    resume where the folder holds the run of this elastic job (a restart: :func:`_elastic_job`)."""
    error, folder, resume = None, None, config.resume
    if is_main and config.output_dir:
        try:
            folder = stack.enter_context(RunFolder(config.output_dir, resume=config.resume,
                                                   overwrite=config.overwrite, job=_elastic_job(world_size)))
            resume = folder.resume
        except ValueError as err:
            error = str(err)
    main = None
    if world_size > 1:
        error, resume, main = tdist.broadcast_object((error, resume, _job_settings(config) if is_main else None))
    if error is not None:
        raise ValueError(error)
    if main is not None:
        _check_same_settings(main, config, world_size)
    if resume and not config.resume:
        config = dataclasses.replace(config, resume=True, overwrite=False)
    return folder, config


def train(config: TrainConfig, dataset: Optional[NodeDataset] = None, process_rank: Optional[int] = None,
          world_size: Optional[int] = None, device: Optional[torch.device] = None) -> dict:
    """Train and evaluate one configuration; returns the metrics dict also written to ``metrics.json``.

    Args:
        config (TrainConfig): the settings.
        dataset (NodeDataset, optional): an already loaded dataset. (default: loaded from ``config``)
        process_rank (int, optional): this process's rank in a data-parallel job; only rank 0
            evaluates, logs and writes. (default: the rank in the process group, else ``0``)
        world_size (int, optional): number of processes: the size of the initialised process
            group (:func:`ttgnn.distributed.setup`), ``1`` without one. (default: the group's size, else ``1``)
        device (torch.device, optional): where to train. (default: CPU)

    Raises:
        ValueError: a bad setting, a bad dataset, or a run folder that is in use or holds another run.
        TrainingDiverged: a ``ValueError``: an epoch's loss was NaN or inf; it names what was kept.
        TrainingInterrupted: Ctrl-C; it names the last complete checkpoint.
        TypeError: ``config`` is not a :class:`TrainConfig`, or ``dataset`` not a ``NodeDataset``.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    config.validate()
    config = _named_for(config, dataset)
    process_rank = tdist.get_rank() if process_rank is None else process_rank
    world_size = tdist.get_world_size() if world_size is None else world_size
    if not 0 <= process_rank < world_size:
        raise ValueError(f"process_rank must be in [0, {world_size}), got {process_rank}")
    # The run's collectives (the barrier after each epoch's checkpoint) span the whole process
    # group: one process of a larger group cannot train alone.
    if tdist.get_world_size() != world_size:
        raise ValueError(f"world_size={world_size} needs an initialised process group of that size (launch with "
                         f"torchrun; see ttgnn.distributed.setup), got {tdist.get_world_size()}")
    device = torch.device("cpu") if device is None else torch.device(device)
    tdist.check_cuda_available(device)
    if config.from_full is None and world_size == 1:
        config = _from_full_as_recorded(config)
    if config.from_full and world_size > 1:
        raise ValueError("from_full trains a full table first: it runs in one process (world_size=1), got "
                         f"world_size={world_size}")
    with contextlib.ExitStack() as stack:
        stack.callback(torch.set_num_threads, torch.get_num_threads())  # num_threads is the run's, not the caller's
        teacher = None
        try:
            # an --overwrite deletes the folder's old run only once the new one has been set up (below)
            folder, config = _claim_run_folder(config, process_rank == 0, world_size, stack)
            if world_size > 1:  # before anything is worked out from the data
                dataset = _load_same_data(config, dataset, process_rank == 0, world_size)
            if config.from_full is not False and dataset is None:  # the rule and the full table's run need it
                dataset = load_dataset(config.dataset, config.root, config.cache_dir)
            if config.from_full is None:  # decided by the graph (and fixed for the run and its resume check)
                config = settle_from_full(config, dataset, world_size)
                if not config.from_full and process_rank == 0:
                    _warn_unread_finetune(config)
                if config.from_full and process_rank == 0:
                    num_train = int(dataset.split["train"].numel())
                    log.info("from_full: a TT table on a graph of few labels (training nodes %.1f%% of %s nodes, "
                             "under %.0f%%): the full table is trained first, then compressed into TT and distilled "
                             "(--no-from-full to turn it off)", 100.0 * num_train / dataset.num_nodes,
                             f"{dataset.num_nodes:,}", 100.0 * LABEL_INPUT_MIN_TRAIN_FRACTION)
            if config.from_full:
                finetune = finetune_config(config)
                # The TT table's shape is checked before the full table trains: a bad one fails now, not after it.
                settled = settle_by_graph(finetune, dataset)
                if settled.embedding == "tt":  # the full table distilled from itself has no TT shape
                    tt_shape(settled, dataset.num_nodes)
                checkpoint = Path(config.output_dir) / CHECKPOINT_NAME if config.output_dir else None
                if config.resume and checkpoint is not None and checkpoint.exists():
                    # a resume the TT run's checkpoint refuses (e.g. one written without from_full) is refused
                    # before the full table trains, not after
                    state = load_checkpoint(checkpoint)
                    check_resumable(state, _resume_settings(settled, state, 1), settled.resume_keys(), checkpoint,
                                    TrainConfig.RESUME_ABSENT, FINETUNE_SETTINGS)
                    _check_full_table_epochs(config, checkpoint)
                teacher = _train_full_table(config, dataset, device, replacing=folder)
                config = finetune
            run = setup_run(config, dataset, process_rank, world_size, device)
            if folder is not None:
                if teacher is None:  # the run it overwrites may have been a from_full one: its first stage goes too
                    _replace_stale_stage(folder, Path(config.output_dir) / FULL_TABLE_DIR)
                folder.replace_existing()
                folder.record_job()
            if teacher is not None:
                _start_from_full(run, *teacher)
            restore_run(run)
            if teacher is not None and run.saved_epoch == 0 and run.out_dir is not None:
                # a fresh start: the compressed table is the best epoch so far (epoch 0)
                save_best_model(run.path(BEST_MODEL_NAME), epoch=0, model=run.best_state,
                                settings=run.config.settings(), dataset_fingerprint=run.metrics["dataset_fingerprint"])
            run.net = tdist.wrap_model(run.model) if world_size > 1 else run.model  # DDP averages gradients
        except TrainingInterrupted:  # the full table's run, stopped: it named its checkpoint
            raise
        except KeyboardInterrupt:
            raise TrainingInterrupted(*_resume_point(config, teacher is not None)) from None
        except RuntimeError as err:
            reason = _collective_failure(err, world_size)
            if reason is None:
                raise
            raise TrainingInterrupted(*_resume_point(config, teacher is not None), reason) from None
        if run.is_main:
            log.info("model: %s / %s embedding (%s params, %.1fx compression) + %s params in the GNN",
                     run.config.model, run.config.embedding, f"{run.metrics['embedding_parameters']:,}",
                     run.metrics["compression_ratio"], f"{run.metrics['gnn_parameters']:,}")
            if run.config.embedding == "tt" and run.metrics["compression_ratio"] < 1.0:
                log.warning("the TT table has more parameters (%s) than a full %s x %d table (%s): lower --rank "
                            "(or give --compression) for a smaller one, or use --embedding full",
                            f"{run.metrics['embedding_parameters']:,}", f"{run.dataset.num_nodes:,}",
                            run.config.dim, f"{run.dataset.num_nodes * run.config.dim:,}")
        return _train_and_finish(run, _resume_point(config, teacher is not None))


def _resume_point(config: TrainConfig, full_table_done: bool) -> tuple[Optional[Path], Optional[int]]:
    """What a run stopped before its first checkpoint can be continued from, and that checkpoint's epoch
    (``None``: not known; ``(None, 0)``: nothing): with ``resume``, the run's own checkpoint; with
    ``from_full``, the full table's run once it is complete (``full_table_done``) or when resuming."""
    if not config.output_dir:
        return None, 0
    out = Path(config.output_dir)
    candidates = [out / CHECKPOINT_NAME] if config.resume else []
    if config.from_full is not False and (full_table_done or config.resume):  # None: the graph's rule decides
        candidates.append(out / FULL_TABLE_DIR / CHECKPOINT_NAME)
    for path in candidates:
        if path.is_file():
            return path, _recorded_epoch(path.parent)
    return None, 0


def _recorded_epoch(out_dir: Path) -> Optional[int]:
    """The last epoch ``out_dir/metrics.json`` records (``None`` when it cannot be read)."""
    import json

    try:
        epochs = json.loads((out_dir / METRICS_NAME).read_text())["epochs"]
        return int(epochs[-1]["epoch"]) if epochs else 0
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _train_and_finish(run: RunState, before: tuple[Optional[Path], Optional[int]] = (None, 0)) -> dict:
    """Steps 3-5 of a set-up (and restored) run: its epochs, then :func:`finish_run`; Ctrl-C becomes
    :class:`TrainingInterrupted` naming the last complete checkpoint (``before``, the checkpoint and
    epoch to name until the run writes its own: the full table's run of ``from_full``)."""
    def checkpoint() -> tuple[Optional[Path], Optional[int]]:
        return (run.path(CHECKPOINT_NAME), run.saved_epoch) if run.saved_epoch else before

    try:
        _epochs(run)
        return finish_run(run)  # Correct and Smooth may take a while: the checkpoint is named then too
    except KeyboardInterrupt:
        raise TrainingInterrupted(*checkpoint()) from None
    except RuntimeError as err:
        reason = _collective_failure(err, run.world_size)
        if reason is None:
            raise
        raise TrainingInterrupted(*checkpoint(), reason) from None


def _collective_failure(err: RuntimeError, world_size: int) -> Optional[str]:
    """Why a collective of a data-parallel job failed, in a few words (``None``: ``err`` is no such failure):
    another process of the job is gone (killed, out of memory, stopped on an error of its own), or it did
    not arrive within the job's timeout (``--dist-timeout``)."""
    if world_size == 1:
        return None
    text = str(err)
    timed_out = ("Timed out waiting", "collective operation timeout", "Socket Timeout")  # gloo, NCCL, the store
    if any(sign in text for sign in timed_out):
        return (f"waited longer than the job's timeout (--dist-timeout) for another process of the job: "
                f"{_first_line(err)}")
    lost = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "communicator was aborted")
    if isinstance(err, getattr(torch.distributed, "DistError", ())) or any(sign in text for sign in lost):
        return f"another process of the job stopped: {_first_line(err)}"
    return None


def _first_line(err: BaseException) -> str:
    """``err``'s first sentence, without a ``[source.cc:123]`` prefix (gloo's errors carry one)."""
    lines = str(err).strip().splitlines()
    first = re.sub(r"^\[[^\]]*\]\s*", "", lines[0]) if lines else ""
    return first.split(". ")[0] or type(err).__name__


def _warn_unread_finetune(config: TrainConfig) -> None:
    """Warn when ``finetune_*`` settings other than their defaults are given to a run that the
    ``from_full`` rule left without its second stage (they are read by nothing else)."""
    defaults = TrainConfig()
    given = [f"finetune_{name}" for name in ("epochs", "lr", "distill")
             if getattr(config, f"finetune_{name}") != getattr(defaults, f"finetune_{name}")]
    if given:
        log.warning("%s ignored: from_full, which reads them, is off for this run (it is on by itself for a TT "
                    "table in full-graph training, in one process, on a graph of few labels; --from-full turns "
                    "it on)", ", ".join(given))


def _from_full_as_recorded(config: TrainConfig) -> TrainConfig:
    """``config`` with ``from_full`` as the run it resumes was started with, where the graph's rule would
    decide it (``None``) and the run folder holds a run: the rule depends on the number of processes
    (off in a job of several), so a run started under torchrun and resumed in one process was refused
    for a ``from_full`` the user never set. Unchanged without ``resume`` or without a run to read."""
    if not (config.resume and config.output_dir and config.embedding == "tt"):
        return config
    import json

    out = Path(config.output_dir)
    recorded = None
    if (out / CHECKPOINT_NAME).is_file():
        try:  # the settings its metrics.json records with the checkpoint: the checkpoint is read once, later
            recorded = json.loads((out / METRICS_NAME).read_text()).get("settings", {}).get("from_full")
        except (OSError, ValueError, AttributeError):  # no or a damaged record: the resume's own checks say more
            return config
    elif (out / FULL_TABLE_DIR / CHECKPOINT_NAME).is_file():  # no TT run yet: the full table's stage is under way
        recorded = True
    if not isinstance(recorded, bool):
        return config
    log.info("resuming the run in %s with from_full=%s, as it was started", out, recorded)
    return dataclasses.replace(config, from_full=recorded)


def settle_from_full(config: TrainConfig, dataset: NodeDataset, world_size: int = 1) -> TrainConfig:
    """``config`` with ``from_full`` decided by the graph where it is ``None``
    (:func:`~ttgnn.config.from_full_for`), as :func:`train` decides it before either stage."""
    if config.from_full is not None:
        return config
    num_train = int(dataset.split["train"].numel())
    return dataclasses.replace(config, from_full=from_full_for(None, config.embedding, config.mode, dataset.num_nodes,
                                                               num_train, world_size))


def _replace_stale_stage(folder: RunFolder, stage: Path) -> None:
    """When ``folder`` overwrites its run (:meth:`~ttgnn.checkpoint.RunFolder.replace_existing` is due)
    with one that has no full-table stage, delete the stage folder ``stage`` of a ``from_full`` run it
    replaces: its run files and lock, and the folder once nothing else is left in it (a stale first
    stage would be predicted, or plotted, as this run's)."""
    if not folder.overwrite or folder.resume or not stage.is_dir():
        return
    with RunFolder(stage, overwrite=True) as old:
        old.replace_existing()
    (stage / LOCK_NAME).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # files of the user's own stay, and so does the folder
        stage.rmdir()


def full_table_config(config: TrainConfig) -> TrainConfig:
    """The first stage of ``from_full``: ``config``'s run with the full table, in ``output_dir/full-table``
    (exactly the run of ``embedding="full"`` there)."""
    out_dir = Path(config.output_dir) / FULL_TABLE_DIR if config.output_dir else None
    return dataclasses.replace(config, embedding="full", from_full=False, rank=None, compression=None, max_params=None,
                               output_dir=str(out_dir) if out_dir is not None else None)


#: The settings the second stage of ``from_full`` runs as given by others (:func:`finetune_config`), by
#: the names a user gives them.
FINETUNE_SETTINGS = {"epochs": "finetune_epochs", "lr": "finetune_lr", "emb_lr": "finetune_lr"}


def _check_full_table_epochs(config: TrainConfig, checkpoint: Path) -> None:
    """Refuse to resume a ``from_full`` run whose TT stage has a checkpoint (``checkpoint``) with another
    ``epochs`` than its full table's run had: the full table would train further (or stop short of its
    record), and the TT stage would go on from a start and a teacher of another table."""
    full_checkpoint = Path(config.output_dir) / FULL_TABLE_DIR / CHECKPOINT_NAME
    if not full_checkpoint.is_file():
        return  # its own resume says what is missing
    had = load_checkpoint(full_checkpoint).get("settings", {}).get("epochs")
    if isinstance(had, int) and had != config.epochs:
        raise ValueError(f"the TT stage of the run in {config.output_dir} ({checkpoint}) started from its full "
                         f"table's run of epochs={had}; this run has epochs={config.epochs}, which would train "
                         f"another full table under the TT stage: give epochs={had} ({option_text('epochs', had)}) "
                         "to continue that run (finetune_epochs may grow), or another output folder")


def finetune_config(config: TrainConfig) -> TrainConfig:
    """The second stage of ``from_full``: ``config`` with the fine-tuning epochs and learning rate
    (``finetune_epochs``, ``finetune_lr`` for the GNN and the table), as its run records them."""
    return dataclasses.replace(config, epochs=config.finetune_epochs, lr=config.finetune_lr, emb_lr=config.finetune_lr)


def _train_full_table(config: TrainConfig, dataset: NodeDataset, device: torch.device,
                      replacing: Optional[RunFolder] = None) -> tuple[dict, dict, torch.Tensor]:
    """The first stage of ``from_full``: the full-table run of ``config`` (in ``output_dir/full-table``,
    resumed or replaced with the TT run; ``replacing``, the TT run's folder, has its old run deleted
    with the full table's once this stage is set up). Returns its summary, its best epoch's state
    dict and that model's ``(N, C)`` class probabilities (evaluated as :func:`~ttgnn.evaluation.evaluate` does)."""
    full = full_table_config(config)
    out_dir = Path(full.output_dir) if full.output_dir else None
    log.info("from_full: training the full table first%s", f" (run folder {out_dir})" if out_dir else "")
    with contextlib.ExitStack() as stack:
        folder = None
        if out_dir is not None:
            folder = stack.enter_context(RunFolder(out_dir, resume=config.resume, overwrite=config.overwrite))
        run = setup_run(full, dataset, 0, 1, device)
        for old_run in (folder, replacing):
            if old_run is not None:
                old_run.replace_existing()
        restore_run(run)
        summary = _train_and_finish(run)
    if run.best_state is None:
        raise ValueError(f"from_full: the full-table run in {out_dir} has no best model (best_model.pt); "
                         "replace it with overwrite")
    run.model.load_state_dict(run.best_state)
    try:
        with torch.no_grad():
            probs = torch.softmax(all_logits(run.model, run.graph, full.mode, full.eval_batch_size, run.dataset),
                                  dim=1)
    except KeyboardInterrupt:  # the full table's run is complete: a resume starts from it
        raise TrainingInterrupted(run.path(CHECKPOINT_NAME), run.saved_epoch) from None
    log.info("from_full: the full table's best epoch %d, valid %.4f test %.4f", summary["best_epoch"],
             summary["best_valid_acc"], summary["test_acc"])
    return summary, run.best_state, probs


@torch.no_grad()
def _start_from_full(run: RunState, summary: dict, state: dict, probs: torch.Tensor) -> None:
    """The second stage's start: the TT cores from the TT-SVD of the full run's best table (TT-row
    order; a full table: that table itself), every other weight from its best model; evaluated as
    epoch 0 (the best so far; a resumed run's checkpoint replaces all of it)."""
    model = run.model
    own = model.state_dict()
    others = {key: value for key, value in state.items() if not key.startswith("node_input.table.")}
    missing = sorted(key for key in own if key not in state and not key.startswith("node_input.table."))
    if missing:
        raise ValueError(f"from_full: the full-table model lacks {missing[:3]}")
    model.load_state_dict({**own, **others})
    error = _load_table(model.node_input, state["node_input.table.weight"])
    result = evaluate(model, run.graph, run.dataset, run.config.mode, run.config.eval_batch_size, run.accuracy)
    run.metrics.update(best_valid_acc=result["valid"], test_acc=result["test"], best_epoch=0)
    run.metrics["from_full"] = {"full_table": {key: summary[key] for key in ("best_valid_acc", "test_acc",
                                                                             "best_epoch")},
                                "svd_relative_error": error,
                                "start_valid_acc": result["valid"], "start_test_acc": result["test"]}
    run.best_state = _cpu_state(model)
    check_probabilities("the full table's class probabilities", probs)
    run.teacher_probs = probs.to(run.device)
    start = ("a copy of the full table" if model.node_input.kind == "full"
             else f"TT-SVD of the full table (relative error {error:.3f})")
    log.info("from_full: %s: valid %.4f test %.4f before fine-tuning", start, result["valid"], result["test"])


def _epochs(run: RunState) -> None:
    from tqdm.auto import tqdm

    config = run.config
    show = bool(config.progress and run.is_main)
    epochs = tqdm(range(run.start_epoch, config.epochs + 1), disable=not show or config.mode == "minibatch",
                  desc="epochs", leave=False, initial=run.start_epoch - 1, total=config.epochs)
    for epoch in epochs:
        started = time.perf_counter()
        # With several ranks, train_epoch ends in an all-reduce of the loss: every rank has finished
        # the epoch before rank 0 evaluates and saves.
        loss = train_epoch(run, epoch, show_progress=show)
        if not math.isfinite(loss):  # the same on every rank: the loss is averaged over them
            if run.is_main and run.out_dir is not None and (run.saved_epoch or run.path(BEST_MODEL_NAME).is_file()):
                # metrics.json says why the run ended early (`ttgnn predict` tells it from an interruption;
                # a from_full run has a best model, its compressed start, before its first epoch); a resumed
                # run's next epoch writes the file again, without this entry
                atomic_write_json(dict(summarize(run.metrics), diverged={"epoch": epoch, "loss": str(loss)}),
                                  run.path(METRICS_NAME))
            raise TrainingDiverged(epoch, loss, run)
        if run.average is not None:
            run.average.update(run.model)
        if run.is_main:
            evaluate_and_checkpoint(run, epoch, loss, time.perf_counter() - started)
        tdist.barrier()  # no rank starts the next epoch before this epoch's checkpoint exists
        if run.out_dir is not None:
            run.saved_epoch = epoch  # every rank: one stopped later names the checkpoint rank 0 wrote
