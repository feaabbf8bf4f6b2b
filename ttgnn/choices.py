"""The valid values of every multiple-choice setting, in one place.

Used by :class:`ttgnn.config.TrainConfig` (validation), the ``ttgnn`` command line (``choices=``)
and the model builders, so that a new choice is added once. Importing this module imports neither
DGL nor the kernels.
"""
from __future__ import annotations

from .partition.reorder import METHODS as ORDERS

__all__ = ["MODELS", "MODEL_CHOICES", "EMBEDDINGS", "NORMS", "MODES", "ORDERS", "INITS", "DEVICES", "GNN_BACKENDS",
           "LR_SCHEDULES", "LOSSES", "check_choice"]

#: GNN architectures: GraphSAGE (mean aggregator) and multi-head GAT.
MODELS = ("sage", "gat")
#: The ``model`` setting: an architecture, or ``auto``: decided by the training mode
#: (:func:`ttgnn.config.model_for`).
MODEL_CHOICES = (*MODELS, "auto")
#: Node inputs: a TT-compressed table, a full ``nn.Embedding`` table, or the dataset's features.
EMBEDDINGS = ("tt", "full", "features")
#: Normalisation between GNN layers.
NORMS = ("none", "batch", "layer")
#: Full-graph training or mini-batches of sampled neighbourhoods.
MODES = ("full", "minibatch")
#: Input-table initialisations: TT-GNN orthogonal, TT-Rec Gaussian (both TT only; a full table is
#: normal), Laplacian eigenvectors (:mod:`ttgnn.spectral`; TT by TT-SVD, full directly), or
#: ``auto``: decided by the graph (:func:`ttgnn.config.init_for`).
INITS = ("ortho", "gaussian", "spectral", "auto")
#: Where to train (``auto``: CUDA when available).
DEVICES = ("cpu", "cuda", "auto")
#: GNN layers: DGL's convolutions, the tensor layers of :mod:`ttgnn.layers` (any device torch
#: runs on), or ``auto``: DGL where the installed DGL runs on the device, the tensor layers elsewhere.
GNN_BACKENDS = ("auto", "dgl", "torch")
#: Learning rates over the epochs: constant, or a cosine from the set rates down towards zero
#: at the last epoch (:func:`ttgnn.train.lr_factor`).
LR_SCHEDULES = ("constant", "cosine")
#: Training losses (:mod:`ttgnn.losses`): the mean cross-entropy, or the mean of its logarithm
#: shifted by ``1 - log 2``, which weighs badly fitted nodes less.
LOSSES = ("ce", "log-ce")


def check_choice(name: str, value, valid) -> None:
    """Raise ``ValueError`` naming ``name``, ``value`` and the valid values unless ``value in valid``."""
    if value not in valid:
        raise ValueError(f"{name} must be one of {tuple(valid)}, got {value!r}")
