"""What the benchmarks print about results over seeds (accuracy tables give mean ± std)."""
import statistics

__all__ = ["mean_std", "paired"]


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
