"""Every CUDA source compiles with nvcc for sm_80 (compile only, no GPU needed).

One architecture: the kernels never compare ``__CUDA_ARCH__`` with a version (a test checks), so the
build's other architecture (sm_90) compiles the same device code; its pass cost 17 s of CPU here.

Works against the CPU torch headers: ``-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE`` stands in for the
CMake-generated c10/cuda header, and the kernels include only c10/cuda headers (not
ATen/cuda/CUDAContext.h, which needs the cuBLAS/cuSPARSE headers). Skipped when nvcc is
missing, except under CI (``$CI`` set), where that is a failure.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch.utils import cpp_extension

from ttgnn import _build

ROOT = Path(__file__).resolve().parents[1]
# The CUDA sources and nvcc flags of the build (ttgnn/_build.py, used by setup.py and first use).
CUDA_SOURCES = [p for p in _build.sources(ROOT / "kernels", cuda=True) if p.suffix == ".cu"]
ARCHS = ("80",)


def _nvcc() -> str:
    candidates = [shutil.which("nvcc")]
    if cpp_extension.CUDA_HOME:
        candidates.append(os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc"))
    for path in candidates:
        if path and os.path.exists(path):
            return path
    message = "nvcc not found (install the CUDA toolkit or set CUDA_HOME)"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI is set, so the CUDA sources must be compile-checked")
    pytest.skip(message)


def test_there_are_cuda_sources():
    assert CUDA_SOURCES, "no .cu files under kernels/"


def test_the_device_code_is_the_same_for_every_architecture():
    # what lets test_cuda_source_compiles compile one architecture of the build's list: __CUDA_ARCH__
    # only tells device from host code (defined or not), never one architecture from another
    import re

    kernels = [p for p in (ROOT / "kernels").rglob("*") if p.suffix in (".cu", ".cuh", ".h")]
    compared = [p.name for p in kernels if re.search(r"__CUDA_ARCH__[\s)]*[<>=!]", p.read_text())]
    assert kernels and not compared


@pytest.mark.slow
@pytest.mark.parametrize("source", CUDA_SOURCES, ids=[p.name for p in CUDA_SOURCES])
def test_cuda_source_compiles(source, tmp_path):
    nvcc = _nvcc()
    includes = [f"-I{path}" for path in cpp_extension.include_paths()]
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
    python_include = f"-I{Path(sys.base_prefix) / 'include' / f'python{sys.version_info.major}.{sys.version_info.minor}'}"
    command = [
        nvcc, "-c", str(source), "-o", str(tmp_path / (source.stem + ".o")),
        "-std=c++20", *_build.NVCC_FLAGS, "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", f"-I{ROOT / 'kernels'}", python_include,
        *includes, *gencode,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / (source.stem + ".o")).stat().st_size > 0
