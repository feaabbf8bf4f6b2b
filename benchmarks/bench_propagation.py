"""Label propagation with the compiled CPU kernel and with torch's sparse product, side by side.

Correct and Smooth after training and label spreading before it (:mod:`ttgnn.smoothing`) are
``S X`` products over the graph's normalised adjacency, ``X`` as wide as the classes. On the CPU
they run :func:`ttgnn.graph_ops.csr_matmul` (the ``csr_aggregate`` kernel); inside
:func:`ttgnn.graph_ops.reference_only` they run ``torch.sparse.mm``. This times one product and
the whole Correct and Smooth tuning (12 propagations of 50 products; random logits: its time does
not depend on them) both ways in interleaved rounds and prints the ratios (below 1: the kernel
is faster), after checking that both give the same answer to float rounding. Signals narrower
than :data:`ttgnn.graph_ops.CSR_MATMUL_MIN_WIDTH` columns take torch's product both ways: on a
graph of fewer classes the tuning is not timed, and ``--width`` times the product wider:

    python benchmarks/bench_propagation.py --root $TTGNN_DATA                  # ogbn-arxiv, 2 threads
    python benchmarks/bench_propagation.py --dataset pubmed --width 32 --rounds 1 --num-threads 1
"""
import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

from ttgnn.cli import report_errors
from ttgnn.data import load_dataset
from ttgnn.graph_ops import CSR_MATMUL_MIN_WIDTH, csr_matmul, reference_only
from ttgnn.smoothing import normalized_adjacency, tune_correct_and_smooth
from machine import active_cpu_isa, cpu_model  # noqa: E402  (benchmarks/machine.py)

WAYS = ("kernel", "torch")


def _timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="ogbn-arxiv")
    p.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds of each way")
    p.add_argument("--products", type=int, default=20, help="products timed per round")
    p.add_argument("--num-threads", type=int, default=2)
    p.add_argument("--width", type=int, default=None, help="columns of the timed product (default: the classes)")
    args = p.parse_args(argv)
    for name in ("rounds", "products", "num_threads", "width"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    torch.set_num_threads(args.num_threads)
    dataset = load_dataset(args.dataset, args.root)
    adjacency = normalized_adjacency(*dataset.csr(), dataset.num_nodes)
    gen = torch.Generator().manual_seed(0)
    width = args.width or dataset.num_classes
    signal = torch.rand(dataset.num_nodes, width, generator=gen)
    tune = dataset.num_classes >= CSR_MATMUL_MIN_WIDTH  # else torch's product both ways
    logits = torch.randn(dataset.num_nodes, dataset.num_classes, generator=gen)
    labels = dataset.labels.clamp(min=0)
    train_idx, valid_idx = dataset.split["train"], dataset.split["valid"]

    def way(name: str):
        return reference_only() if name == "torch" else contextlib.nullcontext()

    with way("torch"):
        want = csr_matmul(adjacency, signal)
    got = csr_matmul(adjacency, signal)
    error = float((got - want).abs().max())
    if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
        print(f"# the kernel's product differs from torch's by up to {error:.3g}", file=sys.stderr)
        return 1
    product = {name: [] for name in WAYS}
    tuning = {name: [] for name in WAYS}
    results = {}
    for _ in range(args.rounds):
        for name in WAYS:
            with way(name):
                product[name].append(_timed(lambda: [csr_matmul(adjacency, signal) for _ in range(args.products)])
                                     / args.products)
                if tune:
                    tuning[name].append(_timed(lambda: results.__setitem__(name, tune_correct_and_smooth(
                        logits, adjacency, labels, train_idx, valid_idx))))
    print(f"# {args.dataset}: {dataset.num_nodes:,} nodes, {adjacency._nnz():,} nonzeros, {dataset.num_classes} "
          f"classes; CPU {cpu_model()}, CPU path {active_cpu_isa()}, {torch.get_num_threads()} threads; medians of "
          f"{args.rounds} interleaved rounds")
    print(f"# one product of {width} columns: kernel and torch differ by at most {error:.2g}")
    if tune:
        same = (results["kernel"].correct_alpha, results["kernel"].smooth_alpha) == (
            results["torch"].correct_alpha, results["torch"].smooth_alpha)
        print(f"# the tuning picks the same strengths both ways: {same} (validation "
              f"{results['kernel'].valid_acc:.4f} and {results['torch'].valid_acc:.4f})")
    else:
        print(f"# C&S tuning not timed: {dataset.num_classes} classes, under {CSR_MATMUL_MIN_WIDTH} columns, take "
              f"torch's product both ways")
    if width < CSR_MATMUL_MIN_WIDTH:
        print(f"# the product: {width} columns, under {CSR_MATMUL_MIN_WIDTH}, takes torch's both ways (--width)")
    print(f"{'work':>22} {'kernel s':>10} {'torch s':>10} {'kernel / torch':>15}")
    timed = [("one product S X", product)] + ([("C&S tuning (600 S X)", tuning)] if tune else [])
    for label, times in timed:
        kernel, reference = statistics.median(times["kernel"]), statistics.median(times["torch"])
        # under the width both ways run torch's product: a ratio would only show the machine's noise
        ratio = f"{kernel / reference:.2f}" if width >= CSR_MATMUL_MIN_WIDTH and reference > 0 else "-"
        print(f"{label:>22} {kernel:>10.4f} {reference:>10.4f} {ratio:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
