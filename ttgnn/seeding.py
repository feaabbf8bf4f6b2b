"""Seeds: one derivation and one seeding function for every random stream of a run.

A run re-seeds every random source at the start of every epoch from ``(seed, rank, epoch)``
(:func:`derive_seed`), so an epoch's draws (neighbour sampling, dropout, shuffles) depend on
nothing that ran before it in the process: a run resumed at an epoch boundary repeats an
uninterrupted one exactly, and the ranks of a data-parallel job draw distinct streams.
"""
from __future__ import annotations

import random
import sys
from typing import Union

import numpy as np
import torch

__all__ = ["derive_seed", "seed_everything", "generator"]


def derive_seed(seed: int, *keys: Union[int, str]) -> int:
    """A 31-bit seed (DGL's limit) derived from ``seed`` and ``keys`` by :class:`numpy.random.SeedSequence`.

    Distinct key tuples give independent streams. Keys are non-negative ints or short strings
    naming a purpose (e.g. ``derive_seed(seed, "known-labels", epoch)``).

    Raises:
        ValueError: a negative seed or key.
        TypeError: a key that is neither int nor str.
    """
    entropy = [int(seed), len(keys)]  # the length keeps (s, a) and (s, a, 0) apart
    for key in keys:
        if isinstance(key, str):
            entropy.append(int.from_bytes(key.encode(), "little") % (1 << 63))
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            entropy.append(int(key))
        else:
            raise TypeError(f"seed keys must be int or str, got {type(key).__name__}")
    if min(entropy) < 0:
        raise ValueError(f"seed and keys must be >= 0, got seed={seed}, keys={keys}")
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0]) & 0x7FFFFFFF


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's, torch's (all devices) and, when imported, DGL's random generators.

    Any integer ``seed >= 0`` is taken; NumPy gets ``seed % 2**32``, torch ``seed % 2**64`` and
    DGL ``seed % 2**31`` (the widest seeds each accepts), Python ``seed`` itself.

    Raises:
        TypeError: a seed that is not an integer (a bool is not one).
        ValueError: a negative seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed % (1 << 64))
    dgl = sys.modules.get("dgl")
    if dgl is not None and hasattr(dgl, "seed"):
        dgl.seed(seed % (1 << 31))


def generator(seed: int, *keys: Union[int, str]) -> torch.Generator:
    """A CPU :class:`torch.Generator` seeded with :func:`derive_seed` ``(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))
