"""What the benchmarks print about results over seeds (accuracy tables give mean ± std), and which
runs count: :func:`complete` runs only, read by :func:`read_metrics`."""
import json
import statistics
from pathlib import Path

__all__ = ["mean_std", "paired", "read_metrics", "finished", "complete", "seed_folders"]


def mean_std(values) -> str:
    """``"mean ± std"`` of ``values`` (sample standard deviation) at four decimals; one value alone."""
    values = list(values)
    if not values:
        raise ValueError("mean_std needs at least one value")
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def paired(a, b) -> str:
    """``a - b`` seed by seed, in points (x100): ``"+mean ± s.e. (ahead on k of n)"``, the standard
    error of the mean difference (0 for one pair). ``a`` and ``b`` are accuracies in the same seed order."""
    a, b = list(a), list(b)
    if not a or len(a) != len(b):
        raise ValueError(f"paired needs two equally long, non-empty lists, got {len(a)} and {len(b)} values")
    diff = [100 * (x - y) for x, y in zip(a, b)]
    se = statistics.stdev(diff) / len(diff) ** 0.5 if len(diff) > 1 else 0.0
    return f"{statistics.mean(diff):+.2f} ± {se:.2f} (ahead on {sum(d > 0 for d in diff)} of {len(diff)})"


def read_metrics(path: Path) -> dict:
    """The ``metrics.json`` at ``path``; ``ValueError`` naming the file when it is no run's metrics."""
    try:
        metrics = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a run's metrics.json ({err})") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("settings"), dict) \
            or not isinstance(metrics.get("epochs"), list):
        raise ValueError(f"{path}: not a run's metrics.json (no settings or no epochs)")
    return metrics


def full_table_metrics(run_dir: Path) -> Path:
    """The metrics file of the full table's stage of the ``--from-full`` run in ``run_dir`` (ttgnn, and
    so torch, is imported here)."""
    from ttgnn.train import FULL_TABLE_DIR

    return Path(run_dir) / FULL_TABLE_DIR / "metrics.json"


def finished(path: Path, epochs: int) -> bool:
    """Whether ``path`` holds the metrics of a run of at least ``epochs`` epochs (with ``--from-full``:
    the full table's run of ``epochs`` epochs and all the fine-tuning epochs after it)."""
    path = Path(path)
    return path.exists() and _finished(read_metrics(path), path.parent, epochs)


def _finished(metrics: dict, folder: Path, epochs: int) -> bool:
    """:func:`finished` of the run in ``folder``, whose ``metrics`` are read already."""
    if metrics.get("from_full"):
        return (len(metrics["epochs"]) >= metrics["settings"]["finetune_epochs"]
                and finished(full_table_metrics(folder), epochs))
    return len(metrics["epochs"]) >= epochs


def run_epochs_of(path: Path) -> int:
    """The ``--epochs`` the run at ``path`` was started with (with ``--from-full``: its full table's, as the
    TT stage records its fine-tuning epochs under ``epochs``)."""
    return _run_epochs(read_metrics(path), Path(path).parent)


def _run_epochs(metrics: dict, folder: Path) -> int:
    full = full_table_metrics(folder) if metrics.get("from_full") else None
    if full is not None and full.exists():
        return read_metrics(full)["settings"]["epochs"]
    return metrics["settings"]["epochs"]


def complete(path: Path) -> bool:
    """Whether ``path`` holds the metrics of a run that reached its own last epoch (the ``--epochs`` it
    was started with; with ``--from-full``, both stages)."""
    path = Path(path)
    if not path.exists():
        return False
    metrics = read_metrics(path)  # once
    return _finished(metrics, path.parent, _run_epochs(metrics, path.parent))


def seed_folders(folder: Path) -> list:
    """``(seed, folder)`` of each ``seed<k>`` folder in ``folder``, by seed number (not by name: seed10
    before seed2)."""
    found = [(int(p.name[4:]), p) for p in Path(folder).glob("seed*") if p.name[4:].isdigit()]
    return sorted(found)
