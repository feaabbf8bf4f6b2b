"""Correct and Smooth on the best models of finished runs, for runs trained without it.

The sweeps (``compression_sweep.py``) train with ``--no-correct-smooth``; the command line's
default also reports the accuracy after Correct and Smooth. This loads each run's
``best_model.pt`` (:func:`ttgnn.inference.load_run` rebuilds the model from the settings stored
with it), checks that it gives the test accuracy the run recorded, then applies Correct and Smooth as ``ttgnn train`` does
(:func:`ttgnn.evaluation.correct_and_smooth_metrics`) and prints the accuracies per run and the
mean ± std per configuration (the runs' parent folder); runs that did not reach their last epoch
are named and left out::

    python benchmarks/smooth_finished_runs.py --root $TTGNN_DATA runs/sweep-gat-spread10/cora/*/seed*
"""
import argparse
import logging
import sys
from collections import defaultdict
from pathlib import Path

from ttgnn.cli import report_errors

# A run must give back the test accuracy it recorded (float32 evaluation of the same weights).
TOLERANCE = 1e-6


def smooth_run(folder: Path, root, datasets: dict) -> dict:
    """``{"valid", "test", "cs_valid", "cs_test"}`` of the run in ``folder``; ``datasets`` keeps the
    graphs loaded so far, by the runs' dataset setting."""
    import json

    from ttgnn.data import load_dataset
    from ttgnn.evaluation import Accuracy, all_logits, correct_and_smooth_metrics, logits_metrics
    from ttgnn.inference import check_exact_inference, load_run

    metrics = json.loads((folder / "metrics.json").read_text())
    name = metrics["settings"]["dataset"]
    if name not in datasets:
        datasets[name] = load_dataset(name, root=root, cache_dir=metrics["settings"].get("cache_dir"))
    run = load_run(folder, datasets[name])
    check_exact_inference(run)  # its recorded accuracies came from sampled neighbourhoods: never the same
    dataset, config = run.dataset, run.config
    logits = all_logits(run.model, run.graph, config.mode, config.eval_batch_size, dataset)  # once, for both
    accuracy = Accuracy(dataset.evaluator_name)
    result = logits_metrics(logits, dataset, accuracy)
    if abs(result["test"] - metrics["test_acc"]) > TOLERANCE:
        raise ValueError(f"{folder}: the best model gives test accuracy {result['test']:.4f}, the run recorded "
                         f"{metrics['test_acc']:.4f}")
    smoothed = correct_and_smooth_metrics(run.model, run.graph, dataset, config.mode, config.eval_batch_size, accuracy,
                                          logits=logits)
    return {"valid": result["valid"], "test": result["test"], "cs_valid": smoothed["valid_acc"],
            "cs_test": smoothed["test_acc"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (each with best_model.pt and metrics.json)")
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    args = parser.parse_args()

    import torch
    from summary import complete, mean_std  # (benchmarks/summary.py; not needed by smooth_run)

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    datasets, groups, unfinished = {}, defaultdict(list), []
    for folder in args.runs:
        if (folder / "metrics.json").exists() and not complete(folder / "metrics.json"):  # stopped early
            unfinished.append(str(folder))
            continue
        row = smooth_run(folder, args.root, datasets)
        groups[folder.parent].append(row)
        print(f"{folder}: valid {row['valid']:.4f} test {row['test']:.4f} | C&S valid {row['cs_valid']:.4f} "
              f"test {row['cs_test']:.4f}", flush=True)
    for group, rows in groups.items():
        print(f"{group} ({len(rows)} runs): " + "  ".join(
            f"{key} {mean_std([r[key] for r in rows])}" for key in ("valid", "test", "cs_valid", "cs_test")))
    if unfinished:
        print(f"not counted, not finished: {', '.join(unfinished)}")
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
