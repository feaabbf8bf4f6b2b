"""Loads the compiled kernels once, built for the running torch, and says which devices they serve.

A compiled torch extension runs only with the torch it was compiled against (torch's C++ ABI
changes between versions), so the kernels are taken from the first of:

1. **prebuilt**: ``ttgnn._C``, built ahead of time by ``setup.py`` when torch was importable at
   build time (``pip install --no-build-isolation``, ``make setup``), if its build record
   (``ttgnn/_C.build.json``) names the running Python, torch (version and commit), CUDA and
   C++ ABI. (Built from other kernel sources than those on disk, in a checkout whose kernels
   were edited since: loaded, with one warning to rebuild.)
2. **cache**: a build for this torch compiled on an earlier first use, under
   ``~/.cache/ttgnn/ext/<python>-torch<version>-cxx11abi<0|1>-<cpu|cuXYZ>/`` (``$TTGNN_CACHE``
   moves it);
3. **compiled**: compiled now with :func:`torch.utils.cpp_extension.load` into that cache (a
   few minutes, once per torch version; one log line says so). The CUDA kernels are included
   when torch has CUDA, a GPU is visible and the toolkit is complete; otherwise the CPU kernels
   are built alone and a warning names what was missing;
4. otherwise the pure-PyTorch reference, with one :class:`ExtensionWarning` that says how to
   build the kernels (``python -m ttgnn.build_kernels``).

``TTGNN_NO_EXTENSION=1`` skips all of this (the reference, no warning); ``TTGNN_NO_CUDA=1``
builds the CPU kernels only. Importing ttgnn never fails because of the extension.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

import torch

from . import _build
from .fileio import exclusive_lock

__all__ = [
    "ExtensionWarning",
    "ExtensionInfo",
    "available",
    "load_error",
    "info",
    "has_kernel",
    "backend",
    "log_backends",
    "jit_build_dir",
    "REBUILD_COMMAND",
]

log = logging.getLogger(__name__)

_OPS = ("tt_lookup", "tt_lookup_backward")
#: The command that builds the kernels for the running torch (printed in warnings).
REBUILD_COMMAND = "python -m ttgnn.build_kernels"
#: Base name of the first-use library in its cache folder.
_JIT_NAME = "ttgnn_C"
#: Held (``flock``) by the process compiling into a first-use build folder; the kernel releases it
#: when that process dies, so a killed build never blocks the next one.
_BUILD_LOCK_NAME = "build.lock"
#: In a first-use build folder: the build record, and the log a failed build leaves.
_RECORD_NAME, _FAILURE_LOG_NAME = "build.json", "failed.log"


class ExtensionWarning(UserWarning):
    """The compiled kernels are missing or incomplete; the pure-PyTorch reference is used instead."""


@dataclass(frozen=True)
class ExtensionInfo:
    """Where the compiled kernels came from.

    Attributes:
        origin (str): ``"prebuilt"`` (``ttgnn._C`` from the install), ``"cache"`` (an earlier
            first-use build), ``"compiled"`` (built by this process), ``"disabled"``
            (``TTGNN_NO_EXTENSION``) or ``"unavailable"``.
        path (str, optional): the library loaded.
        error (str, optional): why no kernels are loaded (``origin`` ``"disabled"`` or
            ``"unavailable"``).
        cuda_skipped (str, optional): why a library for a CUDA torch has no CUDA kernels.
        notes (tuple of str): what was tried first and set aside (a stale prebuilt library).
    """

    origin: str
    path: Optional[str] = None
    error: Optional[str] = None
    cuda_skipped: Optional[str] = None
    notes: tuple[str, ...] = ()

    @property
    def loaded(self) -> bool:
        """Whether a compiled library is loaded."""
        return self.origin in ("prebuilt", "cache", "compiled")


_info: Optional[ExtensionInfo] = None


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


#: Where ttgnn's modules are: the frames a warning about the kernels skips. Spelt as the frames
#: spell their files (``__file__`` as imported), not resolved like :func:`_package_dir`.
_PACKAGE_PREFIX = os.path.dirname(__file__) + os.sep


def _import_machinery(frame) -> bool:
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name  # what `warnings` itself steps over


def _warn(message: str) -> None:
    """Issues an :class:`ExtensionWarning` attributed to the first line outside ttgnn on the way
    to it: the user's ``import ttgnn`` (the kernels load when ``ttgnn.ops`` is imported), or the
    call that asked for them, however deep in the loading steps it is raised."""
    frame, level = sys._getframe(0), 1
    while True:  # count the frames as `warnings` does for stacklevel: import machinery left out
        frame = frame.f_back
        while frame is not None and _import_machinery(frame):
            frame = frame.f_back
        level += 1
        if frame is None or not frame.f_code.co_filename.startswith(_PACKAGE_PREFIX):
            break
    warnings.warn(message, ExtensionWarning, stacklevel=level)


def _ops_registered() -> bool:
    return all(hasattr(torch.ops.ttgnn, name) for name in _OPS)


# The three actions that touch the process; tests replace them.
def _import_prebuilt() -> None:
    importlib.import_module(f"{__package__}._C")  # registers torch.ops.ttgnn.*


def _load_library(path: Path) -> None:
    """Loads a first-use build as ``import ttgnn._C`` loads the prebuilt one: as the extension
    module ``ttgnn._C`` (its ops register on load; its Python functions come with it)."""
    name = f"{__package__}._C"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a loadable extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    setattr(sys.modules[__package__], "_C", module)


def _cpp_extension_load(**kwargs) -> str:
    from torch.utils import cpp_extension

    return cpp_extension.load(**kwargs)  # the library's path (is_python_module=False)


def _gpu_visible() -> bool:
    return torch.cuda.is_available()


def jit_build_dir(cuda: Optional[bool] = None) -> Optional[Path]:
    """The cache folder of the first-use build for the running torch (``None`` without sources).

    Args:
        cuda (bool, optional): for a build with the CUDA kernels. (default: whether they are
            wanted here: a CUDA torch, a visible GPU, ``TTGNN_NO_CUDA`` unset)
    """
    kernels = _build.kernel_dir(_package_dir())
    if kernels is None:
        return None
    if cuda is None:
        cuda = _build.cuda_wanted() and _gpu_visible()
    return _build.jit_build_dir(_build.torch_tag(), _build.source_digest(kernels, cuda=cuda),
                                cuda=cuda, flags=_build.cxx_flags())


def _prebuilt_library() -> Optional[Path]:
    """The file of ``ttgnn._C`` if the install has one (not loaded)."""
    spec = importlib.util.find_spec(f"{__package__}._C")
    return Path(spec.origin) if spec is not None and spec.origin else None


def _prebuilt() -> tuple[Optional[ExtensionInfo], tuple[str, ...]]:
    """Loads ``ttgnn._C`` if it is there and built for the running torch."""
    library = _prebuilt_library()
    if library is None:
        return None, ()
    record = _build.read_record(library.with_name(_build.RECORD_NAME))
    reasons = _build.stale_reasons(record, _build.torch_tag(), None)
    if reasons:
        note = f"{library} was not built for this torch: {'; '.join(reasons)}"
        log.info("%s; using a build for this torch instead", note)
        return None, (note,)
    try:
        _import_prebuilt()
    except (ImportError, OSError) as exc:
        note = f"{library} failed to load ({type(exc).__name__}: {exc})"
        log.info("%s; using a build for this torch instead", note)
        return None, (note,)
    if not _ops_registered():
        return ExtensionInfo("unavailable", str(library), "ttgnn._C loaded but did not register the "
                             "ttgnn ops"), ()
    notes = ()
    kernels = _build.kernel_dir(_package_dir())
    if kernels is not None:
        # Built for this torch from other sources: a checkout whose kernels were edited since
        # `make setup`. Still compatible; compiling in the background of every import until the
        # developer rebuilds would cost more than it saves, so say it once instead.
        changed = _build.stale_reasons(record, _build.torch_tag(),
                                       _build.source_digest(kernels, cuda=bool(record.get("cuda_kernels"))))
        if changed:
            notes = (f"{library}: {changed[0]}",)
            _warn(f"ttgnn: {library} was built from other kernel sources than those in {kernels}; "
                  f"rebuild it (`make setup`, or `pip install --no-build-isolation -e .`) to run the "
                  f"current kernels")
    return ExtensionInfo("prebuilt", str(library), cuda_skipped=record.get("cuda_skipped"),
                         notes=notes), ()


@contextlib.contextmanager
def _build_environment(cuda: bool, cxx: Optional[str] = None) -> Iterator[None]:
    """``ninja`` on ``PATH`` (pip installs it beside the interpreter, which an unactivated venv
    does not put on PATH), the CUDA architectures, and ``CXX`` when ``cxx`` is given, for the
    duration of a build."""
    saved = {key: os.environ.get(key) for key in ("PATH", "TORCH_CUDA_ARCH_LIST", "CXX")}
    extra = [str(Path(sys.executable).parent)]
    with contextlib.suppress(ImportError):
        import ninja  # the PyPI package

        if ninja.BIN_DIR:  # empty in some layouts: "" on PATH would be the working folder
            extra.append(str(ninja.BIN_DIR))
    os.environ["PATH"] = os.pathsep.join(extra + [saved["PATH"] or os.defpath])
    if cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = _build.cuda_arch_list()
    if cxx is not None:
        os.environ["CXX"] = cxx
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _error_summary(exc: BaseException, lines: int = 2) -> str:
    """The telling lines of a build error: the last ones that say "error", "not found" or
    "cannot find", leaving out compiler command lines (the whole output goes to the log)."""
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    telling = [line for line in text if len(line) < 300
               and re.search(r"error|not found|cannot find|no such", line, re.IGNORECASE)]
    chosen = (telling or text)[-lines:]
    return " | ".join(chosen) if chosen else type(exc).__name__


def _compile(build_dir: Path, kernels: Path, cuda: bool) -> tuple[Path, Optional[str]]:
    """Compiles and loads the kernels into ``build_dir``; returns the library and why CUDA was skipped.

    The CUDA kernels are tried when ``cuda``; if the toolkit is incomplete or their build fails,
    the CPU kernels are built alone (with one warning naming the problem).
    """
    cuda_skipped = None
    if cuda:
        cuda_skipped = _build.cuda_problem()
        if cuda_skipped is not None:
            cuda = False
            _warn(f"ttgnn: building the CPU kernels only: the CUDA kernels cannot be built here: "
                  f"{cuda_skipped}")
    baton = build_dir / "lock"  # torch's own build lock: only a build that was killed leaves it
    if baton.exists():  # (we hold the build lock, so no live ttgnn build is using it)
        log.warning("ttgnn: removing %s, left by a build that did not finish", baton)
        baton.unlink(missing_ok=True)
    # Once per build, outside the attempts: a compiler with only a static libstdc++ is replaced,
    # and where none here has the shared one, the build fails with that reason (no CUDA retry).
    override = _build.cxx_override()
    cxx = None
    if override is not None:
        cxx, why = override
        log.warning("ttgnn: %s", why)
    flags = _build.cxx_flags()
    while True:
        log.warning("ttgnn: compiling the TT-lookup kernels (%s) for torch %s into %s; this "
                    "happens once per torch version and takes a few minutes",
                    "CPU and CUDA" if cuda else "CPU", torch.__version__, build_dir)
        start = time.perf_counter()
        try:
            with _build_environment(cuda, cxx):
                library = _cpp_extension_load(
                    name=_JIT_NAME,
                    sources=[str(path) for path in _build.sources(kernels, cuda=cuda)],
                    extra_cflags=flags + list(_build.JIT_EXTRA_CFLAGS),
                    extra_cuda_cflags=list(_build.NVCC_FLAGS) if cuda else None,
                    extra_ldflags=list(_build.LINK_FLAGS),
                    extra_include_paths=[str(kernels)],
                    build_directory=str(build_dir),
                    with_cuda=cuda,
                    is_python_module=False,
                    verbose=False,
                )
        except Exception as exc:  # compiler errors, missing ninja, CUDA toolchain checks
            if not cuda:
                raise
            cuda = False
            cuda_skipped = f"the CUDA build failed: {_error_summary(exc)}"
            _warn(f"ttgnn: building the CPU kernels only: {cuda_skipped}")
            continue
        log.info("ttgnn: compiled the TT-lookup kernels in %.0f s", time.perf_counter() - start)
        # torch renames a second build in one process (ttgnn_C_v1): take the path it returns.
        return Path(library), cuda_skipped


def _first_use(notes: tuple[str, ...]) -> ExtensionInfo:
    """A build for this torch from the cache, else compiled now."""
    kernels = _build.kernel_dir(_package_dir())
    if kernels is None:
        return ExtensionInfo("unavailable", error="the kernel sources are not installed (no "
                             "ttgnn/_kernels folder)", notes=notes)
    tag = _build.torch_tag()
    cuda = _build.cuda_wanted() and _gpu_visible()
    digest = _build.source_digest(kernels, cuda=cuda)
    flags = _build.cxx_flags()
    build_dir = _build.jit_build_dir(tag, digest, cuda=cuda, flags=flags)
    cached = _from_cache(build_dir, tag, digest, notes, locked=False)
    if cached is not None:
        return cached
    with contextlib.ExitStack() as stack:
        try:  # a cache that cannot be written (read-only $HOME, TTGNN_CACHE a file) means no kernels, not no ttgnn
            build_dir.mkdir(parents=True, exist_ok=True)
            stack.enter_context(_build_lock(build_dir))
        except OSError as err:
            return ExtensionInfo("unavailable", error=f"cannot write the kernel cache {build_dir} "
                                 f"({err.strerror or err}); set TTGNN_CACHE to a writable folder", notes=notes)
        cached = _from_cache(build_dir, tag, digest, notes)  # built by the process we waited for
        if cached is not None:
            return cached
        return _build_now(build_dir, kernels, cuda, tag, digest, flags, notes)


def _from_cache(build_dir: Path, tag: dict, digest: str, notes: tuple[str, ...],
                locked: bool = True) -> Optional[ExtensionInfo]:
    """The finished first-use build in ``build_dir`` (or the failure of an earlier one), ``None``
    if there is neither. A library that no longer matches the checksum its build recorded (a
    damaged cache: loading it killed the process with SIGBUS) is never loaded: holding the build
    lock (``locked``), it is deleted with its record, so that it is compiled again."""
    record = _build.read_record(build_dir / _RECORD_NAME)
    library = build_dir / Path(str((record or {}).get("library", f"{_JIT_NAME}.so"))).name
    if record is not None and library.is_file() and not _build.stale_reasons(record, tag, digest):
        recorded = record.get("library_checksum")
        if recorded is not None and _build.library_checksum(library) != recorded:
            if locked:
                log.warning("ttgnn: the compiled kernels in %s changed since they were built (a damaged cache); "
                            "compiling them again", library)
                (build_dir / _RECORD_NAME).unlink(missing_ok=True)
                library.unlink(missing_ok=True)
            return None
        try:
            _load_library(library)
        except (ImportError, OSError, RuntimeError) as exc:
            return ExtensionInfo("unavailable", str(library), f"{library} failed to load "
                                 f"({type(exc).__name__}: {exc})", notes=notes)
        return _checked(ExtensionInfo("cache", str(library), cuda_skipped=record.get("cuda_skipped"),
                                      notes=notes))
    failure_log = build_dir / _FAILURE_LOG_NAME
    if failure_log.is_file():
        return ExtensionInfo("unavailable", error=f"an earlier build for this torch failed "
                             f"(log: {failure_log})", notes=notes)
    return None


def _build_lock(build_dir: Path):
    """Holds ``build_dir/build.lock``: one build per folder at a time, across processes."""
    return exclusive_lock(build_dir / _BUILD_LOCK_NAME,
                          waiting=f"ttgnn: waiting for another process that is compiling the kernels into {build_dir}")


def _build_now(build_dir: Path, kernels: Path, cuda: bool, tag: dict, digest: str, flags: list,
               notes: tuple[str, ...]) -> ExtensionInfo:
    """Compiles and loads the kernels into ``build_dir`` (under its build lock) and records the build."""
    failure_log = build_dir / _FAILURE_LOG_NAME
    try:
        library, cuda_skipped = _compile(build_dir, kernels, cuda)
        _load_library(library)
    except Exception as exc:
        failure_log.write_text(f"torch {torch.__version__}, sources {kernels}\n\n{exc}\n")
        return ExtensionInfo("unavailable", error=f"compiling them failed: {_error_summary(exc)} "
                             f"(full log: {failure_log})", notes=notes)
    record = _build.make_record(tag, digest, cuda_kernels=cuda and cuda_skipped is None,
                                cuda_skipped=cuda_skipped, flags=flags, built_by="jit")
    record["library"] = library.name
    record["library_checksum"] = _build.library_checksum(library)
    _build.write_record(build_dir / _RECORD_NAME, record)
    return _checked(ExtensionInfo("compiled", str(library), cuda_skipped=cuda_skipped, notes=notes))


def _checked(result: ExtensionInfo) -> ExtensionInfo:
    if _ops_registered():
        return result
    return ExtensionInfo("unavailable", result.path, f"{result.path} loaded but did not register "
                         "the ttgnn ops", notes=result.notes)


def _load_once() -> ExtensionInfo:
    if _build.env_flag("TTGNN_NO_EXTENSION"):
        return ExtensionInfo("disabled", error="TTGNN_NO_EXTENSION is set")
    result, notes = _prebuilt()
    if result is None:
        result = _first_use(notes)
    if result.origin == "unavailable":
        _warn(f"ttgnn: the compiled TT-lookup kernels are unavailable: {result.error}. Using the "
              f"pure-PyTorch reference (same results, slower). To build the kernels for this torch: "
              f"`{REBUILD_COMMAND}` (needs a C++ compiler); TTGNN_NO_EXTENSION=1 silences this.")
    elif (result.origin in ("prebuilt", "cache") and result.cuda_skipped
          and torch.version.cuda is not None and _gpu_visible()):
        # A library built earlier without its CUDA part ("compiled" has warned while building).
        how = ("reinstall ttgnn with `pip install --no-build-isolation --force-reinstall --no-deps`"
               if result.origin == "prebuilt" else f"`{REBUILD_COMMAND} --force`")
        _warn(f"ttgnn: the compiled kernels have no CUDA part ({result.cuda_skipped}); lookups on "
              f"the GPU use the pure-PyTorch reference. Fix that, then {how}.")
    return result


def _load() -> bool:
    global _info
    if _info is None:
        _info = _load_once()
    return _info.loaded


def info() -> ExtensionInfo:
    """Where the compiled kernels came from (loading them on the first call)."""
    _load()
    return _info


def available() -> bool:
    """Whether compiled kernels (``ttgnn._C`` or a first-use build) are loaded, for any device."""
    return _load()


def load_error() -> Optional[str]:
    """Why no compiled kernels are loaded, or ``None`` when they are."""
    _load()
    return _info.error


_kernels: dict[str, bool] = {}


def has_op_kernel(name: str, dispatch_key: str = "CPU") -> bool:
    """Whether the loaded kernels define op ``ttgnn::<name>`` with a ``dispatch_key`` kernel;
    ``False`` for an op that a ``ttgnn._C`` built before it does not define (torch raises there)."""
    if not _load():
        return False
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"ttgnn::{name}", dispatch_key)
    except RuntimeError:  # "operator ttgnn::<name> does not exist"
        return False


def has_kernel(device_type: str) -> bool:
    """Whether the loaded kernels serve ``device_type`` (``"cpu"``, ``"cuda"``)."""
    if device_type not in _kernels:
        key = {"cpu": "CPU", "cuda": "CUDA"}.get(device_type)
        _kernels[device_type] = (
            _load()
            and key is not None
            and all(has_op_kernel(name, key) for name in _OPS)
        )
    return _kernels[device_type]


def backend(device: Union[str, torch.device, None] = None) -> str:
    """The lookup implementation used for float32/float64 cores on ``device``.

    Args:
        device (str or torch.device, optional): the device of the cores. (default: ``"cpu"``)

    Returns:
        ``"cpu-kernel"`` or ``"cuda-kernel"`` for the compiled kernels, ``"reference"`` for the
        pure-PyTorch path (other devices, or no extension).
    """
    device_type = torch.device(device if device is not None else "cpu").type
    return f"{device_type}-kernel" if has_kernel(device_type) else "reference"


def log_backends() -> None:
    """Logs, once per process, which lookup implementation each device gets."""
    global _logged_once
    if _logged_once:
        return
    _logged_once = True
    if not available():
        log.info("TT lookup: compiled kernels unavailable (%s); using the pure-PyTorch reference",
                 load_error())
        return
    devices = [d for d in ("cpu", "cuda") if has_kernel(d)]
    log.info("TT lookup: compiled kernels (%s, %s) for %s; other devices use the pure-PyTorch "
             "reference", _info.origin, _info.path, ", ".join(devices) or "no device")


_logged_once = False


def _remove_build(build_dir: Path) -> None:
    """Deletes a first-use build (a library loaded from it stays mapped in this process): all but its
    lock file, under that lock, so that no process compiling or loading it meanwhile sees half of it."""
    if not build_dir.is_dir():
        return
    with _build_lock(build_dir):
        for entry in build_dir.iterdir():
            if entry.name == _BUILD_LOCK_NAME:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
