"""Stand-ins for the build's tools (nvcc, C++ compilers, torch's cpp_extension), shared by the
tests of the build recipe (test_build_recipe.py) and of kernel loading (test_ext.py)."""
from pathlib import Path

import torch

from ttgnn import _build

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"


def tag(**changes) -> dict:
    """:func:`ttgnn._build.torch_tag` of the running torch with ``changes``."""
    result = _build.torch_tag()
    result.update(changes)
    return result


def cuda_torch(monkeypatch, version: str = "13.0") -> None:
    """Makes the running torch look like a CUDA build (``torch.version.cuda``), TTGNN_NO_CUDA unset."""
    monkeypatch.setattr(torch.version, "cuda", version)
    monkeypatch.delenv("TTGNN_NO_CUDA", raising=False)


def script(path: Path, flag: str, answer: str, code: int = 0) -> Path:
    """An executable at ``path`` that prints ``answer`` and exits with ``code`` when its first
    argument is ``flag``, and fails (exit 2, no output) otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n[ \"$1\" = '{flag}' ] || exit 2\necho '{answer}'\nexit {code}\n")
    path.chmod(0o755)
    return path


def toolkit(root: Path, release: str = "13.0", cudart: bool = True) -> Path:
    """A CUDA toolkit folder: ``bin/nvcc`` answering ``--version`` with ``release``, and
    ``lib64/libcudart.so`` when ``cudart``."""
    script(root / "bin" / "nvcc", "--version", f"Cuda compilation tools, release {release}, V{release}.88")
    (root / "lib64").mkdir()
    if cudart:
        (root / "lib64" / "libcudart.so").write_bytes(b"")
    return root


def fake_compiler(path: Path, libstdcxx_so: str, code: int = 0) -> Path:
    """A C++ compiler answering ``-print-file-name=libstdc++.so`` as GCC does: the library's path
    where it has the shared one, the bare name where it has not."""
    return script(path, "-print-file-name=libstdc++.so", libstdcxx_so, code)


class FakeCppExtension:
    """``torch.utils.cpp_extension`` as :func:`ttgnn._build.cuda_problem` reads it."""

    TORCH_LIB_PATH = "/torch/lib"

    def __init__(self, home):
        self.CUDA_HOME = str(home) if home else None

    def library_paths(self, device_type="cpu"):
        return [self.TORCH_LIB_PATH] + ([f"{self.CUDA_HOME}/lib64"] if device_type == "cuda" else [])
