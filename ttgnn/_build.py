"""The build recipe of the compiled kernels ``ttgnn._C``: sources, flags, CUDA checks, records.

Both builds read it, so they compile the same files with the same flags:

- **ahead of time**, by ``setup.py`` when torch is importable at build time
  (``pip install --no-build-isolation``, ``make setup``); ``setup.py`` loads this file by path
  and writes a *build record* (:data:`RECORD_NAME`) beside the library: the Python, torch, CUDA
  and C++ ABI it was built for and a digest of the kernel sources;
- **on first use**, by :mod:`ttgnn._ext` with :func:`torch.utils.cpp_extension.load`, into a
  cache folder per Python, torch version, C++ ABI and CUDA version (:func:`jit_build_dir`) when
  no ahead-of-time build matches the running torch (:func:`stale_reasons`).

Importing this module needs only the standard library (``setup.py`` may run where torch is
missing); the functions that need torch import it themselves.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

__all__ = [
    "CPU_SOURCES",
    "CUDA_SOURCES",
    "KERNEL_FILES",
    "NVCC_FLAGS",
    "LINK_FLAGS",
    "JIT_EXTRA_CFLAGS",
    "DEFAULT_CUDA_ARCH_LIST",
    "RECORD_NAME",
    "TAG_KEYS",
    "env_flag",
    "cxx_flags",
    "cuda_arch_list",
    "kernel_dir",
    "kernel_files",
    "sources",
    "source_digest",
    "torch_tag",
    "cuda_wanted",
    "cuda_problem",
    "shared_libstdcxx",
    "cxx_override",
    "make_record",
    "read_record",
    "write_record",
    "stale_reasons",
    "cache_root",
    "jit_build_dir",
]

#: Sources compiled into ``ttgnn._C`` for the CPU kernels (globs relative to the kernel folder).
CPU_SOURCES = ("*.cpp", "cpu/*.cpp")
#: Sources added when the CUDA kernels are built.
CUDA_SOURCES = ("cuda/*.cu",)
#: Every file the kernels are made of: shipped in the sdist and the wheel (``ttgnn/_kernels``,
#: see ``[tool.setuptools.package-data]`` in pyproject.toml) and hashed into build records.
KERNEL_FILES = ("**/*.cpp", "**/*.cu", "**/*.h", "**/*.cuh")

#: nvcc flags after torch's own (``-std``, ``--expt-relaxed-constexpr``, the arch flags).
NVCC_FLAGS = ("-O3",)
#: Linker flags (the CPU kernels use OpenMP).
LINK_FLAGS = ("-fopenmp",)
#: C++ flags the first-use build adds, so it compiles the code setup.py compiles: setuptools
#: starts from Python's own flags (sysconfig CFLAGS: ``-DNDEBUG -g -fwrapv -O3 -Wall``), torch's
#: JIT loader passes none of them (``-g`` and ``-Wall`` change no code and are left out).
JIT_EXTRA_CFLAGS = ("-DNDEBUG", "-fwrapv")
#: CUDA architectures when ``TORCH_CUDA_ARCH_LIST`` is unset (A100 and H100 class GPUs).
DEFAULT_CUDA_ARCH_LIST = "8.0;9.0"

#: Name of the build record beside an ahead-of-time built ``_C`` library.
RECORD_NAME = "_C.build.json"
#: What a compiled library depends on: a library built for other values must not be loaded.
TAG_KEYS = ("python", "torch", "torch_git", "cuda", "cxx11abi")


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a true value (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cxx_flags(native: Optional[bool] = None) -> list[str]:
    """C++ compiler flags of the kernels.

    Args:
        native (bool, optional): compile for the build machine's CPU only (``-march=native``)
            instead of the portable per-ISA clones. (default: ``$TTGNN_NATIVE``)
    """
    if native is None:
        native = env_flag("TTGNN_NATIVE")
    # -ffp-contract=fast lets the compiler fuse multiply-adds (ISO C++ modes default to off).
    flags = ["-O3", "-fopenmp", "-fno-math-errno", "-ffp-contract=fast"]
    if native:
        flags += ["-march=native", "-DTTGNN_NATIVE_BUILD"]
    return flags


def cuda_arch_list() -> str:
    """The CUDA architectures to compile for: ``$TORCH_CUDA_ARCH_LIST``, else :data:`DEFAULT_CUDA_ARCH_LIST`.

    A fixed default (rather than torch's "the GPUs of this machine") keeps a cached build usable
    on every machine sharing a home folder, and finding the GPUs would initialise CUDA.
    """
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_CUDA_ARCH_LIST


def kernel_dir(package_dir: Path) -> Optional[Path]:
    """The folder of the kernel sources for the package at ``package_dir``, or ``None``.

    An installed package carries them as ``ttgnn/_kernels``; a source checkout (``setup.py``
    beside the package, e.g. an editable install) has them in ``kernels/``.
    """
    package_dir = Path(package_dir)
    candidates = [package_dir / "_kernels"]
    if (package_dir.parent / "setup.py").is_file():
        candidates.append(package_dir.parent / "kernels")
    for candidate in candidates:
        if sources(candidate, cuda=False):
            return candidate
    return None


def _glob(root: Path, patterns: Iterable[str]) -> list[Path]:
    found = {path for pattern in patterns for path in root.glob(pattern) if path.is_file()}
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


def kernel_files(root: Path) -> list[Path]:
    """Every kernel file (sources and headers) under ``root``, sorted by relative path."""
    return _glob(Path(root), KERNEL_FILES)


def sources(root: Path, cuda: bool) -> list[Path]:
    """The sources to compile: the CPU kernels, and the CUDA kernels when ``cuda``."""
    return _glob(Path(root), CPU_SOURCES + (CUDA_SOURCES if cuda else ()))


def _is_cuda_file(relative: Path) -> bool:
    return relative.suffix in (".cu", ".cuh") or "cuda" in relative.parts[:-1]


def source_digest(root: Path, cuda: bool) -> str:
    """A digest of the kernel files under ``root`` that a build compiles (paths and contents).

    Args:
        root (Path): the kernel folder.
        cuda (bool): for a build with the CUDA kernels. Without, the CUDA files (``.cu``,
            ``.cuh``, anything under ``cuda/``) are left out: editing them does not make a
            CPU-only build stale.
    """
    root = Path(root)
    digest = hashlib.sha256()
    for path in kernel_files(root):
        if not cuda and _is_cuda_file(path.relative_to(root)):
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def torch_tag() -> dict[str, Any]:
    """What a library compiled against the running torch depends on (keys :data:`TAG_KEYS`).

    ``torch`` is the full version (``2.13.0+cpu``), ``torch_git`` its commit, ``cuda`` the CUDA
    version torch was built with (``None`` for CPU builds), ``cxx11abi`` torch's
    ``_GLIBCXX_USE_CXX11_ABI``, ``python`` the CPython tag (``cp311``).
    """
    import torch

    return {
        "python": f"cp{sys.version_info[0]}{sys.version_info[1]}",
        "torch": str(torch.__version__),
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "cxx11abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)),
    }


def cuda_wanted() -> bool:
    """Whether the CUDA kernels should be built: torch is a CUDA build and ``$TTGNN_NO_CUDA`` is unset."""
    import torch

    return torch.version.cuda is not None and not env_flag("TTGNN_NO_CUDA")


def _nvcc_version(nvcc: Path) -> Optional[str]:
    try:
        output = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                                timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+)\.(\d+)", output)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _cuda_library_dirs(cpp_extension) -> list[str]:
    try:
        dirs = cpp_extension.library_paths(device_type="cuda")
    except TypeError:  # torch < 2.6: library_paths(cuda=True)
        dirs = cpp_extension.library_paths(cuda=True)
    dirs = [d for d in dirs if d != cpp_extension.TORCH_LIB_PATH]
    # The linker also searches $LIBRARY_PATH.
    dirs += [d for d in os.environ.get("LIBRARY_PATH", "").split(os.pathsep) if d]
    return dirs


def cuda_problem(cpp_extension=None) -> Optional[str]:
    """Why the CUDA kernels cannot be built here, or ``None`` when the toolchain looks complete.

    Checks, in order: torch is a CUDA build and ``$TTGNN_NO_CUDA`` is unset; a CUDA toolkit is
    found (``CUDA_HOME``, else the folder above ``nvcc`` on ``PATH``, as torch finds it); its
    ``nvcc`` has torch's CUDA major version; ``libcudart.so``, which the kernels link against,
    is in the toolkit's library folder or on ``$LIBRARY_PATH``. These are the failures seen in
    practice (an ``nvcc`` wrapper in ``/usr/local/bin`` makes torch look for the runtime in
    ``/usr/local/lib``: ``cannot find -lcudart``). Cheap: it runs ``nvcc --version`` at most.

    Args:
        cpp_extension (module, optional): ``torch.utils.cpp_extension`` (a stand-in in tests).
    """
    import torch

    if cpp_extension is None:
        from torch.utils import cpp_extension
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    if env_flag("TTGNN_NO_CUDA"):
        return "TTGNN_NO_CUDA is set"
    home = cpp_extension.CUDA_HOME
    if not home:
        return "no CUDA toolkit found (CUDA_HOME is unset and nvcc is not on PATH)"
    nvcc = Path(home) / "bin" / "nvcc"
    if not nvcc.exists():
        return f"nvcc not found at {nvcc} (CUDA_HOME={home})"
    version = _nvcc_version(nvcc)
    if version is None:
        return f"could not read the CUDA version of {nvcc}"
    if version.split(".")[0] != torch.version.cuda.split(".")[0]:
        return (f"nvcc at {nvcc} is CUDA {version}, torch {torch.__version__} was built with "
                f"CUDA {torch.version.cuda}: a toolkit of the same major version is needed")
    library_dirs = _cuda_library_dirs(cpp_extension)
    if not any((Path(d) / name).exists() for d in library_dirs
               for name in ("libcudart.so", "libcudart.a")):
        return (f"libcudart.so (the CUDA runtime library) not found in "
                f"{', '.join(library_dirs) or 'any library folder'} (CUDA_HOME={home}); set "
                f"CUDA_HOME to the CUDA toolkit's root, the folder with lib64/libcudart.so")
    return None


def shared_libstdcxx(compiler: str) -> Optional[bool]:
    """Whether the C++ compiler ``compiler`` (a command, e.g. ``"g++"`` or ``"ccache g++"``)
    links libstdc++ as a shared library; ``None`` when it cannot be told (not GCC-like, not found).

    GCC prints the bare name for ``-print-file-name=libstdc++.so`` when it has no such file.
    """
    try:
        argv = shlex.split(compiler)
        output = subprocess.run(argv + ["-print-file-name=libstdc++.so"], capture_output=True,
                                text=True, timeout=60)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    name = output.stdout.strip()
    if output.returncode != 0 or not name:
        return None
    return os.sep in name


def cxx_override() -> Optional[tuple[str, str]]:
    """A C++ compiler to build with instead of the one torch would use, and why; ``None`` to keep it.

    torch compiles and links with ``$CXX`` (default ``c++``). A compiler that has only a static
    libstdc++ links a second copy of libstdc++ into the extension, beside the shared one torch
    uses, and then formatting any error message with a number in it crashes the process (seen
    on an H100 machine whose ``CXX=/opt/gcc/bin/g++`` had only ``libstdc++.a``, torch 2.11,
    2026-11-24). Then the first of ``g++``, ``c++`` on ``PATH`` that links the shared library
    is used. Only Linux is checked.

    Raises:
        RuntimeError: the compiler links libstdc++ statically and no other one on ``PATH`` does.
    """
    if not sys.platform.startswith("linux"):
        return None
    current = os.environ.get("CXX") or "c++"
    if shared_libstdcxx(current) is not False:
        return None
    for candidate in ("g++", "c++"):
        found = shutil.which(candidate)
        if found and shared_libstdcxx(found):
            return found, (f"the C++ compiler {current} has only a static libstdc++, which would "
                           f"put a second libstdc++ into the kernels' library beside torch's; "
                           f"building with {found} instead")
    raise RuntimeError(f"the C++ compiler {current} has only a static libstdc++ (its "
                       f"-print-file-name=libstdc++.so finds no file), and no g++ or c++ on PATH "
                       f"links the shared one: a library built with it crashes on error "
                       f"messages; set CXX to a compiler with libstdc++.so")


def make_record(tag: dict[str, Any], digest: Optional[str], *, cuda_kernels: bool,
                cuda_skipped: Optional[str], flags: Iterable[str], built_by: str) -> dict[str, Any]:
    """The build record of a compiled library (written as JSON beside it).

    Args:
        tag (dict): :func:`torch_tag` of the torch it was compiled against.
        digest (str, optional): :func:`source_digest` of the sources compiled.
        cuda_kernels (bool): whether it holds the CUDA kernels.
        cuda_skipped (str, optional): why the CUDA kernels were left out, where torch has CUDA.
        flags (iterable of str): the C++ flags.
        built_by (str): ``"setup.py"`` (ahead of time) or ``"jit"`` (on first use).
    """
    record = {key: tag[key] for key in TAG_KEYS}
    record.update(sources=digest, cuda_kernels=bool(cuda_kernels), cuda_skipped=cuda_skipped,
                  cxx_flags=list(flags), built_by=built_by)
    return record


def library_checksum(path: Path) -> str:
    """A digest of the compiled library at ``path`` (recorded with a first-use build, checked before each
    load: a damaged library kills the process inside the loader, where no exception can be caught)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(path: Path) -> Optional[dict[str, Any]]:
    """The build record at ``path``, or ``None`` when it is missing or unreadable."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Writes ``record`` to ``path`` atomically (readers never see half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def stale_reasons(record: Optional[dict[str, Any]], tag: dict[str, Any],
                  digest: Optional[str]) -> list[str]:
    """Why a library with build record ``record`` must not be loaded into the running torch.

    Args:
        record (dict, optional): its build record (``None``: no record was found).
        tag (dict): :func:`torch_tag` of the running torch.
        digest (str, optional): :func:`source_digest` of the kernel sources now on disk, or
            ``None`` when they are not available (sources are then not compared).

    Returns:
        One line per difference; empty when the library matches.
    """
    if record is None:
        return ["it has no build record (built by an older setup.py, or copied by hand)"]
    reasons = [f"{key}: built for {record.get(key)!r}, running {tag[key]!r}"
               for key in TAG_KEYS if record.get(key) != tag[key]]
    if digest is not None and record.get("sources") != digest:
        reasons.append(f"kernel sources changed since the build (digest {record.get('sources')} "
                       f"-> {digest})")
    return reasons


def cache_root() -> Path:
    """Where first-use builds go: ``$TTGNN_CACHE/ext``, else ``~/.cache/ttgnn/ext``."""
    env = os.environ.get("TTGNN_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "ttgnn") / "ext"


def jit_build_dir(tag: dict[str, Any], digest: str, *, cuda: bool, flags: Iterable[str]) -> Path:
    """The cache folder of a first-use build for the torch described by ``tag``.

    ``<cache_root>/<python>-torch<version>-cxx11abi<0|1>-<cpu|cuXYZ>/<cpu|cuda>-<hash>``: one
    folder per torch (so builds for two torch versions never meet), one leaf per set of
    sources, flags and CUDA architectures (so editing a kernel or a flag builds afresh).

    Args:
        tag (dict): :func:`torch_tag` of the running torch.
        digest (str): :func:`source_digest` of the sources.
        cuda (bool): whether the build holds the CUDA kernels.
        flags (iterable of str): the C++ flags.
    """
    cuda_tag = "cu" + tag["cuda"].replace(".", "") if tag["cuda"] else "cpu"
    torch_folder = f"{tag['python']}-torch{tag['torch']}-cxx11abi{int(tag['cxx11abi'])}-{cuda_tag}"
    leaf_key = json.dumps({"torch_git": tag["torch_git"], "sources": digest, "cuda": cuda,
                           "flags": list(flags) + list(JIT_EXTRA_CFLAGS), "nvcc": list(NVCC_FLAGS),
                           "archs": cuda_arch_list() if cuda else None}, sort_keys=True)
    leaf = hashlib.sha256(leaf_key.encode()).hexdigest()[:12]
    return cache_root() / torch_folder / f"{'cuda' if cuda else 'cpu'}-{leaf}"
