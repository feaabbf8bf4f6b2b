"""Shared pytest fixtures."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from extension import CPU_PATHS, run_on_path


@pytest.fixture(scope="session", autouse=True)
def _own_cache_dir(tmp_path_factory):
    """Caches the tests write without naming a folder (node orders, eigenvectors, ogb's files) go
    to one folder of this session, not to ``~/.cache/ttgnn``: results do not depend on earlier runs."""
    old = os.environ.get("TTGNN_CACHE")
    cache = tmp_path_factory.mktemp("ttgnn-cache")
    builds = (Path(old) if old else Path.home() / ".cache" / "ttgnn") / "ext"
    if builds.is_dir():  # kernels compiled on first use stay found (a rebuild takes minutes)
        (cache / "ext").symlink_to(builds, target_is_directory=True)
    os.environ["TTGNN_CACHE"] = str(cache)
    yield
    if old is None:
        os.environ.pop("TTGNN_CACHE", None)
    else:
        os.environ["TTGNN_CACHE"] = old


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real graphs' root (``$TTGNN_DATA``, else ``./dataset``).

    Tests that need real data are skipped when no root is configured and ``./dataset`` is
    missing; when ``$TTGNN_DATA`` names a missing folder (``.ci/run`` always sets it) or ``$CI`` is
    set, they fail instead.
    """
    explicit = os.environ.get("TTGNN_DATA")
    root = explicit or "dataset"  # same fallback as ttgnn.data.resolve_root
    if Path(root).is_dir():
        return Path(root)
    message = f"real graphs not found: {root!r} is not a folder (set TTGNN_DATA)"
    if explicit or os.environ.get("CI"):
        pytest.fail(message + " (TTGNN_DATA or CI is set, so this is an error)")
    pytest.skip(message)


@pytest.fixture
def load_script(monkeypatch):
    """Load one of the repository's scripts as a module: ``load_script("benchmarks/train_arxiv.py")``.

    For the test's duration the script's folder is on ``sys.path`` (scripts import their siblings,
    such as ``benchmarks/summary.py``) and the module is in ``sys.modules`` (dataclasses look their
    module up there); the module is named ``script_<stem>``, so a script never shadows a package.
    """
    repo = Path(__file__).resolve().parents[1]

    def load(path: str):
        file = repo / path
        spec = importlib.util.spec_from_file_location(f"script_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.syspath_prepend(str(file.parent))
        monkeypatch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def run_main(monkeypatch, capfd):
    """``run_main("examples/x.py", *args)`` runs the script in this process as ``python examples/x.py
    args`` would (as ``__main__``, ``sys.argv`` set, its folder first on ``sys.path``, ``SystemExit``
    read as the exit code) and returns ``(exit code, stdout, stderr)``, what its child processes
    wrote included (captured at the file descriptors).

    A new interpreter spends 3-4 s importing torch: tests of what a script says on bad input use
    this; tests of how a script starts, trains or dies keep a subprocess.
    """
    import runpy

    repo = Path(__file__).resolve().parents[1]

    def run(path: str, *args: str):
        import torch

        file = repo / path
        monkeypatch.setattr(sys, "argv", [str(file), *args])
        monkeypatch.syspath_prepend(str(file.parent))
        threads = torch.get_num_threads()  # scripts set their own (--num-threads): the next test gets these back
        capfd.readouterr()
        try:
            runpy.run_path(str(file), run_name="__main__")
            code = 0
        except SystemExit as exit:
            code = exit.code
        finally:
            torch.set_num_threads(threads)
        out, err = capfd.readouterr()
        return (0 if code is None else code), out, err

    return run


@pytest.fixture(scope="module")
def planted():
    """A 400-node, 4-class planted-partition graph (homophily 0.9): the small training graph."""
    from ttgnn.data import planted_partition

    return planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, seed=0)


@pytest.fixture
def set_umask():
    """``set_umask(mask)`` sets the process's umask for the rest of the test; the old one comes back after."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


@pytest.fixture
def compilers(tmp_path, monkeypatch):
    """Two stand-in C++ compilers for the build's libstdc++ check: ``static/g++`` with only
    libstdc++.a (it prints the bare name, as GCC does), ``bin/g++`` with the shared library;
    PATH holds only ``bin``."""
    from build_fakes import fake_compiler

    static = fake_compiler(tmp_path / "static" / "g++", "libstdc++.so")
    shared = fake_compiler(tmp_path / "bin" / "g++", "/usr/lib/gcc/x86_64-linux-gnu/13/libstdc++.so")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return static, shared


@pytest.fixture(params=CPU_PATHS)
def cpu_path(request):
    """Runs the test with the CPU kernels on one instruction-set path (skipped where this CPU or
    build lacks it), then restores the path."""
    yield from run_on_path(request.param)
