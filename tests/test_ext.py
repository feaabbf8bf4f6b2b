"""How ttgnn finds kernels built for the running torch (ttgnn/_ext.py, setup.py) and the command
that builds them (ttgnn/build_kernels.py); the recipe they share (ttgnn/_build.py) is tested in
tests/test_build_recipe.py.

Loading and compiling are replaced by fakes here (a process can load the kernels' library only
once, and a real compile takes minutes); tests/test_packaging.py loads a real library from the
first-use cache in a fresh virtual environment.
"""
import fcntl
import functools
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

from build_fakes import KERNELS, ROOT, FakeCppExtension, cuda_torch, tag
from messages import logged
from waiting import wait_for_log
from ttgnn import _build, _ext, build_kernels, ops


def _cpu_sources():
    """The CPU sources of the checkout: kernels/*.cpp and kernels/cpu/*.cpp."""
    return list(KERNELS.glob("*.cpp")) + list(KERNELS.glob("cpu/*.cpp"))


class FakeBuilds:
    """Stands in for torch's loader and compiler; records what ttgnn asked of them."""

    def __init__(self, fail_cuda_with=None, fail_with=None):
        self.fail_cuda_with = fail_cuda_with
        self.fail_with = fail_with
        self.compiles = []  # the keyword arguments of each cpp_extension.load call
        self.environments = []  # CXX and TORCH_CUDA_ARCH_LIST during each call
        self.loaded = []  # libraries loaded from the cache

    def compile(self, **kwargs):
        self.compiles.append(kwargs)
        self.environments.append({key: os.environ.get(key) for key in ("CXX", "TORCH_CUDA_ARCH_LIST")})
        if kwargs["with_cuda"] and self.fail_cuda_with:
            raise RuntimeError(self.fail_cuda_with)
        if self.fail_with:
            raise RuntimeError(self.fail_with)
        library = Path(kwargs["build_directory"]) / f"{kwargs['name']}.so"
        library.write_bytes(b"fake library")
        return str(library)

    def load_library(self, path):
        self.loaded.append(Path(path))


@pytest.fixture
def fresh_ext(monkeypatch, tmp_path):
    """_ext with no state, its cache in tmp_path, no prebuilt library, and fake builds."""
    monkeypatch.setattr(_ext, "_info", None)
    monkeypatch.setattr(_ext, "_kernels", {})
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "cache"))
    for name in ("TTGNN_NO_EXTENSION", "TTGNN_NO_CUDA", "TTGNN_NATIVE", "TORCH_CUDA_ARCH_LIST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: None)
    monkeypatch.setattr(_ext, "_ops_registered", lambda: True)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: False)

    def import_prebuilt():
        raise AssertionError("a prebuilt library was imported")

    monkeypatch.setattr(_ext, "_import_prebuilt", import_prebuilt)
    fakes = FakeBuilds()
    monkeypatch.setattr(_ext, "_cpp_extension_load", fakes.compile)
    monkeypatch.setattr(_ext, "_load_library", fakes.load_library)
    return fakes


def _compile_call(build_dir: Path, cuda: bool) -> dict:
    """What the first-use build asks of torch's compiler: the recipe of ttgnn/_build.py."""
    return dict(name="ttgnn_C", sources=[str(path) for path in _build.sources(KERNELS, cuda=cuda)],
                extra_cflags=_build.cxx_flags() + list(_build.JIT_EXTRA_CFLAGS),
                extra_cuda_cflags=list(_build.NVCC_FLAGS) if cuda else None,
                extra_ldflags=list(_build.LINK_FLAGS), extra_include_paths=[str(KERNELS)],
                build_directory=str(build_dir), with_cuda=cuda, is_python_module=False, verbose=False)


def _cached_build(build_dir: Path, sources=None, library="ttgnn_C.so") -> Path:
    """What a finished first-use build leaves in ``build_dir``: the library and its build record
    (for the running torch and ``sources``, default the checkout's CPU sources). Returns the library."""
    build_dir.mkdir(parents=True, exist_ok=True)
    path = build_dir / library
    path.write_bytes(b"fake library")
    record = _build.make_record(_build.torch_tag(), sources or _build.source_digest(KERNELS, cuda=False),
                                cuda_kernels=False, cuda_skipped=None, flags=_build.cxx_flags(), built_by="jit")
    record["library"] = library
    _build.write_record(build_dir / "build.json", record)
    return path


def _load_collecting_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = _ext._load_once()
    return info, [w for w in caught if issubclass(w.category, _ext.ExtensionWarning)]


# --- build records: a library built for another torch is never loaded ------------------------

def _install_prebuilt(monkeypatch, tmp_path, record_tag=None, digest=None, cuda_kernels=False,
                      cuda_skipped=None):
    """A prebuilt ttgnn._C (a stand-in file) with its build record, where _ext looks for it.

    The record names ``record_tag`` (default: the running torch) and ``digest`` (default: the
    checkout's sources, with the CUDA ones when ``cuda_kernels``). Returns the library's path.
    """
    library = tmp_path / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so"
    library.parent.mkdir(exist_ok=True)
    library.write_bytes(b"a prebuilt library")
    if digest is None:
        digest = _build.source_digest(KERNELS, cuda=cuda_kernels)
    _build.write_record(library.with_name(_build.RECORD_NAME), _build.make_record(
        record_tag or tag(), digest, cuda_kernels=cuda_kernels, cuda_skipped=cuda_skipped, flags=[],
        built_by="setup.py"))
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: library)
    return library


def _stale_prebuilt(monkeypatch, tmp_path):
    """A prebuilt ttgnn._C built for torch 2.12.0+cpu, and the note _ext keeps when it sets it aside."""
    library = _install_prebuilt(monkeypatch, tmp_path, tag(torch="2.12.0+cpu"))
    return library, (f"{library} was not built for this torch: torch: built for '2.12.0+cpu', running "
                     f"{torch.__version__!r}")


def test_stale_prebuilt_is_not_imported_and_a_build_for_this_torch_is_made(fresh_ext, monkeypatch,
                                                                          tmp_path, caplog):
    library = _install_prebuilt(monkeypatch, tmp_path, tag(torch="2.12.0+cpu", python="cp310"))

    with caplog.at_level("INFO", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()

    note = (f"{library} was not built for this torch: python: built for 'cp310', running "
            f"{tag()['python']!r}; torch: built for '2.12.0+cpu', running {torch.__version__!r}")
    built = _ext.jit_build_dir(cuda=False) / "ttgnn_C.so"
    assert info == _ext.ExtensionInfo("compiled", str(built), notes=(note,)) and caught == []
    assert len(fresh_ext.compiles) == 1
    assert logged(caplog, "ttgnn._ext")[0] == f"{note}; using a build for this torch instead"


def test_a_prebuilt_library_that_fails_to_load_is_set_aside_with_a_note(fresh_ext, monkeypatch, tmp_path,
                                                                       caplog):
    library = _install_prebuilt(monkeypatch, tmp_path)

    def import_prebuilt():
        raise ImportError("undefined symbol: _ZN3c104impl")

    monkeypatch.setattr(_ext, "_import_prebuilt", import_prebuilt)
    with caplog.at_level("INFO", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()
    note = f"{library} failed to load (ImportError: undefined symbol: _ZN3c104impl)"
    assert (info.origin, info.notes, caught) == ("compiled", (note,), [])
    assert logged(caplog, "ttgnn._ext")[0] == f"{note}; using a build for this torch instead"


def test_a_prebuilt_library_that_registers_no_ops_is_unavailable(fresh_ext, monkeypatch, tmp_path):
    library = _install_prebuilt(monkeypatch, tmp_path)
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: None)
    monkeypatch.setattr(_ext, "_ops_registered", lambda: False)
    info, caught = _load_collecting_warnings()
    assert info == _ext.ExtensionInfo("unavailable", str(library),
                                      "ttgnn._C loaded but did not register the ttgnn ops")
    assert len(caught) == 1 and fresh_ext.compiles == []


def test_a_build_that_registers_no_ops_is_unavailable_with_its_path_and_notes(fresh_ext, monkeypatch, tmp_path):
    # A library that loads but whose ops are not there (a build of other sources) is not used:
    # the reference runs, the warning names the library, and the notes of what was set aside stay.
    library = _install_prebuilt(monkeypatch, tmp_path)
    library.with_name(_build.RECORD_NAME).unlink()
    monkeypatch.setattr(_ext, "_ops_registered", lambda: False)

    info, caught = _load_collecting_warnings()

    built = str(_ext.jit_build_dir(cuda=False) / "ttgnn_C.so")
    assert (info.origin, info.path, info.error) == (
        "unavailable", built, f"{built} loaded but did not register the ttgnn ops")
    assert info.notes == (f"{library} was not built for this torch: it has no build record (built by an older "
                          "setup.py, or copied by hand)",)
    assert [str(w.message).split(". Using")[0] for w in caught] == [
        f"ttgnn: the compiled TT-lookup kernels are unavailable: {info.error}"]


def test_a_build_has_ninja_the_architectures_and_cxx_in_its_environment_and_leaves_it_as_found(monkeypatch):
    import ninja

    keys = ("PATH", "TORCH_CUDA_ARCH_LIST", "CXX")
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setenv("CXX", "c++")
    with _ext._build_environment(cuda=True, cxx="g++-13"):
        inside = {key: os.environ.get(key) for key in keys}
    assert inside == {"PATH": os.pathsep.join([str(Path(sys.executable).parent), str(ninja.BIN_DIR), "/usr/bin"]),
                      "TORCH_CUDA_ARCH_LIST": _build.cuda_arch_list(), "CXX": "g++-13"}
    assert {key: os.environ.get(key) for key in keys} == {"PATH": "/usr/bin", "TORCH_CUDA_ARCH_LIST": None, "CXX": "c++"}
    # Without a PATH the system's default search path follows ours; a CPU build sets no architectures.
    monkeypatch.delenv("PATH")
    with _ext._build_environment(cuda=False):
        inside = {key: os.environ.get(key) for key in keys}
    assert inside["PATH"].split(os.pathsep)[-len(os.defpath.split(os.pathsep)):] == os.defpath.split(os.pathsep)
    assert inside["TORCH_CUDA_ARCH_LIST"] is None and inside["CXX"] == "c++"
    assert "PATH" not in os.environ


@pytest.mark.parametrize("cuda_kernels,cuda_skipped", [(False, None), (True, None), (False, "nvcc missing")])
def test_matching_prebuilt_is_imported(fresh_ext, monkeypatch, tmp_path, cuda_kernels, cuda_skipped):
    # A library with the CUDA kernels matches the digest of the sources with the CUDA ones.
    library = _install_prebuilt(monkeypatch, tmp_path, cuda_kernels=cuda_kernels, cuda_skipped=cuda_skipped)
    imported = []
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: imported.append(True))
    info, caught = _load_collecting_warnings()
    assert (info, imported, caught) == (
        _ext.ExtensionInfo("prebuilt", str(library), cuda_skipped=cuda_skipped), [True], [])
    assert fresh_ext.compiles == []


def test_prebuilt_from_other_sources_is_loaded_with_one_warning_to_rebuild(fresh_ext, monkeypatch,
                                                                         tmp_path):
    """A checkout whose kernels changed since `make setup`: same torch, so it still loads."""
    library = _install_prebuilt(monkeypatch, tmp_path, digest="digest-of-older-sources")
    imported = []
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: imported.append(True))
    info, caught = _load_collecting_warnings()
    assert (info.origin, imported, fresh_ext.compiles) == ("prebuilt", [True], [])
    digest = _build.source_digest(KERNELS, cuda=False)
    assert info.notes == (f"{library}: kernel sources changed since the build (digest digest-of-older-sources "
                          f"-> {digest})",)
    assert [str(w.message) for w in caught] == [
        f"ttgnn: {library} was built from other kernel sources than those in {KERNELS}; rebuild it (`make "
        "setup`, or `pip install --no-build-isolation -e .`) to run the current kernels"]


def _loaded_here() -> _ext.ExtensionInfo:
    """The kernels this process loaded (``make setup`` builds them); skips where there are none,
    fails under CI, where they must be there."""
    info = _ext.info()
    if info.origin != "prebuilt":
        message = f"ttgnn._C was not loaded as a prebuilt library: {info}"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so `make setup` must have built and recorded it")
        pytest.skip(message)
    return info


def test_this_checkout_loads_its_prebuilt_library():
    """`make setup` builds ttgnn._C and records the torch; importing ttgnn loads it, no compile."""
    info = _loaded_here()
    record = _build.read_record(Path(info.path).with_name(_build.RECORD_NAME))
    assert record["built_by"] == "setup.py"
    assert record["torch"] == torch.__version__
    assert record["sources"] == _build.source_digest(KERNELS, cuda=record["cuda_kernels"])
    # Found without loading, imported (again: a no-op), and its ops are there.
    assert _ext._prebuilt_library() == Path(info.path)
    _ext._import_prebuilt()
    assert sys.modules["ttgnn._C"].__file__ == info.path and _ext._ops_registered() is True


def test_the_kernels_loaded_here_serve_the_cpu(monkeypatch):
    _loaded_here()
    monkeypatch.setattr(_ext, "_kernels", {})  # asked afresh, and put back after
    assert _ext.has_kernel("cpu") is True and _ext.has_kernel("meta") is False
    assert _ext.backend() == _ext.backend("cpu") == _ext.backend(torch.device("cpu")) == "cpu-kernel"
    assert _ext.backend("meta") == "reference"
    assert _ext.backend("cuda") == ("cuda-kernel" if _ext.has_kernel("cuda") else "reference")
    monkeypatch.setattr(_ext, "_OPS", _ext._OPS + ("no_such_op",))
    assert _ext._ops_registered() is False


@pytest.mark.parametrize("origin,loaded", [
    ("prebuilt", True), ("cache", True), ("compiled", True), ("disabled", False), ("unavailable", False),
])
def test_loaded_means_a_compiled_library_is_in_the_process(origin, loaded):
    assert _ext.ExtensionInfo(origin).loaded is loaded


def test_the_prebuilt_library_is_looked_up_without_loading_it(monkeypatch):
    asked = []

    def find_spec(name, origin):
        asked.append(name)
        return None if origin == "none" else importlib.machinery.ModuleSpec(name, None, origin=origin)

    for origin, found in (("none", None), (None, None), ("/site/ttgnn/_C.so", Path("/site/ttgnn/_C.so"))):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name: find_spec(name, origin))
        assert _ext._prebuilt_library() == found
    assert asked == ["ttgnn._C"] * 3


def test_a_first_use_build_is_loaded_as_the_module_ttgnn_C(monkeypatch, tmp_path):
    import ttgnn

    # The process's own ttgnn._C comes back after the test.
    if "ttgnn._C" in sys.modules:
        monkeypatch.setitem(sys.modules, "ttgnn._C", sys.modules["ttgnn._C"])
    else:
        monkeypatch.delitem(sys.modules, "ttgnn._C", raising=False)
    monkeypatch.setattr(ttgnn, "_C", getattr(ttgnn, "_C", None), raising=False)
    library = tmp_path / "ttgnn_C_v1.py"  # a module file stands in for the compiled library
    library.write_text("LOADED_AS = __name__\n")
    _ext._load_library(library)
    module = sys.modules["ttgnn._C"]
    assert (module.LOADED_AS, module.__file__, ttgnn._C) == ("ttgnn._C", str(library), module)
    not_a_library = tmp_path / "ttgnn_C.txt"
    with pytest.raises(ImportError) as error:
        _ext._load_library(not_a_library)
    assert str(error.value) == f"{not_a_library} is not a loadable extension module"


# --- the first-use cache ----------------------------------------------------------------------

def test_first_use_compiles_once_then_loads_from_the_cache(fresh_ext, caplog):
    with caplog.at_level("INFO", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()
    assert (info.origin, caught) == ("compiled", [])
    build_dir = _ext.jit_build_dir(cuda=False)
    assert Path(info.path) == build_dir / "ttgnn_C.so"
    assert build_dir.is_relative_to(Path(os.environ["TTGNN_CACHE"]))
    progress = [r for r in caplog.records if "compiling the TT-lookup kernels" in r.getMessage()]
    assert len(progress) == 1 and torch.__version__ in progress[0].getMessage()
    assert fresh_ext.compiles == [_compile_call(build_dir, cuda=False)]
    assert sorted(fresh_ext.compiles[0]["sources"]) == sorted(str(p) for p in _cpu_sources())
    record = _build.read_record(build_dir / "build.json")
    assert record["built_by"] == "jit" and record["torch"] == torch.__version__

    info, caught = _load_collecting_warnings()  # a second process
    assert (info.origin, info.path, caught) == ("cache", str(build_dir / "ttgnn_C.so"), [])
    # Loaded as the module ttgnn._C both times: after compiling, and from the cache.
    assert len(fresh_ext.compiles) == 1 and fresh_ext.loaded == [build_dir / "ttgnn_C.so"] * 2


def test_a_cached_library_damaged_since_its_build_is_compiled_again_not_loaded(fresh_ext, caplog):
    # a truncated ttgnn_C.so with an intact build record killed `import ttgnn` with SIGBUS inside the
    # loader, where no exception can be caught
    info, _ = _load_collecting_warnings()
    library = Path(info.path)
    assert _build.read_record(library.parent / "build.json")["library_checksum"] == _build.library_checksum(library)
    library.write_bytes(b"fake lib")  # damaged: truncated
    fresh_ext.loaded.clear()
    with caplog.at_level("WARNING", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()
    assert (info.origin, info.path, caught) == ("compiled", str(library), [])
    assert len(fresh_ext.compiles) == 2 and fresh_ext.loaded == [library]  # only after compiling again
    assert "changed since they were built (a damaged cache); compiling them again" in caplog.text
    info, _ = _load_collecting_warnings()  # the new build's record holds the new library's checksum
    assert info.origin == "cache" and len(fresh_ext.compiles) == 2


def test_cache_of_another_torch_is_not_used(fresh_ext, monkeypatch):
    _load_collecting_warnings()
    real_tag = _build.torch_tag
    monkeypatch.setattr(_build, "torch_tag", lambda: dict(real_tag(), torch="2.14.1+cpu"))
    info, _ = _load_collecting_warnings()
    assert info.origin == "compiled" and len(fresh_ext.compiles) == 2
    assert "torch2.14.1+cpu" in info.path and len(fresh_ext.loaded) == 2  # each after compiling


def test_a_build_killed_midway_does_not_block_the_next_one(fresh_ext, caplog, monkeypatch):
    """A killed build leaves torch's ``lock`` file and its own lock held by a dead process; the
    next process compiles at once (flock is released by the kernel when its holder dies)."""
    build_dir = _ext.jit_build_dir(cuda=False)
    build_dir.mkdir(parents=True)
    (build_dir / "lock").write_text("")  # torch's baton, as a killed build leaves it
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(build_dir / 'build.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
    finally:
        holder.kill()
        holder.wait()
    monkeypatch.setattr(_build, "cxx_override", lambda: None)  # this machine's compiler, whatever it is
    with caplog.at_level("INFO", logger="ttgnn._ext"):
        info, _ = _load_collecting_warnings()
    assert info.origin == "compiled" and len(fresh_ext.compiles) == 1
    assert not (build_dir / "lock").exists()
    *messages, took = logged(caplog, "ttgnn._ext")
    assert messages == [
        f"ttgnn: removing {build_dir / 'lock'}, left by a build that did not finish",
        f"ttgnn: compiling the TT-lookup kernels (CPU) for torch {torch.__version__} into {build_dir}; this "
        "happens once per torch version and takes a few minutes"]
    seconds = re.fullmatch(r"ttgnn: compiled the TT-lookup kernels in (\d+) s", took)
    assert seconds and int(seconds.group(1)) < 60  # the fake compile writes one small file


def test_a_process_that_waits_for_a_build_loads_it_without_compiling(fresh_ext, caplog, monkeypatch, tmp_path):
    _, note = _stale_prebuilt(monkeypatch, tmp_path)
    build_dir = _ext.jit_build_dir(cuda=False)
    build_dir.mkdir(parents=True)
    fd = os.open(build_dir / "build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is compiling (a second open file holds it)
    result = []
    with caplog.at_level("WARNING", logger="ttgnn._ext"):
        waiter = threading.Thread(target=lambda: result.append(_load_collecting_warnings()[0]))
        waiter.start()
        wait_for_log(caplog, "waiting for another process", waiter)
        assert waiter.is_alive() and not fresh_ext.compiles  # waits, does not compile beside it
        library = _cached_build(build_dir)  # what the other process leaves when it finishes
        os.close(fd)
        waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert result[0] == _ext.ExtensionInfo("cache", str(library), notes=(note,))
    assert fresh_ext.compiles == [] and fresh_ext.loaded == [library]


def test_failed_build_falls_back_to_the_reference_with_one_warning(fresh_ext, monkeypatch, tmp_path):
    _, note = _stale_prebuilt(monkeypatch, tmp_path)
    fresh_ext.fail_with = "error: 'c++' failed: no such compiler"
    info, caught = _load_collecting_warnings()
    failure_log = _ext.jit_build_dir(cuda=False) / "failed.log"
    assert info == _ext.ExtensionInfo("unavailable", error="compiling them failed: error: 'c++' failed: no such "
                                      f"compiler (full log: {failure_log})", notes=(note,))
    assert [str(w.message) for w in caught] == [
        f"ttgnn: the compiled TT-lookup kernels are unavailable: {info.error}. Using the pure-PyTorch reference "
        f"(same results, slower). To build the kernels for this torch: `{_ext.REBUILD_COMMAND}` (needs a C++ "
        "compiler); TTGNN_NO_EXTENSION=1 silences this."]
    assert "no such compiler" in failure_log.read_text()

    # The next process does not compile again (a failed compile can take minutes) but says why.
    info, caught = _load_collecting_warnings()
    assert len(fresh_ext.compiles) == 1 and len(caught) == 1
    assert info == _ext.ExtensionInfo("unavailable", error=f"an earlier build for this torch failed (log: "
                                      f"{failure_log})", notes=(note,))


def test_a_finished_build_is_loaded_without_waiting_for_the_build_lock(fresh_ext):
    build_dir = _ext.jit_build_dir(cuda=False)
    library = _cached_build(build_dir)
    fd = os.open(build_dir / "build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process holds it (`python -m ttgnn.build_kernels --force`)
    result = []
    loader = threading.Thread(target=lambda: result.append(_load_collecting_warnings()[0]))
    try:
        loader.start()
        loader.join(timeout=30)
        finished_while_held = not loader.is_alive()
    finally:
        os.close(fd)
        loader.join(timeout=60)
    assert finished_while_held and result[0] == _ext.ExtensionInfo("cache", str(library))


def test_a_cache_folder_is_used_only_for_a_finished_build_of_these_sources(fresh_ext, monkeypatch, tmp_path):
    _, note = _stale_prebuilt(monkeypatch, tmp_path)
    build_dir = _ext.jit_build_dir(cuda=False)
    _cached_build(build_dir, sources="other-sources")  # a record copied by hand
    info, _ = _load_collecting_warnings()
    assert (info.origin, len(fresh_ext.compiles)) == ("compiled", 1)
    (build_dir / "ttgnn_C.so").unlink()  # a record whose library is gone
    info, _ = _load_collecting_warnings()
    assert (info.origin, len(fresh_ext.compiles)) == ("compiled", 2)
    # torch names a second build in one process ttgnn_C_v1: the record says which file to load.
    library = _cached_build(build_dir, library="ttgnn_C_v1.so")
    info, _ = _load_collecting_warnings()
    assert info == _ext.ExtensionInfo("cache", str(library), notes=(note,)) and fresh_ext.loaded[-1] == library
    # A record that does not name its library (edited by hand): the first build's name.
    record = _build.read_record(build_dir / "build.json")
    del record["library"]
    _build.write_record(build_dir / "build.json", record)
    info, _ = _load_collecting_warnings()
    assert (info.origin, info.path, len(fresh_ext.compiles)) == ("cache", str(build_dir / "ttgnn_C.so"), 2)


def test_a_cached_library_that_fails_to_load_is_unavailable_with_the_reason(fresh_ext, monkeypatch, tmp_path):
    _, note = _stale_prebuilt(monkeypatch, tmp_path)
    library = _cached_build(_ext.jit_build_dir(cuda=False))

    def load_library(path):
        raise OSError(f"{path}: undefined symbol: _ZN3c104impl")

    monkeypatch.setattr(_ext, "_load_library", load_library)
    info, caught = _load_collecting_warnings()
    assert info == _ext.ExtensionInfo("unavailable", str(library), f"{library} failed to load (OSError: {library}: "
                                      "undefined symbol: _ZN3c104impl)", notes=(note,))
    assert len(caught) == 1 and fresh_ext.compiles == []


def test_without_kernel_sources_nothing_is_compiled_and_the_notes_stay(fresh_ext, monkeypatch, tmp_path):
    _, note = _stale_prebuilt(monkeypatch, tmp_path)
    monkeypatch.setattr(_build, "kernel_dir", lambda package_dir: None)
    info, caught = _load_collecting_warnings()
    assert info == _ext.ExtensionInfo("unavailable", error="the kernel sources are not installed (no "
                                      "ttgnn/_kernels folder)", notes=(note,))
    assert len(caught) == 1 and fresh_ext.compiles == []


def test_the_first_use_folder_follows_the_kernels_this_machine_builds(fresh_ext, monkeypatch, tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS, kernels)
    monkeypatch.setattr(_build, "kernel_dir", lambda package_dir: kernels)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)  # a GPU, but a CPU torch: CPU kernels
    assert _ext.jit_build_dir() == _ext.jit_build_dir(cuda=False) != _ext.jit_build_dir(cuda=True)
    cpu, cuda = _ext.jit_build_dir(cuda=False), _ext.jit_build_dir(cuda=True)
    (next(kernels.glob("cuda/*.cu"))).write_text("// edited")  # only the CUDA build is stale
    assert (_ext.jit_build_dir(cuda=False), _ext.jit_build_dir(cuda=True) != cuda) == (cpu, True)


def test_no_extension_switch_skips_everything_quietly(fresh_ext, monkeypatch):
    monkeypatch.setenv("TTGNN_NO_EXTENSION", "1")
    info, caught = _load_collecting_warnings()
    assert (info.origin, info.error, caught, fresh_ext.compiles) == (
        "disabled", "TTGNN_NO_EXTENSION is set", [], [])


def test_public_helpers_report_the_reference_when_unavailable(fresh_ext, monkeypatch):
    monkeypatch.setenv("TTGNN_NO_EXTENSION", "1")
    assert not _ext.available() and _ext.load_error() == "TTGNN_NO_EXTENSION is set"
    assert _ext.backend("cpu") == "reference" and not _ext.has_kernel("cuda")


# --- CUDA: an incomplete toolchain means CPU kernels only, never a failed install --------------

def test_first_use_cuda_link_failure_builds_cpu_kernels_with_one_warning(fresh_ext, monkeypatch):
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_build, "cuda_problem", lambda cpp_extension=None: None)
    fresh_ext.fail_cuda_with = ("FAILED: ttgnn_C.so\n/usr/bin/ld: cannot find -lcudart: No such file "
                                "or directory\ncollect2: error: ld returned 1 exit status")
    info, caught = _load_collecting_warnings()
    assert info.origin == "compiled" and "cannot find -lcudart" in info.cuda_skipped
    assert [call["with_cuda"] for call in fresh_ext.compiles] == [True, False]
    assert not any(s.endswith(".cu") for s in fresh_ext.compiles[1]["sources"])
    assert len(caught) == 1 and "cannot find -lcudart" in str(caught[0].message)
    assert "CPU kernels only" in str(caught[0].message)
    record = _build.read_record(Path(info.path).parent / "build.json")
    assert record["cuda_kernels"] is False and "-lcudart" in record["cuda_skipped"]

    # Loaded again from the cache with a GPU: one warning that the CUDA part is missing.
    info, caught = _load_collecting_warnings()
    assert info.origin == "cache" and len(fresh_ext.compiles) == 2
    assert [str(w.message) for w in caught] == [
        f"ttgnn: the compiled kernels have no CUDA part ({info.cuda_skipped}); lookups on the GPU use the "
        f"pure-PyTorch reference. Fix that, then `{_ext.REBUILD_COMMAND} --force`."]


def test_a_prebuilt_library_without_its_cuda_part_says_how_to_reinstall(fresh_ext, monkeypatch, tmp_path):
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: None)
    _install_prebuilt(monkeypatch, tmp_path, cuda_skipped="nvcc not found")
    info, caught = _load_collecting_warnings()
    assert (info.origin, info.cuda_skipped) == ("prebuilt", "nvcc not found")
    assert [str(w.message) for w in caught] == [
        "ttgnn: the compiled kernels have no CUDA part (nvcc not found); lookups on the GPU use the "
        "pure-PyTorch reference. Fix that, then reinstall ttgnn with `pip install --no-build-isolation "
        "--force-reinstall --no-deps`."]


def test_a_cuda_build_gets_the_recipe_and_the_architectures_and_keeps_the_compiler(fresh_ext, monkeypatch,
                                                                                   caplog):
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_build, "cuda_problem", lambda cpp_extension=None: None)
    monkeypatch.setattr(_build, "cxx_override", lambda: None)
    monkeypatch.delenv("CXX", raising=False)
    with caplog.at_level("WARNING", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()
    build_dir = _ext.jit_build_dir()
    assert (info, caught) == (_ext.ExtensionInfo("compiled", str(build_dir / "ttgnn_C.so")), [])
    assert fresh_ext.compiles == [_compile_call(build_dir, cuda=True)]
    assert fresh_ext.environments == [{"CXX": None, "TORCH_CUDA_ARCH_LIST": _build.DEFAULT_CUDA_ARCH_LIST}]
    assert logged(caplog, "ttgnn._ext") == [
        f"ttgnn: compiling the TT-lookup kernels (CPU and CUDA) for torch {torch.__version__} into {build_dir}; "
        "this happens once per torch version and takes a few minutes"]
    record = _build.read_record(build_dir / "build.json")
    assert (record["cuda_kernels"], record["cuda_skipped"], record["sources"], record["library"]) == (
        True, None, _build.source_digest(KERNELS, cuda=True), "ttgnn_C.so")


def test_every_loading_warning_points_at_the_line_that_asked_for_the_kernels(fresh_ext, monkeypatch, tmp_path):
    """However deep in the loading steps a warning is raised, it names the caller's line."""
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)

    def where_warned(ask):
        monkeypatch.setattr(_ext, "_info", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ask(); line = sys._getframe().f_lineno  # noqa: E702 (one line: the caller's)
        return [(w.filename, w.lineno) for w in caught], line

    def one_warning_here(ask=_ext.info):
        places, line = where_warned(ask)
        assert places == [(__file__, line)]

    monkeypatch.setattr(_build, "cuda_problem", lambda cpp_extension=None: "nvcc not found")
    one_warning_here()  # compiling: the CUDA kernels cannot be built here
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "second"))
    monkeypatch.setattr(_build, "cuda_problem", lambda cpp_extension=None: None)
    fresh_ext.fail_cuda_with = "nvcc fatal: unsupported architecture"
    one_warning_here()  # compiling: the CUDA build failed
    one_warning_here()  # from the cache: no CUDA part
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "third"))
    monkeypatch.setenv("TTGNN_NO_CUDA", "1")
    fresh_ext.fail_with = "error: no compiler"
    one_warning_here()  # unavailable
    one_warning_here(functools.partial(ops.lookup_backend, "cpu"))  # the same, asked through ttgnn.ops
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: None)
    _install_prebuilt(monkeypatch, tmp_path, digest="older-sources")
    one_warning_here()  # a prebuilt library of other sources


def test_a_warning_while_ttgnn_is_imported_points_at_the_import_line(tmp_path):
    """The kernels load when ttgnn.ops is first imported (here through TTNodeEmbedding, which `import ttgnn`
    leaves to its first use); a warning names the user's line."""
    program = ("import sys\n"
               "sys.modules['ttgnn._C'] = None  # the prebuilt library cannot be imported\n"
               "import ttgnn\n"
               "from ttgnn import TTNodeEmbedding\n")
    env = dict(os.environ, TTGNN_CACHE=str(tmp_path / "cache"), CXX="/bin/false")  # a compile fails at once
    env.pop("TTGNN_NO_EXTENSION", None)
    child = subprocess.run([sys.executable, "-W", "always", "-c", program], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    warned = [line for line in child.stderr.splitlines() if "ExtensionWarning" in line]
    assert child.returncode == 0 and len(warned) == 1, child.stderr
    assert warned[0].startswith("<string>:4: ExtensionWarning: ttgnn: the compiled TT-lookup kernels are "
                                "unavailable: compiling them failed: ")


def test_first_use_incomplete_toolkit_builds_cpu_kernels_without_trying_cuda(fresh_ext,
                                                                             monkeypatch):
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_build, "cuda_problem",
                        lambda cpp_extension=None: "libcudart.so not found in /usr/local/lib")
    info, caught = _load_collecting_warnings()
    assert [call["with_cuda"] for call in fresh_ext.compiles] == [False]
    assert info.cuda_skipped == "libcudart.so not found in /usr/local/lib"
    assert len(caught) == 1 and "libcudart.so not found" in str(caught[0].message)


def test_cuda_torch_without_a_gpu_builds_cpu_kernels_only(fresh_ext, monkeypatch):
    cuda_torch(monkeypatch)
    info, caught = _load_collecting_warnings()
    assert [call["with_cuda"] for call in fresh_ext.compiles] == [False]
    assert info.cuda_skipped is None and caught == []


def _setup_module():
    spec = importlib.util.spec_from_file_location("ttgnn_setup_under_test", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the build; setup() runs only as __main__
    return module


class FakeExtension:
    def __init__(self, sources):
        self.name = "ttgnn._C"
        self.sources = list(sources)
        self.libraries = ["c10", "torch", "torch_cpu", "torch_python", "cudart", "c10_cuda",
                          "torch_cuda"]
        self.library_dirs = ["/torch/lib", "/cuda/lib64"]
        self.extra_compile_args = {"cxx": ["-O3"], "nvcc": ["-O3"]}


def test_setup_cuda_link_failure_builds_the_cpu_kernels_and_records_why(tmp_path, capsys):
    setup = _setup_module()
    built = []

    class FakeBuildExtension:
        inplace = False

        def build_extension(self, ext):
            if any(s.endswith(".cu") for s in ext.sources):
                raise RuntimeError("command '/usr/bin/c++' failed: cannot find -lcudart")
            built.append(list(ext.sources))

        def get_ext_fullpath(self, name):
            return str(tmp_path / ("inplace" if self.inplace else "build") / "ttgnn" / "_C.so")

        def copy_extensions_to_source(self):
            pass

    class FakeCpp(FakeCppExtension):
        def library_paths(self, device_type="cpu"):
            return ["/torch/lib"] + (["/cuda/lib64"] if device_type == "cuda" else [])

    cls = setup.build_ext_class(FakeBuildExtension, FakeCpp("/cuda"), tag(cuda="13.0"), "d1", None)
    command = cls()
    command.extensions = [FakeExtension(["kernels/tt_lookup.cpp", "kernels/cpu/tt_lookup_cpu.cpp",
                                         "kernels/cuda/tt_lookup_cuda.cu"])]
    command.build_extension(command.extensions[0])
    command.copy_extensions_to_source()

    assert built == [["kernels/tt_lookup.cpp", "kernels/cpu/tt_lookup_cpu.cpp"]]
    ext = command.extensions[0]
    assert not {"cudart", "c10_cuda", "torch_cuda"} & set(ext.libraries)
    assert ext.library_dirs == ["/torch/lib"]
    assert "building the CPU kernels only" in capsys.readouterr().err
    for where in ("build", "inplace"):  # the wheel's copy and the editable install's copy
        record = _build.read_record(tmp_path / where / "ttgnn" / _build.RECORD_NAME)
        assert record["cuda_kernels"] is False and "cannot find -lcudart" in record["cuda_skipped"]
        assert record["torch"] == torch.__version__ and record["built_by"] == "setup.py"


def test_setup_cpu_build_failure_is_not_hidden(tmp_path):
    setup = _setup_module()

    class FailingBuildExtension:
        def build_extension(self, ext):
            raise RuntimeError("tt_lookup_cpu.cpp:1: error: expected ';'")

    cls = setup.build_ext_class(FailingBuildExtension, FakeCppExtension(None), tag(), "d1", None)
    with pytest.raises(RuntimeError, match="expected ';'"):
        cls().build_extension(FakeExtension(["kernels/tt_lookup.cpp"]))


# --- one recipe for both builds, and the command that rebuilds ---------------------------------

def test_setup_and_first_use_compile_the_same_sources_with_the_same_flags():
    setup = _setup_module()
    assert setup.recipe.CPU_SOURCES == _build.CPU_SOURCES
    assert setup.recipe.cxx_flags() == _build.cxx_flags()
    cpu = _cpu_sources()
    assert KERNELS / "tt_lookup.cpp" in cpu and any(p.parent.name == "cpu" for p in cpu)
    assert sorted(_build.sources(KERNELS, cuda=True)) == sorted(cpu + list(KERNELS.glob("cuda/*.cu")))
    assert _build.kernel_dir(ROOT / "ttgnn") == KERNELS  # a checkout: kernels/ beside the package


def _command(argv, capsys):
    """``python -m ttgnn.build_kernels`` with ``argv``, in this process: its exit status and output."""
    code = build_kernels.main(argv)
    return code, capsys.readouterr().out


def test_build_kernels_command_reports_and_rebuilds(fresh_ext, monkeypatch, capsys):
    assert build_kernels.main([]) == 0  # compiles (fake) on first use, then reports
    out = capsys.readouterr().out
    assert "kernels: compiled" in out and f"torch: {torch.__version__}" in out

    build_dir = _ext.jit_build_dir(cuda=False)
    children = []

    def run(command, **kwargs):
        children.append((command, kwargs))
        # --force removed the old build before compiling again, under its lock (whose file stays)
        assert [entry.name for entry in build_dir.iterdir()] == ["build.lock"]
        return subprocess.CompletedProcess(command, 0, stdout=f"compiled\n{build_dir / 'ttgnn_C.so'}\n\n")

    monkeypatch.setattr(build_kernels.subprocess, "run", run)
    assert _command(["--force"], capsys) == (
        0, f"compiling into {build_dir} (a few minutes) ...\nkernels: compiled ({build_dir / 'ttgnn_C.so'})\n")
    assert children == [([sys.executable, "-c", build_kernels._CHILD], {"stdout": subprocess.PIPE, "text": True})]


def test_build_kernels_says_where_the_kernels_come_from(fresh_ext, monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", None)
    torch_line = f"torch: {torch.__version__} (CUDA none)"
    monkeypatch.setenv("TTGNN_NO_EXTENSION", "1")
    assert _command([], capsys) == (
        1, "TTGNN_NO_EXTENSION is set: the pure-PyTorch reference is used; unset it to build\n")

    def reported(info, argv=(), kernels=(("cpu", True), ("cuda", False))):
        monkeypatch.setattr(_ext, "_info", info)
        monkeypatch.setattr(_ext, "_kernels", dict(kernels))
        return _command(list(argv), capsys)

    prebuilt = _ext.ExtensionInfo("prebuilt", "/site/ttgnn/_C.so", cuda_skipped="nvcc not found",
                                  notes=("a stale build was set aside",))
    described = ("kernels: prebuilt (/site/ttgnn/_C.so)\nno CUDA kernels: nvcc not found\n"
                 f"note: a stale build was set aside\ndevices: cpu\n{torch_line}\n")
    assert reported(prebuilt) == (0, described)
    assert reported(prebuilt, ["--force"]) == (0, described + (
        "the prebuilt ttgnn._C matches this torch; to rebuild it, reinstall ttgnn (pip install "
        "--no-build-isolation --force-reinstall ...)\n"))
    cache = _ext.ExtensionInfo("cache", "/cache/ttgnn_C.so")
    assert reported(cache, kernels=[("cpu", True), ("cuda", True)]) == (
        0, f"kernels: cache (/cache/ttgnn_C.so)\ndevices: cpu, cuda\n{torch_line}\n")
    assert reported(cache, kernels=[("cpu", False), ("cuda", False)]) == (
        0, f"kernels: cache (/cache/ttgnn_C.so)\ndevices: none\n{torch_line}\n")
    # No kernels and no sources to build them from: nothing to do but say why.
    monkeypatch.setattr(_ext, "jit_build_dir", lambda: None)
    assert reported(_ext.ExtensionInfo("unavailable", error="no sources")) == (
        1, f"kernels: unavailable\nerror: no sources\n{torch_line}\n")


@pytest.mark.parametrize("child_out,child_code,reported,code", [
    ("compiled\n/b/ttgnn_C.so\n\n", 0, "kernels: compiled (/b/ttgnn_C.so)\n", 0),
    ("cache\n/b/ttgnn_C.so\n\n", 0, "kernels: cache (/b/ttgnn_C.so)\n", 0),
    ("compiled\n/b/ttgnn_C.so\n\n", 1, "kernels: compiled (/b/ttgnn_C.so)\n", 1),  # it crashed after
    ("unavailable\n\ncompiling them failed: x\n", 0, "kernels: unavailable\nerror: compiling them failed: x\n", 1),
    ("", 1, "kernels: unknown\n", 1),  # it died before a word
])
def test_build_kernels_compiles_where_there_are_none_and_reports_the_child(fresh_ext, monkeypatch, capsys,
                                                                           child_out, child_code, reported, code):
    monkeypatch.setattr(_ext, "_info", _ext.ExtensionInfo("unavailable", error="an earlier build failed"))
    monkeypatch.setattr(build_kernels.subprocess, "run",
                        lambda command, **kwargs: subprocess.CompletedProcess(command, child_code, stdout=child_out))
    assert _command([], capsys) == (code, f"compiling into {_ext.jit_build_dir()} (a few minutes) ...\n{reported}")


def test_build_kernels_does_not_warn_to_run_itself(fresh_ext, monkeypatch, capsys):
    # it began with "ExtensionWarning: ... To build the kernels for this torch: python -m ttgnn.build_kernels"
    fresh_ext.fail_with = "c++: not found"
    monkeypatch.setattr(build_kernels.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 0, stdout="compiled\n/cache/ttgnn_C.so\n\n"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert build_kernels.main([]) == 0
    assert [w for w in caught if issubclass(w.category, _ext.ExtensionWarning)] == []
    assert capsys.readouterr().out.endswith("kernels: compiled (/cache/ttgnn_C.so)\n")


def test_the_child_of_build_kernels_reports_in_the_lines_it_is_read_in(fresh_ext, monkeypatch, capsys):
    """A real child interpreter, its kernels switched off so that it returns at once."""
    monkeypatch.setattr(_ext, "_info", _ext.ExtensionInfo("unavailable", error="an earlier build failed"))
    real_run = subprocess.run
    monkeypatch.setattr(build_kernels.subprocess, "run", lambda command, **kwargs: real_run(
        command, env=dict(os.environ, TTGNN_NO_EXTENSION="1"), **kwargs))
    assert _command([], capsys) == (1, f"compiling into {_ext.jit_build_dir()} (a few minutes) ...\n"
                                       "kernels: disabled\nerror: TTGNN_NO_EXTENSION is set\n")


def test_build_kernels_help_names_the_command_and_its_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_kernels.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exit_.value.code == 0 and text.startswith("usage: python -m ttgnn.build_kernels [-h] [--force] ")
    assert ("Build the compiled TT-lookup kernels for the running torch, if need be, and say where they come "
            "from.") in text
    assert "--force delete this torch's first-use build and compile it again" in text


def test_build_errors_are_summarised_by_their_telling_lines():
    command = "/usr/bin/c++ " + " ".join(f"-Iinclude{i}" for i in range(60)) + " -Werror -c a.cpp"
    missing_compiler = RuntimeError(f"Error building extension 'ttgnn_C'\n{command}\n"
                                    "/bin/sh: 1: /usr/bin/c++: not found\n"
                                    "ninja: build stopped: subcommand failed.")
    assert _ext._error_summary(missing_compiler) == (
        "Error building extension 'ttgnn_C' | /bin/sh: 1: /usr/bin/c++: not found")
    link = RuntimeError("FAILED: ttgnn_C.so\n/usr/bin/ld: cannot find -lcudart\n"
                        "collect2: error: ld returned 1 exit status")
    assert _ext._error_summary(link) == ("/usr/bin/ld: cannot find -lcudart | collect2: error: ld "
                                         "returned 1 exit status")
    assert _ext._error_summary(RuntimeError("")) == "RuntimeError"
    # The last two telling lines; a line of 300 characters or more is a command, not a message.
    three = RuntimeError("a.cpp:1: error: one\na.cpp:2: error: two\na.cpp:3: error: three")
    assert _ext._error_summary(three) == "a.cpp:2: error: two | a.cpp:3: error: three"
    longest = "error: " + "x" * 292
    assert _ext._error_summary(RuntimeError(f"error: first\n{longest}")) == f"error: first | {longest}"
    assert _ext._error_summary(RuntimeError(f"error: first\n{longest}x")) == "error: first"


# --- the C++ compiler: libstdc++ must be the shared one torch uses ------------------------------

def test_first_use_and_setup_build_with_the_replacement_compiler(compilers, fresh_ext, monkeypatch, caplog):
    static, shared = compilers
    monkeypatch.setenv("CXX", str(static))
    compilers_used = []

    def compile_noting_cxx(**kwargs):
        compilers_used.append(os.environ["CXX"])
        return fresh_ext.compile(**kwargs)

    monkeypatch.setattr(_ext, "_cpp_extension_load", compile_noting_cxx)
    with caplog.at_level("WARNING", logger="ttgnn"):
        info, _ = _load_collecting_warnings()
    assert info.origin == "compiled" and compilers_used == [str(shared)]
    assert os.environ["CXX"] == str(static)  # restored after the build
    assert logged(caplog, "ttgnn._ext")[0] == (
        f"ttgnn: the C++ compiler {static} has only a static libstdc++, which would put a second libstdc++ "
        f"into the kernels' library beside torch's; building with {shared} instead")
    setup = _setup_module()
    monkeypatch.setenv("PATH", f"{shared.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    setup._extensions()
    assert os.environ["CXX"] == str(shared)


def test_first_use_without_a_shared_libstdcxx_compiles_nothing_and_says_why(compilers, fresh_ext, monkeypatch):
    static, _ = compilers
    monkeypatch.setenv("PATH", str(static.parent))
    monkeypatch.setenv("CXX", str(static))
    cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_build, "cuda_problem", lambda cpp_extension=None: None)
    info, caught = _load_collecting_warnings()
    assert info.origin == "unavailable" and "set CXX to a compiler with libstdc++.so" in info.error
    assert fresh_ext.compiles == []  # no CUDA attempt, no CPU retry
    # the one warning of a fallback to the reference, with the reason; none about the CUDA part
    assert len(caught) == 1 and "static libstdc++" in str(caught[0].message)


# --- what the log says about the lookup's backends -------------------------------------------

def test_the_backends_are_logged_once_with_the_library_and_the_devices_it_serves(monkeypatch, caplog):
    def logged_now(info, kernels):
        monkeypatch.setattr(_ext, "_logged_once", False)
        monkeypatch.setattr(_ext, "_info", info)
        monkeypatch.setattr(_ext, "_kernels", dict(kernels))
        caplog.clear()
        with caplog.at_level("INFO", logger="ttgnn._ext"):
            _ext.log_backends()
            _ext.log_backends()  # once per process
        return logged(caplog, "ttgnn._ext")

    library = _ext.ExtensionInfo("cache", "/cache/ttgnn_C.so")
    reference = "other devices use the pure-PyTorch reference"
    assert logged_now(library, {"cpu": True, "cuda": True}) == [
        f"TT lookup: compiled kernels (cache, /cache/ttgnn_C.so) for cpu, cuda; {reference}"]
    assert logged_now(library, {"cpu": True, "cuda": False}) == [
        f"TT lookup: compiled kernels (cache, /cache/ttgnn_C.so) for cpu; {reference}"]
    assert logged_now(library, {"cpu": False, "cuda": False}) == [
        f"TT lookup: compiled kernels (cache, /cache/ttgnn_C.so) for no device; {reference}"]
    assert logged_now(_ext.ExtensionInfo("unavailable", error="no C++ compiler"), {}) == [
        "TT lookup: compiled kernels unavailable (no C++ compiler); using the pure-PyTorch reference"]


def test_a_kernel_cache_that_cannot_be_written_leaves_the_reference_not_a_failed_import(fresh_ext, monkeypatch,
                                                                                     tmp_path):
    # TTGNN_CACHE a file (or a read-only $HOME): `import ttgnn` raised NotADirectoryError from the cache's mkdir
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "a-file"))
    info, caught = _load_collecting_warnings()
    assert info.origin == "unavailable"
    assert info.error.startswith(f"cannot write the kernel cache {tmp_path / 'a-file'}")
    assert info.error.endswith("; set TTGNN_CACHE to a writable folder")
    assert len(caught) == 1 and fresh_ext.compiles == []
