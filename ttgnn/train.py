"""Training and evaluation of featureless node classifiers: full-graph or mini-batch (neighbour sampling).

:func:`train` runs one configuration (:class:`TrainConfig`) end to end: load the dataset, build the
node order and the model, train with separate optimiser settings for the embedding and the GNN,
evaluate every epoch (``ogb.nodeproppred.Evaluator`` accuracy for ``ogbn-*``, plain accuracy
otherwise; layer-wise full-neighbour inference for mini-batch models), select the epoch with the
best validation accuracy (its weights kept in ``best_model.pt``), write an atomic checkpoint each
epoch and a ``metrics.json``, and finally apply Correct and Smooth (:mod:`ttgnn.smoothing`) to the
best model's predictions, its strengths chosen on the validation nodes.

Exact resume: every epoch starts by seeding torch, numpy and DGL from ``(seed, epoch)``, so the
random stream of an epoch does not depend on what ran before it in the process; together with the
model, optimiser and metrics history in the checkpoint, a run resumed after epoch ``k`` reproduces
an uninterrupted run with the same seed.

Data parallel (``torchrun``, see :mod:`ttgnn.distributed`): with ``world_size > 1`` the model (GNN
and embedding) is wrapped in DDP, each rank trains on its own disjoint, equally sized shard of the
training nodes (reshuffled every epoch from ``(seed, epoch)``), the epoch loss is averaged over
ranks, and rank 0 alone evaluates, logs and writes the checkpoint, between two barriers so that
all ranks have finished the epoch before it is written and none starts the next one before it
exists. Rank 0 reads the checkpoint on resume and broadcasts it, so other machines need no shared
file system; an elastic restart (``TORCHELASTIC_RESTART_COUNT > 0``) resumes automatically.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from . import distributed as tdist
from .data import NodeDataset, load_dataset

# Kept here (not imported from .models) so that building the CLI parser does not import DGL.
MODELS = ("sage", "gat")
EMBEDDINGS = ("tt", "full", "features")
NORMS = ("none", "batch", "layer")

__all__ = ["TrainConfig", "train", "evaluate", "correct_and_smooth_metrics", "load_checkpoint", "known_labels",
           "split_known", "ORDERS",
           "CHECKPOINT_NAME", "BEST_MODEL_NAME", "METRICS_NAME"]

log = logging.getLogger(__name__)

ORDERS = ("identity", "random", "rcm", "metis-flat", "hierarchical-metis")
MODES = ("full", "minibatch")
CHECKPOINT_NAME = "checkpoint.pt"
BEST_MODEL_NAME = "best_model.pt"
METRICS_NAME = "metrics.json"
CHECKPOINT_VERSION = 1


@dataclass
class TrainConfig:
    """Settings of one training run (all saved into ``metrics.json``).

    Attributes:
        dataset (str): dataset name or path, see :func:`ttgnn.data.load_dataset`.
        root (str, optional): datasets root. cache_dir (str, optional): cache directory.
        model (str): ``"sage"`` or ``"gat"``.
        embedding (str): ``"tt"``, ``"full"`` or ``"features"``.
        dim (int): embedding dimension. rank (int): TT rank. num_cores (int): TT cores.
        row_shape, col_shape (list of int, optional): TT shapes (automatic when ``None``).
        order (str): node order for the TT rows, one of :data:`ORDERS`.
        init (str): ``"ortho"`` or ``"gaussian"`` TT init.
        init_scale (float): std of the initial table entries, for every embedding kind: the
            ``"gaussian"`` TT std, the ``"full"`` table's normal std, and for ``"ortho"`` the gain
            ``init_scale * sqrt(padded rows)`` (so ``W^T W = init_scale^2 * rows * I``).
        hidden, num_layers, heads (int): network size. dropout, input_dropout, attn_dropout (float).
        norm (str): ``"batch"``, ``"layer"``, ``"none"``. residual (bool): linear skips.
        mode (str): ``"full"`` (full-graph) or ``"minibatch"`` (neighbour sampling).
        fanouts (list of int): neighbours sampled per layer in mini-batch mode.
        batch_size (int): training nodes per mini-batch. eval_batch_size (int): for inference.
        epochs (int): epochs. lr, weight_decay: GNN optimiser. emb_lr, emb_weight_decay: embedding's.
        label_smoothing (float): cross-entropy label smoothing.
        label_input (bool): label reuse: add a learned vector of each known training label to
            its node's input (:class:`~ttgnn.models.LabelInput`). Every epoch a random
            ``label_rate`` of the training nodes show their labels and the loss is on the other
            training nodes; evaluation shows every training label. Validation and test labels
            are never inputs. The per-class table counts with the GNN's parameters.
        label_rate (float): share of training nodes whose labels are inputs in an epoch.
        correct_smooth (bool): after training, apply Correct and Smooth (label propagation from
            the training nodes, :mod:`ttgnn.smoothing`) to the best model's predictions and report
            its accuracies as well (``metrics["correct_smooth"]``); it needs about four
            ``N x classes`` float matrices of memory.
        seed (int): random seed. num_threads (int, optional): torch threads.
        output_dir (str, optional): checkpoints and ``metrics.json`` go here.
        resume (bool): continue from ``output_dir/checkpoint.pt`` when present.
        progress (bool): tqdm bars.
    """

    dataset: str = "ogbn-arxiv"
    root: Optional[str] = None
    cache_dir: Optional[str] = None
    model: str = "sage"
    embedding: str = "tt"
    dim: int = 128
    rank: int = 8
    num_cores: int = 3
    row_shape: Optional[list] = None
    col_shape: Optional[list] = None
    order: str = "hierarchical-metis"
    init: str = "ortho"
    init_scale: float = 1.0
    hidden: int = 128
    num_layers: int = 3
    heads: int = 4
    dropout: float = 0.2
    input_dropout: float = 0.0
    attn_dropout: float = 0.0
    norm: str = "batch"
    residual: bool = False
    mode: str = "full"
    fanouts: list = field(default_factory=lambda: [15, 10, 5])
    batch_size: int = 1024
    eval_batch_size: int = 8192
    epochs: int = 100
    lr: float = 0.02
    weight_decay: float = 0.0
    emb_lr: float = 0.05
    emb_weight_decay: float = 0.0
    label_smoothing: float = 0.0
    label_input: bool = False
    label_rate: float = 0.5
    correct_smooth: bool = True
    seed: int = 0
    num_threads: Optional[int] = None
    output_dir: Optional[str] = None
    resume: bool = False
    progress: bool = True

    def validate(self) -> None:
        """Raise ``ValueError`` on an out-of-range setting."""
        choices = {"model": MODELS, "embedding": EMBEDDINGS, "order": ORDERS, "mode": MODES, "norm": NORMS}
        for key, valid in choices.items():
            if getattr(self, key) not in valid:
                raise ValueError(f"{key} must be one of {valid}, got {getattr(self, key)!r}")
        for key in ("epochs", "dim", "rank", "hidden", "num_layers", "heads", "batch_size", "eval_batch_size"):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        for key in ("dropout", "input_dropout", "attn_dropout", "label_smoothing"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"{key} must be in [0, 1), got {getattr(self, key)}")
        if not 0.0 < self.label_rate < 1.0:
            raise ValueError(f"label_rate must be in (0, 1), got {self.label_rate}")
        if self.mode == "minibatch" and len(self.fanouts) != self.num_layers:
            raise ValueError(f"need one fan-out per layer: {self.num_layers} layers, fanouts {self.fanouts}")
        if self.resume and not self.output_dir:
            raise ValueError("resume needs output_dir")


# ---------------------------------------------------------------------- helpers
def _seed_epoch(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed every random source from (seed, epoch, rank): epochs are reproducible in isolation."""
    import dgl

    value = (seed * 1_000_003 + epoch * 7_919 + rank * 104_729) % (2**31 - 1)
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)
    dgl.seed(value)


def _peak_memory_mib() -> float:
    """Peak resident memory of this process so far, MiB (CUDA peak when on a GPU)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _atomic_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _atomic_write_json(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(obj, fh, indent=2)
    os.replace(tmp, path)


def load_checkpoint(path) -> dict:
    """Read a checkpoint written by :func:`train`; a clear ``ValueError`` when it is corrupted."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - torch raises many types for a damaged file
        raise ValueError(f"corrupted checkpoint {path}: {type(err).__name__}: {err}") from None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION or "model" not in state:
        raise ValueError(f"corrupted checkpoint {path}: not a ttgnn checkpoint (version {CHECKPOINT_VERSION})")
    return state


def _build_order(config: TrainConfig, dataset: NodeDataset, row_shape) -> Optional[torch.Tensor]:
    if config.order == "identity":
        return None
    from .partition import hierarchical_order

    order = hierarchical_order(dataset.csr(), list(row_shape), method=config.order, seed=config.seed,
                               cache_dir=config.cache_dir)
    return torch.from_numpy(np.asarray(order.perm, dtype=np.int64))


def build_classifier(config: TrainConfig, dataset: NodeDataset):
    """The :class:`~ttgnn.models.NodeClassifier` of ``config`` for ``dataset`` (TT node order computed here)."""
    from .models import NodeInput, build_model

    kwargs = {}
    if config.embedding == "tt":
        from .shapes import TTShape

        shape = TTShape.build(dataset.num_nodes, config.dim, config.rank, config.num_cores,
                              config.row_shape, config.col_shape)
        generator = torch.Generator().manual_seed(config.seed)
        scale = config.init_scale * (shape.num_rows_padded ** 0.5 if config.init == "ortho" else 1.0)
        kwargs = dict(ranks=config.rank, num_cores=config.num_cores, row_shape=shape.row_shape,
                      col_shape=shape.col_shape, init=config.init, init_scale=scale,
                      node_order=_build_order(config, dataset, shape.row_shape), generator=generator)
    elif config.embedding == "full":
        kwargs = dict(full_init_std=config.init_scale)
    node_input = NodeInput(config.embedding, dataset.num_nodes, config.dim, features=dataset.features, **kwargs)
    return build_model(config.model, node_input, dataset.num_classes, hidden=config.hidden,
                       num_layers=config.num_layers, dropout=config.dropout, input_dropout=config.input_dropout,
                       norm=config.norm, residual=config.residual, heads=config.heads,
                       attn_dropout=config.attn_dropout, label_input=config.label_input)


def known_labels(dataset: NodeDataset, known: Optional[torch.Tensor]) -> torch.Tensor:
    """``(N,)`` label ids for a label-input model: ``labels[v]`` for ``v`` in ``known``, and
    ``num_classes`` (unknown) everywhere else."""
    out = torch.full((dataset.num_nodes,), dataset.num_classes, dtype=torch.long, device=dataset.labels.device)
    if known is not None and known.numel():
        known = known.to(out.device)
        out[known] = dataset.labels[known].long()
    return out


def split_known(train_nodes: torch.Tensor, rate: float, seed: int, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(known, target)``: a random ``rate`` of ``train_nodes`` whose labels are inputs this epoch,
    and the rest, on which the loss is taken. Drawn from ``(seed, epoch)`` alone, so every rank of a
    data-parallel run, and a resumed run, draws the same split."""
    generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch * 7_919 + 17) % (2**31 - 1))
    mask = torch.rand(train_nodes.numel(), generator=generator) < rate
    nodes = train_nodes.cpu()
    return nodes[mask], nodes[~mask]


def _eval_labels(model, dataset: NodeDataset) -> Optional[torch.Tensor]:
    """Every training label as input (validation and test labels never), for a label-input model."""
    if getattr(model, "label_input", None) is None:
        return None
    return known_labels(dataset, dataset.split["train"])


class _Accuracy:
    """``ogb.nodeproppred.Evaluator`` accuracy for ogbn-* datasets, plain accuracy otherwise."""

    def __init__(self, evaluator_name: Optional[str]) -> None:
        self.evaluator = None
        if evaluator_name:
            from ogb.nodeproppred import Evaluator

            self.evaluator = Evaluator(evaluator_name)

    def __call__(self, pred: torch.Tensor, labels: torch.Tensor) -> float:
        if labels.numel() == 0:
            return float("nan")
        if self.evaluator is not None:
            return float(self.evaluator.eval({"y_true": labels.view(-1, 1), "y_pred": pred.view(-1, 1)})["acc"])
        return float((pred == labels).float().mean())


@torch.no_grad()
def _all_logits(model, graph, mode: str, eval_batch_size: int, dataset: NodeDataset) -> torch.Tensor:
    model.eval()
    labels = _eval_labels(model, dataset)
    if mode == "full":
        return model(graph, input_labels=labels)
    return model.inference(graph, batch_size=eval_batch_size, input_labels=labels)


@torch.no_grad()
def evaluate(model, graph, dataset: NodeDataset, mode: str, eval_batch_size: int = 8192,
             accuracy: Optional[_Accuracy] = None) -> dict:
    """Accuracies ``{"train", "valid", "test"}`` and the validation loss of ``model`` on ``dataset``."""
    logits = _all_logits(model, graph, mode, eval_batch_size, dataset)
    pred = logits.argmax(1)
    accuracy = accuracy or _Accuracy(dataset.evaluator_name)
    result = {key: accuracy(pred[idx], dataset.labels[idx]) for key, idx in dataset.split.items()}
    valid = dataset.split["valid"]
    result["valid_loss"] = float(F.cross_entropy(logits[valid], dataset.labels[valid])) if valid.numel() else float("nan")
    return result


def correct_and_smooth_metrics(model, graph, dataset: NodeDataset, mode: str, eval_batch_size: int = 8192,
                               accuracy: Optional[_Accuracy] = None) -> dict:
    """Accuracies of ``model``'s predictions after Correct and Smooth (strengths tuned on validation).

    Only the training labels are propagated (:func:`ttgnn.smoothing.tune_correct_and_smooth`).
    Returns ``{"valid_acc", "test_acc", "train_acc", "correct_alpha", "smooth_alpha", "seconds"}``.
    """
    from .smoothing import normalized_adjacency, tune_correct_and_smooth

    start = time.perf_counter()
    logits = _all_logits(model, graph, mode, eval_batch_size, dataset).cpu()
    labels = dataset.labels.cpu()
    adjacency = normalized_adjacency(*dataset.csr(), dataset.num_nodes)
    split = {key: idx.cpu() for key, idx in dataset.split.items()}
    result = tune_correct_and_smooth(logits, adjacency, labels, split["train"], split["valid"])
    accuracy = accuracy or _Accuracy(dataset.evaluator_name)
    scores = {f"{key}_acc": accuracy(result.pred[idx], labels[idx]) for key, idx in split.items()}
    return dict(scores, correct_alpha=result.correct_alpha, smooth_alpha=result.smooth_alpha,
                seconds=time.perf_counter() - start)


def _train_epoch_full(model, graph, dataset, optimizer, train_idx, config, input_labels=None) -> float:
    model.train()
    optimizer.zero_grad(set_to_none=True)
    logits = model(graph, input_labels=input_labels)
    loss = F.cross_entropy(logits[train_idx], dataset.labels[train_idx], label_smoothing=config.label_smoothing)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _train_epoch_minibatch(model, graph, dataset, optimizer, train_idx, config, show, epoch: int = 0,
                           input_labels=None) -> float:
    import dgl
    from tqdm.auto import tqdm

    model.train()
    device = next(model.parameters()).device
    sampler = dgl.dataloading.NeighborSampler(list(config.fanouts))
    loader = dgl.dataloading.DataLoader(graph, train_idx.to(graph.idtype), sampler, batch_size=config.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0,
                                        device=None if device.type == "cpu" else device)
    total, count = 0.0, 0
    for step, (input_nodes, output_nodes, blocks) in enumerate(tqdm(loader, disable=not show, leave=False,
                                                                    desc="train")):
        tdist.maybe_inject_fault(epoch, step)  # test hook, inert unless $TTGNN_FAULT is set
        optimizer.zero_grad(set_to_none=True)
        logits = model(blocks, input_nodes.long(), input_labels=input_labels)
        labels = dataset.labels[output_nodes.long()]
        loss = F.cross_entropy(logits, labels, label_smoothing=config.label_smoothing)
        loss.backward()
        optimizer.step()
        total += float(loss.detach()) * labels.numel()
        count += labels.numel()
    return total / max(count, 1)


def train(config: TrainConfig, dataset: Optional[NodeDataset] = None, rank: Optional[int] = None,
          world_size: Optional[int] = None, device: Optional[torch.device] = None) -> dict:
    """Train and evaluate one configuration; returns the metrics dict also written to ``metrics.json``.

    Args:
        config (TrainConfig): the settings.
        dataset (NodeDataset, optional): an already loaded dataset. (default: loaded from
            ``config.dataset``)
        rank (int, optional): this process's rank; only rank 0 evaluates, logs and writes.
            (default: the rank in the process group, else ``0``)
        world_size (int, optional): number of processes; ``> 1`` needs an initialised process
            group of that size (:func:`ttgnn.distributed.setup`), and each rank trains on the
            shard :func:`ttgnn.distributed.epoch_shard` gives it. (default: the process group's
            size, else ``1``)
        device (torch.device, optional): where to train (``cuda:LOCAL_RANK`` under torchrun on
            GPUs, which needs a CUDA build of DGL). (default: CPU)
    """
    config.validate()
    rank = tdist.get_rank() if rank is None else rank
    world_size = tdist.get_world_size() if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if world_size > 1 and tdist.get_world_size() != world_size:
        raise ValueError(f"world_size={world_size} needs an initialised process group of that size (launch with "
                         f"torchrun; see ttgnn.distributed.setup), got {tdist.get_world_size()}")
    device = torch.device("cpu") if device is None else torch.device(device)
    main = rank == 0
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    if dataset is None:
        dataset = load_dataset(config.dataset, config.root, config.cache_dir)
    if config.embedding == "full" and config.order != "identity":
        log.info("order %r applies to TT embeddings only; ignored for %r", config.order, config.embedding)
    if dataset.labels[dataset.split["train"]].min() < 0:
        raise ValueError(f"training nodes of {dataset.name} include unlabeled nodes (label -1)")
    if main:
        log.info("%s", dataset)

    _seed_epoch(config.seed, 0, 0)  # model init is identical on every rank
    model = build_classifier(config, dataset).to(device)
    graph = dataset.dgl_graph(self_loops=True)
    if device.type != "cpu":
        dataset = dataclasses.replace(dataset, labels=dataset.labels.to(device))
        if config.mode == "full":
            graph = graph.to(device)
    emb_params, gnn_params = model.parameter_groups()
    groups = [dict(params=gnn_params, lr=config.lr, weight_decay=config.weight_decay)]
    if emb_params:
        groups.append(dict(params=emb_params, lr=config.emb_lr, weight_decay=config.emb_weight_decay))
    optimizer = torch.optim.Adam(groups)
    train_idx = dataset.split["train"][rank::world_size]
    accuracy = _Accuracy(dataset.evaluator_name)

    emb_param_count = model.node_input.num_parameters
    gnn_param_count = sum(p.numel() for p in gnn_params)
    settings = dataclasses.asdict(config)
    metrics = {
        "dataset": dataset.name, "model": config.model, "embedding": config.embedding,
        "order": config.order if config.embedding == "tt" else None,
        "rank": config.rank if config.embedding == "tt" else None,
        "compression_ratio": model.node_input.compression_ratio,
        "embedding_parameters": emb_param_count, "gnn_parameters": gnn_param_count,
        "label_input": config.label_input,
        "best_valid_acc": 0.0, "test_acc": 0.0, "best_epoch": 0, "epochs": [], "settings": settings,
        "world_size": world_size,
    }
    if config.embedding == "tt":
        tt = model.node_input.table
        metrics.update(row_shape=list(tt.row_shape), col_shape=list(tt.col_shape), ranks=list(tt.ranks))
    out_dir = Path(config.output_dir) if config.output_dir else None
    ckpt_path = out_dir / CHECKPOINT_NAME if out_dir else None
    best_path = out_dir / BEST_MODEL_NAME if out_dir else None
    best_state = None  # weights of the best-on-validation epoch (rank 0)
    start_epoch = 1
    # An elastic restart (torchrun --max-restarts) continues from the last complete checkpoint.
    resume = config.resume or (world_size > 1 and ckpt_path is not None and tdist.detect().restart_count > 0)
    state = load_checkpoint(ckpt_path) if resume and main and ckpt_path is not None and ckpt_path.exists() else None
    if world_size > 1:
        state = tdist.broadcast_object(state)  # rank 0's file: no shared file system needed
    if state is not None:
        saved = dict(state.get("settings", {}))
        for key in ("dataset", "model", "embedding", "rank", "order", "seed", "mode", "hidden", "num_layers",
                    "label_input"):
            if key in saved and saved[key] != settings[key]:
                raise ValueError(f"checkpoint {ckpt_path} was written with {key}={saved[key]!r}, "
                                 f"this run has {key}={settings[key]!r}")
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            for group_state in optimizer.state.values():  # saved on the CPU
                for key, value in group_state.items():
                    if torch.is_tensor(value) and key != "step":
                        group_state[key] = value.to(device)
        except (RuntimeError, KeyError, ValueError) as err:
            raise ValueError(f"corrupted checkpoint {ckpt_path}: {err}") from None
        for key in ("best_valid_acc", "test_acc", "best_epoch", "epochs"):
            metrics[key] = state["metrics"][key]
        start_epoch = int(state["epoch"]) + 1
        if main:
            log.info("resumed from %s at epoch %d", ckpt_path, start_epoch)
            if best_path.exists():
                best = load_checkpoint(best_path)
                if best.get("epoch") != metrics["best_epoch"]:
                    raise ValueError(f"corrupted checkpoint {best_path}: it holds epoch {best.get('epoch')}, "
                                     f"{ckpt_path} says the best epoch is {metrics['best_epoch']}")
                best_state = best["model"]
    elif resume and main:
        log.info("no checkpoint at %s; starting from scratch", ckpt_path)
    net = tdist.wrap_model(model) if world_size > 1 else model  # DDP: gradients averaged over ranks

    if main:
        log.info("model: %s / %s embedding (%s params, %.1fx compression) + %s params in the GNN",
                 config.model, config.embedding, f"{emb_param_count:,}", metrics["compression_ratio"],
                 f"{gnn_param_count:,}")
    from tqdm.auto import tqdm

    show = bool(config.progress and main)
    epochs = tqdm(range(start_epoch, config.epochs + 1), disable=not show or config.mode == "minibatch",
                  desc="epochs", leave=False, initial=start_epoch - 1, total=config.epochs)
    for epoch in epochs:
        _seed_epoch(config.seed, epoch, rank)
        if world_size > 1:  # disjoint, equally sized shards: every rank runs the same number of steps
            train_idx = tdist.epoch_shard(dataset.split["train"], epoch, config.seed, rank, world_size)
        start = time.perf_counter()
        epoch_idx, input_labels = train_idx, None
        if config.label_input:  # labels of the known part are inputs; the loss is on the rest
            known, target = split_known(dataset.split["train"], config.label_rate, config.seed, epoch)
            input_labels = known_labels(dataset, known)
            if world_size > 1:  # the same split on every rank; equal shards of its targets
                target = tdist.epoch_shard(target, epoch, config.seed, rank, world_size)
            epoch_idx = target.to(train_idx.device)
        if config.mode == "full":
            tdist.maybe_inject_fault(epoch, 0)  # test hook, inert unless $TTGNN_FAULT is set
            loss = _train_epoch_full(net, graph, dataset, optimizer, epoch_idx, config, input_labels)
        else:
            loss = _train_epoch_minibatch(net, graph, dataset, optimizer, epoch_idx, config, show, epoch,
                                          input_labels)
        if world_size > 1:  # equal shard sizes: the mean of the ranks' means is the epoch mean
            loss = tdist.all_reduce_sums({"loss": loss})["loss"] / world_size
            tdist.barrier()  # every rank has finished the epoch before rank 0 evaluates and saves
        train_time = time.perf_counter() - start
        if main:
            result = evaluate(model, graph, dataset, config.mode, config.eval_batch_size, accuracy)
            record = {"epoch": epoch, "loss": loss, "train_acc": result["train"], "valid_acc": result["valid"],
                      "test_acc": result["test"], "valid_loss": result["valid_loss"], "epoch_time": train_time,
                      "eval_time": time.perf_counter() - start - train_time, "peak_memory_mib": _peak_memory_mib()}
            metrics["epochs"].append(record)
            if result["valid"] > metrics["best_valid_acc"]:
                metrics.update(best_valid_acc=result["valid"], test_acc=result["test"], best_epoch=epoch)
                best_state = {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}
                if best_path is not None:  # before the checkpoint that names this epoch as the best
                    _atomic_save({"version": CHECKPOINT_VERSION, "epoch": epoch, "model": best_state,
                                  "settings": settings}, best_path)
            log.info("epoch %3d | loss %.4f | train %.4f valid %.4f test %.4f | best valid %.4f (test %.4f, "
                     "epoch %d) | %.2fs train + %.2fs eval | peak mem %.0f MiB", epoch, loss, result["train"],
                     result["valid"], result["test"], metrics["best_valid_acc"], metrics["test_acc"],
                     metrics["best_epoch"], train_time, record["eval_time"], record["peak_memory_mib"])
            if out_dir is not None:
                _atomic_save({"version": CHECKPOINT_VERSION, "epoch": epoch, "model": model.state_dict(),
                              "optimizer": optimizer.state_dict(), "metrics": metrics, "settings": settings,
                              "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                                      "python": random.getstate()}}, ckpt_path)
                _atomic_write_json(_summary(metrics), out_dir / METRICS_NAME)
        tdist.barrier()  # no rank starts the next epoch before this epoch's checkpoint exists
    if main and config.correct_smooth and metrics["epochs"]:
        metrics["correct_smooth"] = _final_correct_smooth(model, best_state, graph, dataset, config, accuracy,
                                                          metrics["best_epoch"], metrics["epochs"][-1]["epoch"])
    if world_size > 1:
        metrics = tdist.broadcast_object(metrics)  # every rank returns rank 0's metrics
    summary = _summary(metrics)
    if main and out_dir is not None:
        _atomic_write_json(summary, out_dir / METRICS_NAME)
    return summary


def _final_correct_smooth(model, best_state, graph, dataset, config, accuracy, best_epoch: int,
                          last_epoch: int) -> dict:
    """Correct and Smooth on the best epoch's model (a copy; ``model`` keeps its last weights)."""
    import copy

    evaluated = copy.deepcopy(model)
    if best_state is not None:
        evaluated.load_state_dict(best_state)
        epoch = best_epoch
    else:  # a run resumed from a checkpoint written before best_model.pt existed
        log.warning("best model weights not found; Correct and Smooth uses the last epoch's model")
        epoch = last_epoch
    result = correct_and_smooth_metrics(evaluated, graph, dataset, config.mode, config.eval_batch_size, accuracy)
    result["epoch"] = epoch
    log.info("correct and smooth (epoch %s model, alphas %.2f/%.2f): train %.4f valid %.4f test %.4f | %.1fs",
             epoch, result["correct_alpha"], result["smooth_alpha"], result["train_acc"], result["valid_acc"],
             result["test_acc"], result["seconds"])
    return result


def _summary(metrics: dict) -> dict:
    summary = dict(metrics)
    records = metrics["epochs"]
    times = [r["epoch_time"] for r in records]
    # The first epoch includes one-off warm-up; the median is the representative epoch time.
    summary["epoch_time"] = float(np.median(times)) if times else None
    summary["peak_memory_mib"] = max((r["peak_memory_mib"] for r in records), default=None)
    summary["valid_acc_at_best"] = metrics["best_valid_acc"]
    return summary
