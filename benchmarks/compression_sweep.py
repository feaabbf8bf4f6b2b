"""Test accuracy against compression: TT at several ranks and the full table, over seeds.

TT is trained directly (``--no-from-full``): the command line's default on small graphs, a TT
table compressed from a trained full table, is measured by ``small_graphs_from_full.py``.

One training run per (dataset, model, embedding/rank, seed), each writing
``<out>/<dataset>/<model>-<tt-r<rank>|full>/seed<k>/metrics.json``; a finished run (every epoch
recorded, with the settings this sweep asks for, the graph's defaults settled) is reused; an
interrupted one, or one made with other settings, is run again.
Every run is the ``ttgnn train`` command printed before it (run in this process, with the dataset
loaded once, so a small graph costs seconds rather than the command's start-up). At the end the
mean ± std of the best validation accuracy and of the test accuracy at that epoch are printed per
configuration. ``benchmarks/plot_results.py`` draws the result.

    python benchmarks/compression_sweep.py --root $TTGNN_DATA                 # cora and citeseer, SAGE
    python benchmarks/compression_sweep.py --root $TTGNN_DATA --settings cli  # the CLI's defaults (GAT)
    python benchmarks/compression_sweep.py --datasets cora --models sage gat --ranks 4 16 --seeds 5
    python benchmarks/compression_sweep.py --settings cli --loss log-ce --datasets cora --ranks 4 --seeds 10
    python benchmarks/compression_sweep.py --settings cli --init spectral --spectral-vectors 8 \\
        --datasets cora citeseer pubmed --ranks 4 8 --seeds 5 --out runs/sweep-cli-spectral8
"""
import argparse
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Optional

from summary import mean_std  # (benchmarks/summary.py)
from ttgnn.choices import LOSSES
from ttgnn.cli import report_errors
from ttgnn.config import TrainConfig

# Small-graph settings (two layers, no normalisation, dropout and weight decay as in the
# Planetoid literature, a small initial table); every run uses them, only the input differs.
# The init is pinned to the one those tables were measured with (the CLI default then).
SMALL = ["--hidden", "64", "--num-layers", "2", "--norm", "none", "--dropout", "0.5", "--weight-decay", "5e-4",
         "--heads", "2", "--init-scale", "0.02", "--lr", "0.01", "--emb-lr", "0.01", "--order", "hierarchical-metis",
         "--init", "ortho"]
# --settings: "small" (the above) or "cli" (the command line's defaults).
SETTINGS = {"small": SMALL, "cli": []}
# TT trained directly (the default on small graphs since 2026-11-27 trains the full table first and
# compresses it: benchmarks/small_graphs_from_full.py), as every table of this sweep was measured.
COMMON = ["--mode", "full", "--no-progress", "--no-correct-smooth", "--no-from-full"]
# Settings that do not change what a run computes: left out when a finished run is matched.
NOT_COMPARED = TrainConfig.PLACE_KEYS
# The TT table's own settings: not compared for the full table (whose runs recorded the default rank).
TT_ONLY = ("rank", "num_cores", "row_shape", "col_shape", "compression", "max_params")


def finished_run(folder: Path, config, skip: tuple = ()) -> Optional[dict]:
    """The ``metrics.json`` of the run in ``folder`` if it is finished with ``config``'s settings
    (a :class:`ttgnn.config.TrainConfig` settled by the graph, :func:`ttgnn.train.settle_by_graph`),
    else ``None``: the file is rewritten every epoch, so an interrupted run's has fewer epochs, and
    a run with another setting (a default changed since, another ``--label-spread`` into the same
    ``--out``) would be another configuration's figure. A setting missing from an older file
    counts as :data:`~ttgnn.config.TrainConfig.RESUME_ABSENT` has it, else as different. Settings
    named in ``skip`` are not compared either."""
    from ttgnn.checkpoint import differing_settings

    path = folder / "metrics.json"
    if not path.exists():
        return None
    metrics = json.loads(path.read_text())
    wanted = json.loads(json.dumps(config.settings()))  # as the file holds them (tuples as lists)
    if len(metrics.get("epochs", [])) != config.epochs:
        return None
    skip = NOT_COMPARED + tuple(skip) + (TT_ONLY if config.embedding != "tt" else ())
    keys = [key for key in wanted if key not in skip]
    if differing_settings(metrics.get("settings", {}), wanted, keys, TrainConfig.RESUME_ABSENT, missing_differs=True):
        return None
    return metrics


def run_args(args, dataset: str, model: str, embedding: str, rank, seed: int, folder: Path) -> list:
    """The ``ttgnn train`` arguments of one run."""
    cmd = ["train", "--dataset", dataset, "--model", model, "--embedding", embedding, *COMMON,
           *SETTINGS[args.settings], "--epochs", str(args.epochs), "--seed", str(seed),
           "--num-threads", str(args.num_threads), "--output-dir", str(folder), "--overwrite"]
    if args.init is not None:
        cmd += ["--init", args.init]
    if args.label_input is not None:
        cmd += ["--label-input" if args.label_input else "--no-label-input"]
    if args.spectral_vectors is not None:
        cmd += ["--spectral-vectors", str(args.spectral_vectors)]
    if args.label_spread is not None:
        cmd += ["--label-spread", str(args.label_spread)]
    if args.loss is not None:
        cmd += ["--loss", args.loss]
    if rank is not None:
        cmd += ["--rank", str(rank)]
    if args.root:
        cmd += ["--root", args.root]
    return cmd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--out", default="runs/sweep", help="one folder per run")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--models", nargs="+", choices=["sage", "gat"], default=None,
                        help="default: the settings' (small: sage; cli: the command line's full-graph model, gat)")
    parser.add_argument("--ranks", nargs="+", type=int, default=[2, 4, 8, 16, 32], help="TT ranks (plus the full table)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..K-1")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--settings", choices=sorted(SETTINGS), default="small",
                        help="small: Planetoid-style settings; cli: the command line's defaults")
    parser.add_argument("--init", choices=["ortho", "gaussian", "spectral"], default=None,
                        help="table init of every run (default: the settings')")
    parser.add_argument("--spectral-vectors", type=int, default=None, help="with --init spectral")
    parser.add_argument("--label-input", action=argparse.BooleanOptionalAction, default=None,
                        help="known training labels as inputs in every run (default: the settings')")
    parser.add_argument("--label-spread", type=int, default=None, metavar="STEPS",
                        help="label spreading steps of every run (default: the settings')")
    parser.add_argument("--loss", choices=LOSSES, default=None,
                        help="training loss of every run (default: the settings')")
    parser.add_argument("--num-threads", type=int, default=1)
    args = parser.parse_args()
    if args.seeds < 1:  # an IndexError traceback from the empty table before
        parser.error(f"--seeds must be >= 1, got {args.seeds}")

    from ttgnn.allocator import configure_allocator
    from ttgnn.cli import build_parser, config_from_args
    from ttgnn.config import AUTO_MODEL
    from ttgnn.data import load_dataset
    from ttgnn.train import settle_by_graph, train

    if args.models is None:
        args.models = [AUTO_MODEL["full"]] if args.settings == "cli" else ["sage"]
    configure_allocator()
    logging.basicConfig(level=logging.WARNING)  # (each run sets its threads from --num-threads)
    cli = build_parser()
    out = Path(args.out)
    inputs = [("tt", rank) for rank in args.ranks] + [("full", None)]
    for dataset in args.datasets:
        data = None
        for model in args.models:
            for embedding, rank in inputs:
                name = f"{model}-tt-r{rank}" if embedding == "tt" else f"{model}-full"
                runs = []
                for seed in range(args.seeds):
                    folder = out / dataset / name / f"seed{seed}"
                    cmd = run_args(args, dataset, model, embedding, rank, seed, folder)
                    config = config_from_args(cli.parse_args(cmd))
                    if data is None:
                        data = load_dataset(dataset, root=args.root)
                    metrics = finished_run(folder, settle_by_graph(config, data))
                    if metrics is None:
                        if (folder / "metrics.json").exists():
                            print(f"# {folder}: unfinished or made with other settings, run again", flush=True)
                        print("$ ttgnn " + shlex.join(cmd), flush=True)
                        train(config, dataset=data)
                        metrics = json.loads((folder / "metrics.json").read_text())
                    runs.append(metrics)
                print(f"{dataset:<10} {name:<14} {runs[0]['compression_ratio']:>8.1f}x  "
                      f"valid {mean_std([r['best_valid_acc'] for r in runs])}  "
                      f"test {mean_std([r['test_acc'] for r in runs])}  ({len(runs)} seeds)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
