"""On-disk cache of node orders, keyed by the graph's content hash, row shape, method and seed.

A file holds the ``perm`` array, the quality figures and the key it was computed for, plus a
checksum of ``perm``. Loading re-checks all of it (key, checksum, shape, range, injectivity): a
corrupted or mismatched file is reported with a warning and the order recomputed. Files are
written atomically (:mod:`ttgnn.fileio`), so readers never see a half-written file.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from ..fileio import write_cache_file
from .reorder import check_perm

__all__ = ["cache_file", "load_cached", "save_cached"]

log = logging.getLogger(__name__)

_FORMAT_VERSION = 1


def cache_file(cache_dir: Union[str, Path], graph_hash: str, row_shape: Sequence[int], method: str,
               seed: int) -> Path:
    """The cache path of one (graph, row shape, method, seed) key."""
    shape = "x".join(str(n) for n in row_shape)
    return Path(cache_dir) / f"order-{graph_hash[:24]}-{shape}-{method}-seed{seed}.npz"


def _checksum(perm: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(perm, dtype=np.int64).tobytes(), digest_size=16).hexdigest()


def _key(graph_hash: str, row_shape: Sequence[int], method: str, seed: int) -> dict:
    return {"format_version": _FORMAT_VERSION, "graph_hash": graph_hash,
            "row_shape": [int(n) for n in row_shape], "method": method, "seed": int(seed)}


def load_cached(path: Path, graph_hash: str, row_shape: Sequence[int], method: str, seed: int,
                num_nodes: int) -> Optional[tuple[np.ndarray, dict]]:
    """``(perm, quality)`` from a valid cache file, ``None`` when absent or invalid (warned)."""
    if not path.exists():
        return None
    if not path.is_file():  # a FIFO's open blocked for ever; a device or a folder is no cache file
        log.warning("cache file %s is not a regular file; recomputing", path)
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["meta"][()]))
            perm = np.array(archive["perm"])
        expected = _key(graph_hash, row_shape, method, seed)
        got = {k: meta.get(k) for k in expected}
        if got != expected:
            raise ValueError(f"it was computed for {got}, not {expected}")
        if perm.dtype != np.int64 or perm.shape != (num_nodes,):
            raise ValueError(f"perm has dtype {perm.dtype} and shape {perm.shape}, expected int64 "
                             f"({num_nodes},)")
        if meta.get("perm_checksum") != _checksum(perm):
            raise ValueError("the perm checksum does not match")
        check_perm(perm, math.prod(row_shape))
        quality = {str(k): float(v) for k, v in meta["quality"].items()}
    except Exception as err:  # noqa: BLE001 - any unreadable file is recomputed, never trusted
        log.warning("cache file %s is corrupted or mismatched (%s: %s); recomputing", path,
                    type(err).__name__, err)
        return None
    for key in ("num_nodes", "num_edges"):
        if key in quality:
            quality[key] = int(quality[key])
    return perm, quality


def save_cached(path: Path, perm: np.ndarray, quality: dict, graph_hash: str, row_shape: Sequence[int],
                method: str, seed: int) -> None:
    """Write a cache file atomically (:func:`ttgnn.fileio.write_cache_file`: a folder that cannot
    be written gives a warning, not an error)."""
    meta = _key(graph_hash, row_shape, method, seed)
    meta["perm_checksum"] = _checksum(perm)
    meta["quality"] = {k: float(v) for k, v in quality.items()}
    if write_cache_file(path, lambda fh: np.savez(fh, perm=np.ascontiguousarray(perm, dtype=np.int64),
                                                  meta=np.array(json.dumps(meta))), "node order"):
        log.debug("cached the %s order in %s", method, path)
