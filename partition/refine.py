"""Uncoarsening: carrying a partition of a coarse graph back to the input, refining and balancing it.

:func:`project_labels` walks a :func:`~ttgnn.partition.coarsen.coarsen_graph` hierarchy from the
coarsest level down, improving the parts on every level with :func:`refine_labels`
(size-constrained label propagation over the parts, as a multilevel partitioner refines while it
uncoarsens); :func:`balance_labels` then moves the nodes above each part's capacity out, block by
block, so no temporary holds a value per CSR entry of the whole graph.
"""
from __future__ import annotations

import logging
from typing import Optional

import numpy as np

from . import coarsen
from .coarsen import (_check_array, _check_csr, _check_int, _check_weights, _mix, _propagate, _row_blocks,
                      _sum_runs)
from .split import _rank_in_group

__all__ = ["balance_labels", "fill_empty_parts", "project_labels", "refine_labels"]

log = logging.getLogger(__name__)


def _check_partition(indptr, indices, labels, nparts, capacity, rounds, seed) -> tuple[int, int, int, int, int]:
    """The checked ``(num_nodes, nparts, capacity, rounds, seed)`` of a partition to improve;
    ``TypeError``/``ValueError`` naming the bad argument otherwise."""
    num_nodes = _check_csr(indptr, indices)
    nparts = _check_int("nparts", nparts, 1)
    capacity = _check_int("capacity", capacity, 1)
    rounds = _check_int("rounds", rounds, 0)
    seed = _check_int("seed", seed, 0)
    _check_array("labels", labels, num_nodes)
    if num_nodes and (int(labels.min()) < 0 or int(labels.max()) >= nparts):
        raise ValueError(f"labels must lie in [0, {nparts}), got {int(labels.min())} .. {int(labels.max())}")
    return num_nodes, nparts, capacity, rounds, seed


def refine_labels(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, nparts: int, capacity: int,
                  rounds: int = 3, seed: int = 0, *, node_weights: Optional[np.ndarray] = None,
                  edge_weights: Optional[np.ndarray] = None) -> np.ndarray:
    """Improve a partition by size-constrained label propagation over its parts.

    The moves of :func:`cluster_label_propagation`, with the parts as the clusters: a node joins
    the part it has strictly more links to than to its own, if that part has room for it. A
    partition projected from a coarse graph keeps the clusters' boundaries; this is the
    refinement a multilevel partitioner runs on every level. Parts never grow beyond
    ``capacity`` (parts already above it only shrink), so strict capacities can be restored by
    :func:`~ttgnn.partition.split.rebalance` afterwards.

    Args:
        indptr (np.ndarray): integer CSR offsets of a symmetric graph, shape ``(n + 1,)``.
        indices (np.ndarray): integer neighbour ids, shape ``(m,)``.
        labels (np.ndarray): integer part of every node in ``[0, nparts)``, shape ``(n,)``;
            not modified.
        nparts (int): number of parts, ``>= 1``.
        capacity (int): most nodes (node weight) a part may grow to, ``>= 1``.
        rounds (int, optional): rounds, ``>= 0``. (default: ``3``)
        seed (int, optional): seed of the row groups and tie-breaks. (default: ``0``)
        node_weights (np.ndarray, optional): integer weight of every node, ``(n,)``.
            (default: all 1)
        edge_weights (np.ndarray, optional): integer weight of every entry, ``(m,)``.
            (default: all 1)

    Returns:
        np.ndarray: ``int64`` labels, shape ``(n,)``.

    Raises:
        TypeError: non-integer arrays or arguments.
        ValueError: a malformed CSR, labels out of range or weights of the wrong shape.
    """
    num_nodes, nparts, capacity, rounds, seed = _check_partition(indptr, indices, labels, nparts, capacity,
                                                                 rounds, seed)
    node_weights = _check_weights("node_weights", node_weights, num_nodes, 0)
    edge_weights = _check_weights("edge_weights", edge_weights, indices.shape[0], 1)
    refined = labels.astype(np.int64, copy=True)
    if node_weights is None:
        sizes = np.bincount(refined, minlength=nparts).astype(np.int64)
    else:
        sizes = np.zeros(nparts, dtype=np.int64)
        np.add.at(sizes, refined, node_weights)
    moved = _propagate(indptr, indices, refined, sizes, capacity, rounds, seed, node_weights, edge_weights)
    log.debug("refinement moved %d nodes", moved)
    return refined


def _moves_out_of_block(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, room: np.ndarray,
                        over: np.ndarray, first: int, last: int, salt: int) -> tuple[np.ndarray, ...]:
    """For the nodes of rows ``[first, last)`` in over-full parts: the neighbouring part with
    room they have most links to, and the gain in links of moving there (``<= 0`` mostly).
    Returns ``(nodes, targets, gains)``; nodes without a neighbour in a part with room are left
    out."""
    nothing = (np.zeros(0, dtype=np.int64),) * 3
    lo, hi = int(indptr[first]), int(indptr[last])
    own_row = labels[first:last]
    candidate_row = over[own_row]
    if hi == lo or not candidate_row.any():
        return nothing
    nparts = np.int64(room.shape[0])
    local_rows = np.repeat(np.arange(last - first, dtype=np.int64), np.diff(indptr[first:last + 1]))
    in_candidate = candidate_row[local_rows]
    rows = local_rows[in_candidate]
    del local_rows
    their = labels[indices[lo:hi][in_candidate]]
    del in_candidate
    useful = (room[their] > 0) | (their == own_row[rows])
    keys, links = _sum_runs(rows[useful] * nparts + their[useful], None)
    del rows, their, useful
    key_rows = keys // nparts
    key_parts = keys - key_rows * nparts
    del keys
    is_own = key_parts == own_row[key_rows]
    own_links = np.zeros(last - first, dtype=np.int64)
    own_links[key_rows[is_own]] = links[is_own]
    other = ~is_own
    key_rows, key_parts, links = key_rows[other], key_parts[other], links[other]
    if key_rows.size == 0:
        return nothing
    score = (links << np.int64(31)) | _mix(key_parts, salt)
    row_starts = np.flatnonzero(np.r_[True, key_rows[1:] != key_rows[:-1]])
    segment = np.repeat(np.arange(row_starts.shape[0]), np.diff(np.r_[row_starts, key_rows.shape[0]]))
    best_at = np.flatnonzero(score == np.maximum.reduceat(score, row_starts)[segment])
    best_at = best_at[np.r_[True, segment[best_at][1:] != segment[best_at][:-1]]]
    best_rows = key_rows[best_at]
    return first + best_rows, key_parts[best_at], links[best_at] - own_links[best_rows]


def balance_labels(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, nparts: int, capacity: int,
                   rounds: int = 8, seed: int = 0) -> np.ndarray:
    """Move nodes out of parts above ``capacity`` nodes, the cheapest moves first, in bounded memory.

    What :func:`~ttgnn.partition.split.rebalance` does, with its per-entry work done in blocks
    of rows: per round, every node of an over-full part is scored in its block (the links it
    has to the neighbouring part with room it has most links to, minus those to its own part);
    then, over the whole graph, each over-full part sends out its excess, best scores first, to
    those parts, up to their room (ties by node id). Nodes with no neighbour in a part with room
    stay (``rebalance``'s fallback places them). Peak extra memory: a score per candidate node
    (~24 bytes) and one block's temporaries, where ``rebalance`` holds several ``int64`` per
    entry of every over-full part.

    Args:
        indptr (np.ndarray): integer CSR offsets of a symmetric graph, shape ``(n + 1,)``.
        indices (np.ndarray): integer neighbour ids, shape ``(m,)``.
        labels (np.ndarray): integer part of every node in ``[0, nparts)``, shape ``(n,)``;
            not modified.
        nparts (int): number of parts, ``>= 1``.
        capacity (int): most nodes a part may hold, ``nparts * capacity >= n``.
        rounds (int, optional): most rounds. (default: ``8``)
        seed (int, optional): seed of the tie-breaks between equally linked parts. (default: ``0``)

    Returns:
        np.ndarray: ``int64`` labels, shape ``(n,)``; parts above ``capacity`` only where some
        of their nodes had no neighbour in a part with room.

    Raises:
        TypeError: non-integer arrays or arguments.
        ValueError: a malformed CSR, labels out of range, or ``nparts * capacity < n``.
    """
    num_nodes, nparts, capacity, rounds, seed = _check_partition(indptr, indices, labels, nparts, capacity,
                                                                 rounds, seed)
    if nparts * capacity < num_nodes:
        raise ValueError(f"{nparts} parts of capacity {capacity} cannot hold {num_nodes} nodes")
    labels = labels.astype(np.int64, copy=True)
    bounds = _row_blocks(indptr, coarsen._BLOCK_ENTRIES)
    for round_index in range(rounds):
        sizes = np.bincount(labels, minlength=nparts)
        excess = sizes - capacity
        if excess.max(initial=0) <= 0:
            break
        room = np.maximum(-excess, 0)
        over = excess > 0
        salt = int(np.random.default_rng([seed, round_index]).integers(0, 2**63))
        found = [_moves_out_of_block(indptr, indices, labels, room, over, first, last, salt)
                 for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
        nodes = np.concatenate([f[0] for f in found])
        targets = np.concatenate([f[1] for f in found])
        gains = np.concatenate([f[2] for f in found])
        del found
        own = labels[nodes]
        order = np.lexsort((nodes, -gains, own))
        chosen = order[_rank_in_group(own[order]) < excess[own[order]]]
        del order, own
        order = np.lexsort((nodes[chosen], -gains[chosen], targets[chosen]))
        chosen = chosen[order]
        chosen = chosen[_rank_in_group(targets[chosen]) < room[targets[chosen]]]
        if chosen.size == 0:
            break
        labels[nodes[chosen]] = targets[chosen]
        log.debug("balance round %d: %d nodes moved, %d over capacity before", round_index + 1, chosen.shape[0],
                  int(excess[over].sum()))
    return labels


def fill_empty_parts(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, nparts: int) -> np.ndarray:
    """Give every empty part one node, so that every part (every TT digit value) is used: for each,
    the node of the then largest part with the fewest links inside it (the smallest cut added; ties:
    the lowest id). Refinement can drain a part; a balanced split never leaves one empty when there
    are at least ``nparts`` nodes. Parts are never emptied to fill others.

    Args:
        indptr (np.ndarray): integer CSR offsets of a symmetric graph, shape ``(n + 1,)``.
        indices (np.ndarray): integer neighbour ids, shape ``(m,)``.
        labels (np.ndarray): integer part of every node in ``[0, nparts)``, shape ``(n,)``; not modified.
        nparts (int): number of parts, ``>= 1``.

    Returns:
        np.ndarray: ``int64`` labels, shape ``(n,)``: ``labels`` where no part was empty.
    """
    nparts = _check_partition(indptr, indices, labels, nparts, 1, 0, 0)[1]
    labels = np.array(labels, dtype=np.int64)
    counts = np.bincount(labels, minlength=nparts)
    for part in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        if counts[donor] < 2:
            break
        members = np.flatnonzero(labels == donor)
        starts = np.asarray(indptr[members], dtype=np.int64)
        degrees = np.asarray(indptr[members + 1], dtype=np.int64) - starts
        entries = np.repeat(starts - np.cumsum(degrees) + degrees, degrees) + np.arange(int(degrees.sum()))
        inside = np.bincount(np.repeat(np.arange(members.shape[0]), degrees),
                             weights=labels[indices[entries]] == donor, minlength=members.shape[0])
        node = int(members[np.argmin(inside)])
        labels[node] = part
        counts[donor] -= 1
        counts[part] = 1
    return labels


def project_labels(levels: list, coarse_labels: np.ndarray, nparts: int, capacity: int, *, rounds: int = 3,
                   seed: int = 0) -> np.ndarray:
    """Carry a partition of the coarsest graph down to the input, refining it on every level.

    ``levels`` is emptied on the way down (each level is dropped once its labels are projected
    and refined), so the coarser levels' memory is freed while the finer ones are refined.

    Args:
        levels (list of CoarseLevel): from :func:`coarsen_graph`, finest first; emptied.
        coarse_labels (np.ndarray): integer part of every coarsest node in ``[0, nparts)``.
        nparts (int): number of parts.
        capacity (int): most input nodes a part may grow to in refinement.
        rounds (int, optional): :func:`refine_labels` rounds per level. (default: ``3``)
        seed (int, optional): seed. (default: ``0``)

    Returns:
        np.ndarray: ``int64`` part of every input node, shape ``(n,)``.
    """
    labels = np.asarray(coarse_labels, dtype=np.int64)
    while levels:
        depth = len(levels) - 1
        level = levels.pop()
        labels = labels[level.clusters]
        if rounds:
            labels = refine_labels(level.indptr, level.indices, labels, nparts, capacity, rounds=rounds,
                                   seed=seed + depth, node_weights=level.node_weights,
                                   edge_weights=level.edge_weights)
        del level
    return labels
