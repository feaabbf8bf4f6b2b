"""What the benchmarks print about results over seeds (accuracy tables give mean ± std)."""
import statistics

__all__ = ["mean_std"]


def mean_std(values) -> str:
    """``"mean ± std"`` of ``values`` (sample standard deviation) at four decimals; one value alone."""
    values = list(values)
    if not values:
        raise ValueError("mean_std needs at least one value")
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"
