"""Loads the compiled kernels (``ttgnn._C``) once and says which devices they serve.

The extension is optional: importing ttgnn never fails because of it. When it is missing (for
instance a ``TTGNN_NO_EXTENSION=1`` install, or a build without a compiler), every lookup uses
the pure-PyTorch reference and this is logged once.
"""
from __future__ import annotations

import logging
from typing import Optional, Union

import torch

__all__ = ["available", "load_error", "has_kernel", "backend", "log_backends"]

log = logging.getLogger(__name__)

_OPS = ("tt_lookup", "tt_lookup_backward")

_loaded: Optional[bool] = None
_error: Optional[str] = None


def _load() -> bool:
    global _loaded, _error
    if _loaded is None:
        try:
            from . import _C  # noqa: F401  (registers torch.ops.ttgnn.*)

            _loaded = all(hasattr(torch.ops.ttgnn, name) for name in _OPS)
            if not _loaded:
                _error = "ttgnn._C loaded but did not register the ttgnn ops"
        except (ImportError, OSError) as exc:  # missing build, or an ABI mismatch with torch
            _loaded, _error = False, f"{type(exc).__name__}: {exc}"
    return _loaded


def available() -> bool:
    """Whether the compiled extension ``ttgnn._C`` is loaded (for any device)."""
    return _load()


def load_error() -> Optional[str]:
    """Why the extension could not be loaded, or ``None`` when it is loaded."""
    _load()
    return _error


_kernels: dict[str, bool] = {}


def has_kernel(device_type: str) -> bool:
    """Whether the extension has kernels for ``device_type`` (``"cpu"``, ``"cuda"``)."""
    if device_type not in _kernels:
        key = {"cpu": "CPU", "cuda": "CUDA"}.get(device_type)
        _kernels[device_type] = (
            _load()
            and key is not None
            and all(
                torch._C._dispatch_has_kernel_for_dispatch_key(f"ttgnn::{name}", key)
                for name in _OPS
            )
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
    log.info("TT lookup: compiled kernels for %s; other devices use the pure-PyTorch reference",
             ", ".join(devices) or "no device")


_logged_once = False
