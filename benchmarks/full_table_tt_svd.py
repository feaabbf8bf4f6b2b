"""How much of what a full table learns survives TT-SVD: train the full table (the command line's
defaults, ``--embedding full``), then evaluate its best model with the table replaced by the TT-SVD
of itself in TT-row order at several ranks (nothing retrained), and with the table put back to its
initial values (what training the table was worth). Test accuracy at the full run's best epoch;
mean over seeds::

    python benchmarks/full_table_tt_svd.py --root $TTGNN_DATA --dataset cora --seeds 3 --ranks 4 6 8 16
"""
import argparse
import dataclasses
import logging
import statistics
import sys
from pathlib import Path

import torch

from ttgnn.cli import build_parser, config_from_args, explicit_options, int_at_least, report_errors
from ttgnn.data import load_dataset
from ttgnn.embedding import TTNodeEmbedding
from ttgnn.evaluation import evaluate
from ttgnn.train import build_classifier, evaluate_and_checkpoint, finish_run, setup_run, train_epoch


def one_seed(args, dataset, seed: int) -> dict:
    flags = ["train", "--dataset", args.dataset, "--seed", str(seed), "--num-threads", str(args.num_threads),
             "--no-progress", "--no-correct-smooth", "--embedding", "full", *args.train_args]
    run = setup_run(config_from_args(build_parser().parse_args(flags)), dataset, 0, 1, torch.device("cpu"))
    start = run.model.node_input.table.weight.detach().clone()
    for epoch in range(1, run.config.epochs + 1):
        evaluate_and_checkpoint(run, epoch, train_epoch(run, epoch), 0.0)
    finish_run(run)
    model = run.model
    model.load_state_dict(run.best_state)
    table = model.node_input.table.weight.detach().clone()

    def scores(rows: torch.Tensor) -> tuple:
        with torch.no_grad():
            model.node_input.table.weight.copy_(rows)
        result = evaluate(model, run.graph, dataset, run.config.mode, run.config.eval_batch_size, run.accuracy)
        return result["valid"], result["test"]

    out = {"full table as trained": (scores(table), 0.0, 1.0), "its initial table": (scores(start), None, None)}
    for rank in args.ranks:
        tt = build_classifier(dataclasses.replace(run.config, embedding="tt", rank=rank), dataset).node_input.table
        fit = TTNodeEmbedding.from_pretrained(table.double(), ranks=list(tt.ranks), row_shape=tt.row_shape,
                                              col_shape=tt.col_shape, node_order=tt.node_order)
        rows = fit(torch.arange(dataset.num_nodes)).float()
        out[f"TT-SVD at rank {rank}"] = (scores(rows), fit.svd_relative_error, fit.compression_ratio)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--seeds", type=int_at_least(1), default=3, help="seeds 0..K-1")
    parser.add_argument("--ranks", nargs="+", type=int, default=[4, 8, 16])
    parser.add_argument("--num-threads", type=int, default=1)
    parser.add_argument("train_args", nargs="*", help="after --: flags of `ttgnn train`")
    args = parser.parse_args()
    given = explicit_options(build_parser(), ["train", *args.train_args]) & {"embedding", "from_full"}
    if given:  # --embedding tt failed with a traceback (a TT table has no .weight to replace)
        parser.error(f"--{sorted(given)[0].replace('_', '-')}: this script trains the full table itself (and "
                     "compresses it afterwards); leave it out")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    dataset = load_dataset(args.dataset, root=args.root)
    results = [one_seed(args, dataset, seed) for seed in range(args.seeds)]
    print(f"\n{args.dataset}, {args.seeds} seeds: the full table's best model with its table replaced\n"
          "| table | compression | TT-SVD relative error | valid | test |\n|---|---:|---:|---:|---:|")
    for name in results[0]:
        (_, error, ratio) = results[0][name]
        valid = statistics.mean(r[name][0][0] for r in results)
        test = statistics.mean(r[name][0][1] for r in results)
        errors = "" if error is None else f"{statistics.mean(r[name][1] for r in results):.2f}"
        print(f"| {name} | {'' if ratio is None else f'{ratio:,.0f}x'} | {errors} | {valid:.4f} | {test:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
