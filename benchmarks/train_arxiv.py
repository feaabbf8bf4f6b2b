"""ogbn-arxiv accuracy table: featureless GraphSAGE / GAT with TT vs full embeddings, and a node-order ablation.

Every configuration is one ``ttgnn train`` command per seed (printed, so it can be re-run by hand);
each writes ``<out>/<name>/seed<k>/metrics.json``. Finished runs are reused unless ``--rerun``,
interrupted ones resumed; the table (accuracies as mean ± std over the seeds found; a run counts
once it reached its own last epoch) is printed as Markdown from the metrics files.

    python benchmarks/train_arxiv.py --root $TTGNN_DATA                            # everything, seed 0
    python benchmarks/train_arxiv.py --only sage-tt sage-full --seeds 5            # some rows, 5 seeds
    python benchmarks/train_arxiv.py --table-only                                  # print the table
    python benchmarks/train_arxiv.py --table-only --seeds 5                        # ... of seeds 0-4 alone
    python benchmarks/train_arxiv.py --only sage-tt --seeds 5 --first-seed 4       # seed 4 alone
    python benchmarks/train_arxiv.py --timing                                      # TT vs full epoch time
    python benchmarks/train_arxiv.py --device cuda --jobs 6 --only sage-tt --seeds 10   # six runs at a time on one GPU
    python benchmarks/train_arxiv.py --table-only --only now-gat-tt now-gat-full \
        --paired now-gat-tt,now-gat-tt-wa10 now-gat-full,now-gat-full-wa10    # TT - full, seed by seed

Runs go one after another, each with ``--num-threads`` threads (``--jobs 2 --num-threads 1``
runs two at a time). Epoch times of runs that shared the machine are not comparable: use
``--timing`` for TT-vs-full speed. The node-order ablation trains every order for
``--ablation-epochs``. Each run reports the GNN's test accuracy at its best validation epoch and
the same model's after Correct and Smooth (``ttgnn.smoothing``; training labels only).
``--paired A B`` adds the difference A - B seed by seed over the seeds both have (see
:func:`pooled_runs` for what counts).
"""
import argparse
import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path

from summary import (complete, finished, full_table_metrics, mean_std, paired, read_metrics,  # benchmarks/summary.py
                     run_epochs_of, seed_folders)

from ttgnn.cli import int_at_least, report_errors

# Settings shared by every run (the CLI defaults are the same; written out for the record).
COMMON = ["--dataset", "ogbn-arxiv", "--mode", "full", "--no-progress"]
# The "defaults" group's runs were made before label reuse became GAT's default (--label-reuse auto):
# they keep it off unless a configuration turns it on (defaults-*-reuse1 are GAT's defaults now).
BEFORE_AUTO_REUSE = ["--label-reuse", "0"]
# Every run here was made before label spreading became the default with label input in full-graph
# mode (2026-11-25): spreading stays off unless a configuration names --label-spread.
BEFORE_AUTO_SPREAD = ["--label-spread", "0"]
# ...and before GAT in full-graph mode got the log-cross-entropy loss where labels are many
# (2026-11-26): the plain cross-entropy unless a configuration names --loss.
BEFORE_AUTO_LOSS = ["--loss", "ce"]
# The CLI defaults before the defaults sweep (32b3b7e): every configuration starts from them, so
# the tables in docs/results.md stay reproducible; a configuration's own flags come after and win.
EARLIER_DEFAULTS = ["--init", "ortho", "--init-scale", "1.0", "--dropout", "0.2", "--norm", "batch", "--lr", "0.02",
                    "--emb-lr", "0.05", "--no-label-input", *BEFORE_AUTO_REUSE, *BEFORE_AUTO_SPREAD,
                    *BEFORE_AUTO_LOSS]
TT = ["--embedding", "tt", "--rank", "8", "--row-shape", "55,55,56", "--col-shape", "8,4,4"]
# TT tables in four cores at rank 11 (1,023x), five at rank 15 (1,041x) or six at rank 19 (1,006x; the last
# bond capped at 16): the largest ranks at >= 1,000x, shapes as ttgnn.shapes.shape_for_budget factors them,
# against TT's three cores at rank 8 (1,118x).
TT_CORES = {4: ["--embedding", "tt", "--rank", "11", "--row-shape", "20,20,21,21", "--col-shape", "4,4,4,2"],
            5: ["--embedding", "tt", "--rank", "15", "--row-shape", "11,11,11,11,12", "--col-shape", "4,4,2,2,2"],
            6: ["--embedding", "tt", "--rank", "19", "--row-shape", "7,7,7,8,8,8", "--col-shape", "4,2,2,2,2,2"]}

# Epochs of the main runs (GAT epochs cost about 4x SAGE's on CPU); --epochs overrides both.
EPOCHS = {"sage": 200, "gat": 100}

CONFIGS = {
    # name: (extra args, group)
    "sage-tt": (["--model", "sage", *TT, "--order", "hierarchical-metis"], "main"),
    "sage-full": (["--model", "sage", "--embedding", "full"], "main"),
    "gat-tt": (["--model", "gat", *TT, "--order", "hierarchical-metis"], "main"),
    "gat-full": (["--model", "gat", "--embedding", "full"], "main"),
}
# The label trick (--label-input): known training labels as node inputs; the same TT tables.
CONFIGS["sage-tt-labels"] = (["--model", "sage", *TT, "--order", "hierarchical-metis", "--label-input"], "labels")
CONFIGS["sage-tt-labels-dropout"] = (["--model", "sage", *TT, "--order", "hierarchical-metis", "--label-input",
                                     "--dropout", "0.5"], "labels")
CONFIGS["gat-tt-labels"] = (["--model", "gat", *TT, "--order", "hierarchical-metis", "--label-input"], "labels")
CONFIGS["sage-full-labels-dropout"] = (["--model", "sage", "--embedding", "full", "--label-input", "--dropout", "0.5"],
                                      "labels")
CONFIGS["gat-full-labels"] = (["--model", "gat", "--embedding", "full", "--label-input"], "labels")
# Spectral initialisation (--init spectral): the 8 leading Laplacian eigenvectors in the first columns.
SPECTRAL = ["--init", "spectral", "--spectral-vectors", "8"]
CONFIGS["sage-tt-labels-dropout-spectral8"] = (CONFIGS["sage-tt-labels-dropout"][0] + SPECTRAL, "spectral")
CONFIGS["sage-full-labels-dropout-spectral8"] = (CONFIGS["sage-full-labels-dropout"][0] + SPECTRAL, "spectral")
for _order in ("identity", "random", "rcm", "metis-flat", "hierarchical-metis"):
    CONFIGS[f"sage-tt-{_order}"] = (["--model", "sage", *TT, "--order", _order], "ablation")
# Defaults sweep (issue 15): GraphSAGE + TT rank 8, every setting at the earlier CLI default
# (hierarchical-kaminpar order included) but the ones named; picked on validation. The winner,
# combined-labels, is the CLI defaults since 32b3b7e.
SWEEP = {
    "default": [],
    "dropout0.5": ["--dropout", "0.5"],
    "norm-none": ["--norm", "none"],
    "lr0.01": ["--lr", "0.01", "--emb-lr", "0.01"],
    "gaussian0.1": ["--init", "gaussian", "--init-scale", "0.1"],
    # all four together: the setting issue 15 reports a new user trying (0.677 test at epoch 195)
    "combined": ["--dropout", "0.5", "--norm", "none", "--lr", "0.01", "--emb-lr", "0.01", "--init", "gaussian",
                 "--init-scale", "0.1"],
}
SWEEP["combined-labels"] = SWEEP["combined"] + ["--label-input"]
# The table's learning rate on top of the combined setting (on Cora, TT + Adam 0.05 beat 0.01).
SWEEP["combined-emblr0.05"] = SWEEP["combined"] + ["--emb-lr", "0.05"]
SWEEP["combined-labels-emblr0.05"] = SWEEP["combined-labels"] + ["--emb-lr", "0.05"]
# Without label input the labels do not carry the graph's structure into the table: the spectral
# init (which lifted the small graphs, few labels, by 12-17 points) tried there.
SWEEP["combined-spectral8"] = SWEEP["combined"] + SPECTRAL
for _key, _extra in SWEEP.items():
    CONFIGS[f"sweep-sage-tt-{_key}"] = (["--model", "sage", *TT, *_extra], "sweep")
# The winner against the full table with the same settings.
CONFIGS["sweep-sage-full-combined-labels"] = (["--model", "sage", "--embedding", "full", *SWEEP["combined-labels"]],
                                              "sweep")


# The command line's defaults (no EARLIER_DEFAULTS in front; label reuse off, BEFORE_AUTO_REUSE): GAT,
# which the sweep did not cover, with TT and the full table, label input by the rule (on for arxiv) and off.
CONFIGS["defaults-gat-tt"] = (["--model", "gat", *TT], "defaults")
CONFIGS["defaults-gat-full"] = (["--model", "gat", "--embedding", "full"], "defaults")
CONFIGS["defaults-gat-tt-nolabels"] = (["--model", "gat", *TT, "--no-label-input"], "defaults")
# Label reuse on top of the defaults: predictions of the nodes without a known label fed back once.
for _model in ("gat", "sage"):
    CONFIGS[f"defaults-{_model}-tt-reuse1"] = (["--model", _model, *TT, "--label-reuse", "1"], "defaults")
    CONFIGS[f"defaults-{_model}-full-reuse1"] = (["--model", _model, "--embedding", "full", "--label-reuse", "1"],
                                                 "defaults")
# Label spreading on top of GAT's defaults (--label-spread; 10 steps, the default since 2026-11-25):
# every node's label input starts from the known labels spread over the graph in 10 steps. Then two
# of the tricks of Wang et al.'s GAT on arxiv ("Bag of Tricks for Node Classification with GNNs", 2021)
# on top of these defaults: batch norm with residual skips (TT only) and the log-cross-entropy loss,
# each alone and together, and both without label input further down.
SPREAD_DEFAULTS = ["--label-reuse", "1", "--label-spread", "10"]
NORM_RESIDUAL = ["--norm", "batch", "--residual"]
LOG_CE = ["--loss", "log-ce"]
for _embedding in ("tt", "full"):
    _base = ["--model", "gat", *(TT if _embedding == "tt" else ["--embedding", "full"]), *SPREAD_DEFAULTS]
    _tricks = {"": [], "-logce": LOG_CE, "-normres-logce": NORM_RESIDUAL + LOG_CE}
    if _embedding == "tt":
        _tricks["-normres"] = NORM_RESIDUAL
        # The TT table's learning rate under GAT with the loss (the default 0.01 was chosen on GraphSAGE).
        for _emb_lr in ("0.03", "0.003"):
            _tricks[f"-logce-emblr{_emb_lr}"] = LOG_CE + ["--emb-lr", _emb_lr]
    for _suffix, _extra in _tricks.items():
        CONFIGS[f"defaults-gat-{_embedding}-reuse1-spread10{_suffix}"] = ([*_base, *_extra], "defaults")
# A cosine learning-rate schedule on top of the defaults (GAT's validation accuracy swings by about
# a point from epoch to epoch at the constant rates); it did worse on seed 0 (docs/results.md).
COSINE = ["--lr-schedule", "cosine"]
CONFIGS["defaults-gat-tt-cosine"] = (["--model", "gat", *TT, *COSINE], "defaults")
# Both tricks on GAT without label input, and a cosine schedule on top (meant for runs longer than
# the constant rates' best epochs, e.g. --epochs 300).
GAT_TT_NOLABELS_TRICKS = ["--model", "gat", *TT, "--no-label-input", *NORM_RESIDUAL, *LOG_CE]
CONFIGS["defaults-gat-tt-normres-logce-nolabels"] = (GAT_TT_NOLABELS_TRICKS, "defaults")
CONFIGS["defaults-gat-tt-normres-logce-nolabels-cosine"] = ([*GAT_TT_NOLABELS_TRICKS, *COSINE], "defaults")
for _cores, _tt in TT_CORES.items():
    CONFIGS[f"defaults-gat-tt{_cores}-normres-logce-nolabels"] = (["--model", "gat", *_tt, "--no-label-input",
                                                                   *NORM_RESIDUAL, *LOG_CE], "defaults")
# Edge dropout at the tricks' GAT's 0.3 (each layer trains on 70% of the edges, drawn anew per step).
EDGE_DROPOUT = ["--edge-dropout", "0.3"]
CONFIGS["defaults-gat-tt-normres-logce-nolabels-edrop0.3"] = ([*GAT_TT_NOLABELS_TRICKS, *EDGE_DROPOUT], "defaults")
# GraphSAGE without label input (the defaults sweep's "combined" row, the command line's defaults
# with --model sage --no-label-input) with the log-cross-entropy loss; with batch norm and residual
# skips instead, with both (as GAT without label input), and each of those two with a GNN twice as
# wide; both plus a cosine schedule, a 3x faster table or edge dropout.
SAGE_TT_NOLABELS = ["--model", "sage", *TT, "--no-label-input"]
WIDE = ["--hidden", "256"]
_both = NORM_RESIDUAL + LOG_CE
for _suffix, _extra in {"-logce": LOG_CE, "-normres": NORM_RESIDUAL, "-normres-logce": _both,
                        "-normres-h256": NORM_RESIDUAL + WIDE, "-normres-logce-h256": _both + WIDE,
                        "-normres-logce-cosine": _both + COSINE,
                        "-normres-logce-emblr0.03": _both + ["--emb-lr", "0.03"],
                        "-normres-logce-edrop0.3": _both + EDGE_DROPOUT}.items():
    CONFIGS[f"defaults-sage-tt-nolabels{_suffix}"] = ([*SAGE_TT_NOLABELS, *_extra], "defaults")
# The same with the TT table in four or five cores (TT_CORES) instead of three.
for _cores, _tt in TT_CORES.items():
    CONFIGS[f"defaults-sage-tt{_cores}-nolabels-normres-logce"] = (["--model", "sage", *_tt, "--no-label-input",
                                                                    *_both], "defaults")
# The best no-label settings by validation (five cores) with label smoothing, and GraphSAGE's with less dropout.
LABEL_SMOOTHING = ["--label-smoothing", "0.1"]
for _suffix, _extra in {"-dropout0.3": ["--dropout", "0.3"], "-ls0.1": LABEL_SMOOTHING}.items():
    CONFIGS[f"defaults-sage-tt5-nolabels-normres-logce{_suffix}"] = (
        [*CONFIGS["defaults-sage-tt5-nolabels-normres-logce"][0], *_extra], "defaults")
CONFIGS["defaults-gat-tt5-normres-logce-nolabels-ls0.1"] = (
    [*CONFIGS["defaults-gat-tt5-normres-logce-nolabels"][0], *LABEL_SMOOTHING], "defaults")
# The full table in GAT's best no-label setting with label smoothing, against TT's.
CONFIGS["defaults-gat-full-normres-logce-nolabels-ls0.1"] = (
    ["--model", "gat", "--embedding", "full", "--no-label-input", *NORM_RESIDUAL, *LOG_CE, *LABEL_SMOOTHING],
    "defaults")
# The command line's defaults (GAT with label input) with label smoothing.
CONFIGS["defaults-gat-tt-reuse1-spread10-logce-ls0.1"] = (
    [*CONFIGS["defaults-gat-tt-reuse1-spread10-logce"][0], *LABEL_SMOOTHING], "defaults")
# The command line's defaults as they are now, every automatic setting decided by the run: exactly
# `ttgnn train --dataset ogbn-arxiv --model M [--embedding full]` (TT as the command line picks it on
# arxiv, pinned in TT). GraphSAGE's TT-against-full comparison had only been measured with its defaults
# before label spreading. With --from-full: the full table trained first (its run in full-table/), TT
# from its TT-SVD at rank 8, fine-tuned with the full model's predictions as a second target.
NOW_LABELS = ["--label-reuse", "auto", "--label-spread", "auto"]
NOW = [*NOW_LABELS, "--loss", "auto"]
for _model in ("sage", "gat"):
    CONFIGS[f"now-{_model}-tt"] = (["--model", _model, *TT, *NOW], "defaults")
    CONFIGS[f"now-{_model}-full"] = (["--model", _model, "--embedding", "full", *NOW], "defaults")
    CONFIGS[f"now-{_model}-tt-from-full"] = (["--model", _model, *TT, *NOW, "--from-full"], "defaults")
    # The TT table in five cores at rank 15 (1,041x) instead of three at rank 8: it lifted both models
    # without label input, not GAT with it (docs/results.md, "GAT at today's defaults ... five cores").
    CONFIGS[f"now-{_model}-tt5"] = (["--model", _model, *TT_CORES[5], *NOW], "defaults")
    # Weight averaging over about 10 epochs; each run also records the weights as trained, which
    # the table's "(weights as trained)" row reads: a comparison within the same runs.
    for _emb, _args in (("tt", TT), ("full", ["--embedding", "full"])):
        CONFIGS[f"now-{_model}-{_emb}-wa10"] = (["--model", _model, *_args, *NOW, "--weight-average", "10"],
                                                "defaults")
# GAT with the plain cross-entropy (--loss ce, its default before 2026-11-26), each table: the one
# setting where GAT + TT stayed behind the full table (5 seeds each on the Intel Xeon, DGL's layers).
for _emb, _args in (("tt", TT), ("full", ["--embedding", "full"])):
    CONFIGS[f"now-gat-{_emb}-ce"] = (["--model", "gat", *_args, *NOW_LABELS, "--loss", "ce"], "defaults")
# With the plain loss TT peaks late (epochs 135-200) and stays behind on validation: a 3x faster
# table, for each table (--emb-lr is the learning rate of either).
for _emb in ("tt", "full"):
    CONFIGS[f"now-gat-{_emb}-ce-emblr0.03"] = ([*CONFIGS[f"now-gat-{_emb}-ce"][0], "--emb-lr", "0.03"], "defaults")
# The TT table with TT-GNN's orthogonal cores instead of the gaussian ones --init auto picks on arxiv
# (the gaussian default was chosen on GraphSAGE, together with three other settings, never for GAT).
CONFIGS["now-gat-tt-ce-ortho"] = ([*CONFIGS["now-gat-tt-ce"][0], "--init", "ortho"], "defaults")
# ... and from the TT-SVD of the 8 smoothest Laplacian eigenvectors (the small graphs' init), the table that
# already varies smoothly over the graph.
CONFIGS["now-gat-tt-ce-spectral8"] = ([*CONFIGS["now-gat-tt-ce"][0], "--init", "spectral", "--spectral-vectors", "8"],
                                      "defaults")
# The TT rows in the hierarchical METIS order instead of the KaMinPar one (the training default since
# 2026-11-24, chosen on edge locality, never compared by accuracy with GAT).
CONFIGS["now-gat-tt-ce-metis"] = ([*CONFIGS["now-gat-tt-ce"][0], "--order", "hierarchical-metis"], "defaults")
# The learning rates on a cosine over the run (give it --epochs 300): at constant rates TT's validation
# accuracy plateaus from about epoch 150 (300 epochs gain nothing), so rates that fall over the plateau.
CONFIGS["now-gat-tt-ce-cosine"] = ([*CONFIGS["now-gat-tt-ce"][0], "--lr-schedule", "cosine"], "defaults")
# A table that learns at half the default rate: 3x the rate (now-gat-*-ce-emblr0.03) lowered TT's validation
# accuracy by 0.3 point against the default on seeds 0-1, so the other direction.
CONFIGS["now-gat-tt-ce-emblr0.005"] = ([*CONFIGS["now-gat-tt-ce"][0], "--emb-lr", "0.005"], "defaults")
# The same budget spent otherwise: column shape (4, 4, 8) instead of (8, 4, 4) (19,424 parameters, 1,116x), so
# the last core, whose slices are the most node-specific (the node order's finest level), holds the most columns.
CONFIGS["now-gat-tt-ce-col448"] = ([*CONFIGS["now-gat-tt-ce"][0], "--col-shape", "4,4,8"], "defaults")
# TT plateaus from about epoch 150 (train accuracy 0.80, still below the full table's 0.82 at its peak) where
# the full table overfits: a table of three times the entries' std (the GNN's input weighs more against the
# label input), and the GNN's dropout at 0.3 instead of 0.5 (a model that fits more).
CONFIGS["now-gat-tt-ce-scale0.3"] = ([*CONFIGS["now-gat-tt-ce"][0], "--init-scale", "0.3"], "defaults")
CONFIGS["now-gat-tt-ce-dropout0.3"] = ([*CONFIGS["now-gat-tt-ce"][0], "--dropout", "0.3"], "defaults")
# Batch norm between layers with a linear skip around each (Wang et al.'s trick): with the plain loss it lifted
# TT's validation accuracy at 100 epochs by 0.4 point on seed 0 (0.7174 against 0.7137), never run to 200.
CONFIGS["now-gat-tt-ce-normres"] = ([*CONFIGS["now-gat-tt-ce"][0], *NORM_RESIDUAL], "defaults")


def run_epochs(name: str, epochs, ablation_epochs: int) -> int:
    """Epochs of configuration ``name``: the ablation's, else ``epochs`` or the model's default."""
    args, group = CONFIGS[name]
    if group == "ablation":
        return ablation_epochs
    return epochs if epochs is not None else EPOCHS[args[args.index("--model") + 1]]


def command(name: str, out: Path, epochs: int, threads: int, seed: int = 0, root=None, device: str = "cpu") -> list:
    """The ``ttgnn train`` command of configuration ``name`` with ``seed`` (``device="cuda"``: its GNN layers
    on plain tensors, ``--gnn-backend auto``'s choice there)."""
    args, group = CONFIGS[name]
    where = ["--root", str(root)] if root else []
    if device != "cpu":
        where += ["--device", device]
    if group != "defaults":
        start = EARLIER_DEFAULTS
    else:
        start = (([] if "--label-reuse" in args else BEFORE_AUTO_REUSE)
                 + ([] if "--label-spread" in args else BEFORE_AUTO_SPREAD)
                 + ([] if "--loss" in args else BEFORE_AUTO_LOSS))
    return ["ttgnn", "train", *COMMON, *where, "--num-threads", str(threads), *start, *args,
            "--epochs", str(epochs), "--seed", str(seed), "--output-dir", str(run_dir(out, name, seed))]


def run_dir(out: Path, name: str, seed: int) -> Path:
    """Where the run of configuration ``name`` with ``seed`` writes its files."""
    return out / name / f"seed{seed}"


#: Settings a configuration's runs may differ in: where and how fast they ran, their seed and length.
NOT_COMPARED = ("seed", "epochs")  # and TrainConfig.PLACE_KEYS


def other_settings(name: str, metrics: dict) -> list:
    """The settings on which the run ``metrics`` differs from what configuration ``name``'s command gives
    (those its command line types, as ``ttgnn train`` parses them, except values left to the graph; a
    setting its file lacks, written before the setting existed, is not compared):
    ``["key=run's (command: value)", ...]``."""
    from ttgnn.checkpoint import differing_settings

    typed = _typed_settings(name)
    settings = metrics["settings"]
    keys = sorted(typed.keys() & settings.keys())
    return [f"{key}={settings[key]!r} (command: {typed[key]!r})" for key in differing_settings(settings, typed, keys)]


@functools.lru_cache(maxsize=None)
def _typed_settings(name: str) -> dict:
    """The settings configuration ``name``'s command line types, as ``ttgnn train`` parses them, less
    those :func:`other_settings` does not compare: a value left to the graph ("auto", None here) is
    settled by each run, and what it recorded is its own. Parsed once per configuration."""
    from ttgnn.cli import build_parser, explicit_options
    from ttgnn.config import TrainConfig

    argv = command(name, Path("."), 1, 1)[1:]
    parser = build_parser()
    typed = vars(parser.parse_args(argv))
    skipped = set(NOT_COMPARED + TrainConfig.PLACE_KEYS)
    return {key: typed[key] for key in explicit_options(parser, argv) - skipped if typed[key] is not None}


def counted_runs(out: Path, name: str, seeds: range = None) -> tuple:
    """``(runs, left_out)`` of configuration ``name`` under ``out``, by seed: the metrics of each run that
    reached its own last epoch (:func:`~summary.complete`), was run with the seed its folder names and with
    the configuration's settings (:func:`other_settings`); ``left_out`` names each other folder and why.
    ``seeds``: only these seeds' folders are looked at (default: every one)."""
    runs, left_out = [], []
    for seed, folder in seed_folders(out / name):
        if seeds is not None and seed not in seeds:
            continue
        path = folder / "metrics.json"
        label = f"{name}/{folder.name}"
        if not complete(path):
            left_out.append(f"{label} (not finished)")
            continue
        metrics = read_metrics(path)
        if metrics["settings"].get("seed") != seed:
            left_out.append(f"{label} (it ran seed {metrics['settings'].get('seed')})")
            continue
        differ = other_settings(name, metrics)
        if differ:
            left_out.append(f"{label} (other settings: {', '.join(differ)})")
            continue
        runs.append(metrics)
    return runs, left_out


def finished_runs(out: Path, name: str, seeds: range = None):
    """The metrics of each run of configuration ``name`` under ``out`` that counts (:func:`counted_runs`)."""
    return iter(counted_runs(out, name, seeds)[0])


def recorded_settings(out: Path, name: str, seeds: range = None):
    """The settings of the first counted run of configuration ``name`` under ``out``, or None (with
    ``--from-full``, ``epochs`` is its full table's, the command's ``--epochs``)."""
    runs = counted_runs(out, name, seeds)[0]
    if not runs:
        return None
    settings = dict(runs[0]["settings"])
    if runs[0].get("from_full"):
        settings["epochs"] = run_epochs_of(run_dir(out, name, settings["seed"]) / "metrics.json")
    return settings


def _best_of(metrics: dict, records: list, prefix: str = "") -> dict:
    """``metrics`` with ``records`` as its epochs and the best validation epoch picked again among them
    by ``<prefix>valid_acc`` (the first of equals, as training picks), with its ``<prefix>test_acc``.
    Correct and Smooth, computed on the run's own best model, is kept only when that is the model picked."""
    best = max(records, key=lambda r: r[prefix + "valid_acc"])
    smoothed = (metrics.get("correct_smooth") or {}).get("epoch", metrics["best_epoch"])  # the model C&S ran on
    same = not prefix and best["epoch"] == smoothed
    return dict(metrics, epochs=records, best_valid_acc=best[prefix + "valid_acc"], test_acc=best[prefix + "test_acc"],
                best_epoch=best["epoch"], correct_smooth=metrics.get("correct_smooth") if same else None)


def as_trained(metrics: dict) -> dict:
    """``metrics`` of a ``--weight-average`` run as if it had not averaged: the best epoch and its
    accuracies by the trained weights' records (``raw_valid_acc``, ``raw_test_acc``); no C&S."""
    return _best_of(metrics, metrics["epochs"], prefix="raw_")


def first_epochs(metrics: dict, epochs: int) -> dict:
    """``metrics`` of a run of at least ``epochs`` epochs as a run of ``epochs`` epochs would have
    written them: its first ``epochs`` records and the best validation epoch among them (the first of
    equals, as training picks). That is the same computation only under a constant learning rate
    (bit for bit with one thread: training draws nothing that depends on the epoch count), so a run
    with another schedule raises ``ValueError``. Correct and Smooth, computed on the run's own best
    epoch, is kept only when that epoch is among the first ``epochs``' best."""
    schedule = metrics["settings"].get("lr_schedule", "constant")
    if metrics.get("from_full"):  # its best may be epoch 0, the compressed start, which no record holds
        raise ValueError(f"seed {metrics['settings']['seed']}: a --from-full run; its epochs are the TT stage's, "
                         "after a full table's run, and not a run of fewer epochs")
    if schedule != "constant":
        raise ValueError(f"seed {metrics['settings']['seed']}: a {schedule} learning-rate schedule over "
                         f"{len(metrics['epochs'])} epochs; its first {epochs} are not a run of {epochs}")
    return _best_of(metrics, metrics["epochs"][:epochs])


def pooled_runs(out: Path, names: str, epochs: int = None, seeds: range = None) -> dict:
    """Seed -> metrics of the finished runs of the configurations in ``names`` (comma-separated; where
    two have the same seed, the earlier one's run counts). A run counts once it reached its own last
    epoch (the ``--epochs`` it was started with); with ``epochs``, once it also has that many, and by
    its first ``epochs`` (:func:`first_epochs`). A ``--weight-average`` run counts by its weights as
    trained (:func:`as_trained`): averaging does not change training, so these are exactly the run
    without it (tests/test_averaging.py). ``seeds``: only these (default: every seed found)."""
    pool = {}
    for name in names.split(","):
        for metrics in finished_runs(out, name, seeds):
            if epochs:
                if len(metrics["epochs"]) < epochs:
                    continue
                metrics = first_epochs(metrics, epochs)
            if "raw_valid_acc" in metrics["epochs"][0]:
                metrics = as_trained(metrics)
            pool.setdefault(metrics["settings"]["seed"], metrics)
    return pool


def paired_report(out: Path, a: str, b: str, epochs: int = None, epochs_b: int = None, seeds: range = None) -> str:
    """``a`` - ``b`` (each as :func:`pooled_runs` takes it: ``a`` with ``epochs``, ``b`` with
    ``epochs_b``, by default the same) over the seeds both have (of ``seeds``, default every one): each
    side's mean ± std and the difference seed by seed, in points, mean ± standard error."""
    epochs_b = epochs if epochs_b is None else epochs_b
    runs_a, runs_b = pooled_runs(out, a, epochs, seeds), pooled_runs(out, b, epochs_b, seeds)
    seeds = sorted(runs_a.keys() & runs_b.keys())
    if epochs_b == epochs:
        within = f" within their first {epochs} epochs" if epochs else ""
    else:
        spans = [f"the first {k} epochs" if k else "all epochs" for k in (epochs, epochs_b)]
        within = f" within {spans[0]} ({a}) and {spans[1]} ({b})"
    if not seeds:
        return f"{a} - {b}: no seed finished in both{within}"
    pairs = [(runs_a[s], runs_b[s]) for s in seeds]
    lines = [f"{a} - {b}, paired by seed{within} (seeds {', '.join(map(str, seeds))}; points, mean ± s.e.):"]
    for label, index in ((a, 0), (b, 1)):
        lines.append(f"  {label}: valid {mean_std(p[index]['best_valid_acc'] for p in pairs)} "
                     f"test {mean_std(p[index]['test_acc'] for p in pairs)} "
                     f"(best epochs {', '.join(str(p[index]['best_epoch']) for p in pairs)})")

    def difference(accuracy) -> str:  # accuracy(metrics) of a - b, seed by seed
        return paired([accuracy(x) for x, _ in pairs], [accuracy(y) for _, y in pairs])

    lines.append(f"  difference: test {difference(lambda m: m['test_acc'])}, "
                 f"valid {difference(lambda m: m['best_valid_acc'])}")
    if all(x.get("correct_smooth") and y.get("correct_smooth") for x, y in pairs):
        lines.append(f"  with Correct and Smooth: test {difference(lambda m: m['correct_smooth']['test_acc'])}")
    return "\n".join(lines)


def row(name: str, runs: list, label: str = None) -> str:
    """One Markdown row: accuracies as mean ± std over the seeds in ``runs`` (metrics dicts); ``label``
    names the row instead of the model or configuration."""
    m = runs[0]
    order = m.get("order") or "-"
    rank = m.get("rank") or "-"
    cs = [r["correct_smooth"] for r in runs if r.get("correct_smooth")]
    cs_seeds = f" ({len(cs)} seeds)" if 0 < len(cs) < len(runs) else ""  # C&S still running or skipped
    cs_cells = (f"{mean_std([c['valid_acc'] for c in cs])} | **{mean_std([c['test_acc'] for c in cs])}**{cs_seeds}"
                if cs else "- | -")
    dropout = m["settings"]["dropout"]
    model = m["model"] if dropout == 0.2 else f"{m['model']} (dropout {dropout})"  # 0.2: EARLIER_DEFAULTS
    if CONFIGS[name][1] in ("sweep", "defaults"):
        model = name
    if label:
        model = label
    best = "/".join(str(r["best_epoch"]) for r in runs)
    lengths = "/".join(str(n) for n in sorted({len(r["epochs"]) for r in runs}))  # runs of unequal length: each
    return (f"| {model} | {m['embedding']} | {order} | {rank} | {m['compression_ratio']:,.0f}x | {len(runs)} | "
            f"{mean_std([r['best_valid_acc'] for r in runs])} | {mean_std([r['test_acc'] for r in runs])} | "
            f"{cs_cells} | {best} of {lengths} | {m['epoch_time']:.2f} s | "
            f"{m['peak_memory_mib'] / 1024:.2f} GiB |")


def timing_worker(model: str, embedding: str, steps: int, threads: int) -> dict:
    """Train one classifier (CLI defaults, TT rank 8) full-graph for 1 + ``steps`` epochs in this
    process; returns the seconds of each timed epoch and of each input-table step.

    The input-table step (forward over all rows, backward and an Adam update of the table alone) is
    the only part of an epoch that differs between TT and full, and a small share of it.
    """
    import time

    import torch

    from ttgnn.data import load_dataset
    from ttgnn.train import TrainConfig, setup_run, train_epoch

    config = TrainConfig(model=model, embedding=embedding, rank=8, row_shape=[55, 55, 56], col_shape=[8, 4, 4],
                         num_threads=threads)
    run = setup_run(config, load_dataset("ogbn-arxiv"), 0, 1, torch.device("cpu"))
    emb, _ = run.model.parameter_groups()
    table_opt = torch.optim.Adam(emb, lr=config.emb_lr)
    epochs, tables = [], []
    for step in range(steps + 1):  # the first epoch is warm-up
        start = time.perf_counter()
        train_epoch(run, step + 1)
        middle = time.perf_counter()
        table_opt.zero_grad(set_to_none=True)
        run.model.node_input(None).sum().backward()
        table_opt.step()
        if step:
            epochs.append(middle - start)
            tables.append(time.perf_counter() - middle)
    return {"epoch": epochs, "table": tables}


def timing(models, rounds: int, steps: int, threads: int) -> None:
    """Training-epoch time of TT vs full embedding, measured side by side in one run.

    Each measurement trains one model in a fresh process, as a user's run does (two models trained
    in one process on alternating epochs slow each other down, unevenly: TT lost up to 20% that
    way while being faster alone). The processes alternate, TT, full, TT, full, ... for ``rounds``
    rounds of ``steps`` timed epochs each, so a change in the machine's load hits both; the
    medians over all timed epochs are printed.
    """
    import statistics

    print(f"\nepoch time (full-graph training epoch, {threads} threads, median of {rounds} x {steps} epochs in "
          "alternating processes; input table: forward over all rows + backward + Adam step):")
    print("| model | TT epoch (rank 8, hierarchical-metis) | full epoch | TT / full | TT table | full table | "
          "TT / full |\n|---|---|---|---|---|---|---|")
    for model in models:
        times = {"tt": {"epoch": [], "table": []}, "full": {"epoch": [], "table": []}}
        for _ in range(rounds):
            for embedding in ("tt", "full"):
                cmd = [sys.executable, __file__, "--timing-worker", model, embedding, "--timing-steps", str(steps),
                       "--num-threads", str(threads)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                result = json.loads(out.strip().splitlines()[-1])
                for key in ("epoch", "table"):
                    times[embedding][key].extend(result[key])
        med = {e: {k: statistics.median(v) for k, v in times[e].items()} for e in times}
        tt, full = med["tt"], med["full"]
        print(f"| {model} | {tt['epoch']:.2f} s | {full['epoch']:.2f} s | {tt['epoch'] / full['epoch']:.2f} | "
              f"{1e3 * tt['table']:.0f} ms | {1e3 * full['table']:.0f} ms | {tt['table'] / full['table']:.2f} |",
              flush=True)


def _reap(running: list, failed: list) -> list:
    """Wait for one of ``running`` to finish; one that failed goes to ``failed`` (the other runs go
    on: each run is its own folder, resumable). Returns the ones still running."""
    import time

    while True:
        for proc in running:
            if proc.poll() is not None:
                if proc.returncode:
                    failed.append(proc)
                return [p for p in running if p is not proc]
        time.sleep(1.0)


def build_parser() -> argparse.ArgumentParser:
    """The script's options (``--only`` takes the keys of :data:`CONFIGS`; :func:`parse_arguments` checks
    what one option alone cannot: ``--first-seed`` against ``--seeds``, the names in ``--paired``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/arxiv-bench", help="one sub-folder per configuration")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of every main run (default: 200 for SAGE, 100 for GAT)")
    parser.add_argument("--ablation-epochs", type=int, default=30, help="epochs of the node-order ablation")
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), default=None)
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds 0..K-1 of every configuration (default 1); given, the table and --paired count "
                             "these seeds alone (default: every finished seed found)")
    parser.add_argument("--first-seed", type=int_at_least(0), default=0,
                        help="run seeds from this one on (the earlier ones ran elsewhere; the table counts them)")
    parser.add_argument("--rerun", action="store_true", help="re-run configurations that have metrics")
    parser.add_argument("--table-only", action="store_true", help="only print the table of finished runs")
    parser.add_argument("--timing", action="store_true", help="only the TT-vs-full epoch-time comparison")
    parser.add_argument("--timing-rounds", type=int, default=3, help="processes per embedding kind")
    parser.add_argument("--timing-steps", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--timing-worker", nargs=2, metavar=("MODEL", "EMBEDDING"), help=argparse.SUPPRESS)
    parser.add_argument("--num-threads", type=int, default=2, help="torch threads of each run")
    parser.add_argument("--jobs", type=int_at_least(1), default=1, help="runs at a time")
    parser.add_argument("--paired", nargs=2, metavar=("A", "B"),
                        help="also print A - B seed by seed (each a configuration, or several joined by commas "
                             "whose seeds are pooled; a --weight-average run counts by its weights as trained)")
    parser.add_argument("--paired-epochs", type=int, nargs="+", default=None, metavar="K",
                        help="--paired counts each run by its best validation epoch among its first K, which is "
                             "the run --epochs K makes (constant learning rate; runs shorter than K are left out); "
                             "two counts: K for A's runs, the second for B's")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where every run trains (cuda: all runs share the first GPU; --jobs of them at a time)")
    return parser


def parse_arguments(argv=None) -> argparse.Namespace:
    """``argv`` (default: the command line) parsed and checked; a bad value exits 2 with one line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    args.counted = None if args.seeds is None else range(args.seeds)  # the seeds the tables count (None: all)
    args.seeds = args.seeds or 1
    if not 0 <= args.first_seed < args.seeds:
        parser.error(f"--first-seed must be in 0..{args.seeds - 1} (--seeds {args.seeds}), got {args.first_seed}")
    if args.paired_epochs is not None and (len(args.paired_epochs) > 2 or min(args.paired_epochs) < 1
                                           or not args.paired):
        parser.error(f"--paired-epochs needs --paired and one or two counts >= 1, got "
                     f"{' '.join(map(str, args.paired_epochs))}")
    for names in args.paired or ():
        unknown = [n for n in names.split(",") if n not in CONFIGS]
        if unknown:
            parser.error(f"--paired: unknown configuration(s) {', '.join(unknown)}")
    return args


def main(argv=None) -> int:
    args = parse_arguments(argv)
    if args.timing_worker:
        print(json.dumps(timing_worker(*args.timing_worker, args.timing_steps, args.num_threads)))
        return 0
    if args.timing:
        timing(["sage", "gat"], args.timing_rounds, args.timing_steps, threads=args.num_threads)
        return 0
    if args.root is not None and not args.table_only and not Path(args.root).is_dir():
        # each run failed on it, and the summary said that the same command would continue them
        raise FileNotFoundError(f"dataset root not found: {args.root} (--root)")
    out = Path(args.out)
    names = args.only or list(CONFIGS)
    counted = args.counted
    if args.table_only and not any(counted is None or seed in counted
                                   for name in names for seed, _ in seed_folders(out / name)):
        which = "" if counted is None else "seed 0 of " if args.seeds == 1 else f"seeds 0-{args.seeds - 1} of "
        raise ValueError(f"no runs of {which}{', '.join(names)} under {out}"
                         + ("" if out.is_dir() else " (no such folder)"))
    script = Path(sys.executable).with_name("ttgnn")  # the venv's entry point, also when not on PATH
    runner = [str(script)] if script.exists() else [sys.executable, "-m", "ttgnn.cli"]
    running, failed = [], []
    for name in names:
        for seed in range(args.first_seed, args.seeds):
            metrics = run_dir(out, name, seed) / "metrics.json"
            epochs = run_epochs(name, args.epochs, args.ablation_epochs)
            # (a finished run of other settings is resumed: ttgnn train refuses it, naming the setting)
            if args.table_only or (finished(metrics, epochs) and not args.rerun
                                   and not other_settings(name, read_metrics(metrics))):
                continue
            cmd = command(name, out, epochs, args.num_threads, seed, args.root, args.device)
            # an interrupted run continues exactly where it stopped; --rerun replaces it
            cmd.append("--overwrite" if args.rerun else "--resume")
            print("$ " + shlex.join(cmd), flush=True)
            running.append(subprocess.Popen(runner + cmd[1:]))
            while len(running) >= args.jobs:
                running = _reap(running, failed)
    while running:
        running = _reap(running, failed)
    header = ("| model | embedding | order | rank | compression | seeds | valid acc | test acc | C&S valid | C&S test | "
              "best epochs | epoch time | peak memory |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for group in ("main", "labels", "spectral", "ablation", "sweep", "defaults"):
        lines, unfinished = [], []
        for name in (n for n in names if CONFIGS[n][1] == group):
            # Only runs that reached their own last epoch count; one still running (or stopped) is named.
            runs, left_out = counted_runs(out, name, counted)
            unfinished += left_out
            if runs:
                lines.append(row(name, runs))
            if runs and all("raw_valid_acc" in r["epochs"][0] for r in runs):
                lines.append(row(name, [as_trained(r) for r in runs], label=f"{name} (weights as trained)"))
            teachers = [read_metrics(p) for r, p in
                        ((r, full_table_metrics(out / name / f"seed{r['settings']['seed']}"))
                         for r in runs if r.get("from_full")) if p.exists()]
            if teachers:  # --from-full: the full table each TT run started from, seed by seed
                lines.append(row(name, teachers, label=f"{name}: its full table"))
        if lines:
            title = {"main": "main", "labels": "with known training labels as inputs (--label-input)",
                     "spectral": "label input, spectral init (--init spectral --spectral-vectors 8)",
                     "ablation": f"node-order ablation (GraphSAGE + TT, {args.ablation_epochs} epochs)",
                     "sweep": "defaults sweep (GraphSAGE + TT rank 8; settings changed from the earlier CLI defaults "
                              "as named)",
                     "defaults": "the CLI defaults with label reuse off unless named (GAT: 100 epochs unless "
                                 "--epochs; GAT's CLI default is the -reuse1 row; now-*: today's defaults, "
                                 "nothing pinned)"}[group]
            print(f"\n{title} (mean ± std over seeds):\n{header}\n" + "\n".join(lines))
        if unfinished:
            print(f"not counted: {', '.join(unfinished)}")
    if args.paired:
        try:
            print("\n" + paired_report(out, *args.paired, *(args.paired_epochs or (None,)), seeds=counted))
        except ValueError as err:  # --paired-epochs on a run whose learning rate was not constant
            print(f"error: --paired-epochs {' '.join(map(str, args.paired_epochs))}: {err}", file=sys.stderr)
            return 2
    # With --table-only, a configuration's command is the one its finished runs ran (their epochs and
    # threads), not what this invocation's defaults would start.
    print("\ncommands (seed 0; epochs and threads as the finished runs here ran):" if args.table_only else "\ncommands:")
    for name in names:
        epochs, threads = run_epochs(name, args.epochs, args.ablation_epochs), args.num_threads
        ran = recorded_settings(out, name, counted) if args.table_only else None
        if ran:
            epochs, threads = ran["epochs"], ran.get("num_threads", threads)
        print(f"{name}: " + shlex.join(command(name, out, epochs, threads, 0, args.root, args.device)))
    if failed:
        print(f"\n{len(failed)} run(s) failed (each printed its error above); the same command "
              "continues it:", file=sys.stderr)
        for proc in failed:
            print(f"  exit code {proc.returncode}: ttgnn {shlex.join(proc.args[len(runner):])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
