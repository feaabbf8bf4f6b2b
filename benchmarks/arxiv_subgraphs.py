"""TT against the full table, command line's defaults only, on real graphs of 10^4-10^5 nodes.

Issue 15 asks that on "any graph of 10^4-10^5 nodes" the defaults keep TT at >= 100x within 0.5
point of the full table, or above it. The shared data has one such graph (PubMed, 19,717 nodes, 60
training labels); this script makes more from ogbn-arxiv by cutting it at a year, split by time as
OGB splits arxiv: ``arxiv-to-Y`` holds the papers published up to year ``Y`` and the citations among
them, trains on papers up to ``Y - 2``, validates on ``Y - 1`` and tests on ``Y`` (2013: 31,971
nodes; 2015: 53,160; 2017: 90,941). The graphs are written once in OGB's raw layout to
``--data-dir`` (default: ``<cache>/arxiv-subgraphs``; never into the dataset root) and trained
there with ``ttgnn train --dataset arxiv-to-Y --seed S`` and the same with ``--embedding full``,
nothing else (flags after ``--`` go to both), one thread per run, ``--jobs`` at a time. A finished
run is reused when it recorded the settings the command gives today (the graph's defaults settled
as ``ttgnn train`` settles them), an interrupted one is resumed, and one made with other settings
(a default changed since, other flags after ``--``) is refused with a message and left out of the
table: delete its folder or use another ``--out``. A failed or refused run does not stop the others,
and the script then exits with 1. Printed per graph: mean ± std of the best validation accuracy and
the test accuracy at that epoch for both tables, and TT - full paired by seed (mean ± standard
error), also after Correct and Smooth.

    python benchmarks/arxiv_subgraphs.py --root $TTGNN_DATA --years 2013 2015 2017 --seeds 5 --jobs 2
    python benchmarks/arxiv_subgraphs.py --root $TTGNN_DATA --years 2013 2015 2017 --report   # while runs go on
    python benchmarks/arxiv_subgraphs.py --root $TTGNN_DATA --years 2013 --out runs/r4 -- --rank 4
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from compression_sweep import finished_run  # (benchmarks/compression_sweep.py)
from small_graphs_from_full import finished as finished_from_full, parse_command, stage_configs
from summary import mean_std, paired  # (benchmarks/summary.py)
from train_arxiv import complete  # (benchmarks/train_arxiv.py: what counts as a finished run)

from ttgnn.cli import int_at_least, report_errors

EMBEDDINGS = ("tt", "full")


def _write_column(path: Path, rows: np.ndarray) -> None:
    with gzip.open(path, "wt") as f:
        np.savetxt(f, rows, fmt="%d", delimiter=",")


def cut_by_year(edge_index: np.ndarray, labels: np.ndarray, years: np.ndarray, last_year: int):
    """The graph of the nodes with ``years <= last_year``, renumbered in id order, split by time.

    Args:
        edge_index (ndarray): ``(2, E)`` edges of the whole graph.
        labels (ndarray): ``(N,)`` class ids.
        years (ndarray): ``(N,)`` each node's year.
        last_year (int): the test year.

    Returns:
        ``(edges, labels, split)``: ``(E', 2)`` edges between kept nodes in the new ids, their
        ``(N',)`` labels, and ``{"train": ids of year <= last_year - 2, "valid": last_year - 1,
        "test": last_year}``.
    """
    keep = years <= last_year
    new_id = np.cumsum(keep) - 1
    src, dst = edge_index
    inside = keep[src] & keep[dst]
    edges = np.stack([new_id[src[inside]], new_id[dst[inside]]], axis=1)
    kept_years = years[keep]
    split = {"train": np.flatnonzero(kept_years <= last_year - 2),
             "valid": np.flatnonzero(kept_years == last_year - 1),
             "test": np.flatnonzero(kept_years == last_year)}
    return edges, labels[keep], split


def make_subgraph(root, last_year: int, data_dir: Path) -> Path:
    """Write ``arxiv-to-<last_year>`` (:func:`cut_by_year` of ogbn-arxiv) under ``data_dir`` once,
    in OGB's raw layout with the split under ``split/time``, and return its folder."""
    from ttgnn.data import load_dataset, resolve_root

    folder = data_dir / f"arxiv-to-{last_year}"
    if (folder / "PROVENANCE.txt").is_file():
        return folder
    arxiv = load_dataset("ogbn-arxiv", root)
    year_file = resolve_root(root) / "ogbn_arxiv" / "raw" / "node_year.csv.gz"
    if not year_file.is_file():
        raise SystemExit(f"{year_file} not found: the subgraphs are cut by the papers' years")
    years = np.loadtxt(year_file, dtype=np.int64, delimiter=",").reshape(-1)
    if years.shape[0] != arxiv.num_nodes:
        raise SystemExit(f"{year_file} has {years.shape[0]} years for {arxiv.num_nodes} nodes")
    edges, labels, split = cut_by_year(arxiv.edge_index, arxiv.labels.numpy(), years, last_year)
    if any(ids.size == 0 for ids in split.values()):
        raise SystemExit(f"arxiv-to-{last_year}: a split is empty ({ {k: v.size for k, v in split.items()} })")
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".arxiv-to-{last_year}-", dir=data_dir))
    (staging / "raw").mkdir()
    (staging / "split" / "time").mkdir(parents=True)
    _write_column(staging / "raw" / "edge.csv.gz", edges)
    _write_column(staging / "raw" / "node-label.csv.gz", labels)
    _write_column(staging / "raw" / "num-node-list.csv.gz", np.array([labels.shape[0]]))
    _write_column(staging / "raw" / "num-edge-list.csv.gz", np.array([edges.shape[0]]))
    for name, ids in split.items():
        _write_column(staging / "split" / "time" / f"{name}.csv.gz", ids)
    counts = ", ".join(f"{name} {ids.size:,}" for name, ids in split.items())
    (staging / "PROVENANCE.txt").write_text(
        f"ogbn-arxiv cut at {last_year} by benchmarks/arxiv_subgraphs.py: {labels.shape[0]:,} papers of "
        f"year <= {last_year}, {edges.shape[0]:,} citations among them; split by year: {counts} "
        f"(train <= {last_year - 2}, valid {last_year - 1}, test {last_year})\n")
    os.replace(staging, folder)
    return folder


def run_folder(out: Path, last_year: int, embedding: str, seed: int) -> Path:
    return out / f"arxiv-to-{last_year}" / embedding / f"seed{seed}"


def run_command(data_dir: Path, last_year: int, embedding: str, seed: int, folder: Path, train_args=()) -> list:
    command = [sys.executable, "-m", "ttgnn", "train", "--dataset", f"arxiv-to-{last_year}", "--root",
               str(data_dir), "--seed", str(seed), "--no-progress", "--num-threads", "1",
               "--output-dir", str(folder), *train_args]
    if embedding != "tt":
        command += ["--embedding", embedding]
    return command


def finished(folder: Path) -> bool:
    """Whether the run in ``folder`` reached its last epoch (both stages of a ``--from-full`` run)."""
    return complete(folder / "metrics.json")


def recorded_as_given(folder: Path, command: list, data) -> bool:
    """Whether the finished run in ``folder`` (:func:`finished`) recorded the settings ``command``
    (a :func:`run_command`) gives on ``data`` today, settled by the graph as ``ttgnn train``
    settles them (with ``--from-full``, both stages')."""
    from ttgnn.train import settle_by_graph, settle_from_full

    config = settle_from_full(parse_command(command), data)
    if config.from_full:
        return bool(finished_from_full(folder, stage_configs(command, data)))
    return finished_run(folder, settle_by_graph(config, data)) is not None


def train_one(args, last_year: int, embedding: str, seed: int, data) -> str:
    folder = run_folder(Path(args.out), last_year, embedding, seed)
    command = run_command(Path(args.data_dir), last_year, embedding, seed, folder, args.train_args)
    if finished(folder):
        if recorded_as_given(folder, command, data):
            return f"{folder}: finished before, reused"
        return f"{folder}: REFUSED, made with other settings than this command gives (delete it or use another --out)"
    if (folder / "checkpoint.pt").is_file():
        command.append("--resume")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.log", "a") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    return f"{folder}: {'done' if code == 0 else f'FAILED (exit {code}, see train.log)'}"


def report(args, graphs: dict) -> None:
    """Print each graph's table from the runs in ``args.out`` that finished with the settings the
    command gives today (:func:`recorded_as_given`; ``graphs``: year -> its dataset)."""
    for last_year in args.years:
        runs, other = {}, []
        for embedding in EMBEDDINGS:
            for seed in range(args.first_seed, args.seeds):
                folder = run_folder(Path(args.out), last_year, embedding, seed)
                command = run_command(Path(args.data_dir), last_year, embedding, seed, folder, args.train_args)
                if not finished(folder):
                    continue
                if recorded_as_given(folder, command, graphs[last_year]):
                    runs[embedding, seed] = json.loads((folder / "metrics.json").read_text())
                else:
                    other.append(f"{embedding}/seed{seed}")
        seeds = [s for s in range(args.first_seed, args.seeds) if all((e, s) in runs for e in EMBEDDINGS)]
        print(f"\narxiv-to-{last_year}: {len(seeds)} seed(s) with both tables finished with this command's "
              f"settings {seeds}")
        if other:
            print(f"  left out, finished with other settings: {', '.join(other)}")
        if not seeds:
            continue
        tt0 = runs["tt", seeds[0]]
        print(f"  TT table: rank {tt0['rank']}, {tt0['compression_ratio']:,.0f}x, {tt0['embedding_parameters']:,} "
              f"parameters; model {tt0['model']}, label input {tt0['label_input']}")
        print("  | input | valid acc | test acc | C&S test | best epochs |")
        print("  |---|---:|---:|---:|---|")
        for embedding in EMBEDDINGS:
            ms = [runs[embedding, s] for s in seeds]
            cs = [m["correct_smooth"]["test_acc"] for m in ms if m.get("correct_smooth")]
            print(f"  | {embedding} | {mean_std(m['best_valid_acc'] for m in ms)} | "
                  f"{mean_std(m['test_acc'] for m in ms)} | {mean_std(cs) if len(cs) == len(ms) else '-'} | "
                  f"{'/'.join(str(m['best_epoch']) for m in ms)} |")
        tt, full = [runs["tt", s] for s in seeds], [runs["full", s] for s in seeds]
        print(f"  TT - full, test: {paired([m['test_acc'] for m in tt], [m['test_acc'] for m in full])}; "
              f"valid: {paired([m['best_valid_acc'] for m in tt], [m['best_valid_acc'] for m in full])}")
        if all(m.get("correct_smooth") for m in tt + full):
            print(f"  with Correct and Smooth, test: "
                  f"{paired([m['correct_smooth']['test_acc'] for m in tt], [m['correct_smooth']['test_acc'] for m in full])}")


def main(argv=None) -> int:
    from ttgnn.data import default_cache_dir, load_dataset

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--root", default=None, help="datasets root holding ogbn-arxiv (default: $TTGNN_DATA)")
    parser.add_argument("--data-dir", default=None, help="where the subgraphs are written "
                        "(default: <ttgnn cache>/arxiv-subgraphs)")
    parser.add_argument("--out", default="runs/arxiv-subgraphs", help="one folder per (graph, table, seed)")
    parser.add_argument("--years", type=int, nargs="+", default=[2013, 2015, 2017],
                        help="last year of each subgraph (its test year)")
    parser.add_argument("--seeds", type=int_at_least(1), default=5, help="seeds first-seed..K-1")
    parser.add_argument("--first-seed", type=int_at_least(0), default=0)
    parser.add_argument("--jobs", type=int_at_least(1), default=1, help="runs at a time (one thread each)")
    parser.add_argument("--report", action="store_true", help="print the finished runs' table; train nothing")
    parser.add_argument("train_args", nargs="*", help="after --: more flags of `ttgnn train`, for both tables")
    args = parser.parse_args(argv)
    args.data_dir = str(Path(args.data_dir) if args.data_dir else default_cache_dir() / "arxiv-subgraphs")
    graphs = {}  # loaded once here, for the settings each run must have recorded
    for last_year in args.years:
        graph_folder = make_subgraph(args.root, last_year, Path(args.data_dir))
        print((graph_folder / "PROVENANCE.txt").read_text().strip(), flush=True)
        # The runs' own command settles the cache folder (a --cache-dir after -- included).
        seed = args.first_seed
        first_run = run_command(Path(args.data_dir), last_year, "tt", seed,
                                run_folder(Path(args.out), last_year, "tt", seed), args.train_args)
        graphs[last_year] = load_dataset(f"arxiv-to-{last_year}", args.data_dir, parse_command(first_run).cache_dir)
    failed = []
    if not args.report:
        jobs = [(y, e, s) for s in range(args.first_seed, args.seeds) for y in args.years for e in EMBEDDINGS]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for line in pool.map(lambda job: train_one(args, *job, graphs[job[0]]), jobs):
                print(line, flush=True)
                if "FAILED" in line or "REFUSED" in line:
                    failed.append(line)
    report(args, graphs)
    if failed:
        print(f"\n{len(failed)} run(s) failed or refused (the same command resumes a failed one):\n" + "\n".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
