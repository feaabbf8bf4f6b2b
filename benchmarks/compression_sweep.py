"""Test accuracy against compression: TT at several ranks and the full table, over seeds.

One ``ttgnn train`` run per (dataset, model, embedding/rank, seed), each writing
``<out>/<dataset>/<model>-<tt-r<rank>|full>/seed<k>/metrics.json``; finished runs are reused.
``benchmarks/plot_results.py`` draws the result.

    python benchmarks/compression_sweep.py --root $TTGNN_DATA                 # cora and citeseer, SAGE
    python benchmarks/compression_sweep.py --datasets cora --models sage gat --ranks 4 16 --seeds 5
"""
import argparse
import shlex
import subprocess
import sys
from pathlib import Path

# Small-graph settings (two layers, no normalisation, dropout and weight decay as in the
# Planetoid literature, a small initial table); every run uses them, only the input differs.
SETTINGS = ["--mode", "full", "--hidden", "64", "--num-layers", "2", "--norm", "none", "--dropout", "0.5",
            "--weight-decay", "5e-4", "--heads", "2", "--init-scale", "0.02", "--lr", "0.01", "--emb-lr", "0.01",
            "--order", "hierarchical-metis", "--no-progress", "--no-correct-smooth"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--out", default="runs/sweep", help="one folder per run")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--models", nargs="+", choices=["sage", "gat"], default=["sage"])
    parser.add_argument("--ranks", nargs="+", type=int, default=[2, 4, 8, 16, 32], help="TT ranks (plus the full table)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..K-1")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--num-threads", type=int, default=1)
    args = parser.parse_args()
    out = Path(args.out)
    inputs = [("tt", rank) for rank in args.ranks] + [("full", None)]
    for dataset in args.datasets:
        for model in args.models:
            for embedding, rank in inputs:
                name = f"{model}-tt-r{rank}" if embedding == "tt" else f"{model}-full"
                for seed in range(args.seeds):
                    folder = out / dataset / name / f"seed{seed}"
                    if (folder / "metrics.json").exists():
                        continue
                    cmd = [sys.executable, "-m", "ttgnn", "train", "--dataset", dataset, "--model", model,
                           "--embedding", embedding, *SETTINGS, "--epochs", str(args.epochs), "--seed", str(seed),
                           "--num-threads", str(args.num_threads), "--output-dir", str(folder), "--overwrite"]
                    if rank is not None:
                        cmd += ["--rank", str(rank)]
                    if args.root:
                        cmd += ["--root", args.root]
                    print("$ " + shlex.join(cmd[1:]), flush=True)
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
