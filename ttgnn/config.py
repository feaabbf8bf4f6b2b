"""TrainConfig: the settings of one training run, validated in one place.

Importing this module imports neither DGL nor the kernels, so the command line can build its
parser (and report a bad value) without them.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Optional, Union

from .choices import (EMBEDDINGS, GNN_BACKENDS, INITS, LOSSES, LR_SCHEDULES, MODEL_CHOICES, MODES, NORMS, ORDERS,
                      check_choice)

__all__ = ["TrainConfig", "is_dataset_path", "recorded_dataset", "LABEL_INPUT_MIN_TRAIN_FRACTION", "AUTO_SPECTRAL_VECTORS",
           "AUTO_SPECTRAL_MAX_NODES",
           "AUTO_FROM_FULL_MAX_NODES", "from_full_for",
           "SAMPLED_EVAL_MIN_NODES", "AUTO_RANK", "AUTO_RANK_FEW_LABELS", "AUTO_MIN_COMPRESSION", "preferred_rank",
           "auto_rank", "check_eval_fanouts", "check_label_inputs_with_sampled_eval", "eval_fanouts_for", "init_for",
           "few_labels", "label_input_for", "AUTO_LABEL_REUSE", "AUTO_LABEL_REUSE_FEW_LABELS", "label_reuse_for",
           "LABEL_SPREAD_ALPHA", "AUTO_LABEL_SPREAD", "label_spread_for", "AUTO_MODEL", "model_for", "AUTO_LOSS",
           "loss_for", "MAX_LR", "MAX_LAYERS", "MAX_THREADS", "check_int", "check_gat_width"]

#: The largest learning rate a run takes. Near float32's limit (3.4e38) Adam's first step, the rate
#: divided by ``1 - beta1 = 0.1``, overflows inside the optimiser; a rate far below that can already
#: send the loss to NaN, which :func:`ttgnn.train.train` stops on (``TrainingDiverged``).
MAX_LR = 1e6
#: The most GNN layers a run takes (each adds a layer of weights and, when sampling, a hop of
#: neighbours; 10^5 layers filled the memory before the first step).
MAX_LAYERS = 64
#: The most torch threads a run takes (2**31 overflowed inside torch; 10^5 threads exhausted the memory map).
MAX_THREADS = 4096

#: ``label_input=None`` turns label input on when the training split holds at least this share of
#: the nodes: on ogbn-arxiv (54% training nodes) it added 2.3 points of validation accuracy, on
#: Cora and CiteSeer (5.2% and 3.6%) it cost 1.4-2.9 points of test accuracy (docs/results.md,
#: "Defaults sweep on ogbn-arxiv").
LABEL_INPUT_MIN_TRAIN_FRACTION = 0.1
#: ``init="auto"`` on a graph with fewer training nodes than that share starts the table from this
#: many of its smoothest Laplacian eigenvectors (the other columns zero), and from the gaussian
#: init otherwise: with the other defaults, 8 eigenvectors lifted TT on Cora and CiteSeer by 12-17
#: points and the full table by 6-8 (docs/results.md), where ogbn-arxiv's GNN did as well
#: without them.
AUTO_SPECTRAL_VECTORS = 8
#: ``--init auto`` picks the spectral init only on graphs of at most this many nodes: it builds a
#: dense ``(N, dim)`` table (and TT-SVDs it for a TT table), which a 10^8-node graph cannot hold,
#: and it was measured only on graphs of up to 2x10^4 nodes (Planetoid).
AUTO_SPECTRAL_MAX_NODES = 1_000_000
#: In mini-batch mode a graph of more than this many nodes is evaluated on sampled neighbourhoods
#: of its split nodes (with the training fan-outs, unless ``eval_fanouts`` is given): layer-wise
#: full-neighbour inference holds ``(N, hidden)`` activations of every node, 57 GB per layer
#: for ogbn-papers100M's 111M nodes at 128 dimensions (:func:`eval_fanouts_for`).
SAMPLED_EVAL_MIN_NODES = 10_000_000
#: ``from_full=None`` trains the full table first (then compresses and distils it into the TT table)
#: only on graphs of few labels with at most this many nodes: the full table and its Adam state
#: must fit in memory (1.5 GB at 128 dimensions), and it was measured on Cora, CiteSeer and PubMed
#: (docs/results.md, "Small graphs: the TT table from a trained full table").
AUTO_FROM_FULL_MAX_NODES = 1_000_000

#: The TT rank of a run that names none (``rank=None``): ogbn-arxiv's sweep was run at it (1,118x).
AUTO_RANK = 8
#: ...and where training nodes are under :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the graph: GAT
#: with the defaults, 5 seeds, mean validation accuracy by TT rank: CiteSeer 0.539 / 0.530 / 0.526
#: / 0.521 at ranks 4-7, Cora 0.728 / 0.729 / 0.721 at ranks 4-6, PubMed 0.719 at rank 4 against
#: 0.702 at rank 8 (docs/results.md, "the TT rank"): with few labels fewer parameters do better.
AUTO_RANK_FEW_LABELS = 4
#: Either is lowered to the largest rank that still compresses the table at least this many
#: times, so that a default table on a small graph stays a compressed one (issue 15's bar).
AUTO_MIN_COMPRESSION = 100.0
#: ``label_reuse=None`` gives a model this many reuse rounds in full-graph training with label input
#: (0 for a model not named). GAT + TT on ogbn-arxiv, 5 seeds: one round raised mean validation
#: accuracy from 0.7117 to 0.7129 and test accuracy from 0.6984 to 0.7045; for GraphSAGE one round
#: was level on validation (docs/results.md, "Label reuse"), so it stays off.
AUTO_LABEL_REUSE = {"gat": 1}
#: With fewer training nodes than :data:`LABEL_INPUT_MIN_TRAIN_FRACTION`, ``label_input=None`` and
#: ``label_reuse=None`` still turn label input on for a model named here in full-graph training,
#: with this many reuse rounds: the rounds carry the few known labels, as predictions, to the
#: nodes around them. GAT with the spectral init, TT rank 4 and the full table, seeds 0-2, mean
#: validation accuracy against label input off: Cora +3.7 (TT) and +2.7 (full) points (one round:
#: +0.5 and -0.2; six rounds: level with three), CiteSeer +1.2 and +1.7, PubMed +0.9 and +0.5
#: (docs/results.md, "Small graphs: label reuse"). GraphSAGE, without reuse, lost accuracy to
#: label input on these graphs, so it keeps it off.
AUTO_LABEL_REUSE_FEW_LABELS = {"gat": 3}
#: Propagation strength of label spreading (``label_spread``): each step keeps this share of the
#: spread labels and restarts the rest from the known labels (:func:`ttgnn.smoothing.spread_labels`).
LABEL_SPREAD_ALPHA = 0.9
#: ``label_spread=None`` gives a label-input run in full-graph training this many label spreading
#: steps: the nodes without a known label start from the class distribution of the known labels
#: around them instead of "unknown". Where training nodes are few, a table of far fewer parameters
#: than nodes cannot learn to carry the labels for itself: GAT with its defaults (3 reuse rounds),
#: 5 seeds, mean validation accuracy against no spreading: Cora +1.6 (TT rank 4) and +1.0 (full),
#: CiteSeer +2.6 and -0.1, PubMed +3.4 and +2.4 (test: TT +1.4, +3.2, +3.8; docs/results.md,
#: "Small graphs: label spreading"). On ogbn-arxiv (54% training nodes) GAT + TT with its defaults
#: gained on validation on each of 5 seeds, 0.7150 against 0.7129 (test 0.7036 against 0.7045).
AUTO_LABEL_SPREAD = 10
#: ``model="auto"`` picks the architecture by the training mode. Full-graph: GAT, whose defaults
#: (label reuse included) had the best mean validation accuracy on ogbn-arxiv, 0.7129 against
#: GraphSAGE's 0.7108 (test 0.7045 against 0.6954, 5 seeds each; docs/results.md), at about eight
#: times GraphSAGE's CPU time per epoch (training and evaluation). Mini-batch (the large-graph
#: path): GraphSAGE, the model the scale runs and memory plans were measured with; GAT there is
#: not measured.
AUTO_MODEL = {"full": "gat", "minibatch": "sage"}
#: ``loss=None`` gives a model named here this loss in full-graph training where training nodes are
#: at least :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the graph, and the plain cross-entropy
#: (``"ce"``) elsewhere. GAT + TT on ogbn-arxiv with its other defaults, mean validation accuracy
#: (the best epoch's) against ``"ce"``: 100 epochs, 5 seeds, 0.7195 against 0.7150 (test 0.7061
#: against 0.7036); 200 epochs, the command line's, 0.7219 against 0.7183, higher on each of 5
#: seeds (test 0.7081 against 0.7040; docs/results.md, "GAT's tricks"). On small graphs (few
#: labels) it did not narrow TT's gap to the full table (Cora and CiteSeer, 10 seeds) and lowered
#: TT's validation accuracy on PubMed (3 seeds), so they keep ``"ce"``; GraphSAGE with label input
#: and mini-batch training were not measured with it.
AUTO_LOSS = {"gat": "log-ce"}


@dataclass
class TrainConfig:
    """Settings of one training run (all saved into ``metrics.json`` and the checkpoint).

    The training defaults (table std 0.1, dropout 0.5, no normalisation, Adam 0.01 for the GNN
    and the table, 200 epochs; label input and the init by the graph: gaussian with label input on
    ogbn-arxiv) won the ogbn-arxiv defaults sweep on validation accuracy (docs/results.md,
    "Defaults sweep"); the spectral init on graphs with few labels, measured on Cora and CiteSeer;
    the model (GAT in full-graph mode), label reuse and GAT's loss by 5 seeds of each on ogbn-arxiv.

    Attributes:
        dataset (str): dataset name or path, see :func:`ttgnn.data.load_dataset`.
        root (str, optional): datasets root; when given it is the only place searched.
        cache_dir (str, optional): cache directory (default: ``~/.cache/ttgnn``).
        model (str): ``"sage"``, ``"gat"`` or ``"auto"`` (the default): decided by ``mode``,
            :func:`model_for` (GAT in full-graph mode, GraphSAGE in mini-batch mode).
        embedding (str): one of :data:`ttgnn.choices.EMBEDDINGS`.
        dim (int): embedding dimension.
        rank (int, optional): TT rank (of the embedding; not a process rank). ``None`` (the
            default): :data:`AUTO_RANK`, :data:`AUTO_RANK_FEW_LABELS` where training nodes are
            few, lowered where that would compress the table less than
            :data:`AUTO_MIN_COMPRESSION` times (:func:`auto_rank`).
        num_cores (int, optional): TT cores; ``None`` picks them from the number of nodes
            (:func:`ttgnn.shapes.auto_num_cores`).
        row_shape, col_shape (list of int, optional): TT shapes (automatic when ``None``).
        order (str): node order for the TT rows, one of :data:`ttgnn.choices.ORDERS`; the
            default, ``hierarchical-kaminpar``, beat ``hierarchical-metis`` on ogbn-arxiv in
            shared-prefix fractions and time (docs/scale.md).
        compression (float, optional): pick the TT rank from a budget instead of ``rank``: the
            largest rank with at least this compression (:func:`ttgnn.shapes.shape_for_budget`).
        max_params (int, optional): likewise, the largest rank with at most this many parameters.
        init (str): input-table init, one of :data:`ttgnn.choices.INITS`: ``"ortho"`` and
            ``"gaussian"`` for TT tables (a full table starts normal with std ``init_scale``),
            ``"spectral"``: the leading Laplacian eigenvectors scaled to std ``init_scale``, for a
            full table directly and for a TT table by TT-SVD in TT-row order, or ``"auto"`` (the
            default): decided by the graph, :func:`init_for` (spectral with
            :data:`AUTO_SPECTRAL_VECTORS` vectors when few nodes are labelled, else gaussian).
        spectral_vectors (int, optional): with ``init="spectral"`` (or ``"auto"`` where it picks
            spectral), how many eigenvectors fill the first columns (the rest start at zero); on
            Cora and CiteSeer 8 did better than ``dim`` (docs/results.md). (default: ``dim``
            for ``"spectral"``, :data:`AUTO_SPECTRAL_VECTORS` for ``"auto"``)
        init_scale (float): std of the initial table entries, for every embedding kind: the
            ``"gaussian"`` TT std, the ``"full"`` table's normal std, and for ``"ortho"`` the gain
            ``init_scale * sqrt(padded rows)`` (so ``W^T W = init_scale^2 * rows * I``).
        hidden, num_layers, heads (int): network size. dropout, input_dropout, attn_dropout (float).
        edge_dropout (float): full-graph training only: each layer leaves out this share of the
            edges, drawn anew per layer and step (:class:`ttgnn.models.GNN`). (default: ``0.0``)
        norm (str): one of :data:`ttgnn.choices.NORMS`. residual (bool): linear skips.
        gnn_backend (str): GNN layers, one of :data:`ttgnn.choices.GNN_BACKENDS`: ``"dgl"``,
            ``"torch"`` (:mod:`ttgnn.layers`, any device) or ``"auto"`` (the tensor layers for GAT in
            full-graph mode; else DGL where the installed DGL runs on the device, else the tensor
            layers; :func:`ttgnn.models.resolve_gnn_backend`). Checkpoints load across backends.
        mode (str): ``"full"`` (full-graph) or ``"minibatch"`` (neighbour sampling).
        fanouts (list of int): neighbours sampled per layer in mini-batch mode.
        eval_fanouts (list of int, optional): mini-batch mode only: evaluate the split nodes on
            neighbourhoods sampled with these fan-outs (one per layer) instead of exact layer-wise
            inference over all nodes; then Correct and Smooth and label reuse, which need every
            node's prediction, are not available. ``None``: exact, except on graphs of more than
            :data:`SAMPLED_EVAL_MIN_NODES` nodes, which use ``fanouts`` (:func:`eval_fanouts_for`).
        batch_size (int): training nodes per mini-batch. eval_batch_size (int): for inference.
        epochs (int): epochs. lr, weight_decay: GNN optimiser. emb_lr, emb_weight_decay: embedding's.
            Learning rates are at most :data:`MAX_LR`.
        lr_schedule (str): one of :data:`ttgnn.choices.LR_SCHEDULES`: ``"constant"`` (the
            default), or ``"cosine"``: both learning rates scaled by ``(1 + cos(pi (e - 1) / E)) / 2``
            in epoch ``e`` of ``epochs = E`` (1 in the first epoch, near 0 in the last); it follows
            ``epochs``, also when a resumed run is given more.
        label_smoothing (float): cross-entropy label smoothing.
        weight_average (int): ``H > 0``: evaluate, select and save the average of the weights
            over about the last ``H`` epochs (:class:`ttgnn.averaging.WeightAverage`) instead of
            the trained weights, whose accuracies go to each epoch's record as ``raw_valid_acc``
            and ``raw_test_acc`` (a second evaluation per epoch, a second copy of the weights in
            memory). ``0`` (the default): off.
        loss (str, optional): one of :data:`ttgnn.choices.LOSSES` (:mod:`ttgnn.losses`): ``"ce"``,
            the mean cross-entropy, or ``"log-ce"``, the mean of ``log(eps + ce) - log(eps)``.
            ``None`` (the default) decides by the model and the graph: :data:`AUTO_LOSS` in
            full-graph mode where training nodes are at least
            :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the graph (GAT on ogbn-arxiv: ``"log-ce"``),
            else ``"ce"`` (:func:`loss_for`).
        label_input (bool, optional): the label trick: add a learned vector of each known training
            label to its node's input (:class:`~ttgnn.models.LabelInput`). Every epoch a random
            ``label_rate`` of the training nodes show their labels and the loss is on the other
            training nodes; evaluation shows every training label. Validation and test labels
            are never inputs. ``None`` (the default) decides by the graph: on when the training
            split holds at least :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the nodes, and below
            that for GAT in full-graph training with its label reuse left to the rule
            (:func:`label_input_for`).
        label_rate (float): share of training nodes whose labels are inputs in an epoch.
        label_reuse (int, optional): label reuse rounds: before each training step and at
            evaluation, the model's predicted class probabilities of the nodes without a known
            label are fed back as their label input this many times (each round one more no-grad
            pass over all nodes, and an ``(N, num_classes)`` float tensor). Needs label input; with
            ``label_input=None`` a value above 0 turns it on. ``None`` (the default) decides by the
            model and the run: :data:`AUTO_LABEL_REUSE` rounds in full-graph mode with label input
            (:data:`AUTO_LABEL_REUSE_FEW_LABELS` when training nodes are fewer than
            :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the graph), else 0 (:func:`label_reuse_for`).
        label_spread (int, optional): label spreading steps: the label input of every node without
            a known label starts as the class distribution of the known labels spread over the
            graph (personalised-PageRank steps of strength :data:`LABEL_SPREAD_ALPHA`; the nodes
            whose labels the loss is on this epoch are not among the known), before any reuse
            round, in training and at evaluation; an ``(N, num_classes)`` float tensor and that
            many sparse products per epoch. Needs label input; with ``label_input=None`` a value
            above 0 turns it on. ``None`` (the default): :data:`AUTO_LABEL_SPREAD` steps in
            full-graph mode with label input, else 0 (:func:`label_spread_for`).
        from_full (bool, optional): train a full table first (every other setting the same, its
            run in ``output_dir/full-table``), then start the TT table from the TT-SVD of that run's
            best table (in TT-row order; with ``embedding="full"`` a copy of it: the full table
            distilled from itself) and the GNN from its best GNN, and train both
            for ``finetune_epochs`` at ``finetune_lr``; the best epoch is picked on validation with
            the compressed start as epoch 0 (:func:`ttgnn.train.train`). The model is TT-sized;
            training needs the full table's memory and one process. ``None`` (the default) decides
            by the graph: :func:`from_full_for` (on for a TT table in one-process full-graph training
            where training nodes are few and the graph has at most :data:`AUTO_FROM_FULL_MAX_NODES`
            nodes).
        finetune_epochs (int): with ``from_full``, epochs of the TT stage. (default: ``50``)
        finetune_lr (float): with ``from_full``, the TT stage's learning rate, for the GNN and the
            table. (default: ``0.001``)
        finetune_distill (float): with ``from_full`` in full-graph mode, the TT stage's loss adds
            this times the KL divergence of its class probabilities from the full table's best
            model's, over every node (:func:`ttgnn.losses.distill_loss`; ``0``: off). 5 was higher on
            validation than 1 on Cora and CiteSeer (docs/results.md). (default: ``5.0``)
        correct_smooth (bool): after training, apply Correct and Smooth (:mod:`ttgnn.smoothing`)
            to the best model's predictions and report its accuracies (``metrics["correct_smooth"]``).
        seed (int): random seed. num_threads (int, optional): torch threads of the run (``train`` gives
            the caller's count back when it returns).
        output_dir (str, optional): checkpoints and ``metrics.json`` go here; one run per folder.
        resume (bool): continue from ``output_dir/checkpoint.pt`` when present.
        overwrite (bool): replace a run already in ``output_dir`` (without it, such a folder is
            refused unless ``resume``).
        progress (bool): tqdm bars.
    """

    dataset: str = "ogbn-arxiv"
    root: Optional[str] = None
    cache_dir: Optional[str] = None
    model: str = "auto"
    embedding: str = "tt"
    dim: int = 128
    rank: Optional[int] = None
    num_cores: Optional[int] = None
    compression: Optional[float] = None
    max_params: Optional[int] = None
    row_shape: Optional[list] = None
    col_shape: Optional[list] = None
    order: str = "hierarchical-kaminpar"
    init: str = "auto"
    init_scale: float = 0.1
    spectral_vectors: Optional[int] = None
    hidden: int = 128
    num_layers: int = 3
    heads: int = 4
    dropout: float = 0.5
    input_dropout: float = 0.0
    attn_dropout: float = 0.0
    edge_dropout: float = 0.0
    norm: str = "none"
    residual: bool = False
    gnn_backend: str = "auto"
    mode: str = "full"
    fanouts: list = field(default_factory=lambda: [15, 10, 5])
    eval_fanouts: Optional[list] = None
    batch_size: int = 1024
    eval_batch_size: int = 8192
    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 0.0
    emb_lr: float = 0.01
    emb_weight_decay: float = 0.0
    lr_schedule: str = "constant"
    label_smoothing: float = 0.0
    weight_average: int = 0
    loss: Optional[str] = None
    label_input: Optional[bool] = None
    label_rate: float = 0.5
    label_reuse: Optional[int] = None
    label_spread: Optional[int] = None
    from_full: Optional[bool] = None
    finetune_epochs: int = 50
    finetune_lr: float = 0.001
    finetune_distill: float = 5.0
    correct_smooth: bool = True
    seed: int = 0
    num_threads: Optional[int] = None
    output_dir: Optional[str] = None
    resume: bool = False
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        # A dataset folder is recorded by its absolute path: the run is found again (predicted, resumed) from any
        # directory, and resuming with another spelling of the same folder is the same run.
        if isinstance(self.dataset, (str, os.PathLike)):
            self.dataset = recorded_dataset(self.dataset)
        # The same for the dataset root: a relative --root made `ttgnn predict` or --resume from another directory
        # fail, saying the root was "given as --root" when it came from the run's record.
        if isinstance(self.root, (str, os.PathLike)) and os.fspath(self.root).strip():  # validate() names the rest
            self.root = os.path.abspath(self.root)
        # paths given as pathlib.Path: kept as the strings the recorded settings (JSON) and resume checks hold
        for key in ("dataset", "root", "cache_dir", "output_dir"):
            value = getattr(self, key)
            if isinstance(value, os.PathLike):
                setattr(self, key, os.fspath(value))

    #: Settings that say where and how a run ran, not what it computes: runs that differ only in them are
    #: the same configuration (the seeds of a benchmark row, the processes of a data-parallel job).
    PLACE_KEYS = ("root", "cache_dir", "output_dir", "num_threads", "progress", "resume", "overwrite")
    #: Settings a resumed run must share with the run that wrote the checkpoint.
    RESUME_KEYS = ("dataset", "model", "embedding", "rank", "order", "seed", "mode", "hidden", "num_layers",
                   "label_input", "label_reuse", "label_spread", "loss", "from_full", "weight_average")
    #: What checkpoints written before a resume key existed had instead: the feature off (the plain loss).
    RESUME_ABSENT = {"label_reuse": 0, "label_spread": 0, "loss": "ce", "from_full": False, "weight_average": 0}
    #: Settings that steer every epoch's update: a resume that changed one would mix two runs under
    #: one set of recorded settings, so it must share them too (:meth:`resume_keys`).
    RESUME_TRAINING_KEYS = ("dim", "heads", "norm", "residual", "num_cores", "init", "init_scale",
                            "spectral_vectors", "dropout", "input_dropout", "attn_dropout", "edge_dropout",
                            "lr", "weight_decay", "emb_lr", "emb_weight_decay", "lr_schedule", "label_smoothing",
                            "label_rate")

    def resume_keys(self) -> tuple:
        """The settings a resumed run must share with the run that wrote its checkpoint:
        :attr:`RESUME_KEYS` and :attr:`RESUME_TRAINING_KEYS`; with ``from_full`` also ``finetune_lr``
        and ``finetune_distill``; with neighbour sampling also
        ``fanouts`` and ``batch_size``; with a learning-rate schedule other than ``constant`` also
        ``epochs`` (the schedule spans them). ``epochs`` may otherwise grow, or shrink down to the
        checkpoint's epoch (:func:`~ttgnn.train.restore_run` refuses less), and settings
        that do not change what is computed (threads, device, paths, progress, evaluation) may differ.
        ``rank`` comes last: a rule derives it from other settings (``from_full``, the budget), so a
        refusal names the setting that changed, not the rank it changed.
        """
        keys = tuple(key for key in self.RESUME_KEYS if key != "rank")
        if self.from_full:  # the TT stage's rate and distillation weight (named before the lr they set)
            keys += ("finetune_lr", "finetune_distill")
        keys += self.RESUME_TRAINING_KEYS
        if self.mode == "minibatch":
            keys += ("fanouts", "batch_size")
        if self.lr_schedule != "constant":
            keys += ("epochs",)
        return keys + ("rank",)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first out-of-range setting."""
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise ValueError(f"dataset must be a dataset name or a folder path, got {self.dataset!r}")
        for key in ("root", "cache_dir", "output_dir"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, (str, os.PathLike)) or not str(value).strip()):
                raise ValueError(f"{key} ({option_name(key)}) must be a folder path or None, got {value!r}")
        for key in ("residual", "correct_smooth", "resume", "overwrite", "progress"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"{key} must be True or False, got {getattr(self, key)!r}")
        for key in ("label_input", "from_full"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{key} must be True, False or None (decided by the graph), got {value!r}")
        for key, valid in (("model", MODEL_CHOICES), ("embedding", EMBEDDINGS), ("order", ORDERS), ("mode", MODES),
                           ("norm", NORMS), ("init", INITS), ("gnn_backend", GNN_BACKENDS),
                           ("lr_schedule", LR_SCHEDULES)):
            check_choice(key, getattr(self, key), valid)
        if self.loss is not None:
            check_choice("loss", self.loss, LOSSES)
        for key in ("epochs", "dim", "hidden", "num_layers", "heads", "batch_size", "eval_batch_size"):
            check_int(key, getattr(self, key), 1)
        for key in ("rank", "num_threads", "num_cores"):
            if getattr(self, key) is not None:
                check_int(key, getattr(self, key), 1)
        for key, most in (("num_layers", MAX_LAYERS), ("num_threads", MAX_THREADS)):
            if getattr(self, key) is not None and getattr(self, key) > most:
                raise ValueError(f"{key} must be at most {most}, got {getattr(self, key)}")
        if model_for(self.model, self.mode) == "gat":  # refused by the model only after the data loaded
            check_gat_width(self.hidden, self.heads)
        check_int("seed", self.seed, 0)
        if self.seed >= 2**31:  # refused by the node order only after a from_full stage had trained
            raise ValueError(f"seed must be below 2**31 (it seeds the node order's partitioner too), got {self.seed}")
        if self.label_reuse is not None:
            check_int("label_reuse", self.label_reuse, 0)
        if self.label_reuse and self.label_input is False:
            raise ValueError(f"label_reuse={self.label_reuse} feeds predictions back as label input: it needs "
                             "label input, which is off (label_input=False, --no-label-input)")
        if self.label_spread is not None:
            check_int("label_spread", self.label_spread, 0)
        if self.label_spread and self.label_input is False:
            raise ValueError(f"label_spread={self.label_spread} spreads the label input over the graph: it needs "
                             "label input, which is off (label_input=False, --no-label-input)")
        check_int("finetune_epochs", self.finetune_epochs, 1)
        check_int("weight_average", self.weight_average, 0)
        if self.from_full and self.embedding not in ("tt", "full"):
            raise ValueError(f"from_full starts a table from a trained full table: it needs embedding='tt' (or "
                             f"'full', the full table distilled from itself), got {self.embedding!r}")
        for key in ("lr", "emb_lr", "finetune_lr"):
            _check_real(key, getattr(self, key), f"in (0, {MAX_LR:g}]", lambda v: 0 < v <= MAX_LR)
        _check_real("init_scale", self.init_scale, "> 0", lambda v: v > 0)
        for key in ("weight_decay", "emb_weight_decay", "finetune_distill"):
            _check_real(key, getattr(self, key), ">= 0", lambda v: v >= 0)
        for key in ("dropout", "input_dropout", "attn_dropout", "edge_dropout", "label_smoothing"):
            _check_real(key, getattr(self, key), "in [0, 1)", lambda v: 0.0 <= v < 1.0)
        if self.edge_dropout and self.mode != "full":
            raise ValueError(f"edge_dropout={self.edge_dropout} is for full-graph training (mode='full'); in "
                             f"mode={self.mode!r} neighbour sampling (fanouts) already leaves edges out")
        _check_real("label_rate", self.label_rate, "in (0, 1)", lambda v: 0.0 < v < 1.0)
        for key in ("fanouts", "row_shape", "col_shape"):
            values = getattr(self, key)
            if values is not None and not isinstance(values, (list, tuple)):  # a NumPy array: "truth value ... ambiguous"
                raise ValueError(f"{key} must be a list of integers, got {type(values).__name__} {values!r} "
                                 "(.tolist() makes a list of an array)")
            for value in values or ():
                check_int(f"every entry of {key}", value, 1)
        if self.embedding == "tt":  # a shape's length is its core count: checked before any data loads
            from .shapes import check_num_cores, cores_of_shape

            if self.num_cores is not None:
                check_num_cores(self.num_cores)
            for key in ("row_shape", "col_shape"):
                if getattr(self, key) is not None:
                    cores_of_shape(key, list(getattr(self, key)), self.num_cores)
        if self.mode == "minibatch" and not isinstance(self.fanouts, (list, tuple)):
            raise ValueError(f"fanouts must be a list of integers >= 1, one per layer, got {self.fanouts!r}")
        if self.mode == "minibatch" and len(self.fanouts) != self.num_layers:
            raise ValueError(f"need one fan-out per layer: {self.num_layers} layers, fanouts {self.fanouts}; give "
                             f"num_layers={len(self.fanouts)} ({option_text('num_layers', len(self.fanouts))}) or "
                             f"{self.num_layers} fan-outs")
        if self.eval_fanouts is not None:
            check_eval_fanouts(self.eval_fanouts, self.mode, self.num_layers)
            check_label_inputs_with_sampled_eval(self.label_reuse, self.eval_fanouts, self.label_spread or 0)
        if self.spectral_vectors is not None:
            check_int("spectral_vectors", self.spectral_vectors, 1)
            if self.spectral_vectors > self.dim:
                raise ValueError(f"spectral_vectors must be at most dim={self.dim}, got {self.spectral_vectors}")
            if self.init not in ("spectral", "auto"):
                raise ValueError(f"spectral_vectors needs init='spectral' (or 'auto'), got init={self.init!r}")
        if self.compression is not None and self.max_params is not None:
            raise ValueError("give at most one of compression and max_params")
        if self.rank is not None and (self.compression is not None or self.max_params is not None):
            budget = "compression" if self.compression is not None else "max_params"
            raise ValueError(f"rank={self.rank} and {budget} both size the TT table: give one (the budget picks "
                             "the largest rank that fits it)")
        if self.compression is not None:
            _check_real("compression", self.compression, "> 0", lambda v: v > 0)
        if self.max_params is not None:
            check_int("max_params", self.max_params, 1)
        if self.resume and not self.output_dir:
            raise ValueError("resume (--resume) needs output_dir (--output-dir), the folder of the run to continue")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite exclude each other: continue the run in output_dir, or replace it")

    def settings(self) -> dict:
        """The settings as a plain dict (JSON- and checkpoint-safe)."""
        return dataclasses.asdict(self)


def is_dataset_path(dataset: Union[str, os.PathLike]) -> bool:
    """Whether ``dataset`` names a folder by its path (a ``PathLike``, or a string with a path
    separator before its trailing ones) rather than a dataset by its name (``"cora"``, ``"cora/"``,
    ``"ogbn-arxiv"``: looked up under the dataset root)."""
    if isinstance(dataset, os.PathLike):
        return True
    text = dataset.rstrip(os.sep + (os.altsep or "")) or dataset  # "/" is a path
    return os.sep in text or (os.altsep is not None and os.altsep in text)


def recorded_dataset(dataset: Union[str, os.PathLike]) -> Union[str, os.PathLike]:
    """``dataset`` as a run records it: a folder path (:func:`is_dataset_path`) made absolute, a name
    as it is."""
    return os.path.abspath(dataset) if is_dataset_path(dataset) else dataset


def option_name(name: str) -> str:
    """The ``ttgnn train`` option of setting ``name`` (``"output_dir"``: ``"--output-dir"``)."""
    return "--" + name.replace("_", "-")


def option_text(name: str, value) -> str:
    """How ``ttgnn train`` is given setting ``name`` = ``value`` (``"--hidden 128"``, ``"--no-from-full"``,
    ``"--fanouts 15,10,5"``; ``None``, left to the run: the option left out), for messages that name a
    setting to a user who may type options rather than Python."""
    flag = option_name(name)
    if value is None:
        return f"{flag} left out"
    if isinstance(value, bool):
        return flag if value else "--no-" + flag[2:]
    if isinstance(value, (list, tuple)):
        return f"{flag} {','.join(str(v) for v in value)}"
    return f"{flag} {value}"


def check_int(name: str, value, minimum: int) -> None:
    """Raise ``ValueError`` unless ``value`` is an int (not a bool) ``>= minimum``, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_real(name: str, value, rule: str, ok) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")


def from_full_for(from_full: Optional[bool], embedding: str, mode: str, num_nodes: int, num_train: int,
                  world_size: int = 1) -> bool:
    """Whether a run trains the full table first (``from_full``): ``from_full`` unless ``None``;
    then on for a TT table (``embedding="tt"``) in full-graph training (``mode="full"``) in one
    process, where the ``num_train`` training nodes are fewer than
    :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the ``num_nodes`` (:func:`few_labels`) and the graph has
    at most :data:`AUTO_FROM_FULL_MAX_NODES` nodes (the full table must fit)."""
    if from_full is not None:
        return bool(from_full)
    return (embedding == "tt" and mode == "full" and world_size == 1 and few_labels(num_nodes, num_train)
            and num_nodes <= AUTO_FROM_FULL_MAX_NODES)


def few_labels(num_nodes: int, num_train: int) -> bool:
    """Whether the ``num_train`` training nodes are fewer than :data:`LABEL_INPUT_MIN_TRAIN_FRACTION`
    of the ``num_nodes``."""
    return not (num_nodes > 0 and num_train >= LABEL_INPUT_MIN_TRAIN_FRACTION * num_nodes)


def label_input_for(label_input: Optional[bool], num_nodes: int, num_train: int, label_reuse: Optional[int] = 0,
                    model: Optional[str] = None, mode: Optional[str] = None, label_spread: Optional[int] = 0) -> bool:
    """Whether a run uses label input: ``label_input`` when given, else on with label reuse or
    spreading (``label_reuse > 0`` feeds predictions back as label input, ``label_spread > 0``
    spreads it), else on when the ``num_train``
    training nodes are at least :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the ``num_nodes``, else
    on only where ``label_reuse`` is left to the rule (``None``) and :func:`label_reuse_for` gives
    ``model`` in ``mode`` reuse rounds with few labels (the rounds spread the few labels)."""
    if label_input is not None:
        return bool(label_input)
    if label_reuse or label_spread:
        return True
    if not few_labels(num_nodes, num_train):
        return True
    return label_reuse is None and label_reuse_for(None, model, True, mode, sparse_labels=True) > 0


def eval_fanouts_for(eval_fanouts: Optional[list], mode: str, fanouts: list, num_nodes: int) -> Optional[list]:
    """The fan-outs of a run's sampled evaluation, ``None`` for exact layer-wise inference:
    ``eval_fanouts`` when given, else ``fanouts`` in mini-batch mode on a graph of more than
    :data:`SAMPLED_EVAL_MIN_NODES` nodes, else ``None``."""
    if eval_fanouts is not None:
        return list(eval_fanouts)
    if mode == "minibatch" and num_nodes > SAMPLED_EVAL_MIN_NODES:
        return list(fanouts)
    return None


def check_eval_fanouts(eval_fanouts: list, mode: str, num_layers: int) -> None:
    """Raise ``ValueError`` unless ``eval_fanouts`` are ``num_layers`` integers >= 1 for a
    mini-batch run (the checks of :meth:`TrainConfig.validate`, also used by ``ttgnn plan``)."""
    for value in eval_fanouts:
        check_int("every entry of eval_fanouts", value, 1)
    if mode != "minibatch":
        raise ValueError("eval_fanouts (sampled evaluation) needs mode='minibatch'; full-graph mode "
                         "evaluates with the whole graph")
    if len(eval_fanouts) != num_layers:
        raise ValueError(f"need one evaluation fan-out per layer: {num_layers} layers, "
                         f"eval_fanouts {list(eval_fanouts)}")


def check_label_inputs_with_sampled_eval(label_reuse: int, eval_fanouts: Optional[list], label_spread: int = 0) -> None:
    """Raise ``ValueError`` for label reuse or label spreading with sampled evaluation (given, or
    chosen by :func:`eval_fanouts_for`): reuse feeds back every node's prediction, which sampled
    evaluation does not compute, and spreading holds an ``(N, num_classes)`` input for a graph
    that is evaluated on sampled neighbourhoods because it is too large for that."""
    if eval_fanouts is None:
        return
    where = (f"sampled evaluation (eval_fanouts {list(eval_fanouts)}; the default in mini-batch mode on graphs of "
             f"more than {SAMPLED_EVAL_MIN_NODES:,} nodes)")
    if label_reuse:
        raise ValueError(f"label_reuse={label_reuse} feeds back every node's prediction, which {where} does not "
                         "compute")
    if label_spread:
        raise ValueError(f"label_spread={label_spread} builds a (num_nodes, num_classes) label input over the "
                         f"whole graph, which {where} is there to avoid: use label_spread=0")


def preferred_rank(sparse_labels: bool) -> int:
    """The rank :func:`auto_rank` starts from, before its compression floor: :data:`AUTO_RANK_FEW_LABELS`
    with ``sparse_labels`` (:func:`few_labels`), else :data:`AUTO_RANK`."""
    return AUTO_RANK_FEW_LABELS if sparse_labels else AUTO_RANK


def auto_rank(num_nodes: int, dim: int, num_cores: Optional[int] = None, row_shape: Optional[list] = None,
              col_shape: Optional[list] = None, sparse_labels: bool = False, largest: bool = False) -> int:
    """The TT rank of a run that names none: :data:`AUTO_RANK`, :data:`AUTO_RANK_FEW_LABELS` with
    ``sparse_labels`` (:func:`few_labels`), lowered where it would compress the ``num_nodes x dim``
    table less than :data:`AUTO_MIN_COMPRESSION` times to the largest rank that reaches it (rank 1
    on a graph too small for any rank to). With ``largest`` (a TT table compressed from a trained
    full table, ``from_full``): the largest rank that reaches :data:`AUTO_MIN_COMPRESSION`, whatever
    the labels (a larger TT table keeps more of the full one)."""
    from .shapes import TTShape, shape_for_budget

    rank = preferred_rank(sparse_labels)
    if not largest and TTShape.build(num_nodes, dim, rank, num_cores, row_shape,
                                     col_shape).compression_ratio >= AUTO_MIN_COMPRESSION:
        return rank
    if TTShape.build(num_nodes, dim, 1, num_cores, row_shape, col_shape).compression_ratio < AUTO_MIN_COMPRESSION:
        return 1  # even rank 1 is under the ratio (a bad shape raises above, with its own message)
    shape = shape_for_budget(num_nodes, dim, compression=AUTO_MIN_COMPRESSION, num_cores=num_cores,
                             row_shape=row_shape, col_shape=col_shape)
    return max(shape.ranks) if largest else min(max(shape.ranks), rank)


def check_gat_width(hidden: int, heads: int) -> None:
    """Raise ``ValueError`` unless ``hidden`` splits evenly over ``heads`` (GAT's layers concatenate
    ``heads`` outputs of ``hidden // heads`` features)."""
    if heads < 1 or hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a positive multiple of heads ({heads}) for GAT")


def model_for(model: str, mode: str) -> str:
    """The architecture of a run: ``model`` unless it is ``"auto"``, then :data:`AUTO_MODEL` of
    ``mode`` (``"gat"`` in full-graph mode, ``"sage"`` in mini-batch mode)."""
    return AUTO_MODEL[mode] if model == "auto" else model


def label_reuse_for(label_reuse: Optional[int], model: str, label_input: bool, mode: str,
                    sparse_labels: bool = False) -> int:
    """The label reuse rounds of a run: ``label_reuse`` when given, else
    ``AUTO_LABEL_REUSE.get(model, 0)`` (``AUTO_LABEL_REUSE_FEW_LABELS`` with ``sparse_labels``, see
    :func:`few_labels`) when ``label_input`` (settled) is on and ``mode`` is ``"full"``, else 0.
    Only full-graph training, where it was measured and a round costs one more forward pass per
    epoch: in mini-batch mode a round is a layer-wise inference over every node per epoch, more
    than the sampled epoch itself, and sampled evaluation cannot feed it at all."""
    if label_reuse is not None:
        return label_reuse
    if not label_input or mode != "full":
        return 0
    return (AUTO_LABEL_REUSE_FEW_LABELS if sparse_labels else AUTO_LABEL_REUSE).get(model, 0)


def label_spread_for(label_spread: Optional[int], label_input: bool, mode: str) -> int:
    """The label spreading steps of a run: ``label_spread`` when given, else
    :data:`AUTO_LABEL_SPREAD` when ``label_input`` (settled) is on and ``mode`` is ``"full"``,
    else 0: in mini-batch mode the ``(N, num_classes)`` spread would be held for a graph too large
    to train whole."""
    if label_spread is not None:
        return label_spread
    if not label_input or mode != "full":
        return 0
    return AUTO_LABEL_SPREAD


def loss_for(loss: Optional[str], model: str, mode: str, sparse_labels: bool) -> str:
    """The training loss of a run: ``loss`` when given, else ``AUTO_LOSS.get(model, "ce")`` in
    full-graph mode (``mode == "full"``) without ``sparse_labels`` (see :func:`few_labels`), else
    ``"ce"``."""
    if loss is not None:
        return loss
    if mode != "full" or sparse_labels:
        return "ce"
    return AUTO_LOSS.get(model, "ce")


def init_for(init: str, spectral_vectors: Optional[int], num_nodes: int, num_train: int,
             dim: Optional[int] = None) -> tuple[str, Optional[int]]:
    """The table init of a run and its eigenvector count: ``(init, spectral_vectors)`` unless
    ``init`` is ``"auto"``; then ``("spectral", K)`` (``K``: ``spectral_vectors`` where given,
    else :data:`AUTO_SPECTRAL_VECTORS` capped at the table's width ``dim``) when the ``num_train``
    training nodes are fewer than :data:`LABEL_INPUT_MIN_TRAIN_FRACTION` of the ``num_nodes``
    (few labels: the graph's smoothest eigenvectors carry what they cannot) and the
    graph has at most :data:`AUTO_SPECTRAL_MAX_NODES` nodes (the spectral table is dense), else
    ``("gaussian", None)``. The same threshold decides label input (:func:`label_input_for`)."""
    if init != "auto":
        return init, spectral_vectors
    if not few_labels(num_nodes, num_train) or num_nodes > AUTO_SPECTRAL_MAX_NODES:
        return "gaussian", None
    if spectral_vectors is None:
        spectral_vectors = AUTO_SPECTRAL_VECTORS if dim is None else min(AUTO_SPECTRAL_VECTORS, dim)
    return "spectral", spectral_vectors
