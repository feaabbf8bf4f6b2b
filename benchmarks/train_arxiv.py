"""ogbn-arxiv accuracy table: featureless GraphSAGE / GAT with TT vs full embeddings, and a node-order ablation.

Every configuration is one ``ttgnn train`` command (printed, so it can be re-run by hand); each
writes ``<out>/<name>/metrics.json``. Finished runs are reused unless ``--rerun``; the table is
printed as Markdown from the metrics files.

    TTGNN_DATA=/path/to/datasets python benchmarks/train_arxiv.py                 # everything
    python benchmarks/train_arxiv.py --only sage-tt sage-full                      # some rows
    python benchmarks/train_arxiv.py --table-only                                  # print the table

Runs go one after another (never in parallel): the epoch times in one table are comparable.
"""
import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

# Settings shared by every run (the CLI defaults are the same; written out for the record).
COMMON = ["--dataset", "ogbn-arxiv", "--mode", "full", "--num-threads", "2", "--no-progress"]
TT = ["--embedding", "tt", "--rank", "8", "--row-shape", "55,55,56", "--col-shape", "8,4,4"]

CONFIGS = {
    # name: (extra args, group)
    "sage-tt": (["--model", "sage", *TT, "--order", "hierarchical-metis"], "main"),
    "sage-full": (["--model", "sage", "--embedding", "full"], "main"),
    "gat-tt": (["--model", "gat", *TT, "--order", "hierarchical-metis"], "main"),
    "gat-full": (["--model", "gat", "--embedding", "full"], "main"),
}
for _order in ("identity", "random", "rcm", "metis-flat"):
    CONFIGS[f"sage-tt-{_order}"] = (["--model", "sage", *TT, "--order", _order], "ablation")


def command(name: str, out: Path, epochs: int) -> list:
    args, _ = CONFIGS[name]
    return ["ttgnn", "train", *COMMON, *args, "--epochs", str(epochs), "--output-dir", str(out / name)]


def row(name: str, m: dict) -> str:
    order = m.get("order") or "-"
    rank = m.get("rank") or "-"
    return (f"| {m['model']} | {m['embedding']} | {order} | {rank} | {m['compression_ratio']:,.0f}x | "
            f"{m['best_valid_acc']:.4f} | {m['test_acc']:.4f} | {m['best_epoch']}/{len(m['epochs'])} | "
            f"{m['epoch_time']:.2f} s | {m['peak_memory_mib'] / 1024:.2f} GiB |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/arxiv-bench", help="one sub-folder per configuration")
    parser.add_argument("--epochs", type=int, default=None, help="override the CLI default epochs")
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), default=None)
    parser.add_argument("--rerun", action="store_true", help="re-run configurations that have metrics")
    parser.add_argument("--table-only", action="store_true", help="only print the table of finished runs")
    args = parser.parse_args()
    out = Path(args.out)
    names = args.only or list(CONFIGS)
    if args.epochs is None:
        from ttgnn.train import TrainConfig

        args.epochs = TrainConfig().epochs
    for name in names:
        metrics = out / name / "metrics.json"
        if args.table_only or (metrics.exists() and not args.rerun):
            continue
        cmd = command(name, out, args.epochs)
        print("$ " + shlex.join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    header = ("| model | embedding | order | rank | compression | valid acc | test acc | best epoch | "
              "epoch time | peak memory |\n|---|---|---|---|---|---|---|---|---|---|")
    for group in ("main", "ablation"):
        lines = []
        for name in names:
            path = out / name / "metrics.json"
            if CONFIGS[name][1] == group and path.exists():
                lines.append(row(name, json.loads(path.read_text())))
        if lines:
            print(f"\n{group}:\n{header}\n" + "\n".join(lines))
    print("\ncommands:")
    for name in names:
        print(f"{name}: " + shlex.join(command(name, out, args.epochs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
