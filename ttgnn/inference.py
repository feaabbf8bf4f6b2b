"""A finished run put to use: its best model rebuilt, every node's prediction, the learned table.

``ttgnn train`` keeps the best validation epoch's weights, with every setting they were trained
with, in ``best_model.pt``. :func:`load_run` rebuilds that model (no node order or spectral
init is recomputed: both are in the weights) and loads the run's dataset::

    from ttgnn.inference import class_probabilities, load_run, predict, write_embeddings

    run = load_run("runs/arxiv")                  # the dataset from $TTGNN_DATA (or root=, dataset=)
    classes = predict(run)                        # (N,) predicted class of every node
    probs = class_probabilities(run)              # (N, C)
    write_embeddings(run, "arxiv-emb.npy")        # (N, D) float32 input rows, in node-id order
    run.model.node_input.table                    # the TTNodeEmbedding itself (or nn.Embedding)

``ttgnn predict RUN_DIR`` does the same from the command line.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from .checkpoint import BEST_MODEL_NAME, METRICS_NAME, RunFolder, load_checkpoint
from .config import TrainConfig, check_int, is_dataset_path
from .data import NodeDataset, load_dataset
from .fileio import NODE_COLUMN_SUFFIXES, atomic_write, write_node_column

__all__ = ["FinishedRun", "load_run", "class_probabilities", "predict", "write_predictions", "write_embeddings"]

log = logging.getLogger(__name__)

PathLike = Union[str, Path]

#: The files :func:`write_predictions` writes (by suffix, any case) and :func:`write_embeddings` writes.
PREDICTION_SUFFIXES = NODE_COLUMN_SUFFIXES
EMBEDDING_SUFFIXES = (".npy",)


@dataclass
class FinishedRun:
    """A run's best model, ready to predict.

    Attributes:
        model (NodeClassifier): the best validation epoch's model, in eval mode, on the CPU.
        config (TrainConfig): the settings it was trained with (as the run settled them).
        dataset (NodeDataset): the graph it was trained on.
        epoch (int): the epoch of the weights: the best one (``0``: the compressed start of a
            ``--from-full`` run), or for a ``checkpoint.pt`` the last one it holds.
        graph: the graph as the model's layers take it.
        best (bool): the weights are the best validation epoch's (``best_model.pt``).
        stopped (tuple of int, optional): ``(last epoch trained, epochs planned)`` when the run's
            ``metrics.json`` shows it stopped early, else ``None``.
        stop_reason (str, optional): why, when ``stopped``: ``"interrupted"`` (``--resume``
            continues it), ``"diverged"`` (its loss became NaN or inf: a resume, being exact, would
            diverge again) or ``"running"`` (another process still trains it: its folder's lock is
            held).
    """

    model: torch.nn.Module
    config: TrainConfig
    dataset: NodeDataset
    epoch: int
    graph: object
    best: bool = True
    stopped: Optional[tuple] = None
    stop_reason: Optional[str] = None


def _stopped_early(folder: Path) -> tuple[Optional[tuple], Optional[str]]:
    """``((last epoch, planned epochs), why)`` from ``folder``'s ``metrics.json`` when the run ended
    early (``why`` as :attr:`FinishedRun.stop_reason`), else ``(None, None)``."""
    try:
        metrics = json.loads((folder / METRICS_NAME).read_text())
        epochs = metrics["epochs"]  # none: a from_full run that diverged in its first epoch (its start: epoch 0)
        last, planned = int(epochs[-1]["epoch"]) if epochs else 0, int(metrics["settings"]["epochs"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):  # none, or not one ttgnn wrote: no note
        return None, None
    if last >= planned:
        return None, None
    if RunFolder.in_use(folder):
        return (last, planned), "running"
    return (last, planned), "diverged" if isinstance(metrics.get("diverged"), dict) else "interrupted"


def load_run(folder: PathLike, dataset: Optional[NodeDataset] = None, *, root: Optional[PathLike] = None,
             cache_dir: Optional[PathLike] = None) -> FinishedRun:
    """Rebuild the best model of the run in ``folder`` from its ``best_model.pt``.

    Args:
        folder (str or Path): a run's ``--output-dir`` (or a ``best_model.pt`` or ``checkpoint.pt``
            file: the latter holds the last epoch's weights).
        dataset (NodeDataset, optional): the graph it was trained on; needed for a graph built in
            Python (``planted_partition``...). (default: loaded by the run's dataset name)
        root, cache_dir (str, optional): as for :func:`ttgnn.data.load_dataset`; a run that trained
            on a dataset folder given by its path reads the folder of that name under ``root``
            (it moved). (default: the run's own, else ``$TTGNN_DATA`` and ``~/.cache/ttgnn``)

    Raises:
        FileNotFoundError: ``folder`` holds no ``best_model.pt`` (no epoch finished yet).
        ValueError: the file is not a ttgnn best model, holds NaN or inf weights, or ``dataset``
            is not the run's graph.
        TypeError: ``dataset`` is neither a ``NodeDataset`` nor ``None`` (e.g. its name).
    """
    from .train import build_classifier

    if dataset is not None and not isinstance(dataset, NodeDataset):
        raise TypeError(f"dataset must be a NodeDataset (the graph built in Python) or None (loaded by the run's "
                        f"dataset name, under root=), got {type(dataset).__name__}")
    folder = Path(folder)
    path = folder / BEST_MODEL_NAME
    if folder.is_file():  # the best model file itself, or a checkpoint.pt (its last epoch's weights)
        path, folder = folder, folder.parent
    if path.is_dir():  # "not found" misled
        raise ValueError(f"{path} is a folder, not a ttgnn best model or checkpoint")
    if not path.is_file():
        from .train import FULL_TABLE_DIR

        stage = folder / FULL_TABLE_DIR / BEST_MODEL_NAME
        if stage.is_file():  # a from_full run stopped while its full table trained
            raise FileNotFoundError(f"{path} not found: the from_full run in {folder} stopped before its TT stage's "
                                    f"first epoch; --resume continues it, and its full table's run can be predicted "
                                    f"now: ttgnn predict {stage.parent}")
        raise FileNotFoundError(f"{path} not found: {folder} holds no finished epoch of a ttgnn run "
                                "(best_model.pt is written after the first epoch)")
    state = load_checkpoint(path)
    settings = state.get("settings")
    if not isinstance(settings, dict) or "model" not in state:
        raise ValueError(f"{path} is not a ttgnn best model (it has no settings or no weights)")
    _check_finite_weights(state["model"], path)
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{key: value for key, value in settings.items() if key in fields})
    if dataset is None:
        where = root if root is not None else config.root
        name = config.dataset
        if root is not None and is_dataset_path(name):  # a dataset folder moved: the root given now holds it
            name = os.path.join(root, Path(name).name)
        try:
            cache = cache_dir if cache_dir is not None else config.cache_dir
            dataset = load_dataset(name, root=where, cache_dir=cache)
        except (FileNotFoundError, NotADirectoryError) as err:
            holder = (f"the folder that holds {Path(config.dataset).name!r}" if is_dataset_path(config.dataset)
                      else "its root")
            raise type(err)(f"{err}; the run in {folder} trained on {config.dataset!r}: give {holder}, or "
                            "the NodeDataset itself for a graph built in Python") from None
    # The node order and a spectral table are in the weights: build without computing either. A run
    # recorded before ttgnn refused a core count that contradicts its shape (2026-11-30) was built with the
    # shape's count: so is its model here.
    shaped = config.row_shape is not None or config.col_shape is not None
    build = dataclasses.replace(config, order="identity", init="gaussian" if config.init == "spectral" else config.init,
                                spectral_vectors=None, output_dir=None, resume=False, overwrite=False, progress=False,
                                num_cores=None if shaped else config.num_cores)
    model = build_classifier(build, dataset)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, ValueError) as err:  # ValueError: a node order of another length
        # torch lists every mismatch on its own line: the first one says enough
        first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise ValueError(f"the run in {folder} was not trained on this dataset ({dataset.name}, "
                         f"{dataset.num_nodes:,} nodes, {dataset.num_classes} classes): {first}") from None
    # best_model.pt records it; a checkpoint.pt in its metrics; runs before 2026-11-30 in neither
    trained_on = state.get("dataset_fingerprint") or (state.get("metrics") or {}).get("dataset_fingerprint")
    if trained_on is not None and trained_on != dataset.fingerprint():
        raise ValueError(f"the run in {folder} was not trained on this dataset ({dataset.name}, {dataset.num_nodes:,} "
                         f"nodes, {dataset.num_classes} classes): its nodes, edges, labels or split differ from "
                         "those of the graph it was trained on; give the root it was trained on (--root)")
    model.eval()
    graph = dataset.dgl_graph(self_loops=True)
    if config.mode == "full":
        graph = model.gnn.prepare_graph(graph, torch.device("cpu"))
    epoch = int(state.get("epoch", 0))
    best = "optimizer" not in state  # a checkpoint.pt holds the optimizer, best_model.pt does not
    log.info("loaded %s of %s (epoch %d): %s + %s on %s", "the best model" if best else
             "the last checkpoint (not the best model)", folder, epoch, config.model, config.embedding, dataset.name)
    stopped, why = _stopped_early(folder)
    return FinishedRun(model, config, dataset, epoch, graph, best=best, stopped=stopped, stop_reason=why)


def _check_finite_weights(weights, path: Path, chunk: int = 1 << 24) -> None:
    """Raise ``ValueError`` naming the weights of ``weights`` (a state dict) that hold NaN or inf:
    a model saved by a run that diverged predicts nothing meaningful. Read ``chunk`` entries at a
    time, so a large table needs no second table-sized buffer."""
    if not isinstance(weights, dict):
        return  # not a state dict: load_state_dict names the problem
    bad = [name for name, value in weights.items()
           if torch.is_tensor(value) and value.is_floating_point()
           and not all(torch.isfinite(part).all() for part in value.reshape(-1).split(chunk))]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ValueError(f"{path} holds NaN or inf weights ({shown}): the run that saved it diverged; train again "
                         "with lower learning rates")


def check_exact_inference(run: FinishedRun) -> None:
    """Raise ``ValueError`` when ``run`` evaluated on sampled neighbourhoods (``eval_fanouts``): exact
    inference over every node, which its recorded accuracies do not come from, does not fit there."""
    if run.config.eval_fanouts is not None:
        raise ValueError(f"the run evaluated its split nodes on sampled neighbourhoods (eval_fanouts "
                         f"{run.config.eval_fanouts}): exact predictions of all {run.dataset.num_nodes:,} nodes need "
                         f"an ({run.dataset.num_nodes:,}, {run.dataset.num_classes}) table and full neighbourhoods, "
                         "which ttgnn predict does not attempt (its learned table can still be written: "
                         "write_embeddings, or ttgnn predict --embeddings without --output and --correct-smooth)")


@torch.no_grad()
def class_probabilities(run: FinishedRun) -> torch.Tensor:
    """``(N, C)`` class probabilities of every node, as the run evaluated them: the training labels
    are inputs of a label-input model (so training nodes are predicted with their own label shown).

    Raises:
        ValueError: the run evaluated on sampled neighbourhoods (``eval_fanouts``, the default above
            10^7 nodes in mini-batch mode), where exact inference over every node does not fit.
    """
    from .evaluation import all_logits

    check_exact_inference(run)
    logits = all_logits(run.model, run.graph, run.config.mode, run.config.eval_batch_size, run.dataset)
    return torch.softmax(logits.float(), dim=1)


@torch.no_grad()
def predict(run: FinishedRun, correct_smooth: bool = False, probs: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``(N,)`` predicted class of every node (int64); with ``correct_smooth``, after Correct and
    Smooth with strengths tuned on validation, as ``ttgnn train`` reports it. ``probs``: the
    run's :func:`class_probabilities` when the caller has them already."""
    probs = class_probabilities(run) if probs is None else probs
    if not correct_smooth:
        return probs.argmax(1)
    from .smoothing import tune_correct_and_smooth

    split = run.dataset.split
    return tune_correct_and_smooth(probs.log(), run.dataset.normalized_adjacency(), run.dataset.labels,
                                   split["train"], split["valid"]).pred


def write_predictions(path: PathLike, classes: torch.Tensor, probs: Optional[torch.Tensor] = None) -> Path:
    """Write predicted ``classes`` (``(N,)``) to ``path`` atomically: ``.npy`` (the int64 array), or
    ``.csv`` / ``.csv.gz`` (a header, then ``node,predicted_class[,probability]`` per node, the
    probability of that class when ``probs`` ``(N, C)`` is given).

    Raises:
        ValueError: another file suffix; ``classes`` not ``(N,)`` integers >= 0 (below ``C`` with
            ``probs``), or ``probs`` not ``(N, C)``.
        TypeError: ``classes`` or ``probs`` is not a tensor.
    """
    path = Path(path)
    name = path.name.lower()
    for arg, value in (("classes", classes), ("probs", probs)):
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"{arg} must be a torch.Tensor, got {type(value).__name__}")
    if classes.dim() != 1 or classes.is_floating_point() or classes.dtype == torch.bool:
        raise ValueError(f"classes must be (N,) class ids, got shape {tuple(classes.shape)} ({classes.dtype})")
    if probs is not None and (probs.dim() != 2 or probs.shape[0] != classes.shape[0]):
        raise ValueError(f"probs must be ({classes.shape[0]}, C) for {classes.shape[0]} nodes, got shape "
                         f"{tuple(probs.shape)}")
    if probs is None and classes.numel() and int(classes.min()) < 0:  # a class id of -1 was written as predicted
        raise ValueError(f"classes must be class ids >= 0, got {int(classes.min())}")
    if probs is not None and classes.numel() and not 0 <= int(classes.min()) <= int(classes.max()) < probs.shape[1]:
        raise ValueError(f"classes must lie in [0, {probs.shape[1]}) to index probs (N, {probs.shape[1]}), got "
                         f"{int(classes.min())} to {int(classes.max())}")
    if not name.endswith(PREDICTION_SUFFIXES):
        raise ValueError(f"predictions go to a .npy, .csv or .csv.gz file, got {path}")
    classes = classes.cpu().numpy().astype(np.int64)
    extra = [] if probs is None else [("probability", probs.cpu().numpy()[np.arange(classes.size), classes], "%.6f")]
    return write_node_column(path, classes, "predicted_class", extra)


@torch.no_grad()
def write_embeddings(run: FinishedRun, path: PathLike, chunk_rows: int = 65536, progress: bool = False) -> Path:
    """Write the model's learned input table, ``(N, D)`` float32 rows in node-id order, to the
    ``.npy`` file ``path`` atomically, ``chunk_rows`` rows at a time (a TT table is never
    materialised whole: the memory needed is one chunk's).

    Raises:
        ValueError: the run's input is the node features (there is no learned table), or
            ``chunk_rows`` is not an integer >= 1.
    """
    from tqdm.auto import tqdm

    check_int("chunk_rows", chunk_rows, 1)  # a negative count wrote an (N, D) header and no rows

    table = run.model.node_input.table
    if table is None:
        raise ValueError(f"the run's input is the node features ({run.config.embedding!r}): there is no learned table")
    path = Path(path)
    if not path.name.lower().endswith(EMBEDDING_SUFFIXES):
        raise ValueError(f"embeddings go to a .npy file, got {path}")
    num_nodes, dim = run.dataset.num_nodes, run.config.dim

    def write(fh) -> None:
        np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                  "fortran_order": False, "shape": (num_nodes, dim)})
        for start in tqdm(range(0, num_nodes, chunk_rows), disable=not progress, desc="embeddings", unit="chunk"):
            ids = torch.arange(start, min(start + chunk_rows, num_nodes))
            fh.write(np.ascontiguousarray(table(ids).float().cpu().numpy()).tobytes())

    return atomic_write(path, write)
