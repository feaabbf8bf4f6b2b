"""The build recipe of the compiled kernels (ttgnn/_build.py): what is compiled, with which flags,
what a build depends on, where first-use builds go, and what stops the CUDA kernels."""
import os
import sys
from pathlib import Path

import pytest
import torch

from build_fakes import KERNELS, FakeCppExtension, cuda_torch, fake_compiler, script, tag, toolkit
from ttgnn import _build


# --- build records: a library built for another torch is never loaded ------------------------

def test_record_for_the_running_torch_is_not_stale():
    digest = _build.source_digest(KERNELS, cuda=False)
    record = _build.make_record(tag(), digest, cuda_kernels=False, cuda_skipped=None,
                                flags=_build.cxx_flags(), built_by="setup.py")
    assert _build.stale_reasons(record, tag(), digest) == []


@pytest.mark.parametrize("key,value", [
    ("torch", "2.12.0+cpu"), ("cuda", "12.8"), ("cxx11abi", False), ("python", "cp310"),
    ("torch_git", "0" * 40),
])
def test_record_for_another_torch_is_stale(key, value):
    digest = _build.source_digest(KERNELS, cuda=False)
    record = _build.make_record(tag(**{key: value}), digest, cuda_kernels=False,
                                cuda_skipped=None, flags=[], built_by="setup.py")
    reasons = _build.stale_reasons(record, tag(), digest)
    assert len(reasons) == 1 and reasons[0].startswith(f"{key}: built for {value!r}")


def test_missing_record_and_changed_sources_are_stale(tmp_path):
    assert _build.stale_reasons(None, tag(), "abc") == [
        "it has no build record (built by an older setup.py, or copied by hand)"]
    record = _build.make_record(tag(), "old", cuda_kernels=False, cuda_skipped=None, flags=[],
                                built_by="setup.py")
    assert _build.stale_reasons(record, tag(), "new") == [
        "kernel sources changed since the build (digest old -> new)"]
    assert _build.stale_reasons(record, tag(), None) == []  # sources not installed: not compared
    (tmp_path / "bad.json").write_text("{not json")
    assert _build.read_record(tmp_path / "bad.json") is None
    assert _build.read_record(tmp_path / "missing.json") is None


def test_the_torch_tag_names_the_running_python_torch_cuda_and_abi():
    assert _build.torch_tag() == {
        "python": f"cp{sys.version_info.major}{sys.version_info.minor}", "torch": torch.__version__,
        "torch_git": torch.version.git_version, "cuda": torch.version.cuda,
        "cxx11abi": torch._C._GLIBCXX_USE_CXX11_ABI}


def test_a_build_record_holds_the_tag_the_sources_and_how_it_was_built():
    record = _build.make_record(tag(), "d1", cuda_kernels=1, cuda_skipped="no nvcc", flags=("-O3",),
                                built_by="jit")
    assert record == {**{key: tag()[key] for key in _build.TAG_KEYS}, "sources": "d1", "cuda_kernels": True,
                      "cuda_skipped": "no nvcc", "cxx_flags": ["-O3"], "built_by": "jit"}


def test_records_are_written_whole_into_new_folders_and_read_back(tmp_path):
    path = tmp_path / "new" / "folder" / "build.json"
    record = _build.make_record(tag(), "d1", cuda_kernels=False, cuda_skipped=None, flags=[], built_by="jit")
    _build.write_record(path, record)
    assert _build.read_record(path) == record
    assert [p.name for p in path.parent.iterdir()] == ["build.json"]  # no temporary file left
    path.write_text("[1, 2]")  # JSON, but not a record
    assert _build.read_record(path) is None


# --- which files a build compiles, with which flags ---------------------------------------------

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


@pytest.mark.parametrize("relative,cuda", [
    ("k.cu", True), ("k.cuh", True), ("cuda/k.h", True), ("cuda/k.cpp", True), ("sub/cuda/k.h", True),
    ("k.h", False), ("cpu/k.cpp", False), ("cudnn/k.h", False),
])
def test_a_cuda_file_is_known_by_its_suffix_or_a_cuda_folder(relative, cuda):
    assert _build._is_cuda_file(Path(relative)) is cuda


def test_kernel_sources_are_found_installed_or_in_a_checkout(tmp_path):
    package = tmp_path / "site-packages" / "ttgnn"
    (package / "_kernels" / "cuda").mkdir(parents=True)
    assert _build.kernel_dir(package) is None  # an empty folder holds no kernels
    (package / "_kernels" / "cuda" / "k.cu").write_text("")
    assert _build.kernel_dir(package) is None  # CUDA sources alone do not make the library
    (package / "_kernels" / "k.cpp").write_text("")
    assert _build.kernel_dir(package) == package / "_kernels"
    # A checkout has kernels/ beside the package, and setup.py.
    checkout = tmp_path / "checkout"
    (checkout / "ttgnn").mkdir(parents=True)
    (checkout / "kernels").mkdir()
    (checkout / "kernels" / "k.cpp").write_text("")
    assert _build.kernel_dir(checkout / "ttgnn") is None
    (checkout / "setup.py").write_text("")
    assert _build.kernel_dir(checkout / "ttgnn") == checkout / "kernels"


def test_native_flag_adds_march_native_and_the_macro_the_kernels_read(monkeypatch):
    monkeypatch.setenv("TTGNN_NATIVE", "0")
    portable = _build.cxx_flags()
    assert "-march=native" not in portable and _build.cxx_flags(native=False) == portable
    native = portable + ["-march=native", "-DTTGNN_NATIVE_BUILD"]
    assert _build.cxx_flags(native=True) == native
    monkeypatch.setenv("TTGNN_NATIVE", "1")
    assert _build.cxx_flags() == native and _build.cxx_flags(native=False) == portable
    # The macro switches the kernels from their per-ISA clones to the build machine's ISA.
    assert any("TTGNN_NATIVE_BUILD" in path.read_text() for path in _build.kernel_files(KERNELS))


@pytest.mark.parametrize("value,on", [
    ("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("on", True), ("ON", True),
    ("0", False), ("", False), ("no", False), ("off", False), ("2", False),
])
def test_a_switch_in_the_environment_is_on_for_the_usual_words(monkeypatch, value, on):
    monkeypatch.setenv("TTGNN_TEST_SWITCH", value)
    assert _build.env_flag("TTGNN_TEST_SWITCH") is on
    monkeypatch.delenv("TTGNN_TEST_SWITCH")
    assert _build.env_flag("TTGNN_TEST_SWITCH") is False


# --- the first-use cache ----------------------------------------------------------------------

def test_cache_folder_is_keyed_by_torch_and_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path))
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    cpu = tag(python="cp311", torch="2.13.0+cpu", cuda=None, cxx11abi=True)
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


def test_the_cuda_architectures_key_cuda_builds_only(monkeypatch, tmp_path):
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path))
    cuda_tag = tag(cuda="13.0")

    def folders(architectures):
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", architectures)
        return [_build.jit_build_dir(cuda_tag, "d1", cuda=cuda, flags=["-O3"]) for cuda in (False, True)]

    (cpu_80, cuda_80), (cpu_90, cuda_90) = folders("8.0"), folders("9.0")
    assert cpu_80 == cpu_90 and cuda_80 != cuda_90


def test_default_cache_is_under_the_user_cache(monkeypatch):
    monkeypatch.delenv("TTGNN_CACHE", raising=False)
    assert _build.cache_root() == Path.home() / ".cache" / "ttgnn" / "ext"


# --- CUDA: what stops the CUDA kernels ----------------------------------------------------------

def test_cuda_problem_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU-only build" in _build.cuda_problem(FakeCppExtension(None))
    cuda_torch(monkeypatch)
    assert _build.cuda_problem(FakeCppExtension(toolkit(tmp_path / "ok"))) is None
    assert _build.cuda_problem(FakeCppExtension(None)) == (
        "no CUDA toolkit found (CUDA_HOME is unset and nvcc is not on PATH)")
    assert "nvcc not found" in _build.cuda_problem(FakeCppExtension(tmp_path / "empty"))
    old = _build.cuda_problem(FakeCppExtension(toolkit(tmp_path / "old", release="12.8")))
    assert "CUDA 12.8" in old and "same major version" in old
    # The case of the issue: an nvcc wrapper in /usr/local/bin makes torch look in /usr/local/lib.
    no_runtime = toolkit(tmp_path / "usr_local", cudart=False)
    message = _build.cuda_problem(FakeCppExtension(no_runtime))
    assert "libcudart.so" in message and str(no_runtime / "lib64") in message
    monkeypatch.setenv("LIBRARY_PATH", str(tmp_path / "ok" / "lib64"))
    assert _build.cuda_problem(FakeCppExtension(no_runtime)) is None
    monkeypatch.setenv("TTGNN_NO_CUDA", "1")
    assert _build.cuda_problem(FakeCppExtension(toolkit(tmp_path / "ok2"))) == "TTGNN_NO_CUDA is set"


def test_the_cuda_runtime_is_looked_for_in_the_toolkit_and_on_library_path(monkeypatch, tmp_path):
    cuda_torch(monkeypatch)
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    static = toolkit(tmp_path / "static", cudart=False)
    (static / "lib64" / "libcudart.a").write_bytes(b"")
    assert _build.cuda_problem(FakeCppExtension(static)) is None  # the static runtime links too
    bare = toolkit(tmp_path / "bare", cudart=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "libcudart.so").write_bytes(b"")
    monkeypatch.setenv("LIBRARY_PATH", os.pathsep.join([str(tmp_path / "empty"), str(elsewhere)]))
    assert _build.cuda_problem(FakeCppExtension(bare)) is None
    monkeypatch.setenv("LIBRARY_PATH", str(tmp_path / "empty"))
    assert _build.cuda_problem(FakeCppExtension(bare)) == (
        f"libcudart.so (the CUDA runtime library) not found in {bare / 'lib64'}, {tmp_path / 'empty'} "
        f"(CUDA_HOME={bare}); set CUDA_HOME to the CUDA toolkit's root, the folder with lib64/libcudart.so")

    class TorchLibrariesOnly(FakeCppExtension):
        def library_paths(self, device_type="cpu"):
            return [self.TORCH_LIB_PATH]

    monkeypatch.delenv("LIBRARY_PATH")
    assert _build.cuda_problem(TorchLibrariesOnly(bare)).startswith(
        "libcudart.so (the CUDA runtime library) not found in any library folder (CUDA_HOME=")


def test_torch_before_2_6_is_asked_for_its_cuda_libraries_the_old_way(monkeypatch, tmp_path):
    cuda_torch(monkeypatch)
    monkeypatch.delenv("LIBRARY_PATH", raising=False)

    class OldCppExtension(FakeCppExtension):
        def library_paths(self, cuda=False):  # torch < 2.6 has no device_type
            return [self.TORCH_LIB_PATH] + ([f"{self.CUDA_HOME}/lib64"] if cuda else [])

    assert _build.cuda_problem(OldCppExtension(toolkit(tmp_path / "cuda"))) is None


def test_an_nvcc_whose_version_cannot_be_read_is_named(monkeypatch, tmp_path):
    cuda_torch(monkeypatch)
    garbled = toolkit(tmp_path / "cuda")
    script(garbled / "bin" / "nvcc", "--version", "nvcc: NVIDIA (R) Cuda compiler driver")
    assert _build.cuda_problem(FakeCppExtension(garbled)) == (
        f"could not read the CUDA version of {garbled / 'bin' / 'nvcc'}")


def test_the_cuda_kernels_are_wanted_with_a_cuda_torch_unless_switched_off(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.delenv("TTGNN_NO_CUDA", raising=False)
    assert _build.cuda_wanted() is False
    cuda_torch(monkeypatch)
    assert _build.cuda_wanted() is True
    monkeypatch.setenv("TTGNN_NO_CUDA", "1")
    assert _build.cuda_wanted() is False


def test_the_cuda_architectures_come_from_torch_cuda_arch_list_else_the_default(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.6+PTX")
    assert _build.cuda_arch_list() == "8.6+PTX"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "")
    assert _build.cuda_arch_list() == _build.DEFAULT_CUDA_ARCH_LIST


# --- the C++ compiler: libstdc++ must be the shared one torch uses ------------------------------

def test_shared_libstdcxx_reads_the_compilers_answer(compilers, tmp_path):
    static, shared = compilers
    assert _build.shared_libstdcxx(str(static)) is False
    assert _build.shared_libstdcxx(str(shared)) is True
    assert _build.shared_libstdcxx(f"/usr/bin/env {shared}") is True  # a command with arguments (ccache g++)
    assert _build.shared_libstdcxx(str(tmp_path / "missing")) is None
    assert _build.shared_libstdcxx(str(fake_compiler(tmp_path / "clang++", "x", code=1))) is None
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


def test_the_default_compiler_is_checked_and_c_plus_plus_is_tried_after_g_plus_plus(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fake_compiler(bin_dir / "c++", "libstdc++.so")  # torch's default compiler, static only
    shared_gxx = fake_compiler(bin_dir / "g++", "/usr/lib/libstdc++.so")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    compiler, why = _build.cxx_override()
    assert compiler == str(shared_gxx) and why.startswith("the C++ compiler c++ has only a static libstdc++")
    # Without g++, a c++ on PATH that links the shared library is taken.
    static_gxx = fake_compiler(tmp_path / "static" / "g++", "libstdc++.so")
    shared_cxx = fake_compiler(tmp_path / "other" / "c++", "/usr/lib/libstdc++.so")
    monkeypatch.setenv("PATH", str(shared_cxx.parent))
    monkeypatch.setenv("CXX", str(static_gxx))
    assert _build.cxx_override()[0] == str(shared_cxx)


def test_no_compiler_with_the_shared_libstdcxx_is_an_error(compilers, monkeypatch, tmp_path):
    static, _ = compilers
    monkeypatch.setenv("PATH", str(static.parent))
    monkeypatch.setenv("CXX", str(static))
    with pytest.raises(RuntimeError, match=r"has only a static libstdc\+\+ .*set CXX to a compiler with "
                                           r"libstdc\+\+\.so$"):
        _build.cxx_override()

