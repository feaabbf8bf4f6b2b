"""The ``ttgnn`` command line (also ``python -m ttgnn``).

Sub-commands::

    ttgnn info --rows N --dim D --rank R            shapes, parameters, memory, compression of a TT table
                                                    (or --compression X / --max-params P: the rank they pick)
    ttgnn partition --dataset ogbn-arxiv ...        node order onto TT rows: quality and time
    ttgnn train --dataset ogbn-arxiv ...            train a featureless GNN (GraphSAGE/GAT, TT or full table)
    ttgnn upgrade-checkpoint PATH                   convert a trusted checkpoint of an older ttgnn
    ttgnn plan --nodes N | --dataset NAME ...       memory per rank, all-reduce bytes, FLOPs: TT vs full
    ttgnn predict RUN                               a finished run's predictions and learned node table

Errors a user can cause (bad values, missing or malformed files, paths that are not what they
should be) end with one line on stderr and exit code 2; Ctrl-C with one line (and, for ``train``,
where the last complete checkpoint is) and exit code 130.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import decimal
import functools
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Optional, Sequence

from .choices import (DEVICES, EMBEDDINGS, GNN_BACKENDS, INITS, LOSSES, LR_SCHEDULES, MODEL_CHOICES, MODELS, MODES,
                      NORMS, ORDERS)
from .config import (AUTO_FROM_FULL_MAX_NODES, AUTO_LABEL_REUSE, AUTO_LABEL_REUSE_FEW_LABELS, AUTO_LABEL_SPREAD,
                     AUTO_LOSS, AUTO_MIN_COMPRESSION, AUTO_MODEL, AUTO_RANK, AUTO_RANK_FEW_LABELS,
                     AUTO_SPECTRAL_MAX_NODES, AUTO_SPECTRAL_VECTORS, LABEL_INPUT_MIN_TRAIN_FRACTION,
                     SAMPLED_EVAL_MIN_NODES, TrainConfig, model_for)
from .fileio import NODE_COLUMN_SUFFIXES
from .plan import DEFAULT_AVG_DEGREE, DEFAULT_CLASSES, OPTIMIZERS

log = logging.getLogger(__name__)

__all__ = ["main", "build_parser", "add_train_arguments", "config_from_args", "format_summary", "script_parser",
           "start_script", "report_errors", "parse_count", "int_at_least"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + 15  # SIGTERM
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE
#: The longest ``--dist-timeout`` in minutes (about two years; ``inf`` overflowed the timedelta).
MAX_DIST_TIMEOUT = 1e6


class HelpFormatter(argparse.HelpFormatter):
    """Shows ``(default: X)`` once, and only where there is a default worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default is None \
                or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse.BooleanOptionalAction):
            return f"{text} (default: {'on' if action.default else 'off'})".strip()
        if action.default is False:  # a store_true flag
            return text
        return f"{text} (default: %(default)s)".strip()


def _int_list(text: str) -> list[int]:
    parts = text.replace("x", ",").split(",")
    try:  # an empty element ("10,,300") is refused, not dropped: which number was meant is unknown
        values = [int(v) for v in parts] if all(v.strip() for v in parts) else []
    except ValueError:
        values = []
    if not values:  # an empty list would read as "automatic" where the option is a shape
        raise argparse.ArgumentTypeError(f"expected comma-separated ints such as 55,55,56, got {text!r}")
    return values


def parse_count(text: str) -> int:
    """A whole number for sizes that run to millions (``--rows``, ``--nodes``, ``--max-params``):
    ``169343``, ``1_000_000`` or ``1e8`` (a number in exponent form must be whole)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:  # exactly, as written (a float would round 1.00000000000000001e17)
        value = decimal.Decimal(text.strip()) if "e" in text.lower() else None
    except decimal.InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value.adjusted() > 99 or value != value.to_integral_value():
        # (more than 100 digits would only be refused later, after int() wrote them all out)
        raise argparse.ArgumentTypeError(f"expected a whole number such as 169343 or 1e8, got {text!r}")
    return int(value)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a count of at least ``minimum`` (``--seeds``, ``--jobs``, ``--nodes``):
    ``parse_count``'s numbers, and a refusal naming the bound (``--seeds 0`` failed later, inside
    the work, or did nothing and exited 0)."""
    def count(text: str) -> int:
        value = parse_count(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    count.__name__ = f"integer >= {minimum}"  # argparse names the type in "invalid <type> value"
    return count


def _rounds_or_auto(text: str) -> Optional[int]:
    """``--label-reuse`` and ``--label-spread``: ``auto`` (``None``, decided by the run) or a count >= 0."""
    if text.strip() == "auto":
        return None
    if text.strip().isdecimal():  # spaces around it, as int() takes them for the other counts
        return int(text)
    raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 0, got {text!r}")


def _loss_or_auto(text: str) -> Optional[str]:
    """``--loss``: ``auto`` (``None``, decided by the run) or one of :data:`ttgnn.choices.LOSSES`."""
    if text == "auto":
        return None
    if text in LOSSES:
        return text
    raise argparse.ArgumentTypeError(f"expected 'auto' or one of {', '.join(LOSSES)}, got {text!r}")


def _add_data_location(parser: argparse.ArgumentParser, root: Optional[str] = None,
                       cache_dir: Optional[str] = None) -> None:
    """``--root`` and ``--cache-dir``, as every sub-command that reads a dataset takes them."""
    parser.add_argument("--root", default=root, help="datasets root, the only place searched when given "
                        "(default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--cache-dir", default=cache_dir, help="cache for ogb files and node orders "
                        "(default: $TTGNN_CACHE, else ~/.cache/ttgnn)")


def _format_bytes(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if num < 1024 or unit == "TiB":
            return f"{num:.1f} {unit}" if unit != "B" else f"{int(num)} B"
        num /= 1024
    return f"{num:.1f} TiB"


# ---------------------------------------------------------------------- info
def _cmd_info(args: argparse.Namespace) -> int:
    from .shapes import TTShape, shape_for_budget

    bytes_per = 8 if args.dtype == "float64" else 4
    if args.compression is not None and args.max_params is not None:
        raise ValueError("give at most one of --compression and --max-params")
    budget = args.compression is not None or args.max_params is not None
    if budget and args.rank is not None:
        raise ValueError("give --rank or a budget (--compression / --max-params), not both: "
                         "a budget picks the rank")
    # every shape is built before anything is printed, so a bad argument leaves no half table
    if budget:
        shapes = [shape_for_budget(args.rows, args.dim, max_params=args.max_params, compression=args.compression,
                                   num_cores=args.num_cores, row_shape=args.row_shape, col_shape=args.col_shape)]
        ranks = [max(shapes[0].ranks)]
    else:
        ranks = args.rank or [16]
        shapes = [TTShape.build(args.rows, args.dim, rank, args.num_cores, args.row_shape, args.col_shape)
                  for rank in ranks]
    print(f"{'rank':>6} {'row shape':>20} {'col shape':>12} {'ranks':>20} {'params':>12} "
          f"{'TT memory':>11} {'dense memory':>13} {'compression':>12}")
    for rank, shape in zip(ranks, shapes):
        dense = shape.num_rows * shape.dim * bytes_per
        print(f"{rank:>6} {str(list(shape.row_shape)):>20} {str(list(shape.col_shape)):>12} "
              f"{str(list(shape.ranks)):>20} {shape.num_parameters:>12,} "
              f"{_format_bytes(shape.num_parameters * bytes_per):>11} {_format_bytes(dense):>13} "
              f"{shape.compression_ratio:>11,.1f}x")
    for rank, shape in zip(ranks, shapes):
        if not shape.compresses:  # the rule of TTNodeEmbedding's warning
            dense = shape.num_rows * shape.dim
            floor = TTShape.build(args.rows, args.dim, 1, args.num_cores, args.row_shape, args.col_shape)
            remedy = ("a lower --rank" if not budget else "--compression above 1" if args.compression is not None
                      else f"--max-params under {dense:,}")
            advice = (f"{remedy} compresses it" if floor.compresses else
                      f"no rank compresses it (rank 1 has {floor.num_parameters:,} parameters): keep it dense")
            print(f"note: at rank {rank} the TT table ({shape.num_parameters:,} parameters) is no smaller than the "
                  f"dense {shape.num_rows:,} x {shape.dim} table; {advice}")
    return 0


def _add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="shapes, parameter count, memory and compression of a TT table",
                       formatter_class=HelpFormatter)
    p.add_argument("--rows", type=parse_count, required=True, help="number of embedding rows N (e.g. 169343 or 1.11e8)")
    p.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    p.add_argument("--rank", type=int, nargs="+", default=None, help="one or more TT ranks (default: 16)")
    p.add_argument("--compression", type=float, default=None, help="instead of --rank: the largest rank with at "
                   "least this compression, as ttgnn train --compression picks it")
    p.add_argument("--max-params", type=parse_count, default=None, help="instead of --rank: the largest rank with at "
                   "most this many parameters")
    p.add_argument("--num-cores", type=int, default=None, help="number of TT cores, 2-8 (default: from N)")
    p.add_argument("--row-shape", type=_int_list, default=None, help="e.g. 55,55,56 (default: automatic)")
    p.add_argument("--col-shape", type=_int_list, default=None, help="e.g. 8,4,4 (default: automatic)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="the table's number type: bytes per value in the memory columns")
    p.set_defaults(func=_cmd_info)


# ---------------------------------------------------------------------- train
def add_train_arguments(parser: argparse.ArgumentParser, defaults: Optional[TrainConfig] = None) -> None:
    """Add one option per :class:`~ttgnn.config.TrainConfig` setting to ``parser`` (``ttgnn train``'s
    options; examples reuse them with their own ``defaults``)."""
    d = defaults or TrainConfig()
    p = parser
    p.add_argument("--dataset", default=d.dataset, help="ogbn-arxiv|ogbn-products|ogbn-papers100M, a folder "
                   "name under the root (cora, citeseer, pubmed) or a path in OGB raw layout")
    _add_data_location(p, d.root, d.cache_dir)
    p.add_argument("--model", choices=MODEL_CHOICES, default=d.model,
                   help="GNN: sage (GraphSAGE), gat, or auto: " + ", ".join(f"{m} in {mode} mode" for mode, m in
                                                                        AUTO_MODEL.items()))
    p.add_argument("--embedding", choices=EMBEDDINGS, default=d.embedding,
                   help="input table: tt (TT cores), full (nn.Embedding), features (the dataset's node features)")
    p.add_argument("--dim", type=int, default=d.dim, help="embedding dimension")
    few = f"{100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}%%"
    # a script's own TrainConfig may fix the rank and shapes: its help then says so, not the automatic rule
    p.add_argument("--rank", type=int, default=d.rank, help="TT rank (default: "
                   + (f"{d.rank})" if d.rank is not None else f"{AUTO_RANK}, or {AUTO_RANK_FEW_LABELS} where training "
                      f"nodes are under {few} of the graph; either lowered to keep at least "
                      f"{AUTO_MIN_COMPRESSION:.0f}x compression)"))
    p.add_argument("--num-cores", type=int, default=d.num_cores, help="TT cores, 2-8 (default: from the number "
                   "of nodes: 3 up to about 1.7e7, then 4)")
    for option, shape, what, example in (("--row-shape", d.row_shape, "row", "55,55,56"),
                                         ("--col-shape", d.col_shape, "column", "8,4,4")):
        fixed = ",".join(map(str, shape)) if shape is not None else "automatic"
        p.add_argument(option, type=_int_list, default=shape, help=f"TT {what} shape, e.g. {example} "
                       f"(default: {fixed})")
    p.add_argument("--order", choices=ORDERS, default=d.order, help="node order for the TT rows")
    p.add_argument("--compression", type=float, default=d.compression, help="pick the largest TT rank with at "
                   "least this compression (instead of --rank)")
    p.add_argument("--max-params", type=parse_count, default=d.max_params, help="pick the largest TT rank with at most "
                   "this many parameters instead of --rank")
    p.add_argument("--init", choices=INITS, default=d.init, help="input-table init (ortho/gaussian: TT only; "
                   "spectral: Laplacian eigenvectors, TT by TT-SVD; auto: spectral with "
                   f"{AUTO_SPECTRAL_VECTORS} vectors when training nodes are under "
                   f"{100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}%% of a graph of at most "
                   f"{AUTO_SPECTRAL_MAX_NODES:,} nodes, else gaussian)")
    p.add_argument("--spectral-vectors", type=int, default=d.spectral_vectors, metavar="K",
                   help="with --init spectral: the K leading eigenvectors, other columns zero (default: --dim; "
                   f"{AUTO_SPECTRAL_VECTORS} where --init auto picks spectral)")
    p.add_argument("--init-scale", type=float, default=d.init_scale,
                   help="std of the initial table entries (ortho TT: gain init_scale*sqrt(rows))")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden width of the GNN")
    p.add_argument("--num-layers", type=int, default=d.num_layers, help="GNN layers")
    p.add_argument("--heads", type=int, default=d.heads, help="GAT heads")
    p.add_argument("--dropout", type=float, default=d.dropout, help="dropout between GNN layers")
    p.add_argument("--input-dropout", type=float, default=d.input_dropout, help="dropout on the GNN's input vectors")
    p.add_argument("--attn-dropout", type=float, default=d.attn_dropout, help="GAT attention dropout")
    p.add_argument("--edge-dropout", type=float, default=d.edge_dropout,
                   help="full-graph training: each layer leaves out this share of the edges, drawn anew per "
                        "layer and step")
    p.add_argument("--norm", choices=NORMS, default=d.norm, help="normalisation between GNN layers")
    p.add_argument("--residual", action=argparse.BooleanOptionalAction, default=d.residual,
                   help="a linear skip around each GNN layer")
    p.add_argument("--gnn-backend", choices=GNN_BACKENDS, default=d.gnn_backend,
                   help="GNN layers: dgl (DGL's, where the installed DGL runs: CPU with the PyPI wheel), torch "
                   "(index tensors, any device; same weights, checkpoints load across), auto (torch for gat in full "
                   "mode, where it is faster; else dgl where it runs, else torch)")
    p.add_argument("--mode", choices=MODES, default=d.mode, help="full-graph or neighbour sampling")
    p.add_argument("--fanouts", type=_int_list, default=d.fanouts, help="neighbours per layer (minibatch)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="training nodes per step and process (minibatch)")
    p.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size, help="nodes per inference step (minibatch)")
    p.add_argument("--eval-fanouts", type=_int_list, default=d.eval_fanouts,
                   help="minibatch: evaluate on neighbourhoods sampled with these fan-outs instead of exact "
                        f"inference over all nodes (default: exact, the training fan-outs above "
                        f"{SAMPLED_EVAL_MIN_NODES:,} nodes)")
    p.add_argument("--epochs", type=int, default=d.epochs, help="training epochs")
    p.add_argument("--lr", type=float, default=d.lr, help="GNN learning rate")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="GNN weight decay")
    p.add_argument("--emb-lr", type=float, default=d.emb_lr, help="embedding learning rate")
    p.add_argument("--emb-weight-decay", type=float, default=d.emb_weight_decay, help="embedding weight decay")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=d.lr_schedule,
                   help="learning rates over the epochs: constant, or cosine (from --lr and --emb-lr down "
                   "towards 0 at the last of --epochs)")
    p.add_argument("--label-smoothing", type=float, default=d.label_smoothing, help="cross-entropy label smoothing")
    p.add_argument("--weight-average", type=int, default=d.weight_average, metavar="EPOCHS",
                   help="evaluate, select and save the moving average of the weights over about this many "
                   "epochs instead of the trained weights (also evaluated, as raw_valid_acc and raw_test_acc); "
                   "0: off")
    p.add_argument("--loss", type=_loss_or_auto, default=d.loss, metavar="{" + ",".join((*LOSSES, "auto")) + "}",
                   help="training loss: the mean cross-entropy (ce), or the mean of log(eps + ce) - log(eps), "
                   "eps = 1 - log 2 (log-ce), which weighs badly fitted nodes less. 'auto' (the default): "
                   + ", ".join(f"{n} for {m}" for m, n in AUTO_LOSS.items()) + " in full-graph mode where "
                   f"training nodes are at least {100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}%% of the graph, else ce")
    p.add_argument("--label-input", action=argparse.BooleanOptionalAction, default=d.label_input,
                   help="the label trick: known training labels are node inputs (a random --label-rate of the "
                   "training nodes each epoch, the loss on the rest; every training label at evaluation; "
                   "validation and test labels never) (default: on when training nodes are at least "
                   f"{100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}%% of the graph; below that, on for "
                   + ", ".join(AUTO_LABEL_REUSE_FEW_LABELS) + " in full-graph mode with --label-reuse auto)")
    p.add_argument("--label-rate", type=float, default=d.label_rate,
                   help="share of training nodes whose labels are inputs in an epoch (with --label-input)")
    p.add_argument("--label-reuse", type=_rounds_or_auto, default=d.label_reuse, metavar="ROUNDS",
                   help="label reuse: feed the model's predicted class probabilities of the nodes without "
                   "a known label back as their label input this many times, in training and at evaluation "
                   "(each round one more pass over all nodes); implies --label-input. 'auto' (the default): "
                   + ", ".join(f"{n} for {m}" for m, n in AUTO_LABEL_REUSE.items())
                   + " in full-graph mode with label input ("
                   + ", ".join(f"{n} for {m}" for m, n in AUTO_LABEL_REUSE_FEW_LABELS.items())
                   + f" when training nodes are under {100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}%% of the graph), "
                   "else 0")
    p.add_argument("--label-spread", type=_rounds_or_auto, default=d.label_spread, metavar="STEPS",
                   help="label spreading: the label input of the nodes without a known label starts as the known "
                   "labels spread over the graph in this many label propagation steps, before any reuse round, "
                   "in training and at evaluation; implies --label-input. 'auto' (the default): "
                   f"{AUTO_LABEL_SPREAD} in full-graph mode with label input, else 0")
    p.add_argument("--from-full", action=argparse.BooleanOptionalAction, default=d.from_full,
                   help="TT only: train a full table first (its run in OUTPUT_DIR/full-table), then start the TT "
                   "table from its TT-SVD and the GNN from its GNN, and train both for --finetune-epochs at "
                   "--finetune-lr (a TT-sized model; training needs the full table's memory). Default: on for a "
                   f"TT table in one-process full-graph training where training nodes are under {few} of a graph of "
                   f"at most {AUTO_FROM_FULL_MAX_NODES:,} nodes")
    p.add_argument("--finetune-epochs", type=int, default=d.finetune_epochs,
                   help="with --from-full: epochs of the TT stage")
    p.add_argument("--finetune-lr", type=float, default=d.finetune_lr,
                   help="with --from-full: learning rate of the TT stage (GNN and table)")
    p.add_argument("--finetune-distill", type=float, default=d.finetune_distill, metavar="WEIGHT",
                   help="with --from-full in full-graph mode: add WEIGHT times the KL divergence from the full "
                   "table's class probabilities over every node to the TT stage's loss (0: off)")
    p.add_argument("--correct-smooth", action=argparse.BooleanOptionalAction, default=d.correct_smooth,
                   help="after training, also report the best model's accuracy after Correct and Smooth")
    p.add_argument("--seed", type=int, default=d.seed, help="seed for the init, dropout, label sampling and node order")
    p.add_argument("--num-threads", type=int, default=d.num_threads, help="torch threads (default: torch's choice)")
    p.add_argument("--output-dir", default=d.output_dir, help="checkpoint.pt, best_model.pt and metrics.json go "
                   "here; one run per folder")
    p.add_argument("--resume", action="store_true", default=d.resume,
                   help="continue the run in --output-dir from its checkpoint.pt")
    p.add_argument("--overwrite", action="store_true", default=d.overwrite,
                   help="replace a run already in --output-dir")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=d.progress, help="tqdm bars")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`~ttgnn.config.TrainConfig` of parsed :func:`add_train_arguments` options."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in names})


def script_parser(description: str, defaults: TrainConfig, device: str = "cpu") -> argparse.ArgumentParser:
    """An argument parser with every ``ttgnn train`` option (``--device`` and ``--dist-timeout``
    too), its defaults from ``defaults`` (and ``device``): the start of a training script
    (``examples/``); add the script's own options, call :func:`start_script`, then
    :func:`run_training`."""
    parser = argparse.ArgumentParser(description=description, formatter_class=HelpFormatter)
    add_train_arguments(parser, defaults=defaults)
    _add_run_arguments(parser, device)
    return parser


def _add_run_arguments(p: argparse.ArgumentParser, device: str = "cpu") -> None:
    """Where and how a training run's processes run: ``--device``, ``--dist-timeout``."""
    p.add_argument("--device", choices=DEVICES, default=device,
                   help="cuda: one GPU per rank (LOCAL_RANK) under torchrun, NCCL")
    p.add_argument("--dist-timeout", type=float, default=60.0,
                   help="minutes a rank waits for the others (e.g. while rank 0 evaluates) before failing")


def explicit_options(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]] = None) -> set:
    """The destinations of the options the command line ``argv`` (default: ``sys.argv[1:]``) gives
    itself, whatever value (abbreviations and ``--opt=value`` included): ``parser`` is parsed
    again with every default replaced by a marker."""
    import copy

    marker = object()
    probe = copy.deepcopy(parser)
    parsers = [probe]
    while parsers:  # the parser and its subcommands' parsers
        for action in parsers.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.dest != "help":
                action.default = marker
    parsed = probe.parse_args(argv)
    return {dest for dest, value in vars(parsed).items() if value is not marker}


def small_run(config: TrainConfig, given: set, forced: Sequence[str] = (), **settings) -> TrainConfig:
    """``config`` with a script's smoke-run ``settings`` (``--tiny``) wherever the command line did not
    give that option itself (``given``, from :func:`explicit_options`): ``--tiny --epochs 5`` trains
    5 epochs. The ``forced`` settings are set anyway (e.g. the synthetic graph's name), with a
    warning naming the options they replace. Without an ``--output-dir`` the smoke run writes to the
    script's folder plus ``-tiny`` (``runs/arxiv-tiny``), replacing the smoke run before it there
    unless ``--resume`` or ``--overwrite`` is given, so that it never holds the real run's folder."""
    replaced = sorted(key for key in forced if key in given)
    if replaced:
        log.warning("--tiny: %s not read (the smoke run sets %s itself)",
                    ", ".join("--" + key.replace("_", "-") for key in replaced), "them" if len(replaced) > 1 else "it")
    if config.output_dir and "output_dir" not in given:
        settings = {"output_dir": config.output_dir.rstrip("/\\") + "-tiny", **settings}
        if not given & {"resume", "overwrite"}:
            settings["overwrite"] = True
    kept = {key: value for key, value in settings.items() if key in forced or key not in given}
    return layers_for_fanouts(dataclasses.replace(config, **kept), given)


def run_training(args: argparse.Namespace, config: TrainConfig, dataset=None) -> Optional[dict]:
    """Train ``config`` as ``ttgnn train`` does: checked before any process group or data, warnings
    for options the run does not read, one process per rank under torchrun (``args.device``,
    ``args.dist_timeout``). Returns the metrics on rank 0, ``None`` on the others."""
    import datetime

    config.validate()  # before any process group or data loading, and before the kernels load (minutes on first use)
    from . import distributed as tdist
    from .train import train

    unread = [(options, reason) for options, reason in (
        (_unread_table_options(args), f"with --embedding {config.embedding}"),
        (_unread_sampling_options(args), "with --mode full (the whole graph in every step)")) if options]
    unread += _unread_model_options(args)
    if not 0 < args.dist_timeout <= MAX_DIST_TIMEOUT:  # NaN fails too
        raise ValueError(f"--dist-timeout must be a number of minutes in (0, {MAX_DIST_TIMEOUT:g}], "
                         f"got {args.dist_timeout}")
    # Under torchrun, one process per rank (gloo on CPU; NCCL, one GPU per rank); else one process.
    with tdist.distributed(device=args.device, timeout=datetime.timedelta(minutes=args.dist_timeout)) as ctx:
        tdist.configure_logging(ctx.rank, ctx.world_size)
        for options, reason in unread if ctx.is_main else ():  # once, not once per rank
            log.warning("%s: not read %s; ignored", ", ".join(options), reason)
        if not config.output_dir and ctx.is_main:  # a long run a user cannot resume or predict with after
            log.warning("no --output-dir: this run keeps no checkpoint, best model or metrics.json (give "
                        "--output-dir DIR to resume it and to use it with `ttgnn predict`)")
        metrics = train(config, dataset=dataset, process_rank=ctx.rank, world_size=ctx.world_size, device=ctx.device)
    return metrics if ctx.is_main else None


def start_script(parser: argparse.ArgumentParser,
                 argv: Optional[Sequence[str]] = None) -> tuple[argparse.Namespace, TrainConfig]:
    """Parses the command line of a training script and prepares the process as ``ttgnn train``
    does: freed memory kept (:func:`ttgnn.allocator.configure_allocator`), INFO logs on stderr.

    ``args.given`` holds the options the command line typed (:func:`explicit_options`). The
    script's own defaults give way to typed options that size the same thing: its rank to
    ``--compression``/``--max-params``, its column shape to ``--dim``, its shapes to
    ``--num-cores`` or to a typed shape of another length. In mini-batch mode the layers follow
    the fan-outs unless ``--num-layers`` is typed (:func:`layers_for_fanouts`).

    Returns:
        ``(args, config)``: every parsed option, and the :class:`~ttgnn.config.TrainConfig` of the
        ``ttgnn train`` ones.
    """
    from .allocator import configure_allocator

    args = parser.parse_args(argv)
    args.given = explicit_options(parser, argv)
    configure_allocator()  # keep freed memory: no page faults every step ($TTGNN_MALLOC=default: off)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # A script's own defaults give way to the options that size the same thing (the user never
    # typed --rank 8 beside --compression 100): dropped where the command line gives the other.
    for given_one, defaults in ((("compression", "max_params"), ("rank",)), (("dim",), ("col_shape",)),
                                (("num_cores",), ("row_shape", "col_shape"))):
        if args.given & set(given_one):
            for key in defaults:
                if key not in args.given:
                    setattr(args, key, None)
    for typed, other in (("row_shape", "col_shape"), ("col_shape", "row_shape")):  # a shape of other length
        if (typed in args.given and other not in args.given and getattr(args, other) is not None
                and len(getattr(args, typed)) != len(getattr(args, other))):
            setattr(args, other, None)
    return args, layers_for_fanouts(config_from_args(args), args.given)


def layers_for_fanouts(config: TrainConfig, given: set) -> TrainConfig:
    """``config`` with one layer per fan-out in mini-batch mode where the command line (``given``)
    did not set ``--num-layers`` itself (a count given that differs is refused by validation)."""
    if config.mode == "minibatch" and "num_layers" not in given:
        return dataclasses.replace(config, num_layers=len(config.fanouts))
    return config


def _cmd_train(args: argparse.Namespace) -> int:
    metrics = run_training(args, config_from_args(args))
    if metrics is not None:
        print(format_summary(metrics))
    return 0


def _unread_table_options(args: argparse.Namespace) -> list[str]:
    """The options given to ``ttgnn train`` that the input does not read: the TT table's, with
    ``--embedding full`` (a normal or spectral table), and every table option with ``features`` (no
    table at all). They would change nothing. The TT options' defaults are ``None`` (``--init
    auto``), so those listed were typed; options with other defaults (``--dim``, ``--order``...) are
    listed only where ``args.given`` says they were typed."""
    if args.embedding == "tt":
        return []
    given = getattr(args, "given", None)  # the options typed (main and start_script record them)
    unused = [option for option, value in (("--rank", args.rank), ("--num-cores", args.num_cores),
                                           ("--row-shape", args.row_shape), ("--col-shape", args.col_shape),
                                           ("--compression", args.compression), ("--max-params", args.max_params))
              if value is not None and (given is None or _dest(option) in given)]
    # options with a value by default: named only where the command line is known to have typed them
    with_defaults = ("--order",) if args.embedding == "full" else \
        ("--dim", "--init-scale", "--emb-lr", "--emb-weight-decay", "--order")
    typed = [option for option in with_defaults if given is not None and _dest(option) in given]
    if args.embedding == "full":
        return unused + (["--init ortho"] if args.init == "ortho" else []) + typed
    # the node features are the input: no table to start
    return (unused + ([f"--init {args.init}"] if args.init != "auto" else [])
            + (["--spectral-vectors"] if args.spectral_vectors is not None else []) + typed)


def _dest(option: str) -> str:
    return option[2:].replace("-", "_")


def _unread_model_options(args: argparse.Namespace) -> list[tuple[list[str], str]]:
    """``(options, reason)`` for options typed on the command line that this run's other settings
    leave unread: GAT's with GraphSAGE, label input's without it, the TT stage's without
    ``--from-full``. Empty where the typed options are not known (``args.given``)."""
    given = getattr(args, "given", None)
    if given is None:
        return []
    found = []
    for condition, options, reason in (
            (model_for(args.model, args.mode) == "sage", ("--heads", "--attn-dropout"),
             "with --model sage" if args.model == "sage" else "by GraphSAGE, which --model auto trains when sampling"),
            (args.label_input is False, ("--label-rate",), "with --no-label-input"),
            (args.from_full is False, ("--finetune-lr", "--finetune-epochs", "--finetune-distill"),
             "with --no-from-full"),
            (args.from_full is not False and args.mode == "minibatch", ("--finetune-distill",),
             "with --mode minibatch (distillation is a full-graph step's)")):
        typed = [option for option in options if _dest(option) in given]
        if condition and typed:
            found.append((typed, reason))
    return found


def _unread_sampling_options(args: argparse.Namespace) -> list[str]:
    """The neighbour-sampling options given to ``ttgnn train`` in full-graph mode, which reads none
    of them: those set to other than their default (a default typed out is not told apart)."""
    if args.mode != "full":
        return []
    defaults = TrainConfig()
    return [option for option, value, default in (
        ("--fanouts", args.fanouts, defaults.fanouts), ("--batch-size", args.batch_size, defaults.batch_size),
        ("--eval-batch-size", args.eval_batch_size, defaults.eval_batch_size)) if value != default]


def format_summary(metrics: dict) -> str:
    """One or two lines on a finished run: best validation epoch, test accuracy, compression, time, memory."""
    text = (f"{metrics['dataset']} {metrics['model']}+{metrics['embedding']}: best valid "
            f"{metrics['best_valid_acc']:.4f} (epoch {metrics['best_epoch']}), test {metrics['test_acc']:.4f}, "
            f"compression {metrics['compression_ratio']:,.1f}x")
    if metrics.get("epoch_time") is not None:
        text += f", epoch time {metrics['epoch_time']:.2f}s, peak memory {metrics['peak_memory_mib']:.0f} MiB"
    if "correct_smooth" in metrics:
        cs = metrics["correct_smooth"]
        text += f"\n  with correct and smooth: valid {cs['valid_acc']:.4f}, test {cs['test_acc']:.4f}"
    return text


def _add_train_parser(sub) -> None:
    p = sub.add_parser("train", help="train a featureless GNN (GraphSAGE/GAT) on a TT, full or feature input",
                       formatter_class=HelpFormatter)
    add_train_arguments(p)
    _add_run_arguments(p)
    p.set_defaults(func=_cmd_train)


# ---------------------------------------------------------------------- partition
def _cmd_partition(args: argparse.Namespace) -> int:
    """Order a dataset's nodes onto TT rows with each method; print quality figures and time."""
    import time

    from .data import default_cache_dir, load_dataset
    from .fileio import check_output_file, write_node_column
    from .partition import hierarchical_order
    from .partition.checks import check_row_shape
    from .shapes import MAX_CORES, MIN_CORES, auto_num_cores, cores_of_shape, factor_rows

    # refused before the graph loads
    if not 0 <= args.seed < 2**31:
        raise ValueError(f"--seed must be in [0, 2**31), got {args.seed}")
    if args.num_cores is not None:
        if not MIN_CORES <= args.num_cores <= MAX_CORES:
            raise ValueError(f"--num-cores must be in [{MIN_CORES}, {MAX_CORES}], got {args.num_cores}")
        if args.row_shape is not None and len(args.row_shape) != args.num_cores:
            raise ValueError(f"--num-cores {args.num_cores} but --row-shape {','.join(map(str, args.row_shape))} has "
                             f"{len(args.row_shape)} factor(s), one per core; give one of them, or make them agree")
    if args.row_shape is not None:  # an order for a TT table: 2-8 factors, as ttgnn train takes
        cores_of_shape("--row-shape", args.row_shape, None)
    outputs = {}
    if args.output is not None and not args.output.strip():  # "" was no output at all, silently
        raise ValueError("--output is empty: give a file name (.npy, .csv or .csv.gz), or leave the option out")
    if args.output:
        if Path(args.output).suffix and not args.output.lower().endswith(NODE_COLUMN_SUFFIXES):
            raise ValueError(f"--output: node orders go to a .npy, .csv or .csv.gz file (or a name without a "
                             f"suffix, written as .npy), got {args.output}")
        for method in args.method:
            name = args.output if len(args.method) == 1 else _method_file(args.output, method)
            outputs[method] = check_output_file(name, "--output")
            check_outside_datasets(name, "--output", args.dataset, args.root)
    started = time.perf_counter()
    dataset = load_dataset(args.dataset, root=args.root, cache_dir=args.cache_dir)
    load_seconds = time.perf_counter() - started
    if args.row_shape is None:
        num_cores = auto_num_cores(dataset.num_nodes) if args.num_cores is None else args.num_cores
        row_shape = check_row_shape(factor_rows(dataset.num_nodes, num_cores), dataset.num_nodes)
    else:
        row_shape = check_row_shape(args.row_shape, dataset.num_nodes)
    cache_dir = None if args.no_cache else default_cache_dir(args.cache_dir)
    print(f"{dataset.name}: {dataset.num_nodes:,} nodes, {dataset.num_edges:,} stored edges "
          f"(loaded in {load_seconds:.1f} s); row shape {list(row_shape)}")
    prefix_keys = [f"shared_prefix_{level}" for level in range(1, len(row_shape))]
    header = "".join(f"{'shared ' + str(level) + ' digit' + ('s' if level > 1 else ''):>18}"
                     for level in range(1, len(row_shape)))
    width = max(20, *(len(method) + 1 for method in args.method))  # hierarchical-kaminpar is 21 characters
    print(f"{'method':>{width}}{header}{'seconds':>10}{'total s':>10}")
    cached = False
    for method in args.method:
        started = time.perf_counter()
        order = hierarchical_order(dataset.csr(), row_shape, method=method, seed=args.seed,
                                   cache_dir=cache_dir, progress=args.progress)
        total = time.perf_counter() - started
        figures = "".join(f"{order.quality[key]:>18.4f}" for key in prefix_keys)
        mark = "  (cached)" if order.from_cache else ""
        cached |= order.from_cache
        print(f"{method:>{width}}{figures}{order.quality['seconds']:>10.2f}{total:>10.2f}{mark}")
        if method in outputs:
            write_node_column(outputs[method], order.perm, "tt_row")
            print(f"{'':>{width}}perm (node id -> TT row) written to {outputs[method]}")
    if cached:
        print("(cached: an order read from the cache; its seconds are those it took when computed, total s this "
              "run's; --no-cache computes it again)")
    return 0


def _method_file(output: str, method: str) -> str:
    """``order.npy`` -> ``order.<method>.npy``, ``order.csv[.gz]`` -> ``order.<method>.csv[.gz]``, ``order``
    -> ``order.<method>.npy``."""
    for suffix in NODE_COLUMN_SUFFIXES:
        if output.lower().endswith(suffix):
            return f"{output[:-len(suffix)]}.{method}{suffix}"
    return f"{output}.{method}.npy"


def _add_partition_parser(sub) -> None:
    p = sub.add_parser("partition", help="order a graph's nodes onto TT rows (hierarchical METIS and baselines)",
                       formatter_class=HelpFormatter)
    p.add_argument("--dataset", required=True, help="ogbn-arxiv|ogbn-products|ogbn-papers100M, a folder name "
                   "under the root (cora, citeseer, pubmed) or a path in OGB raw layout")
    _add_data_location(p)
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached node orders")
    p.add_argument("--row-shape", type=_int_list, default=None, help="TT row shape, e.g. 55,55,56 "
                   "(default: automatic from --num-cores)")
    p.add_argument("--num-cores", type=int, default=None, help="TT cores when --row-shape is automatic, 2-8 "
                   "(default: from the number of nodes)")
    p.add_argument("--method", nargs="+", choices=ORDERS, default=[TrainConfig.order],
                   help=f"one or more node orders to compute and compare (default: {TrainConfig.order}, the one "
                   "`ttgnn train` uses, so that its cached order is ready for training)")
    p.add_argument("--seed", type=int, default=0, help="seed for METIS and the random order")
    p.add_argument("--output", default=None, help="write perm (node id -> TT row) to this .npy file, or a .csv / "
                   ".csv.gz file (node,tt_row per line); with several methods, one file each: order.npy -> "
                   "order.<method>.npy")
    p.add_argument("--progress", action="store_true", help="tqdm bars over the METIS calls")
    p.set_defaults(func=_cmd_partition)


# ---------------------------------------------------------------------- upgrade-checkpoint
def _cmd_upgrade_checkpoint(args: argparse.Namespace) -> int:
    from .checkpoint import upgrade_checkpoint

    def one(path: str) -> None:
        if upgrade_checkpoint(path):
            print(f"{path}: converted to the current checkpoint format")
        else:
            print(f"{path}: already in the current checkpoint format, left as it is")

    # each file on its own: one that cannot be read does not leave the ones after it unconverted, unnamed
    failed = [path for path in args.path
              if report_errors("ttgnn upgrade-checkpoint", functools.partial(one, path), trains=False) != 0]
    if failed and len(args.path) > 1:
        print(f"ttgnn upgrade-checkpoint: {len(failed)} of {len(args.path)} files not converted: {', '.join(failed)}",
              file=sys.stderr)
    return EXIT_USAGE if failed else 0


def _add_upgrade_parser(sub) -> None:
    p = sub.add_parser("upgrade-checkpoint", formatter_class=HelpFormatter,
                       help="convert checkpoints of an older ttgnn (ONLY files you trust: this unpickles them)")
    p.add_argument("path", nargs="+", help="checkpoint.pt / best_model.pt files")
    p.set_defaults(func=_cmd_upgrade_checkpoint)


def check_outside_datasets(path: str, option: str, dataset: str, root: Optional[str]) -> None:
    """Raise ``ValueError`` when the output file ``path`` (given as ``option``) lies in the folder the
    dataset is read from (an OGB dataset's: its folder under the root): ttgnn never writes there (a
    node order or predictions written over ``raw/edge.csv.gz`` made the graph unreadable)."""
    from .data import dataset_folder, ogb_folder

    folder = dataset_folder(dataset, root) or ogb_folder(dataset, root)
    if Path(path).resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"{option} {path} is inside the dataset folder {folder}, which ttgnn reads and never "
                         "writes to: give a file elsewhere")


# ---------------------------------------------------------------------- predict
def _cmd_predict(args: argparse.Namespace) -> int:
    from .evaluation import Accuracy
    from .fileio import check_output_file
    from .inference import (EMBEDDING_SUFFIXES, PREDICTION_SUFFIXES, class_probabilities, load_run, predict,
                            write_embeddings, write_predictions)

    for option, path, suffixes in (("--output", args.output, PREDICTION_SUFFIXES),
                                   ("--embeddings", args.embeddings, EMBEDDING_SUFFIXES)):
        if path is None:
            continue
        if not path.lower().endswith(suffixes):
            raise ValueError(f"{option} must name a {' / '.join(suffixes)} file, got {path}")
        check_output_file(path, option)
    if args.output is not None and args.embeddings is not None and (
            Path(args.output).resolve() == Path(args.embeddings).resolve()):
        raise ValueError(f"--output and --embeddings name the same file, {args.output}: the table would replace "
                         f"the predictions")
    run = load_run(args.run, root=args.root, cache_dir=args.cache_dir)
    for option, path in (("--output", args.output), ("--embeddings", args.embeddings)):
        if path is not None:
            check_outside_datasets(path, option, run.config.dataset,
                                   run.config.root if args.root is None else args.root)
    head = f"{args.run}: {run.config.model} + {run.config.embedding} on {run.dataset.name}, " + (
        f"best epoch {run.epoch}" if run.best else f"epoch {run.epoch} (the checkpoint's last)")
    if run.config.eval_fanouts is not None and args.output is None and not args.correct_smooth:
        # no predictions (class_probabilities refuses them), but the table: what a 10^8-node run learned
        print(f"{head}; no predictions: the run evaluated on sampled neighbourhoods (eval_fanouts "
              f"{run.config.eval_fanouts}), its accuracies are in metrics.json")
    else:
        probs = class_probabilities(run)
        classes = predict(run, correct_smooth=args.correct_smooth, probs=probs)
        accuracy = Accuracy(run.dataset.evaluator_name)
        labels = run.dataset.labels
        scores = ", ".join(f"{key} {accuracy(classes[idx], labels[idx]):.4f}"
                           for key, idx in run.dataset.split.items())
        how = " after Correct and Smooth" if args.correct_smooth else ""
        print(f"{head}; accuracy{how}: {scores}")
    if run.stopped is not None:
        last, planned = run.stopped
        print({"interrupted": f"note: the run stopped after epoch {last} of {planned} (interrupted); its best model "
                              "so far is used: `ttgnn train` with the run's command plus --resume finishes it",
               "diverged": f"note: the run stopped after epoch {last} of {planned} (diverged: its loss became NaN or "
                           "inf); its best model so far is used; a --resume would diverge again (it is exact): train "
                           "again with lower learning rates",
               "running": f"note: the run is still training (epoch {last} of {planned} done; its folder is locked); "
                          "its best model so far is used: predict again when it ends"}[run.stop_reason])
    if args.output is not None:
        write_predictions(args.output, classes, None if args.correct_smooth else probs)
        print(f"predicted classes of {classes.numel():,} nodes: {args.output}")
    if args.embeddings is not None:
        write_embeddings(run, args.embeddings, progress=args.progress)
        print(f"input table, {run.dataset.num_nodes:,} x {run.config.dim} float32 rows in node-id order: "
              f"{args.embeddings}")
    return 0


def _add_predict_parser(sub) -> None:
    p = sub.add_parser("predict", formatter_class=HelpFormatter,
                       help="a finished run's best model: every node's predicted class, the learned node table")
    p.add_argument("run", help="the run's --output-dir (it holds best_model.pt), or a best_model.pt or checkpoint.pt "
                   "file (the latter: the last epoch's weights)")
    _add_data_location(p)
    p.add_argument("--output", default=None, help="write every node's predicted class: .npy (int64), or .csv / "
                   ".csv.gz (node,predicted_class,probability; without the probability after --correct-smooth)")
    p.add_argument("--correct-smooth", action="store_true",
                   help="predict after Correct and Smooth (strengths tuned on validation), as train reports it")
    p.add_argument("--embeddings", default=None,
                   help="write the learned input table, (N, D) float32 rows in node-id order, to this .npy file")
    p.add_argument("--progress", action="store_true", help="a tqdm bar over the table's rows")
    p.set_defaults(func=_cmd_predict)


# ---------------------------------------------------------------------- plan
def _parse_memory(text: str) -> float:
    units = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
             "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}
    stripped = text.strip().upper()
    number = stripped.rstrip("KMGTIB")
    try:
        value = float(number) * units[stripped[len(number):]]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"expected a size such as 80GB or 24GiB, got {text!r}") from None
    if not 0 < value < float("inf"):  # nan compared False with 0 and passed
        raise argparse.ArgumentTypeError(f"the device memory must be a size > 0, got {text!r}")
    return value


def _cmd_plan(args: argparse.Namespace) -> int:
    import json

    from .plan import as_dict, format_plan, plan

    nodes, classes, avg_degree = args.nodes, args.classes, args.avg_degree
    if args.dataset is not None:
        from .data import load_dataset

        given = [f"{option} {value}" for option, value in (("--nodes", nodes), ("--avg-degree", avg_degree),
                                                              ("--classes", classes)) if value is not None]
        if given:  # refused before the graph loads: which of the two was meant is not ours to guess
            raise ValueError(f"--dataset {args.dataset} gives the graph's nodes, mean degree and classes; leave out "
                             f"{', '.join(given)} (or --dataset, to plan for those figures)")
        dataset = load_dataset(args.dataset, root=args.root, cache_dir=args.cache_dir)
        nodes, classes = dataset.num_nodes, dataset.num_classes
        avg_degree = dataset.csr().num_entries / dataset.num_nodes
        print(f"{dataset.name}: {nodes:,} nodes, mean degree {avg_degree:.2f} (symmetric, no self-loops), "
              f"{classes} classes", file=sys.stderr)
    elif nodes is None:
        raise ValueError("give --nodes N (with --avg-degree and --classes) or --dataset NAME")
    else:
        classes = DEFAULT_CLASSES if classes is None else classes
    results = {}  # every plan first: a bad value is refused before anything is printed
    for world_size in dict.fromkeys(args.world_size):  # each once, in the order given
        results[world_size] = plan(nodes, args.dim, args.rank, model=args.model, num_layers=len(args.fanouts),
                                   hidden=args.hidden, heads=args.heads, num_classes=classes, fanouts=args.fanouts,
                                   batch_size=args.batch_size, optimizer=args.optimizer, world_size=world_size,
                                   avg_degree=avg_degree, mode=args.mode, num_cores=args.num_cores,
                                   row_shape=args.row_shape, col_shape=args.col_shape,
                                   device_memory=args.device_memory, eval_fanouts=args.eval_fanouts,
                                   eval_batch_size=args.eval_batch_size)
    for world_size, plans in results.items():
        if not args.json:
            tt = plans["tt"].details
            steps = (f"fan-outs {args.fanouts}, batch {args.batch_size}/rank" if args.mode == "minibatch"
                     else "full graph")  # full-graph steps read neither (only the fan-outs' count)
            print(f"\n{nodes:,} nodes x {args.dim}, {args.model} {len(args.fanouts)} layers x {args.hidden}, "
                  f"{steps}, {args.optimizer}, {world_size} rank(s); "
                  f"TT {tt['row_shape']} x {tt['col_shape']} ranks {tt['ranks']}: {tt['parameters']:,} parameters; "
                  f"evaluation {tt['evaluation']}"
                  + (f" (fan-outs {tt['eval_fanouts']}, batch {args.eval_batch_size})" if tt["eval_fanouts"] else "")
                  + "\n")
            print(format_plan(plans, world_size))
    if args.json:
        print(json.dumps({str(k): as_dict(v) for k, v in results.items()}, indent=1))
    return 0


def _add_plan_parser(sub) -> None:
    p = sub.add_parser("plan", formatter_class=HelpFormatter,
                       help="memory per rank, all-reduce bytes and lookup FLOPs of a configuration, TT vs full",
                       description="Memory per rank, all-reduce bytes and lookup FLOPs of a configuration, TT vs full. "
                       "Its defaults are those of a large graph (mini-batch GraphSAGE, hidden 256, rank 16), not "
                       "`ttgnn train`'s (full-graph GAT, hidden 128, the rank its rule picks): give a run's --mode, "
                       "--model, --hidden and --rank to estimate that run.")
    p.add_argument("--nodes", type=parse_count, default=None, help="number of nodes N, e.g. 1.11e8 (or --dataset)")
    p.add_argument("--dataset", default=None, help="take N, the mean degree and the classes from this dataset "
                   "(a name as for `ttgnn train`; instead of --nodes, --avg-degree and --classes)")
    _add_data_location(p)
    p.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    p.add_argument("--rank", type=int, default=16, help="TT rank")
    p.add_argument("--num-cores", type=int, default=None, help="TT cores (default: automatic from N)")
    p.add_argument("--row-shape", type=_int_list, default=None, help="TT row shape, e.g. 55,55,56")
    p.add_argument("--col-shape", type=_int_list, default=None, help="TT column shape, e.g. 8,4,4")
    p.add_argument("--model", choices=MODELS, default="sage", help="GNN architecture")
    p.add_argument("--hidden", type=int, default=256, help="hidden width of the GNN")
    p.add_argument("--heads", type=int, default=4, help="GAT heads")
    p.add_argument("--classes", type=int, default=None, help=f"output classes (default: {DEFAULT_CLASSES})")
    p.add_argument("--fanouts", type=_int_list, default=[15, 10, 5], help="neighbours per layer (sets the layers)")
    p.add_argument("--batch-size", type=int, default=1024, help="seed nodes per step and rank")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adam",
                   help="the optimiser whose state is counted (Adam: two values per parameter)")
    p.add_argument("--world-size", type=int, nargs="+", default=[1], help="one or more numbers of GPUs/machines")
    p.add_argument("--avg-degree", type=float, default=None,
                   help=f"mean degree of the symmetric graph (default: {DEFAULT_AVG_DEGREE:g}, at most --nodes - 1)")
    p.add_argument("--mode", choices=MODES, default="minibatch", help="full-graph training or sampled mini-batches")
    p.add_argument("--eval-fanouts", type=_int_list, default=None,
                   help="sampled evaluation's fan-outs, as `ttgnn train` (default: as training chooses)")
    p.add_argument("--eval-batch-size", type=int, default=8192, help="nodes per evaluation batch")
    p.add_argument("--device-memory", type=_parse_memory, default=None, help="memory per rank, e.g. 80GB")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=_cmd_plan)


def _version() -> str:
    import platform

    import torch

    from . import __version__

    return f"ttgnn {__version__} (torch {torch.__version__}, Python {platform.python_version()})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttgnn", description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    _add_info_parser(sub)
    _add_train_parser(sub)
    _add_partition_parser(sub)
    _add_upgrade_parser(sub)
    _add_plan_parser(sub)
    _add_predict_parser(sub)
    return parser


# ---------------------------------------------------------------------- main
def _interrupted_message(prog: str, err: KeyboardInterrupt, trains: bool, how: str = "interrupted") -> str:
    checkpoint = getattr(err, "checkpoint", None)
    if checkpoint is not None:
        epoch = f" (epoch {err.epoch})" if getattr(err, "epoch", None) is not None else ""
        return (f"{prog}: {how}; the last complete checkpoint is {checkpoint}{epoch}; "
                f"continue with the same command plus --resume")
    if trains:
        return f"{prog}: {how} before any checkpoint was written"
    return f"{prog}: {how}"


@contextlib.contextmanager
def _sigterm_interrupts(received: list):
    """SIGTERM (a scheduler's or ``kill``'s stop) raises ``KeyboardInterrupt`` in the block, as Ctrl-C
    does, noting it in ``received``: a training run then stops between writes and names its last
    checkpoint, instead of ending at once without a word. Only in the main thread, and only where
    SIGTERM has its default action."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: What :func:`report_errors` says after "out of memory" for a training run.
TRAINING_MEMORY_HINT = ("smaller settings (--hidden, --dim, --batch-size, --eval-batch-size) need less, and "
                        "`ttgnn plan` estimates what a run needs (give it the run's --mode, --model, --hidden and "
                        "--rank: its defaults are those of large graphs)")


def report_errors(prog: str, body: Callable[[], Optional[int]], *, trains: bool = True,
                  memory_hint: str = TRAINING_MEMORY_HINT) -> int:
    """Run ``body()`` as the ``ttgnn`` command runs its subcommands, and return the exit code.

    A user's error (a bad value, path or dataset file: ``ValueError``, ``TypeError``,
    ``IndexError``, ``OSError``, ``MemoryError``) becomes one line ``"{prog}: error: ..."`` on
    stderr and exit code 2; Ctrl-C becomes one line naming the last complete checkpoint (for a
    training run, ``trains=True``) and exit code 130, and for a training run so does SIGTERM,
    with exit code 143. Other exceptions propagate (a bug: its traceback is wanted). Training
    scripts (``examples/``) call it around their work.

    Args:
        prog (str): the name the lines start with, e.g. ``"ttgnn train"`` or the script's.
        body (callable): the work; its return value is the exit code (``None``: 0).
        trains (bool, optional): ``body`` is a training run. (default: ``True``)
        memory_hint (str, optional): what follows "out of memory: <size>;" when an allocation fails.
            (default: :data:`TRAINING_MEMORY_HINT`)
    """
    terminated: list = []
    try:
        with _sigterm_interrupts(terminated) if trains else contextlib.nullcontext():
            return body() or 0
    except BrokenPipeError:  # `ttgnn plan ... | head`: the reader has what it wanted; say nothing, as Unix tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would fail again
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as err:
        how = ("stopped by SIGTERM" if terminated else
               f"stopped, {err.reason}" if getattr(err, "reason", None) else "interrupted")
        print(_interrupted_message(prog, err, trains, how), file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except OSError as err:
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"{prog}: error: {err.strerror or err}{where}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, TypeError, IndexError, MemoryError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as err:  # torch's allocators raise RuntimeError (OutOfMemoryError on a GPU)
        short = _out_of_memory(err)
        if short is None:
            raise  # a bug: its traceback is wanted
        print(f"{prog}: error: out of memory: {short}; {memory_hint}", file=sys.stderr)
        return EXIT_USAGE


def _out_of_memory(err: RuntimeError) -> Optional[str]:
    """What an allocation failure from torch says, in one line (``None``: ``err`` is another error)."""
    import re

    text = str(err)
    torch = sys.modules.get("torch")
    cuda_oom = torch is not None and isinstance(err, getattr(torch, "OutOfMemoryError", ()))
    if not cuda_oom and "can't allocate memory" not in text and "out of memory" not in text.lower():
        return None
    wanted = re.search(r"allocate (\d+) bytes", text)
    if wanted:  # the CPU allocator: "... you tried to allocate 51200000000 bytes. Error code 12 ..."
        return f"a tensor of {int(wanted.group(1)) / 2**30:,.2f} GiB could not be allocated"
    # CUDA: "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has ...": the first two sentences
    return ". ".join(text.strip().splitlines()[0].split(". ")[:2]).rstrip(".")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .allocator import configure_allocator

    configure_allocator()  # keep freed memory: no page faults every step ($TTGNN_MALLOC=default: off)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "train":
        args.given = explicit_options(parser, argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return report_errors(f"ttgnn {args.command}", lambda: args.func(args), trains=args.command == "train")


if __name__ == "__main__":
    sys.exit(main())
