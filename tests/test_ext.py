"""How ttgnn finds kernels built for the running torch (ttgnn/_ext.py, ttgnn/_build.py, setup.py).

Loading and compiling are replaced by fakes here (a process can load the kernels' library only
once, and a real compile takes minutes); tests/test_packaging.py loads a real library from the
first-use cache in a fresh virtual environment.
"""
import fcntl
import importlib.util
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

from messages import logged
from ttgnn import _build, _ext, build_kernels

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"


def _cpu_sources():
    """The CPU sources of the checkout: kernels/*.cpp and kernels/cpu/*.cpp."""
    return list(KERNELS.glob("*.cpp")) + list(KERNELS.glob("cpu/*.cpp"))


def _tag(**changes):
    tag = _build.torch_tag()
    tag.update(changes)
    return tag


class FakeBuilds:
    """Stands in for torch's loader and compiler; records what ttgnn asked of them."""

    def __init__(self, fail_cuda_with=None, fail_with=None):
        self.fail_cuda_with = fail_cuda_with
        self.fail_with = fail_with
        self.compiles = []  # the keyword arguments of each cpp_extension.load call
        self.loaded = []  # libraries loaded from the cache

    def compile(self, **kwargs):
        self.compiles.append(kwargs)
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


def _load_collecting_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = _ext._load_once()
    return info, [w for w in caught if issubclass(w.category, _ext.ExtensionWarning)]


# --- build records: a library built for another torch is never loaded ------------------------

def test_record_for_the_running_torch_is_not_stale():
    digest = _build.source_digest(KERNELS, cuda=False)
    record = _build.make_record(_tag(), digest, cuda_kernels=False, cuda_skipped=None,
                                flags=_build.cxx_flags(), built_by="setup.py")
    assert _build.stale_reasons(record, _tag(), digest) == []


@pytest.mark.parametrize("key,value", [
    ("torch", "2.12.0+cpu"), ("cuda", "12.8"), ("cxx11abi", False), ("python", "cp310"),
    ("torch_git", "0" * 40),
])
def test_record_for_another_torch_is_stale(key, value):
    digest = _build.source_digest(KERNELS, cuda=False)
    record = _build.make_record(_tag(**{key: value}), digest, cuda_kernels=False,
                                cuda_skipped=None, flags=[], built_by="setup.py")
    reasons = _build.stale_reasons(record, _tag(), digest)
    assert len(reasons) == 1 and reasons[0].startswith(f"{key}: built for {value!r}")


def test_missing_record_and_changed_sources_are_stale(tmp_path):
    assert "no build record" in _build.stale_reasons(None, _tag(), "abc")[0]
    record = _build.make_record(_tag(), "old", cuda_kernels=False, cuda_skipped=None, flags=[],
                                built_by="setup.py")
    assert "kernel sources changed" in _build.stale_reasons(record, _tag(), "new")[0]
    assert _build.stale_reasons(record, _tag(), None) == []  # sources not installed: not compared
    (tmp_path / "bad.json").write_text("{not json")
    assert _build.read_record(tmp_path / "bad.json") is None
    assert _build.read_record(tmp_path / "missing.json") is None


def test_source_digest_follows_the_files_a_build_compiles(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cuda").mkdir()
    (tmp_path / "a.cpp").write_text("int a;")
    (tmp_path / "cpu" / "b.cpp").write_text("int b;")
    (tmp_path / "cuda" / "c.cu").write_text("int c;")
    cpu, cuda = _build.source_digest(tmp_path, cuda=False), _build.source_digest(tmp_path, cuda=True)
    # Editing the CUDA files leaves CPU-only builds valid.
    (tmp_path / "cuda" / "c.cu").write_text("int c2;")
    (tmp_path / "cuda" / "d.cuh").write_text("// a CUDA header")
    assert _build.source_digest(tmp_path, cuda=False) == cpu
    cuda_edited = _build.source_digest(tmp_path, cuda=True)
    # Any CPU source or shared header counts for both.
    (tmp_path / "cpu" / "b.h").write_text("// a header")
    with_header = _build.source_digest(tmp_path, cuda=False)
    (tmp_path / "cpu" / "b.cpp").write_text("int b2;")
    assert len({cpu, with_header, _build.source_digest(tmp_path, cuda=False)}) == 3
    assert len({cuda, cuda_edited, _build.source_digest(tmp_path, cuda=True)}) == 3
    assert [p.name for p in _build.sources(tmp_path, cuda=False)] == ["a.cpp", "b.cpp"]


def test_stale_prebuilt_is_not_imported_and_a_build_for_this_torch_is_made(fresh_ext, monkeypatch,
                                                                          tmp_path):
    library = tmp_path / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so"
    library.parent.mkdir()
    library.write_bytes(b"built for another torch")
    _build.write_record(library.with_name(_build.RECORD_NAME), _build.make_record(
        _tag(torch="2.12.0+cpu"), _build.source_digest(KERNELS, cuda=False), cuda_kernels=False,
        cuda_skipped=None, flags=[], built_by="setup.py"))
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: library)

    info, caught = _load_collecting_warnings()

    assert info.origin == "compiled" and caught == []
    assert "torch: built for '2.12.0+cpu'" in info.notes[0]
    assert len(fresh_ext.compiles) == 1
    assert Path(info.path).parent == _ext.jit_build_dir(cuda=False)


def test_a_build_that_registers_no_ops_is_unavailable_with_its_path_and_notes(fresh_ext, monkeypatch, tmp_path):
    # A library that loads but whose ops are not there (a build of other sources) is not used:
    # the reference runs, the warning names the library, and the notes of what was set aside stay.
    library = tmp_path / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so"
    library.parent.mkdir()
    library.write_bytes(b"a library without a build record")
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: library)
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


def test_matching_prebuilt_is_imported(fresh_ext, monkeypatch, tmp_path):
    library = tmp_path / "_C.so"
    library.write_bytes(b"")
    _build.write_record(library.with_name(_build.RECORD_NAME), _build.make_record(
        _tag(), _build.source_digest(KERNELS, cuda=False), cuda_kernels=False, cuda_skipped=None, flags=[],
        built_by="setup.py"))
    imported = []
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: library)
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: imported.append(True))
    info, caught = _load_collecting_warnings()
    assert (info.origin, info.path, imported, caught) == ("prebuilt", str(library), [True], [])
    assert fresh_ext.compiles == []


def test_prebuilt_from_other_sources_is_loaded_with_one_warning_to_rebuild(fresh_ext, monkeypatch,
                                                                         tmp_path):
    """A checkout whose kernels changed since `make setup`: same torch, so it still loads."""
    library = tmp_path / "_C.so"
    library.write_bytes(b"")
    _build.write_record(library.with_name(_build.RECORD_NAME), _build.make_record(
        _tag(), "digest-of-older-sources", cuda_kernels=False, cuda_skipped=None, flags=[],
        built_by="setup.py"))
    imported = []
    monkeypatch.setattr(_ext, "_prebuilt_library", lambda: library)
    monkeypatch.setattr(_ext, "_import_prebuilt", lambda: imported.append(True))
    info, caught = _load_collecting_warnings()
    assert (info.origin, imported, fresh_ext.compiles) == ("prebuilt", [True], [])
    assert len(caught) == 1 and "make setup" in str(caught[0].message)
    assert "kernel sources changed" in info.notes[0]


def test_this_checkout_loads_its_prebuilt_library():
    """`make setup` builds ttgnn._C and records the torch; importing ttgnn loads it, no compile."""
    info = _ext.info()
    if info.origin != "prebuilt":
        message = f"ttgnn._C was not loaded as a prebuilt library: {info}"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so `make setup` must have built and recorded it")
        pytest.skip(message)
    record = _build.read_record(Path(info.path).with_name(_build.RECORD_NAME))
    assert record["built_by"] == "setup.py"
    assert record["torch"] == torch.__version__
    assert record["sources"] == _build.source_digest(KERNELS, cuda=record["cuda_kernels"])


# --- the first-use cache ----------------------------------------------------------------------

def test_cache_folder_is_keyed_by_torch_and_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path))
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    cpu = _tag(python="cp311", torch="2.13.0+cpu", cuda=None, cxx11abi=True)
    path = _build.jit_build_dir(cpu, "d1", cuda=False, flags=["-O3"])
    assert path.parent == tmp_path / "ext" / "cp311-torch2.13.0+cpu-cxx11abi1-cpu"
    assert path.name.startswith("cpu-")
    assert _build.jit_build_dir(dict(cpu), "d1", cuda=False, flags=["-O3"]) == path
    other_torch = _build.jit_build_dir(dict(cpu, torch="2.14.1+cpu"), "d1", cuda=False,
                                       flags=["-O3"])
    assert other_torch.parent.name == "cp311-torch2.14.1+cpu-cxx11abi1-cpu"
    cuda = _build.jit_build_dir(dict(cpu, torch="2.13.0+cu130", cuda="13.0"), "d1", cuda=True,
                                flags=["-O3"])
    assert cuda.parent.name == "cp311-torch2.13.0+cu130-cxx11abi1-cu130"
    assert cuda.name.startswith("cuda-")
    assert _build.jit_build_dir(dict(cpu, cxx11abi=False), "d1", cuda=False,
                                flags=["-O3"]).parent.name.endswith("cxx11abi0-cpu")
    # Same torch: new sources, flags or architectures get a folder of their own.
    leaves = {path.name,
              _build.jit_build_dir(cpu, "d2", cuda=False, flags=["-O3"]).name,
              _build.jit_build_dir(cpu, "d1", cuda=False, flags=["-O3", "-march=native"]).name}
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    leaves.add(_build.jit_build_dir(dict(cpu, cuda="13.0"), "d1", cuda=True, flags=["-O3"]).name)
    assert len(leaves) == 4


def test_default_cache_is_under_the_user_cache(monkeypatch):
    monkeypatch.delenv("TTGNN_CACHE", raising=False)
    assert _build.cache_root() == Path.home() / ".cache" / "ttgnn" / "ext"


def test_first_use_compiles_once_then_loads_from_the_cache(fresh_ext, caplog):
    with caplog.at_level("INFO", logger="ttgnn._ext"):
        info, caught = _load_collecting_warnings()
    assert (info.origin, caught) == ("compiled", [])
    build_dir = _ext.jit_build_dir(cuda=False)
    assert Path(info.path) == build_dir / "ttgnn_C.so"
    assert build_dir.is_relative_to(Path(os.environ["TTGNN_CACHE"]))
    progress = [r for r in caplog.records if "compiling the TT-lookup kernels" in r.getMessage()]
    assert len(progress) == 1 and torch.__version__ in progress[0].getMessage()
    (call,) = fresh_ext.compiles
    assert call["build_directory"] == str(build_dir) and call["with_cuda"] is False
    assert call["is_python_module"] is False
    assert sorted(call["sources"]) == sorted(str(p) for p in _cpu_sources())
    assert call["extra_cflags"][:len(_build.cxx_flags())] == _build.cxx_flags()
    record = _build.read_record(build_dir / "build.json")
    assert record["built_by"] == "jit" and record["torch"] == torch.__version__

    info, caught = _load_collecting_warnings()  # a second process
    assert (info.origin, info.path, caught) == ("cache", str(build_dir / "ttgnn_C.so"), [])
    # Loaded as the module ttgnn._C both times: after compiling, and from the cache.
    assert len(fresh_ext.compiles) == 1 and fresh_ext.loaded == [build_dir / "ttgnn_C.so"] * 2


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


def test_a_process_that_waits_for_a_build_loads_it_without_compiling(fresh_ext, caplog):
    build_dir = _ext.jit_build_dir(cuda=False)
    build_dir.mkdir(parents=True)
    fd = os.open(build_dir / "build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is compiling (a second open file holds it)
    result = []
    with caplog.at_level("WARNING", logger="ttgnn._ext"):
        waiter = threading.Thread(target=lambda: result.append(_load_collecting_warnings()[0]))
        waiter.start()
        waiter.join(timeout=2)
        assert waiter.is_alive() and not fresh_ext.compiles  # waits, does not compile beside it
        library = build_dir / "ttgnn_C.so"  # what the other process leaves when it finishes
        library.write_bytes(b"fake library")
        record = _build.make_record(_build.torch_tag(), _build.source_digest(KERNELS, cuda=False),
                                    cuda_kernels=False, cuda_skipped=None, flags=_build.cxx_flags(),
                                    built_by="jit")
        record["library"] = library.name
        _build.write_record(build_dir / "build.json", record)
        os.close(fd)
        waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert result[0].origin == "cache" and fresh_ext.compiles == [] and fresh_ext.loaded == [library]
    assert any("waiting for another process" in r.getMessage() for r in caplog.records)


def test_failed_build_falls_back_to_the_reference_with_one_warning(fresh_ext):
    fresh_ext.fail_with = "error: 'c++' failed: no such compiler"
    info, caught = _load_collecting_warnings()
    assert info.origin == "unavailable" and not info.loaded
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "no such compiler" in message and _ext.REBUILD_COMMAND in message
    assert "pure-PyTorch reference" in message
    failure_log = _ext.jit_build_dir(cuda=False) / "failed.log"
    assert "no such compiler" in failure_log.read_text()

    # The next process does not compile again (a failed compile can take minutes) but says why.
    info, caught = _load_collecting_warnings()
    assert len(fresh_ext.compiles) == 1 and len(caught) == 1
    assert str(failure_log) in info.error


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

def _cuda_torch(monkeypatch, version="13.0"):
    monkeypatch.setattr(torch.version, "cuda", version)
    monkeypatch.delenv("TTGNN_NO_CUDA", raising=False)


def _toolkit(root: Path, release="13.0", cudart=True) -> Path:
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.88'\n")
    nvcc.chmod(0o755)
    (root / "lib64").mkdir()
    if cudart:
        (root / "lib64" / "libcudart.so").write_bytes(b"")
    return root


class FakeCppExtension:
    TORCH_LIB_PATH = "/torch/lib"

    def __init__(self, home):
        self.CUDA_HOME = str(home) if home else None

    def library_paths(self, device_type="cpu"):
        return [self.TORCH_LIB_PATH] + ([f"{self.CUDA_HOME}/lib64"] if device_type == "cuda" else [])


def test_cuda_problem_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU-only build" in _build.cuda_problem(FakeCppExtension(None))
    _cuda_torch(monkeypatch)
    assert _build.cuda_problem(FakeCppExtension(_toolkit(tmp_path / "ok"))) is None
    assert "no CUDA toolkit found" in _build.cuda_problem(FakeCppExtension(None))
    assert "nvcc not found" in _build.cuda_problem(FakeCppExtension(tmp_path / "empty"))
    old = _build.cuda_problem(FakeCppExtension(_toolkit(tmp_path / "old", release="12.8")))
    assert "CUDA 12.8" in old and "same major version" in old
    # The case of the issue: an nvcc wrapper in /usr/local/bin makes torch look in /usr/local/lib.
    no_runtime = _toolkit(tmp_path / "usr_local", cudart=False)
    message = _build.cuda_problem(FakeCppExtension(no_runtime))
    assert "libcudart.so" in message and str(no_runtime / "lib64") in message
    monkeypatch.setenv("LIBRARY_PATH", str(tmp_path / "ok" / "lib64"))
    assert _build.cuda_problem(FakeCppExtension(no_runtime)) is None
    monkeypatch.setenv("TTGNN_NO_CUDA", "1")
    assert _build.cuda_problem(FakeCppExtension(_toolkit(tmp_path / "ok2"))) == "TTGNN_NO_CUDA is set"


def test_first_use_cuda_link_failure_builds_cpu_kernels_with_one_warning(fresh_ext, monkeypatch):
    _cuda_torch(monkeypatch)
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
    assert len(caught) == 1 and "no CUDA part" in str(caught[0].message)


def test_first_use_incomplete_toolkit_builds_cpu_kernels_without_trying_cuda(fresh_ext,
                                                                             monkeypatch):
    _cuda_torch(monkeypatch)
    monkeypatch.setattr(_ext, "_gpu_visible", lambda: True)
    monkeypatch.setattr(_build, "cuda_problem",
                        lambda cpp_extension=None: "libcudart.so not found in /usr/local/lib")
    info, caught = _load_collecting_warnings()
    assert [call["with_cuda"] for call in fresh_ext.compiles] == [False]
    assert info.cuda_skipped == "libcudart.so not found in /usr/local/lib"
    assert len(caught) == 1 and "libcudart.so not found" in str(caught[0].message)


def test_cuda_torch_without_a_gpu_builds_cpu_kernels_only(fresh_ext, monkeypatch):
    _cuda_torch(monkeypatch)
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

    cls = setup.build_ext_class(FakeBuildExtension, FakeCpp("/cuda"), _tag(cuda="13.0"), "d1", None)
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

    cls = setup.build_ext_class(FailingBuildExtension, FakeCppExtension(None), _tag(), "d1", None)
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


def test_native_flag_adds_march_native(monkeypatch):
    monkeypatch.setenv("TTGNN_NATIVE", "1")
    assert "-march=native" in _build.cxx_flags()
    monkeypatch.setenv("TTGNN_NATIVE", "0")
    assert "-march=native" not in _build.cxx_flags()


def test_build_kernels_command_reports_and_rebuilds(fresh_ext, monkeypatch, capsys):
    assert build_kernels.main([]) == 0  # compiles (fake) on first use, then reports
    out = capsys.readouterr().out
    assert "kernels: compiled" in out and f"torch: {torch.__version__}" in out

    build_dir = _ext.jit_build_dir(cuda=False)
    children = []

    class Child:
        returncode = 0
        stdout = f"compiled\n{build_dir / 'ttgnn_C.so'}\n\n"

    def run(command, **kwargs):
        children.append(command)
        assert not build_dir.exists()  # --force removed the old build before compiling again
        return Child()

    monkeypatch.setattr(build_kernels.subprocess, "run", run)
    assert build_kernels.main(["--force"]) == 0
    assert children and children[0][0] == sys.executable
    assert "kernels: compiled" in capsys.readouterr().out


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


# --- the C++ compiler: libstdc++ must be the shared one torch uses ------------------------------

def _fake_compiler(path: Path, libstdcxx_so: str, code: int = 0) -> Path:
    """A stand-in compiler answering ``-print-file-name=libstdc++.so`` as GCC does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{libstdcxx_so}'\nexit {code}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def compilers(tmp_path, monkeypatch):
    """``static/g++`` with only libstdc++.a (GCC prints the bare name), ``bin/g++`` with the
    shared library; PATH holds only ``bin``."""
    static = _fake_compiler(tmp_path / "static" / "g++", "libstdc++.so")
    shared = _fake_compiler(tmp_path / "bin" / "g++", "/usr/lib/gcc/x86_64-linux-gnu/13/libstdc++.so")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return static, shared


def test_shared_libstdcxx_reads_the_compilers_answer(compilers, tmp_path):
    static, shared = compilers
    assert _build.shared_libstdcxx(str(static)) is False
    assert _build.shared_libstdcxx(str(shared)) is True
    assert _build.shared_libstdcxx(f"/usr/bin/env {shared}") is True  # a command with arguments (ccache g++)
    assert _build.shared_libstdcxx(str(tmp_path / "missing")) is None
    assert _build.shared_libstdcxx(str(_fake_compiler(tmp_path / "clang++", "x", code=1))) is None
    assert _build.shared_libstdcxx("'unbalanced") is None


def test_a_compiler_with_only_a_static_libstdcxx_is_replaced(compilers, monkeypatch):
    static, shared = compilers
    monkeypatch.setenv("CXX", str(static))
    compiler, why = _build.cxx_override()
    assert compiler == str(shared)
    assert why == (f"the C++ compiler {static} has only a static libstdc++, which would put a second "
                   f"libstdc++ into the kernels' library beside torch's; building with {shared} instead")
    monkeypatch.setenv("CXX", str(shared))
    assert _build.cxx_override() is None
    monkeypatch.delenv("CXX")  # torch's default, c++: not on this PATH, so it cannot be told
    assert _build.cxx_override() is None


def test_no_compiler_with_the_shared_libstdcxx_is_an_error(compilers, monkeypatch, tmp_path):
    static, _ = compilers
    monkeypatch.setenv("PATH", str(static.parent))
    monkeypatch.setenv("CXX", str(static))
    with pytest.raises(RuntimeError, match=r"has only a static libstdc\+\+ .*set CXX to a compiler with "
                                           r"libstdc\+\+\.so$"):
        _build.cxx_override()


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
    assert f"building with {shared} instead" in caplog.text
    setup = _setup_module()
    monkeypatch.setenv("PATH", f"{shared.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    setup._extensions()
    assert os.environ["CXX"] == str(shared)


def test_first_use_without_a_shared_libstdcxx_compiles_nothing_and_says_why(compilers, fresh_ext, monkeypatch):
    static, _ = compilers
    monkeypatch.setenv("PATH", str(static.parent))
    monkeypatch.setenv("CXX", str(static))
    _cuda_torch(monkeypatch)
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
