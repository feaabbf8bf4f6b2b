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
