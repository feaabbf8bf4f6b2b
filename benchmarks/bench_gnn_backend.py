"""Full-graph training epoch of each GNN backend side by side (``--gnn-backend dgl`` vs ``torch``).

``torch-reference`` is the ``torch`` backend with its compiled CPU graph kernels turned off
(:func:`ttgnn.graph_ops.reference_only`: torch's sparse products and scatters, as on a build
without the extension), so one run also gives the kernels' speed-up (the ``vs ref`` columns).
``--cpu-paths avx512 avx2`` runs the ``torch`` backend once per CPU instruction-set path of the
kernels (TT lookup and graph kernels alike), as backends ``torch[avx512]``, ``torch[avx2]``.
For each model, the backends are built from the same seed (same weights) and timed in
interleaved rounds (each round runs one epoch of each backend), so drifting machine load does not
enter their ratios. An epoch is what ``ttgnn train --mode full`` does per epoch: forward on the full
graph, loss on the training nodes, backward, Adam step (:func:`ttgnn.train.train_epoch`), and
then the evaluation of every node (:func:`ttgnn.evaluation.evaluate`, with the label reuse
rounds the settings have), timed apart. The settings are the command line's defaults for the
graph (label input, reuse and spreading as ``ttgnn train`` settles them). On CUDA
the time is taken with CUDA events and the peak allocated GPU memory is reported; DGL runs only
where the installed DGL supports the device (the PyPI wheel: the CPU).

    python benchmarks/bench_gnn_backend.py --root $TTGNN_DATA                      # arxiv, CPU, SAGE and GAT
    python benchmarks/bench_gnn_backend.py --device cuda --embedding tt full --json out.json
    python benchmarks/bench_gnn_backend.py --root $TTGNN_DATA --backends dgl torch torch-reference
    python benchmarks/bench_gnn_backend.py --root $TTGNN_DATA --backends torch torch-reference --cpu-paths avx512 avx2
"""
import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from ttgnn.cli import report_errors
from ttgnn.config import TrainConfig
from ttgnn.data import load_dataset
from ttgnn.evaluation import evaluate
from ttgnn.graph_ops import reference_only
from ttgnn.models import dgl_runs_on
from ttgnn.train import setup_run, train_epoch
from machine import active_cpu_isa, cpu_model, on_cpu_isa  # noqa: E402  (benchmarks/machine.py)

TT = dict(rank=8, row_shape=[55, 55, 56], col_shape=[8, 4, 4])


def _config(args, model: str, embedding: str, backend: str) -> TrainConfig:
    extra = dict(TT) if embedding == "tt" and args.dataset == "ogbn-arxiv" else {}
    backend = "torch" if backend.startswith("torch") else backend
    return TrainConfig(dataset=args.dataset, root=args.root, model=model, embedding=embedding, gnn_backend=backend,
                       mode="full", order="identity", hidden=args.hidden, num_layers=args.num_layers,
                       heads=args.heads, progress=False, correct_smooth=False, **extra)


def _timed(step, device: torch.device) -> float:
    if device.type == "cuda":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(stop) / 1000.0
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def _timed_epoch(run, epoch: int, device: torch.device, backend: str) -> tuple[float, float]:
    """Seconds of one training epoch and of the evaluation after it."""
    with _switch_for(backend):
        train_s = _timed(lambda: train_epoch(run, epoch), device)
        eval_s = _timed(lambda: evaluate(run.model, run.graph, run.dataset, "full", accuracy=run.accuracy), device)
    return train_s, eval_s


def _switch_for(backend: str):
    """The context a backend's epochs run in: the reference path for ``torch-reference``, CPU
    path ``P`` for ``torch[P]``, nothing for the others."""
    if backend == "torch-reference":
        return reference_only()
    if backend.startswith("torch["):
        return on_cpu_isa(backend[len("torch["):-1])
    return contextlib.nullcontext()



def _ratio(value: float, base) -> "float | None":
    """``value / base`` (a time ratio: below 1 is faster), ``None`` without a base."""
    return value / base if base else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="ogbn-arxiv")
    p.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--models", nargs="+", default=["sage", "gat"], choices=["sage", "gat"])
    p.add_argument("--embedding", nargs="+", default=["tt"], choices=["tt", "full"])
    p.add_argument("--backends", nargs="+", default=["dgl", "torch"], choices=["dgl", "torch", "torch-reference"])
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5, help="timed epochs per backend (after one warm-up epoch)")
    p.add_argument("--num-threads", type=int, default=None)
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--cpu-paths", nargs="+", default=None, choices=["avx512", "avx2", "baseline"],
                   help="run the torch backend once per CPU instruction-set path of the kernels (default: the best "
                        "this CPU runs)")
    args = p.parse_args(argv)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device")
    if args.cpu_paths:
        if device.type != "cpu" or "torch" not in args.backends:
            p.error("--cpu-paths needs --device cpu and the torch backend in --backends")
        for path in args.cpu_paths:
            with on_cpu_isa(path, "--cpu-paths"):  # refuses a path this CPU or build does not run
                pass
        at = args.backends.index("torch")
        args.backends[at:at + 1] = [f"torch[{path}]" for path in dict.fromkeys(args.cpu_paths)]
    backends = [b for b in args.backends if b != "dgl" or dgl_runs_on(str(device))]
    if len(backends) < len(args.backends):
        print(f"# dgl skipped: the installed DGL does not run on {device}", file=sys.stderr)
    dataset = load_dataset(args.dataset, args.root)
    rows = []
    cpu = f"{cpu_model()}, CPU path {active_cpu_isa()}"
    print(f"# {args.dataset} full-graph epoch (forward + backward + Adam), {device} ({cpu}), "
          f"{torch.get_num_threads()} threads, hidden {args.hidden}, {args.num_layers} layers; "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'model':>6} {'embedding':>9} {'backend':>15} {'epoch s':>9} {'min s':>8} {'vs dgl':>7} {'vs ref':>7} "
          f"{'eval s':>8} {'vs dgl':>7} {'vs ref':>7} {'peak GPU MiB':>13}")
    for model in args.models:
        for embedding in args.embedding:
            runs = {}
            for backend in backends:
                runs[backend] = setup_run(_config(args, model, embedding, backend), dataset, 0, 1, device)
            times = {backend: [] for backend in backends}
            eval_times = {backend: [] for backend in backends}
            for backend, run in runs.items():  # warm-up (allocator, kernels' first launch)
                _timed_epoch(run, 1, device, backend)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            peaks = {}
            for round_ in range(args.rounds):
                for backend, run in runs.items():
                    if device.type == "cuda":
                        torch.cuda.reset_peak_memory_stats(device)
                    train_s, eval_s = _timed_epoch(run, 2 + round_, device, backend)
                    times[backend].append(train_s)
                    eval_times[backend].append(eval_s)
                    if device.type == "cuda":
                        peaks[backend] = max(peaks.get(backend, 0.0), torch.cuda.max_memory_allocated(device) / 2**20)
            medians = {backend: statistics.median(times[backend]) for backend in backends}
            eval_medians = {backend: statistics.median(eval_times[backend]) for backend in backends}
            for backend in backends:
                median, eval_median = medians[backend], eval_medians[backend]
                row = dict(model=model, embedding=embedding, backend=backend, device=str(device),
                           epoch_s=median, min_s=min(times[backend]),
                           vs_dgl=_ratio(median, medians.get("dgl")),
                           vs_reference=_ratio(median, medians.get("torch-reference")),
                           eval_s=eval_median, eval_vs_dgl=_ratio(eval_median, eval_medians.get("dgl")),
                           eval_vs_reference=_ratio(eval_median, eval_medians.get("torch-reference")),
                           peak_gpu_mib=peaks.get(backend))
                rows.append(row)
                shown = {key: "-" if row[key] is None else f"{row[key]:.2f}"
                         for key in ("vs_dgl", "vs_reference", "eval_vs_dgl", "eval_vs_reference")}
                peak = f"{row['peak_gpu_mib']:.0f}" if row["peak_gpu_mib"] else "-"
                print(f"{model:>6} {embedding:>9} {backend:>15} {median:>9.3f} {row['min_s']:>8.3f} "
                      f"{shown['vs_dgl']:>7} {shown['vs_reference']:>7} {eval_median:>8.3f} "
                      f"{shown['eval_vs_dgl']:>7} {shown['eval_vs_reference']:>7} {peak:>13}", flush=True)
            del runs
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
