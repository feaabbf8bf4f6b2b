"""Dropout on the CPU, side by side: torch's (``torch.nn.functional.dropout``) and ours
(:mod:`ttgnn.dropout`, the compiled kernel), forward + backward, and whole training epochs with
either.

Both run in interleaved rounds (each round times one call of each), so drifting machine load
does not enter their ratio (``ours / torch``: below 1 means ours is faster). The op is timed on a
``(rows, width)`` float32 tensor, by default ogbn-arxiv's node count and the models' width 128;
``--epoch`` also times full-graph training epochs on a dataset (forward, backward and Adam, as
``ttgnn train --mode full`` runs them, with the command line's settings for the graph) with our
dropout and with torch's (inside :func:`ttgnn.dropout.reference_only`).

    python benchmarks/bench_dropout.py                                     # the op, 2 threads
    python benchmarks/bench_dropout.py --root $TTGNN_DATA --epoch --models sage gat --num-threads 1
"""
import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ttgnn import dropout as drop
from ttgnn.cli import report_errors
from machine import active_cpu_isa, cpu_model  # noqa: E402  (benchmarks/machine.py)


def _timed(step) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def _op_rounds(rows: int, width: int, p: float, rounds: int) -> dict:
    x = torch.randn(rows, width, requires_grad=True)
    grad = torch.randn(rows, width)
    ways = {"torch": lambda: F.dropout(x, p, True).backward(grad), "ours": lambda: drop.dropout(x, p).backward(grad)}
    times = {name: [] for name in ways}
    for name, step in ways.items():  # warm-up
        step()
    for _ in range(rounds):
        for name, step in ways.items():
            times[name].append(_timed(step))
    return times


def _epoch_rounds(args, model: str, dataset, rounds: int) -> dict:
    from ttgnn.config import TrainConfig
    from ttgnn.train import setup_run, train_epoch

    config = TrainConfig(dataset=args.dataset, root=args.root, model=model, mode="full", progress=False,
                         correct_smooth=False)
    runs = {name: setup_run(config, dataset, 0, 1, torch.device("cpu")) for name in ("torch", "ours")}

    def epoch(name: str, number: int) -> float:
        with drop.reference_only() if name == "torch" else contextlib.nullcontext():
            return _timed(lambda: train_epoch(runs[name], number))

    for name in runs:
        epoch(name, 1)
    times = {name: [] for name in runs}
    for round_ in range(rounds):
        for name in runs:
            times[name].append(epoch(name, 2 + round_))
    return times


def _row(label: str, times: dict) -> str:
    torch_s, ours_s = statistics.median(times["torch"]), statistics.median(times["ours"])
    return f"{label:>28} {torch_s * 1000:>10.1f} {ours_s * 1000:>10.1f} {ours_s / torch_s:>12.2f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, default=169_343)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--p", type=float, default=0.5, help="dropout probability")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (after one warm-up)")
    p.add_argument("--num-threads", type=int, default=2)
    p.add_argument("--epoch", action="store_true", help="also time training epochs on --dataset")
    p.add_argument("--dataset", default="ogbn-arxiv")
    p.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    p.add_argument("--models", nargs="+", default=["sage", "gat"], choices=["sage", "gat"])
    args = p.parse_args(argv)
    for name in ("rows", "width", "rounds", "num_threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 0.0 < args.p < 1.0:
        p.error(f"--p must lie in (0, 1), got {args.p}")
    if not drop.available():
        p.error("the compiled dropout is not available (ttgnn._C is not built, or built before it existed)")
    torch.set_num_threads(args.num_threads)
    print(f"# dropout p={args.p}, CPU {cpu_model()}, CPU path {active_cpu_isa()}, {torch.get_num_threads()} threads; "
          f"medians of {args.rounds} interleaved rounds")
    print(f"{'what':>28} {'torch ms':>10} {'ours ms':>10} {'ours / torch':>12}")
    print(_row(f"op fwd+bwd ({args.rows:,} x {args.width})", _op_rounds(args.rows, args.width, args.p, args.rounds)),
          flush=True)
    if args.epoch:
        from ttgnn.data import load_dataset

        dataset = load_dataset(args.dataset, args.root)
        for model in args.models:
            print(_row(f"{model} epoch ({args.dataset})", _epoch_rounds(args, model, dataset, args.rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
