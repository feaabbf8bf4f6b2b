"""Correct and Smooth: label propagation on top of a trained model's predictions.

`Huang et al., 2021 <https://arxiv.org/abs/2010.13993>`_: a base model's class probabilities are
*corrected* by spreading its errors on the training nodes over the graph, then *smoothed* by
spreading the corrected predictions, with the training nodes clamped to their true labels. It
uses only the graph and the labels of the training nodes, costs a few sparse matrix products, and
adds the multi-hop label agreement of homophilous graphs that a shallow GNN cannot see.

:func:`correct_and_smooth` runs it for given propagation strengths; :func:`tune_correct_and_smooth`
picks them on the validation nodes. Both take the normalised adjacency of the symmetric CSR of
:meth:`ttgnn.data.NodeDataset.csr`. :func:`spread_labels`, the same propagation of the known
labels alone, gives a label-input model its first input (``--label-spread``).
"""
from __future__ import annotations

from dataclasses import dataclass
import warnings
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .config import check_int
from .graph_ops import csr_matmul
from .losses import check_probabilities

__all__ = ["normalized_adjacency", "normalized_adjacency_values", "propagate", "spread_labels", "correct_and_smooth",
           "tune_correct_and_smooth", "SmoothingResult"]


def normalized_adjacency_values(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> tuple:
    r"""``(indptr, indices, values)`` int64/int64/float64 of ``D^{-1/2} A D^{-1/2}`` for a symmetric CSR
    graph (isolated nodes give zero rows); shared by :func:`normalized_adjacency` and :mod:`ttgnn.spectral`."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    if indptr.shape != (num_nodes + 1,):
        raise ValueError(f"indptr must have shape ({num_nodes + 1},), got {indptr.shape}")
    row_lengths = np.diff(indptr)
    falling = bool((row_lengths < 0).any())
    if indptr[0] != 0 or indptr[-1] != indices.shape[0] or falling:
        raise ValueError(f"indptr must rise from 0 to the {indices.shape[0]:,} column indices, got "
                         f"{indptr[0]} ... {indptr[-1]}" + (", falling" if falling else ""))
    if indices.size and (indices.min() < 0 or indices.max() >= num_nodes):  # a negative id read another node's degree
        raise ValueError(f"column indices must lie in [0, {num_nodes}), got [{indices.min()}, {indices.max()}]")
    degree = row_lengths.astype(np.float64)
    inv_sqrt = np.zeros_like(degree)
    np.divide(1.0, np.sqrt(degree), out=inv_sqrt, where=degree > 0)
    rows = np.repeat(np.arange(num_nodes), row_lengths)
    return indptr, indices, inv_sqrt[rows] * inv_sqrt[indices]


def normalized_adjacency(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> torch.Tensor:
    r"""``D^{-1/2} A D^{-1/2}`` of a symmetric graph as a float32 sparse CSR tensor (isolated nodes give zero rows).

    Args:
        indptr (ndarray): ``(N + 1,)`` CSR row pointers.
        indices (ndarray): ``(nnz,)`` CSR column indices.
        num_nodes (int): ``N``.
    """
    indptr, indices, values = normalized_adjacency_values(indptr, indices, num_nodes)
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                       torch.from_numpy(values.astype(np.float32)), size=(num_nodes, num_nodes))


def propagate(adjacency: torch.Tensor, signal: torch.Tensor, alpha: float, num_iterations: int,
              clamp_nodes: torch.Tensor | None = None, clamp_values: torch.Tensor | None = None) -> torch.Tensor:
    r"""Iterate ``X <- alpha * S X + (1 - alpha) * X_0`` (personalised-PageRank propagation).

    ``S X`` is :func:`ttgnn.graph_ops.csr_matmul`: the compiled CPU kernel for a CSR ``S`` on the
    CPU, ``torch.sparse.mm`` otherwise.

    Args:
        adjacency (Tensor): ``S``, sparse ``(N, N)``.
        signal (Tensor): ``X_0``, ``(N, C)``.
        alpha (float): propagation strength in ``[0, 1]``.
        num_iterations (int): iterations.
        clamp_nodes (LongTensor, optional): nodes reset to ``clamp_values`` after every iteration.
        clamp_values (Tensor, optional): ``(len(clamp_nodes), C)``.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    check_int("num_iterations", num_iterations, 0)
    start = (1.0 - alpha) * signal
    current = signal
    for _ in range(num_iterations):
        current = alpha * csr_matmul(adjacency, current) + start
        if clamp_nodes is not None:
            current[clamp_nodes] = clamp_values
    return current


def spread_labels(adjacency: torch.Tensor, labels: torch.Tensor, num_classes: int, steps: int,
                  alpha: float = 0.9) -> torch.Tensor:
    r"""``(N, C)`` class distributions spread from the known labels over the graph (label propagation).

    The one-hot rows of the known labels (zero rows elsewhere) go through ``steps`` iterations of
    :func:`propagate` (``X <- alpha S X + (1 - alpha) X_0``); each row is then scaled to sum to one,
    a row that no known label reached stays zero, and the known nodes keep their one-hot rows. A
    node's own label reaches its row only when it is known: the spread of a node whose label is
    hidden comes from the other known labels alone.

    Args:
        adjacency (Tensor): ``S``, sparse ``(N, N)`` (:func:`normalized_adjacency`); moved to
            ``labels``' device.
        labels (LongTensor): ``(N,)`` class ids, ``num_classes`` where unknown.
        num_classes (int): ``C``.
        steps (int): propagation iterations (hops); ``0`` gives the one-hot rows alone.
        alpha (float, optional): propagation strength in ``[0, 1]``. (default: ``0.9``)

    Returns:
        float32 ``(N, C)`` on ``labels``' device.
    """
    if labels.dim() != 1 or labels.is_floating_point():
        raise ValueError(f"labels must be (N,) class ids, got shape {tuple(labels.shape)} ({labels.dtype})")
    check_int("steps", steps, 0)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) > num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}] ({num_classes} = unknown), got "
                         f"[{int(labels.min())}, {int(labels.max())}]")
    labels = labels.long()  # one_hot takes int64 alone
    known = labels < num_classes
    start = torch.zeros(labels.shape[0], num_classes, dtype=torch.float32, device=labels.device)
    start[known] = F.one_hot(labels[known], num_classes).float()
    if steps == 0:
        return start
    spread = propagate(adjacency.to(labels.device), start, alpha, steps)
    total = spread.sum(1, keepdim=True)
    spread = torch.where(total > 0, spread / total.clamp_min(1e-30), torch.zeros_like(spread))
    spread[known] = start[known]
    return spread


def _check_node_ids(name: str, count: str, ids: torch.Tensor, num_nodes: int) -> None:
    """``ValueError`` unless ``ids`` is a ``(count,)`` tensor of integer node ids in ``[0, num_nodes)``."""
    if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be ({count},) node ids, got shape {tuple(ids.shape)} ({ids.dtype})")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        raise ValueError(f"{name} must lie in [0, {num_nodes}), got [{int(ids.min())}, {int(ids.max())}]")


def _check_inputs(probs: torch.Tensor, adjacency: torch.Tensor, train_idx: torch.Tensor,
                  train_labels: torch.Tensor) -> None:
    """Raise ``ValueError`` unless the scores, graph and known labels of Correct and Smooth fit together."""
    if probs.dim() != 2:
        raise ValueError(f"probs must be (N, C), got shape {tuple(probs.shape)}")
    num_nodes, num_classes = probs.shape
    if tuple(adjacency.shape) != (num_nodes, num_nodes):
        raise ValueError(f"adjacency must be ({num_nodes}, {num_nodes}) for {num_nodes} rows of probs, got "
                         f"{tuple(adjacency.shape)}")
    if not torch.isfinite(probs).all():
        raise ValueError(f"probs holds {int((~torch.isfinite(probs)).sum()):,} non-finite value(s) (NaN or inf)")
    check_probabilities("probs", probs, "; softmax of the logits")  # logits: test accuracy 0.19 on Cora, not 0.70
    _check_node_ids("train_idx", "L", train_idx, num_nodes)
    if train_labels.shape != train_idx.shape:
        raise ValueError(f"train_labels must have train_idx's shape {tuple(train_idx.shape)}, got "
                         f"{tuple(train_labels.shape)}")
    if train_labels.is_floating_point() or train_labels.dtype == torch.bool or train_labels.is_complex():
        raise ValueError(f"train_labels must be class ids, got dtype {train_labels.dtype}")
    if train_labels.numel() and (int(train_labels.min()) < 0 or int(train_labels.max()) >= num_classes):
        raise ValueError(f"train_labels must lie in [0, {num_classes}), got "
                         f"[{int(train_labels.min())}, {int(train_labels.max())}]")


def _correct(probs, adjacency, train_idx, truth, alpha, num_iterations) -> torch.Tensor:
    # Spread the training errors; rescale every node's propagated error to the mean size of a
    # training error (the paper's autoscale), since propagation shrinks it with distance.
    error = torch.zeros_like(probs)
    error[train_idx] = truth - probs[train_idx]
    spread = propagate(adjacency, error, alpha, num_iterations)
    sigma = error[train_idx].abs().sum(1).mean() if train_idx.numel() else probs.new_tensor(0.0)
    norm = spread.abs().sum(1, keepdim=True)
    step = torch.where(norm > 0, sigma * spread / norm.clamp_min(1e-12), torch.zeros_like(spread))
    return (probs + step).clamp(0.0, 1.0)


def _smooth(corrected, adjacency, train_idx, truth, alpha, num_iterations) -> torch.Tensor:
    # The known labels replace the predictions of training nodes, then everything spreads.
    start = corrected.clone()
    start[train_idx] = truth
    return propagate(adjacency, start, alpha, num_iterations)


def correct_and_smooth(probs: torch.Tensor, adjacency: torch.Tensor, train_idx: torch.Tensor,
                       train_labels: torch.Tensor, *, correct_alpha: float = 0.9, smooth_alpha: float = 0.8,
                       num_iterations: int = 50) -> torch.Tensor:
    r"""Correct-and-smooth class scores (autoscaled correction, as in the paper).

    Args:
        probs (Tensor): base predictions, ``(N, C)`` class probabilities (softmax of the logits).
        adjacency (Tensor): ``D^{-1/2} A D^{-1/2}`` from :func:`normalized_adjacency`.
        train_idx (LongTensor): ``(L,)`` nodes whose labels are known.
        train_labels (LongTensor): ``(L,)`` their labels in ``[0, C)``.
        correct_alpha (float, optional): propagation strength of the errors. (default: ``0.9``)
        smooth_alpha (float, optional): propagation strength of the predictions. (default: ``0.8``)
        num_iterations (int, optional): iterations of each propagation. (default: ``50``)

    Raises:
        ValueError: shapes that do not fit together, ``probs`` that are not probabilities (a value
            outside ``[0, 1]``, a row sum off 1 by more than ``1e-3``: logits, say) or not finite,
            node ids or labels out of range, an alpha outside ``[0, 1]``.

    Shapes:
        - **output:** ``(N, C)`` scores; their ``argmax`` is the prediction.
    """
    _check_inputs(probs, adjacency, train_idx, train_labels)
    probs = probs.float()
    truth = torch.nn.functional.one_hot(train_labels.long(), probs.shape[1]).float()  # one_hot takes int64 alone
    corrected = _correct(probs, adjacency, train_idx, truth, correct_alpha, num_iterations)
    return _smooth(corrected, adjacency, train_idx, truth, smooth_alpha, num_iterations)


@dataclass(frozen=True)
class SmoothingResult:
    """Outcome of :func:`tune_correct_and_smooth`.

    Attributes:
        pred (LongTensor): ``(N,)`` predicted classes with the chosen strengths.
        correct_alpha (float): chosen error propagation strength.
        smooth_alpha (float): chosen prediction propagation strength.
        valid_acc (float): validation accuracy with them (the selection criterion).
    """

    pred: torch.Tensor
    correct_alpha: float
    smooth_alpha: float
    valid_acc: float


def tune_correct_and_smooth(logits: torch.Tensor, adjacency: torch.Tensor, labels: torch.Tensor,
                            train_idx: torch.Tensor, valid_idx: torch.Tensor, *,
                            correct_alphas: Sequence[float] = (0.5, 0.8, 0.95),
                            smooth_alphas: Sequence[float] = (0.5, 0.7, 0.85),
                            num_iterations: int = 50, progress: bool = False) -> SmoothingResult:
    """Correct and smooth with the strengths that give the best validation accuracy.

    Only the labels of ``train_idx`` enter the propagation; ``valid_idx`` only selects the
    strengths, so test accuracy measured on the result is a fair estimate. The inputs may be on
    any one device (the work is done there).

    Args:
        logits (Tensor): ``(N, C)`` base model outputs.
        adjacency (Tensor): from :func:`normalized_adjacency`.
        labels (LongTensor): ``(N,)`` labels (only ``train_idx`` and ``valid_idx`` are read).
        train_idx, valid_idx (LongTensor): node ids.
        correct_alphas, smooth_alphas (sequence of float, optional): the grid.
        num_iterations (int, optional): iterations of each propagation. (default: ``50``)
        progress (bool, optional): a tqdm bar over the propagations (one per correction and one per
            pair of strengths). (default: ``False``)

    Raises:
        ValueError: as :func:`correct_and_smooth`; an empty grid; ``valid_idx`` out of range or
            holding unlabeled nodes (without validation nodes the grid's first strengths are kept).
    """
    from tqdm.auto import tqdm

    if not len(correct_alphas) or not len(smooth_alphas):
        raise ValueError("correct_alphas and smooth_alphas must not be empty")
    probs = torch.softmax(logits.float(), dim=1)
    train_labels = labels[train_idx]
    _check_inputs(probs, adjacency, train_idx, train_labels)
    _check_node_ids("valid_idx", "V", valid_idx, probs.shape[0])
    if bool((labels[valid_idx] < 0).any()):  # counted as wrong predictions
        raise ValueError(f"valid_idx includes {int((labels[valid_idx] < 0).sum()):,} unlabeled node(s) (label -1)")
    truth = torch.nn.functional.one_hot(train_labels.long(), probs.shape[1]).float()  # one_hot takes int64 alone
    best = None
    with tqdm(total=len(correct_alphas) * (1 + len(smooth_alphas)), disable=not progress, leave=False,
              desc="correct and smooth", unit="propagation") as bar:
        for correct_alpha in correct_alphas:
            corrected = _correct(probs, adjacency, train_idx, truth, correct_alpha, num_iterations)
            bar.update()
            for smooth_alpha in smooth_alphas:
                pred = _smooth(corrected, adjacency, train_idx, truth, smooth_alpha, num_iterations).argmax(1)
                bar.update()
                valid_acc = float((pred[valid_idx] == labels[valid_idx]).float().mean()) if valid_idx.numel() \
                    else 0.0  # no validation nodes: the first strengths stay
                if best is None or valid_acc > best.valid_acc:
                    best = SmoothingResult(pred, float(correct_alpha), float(smooth_alpha), valid_acc)
    return best
