"""Plots of finished runs: test accuracy against compression, and TT against full epoch time.

Reads every ``metrics.json`` under the given folders (as written by ``ttgnn train``,
``benchmarks/compression_sweep.py`` and ``benchmarks/train_arxiv.py``), groups the runs by
dataset, model and label input, and averages over seeds (error bars: one standard deviation).
Only runs that reached their last epoch count; a point (table, rank, dropout, init) must hold one
configuration's runs, each seed once, else the script stops naming the settings that differ: give
it the folders of one sweep (a ``compression_sweep.py --out``), not a ``train_arxiv.py --out`` that
holds several configurations of one table and rank. Needs matplotlib (``pip install matplotlib``,
the ``bench`` extra).

    python benchmarks/plot_results.py runs/sweep --out docs [--suffix _defaults]
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from ttgnn.cli import report_errors


def load_runs(folders) -> list:
    """Summaries of all finished runs under ``folders`` (:func:`summary.complete`: a run that stopped
    before its last epoch is left out, and so is the full-table stage of a ``--from-full`` run)."""
    from summary import complete
    from ttgnn.train import FULL_TABLE_DIR

    runs = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("metrics.json")):
            if path.parent.name != FULL_TABLE_DIR and complete(path):
                runs.append(json.loads(path.read_text()))
    return runs


def _panel_key(m: dict) -> tuple:
    return m["dataset"], m["model"], bool(m.get("label_input"))


def _series(m: dict) -> str:
    """The initialisation a run started from: runs with different ones are drawn as separate series."""
    settings = m["settings"]
    if settings.get("init") != "spectral":
        return "default init"
    vectors = settings.get("spectral_vectors")
    return f"spectral init ({vectors or settings.get('dim')} vectors)"


def _point_key(m: dict) -> tuple:
    return (m["embedding"], m.get("rank"), m["settings"].get("dropout"), _series(m))


#: Settings the seeds of one point may differ in (and TrainConfig.PLACE_KEYS).
PER_RUN_SETTINGS = ("seed",)


def _check_one_configuration(panel, point, members: list) -> None:
    """Raise ``ValueError`` unless ``members``, averaged into one point, are one configuration's runs,
    each seed once (runs of other settings under the folders were averaged in, seeds counted twice)."""
    seeds = [m["settings"].get("seed") for m in members]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"{_title(panel)}, {point}: seed(s) {twice} found more than once among the folders")
    from ttgnn.checkpoint import differing_settings
    from ttgnn.config import TrainConfig

    first = members[0]["settings"]
    for m in members[1:]:
        keys = sorted((first.keys() | m["settings"].keys()) - set(PER_RUN_SETTINGS + TrainConfig.PLACE_KEYS))
        differ = differing_settings(first, m["settings"], keys, missing_differs=True)
        if differ:
            named = ", ".join(f"{key}: {first.get(key)!r} and {m['settings'].get(key)!r}" for key in differ[:3])
            raise ValueError(f"{_title(panel)}, {point}: runs of other settings would be averaged into one point "
                             f"({named}); give the folders of one configuration")


def aggregate(runs) -> dict:
    """``{panel: {point: {"compression", "acc_mean", "acc_std", "time_mean", "seeds"}}}``; ``ValueError``
    where a point would average runs of other settings or a seed twice."""
    groups = defaultdict(lambda: defaultdict(list))
    for m in runs:
        groups[_panel_key(m)][_point_key(m)].append(m)
    table = {}
    for panel, points in groups.items():
        table[panel] = {}
        for point, members in points.items():
            _check_one_configuration(panel, point, members)
            accs = [m["test_acc"] for m in members]
            table[panel][point] = {
                "compression": members[0]["compression_ratio"],
                "acc_mean": statistics.mean(accs),
                "acc_std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
                "time_mean": statistics.mean(m["epoch_time"] for m in members),
                "seeds": len(members),
            }
    return table


def _title(panel) -> str:
    dataset, model, labels = panel
    return f"{dataset}, {'GraphSAGE' if model == 'sage' else 'GAT'}" + (" + label input" if labels else "")


def plot_accuracy(table: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # a benchmark extra: one line, as report_errors gives a user's error
        raise ValueError("matplotlib is not installed: pip install matplotlib (or the bench extra: "
                         "pip install -e '.[bench]')") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted(table)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        points = table[panel]
        for color, series in zip(("tab:blue", "tab:orange", "tab:green", "tab:red"),
                                 sorted({k[3] for k in points})):
            tt = sorted(((k, v) for k, v in points.items() if k[0] == "tt" and k[3] == series),
                        key=lambda kv: kv[1]["compression"])
            if tt:
                ax.errorbar([v["compression"] for _, v in tt], [v["acc_mean"] for _, v in tt],
                            yerr=[v["acc_std"] for _, v in tt], marker="o", capsize=3, color=color,
                            label=f"TT, {series} (rank shown)")
                for (_, rank, _, _), v in tt:
                    ax.annotate(f"r{rank}", (v["compression"], v["acc_mean"]), textcoords="offset points",
                                xytext=(4, -10), fontsize=7)
            for key, v in points.items():
                if key[0] == "full" and key[3] == series:
                    ax.errorbar([1.0], [v["acc_mean"]], yerr=[v["acc_std"]], marker="s", color=color, capsize=3,
                                linestyle="none", label=f"full table, {series}")
                    ax.axhline(v["acc_mean"], color=color, linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_xlabel("compression (dense parameters / input parameters)")
        ax.set_ylabel("test accuracy (best validation epoch)")
        seeds = sorted({v["seeds"] for v in points.values()})
        ax.set_title(f"{_title(panel)}\n(mean ± std over {'/'.join(map(str, seeds))} seeds)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.045 * (1 + (len(labels) + 1) // 2), 1, 1))  # room for the legend below
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_epoch_time(table: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, tt_times, full_times = [], [], []
    for panel in sorted(table):
        points = table[panel]
        full = [v for k, v in points.items() if k[0] == "full"]
        tt = [v for k, v in points.items() if k[0] == "tt"]
        if not full or not tt:
            continue
        best_tt = max(tt, key=lambda v: v["compression"])  # the most compressed TT table of the panel
        labels.append(f"{_title(panel)}\nTT {best_tt['compression']:,.0f}x")
        tt_times.append(best_tt["time_mean"])
        full_times.append(statistics.mean(v["time_mean"] for v in full))
    if not labels:
        return
    fig, ax = plt.subplots(figsize=(max(4.0, 2.2 * len(labels)), 3.4))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], tt_times, width=0.4, label="TT")
    ax.bar([x + 0.2 for x in xs], full_times, width=0.4, label="full table", color="gray")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("training epoch (s, median per run)")
    ax.set_title("training epoch, TT vs full table\n(the runs of the accuracy plot; not interleaved)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="folders searched for metrics.json")
    parser.add_argument("--out", default="docs", help="where the PNG files go")
    parser.add_argument("--suffix", default="", help="added to the file names: --suffix _defaults writes "
                        "accuracy_vs_compression_defaults.png and epoch_time_defaults.png")
    args = parser.parse_args()
    runs = load_runs(args.folders)
    if not runs:
        print(f"no finished runs (metrics.json) under {args.folders}", file=sys.stderr)
        return 2
    table = aggregate(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    accuracy_png, time_png = out / f"accuracy_vs_compression{args.suffix}.png", out / f"epoch_time{args.suffix}.png"
    plot_accuracy(table, accuracy_png)
    plot_epoch_time(table, time_png)
    for panel in sorted(table):
        for key, v in sorted(table[panel].items(), key=lambda kv: -kv[1]["compression"]):
            name = f"tt r{key[1]}" if key[0] == "tt" else key[0]
            print(f"{_title(panel):<28} {key[3]:<28} {name:<8} {v['compression']:>9,.1f}x  test {v['acc_mean']:.4f} ± "
                  f"{v['acc_std']:.4f} ({v['seeds']} seeds)  epoch {v['time_mean']:.2f} s")
    print(f"wrote {accuracy_png} and {time_png}")
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
