"""Where TT loses to the full table on a small graph: probes that change only the input table.

Every probe trains one configuration of ``ttgnn train`` (its defaults plus the flags after
``--``) over seeds, and changes the input table after it is built and before the first epoch:

- ``tt`` / ``full``: the TT table / the full table as built (no change).
- ``full-from-tt``: a full table started from the TT table's rows (the TT-SVD copy of the
  eigenvector table that TT starts from), so it starts with TT's error but trains every entry.
- ``full-noise``: a full table plus Gaussian noise of ``--noise`` times its norm.
- ``tt-spectral-order``: TT rows ordered by a PCA tree of the eigenvectors (nodes with similar
  eigenvector rows share leading TT digits) instead of the partitioner's order, TT-SVD redone.
- ``tt-rotated``: the eigenvectors spread over all columns by an orthogonal map chosen to make
  the table easy for TT (alternating TT-SVD and Procrustes), TT-SVD of that table.
- ``tt-spectral-order-rotated``: both.

The spectral init must be on (the default on graphs with few labels). Test accuracy is at the best
validation epoch, of the GNN alone (Correct and Smooth off)::

    python benchmarks/small_graph_probes.py --root $TTGNN_DATA --dataset cora --seeds 3 \\
        --probes tt full full-from-tt tt-spectral-order-rotated -- --no-label-input --rank 4
    # the "frozen" tables: ... --probes tt full-from-tt -- --no-label-input --rank 4 --emb-lr 1e-6
"""
import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ttgnn.cli import build_parser, config_from_args, int_at_least, report_errors
from ttgnn.data import default_cache_dir, load_dataset
from ttgnn.embedding import TTNodeEmbedding
from ttgnn.spectral import leading_eigenvectors, spectral_table
from ttgnn.train import build_classifier, evaluate_and_checkpoint, finish_run, setup_run, train_epoch

PROBES = ("tt", "full", "full-from-tt", "full-noise", "tt-spectral-order", "tt-rotated", "tt-spectral-order-rotated")


def pca_tree_order(vectors: np.ndarray, row_shape) -> torch.Tensor:
    """``(N,)`` node -> TT row: split the nodes into ``row_shape[0]`` equal runs along the leading
    principal direction of their rows of ``vectors``, each run likewise by ``row_shape[1:]``."""
    order = np.empty(vectors.shape[0], dtype=np.int64)

    def place(nodes, shape, base):
        if not shape:
            order[nodes] = base + np.arange(nodes.size)
            return
        inner = int(np.prod(shape[1:]))
        if nodes.size > 1:
            centred = vectors[nodes] - vectors[nodes].mean(axis=0)
            direction = np.linalg.svd(centred, full_matrices=False)[2][0]
            nodes = nodes[np.argsort(centred @ direction, kind="stable")]
        bounds = np.linspace(0, nodes.size, shape[0] + 1).round().astype(int)
        for part in range(shape[0]):
            place(nodes[bounds[part]:bounds[part + 1]], shape[1:], base + part * inner)

    place(np.arange(vectors.shape[0]), list(row_shape), 0)
    return torch.from_numpy(order)


def tt_copy(tt: TTNodeEmbedding, table: torch.Tensor) -> TTNodeEmbedding:
    """TT-SVD of ``table`` with ``tt``'s shape, ranks and node order."""
    return TTNodeEmbedding.from_pretrained(table.double(), ranks=list(tt.ranks), row_shape=tt.row_shape,
                                           col_shape=tt.col_shape, node_order=tt.node_order)


@torch.no_grad()
def load_tt(tt: TTNodeEmbedding, table: torch.Tensor) -> float:
    """Overwrite ``tt``'s cores with the TT-SVD of ``table``; returns its relative error."""
    fitted = tt_copy(tt, table)
    for core, new in zip(tt.cores, fitted.cores):
        core.copy_(new.to(core.dtype))
    return fitted.svd_relative_error


def rotated_table(tt: TTNodeEmbedding, vectors: np.ndarray, scale: float, seed: int, rounds: int = 40) -> torch.Tensor:
    """``vectors @ W`` with ``W`` (``k x dim``, orthogonal rows times ``scale``) fitted so that its
    TT-SVD loses little: alternately the TT-SVD ``T`` of the table and the ``W`` closest to ``T``."""
    rows = torch.arange(vectors.shape[0])
    w = np.linalg.qr(np.random.default_rng(seed).standard_normal((tt.embedding_dim, vectors.shape[1])))[0].T * scale
    for _ in range(rounds):
        with torch.no_grad():
            copy = tt_copy(tt, torch.from_numpy(vectors @ w))(rows).numpy()
        left, _, right = np.linalg.svd(vectors.T @ copy, full_matrices=False)
        w = scale * left @ right
    return torch.from_numpy(vectors @ w)


@torch.no_grad()
def apply_probe(probe: str, run, noise: float) -> str:
    """Change ``run``'s input table as ``probe`` says; returns a note for the log."""
    config, dataset = run.config, run.dataset
    node_input = run.model.node_input
    if probe in ("tt", "full"):
        return ""
    if probe == "full-from-tt":
        import dataclasses

        rows = build_classifier(dataclasses.replace(config, embedding="tt"), dataset).node_input(None)
        error = float((rows - node_input.table.weight).norm() / node_input.table.weight.norm())
        node_input.table.weight.copy_(rows)
        return f"TT copy's relative error {error:.3f}"
    if probe == "full-noise":
        weight = node_input.table.weight
        draw = torch.randn(weight.shape, generator=torch.Generator().manual_seed(config.seed))
        weight.add_(draw * (noise * weight.norm() / draw.norm()))
        return f"noise {noise} of the table's norm"
    tt = node_input.table
    cache = default_cache_dir(config.cache_dir)
    vectors = leading_eigenvectors(*dataset.csr(), dataset.num_nodes, config.spectral_vectors, seed=config.seed,
                                   cache_dir=cache)
    if "spectral-order" in probe:
        tt.set_node_order(pca_tree_order(vectors, tt.row_shape))
    if "rotated" in probe:
        table = rotated_table(tt, vectors, config.init_scale * dataset.num_nodes ** 0.5, config.seed)
    else:
        table = spectral_table(*dataset.csr(), dataset.num_nodes, config.dim, std=config.init_scale,
                               vectors=config.spectral_vectors, seed=config.seed, cache_dir=cache)
    return f"TT-SVD relative error {load_tt(tt, table):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--probes", nargs="+", choices=PROBES, default=["tt", "full", "full-from-tt"])
    parser.add_argument("--seeds", type=int_at_least(1), default=3, help="seeds 0..K-1")
    parser.add_argument("--noise", type=float, default=0.3, help="for full-noise: the noise's norm over the table's")
    parser.add_argument("--num-threads", type=int, default=1)
    parser.add_argument("train_args", nargs="*", help="after --: flags of `ttgnn train`")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    dataset = load_dataset(args.dataset, root=args.root)
    rows = []
    for probe in args.probes:
        results = []
        for seed in range(args.seeds):
            flags = ["train", "--dataset", args.dataset, "--seed", str(seed), "--num-threads", str(args.num_threads),
                     "--no-progress", "--no-correct-smooth", "--embedding", "tt" if probe.startswith("tt") else "full",
                     *args.train_args]
            config = config_from_args(build_parser().parse_args(flags))
            run = setup_run(config, dataset, 0, 1, torch.device("cpu"))
            if run.config.init != "spectral" and probe not in ("tt", "full"):
                parser.error(f"probe {probe} needs the spectral init (this run's init is {run.config.init})")
            note = apply_probe(probe, run, args.noise)
            for epoch in range(1, run.config.epochs + 1):
                started = time.perf_counter()
                loss = train_epoch(run, epoch)
                evaluate_and_checkpoint(run, epoch, loss, time.perf_counter() - started)
            metrics = finish_run(run)
            results.append((metrics["best_valid_acc"], metrics["test_acc"]))
            print(f"{args.dataset} {probe} seed {seed}: valid {results[-1][0]:.4f} test {results[-1][1]:.4f}"
                  + (f" ({note})" if note else ""), flush=True)
        valid, test = zip(*results)
        spread = statistics.stdev(test) if len(test) > 1 else 0.0
        rows.append(f"| {probe} | {statistics.mean(valid):.4f} | {statistics.mean(test):.4f} ± {spread:.4f} |")
    print(f"\n{args.dataset}, {args.seeds} seeds, flags {' '.join(args.train_args) or '(none)'}\n"
          "| probe | valid | test |\n|---|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
