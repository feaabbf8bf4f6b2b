"""Training losses over node predictions.

``"ce"`` is the mean cross-entropy. ``"log-ce"`` takes the mean of ``log(eps + ce) - log(eps)``
over the nodes, with ``eps = 1 - log 2`` (Wang et al., "Bag of Tricks for Node Classification with
Graph Neural Networks", 2021): its gradient on a node is the cross-entropy's scaled by
``1 / (eps + ce)``, so nodes the model already fits well keep a larger share of the step and a few
badly fitted (often mislabelled or hopeless) nodes a smaller one than under the plain mean.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .choices import LOSSES, check_choice

__all__ = ["LOG_CE_EPS", "node_loss", "distill_loss", "check_probabilities"]

#: The offset of ``log-ce``: ``1 - log 2``, the value the bag-of-tricks paper uses.
LOG_CE_EPS = 1.0 - math.log(2.0)


def node_loss(logits: torch.Tensor, labels: torch.Tensor, kind: str = "ce", label_smoothing: float = 0.0) -> torch.Tensor:
    """The training loss of ``logits`` (shape ``(n, C)``) against ``labels`` (shape ``(n,)``, int64).

    Args:
        kind: one of :data:`ttgnn.choices.LOSSES` (the module docstring): ``"ce"`` (the default)
            or ``"log-ce"``.
        label_smoothing: cross-entropy label smoothing, in ``[0, 1)``; applies to both kinds.

    Returns:
        A scalar tensor, the mean over the ``n`` nodes (``n = 0`` gives ``nan``, as
        ``F.cross_entropy`` does).

    Raises:
        ValueError: ``kind`` is not a known loss, or ``label_smoothing`` is not in ``[0, 1)`` (torch
            took a negative or NaN one as none).
    """
    check_choice("loss", kind, LOSSES)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be a number in [0, 1), got {label_smoothing!r}")
    if kind == "ce":
        return F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
    per_node = F.cross_entropy(logits, labels, label_smoothing=label_smoothing, reduction="none")
    return (torch.log(LOG_CE_EPS + per_node) - math.log(LOG_CE_EPS)).mean()


def check_probabilities(name: str, probs: torch.Tensor, hint: str = "") -> None:
    """``ValueError`` unless every row of ``probs`` ``(n, C)`` is a class distribution: values in ``[0, 1]``
    and a sum off 1 by at most ``1e-3`` (``2e-2`` in a 16-bit dtype); NaN fails too. ``hint`` is added to
    the message (how to make probabilities)."""
    if not probs.numel():
        return
    low, high = float(probs.min()), float(probs.max())
    worst = float((probs.double().sum(-1) - 1.0).abs().max())
    tolerance = 2e-2 if probs.element_size() < 4 else 1e-3
    if not (0.0 <= low and high <= 1.0 and worst <= tolerance):
        raise ValueError(f"{name} must be class probabilities (each row in [0, 1], summing to 1{hint}), got "
                         f"values in [{low:.3g}, {high:.3g}] and row sums off 1 by up to {worst:.3g}")


def distill_loss(logits: torch.Tensor, teacher_probs: torch.Tensor, *, check_teacher: bool = True) -> torch.Tensor:
    """The mean over nodes of ``KL(teacher || softmax(logits))``: how far a model's class
    distributions are from a teacher's (knowledge distillation, temperature 1).

    Args:
        logits: ``(n, C)`` the model's logits.
        teacher_probs: ``(n, C)`` the teacher's class probabilities (rows sum to 1).
        check_teacher: check that ``teacher_probs`` are probabilities (:func:`check_probabilities`,
            three reductions over them); training, whose teacher is a softmax, checks it once
            instead of in every step. (default: ``True``)

    Returns:
        A scalar tensor, ``>= 0``, zero where the two distributions agree.

    Raises:
        ValueError: the shapes differ, or ``teacher_probs`` are not probabilities (a value outside
            ``[0, 1]`` or a row sum off 1 by more than ``1e-3``: a teacher's logits gave NaN, a
            scaled distribution a negative loss).
    """
    if logits.shape != teacher_probs.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and teacher probabilities {tuple(teacher_probs.shape)} "
                         "must have the same shape")
    if check_teacher:
        check_probabilities("teacher_probs", teacher_probs)
    return F.kl_div(F.log_softmax(logits, dim=1), teacher_probs, reduction="batchmean")
