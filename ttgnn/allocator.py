"""Keep freed memory in the process, so CPU training does not pay page faults every step.

glibc's ``malloc`` serves blocks above its mmap threshold (at most 32 MiB) with fresh ``mmap``
calls and unmaps them on ``free``. A training step allocates and frees tensors of hundreds of
MiB, so every step the kernel maps, faults and zeroes their pages again: on ogbn-arxiv a third
of ``ttgnn train``'s CPU time went to the kernel. :func:`configure_allocator` asks glibc (through
``mallopt``, at run time) to serve every block from its heap (``M_MMAP_MAX = 0``) and never give
the top of the heap back (``M_TRIM_THRESHOLD`` at its maximum): after the first step the same
pages are reused. The cost is a higher resident peak (freed memory stays with the process).

The ``ttgnn`` command, the examples and the benchmarks call it at start-up. Library users call
it themselves (nothing happens on import)::

    import ttgnn.allocator
    ttgnn.allocator.configure_allocator()          # or configure_allocator("default") to skip

The environment variable ``TTGNN_MALLOC`` overrides the mode everywhere: ``retain`` (keep freed
memory, the default of the command line) or ``default`` (leave the allocator alone). On a C
library other than glibc, or where ``LD_PRELOAD`` names another allocator (jemalloc,
tcmalloc), nothing is changed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
from typing import Optional

__all__ = ["MODES", "configure_allocator"]

log = logging.getLogger(__name__)

#: ``retain``: heap only, never trimmed; ``default``: glibc's own behaviour.
MODES = ("retain", "default")

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1

_configured: Optional[str] = None


def configure_allocator(mode: Optional[str] = None) -> str:
    """Set glibc's allocator for training: keep freed memory in the process (see the module).

    Args:
        mode (str, optional): one of :data:`MODES`. ``$TTGNN_MALLOC`` wins when set.
            (default: ``"retain"``)

    Returns:
        str: what was done: ``"retain"``, ``"default"``, or ``"unsupported"`` (not glibc, or
        another allocator preloaded).

    Raises:
        ValueError: an unknown mode (from the argument or ``$TTGNN_MALLOC``).
    """
    global _configured
    env = os.environ.get("TTGNN_MALLOC")
    chosen = env if env else (mode or "retain")
    if chosen not in MODES:
        source = "$TTGNN_MALLOC" if env else "mode"
        raise ValueError(f"{source} must be one of {MODES}, got {chosen!r}")
    if chosen == "default":
        _configured = "default"
        return "default"
    preload = os.environ.get("LD_PRELOAD", "")
    if any(name in preload for name in ("jemalloc", "tcmalloc", "mimalloc")):
        log.info("allocator %s preloaded; glibc settings left alone", preload)
        return "unsupported"
    if platform.libc_ver()[0] != "glibc":
        log.debug("not glibc (%s); allocator left alone", platform.libc_ver())
        return "unsupported"
    if _configured == "retain":
        return "retain"
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    ok = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, _INT_MAX) == 1
    if not ok:  # pragma: no cover - glibc accepts both values
        log.warning("mallopt refused the allocator settings; training may spend time in page faults")
        return "unsupported"
    _configured = "retain"
    log.debug("glibc malloc: heap only (M_MMAP_MAX=0), never trimmed")
    return "retain"
