"""Packaging: the sdist and the wheel carry what users need, and the wheel installs and runs.

Built with the pinned environment, never downloading anything: the sdist and the wheel come
from setuptools' PEP 517 hooks (what pip calls) run by this interpreter, the wheel from the
unpacked sdist (as pip builds it) with torch hidden (as in pip's isolated build, where torch is
absent); the wheel is installed with ``pip --no-index`` (no index, no find-links, no config)
into a fresh virtual environment that sees the pinned packages of this one, so the only thing
pip may install is ttgnn itself. In that environment the kernels come from the first-use cache,
seeded with this checkout's library under the folder the installed ttgnn computes for its torch.

About 30-60 s; marked slow, run by ``make test`` (CI).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

from ttgnn import _build, _ext

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILES = sorted(p.relative_to(ROOT / "kernels").as_posix()
                      for p in _build.kernel_files(ROOT / "kernels"))
NAME = "ttgnn-0.1.0"


def _missing(message: str):
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is an error)")
    pytest.skip(message)


def _run(command, *, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, (f"{' '.join(map(str, command))} failed:\n{result.stdout}\n"
                                    f"{result.stderr}")
    return result


def _clean_env(**changes) -> dict:
    """This environment without ttgnn's switches, PYTHONPATH or pip's configured package sources."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TTGNN_", "PIP_")) and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull  # no find-links, index or constraints from config files
    env.update(changes)
    return env


def _source_copy(destination: Path) -> Path:
    """The working tree's files (tracked, and untracked but not ignored) copied to ``destination``."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        _missing(f"cannot list the source files with git ({exc})")
    for name in filter(None, listing.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file may be deleted in the working tree
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def _backend_hook(hook: str, out_dir: Path) -> str:
    return (f"from setuptools import build_meta\n"
            f"print(build_meta.{hook}({str(out_dir)!r}))\n")


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The sdist, and the wheel built from it without torch."""
    work = tmp_path_factory.mktemp("packaging")
    source = _source_copy(work / "source")
    out = work / "dist"
    _run([sys.executable, "-c", _backend_hook("build_sdist", out)], cwd=source, env=_clean_env())
    (sdist,) = out.glob("*.tar.gz")

    unpacked = work / "unpacked"
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (and patched 3.10)
            archive.extractall(unpacked, filter="data")
        else:
            archive.extractall(unpacked)
    hidden = work / "no_torch" / "torch"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ImportError('torch is hidden, as in the isolated build environment of pip')\n")
    result = _run([sys.executable, "-c", _backend_hook("build_wheel", out)],
                  cwd=unpacked / NAME, env=_clean_env(PYTHONPATH=str(hidden.parent)))
    (wheel,) = out.glob("*.whl")
    return sdist, wheel, result.stderr


def test_sdist_carries_the_kernels_partition_and_build_recipe(dists):
    sdist, _, _ = dists
    with tarfile.open(sdist) as archive:
        names = {name.removeprefix(f"{NAME}/") for name in archive.getnames()}
    assert {f"kernels/{name}" for name in KERNEL_FILES} <= names
    assert {"setup.py", "pyproject.toml", "README.md", "LICENSE", "ttgnn/_build.py",
            "ttgnn/_ext.py", "ttgnn/build_kernels.py", "partition/__init__.py"} <= names
    assert not [n for n in names if n.endswith((".so", ".o")) or n.endswith(_build.RECORD_NAME)]
    # setuptools adds tests/test*.py by default, without the helpers they import: none shipped
    assert not [n for n in names if n.startswith("tests")]


def test_wheel_without_torch_at_build_time_is_pure_and_complete(dists):
    _, wheel, build_log = dists
    assert "torch is not importable at build time" in build_log
    assert wheel.name == f"{NAME}-py3-none-any.whl"  # nothing compiled: any platform
    # setuptools warns when a source folder it would ship is missing from `packages` (an error
    # in later setuptools): pyproject.toml lists every folder under kernels/.
    assert "absent from the `packages` configuration" not in build_log, build_log
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(f"{NAME}.dist-info/entry_points.txt").decode()
        metadata = archive.read(f"{NAME}.dist-info/METADATA").decode()
    # Every kernel file, where ttgnn looks for them to compile on first use.
    assert {f"ttgnn/_kernels/{name}" for name in KERNEL_FILES} <= names
    assert not [n for n in names if n.startswith("ttgnn/_kernels/")
                and n.removeprefix("ttgnn/_kernels/") not in KERNEL_FILES]
    partition = {p.name for p in (ROOT / "partition").glob("*.py")}
    assert {f"ttgnn/partition/{name}" for name in partition} <= names
    assert {"ttgnn/_build.py", "ttgnn/_ext.py", "ttgnn/build_kernels.py", "ttgnn/cli.py"} <= names
    assert not [n for n in names if n.endswith(".so")]
    assert "[console_scripts]" in entry_points and "ttgnn = ttgnn.cli:main" in entry_points
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert any(r.startswith("torch") for r in requires) and "ninja" in requires


def _library_for_this_torch() -> Path:
    info = _ext.info()
    if not info.loaded:
        _missing(f"no compiled library for this torch to seed the cache with ({info.error})")
    return Path(info.path)


def test_wheel_installs_into_a_fresh_venv_with_the_pinned_torch_and_runs(dists, tmp_path):
    _, wheel, _ = dists
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).stdout.strip())
    # The pinned packages of this environment, without its (editable) ttgnn.
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not (entry.name.startswith("ttgnn")
                or (entry.name.startswith("__editable__") and "ttgnn" in entry.name)):
            (pinned / entry.name).symlink_to(entry)
    (site / "pinned.pth").write_text(f"{pinned}\n")

    result = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index",
                   wheel], cwd=tmp_path, env=_clean_env())
    assert f"Successfully installed {NAME}" in result.stdout, result.stdout
    installed = {p.name for p in site.iterdir()}
    assert installed == {f"{NAME}.dist-info", "pinned.pth", "ttgnn"}, installed  # torch not copied
    kernels = site / "ttgnn" / "_kernels"
    assert _build.source_digest(kernels, cuda=True) == _build.source_digest(ROOT / "kernels", cuda=True)

    # Seed the first-use cache with this checkout's library, where the installed ttgnn looks.
    env = _clean_env(TTGNN_CACHE=str(tmp_path / "cache"))
    where = _run([python, "-c", "from ttgnn import _ext; print(_ext.jit_build_dir())"], cwd=tmp_path,
                 env=dict(env, TTGNN_NO_EXTENSION="1")).stdout.strip()
    build_dir = Path(where)
    tag = _build.torch_tag()
    cuda_tag = "cu" + tag["cuda"].replace(".", "") if tag["cuda"] else "cpu"
    assert build_dir.parent == (tmp_path / "cache" / "ext" /
                                f"{tag['python']}-torch{torch.__version__}-cxx11abi"
                                f"{int(tag['cxx11abi'])}-{cuda_tag}")
    cuda = build_dir.name.startswith("cuda-")  # a CUDA torch on a machine with a GPU
    build_dir.mkdir(parents=True)
    shutil.copy2(_library_for_this_torch(), build_dir / "ttgnn_C.so")
    record = _build.make_record(tag, _build.source_digest(kernels, cuda=cuda), cuda_kernels=cuda,
                                cuda_skipped=None, flags=_build.cxx_flags(), built_by="jit")
    _build.write_record(build_dir / "build.json", dict(record, library="ttgnn_C.so"))

    check = _run([python, "-c", (
        "import torch, ttgnn, ttgnn.partition\n"
        "from ttgnn import _ext\n"
        "from ttgnn.ops import tt_lookup_reference\n"
        "info = _ext.info()\n"
        "g = torch.Generator().manual_seed(0)\n"
        "cores = [torch.randn(5, 1, 2, 3, generator=g), torch.randn(6, 3, 4, 1, generator=g)]\n"
        "rows = torch.tensor([0, 7, 29, 7])\n"
        "same = torch.allclose(torch.ops.ttgnn.tt_lookup(cores, rows), "
        "tt_lookup_reference(cores, rows), rtol=1e-5, atol=1e-6)\n"
        "from ttgnn import _C\n"
        "print(info.origin, info.path, ttgnn.__file__, ttgnn.partition.__file__, "
        "_ext.backend('cpu'), same, _C.__file__, sep='\\n')\n")], cwd=tmp_path, env=env)
    origin, path, package, partition, backend, same, module = check.stdout.split()
    assert (origin, backend, same) == ("cache", "cpu-kernel", "True"), check.stderr
    # The cached library is the module ttgnn._C, as a prebuilt one would be.
    assert Path(path) == Path(module) == build_dir / "ttgnn_C.so"
    assert Path(package).is_relative_to(site) and Path(partition).is_relative_to(site)
    assert "ExtensionWarning" not in check.stderr and "compiling" not in check.stderr

    info = _run([venv / "bin" / "ttgnn", "info", "--rows", "169343", "--dim", "128", "--rank", "8"],
                cwd=tmp_path, env=env)
    assert "55, 55, 56" in info.stdout  # the factored row shape of ogbn-arxiv
    status = _run([python, "-m", "ttgnn.build_kernels"], cwd=tmp_path, env=env)
    assert "kernels: cache" in status.stdout and "devices: cpu" in status.stdout


def test_a_clones_ttgnn_folder_imported_without_its_partition_package_names_the_cause(tmp_path):
    # `python -m ttgnn` in a clone after a non-editable install imported the clone's ttgnn/ and ended in
    # "ModuleNotFoundError: No module named 'ttgnn.partition'" deep in the command line's imports
    (tmp_path / "ttgnn").symlink_to(ROOT / "ttgnn")
    child = subprocess.run([sys.executable, "-S", "-c", "import ttgnn"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)  # -S: no site-packages, so no install maps ttgnn.partition
    assert child.returncode == 1
    assert child.stderr.strip().splitlines()[-1] == (
        f"ImportError: ttgnn was imported from the source folder {tmp_path / 'ttgnn'} without its ttgnn.partition "
        "package (the clone's partition/, which an install maps): run outside the clone, or install the clone "
        "itself with: pip install --no-build-isolation -e .")
