"""What the benchmarks print about the machine they ran on (every table names its CPU), and the
CPU kernels' instruction-set path they run."""
import contextlib
import platform

__all__ = ["cpu_model", "active_cpu_isa", "select_cpu_isa", "on_cpu_isa"]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), or what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def active_cpu_isa() -> str:
    """The instruction-set path the CPU kernels run now, unchanged (``TTGNN_CPU_ISA`` or the best)."""
    try:
        from ttgnn import _C
    except ImportError:
        return "none (no compiled kernels)"
    return _C.cpu_isa() if hasattr(_C, "cpu_isa") else "the build's own (no per-path choice)"


def select_cpu_isa(name: str, flag: str = "--cpu-isa") -> str:
    """Makes the CPU kernels run the instruction-set path ``name`` (``auto``: the best this CPU
    runs) and returns the path; raises SystemExit naming the paths this CPU runs otherwise (the
    message starts with ``flag``, the option that asked for ``name``)."""
    try:
        from ttgnn import _C
    except ImportError:
        if name != "auto":
            raise SystemExit(f"{flag} {name}: the compiled kernels (ttgnn._C) are not built") from None
        return "none (no compiled kernels)"
    if not hasattr(_C, "set_cpu_isa"):  # a build older than the per-path kernels
        if name != "auto":
            raise SystemExit(f"{flag} {name}: this build of ttgnn._C has one path") from None
        return "the build's own (no per-path choice)"
    try:
        return _C.set_cpu_isa(name)
    except (ValueError, RuntimeError) as exc:
        raise SystemExit(f"{flag} {name}: {exc}") from None


@contextlib.contextmanager
def on_cpu_isa(name: str, flag: str = "--cpu-isa"):
    """Within the block the CPU kernels run path ``name`` (:func:`select_cpu_isa`: SystemExit for a
    path this CPU or build does not run); the path active before is restored after it."""
    previous = active_cpu_isa()
    select_cpu_isa(name, flag)
    try:
        yield
    finally:
        select_cpu_isa(previous, flag)
