"""The KaMinPar order with and without coarsening the top level: time, peak memory, quality.

A ``nested_communities`` graph (:mod:`ttgnn.synthetic`) is generated once and saved; then each
variant runs in a process of its own (so each peak memory figure is its own), loads the CSR and
computes ``hierarchical_order(..., method="hierarchical-kaminpar", num_threads=1)``:

* ``plain``: every KaMinPar call gets its whole subgraph (the default threshold is far above the
  graph);
* ``coarsened``: ``coarsen_entries`` set to the graph's stored entries, so the top level (and only
  it: every deeper subgraph is smaller) is coarsened before KaMinPar sees it
  (:mod:`ttgnn.partition.coarsen`).

The peak memory of the order phase is the process's high-water mark (``VmHWM``) after the CSR is
loaded, reset first through ``/proc/self/clear_refs`` where the kernel allows it (else the
process's ``ru_maxrss``). Usage::

    python benchmarks/bench_coarsen.py --nodes 2000000 --avg-degree 4 --json coarsen.json
"""
from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_partition import format_table, peak_rss_gib, shared_prefix_columns  # noqa: E402  (benchmarks/bench_partition.py)
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

from ttgnn.cli import int_at_least, report_errors

log = logging.getLogger("bench_coarsen")

VARIANTS = ("plain", "coarsened")


def _status_gib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in GiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**20
    raise KeyError(field)


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0); whether it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


class _Messages(logging.Handler):
    """Keeps the messages of the coarsened splits (their stage times) for the JSON file."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "coarsened KaMinPar split" in record.getMessage():
            self.lines.append(record.getMessage())


def run_variant(folder: Path, variant: str, row_shape: list[int], seed: int) -> dict:
    """One order in this process: load the CSR, order, measure."""
    from ttgnn.partition import CSRGraph, hierarchical_order

    indptr = np.load(folder / "indptr.npy")
    indices = np.load(folder / "indices.npy")
    csr = CSRGraph(indptr, indices, canonical=True)  # saved from canonical_csr
    messages = _Messages()
    logging.getLogger("ttgnn.partition.kaminpar").addHandler(messages)
    loaded_gib = _status_gib("VmRSS")
    exact = _reset_peak()
    started = time.perf_counter()
    order = hierarchical_order(csr, row_shape, method="hierarchical-kaminpar", seed=seed, num_threads=1,
                               coarsen_entries=csr.num_entries if variant == "coarsened" else None)
    seconds = time.perf_counter() - started
    peak = _status_gib("VmHWM") if exact else peak_rss_gib()
    return {"variant": variant, "num_nodes": csr.num_nodes, "num_entries": csr.num_entries,
            "row_shape": list(row_shape), "seconds": seconds, "order_seconds": order.quality["seconds"],
            "csr_loaded_gib": loaded_gib, "peak_order_gib": peak, "peak_is_order_phase": exact,
            "peak_process_gib": peak_rss_gib(), "coarsened_splits": messages.lines,
            **{k: v for k, v in order.quality.items() if k.startswith("shared_prefix")}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--nodes", type=int_at_least(1), default=2_000_000, help="nodes of the synthetic graph")
    parser.add_argument("--avg-degree", type=float, default=4.0, help="mean degree drawn (nested_communities)")
    parser.add_argument("--num-cores", type=int, default=3, help="TT cores: row shape factor_rows(nodes, cores)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--seed", type=int, default=0, help="graph and order seed")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # folder of a saved CSR
    parser.add_argument("--worker-variant", choices=VARIANTS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from ttgnn.partition import reorder

    if args.nodes < reorder._KAMINPAR_MIN_NODES:  # the order gives smaller (sub)graphs to METIS
        parser.error(f"--nodes {args.nodes:,}: graphs under {reorder._KAMINPAR_MIN_NODES:,} nodes are split by "
                     "METIS, not KaMinPar, so neither variant coarsens and both would be the same run")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ttgnn.shapes import factor_rows

    row_shape = factor_rows(args.nodes, args.num_cores)
    if args.worker:
        row = run_variant(Path(args.worker), args.worker_variant, row_shape, args.seed)
        print("RESULT " + json.dumps(row))
        return 0

    from ttgnn.synthetic import nested_communities

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-coarsen-") as folder:
        started = time.perf_counter()
        csr = nested_communities(args.nodes, args.avg_degree, seed=args.seed, split_sizes=(1, 0, 0)).csr()
        log.info("generated %d nodes, %d stored entries in %.1f s", csr.num_nodes, csr.num_entries,
                 time.perf_counter() - started)
        np.save(Path(folder) / "indptr.npy", csr.indptr)
        np.save(Path(folder) / "indices.npy", csr.indices)
        del csr
        for variant in args.variants:
            command = [sys.executable, __file__, "--nodes", str(args.nodes), "--num-cores", str(args.num_cores),
                       "--seed", str(args.seed), "--worker", folder, "--worker-variant", variant]
            proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
            (line,) = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            rows.append(json.loads(line[len("RESULT "):]))
            log.info("%s: %.1f s, order-phase peak %.2f GiB", variant, rows[-1]["seconds"],
                     rows[-1]["peak_order_gib"])

    columns = [("variant", "top level", "{}")] + shared_prefix_columns(rows) + [
        ("seconds", "order time (s)", "{:.1f}"), ("csr_loaded_gib", "RSS with the CSR (GiB)", "{:.2f}"),
        ("peak_order_gib", "peak RSS of the order (GiB)", "{:.2f}")]
    first = rows[0]
    print(f"\nnested_communities, {first['num_nodes']:,} nodes, {first['num_entries']:,} stored entries, "
          f"mean degree {args.avg_degree:g} drawn, row shape {first['row_shape']}\n")
    print(format_table(rows, columns))
    print(f"\n{cpu_model()}, 1 thread for KaMinPar, one process per variant, {time.strftime('%Y-%m-%d')}")
    for row in rows:
        for message in row["coarsened_splits"]:
            print(f"- {row['variant']}: {message}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
