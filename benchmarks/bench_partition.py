"""Quality and speed of the node orders in :mod:`ttgnn.partition`.

Two modes:

* a real graph (default ogbn-arxiv at row shape 55,55,56): for every method, the fraction of edges
  whose endpoints share the first TT digit and the first two digits, and the time::

      python benchmarks/bench_partition.py                      # data from $TTGNN_DATA

* ``--synthetic-products``: a planted-partition graph of ogbn-products' size (2,449,029 nodes,
  about 62M symmetric edge entries, nested communities) generated in a few seconds, reporting the
  time and the peak resident memory (``resource.getrusage``) of the order::

      python benchmarks/bench_partition.py --synthetic-products

* ``--synthetic-nested N``: the streaming generator of :mod:`ttgnn.synthetic` (planted nested
  communities, power-law degrees) with ``N`` nodes, e.g. KaMinPar alone on 10^7 nodes::

      python benchmarks/bench_partition.py --synthetic-nested 10000000 --avg-degree 10 \
          --methods hierarchical-kaminpar

Peak RSS is the process's (``ru_maxrss``): run one method per invocation for a per-method figure.
The table is printed as Markdown (every level's shared-prefix fraction); ``--json PATH`` also
writes the figures.
"""
from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time
from pathlib import Path

import numpy as np

from ttgnn.cli import int_at_least, report_errors
from ttgnn.partition import METHODS, canonical_csr, hierarchical_order
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

log = logging.getLogger("bench_partition")


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far, in GiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def nested_sbm_edges(num_nodes: int, num_entries: int, num_communities: int, num_subcommunities: int,
                     p_sub: float, p_comm: float, seed: int = 0) -> np.ndarray:
    """Edges of a two-level planted-partition graph, node ids shuffled.

    Nodes are split into ``num_communities`` communities, each into ``num_subcommunities``
    sub-communities. An edge from a uniformly drawn node goes to its sub-community with probability
    ``p_sub``, else to its community with probability ``p_comm``, else anywhere. About
    ``num_entries / 2`` undirected edges are drawn (a little more, to make up for duplicates).

    Returns:
        np.ndarray: ``int32`` edge index of shape ``(2, E)``, each undirected edge listed once.
    """
    rng = np.random.default_rng(seed)
    num_edges = int(num_entries / 2 * 1.02)
    blocks = num_communities * num_subcommunities
    # Contiguous blocks before shuffling: sub-community b holds [bounds[b], bounds[b+1]).
    bounds = np.linspace(0, num_nodes, blocks + 1).astype(np.int64)
    src = rng.integers(0, num_nodes, size=num_edges, dtype=np.int64)
    sub = np.searchsorted(bounds, src, side="right") - 1
    kind = rng.random(num_edges, dtype=np.float32)
    dst = rng.integers(0, num_nodes, size=num_edges, dtype=np.int64)
    inside_sub = kind < p_sub
    lo, hi = bounds[sub[inside_sub]], bounds[sub[inside_sub] + 1]
    dst[inside_sub] = lo + (rng.random(lo.shape[0]) * (hi - lo)).astype(np.int64)
    inside_comm = (kind >= p_sub) & (kind < p_sub + p_comm)
    comm = sub[inside_comm] // num_subcommunities
    lo, hi = bounds[comm * num_subcommunities], bounds[(comm + 1) * num_subcommunities]
    dst[inside_comm] = lo + (rng.random(lo.shape[0]) * (hi - lo)).astype(np.int64)
    del sub, kind, inside_sub, inside_comm, lo, hi, comm
    relabel = rng.permutation(num_nodes).astype(np.int32)
    return np.stack([relabel[src], relabel[dst]])


def shared_prefix_columns(rows: list[dict]) -> list[tuple[str, str, str]]:
    """:func:`format_table` columns of every ``shared_prefix_l`` found in ``rows``, first level first."""
    levels = sorted({key for row in rows for key in row if key.startswith("shared_prefix")})
    return [(key, f"shared first {key.rsplit('_', 1)[1]} digit(s)", "{:.4f}") for key in levels]


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(title for _, title, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt.format(row.get(key, float("nan"))) for key, _, fmt in columns) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def run_real(args: argparse.Namespace) -> list[dict]:
    from ttgnn.data import load_dataset

    started = time.perf_counter()
    dataset = load_dataset(args.dataset, root=args.root, cache_dir=args.cache_dir)
    log.info("loaded %s (%d nodes, %d stored edges) in %.1f s", args.dataset, dataset.num_nodes,
             dataset.num_edges, time.perf_counter() - started)
    if args.row_shape is None:
        from ttgnn.shapes import factor_rows

        args.row_shape = factor_rows(dataset.num_nodes, 3)
    row_shape = args.row_shape
    return run_methods(dataset.edge_index, dataset.num_nodes, row_shape, args)


def run_methods(edge_index: np.ndarray, num_nodes: int, row_shape: list[int],
                args: argparse.Namespace) -> list[dict]:
    started = time.perf_counter()
    csr = canonical_csr(edge_index, num_nodes)  # a streamed graph (canonical CSRGraph) passes through
    symmetrise_seconds = time.perf_counter() - started
    log.info("symmetrised: %d nodes, %d symmetric edge entries in %.1f s", csr.num_nodes, csr.num_entries,
             symmetrise_seconds)
    num_entries = csr.num_entries
    del csr  # keep the peak memory figure about the order itself
    rows = []
    for method in args.methods:
        started = time.perf_counter()
        # The timed call takes the raw edge index, as a user would: symmetrisation is included.
        order = hierarchical_order(edge_index, row_shape, method=method, seed=args.seed, num_nodes=num_nodes,
                                   progress=args.progress, num_threads=args.num_threads)
        total = time.perf_counter() - started
        rows.append({"method": method, "row_shape": list(row_shape), "num_nodes": num_nodes,
                     "num_entries": num_entries, "total_seconds": total,
                     "order_seconds": order.quality["seconds"],
                     **{k: v for k, v in order.quality.items() if k.startswith("shared_prefix")},
                     "peak_rss_gib": peak_rss_gib()})
        log.info("%s done in %.1f s (peak RSS %.2f GiB)", method, total, rows[-1]["peak_rss_gib"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset", default="ogbn-arxiv", help="dataset name or folder (ttgnn.data)")
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA)")
    parser.add_argument("--cache-dir", default=None, help="dataset cache (default: ~/.cache/ttgnn)")
    parser.add_argument("--row-shape", type=lambda s: [int(v) for v in s.split(",")], default=None,
                        help="e.g. 55,55,56 (default: 55,55,56 for ogbn-arxiv, 135,135,135 synthetic)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=None,
                        help="methods to run (default: all on a real graph; hierarchical-metis and "
                             "random on the synthetic graph)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic-products", action="store_true",
                        help="a planted-partition graph of ogbn-products' size instead of a dataset")
    parser.add_argument("--nodes", type=int_at_least(1), default=2_449_029, help="synthetic node count")
    parser.add_argument("--entries", type=int, default=62_000_000, help="synthetic symmetric edge entries")
    parser.add_argument("--synthetic-nested", type=int, default=None, metavar="N",
                        help="a streaming nested-community graph of N nodes (ttgnn.synthetic) instead of a dataset")
    parser.add_argument("--avg-degree", type=float, default=10.0, help="mean degree of --synthetic-nested")
    parser.add_argument("--num-threads", type=int, default=None, help="KaMinPar threads (default: 1, hierarchical_order's: repeatable orders)")
    parser.add_argument("--progress", action="store_true", help="tqdm progress bars")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ttgnn.allocator import configure_allocator

    configure_allocator()

    if args.synthetic_nested:
        from ttgnn.shapes import TTShape
        from ttgnn.synthetic import nested_communities

        args.methods = args.methods or ["hierarchical-kaminpar"]
        started = time.perf_counter()
        dataset = nested_communities(args.synthetic_nested, args.avg_degree, seed=args.seed, split_sizes=(1, 0, 0))
        log.info("generated in %.1f s (peak RSS %.2f GiB)", time.perf_counter() - started, peak_rss_gib())
        row_shape = args.row_shape or list(TTShape.build(args.synthetic_nested, 128, 16, None, None, None).row_shape)
        rows = run_methods(dataset.csr(), args.synthetic_nested, row_shape, args)
        title = f"synthetic nested communities, {args.synthetic_nested:,} nodes"
    elif args.synthetic_products:
        args.methods = args.methods or ["hierarchical-metis", "random"]
        row_shape = args.row_shape or [135, 135, 135]
        started = time.perf_counter()
        edge_index = nested_sbm_edges(args.nodes, args.entries, num_communities=row_shape[0],
                                      num_subcommunities=row_shape[1], p_sub=0.5, p_comm=0.3, seed=args.seed)
        log.info("generated %d edges in %.1f s (peak RSS %.2f GiB)", edge_index.shape[1],
                 time.perf_counter() - started, peak_rss_gib())
        rows = run_methods(edge_index, args.nodes, row_shape, args)
        title = f"synthetic nested SBM, {args.nodes:,} nodes"
    else:
        if args.dataset == "ogbn-arxiv" and args.row_shape is None:
            args.row_shape = [55, 55, 56]
        args.methods = args.methods or list(METHODS)
        rows = run_real(args)
        title = args.dataset

    columns = [("method", "method", "{}")] + shared_prefix_columns(rows) + [
               ("order_seconds", "order time (s)", "{:.2f}"),
               ("total_seconds", "with symmetrising (s)", "{:.2f}"),
               ("peak_rss_gib", "peak RSS so far (GiB)", "{:.2f}")]
    print(f"\n{title}: {rows[0]['num_nodes']:,} nodes, {rows[0]['num_entries']:,} symmetric edge entries, "
          f"row shape {rows[0]['row_shape']}\n")
    print(format_table(rows, columns))
    print(f"\n{cpu_model()}, {args.num_threads or 1} thread(s) for KaMinPar, "
          f"{time.strftime('%Y-%m-%d')}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
