"""Evaluation of node classifiers: accuracy per split, validation loss, Correct and Smooth.

Accuracy is ``ogb.nodeproppred.Evaluator``'s for ``ogbn-*`` datasets and plain accuracy otherwise.
A label-input model sees every training label at evaluation, never a validation or test label;
spread over the graph with label spreading (:func:`label_inputs`), and with label reuse it also
sees its own predictions of the other nodes (:func:`reuse_labels`).
"""
from __future__ import annotations

import logging
import time
from typing import Optional

import torch
import torch.nn.functional as F

from .batches import device_batches
from .config import LABEL_SPREAD_ALPHA
from .data import NodeDataset
from .smoothing import spread_labels

log = logging.getLogger(__name__)

__all__ = ["Accuracy", "known_labels", "label_inputs", "model_label_inputs", "soft_labels", "reuse_labels",
           "all_logits", "evaluate", "logits_metrics", "evaluate_sampled", "correct_and_smooth_metrics"]


class Accuracy:
    """``ogb.nodeproppred.Evaluator`` accuracy when ``evaluator_name`` is given, plain accuracy otherwise.

    ``accuracy(pred, labels)`` takes ``(B,)`` predicted and true class ids (or ``(B, 1)``, as ogb
    writes them); ``nan`` for ``B = 0``. A different number of entries is a ``ValueError``.
    """

    def __init__(self, evaluator_name: Optional[str] = None) -> None:
        self.evaluator = None
        if evaluator_name:
            from ogb.nodeproppred import Evaluator

            self.evaluator = Evaluator(evaluator_name)

    def __call__(self, pred: torch.Tensor, labels: torch.Tensor) -> float:
        # Flat, so that a (B, 1) column against (B,) ids compares node by node (broadcasting them
        # compared every pair: a silent wrong figure).
        pred, labels = pred.reshape(-1), labels.reshape(-1)
        if pred.numel() != labels.numel():
            raise ValueError(f"{pred.numel()} predictions for {labels.numel()} labels: one class id per node in each")
        if labels.numel() == 0:
            return float("nan")
        if self.evaluator is not None:
            return float(self.evaluator.eval({"y_true": labels.view(-1, 1), "y_pred": pred.view(-1, 1)})["acc"])
        return float((pred == labels).float().mean())


def known_labels(dataset: NodeDataset, known: Optional[torch.Tensor]) -> torch.Tensor:
    """``(N,)`` label ids for a label-input model: ``labels[v]`` for ``v`` in ``known``, and
    ``num_classes`` (unknown) everywhere else."""
    out = torch.full((dataset.num_nodes,), dataset.num_classes, dtype=torch.long, device=dataset.labels.device)
    if known is not None and known.numel():
        known = known.to(out.device)
        out[known] = dataset.labels[known].long()
    return out


def _eval_labels(model, dataset: NodeDataset) -> Optional[torch.Tensor]:
    """Every training label as input (validation and test labels never), for a label-input model."""
    if getattr(model, "label_input", None) is None:
        return None
    return known_labels(dataset, dataset.split["train"])


def soft_labels(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``(N, C)`` label input for label reuse: the one-hot of ``labels[v]`` where it is known (``< C``)
    and ``softmax(logits[v])`` everywhere else.

    Args:
        logits: ``(N, C)`` predictions. labels: ``(N,)`` label ids, ``C`` where unknown.
    """
    num_classes = logits.shape[1]
    labels = labels.to(logits.device)
    out = torch.softmax(logits.float(), dim=1)
    known = labels < num_classes
    out[known] = F.one_hot(labels[known].long(), num_classes).to(out.dtype)
    return out


def _forward_all(model, graph, mode: str, eval_batch_size: int, labels: Optional[torch.Tensor],
                 progress: bool = False) -> torch.Tensor:
    if mode == "full":
        return model(graph, input_labels=labels)
    return model.inference(graph, batch_size=eval_batch_size, input_labels=labels, progress=progress)


def label_inputs(model, dataset: NodeDataset, labels: torch.Tensor) -> torch.Tensor:
    """The first label input of a label-input ``model`` from the known ``labels`` (``(N,)`` ids,
    ``C`` = unknown): ``labels`` themselves, or with ``model.label_input.spread_steps > 0`` the
    ``(N, C)`` spread of them over ``dataset``'s graph (:func:`ttgnn.smoothing.spread_labels`:
    known nodes one-hot, the others the class distribution of the known labels around them)."""
    steps = model.label_input.spread_steps
    if not steps:
        return labels
    return spread_labels(dataset.normalized_adjacency(labels.device), labels, dataset.num_classes, steps,
                         LABEL_SPREAD_ALPHA)


def model_label_inputs(model, graph, mode: str, eval_batch_size: int, dataset: NodeDataset, labels: torch.Tensor,
                       progress: bool = False) -> torch.Tensor:
    """What a label-input ``model`` is fed from the known ``labels`` (``(N,)`` ids, ``C`` =
    unknown): spread over the graph (:func:`label_inputs`), then ``model.label_input.reuse_iters``
    rounds of its own predictions (:func:`reuse_labels`; those leave the model in eval mode).
    Training (known: part of the training labels) and evaluation (known: all of them) both feed
    their model through here."""
    start = label_inputs(model, dataset, labels)
    if not model.label_input.reuse_iters:
        return start
    return reuse_labels(model, graph, mode, eval_batch_size, labels, progress=progress, start=start)


@torch.no_grad()
def reuse_labels(model, graph, mode: str, eval_batch_size: int, labels: torch.Tensor,
                 iters: Optional[int] = None, progress: bool = False,
                 start: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Label reuse: ``(N, C)`` label inputs built from ``model``'s own predictions, ``iters`` times.

    Starting from ``start`` (default: the known ``labels``, ``(N,)`` ids, ``C`` = unknown), each
    round runs ``model`` (in eval mode, on all nodes as :func:`all_logits` does) and replaces the
    input of every node without a known label by its predicted class probabilities
    (:func:`soft_labels`); known labels stay one-hot. The model is left in eval mode.

    Args:
        iters (int, optional): rounds (default: ``model.label_input.reuse_iters``); ``0`` returns
            the start unchanged.
        progress (bool, optional): tqdm bars for mini-batch inference. (default: ``False``)
        start (Tensor, optional): the first round's input, e.g. :func:`label_inputs`' spread
            labels. (default: ``labels``)
    """
    iters = model.label_input.reuse_iters if iters is None else iters
    model.eval()
    current = labels if start is None else start
    for _ in range(iters):
        current = soft_labels(_forward_all(model, graph, mode, eval_batch_size, current, progress), labels)
    return current


@torch.no_grad()
def all_logits(model, graph, mode: str, eval_batch_size: int, dataset: NodeDataset,
               progress: bool = False) -> torch.Tensor:
    """``(N, C)`` logits of every node: one full-graph forward (``mode="full"``), else layer-wise
    full-neighbour inference in batches of ``eval_batch_size`` destination nodes (tqdm bars with
    ``progress``); a label-input model sees every training label (spread with
    :func:`label_inputs`), and a label-reuse model runs ``reuse_iters`` more such passes first
    (:func:`reuse_labels`)."""
    model.eval()
    labels = _eval_labels(model, dataset)
    if labels is not None:
        labels = model_label_inputs(model, graph, mode, eval_batch_size, dataset, labels, progress)
    return _forward_all(model, graph, mode, eval_batch_size, labels, progress)


@torch.no_grad()
def evaluate(model, graph, dataset: NodeDataset, mode: str, eval_batch_size: int = 8192,
             accuracy: Optional[Accuracy] = None, progress: bool = False) -> dict:
    """Accuracies ``{"train", "valid", "test"}`` and the validation loss ``"valid_loss"`` of ``model``
    (tqdm bars of mini-batch inference with ``progress``)."""
    return logits_metrics(all_logits(model, graph, mode, eval_batch_size, dataset, progress), dataset, accuracy)


def logits_metrics(logits: torch.Tensor, dataset: NodeDataset, accuracy: Optional[Accuracy] = None) -> dict:
    """:func:`evaluate`'s figures from ``(N, C)`` logits of every node already computed."""
    pred = logits.argmax(1)
    accuracy = accuracy or Accuracy(dataset.evaluator_name)
    result = {key: accuracy(pred[idx], dataset.labels[idx]) for key, idx in dataset.split.items()}
    valid = dataset.split["valid"]
    result["valid_loss"] = float(F.cross_entropy(logits[valid], dataset.labels[valid])) if valid.numel() else float("nan")
    return result


@torch.no_grad()
def evaluate_sampled(model, graph, dataset: NodeDataset, fanouts, batch_size: int = 8192,
                     device: Optional[torch.device] = None, accuracy: Optional[Accuracy] = None,
                     progress: bool = False) -> dict:
    """:func:`evaluate` on sampled neighbourhoods: only the split nodes' logits are computed.

    Each split's nodes go through ``model`` (eval mode) in batches of ``batch_size``, each on the
    blocks of a DGL neighbour sampler with ``fanouts`` (one per layer, innermost last as in
    training). Memory grows with the batch and the fan-outs (plus 16 bytes per split node), not
    with the graph, so a graph whose ``(N, hidden)`` activations do not fit can be evaluated; with
    fan-outs of at least the largest in-degree it equals :func:`evaluate`. The sampling draws from
    DGL's and torch's generators: seed them for repeatable results.

    Args:
        graph (DGLGraph): the graph training samples from (on the CPU).
        fanouts (list of int): neighbours sampled per layer.
        device (torch.device, optional): where the model runs. (default: the model's device)
        progress (bool, optional): a tqdm bar per split. (default: ``False``)

    Returns:
        ``{"train", "valid", "test"}`` accuracies and ``"valid_loss"``, as :func:`evaluate`.
    """
    import dgl
    from tqdm.auto import tqdm

    device = device or next(model.parameters()).device
    model.eval()
    labels = _eval_labels(model, dataset)
    if labels is not None:
        labels = label_inputs(model, dataset, labels)
    sampler = dgl.dataloading.NeighborSampler(list(fanouts))
    accuracy = accuracy or Accuracy(dataset.evaluator_name)
    result = {"valid_loss": float("nan")}
    for key, nodes in dataset.split.items():
        if nodes.numel() == 0:
            result[key] = float("nan")
            continue
        loader = dgl.dataloading.DataLoader(graph, nodes.cpu().to(graph.idtype), sampler, batch_size=batch_size,
                                            shuffle=False, drop_last=False, num_workers=0)
        # Only class ids are kept per node (and the validation loss as a running sum), so the memory
        # beyond one batch is 16 bytes per split node, not a row of logits.
        predicted, outputs, loss_sum = [], [], 0.0
        batches = tqdm(device_batches(loader, model.gnn, device), disable=not progress, leave=False,
                       desc=f"evaluate {key}", total=len(loader))
        for input_nodes, output_nodes, blocks in batches:
            logits = model(blocks, input_nodes, input_labels=labels).float()
            predicted.append(logits.argmax(1).cpu())
            outputs.append(output_nodes.cpu())
            if key == "valid":
                truth = dataset.labels[output_nodes.to(dataset.labels.device)].to(logits.device)
                loss_sum += float(F.cross_entropy(logits, truth, reduction="sum"))
        outputs = torch.cat(outputs).to(dataset.labels.device)  # int64 ids (device_batches)
        truth = dataset.labels[outputs]
        result[key] = accuracy(torch.cat(predicted).to(truth.device), truth)
        if key == "valid":
            result["valid_loss"] = loss_sum / outputs.numel()
    return result


def correct_and_smooth_metrics(model, graph, dataset: NodeDataset, mode: str, eval_batch_size: int = 8192,
                               accuracy: Optional[Accuracy] = None, logits: Optional[torch.Tensor] = None,
                               progress: bool = False) -> dict:
    """Accuracies of ``model``'s predictions after Correct and Smooth (strengths tuned on validation).

    Only the training labels are propagated (:func:`ttgnn.smoothing.tune_correct_and_smooth`), on
    the device of ``model``'s parameters (a GPU's sparse products take seconds where two CPU cores
    take minutes on ogbn-arxiv); a GPU out of memory for them leaves the work to the CPU, with a
    warning. ``logits`` (``(N, C)``, default: :func:`all_logits` of ``model``) saves that pass
    when the caller has them already. ``progress``: a tqdm bar over the propagations.
    Returns ``{"train_acc", "valid_acc", "test_acc", "correct_alpha", "smooth_alpha", "seconds"}``.
    """
    from .smoothing import tune_correct_and_smooth

    start = time.perf_counter()
    if logits is None:
        logits = all_logits(model, graph, mode, eval_batch_size, dataset)
    weight = next(model.parameters(), None)
    device = weight.device if weight is not None else logits.device

    def tune(device: torch.device):
        split = {key: idx.to(device) for key, idx in dataset.split.items()}
        return tune_correct_and_smooth(logits.to(device), dataset.normalized_adjacency(device),
                                       dataset.labels.to(device), split["train"], split["valid"], progress=progress)

    try:
        result = tune(device)
    except torch.cuda.OutOfMemoryError:
        if device.type == "cpu":
            raise
        log.warning("correct and smooth: out of memory on %s; continuing on the CPU (slower)", device)
        dataset.drop_adjacency(device)
        result = tune(torch.device("cpu"))
    labels, pred = dataset.labels.cpu(), result.pred.cpu()
    accuracy = accuracy or Accuracy(dataset.evaluator_name)
    scores = {f"{key}_acc": accuracy(pred[idx.cpu()], labels[idx.cpu()]) for key, idx in dataset.split.items()}
    return dict(scores, correct_alpha=result.correct_alpha, smooth_alpha=result.smooth_alpha,
                seconds=time.perf_counter() - start)
