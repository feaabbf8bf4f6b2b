"""What the tests of compiled kernels need: the extension, and each CPU instruction-set path."""
import os

import pytest

#: The CPU kernels' instruction-set paths, best first.
CPU_PATHS = ("avx512", "avx2", "baseline")


def require_kernels(device: str) -> None:
    """Skip the test when ``ttgnn._C`` (with kernels for ``device``) is missing; fail under ``$CI``."""
    from ttgnn import _ext  # here, not at import: conftest imports this module before any test runs

    if not _ext.available():
        message = f"ttgnn._C is not available ({_ext.load_error()})"
    elif not _ext.has_kernel(device):
        message = f"ttgnn._C was built without {device} kernels"
    else:
        return
    if os.environ.get("CI"):
        pytest.fail(message + "; CI is set, so the extension must build")
    pytest.skip(message)


def cpu_paths() -> tuple:
    """The paths this CPU and build run (skips the test without the CPU kernels)."""
    require_kernels("cpu")
    from ttgnn import _C

    return _C.cpu_isas()


def run_on_path(path: str):
    """A generator for a fixture: runs the test on CPU path ``path`` (skips when this CPU or build
    lacks it), then restores the path."""
    runnable = cpu_paths()
    if path not in runnable:
        pytest.skip(f"this CPU (or build) cannot run the {path} path; it runs {runnable}")
    from ttgnn import _C

    previous = _C.cpu_isa()
    assert _C.set_cpu_isa(path) == path
    try:
        yield path
    finally:
        _C.set_cpu_isa(previous)
