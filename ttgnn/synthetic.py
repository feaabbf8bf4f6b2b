"""Streaming synthetic graphs: planted nested communities, power-law degrees, planted labels.

:func:`nested_communities` makes graphs of :math:`10^8` nodes on one machine: the edges are drawn
in seeded chunks twice (once to count degrees, once to place them, see
:func:`ttgnn.partition.graph.csr_from_edge_chunks`), so the edge list is never held; what stays is
the final symmetric CSR (``int32`` ids), the labels and the splits.

The model (a nested stochastic block model with Chung-Lu style weights): nodes are cut into
``prod(branching)`` equal leaf blocks, nested ``branching[0]`` top communities, each of
``branching[1]`` sub-communities, and so on. Inside every leaf block the node at offset ``j`` has
weight :math:`(j + 1)^{-1/(\\gamma - 1)}`, which gives degrees a power-law tail of exponent
:math:`\\gamma`. An edge starts at a node of a uniform leaf block drawn by weight; with
probability ``mixing[l]`` it ends in the same level-``l`` community (``l = 0``: top), else
anywhere; the end node is drawn by weight inside a uniform leaf block of that community. Node
ids are shuffled, so an id order has no locality. The label of a node is its top community
(modulo ``num_classes``), replaced by a random class for a ``label_noise`` share of nodes.
"""
from __future__ import annotations

import logging
import math
from typing import Optional, Sequence

import numpy as np
import torch

from .data import NodeDataset

__all__ = ["nested_communities", "default_branching"]

log = logging.getLogger(__name__)

_CHUNK_EDGES = 1 << 24


def default_branching(num_nodes: int, levels: int = 2, leaf_size: int = 2000) -> tuple[int, ...]:
    """Equal branching factors giving leaf blocks of about ``leaf_size`` nodes (at least 2 each)."""
    leaves = max(2 ** levels, num_nodes // max(leaf_size, 1))
    factor = max(2, int(round(leaves ** (1.0 / levels))))
    return (factor,) * levels


def _is_int(value) -> bool:
    """An int or a NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check(name: str, value, ok: bool, rule: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {rule}, got {value!r}")


_QUANTILE_BITS = 20


def _quantile_table(exponent: Optional[float]) -> Optional[np.ndarray]:
    """Inverse CDF of the offset weights on ``2**20`` points, as fractions of a block's length.

    Drawing ``table[k]`` for a uniform ``k`` replaces two powers per edge by one gather (the
    generator's hot spot); the weights are those of a block of a million nodes, close to any
    block size's in shape.
    """
    if exponent is None:
        return None
    beta = 1.0 / (exponent - 1.0)
    one = 1.0 - beta
    length = 1e6
    u = (np.arange(1 << _QUANTILE_BITS, dtype=np.float64) + 0.5) / (1 << _QUANTILE_BITS)
    top = (length + 1.0) ** one
    offset = (1.0 + u * (top - 1.0)) ** (1.0 / one) - 1.0
    return (offset / length).astype(np.float32)


def _weighted_offsets(rng: np.random.Generator, count: int, table: Optional[np.ndarray],
                      bounds_lo: np.ndarray, bounds_hi: np.ndarray) -> np.ndarray:
    """Nodes in leaf blocks ``[lo, hi)``, offsets drawn by weight (uniform without a table)."""
    length = bounds_hi - bounds_lo
    if table is None:
        fraction = rng.random(count, dtype=np.float32)
    else:
        fraction = table[rng.integers(0, table.shape[0], count, dtype=np.int32)]
    offset = (fraction * length).astype(np.int64)
    np.minimum(offset, length - 1, out=offset)
    offset += bounds_lo
    return offset


def nested_communities(
    num_nodes: int,
    avg_degree: float = 10.0,
    branching: Optional[Sequence[int]] = None,
    mixing: Sequence[float] = (0.3, 0.5),
    exponent: Optional[float] = 2.5,
    num_classes: Optional[int] = None,
    label_noise: float = 0.1,
    split_sizes: Optional[Sequence[int]] = None,
    seed: int = 0,
    progress: bool = False,
) -> NodeDataset:
    r"""A graph with planted nested communities and power-law degrees, made in a stream.

    Args:
        num_nodes (int): ``N`` (up to ``2**31 - 2``).
        avg_degree (float, optional): edges drawn per node times two: the mean degree before
            duplicates and self-loops are dropped (repeated edges at the hubs of small leaf blocks
            cost a little: 10 gave 9.89 on 10^6 and 10^7 nodes with leaves of ~2,000 nodes, 8 gave
            7.36 with leaves of 250). (default: ``10.0``)
        branching (sequence of int, optional): communities per level, top first.
            (default: :func:`default_branching`, two levels, leaves of about 2,000 nodes)
        mixing (sequence of float, optional): per level, top first, the probability that an
            edge ends inside the start node's community of that level; the rest go anywhere. One
            value per level, sum at most 1. (default: ``(0.3, 0.5)``)
        exponent (float, optional): power-law exponent :math:`\gamma > 2` of the degrees;
            ``None`` for uniform weights. (default: ``2.5``)
        num_classes (int, optional): label classes; a node's label is its top community modulo
            this. (default: ``branching[0]``)
        label_noise (float, optional): share of nodes with a uniformly random label, in
            ``[0, 1]``. (default: ``0.1``)
        split_sizes (sequence of int, optional): ``(train, valid, test)`` node counts, drawn at
            random without overlap. (default: half, a quarter, a quarter)
        seed (int, optional): the seed; the same arguments and seed give the same graph.
            (default: ``0``)
        progress (bool, optional): log each phase, tqdm bars over the edge chunks. (default: ``False``)

    Returns:
        NodeDataset: ``edge_index=None``; its symmetric CSR in ``dataset.csr()``.

    Raises:
        ValueError: an argument out of range (named in the message).
    """
    from .partition.graph import csr_from_edge_chunks

    _check("num_nodes", num_nodes, isinstance(num_nodes, (int, np.integer)) and 2 <= num_nodes < 2**31 - 1,
           "an int in [2, 2**31 - 1)")
    num_nodes = int(num_nodes)
    _check("seed", seed, isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0,
           "an int >= 0")
    _check("avg_degree", avg_degree, isinstance(avg_degree, (int, float)) and 0 < avg_degree < num_nodes,
           f"a number in (0, {num_nodes})")
    _check("mixing", mixing, len(mixing) >= 1, "one probability per level, at least one level")
    if branching is not None:  # 2.7 was truncated to 2
        _check("branching", branching, all(_is_int(b) for b in branching), "a sequence of ints")
    branching = tuple(int(b) for b in (branching or default_branching(num_nodes, len(mixing))))
    num_leaves = math.prod(branching)
    _check("branching", list(branching), all(b >= 1 for b in branching) and num_leaves <= num_nodes,
           f"factors >= 1 whose product is at most num_nodes={num_nodes}")
    mixing = tuple(float(p) for p in mixing)
    _check("mixing", list(mixing), len(mixing) == len(branching) and all(p >= 0 for p in mixing)
           and sum(mixing) <= 1.0 + 1e-9, f"{len(branching)} probabilities >= 0 (one per level) summing to <= 1")
    _check("exponent", exponent, exponent is None or (isinstance(exponent, (int, float)) and exponent > 2),
           "None or a number > 2")
    _check("num_classes", num_classes, num_classes is None or (_is_int(num_classes) and num_classes >= 1),
           "an int >= 1")  # 0 became branching[0]
    num_classes = int(branching[0] if num_classes is None else num_classes)
    _check("label_noise", label_noise, 0.0 <= label_noise <= 1.0, "in [0, 1]")
    if split_sizes is None:
        split_sizes = (num_nodes // 2, num_nodes // 4, num_nodes - num_nodes // 2 - num_nodes // 4)
    _check("split_sizes", split_sizes, all(_is_int(n) for n in split_sizes), "three ints")  # 10.7 became 10
    split_sizes = tuple(int(n) for n in split_sizes)
    _check("split_sizes", list(split_sizes), len(split_sizes) == 3 and split_sizes[0] >= 1
           and min(split_sizes) >= 0 and sum(split_sizes) <= num_nodes,
           f"(train >= 1, valid >= 0, test >= 0) with a sum <= num_nodes={num_nodes}")

    bounds = (np.arange(num_leaves + 1, dtype=np.int64) * num_nodes) // num_leaves
    # Leaves under one community of level l: a run of span[l] consecutive leaves.
    span = [math.prod(branching[level + 1:]) for level in range(len(branching))]
    cumulative = np.cumsum(mixing)
    table = _quantile_table(exponent)
    rng = np.random.default_rng([seed, 0])
    relabel = rng.permutation(num_nodes).astype(np.int32)  # planted position -> node id
    num_edges = int(round(num_nodes * avg_degree / 2))
    num_chunks = max(1, -(-num_edges // _CHUNK_EDGES))

    def chunks():
        for chunk in range(num_chunks):
            count = min(_CHUNK_EDGES, num_edges - chunk * _CHUNK_EDGES)
            chunk_rng = np.random.default_rng([seed, 1, chunk])
            src_leaf = chunk_rng.integers(0, num_leaves, count)
            src = _weighted_offsets(chunk_rng, count, table, bounds[src_leaf], bounds[src_leaf + 1])
            kind = np.searchsorted(cumulative, chunk_rng.random(count, dtype=np.float32), side="right")
            dst_leaf = chunk_rng.integers(0, num_leaves, count)  # "anywhere" by default
            for level, width in enumerate(span):
                inside = kind == level
                first = (src_leaf[inside] // width) * width
                dst_leaf[inside] = first + chunk_rng.integers(0, width, int(inside.sum()))
            del kind, src_leaf
            dst = _weighted_offsets(chunk_rng, count, table, bounds[dst_leaf], bounds[dst_leaf + 1])
            del dst_leaf
            yield relabel[src], relabel[dst]

    if progress:
        log.info("drawing %d edges of %d nodes in %d chunks (branching %s)", num_edges, num_nodes, num_chunks,
                 list(branching))
    csr = csr_from_edge_chunks(chunks, num_nodes, num_chunks=num_chunks, progress=progress)

    labels, split = _planted_labels(relabel, bounds, span[0], num_classes, label_noise, split_sizes, seed)
    del relabel
    if progress:
        log.info("graph ready: %d nodes, %d symmetric entries (mean degree %.2f)", num_nodes, csr.num_entries,
                 csr.num_entries / num_nodes)
    return NodeDataset(f"nested-{num_nodes}", num_nodes, None, torch.from_numpy(labels), split, num_classes,
                       _csr=csr)


def _planted_labels(relabel: np.ndarray, bounds: np.ndarray, top_span: int, num_classes: int, label_noise: float,
                    split_sizes: tuple, seed: int) -> tuple[np.ndarray, dict]:
    """Labels of :func:`nested_communities` (top community modulo ``num_classes`` by planted
    position, scattered to node ids, a ``label_noise`` share redrawn) and a random split of sizes
    ``split_sizes``; ``top_span`` is the number of leaves under one top-level community."""
    num_nodes = relabel.shape[0]
    num_leaves = bounds.shape[0] - 1
    labels = np.empty(num_nodes, dtype=np.int64)
    top_of_leaf = np.arange(num_leaves, dtype=np.int64) // top_span % num_classes
    labels[relabel] = np.repeat(top_of_leaf, np.diff(bounds))
    label_rng = np.random.default_rng([seed, 2])
    noisy = np.flatnonzero(label_rng.random(num_nodes) < label_noise)
    labels[noisy] = label_rng.integers(0, num_classes, noisy.shape[0])
    del noisy
    chosen = label_rng.permutation(num_nodes)[:sum(split_sizes)]
    train_end, valid_end = split_sizes[0], split_sizes[0] + split_sizes[1]
    split = {"train": torch.from_numpy(np.sort(chosen[:train_end])),
             "valid": torch.from_numpy(np.sort(chosen[train_end:valid_end])),
             "test": torch.from_numpy(np.sort(chosen[valid_end:]))}
    return labels, split
