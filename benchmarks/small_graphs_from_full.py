"""TT against the full table on small graphs with the command line's defaults, paired by seed.

On a graph of few labels ``ttgnn train`` trains the full table first and compresses and distils it
into the TT table (``--from-full``, its default there): each run holds the full table's run
(``full-table/metrics.json``, exactly ``ttgnn train --embedding full``) beside the TT run, so one run
per (dataset, seed) gives both, on the same machine. Runs go to ``<out>/<dataset>/seed<k>``; a
finished one is reused when both stages recorded the settings the command gives today (the graph's
defaults settled as ``ttgnn train`` settles them), an interrupted one is resumed, and one made with
other settings (a default changed since, other flags after ``--``) is refused with a message: to
train it again, delete the stage that differs (for the TT stage ``metrics.json``, ``checkpoint.pt``
and ``best_model.pt``; the TT stage is then trained again from the kept ``full-table/`` run), or
use another ``--out``. ``--jobs`` run at a time (one thread each). Printed per dataset: mean ±
std of the best validation accuracy and of the test accuracy at that epoch, for TT, the full table
and TT's compressed start (epoch 0), the paired TT - full difference (mean ± standard error) and,
with Correct and Smooth on (the default), the same after it.

    python benchmarks/small_graphs_from_full.py --root $TTGNN_DATA --datasets cora citeseer pubmed --seeds 10
    python benchmarks/small_graphs_from_full.py --root $TTGNN_DATA --datasets cora --seeds 3 -- --rank 6
    python benchmarks/small_graphs_from_full.py --datasets cora citeseer pubmed --report   # while runs go on
    python benchmarks/small_graphs_from_full.py --out runs/small-born-again -- --embedding full --from-full
"""
import argparse
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from summary import mean_std, paired  # (benchmarks/summary.py)

from ttgnn.cli import int_at_least, report_errors


_say_lock = threading.Lock()


def say(line: str) -> None:
    """Print ``line`` whole: the runs' threads print their commands and failures at any moment."""
    with _say_lock:
        print(line, flush=True)


def run_command(args, dataset: str, seed: int, folder: Path) -> list:
    command = [sys.executable, "-m", "ttgnn", "train", "--dataset", dataset, "--seed", str(seed), "--no-progress",
               "--num-threads", "1", "--output-dir", str(folder), *args.train_args]
    if args.root:
        command += ["--root", args.root]
    return command


def parse_command(command: list):
    """The :class:`ttgnn.config.TrainConfig` of ``command`` (a :func:`run_command`), as the CLI makes it."""
    from ttgnn.cli import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(command[command.index("train"):]))


def stage_configs(command: list, data) -> tuple:
    """The settings ``command`` (a :func:`run_command`) gives its two stages on ``data``, as the runs
    record them: ``(TT stage, full-table stage)``, each a settled :class:`ttgnn.config.TrainConfig`.

    Raises:
        SystemExit: the command does not train from a full table on this graph.
    """
    from ttgnn.train import finetune_config, full_table_config, settle_by_graph, settle_from_full

    config = settle_from_full(parse_command(command), data)
    if not config.from_full:
        raise SystemExit(f"{' '.join(command)}: does not train from a full table (add -- --from-full)")
    return settle_by_graph(finetune_config(config), data), settle_by_graph(full_table_config(config), data)


# The fine-tuning settings: not compared for the full table's stage, which they do not change
# (``ttgnn train --resume`` does not check them either).
FINETUNE_ONLY = ("finetune_epochs", "finetune_lr", "finetune_distill")


def finished(folder: Path, configs: tuple) -> dict:
    """The TT run's and the full-table run's metrics, when both are complete with the settings of
    ``configs`` (:func:`stage_configs`), else ``{}``."""
    from compression_sweep import finished_run  # (benchmarks/compression_sweep.py)

    tt, full = finished_run(folder, configs[0]), finished_run(folder / "full-table", configs[1], FINETUNE_ONLY)
    if tt is None or full is None or "from_full" not in tt:
        return {}
    return {"tt": tt, "full": full}


def made_otherwise(folder: Path, configs: tuple) -> list:
    """The stages in ``folder`` that reached their last epoch with other settings than ``configs``'
    (an interrupted stage is resumed instead, and ``ttgnn train --resume`` checks its settings)."""
    from compression_sweep import finished_run

    stages = []
    for path, config, skip in ((folder, configs[0], ()), (folder / "full-table", configs[1], FINETUNE_ONLY)):
        try:
            epochs = len(json.loads((path / "metrics.json").read_text())["epochs"])
        except (OSError, ValueError, KeyError):
            continue
        if epochs >= config.epochs and finished_run(path, config, skip) is None:
            stages.append(str(path))
    return stages


def one_run(args, dataset: str, seed: int, data) -> dict:
    folder = Path(args.out) / dataset / f"seed{seed}"
    configs = stage_configs(run_command(args, dataset, seed, folder), data)
    done = finished(folder, configs)
    other = [] if done else made_otherwise(folder, configs)
    if other:
        say(f"{dataset} seed {seed}: refused, made with other settings than this command gives: "
            f"{', '.join(other)} (delete that stage's files or use another --out)")
        return {}
    if not done and not args.report:
        command = run_command(args, dataset, seed, folder)
        say(" ".join(command))
        log = folder.parent / f"seed{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            # an interrupted run continues; so does a finished full-table run whose TT stage was removed
            code = subprocess.call(command + (["--resume"] if folder.exists() else []), stdout=out,
                                   stderr=subprocess.STDOUT)
        done = finished(folder, configs)
        if code or not done:
            say(f"{dataset} seed {seed}: failed (exit {code}), see {log}")
            return {}
    return done


def report(dataset: str, runs: list, missing: list = ()) -> None:
    """The table of ``runs`` (finished seeds) of ``dataset``; ``missing``: the seeds asked for without one."""
    tt = [r["tt"] for r in runs]
    full = [r["full"] for r in runs]
    start = [t["from_full"] for t in tt]
    is_tt = tt[0]["embedding"] == "tt"
    who = "TT" if is_tt else "the distilled table"
    seeds = ", ".join(str(t["settings"]["seed"]) for t in tt)
    absent = f"; not finished or refused: seeds {', '.join(map(str, missing))}" if missing else ""
    print(f"\n{dataset}: {len(runs)} seeds ({seeds}{absent}), {who} {tt[0]['compression_ratio']:.0f}x "
          f"({tt[0]['embedding_parameters']:,} parameters), its best epochs {[t['best_epoch'] for t in tt]}")
    print("| input | valid | test | C&S test |\n|---|---:|---:|---:|")
    student = "TT from the full table" if is_tt else "full table distilled from itself"
    for name, rows in ((student, tt), ("full table", full)):
        smooth = [r["correct_smooth"]["test_acc"] for r in rows if "correct_smooth" in r]
        print(f"| {name} | {mean_std([r['best_valid_acc'] for r in rows])} | {mean_std([r['test_acc'] for r in rows])} "
              f"| {mean_std(smooth) if len(smooth) == len(rows) else '-'} |")
    print(f"| its start (epoch 0) | {mean_std([s['start_valid_acc'] for s in start])} "
          f"| {mean_std([s['start_test_acc'] for s in start])} | |")
    test = paired([t["test_acc"] for t in tt], [f["test_acc"] for f in full])
    valid = paired([t["best_valid_acc"] for t in tt], [f["best_valid_acc"] for f in full])
    print(f"{'TT' if is_tt else 'distilled'} - full, paired by seed (points, mean ± s.e.): test {test}, valid {valid}")
    if all("correct_smooth" in r for r in tt + full):
        smooth = paired([t["correct_smooth"]["test_acc"] for t in tt], [f["correct_smooth"]["test_acc"] for f in full])
        print(f"  with Correct and Smooth: test {smooth}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--out", default="runs/small-from-full", help="one folder per (dataset, seed)")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer", "pubmed"])
    parser.add_argument("--seeds", type=int_at_least(1), default=10, help="seeds 0..K-1")
    parser.add_argument("--first-seed", type=int_at_least(0), default=0)
    parser.add_argument("--jobs", type=int_at_least(1), default=1, help="runs at a time (one thread each)")
    parser.add_argument("--report", action="store_true", help="print the finished runs' table; train nothing")
    parser.add_argument("train_args", nargs="*", help="after --: more flags of `ttgnn train`")
    args = parser.parse_args()
    from ttgnn.data import load_dataset

    graphs = {}
    for name in args.datasets:  # loaded once here, for the settings each run must have recorded
        where = parse_command(run_command(args, name, 0, Path(args.out)))
        graphs[name] = load_dataset(name, where.root, where.cache_dir)
    jobs = [(d, s) for d in args.datasets for s in range(args.first_seed, args.seeds)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda job: one_run(args, *job, graphs[job[0]]), jobs))
    for dataset in args.datasets:
        runs = [r for (d, _), r in zip(jobs, results) if d == dataset and r]
        missing = [seed for (d, seed), r in zip(jobs, results) if d == dataset and not r]
        if runs:
            report(dataset, runs, missing)
        elif args.report:
            print(f"\n{dataset}: no finished run under {Path(args.out) / dataset}")
    return 0 if args.report or all(results) else 1


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
