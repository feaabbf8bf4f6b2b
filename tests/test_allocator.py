"""Tests of ttgnn.allocator: freed memory stays in the process (no page faults on reuse)."""
import os
import platform
import subprocess
import sys

import pytest

from ttgnn import allocator

_PROBE = """
import ctypes, resource, sys
from ttgnn.allocator import configure_allocator
print(configure_allocator(sys.argv[1]))
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 * 2**20  # above glibc's largest mmap threshold
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)  # what a tensor's first write does
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults[-1])
"""


def _faults(mode: str, env_mode=None) -> tuple[str, int]:
    env = dict(os.environ)
    env.pop("TTGNN_MALLOC", None)
    if env_mode is not None:
        env["TTGNN_MALLOC"] = env_mode
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=env, check=True)
    done, faults = out.stdout.split()
    return done, int(faults)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_retain_reuses_pages_and_default_faults_every_time():
    done, faults = _faults("retain")
    assert done == "retain" and faults < 200  # 64 MiB of fresh pages would be ~16,000 faults
    done, faults = _faults("default")
    assert done == "default" and faults > 8_000


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_environment_variable_wins():
    done, faults = _faults("retain", env_mode="default")
    assert done == "default" and faults > 8_000


def test_bad_mode_is_named(monkeypatch):
    monkeypatch.delenv("TTGNN_MALLOC", raising=False)
    with pytest.raises(ValueError, match="mode must be one of .*'fastest'"):
        allocator.configure_allocator("fastest")
    monkeypatch.setenv("TTGNN_MALLOC", "jemalloc")
    with pytest.raises(ValueError, match="TTGNN_MALLOC must be one of"):
        allocator.configure_allocator()


def test_preloaded_allocator_is_left_alone(monkeypatch):
    monkeypatch.delenv("TTGNN_MALLOC", raising=False)
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
    assert allocator.configure_allocator() == "unsupported"


class _FakeLibc:
    """Stands in for the C library: records mallopt's calls and answers ``result``."""

    def __init__(self, result=1):
        self.calls, self.result = [], result

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return self.result


@pytest.fixture
def fresh(monkeypatch):
    """configure_allocator as in a new process on glibc, with no allocator preloaded; the C library
    it would open is a recording fake (returned), so this process's allocator is left as it is."""
    monkeypatch.delenv("TTGNN_MALLOC", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setattr(allocator, "_configured", None)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("glibc", "2.36"))
    libc, opened = _FakeLibc(), []
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: opened.append(name) or libc)
    libc.opened = opened
    return libc


def test_retain_sets_heap_only_and_never_trim_once(fresh, caplog):
    caplog.set_level("DEBUG", logger="ttgnn.allocator")
    assert allocator.configure_allocator() == "retain" and allocator._configured == "retain"
    # glibc's M_MMAP_MAX (-4) to 0, M_TRIM_THRESHOLD (-1) to INT_MAX, from the C library found by name
    assert fresh.calls == [(-4, 0), (-1, 2**31 - 1)]
    assert len(fresh.opened) == 1 and fresh.opened[0] and "c" in fresh.opened[0]
    assert caplog.messages == ["glibc malloc: heap only (M_MMAP_MAX=0), never trimmed"]
    assert allocator.configure_allocator("retain") == "retain" and len(fresh.calls) == 2  # done once


def test_mallopt_refusing_is_reported(fresh, caplog):
    for result in (0, 2):  # glibc's mallopt returns 1 on success, anything else is a refusal
        fresh.result, fresh.calls[:] = result, []
        assert allocator.configure_allocator() == "unsupported" and allocator._configured is None
        assert caplog.messages[-1] == ("mallopt refused the allocator settings; training may spend time in "
                                       "page faults")
    fresh.calls[:] = []
    fresh.mallopt = lambda param, value: fresh.calls.append(param) or (0 if param == -1 else 1)
    assert allocator.configure_allocator() == "unsupported"  # the second setting refused
    assert fresh.calls == [-4, -1]


def test_default_mode_changes_nothing(fresh, monkeypatch):
    assert allocator.configure_allocator("default") == "default" and allocator._configured == "default"
    monkeypatch.setenv("TTGNN_MALLOC", "default")
    assert allocator.configure_allocator("retain") == "default"
    assert fresh.calls == [] and fresh.opened == []


@pytest.mark.parametrize("preload", ["/usr/lib/libtcmalloc.so.4", "libmimalloc.so", "/opt/jemalloc/lib/libjemalloc.so"])
def test_other_allocators_are_left_alone(fresh, monkeypatch, caplog, preload):
    caplog.set_level("INFO", logger="ttgnn.allocator")
    monkeypatch.setenv("LD_PRELOAD", preload)
    assert allocator.configure_allocator() == "unsupported" and fresh.calls == []
    assert caplog.messages == [f"allocator {preload} preloaded; glibc settings left alone"]


def test_unrelated_preload_still_retains(fresh, monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libfaketime.so.1")
    assert allocator.configure_allocator() == "retain" and len(fresh.calls) == 2


def test_other_c_libraries_are_left_alone(fresh, monkeypatch, caplog):
    caplog.set_level("DEBUG", logger="ttgnn.allocator")
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))  # musl reports nothing
    assert allocator.configure_allocator() == "unsupported" and fresh.calls == []
    assert caplog.messages == ["not glibc (('', '')); allocator left alone"] and allocator._configured is None


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_retain_in_this_process(monkeypatch):
    """The real C library accepts both settings (what the CLI does at start-up)."""
    monkeypatch.delenv("TTGNN_MALLOC", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setattr(allocator, "_configured", None)
    assert allocator.configure_allocator() == "retain"


def test_the_c_library_is_found_by_name_else_libc_so_6(fresh, monkeypatch):
    asked = []
    monkeypatch.setattr(allocator.ctypes.util, "find_library", lambda name: asked.append(name) or "libc.so.7")
    assert allocator.configure_allocator() == "retain"
    assert asked == ["c"] and fresh.opened == ["libc.so.7"]
    monkeypatch.setattr(allocator, "_configured", None)
    monkeypatch.setattr(allocator.ctypes.util, "find_library", lambda name: None)
    assert allocator.configure_allocator() == "retain" and fresh.opened[-1] == "libc.so.6"
