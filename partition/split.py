"""Splitting one (sub)graph into ``nparts`` parts of at most ``capacity`` nodes each.

METIS balances parts only approximately, so its labels are followed by :func:`rebalance`, which
moves the fewest nodes possible (exactly the excess of each over-full part), choosing the nodes
whose move cuts the fewest edges, and sends each to a part with room it has the most edges to.
"""
from __future__ import annotations

import logging

import numpy as np

__all__ = ["balanced_sizes", "chunk_split", "metis_split", "rebalance"]

log = logging.getLogger(__name__)

# Rounds of edge-aware moves before the remaining excess (if any) is placed greedily.
_MAX_REBALANCE_ROUNDS = 8


def balanced_sizes(num_nodes: int, nparts: int) -> np.ndarray:
    """Sizes differing by at most one, the first ``num_nodes % nparts`` parts one larger."""
    sizes = np.full(nparts, num_nodes // nparts, dtype=np.int64)
    sizes[: num_nodes % nparts] += 1
    return sizes


def chunk_split(num_nodes: int, nparts: int) -> np.ndarray:
    """Labels cutting the nodes, in their current order, into balanced contiguous chunks: the
    sizes of :func:`balanced_sizes`, with no array of ``nparts`` entries (a level of ``2**31`` parts
    holding a few nodes would allocate 16 GiB)."""
    size, larger = divmod(int(num_nodes), int(nparts))  # `larger` chunks of size + 1 come first
    position = np.arange(num_nodes, dtype=np.int64)
    head = larger * (size + 1)
    if size == 0:
        return position
    return np.where(position < head, position // (size + 1), larger + (position - head) // size)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for every (s, l), vectorised."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64, copy=False) - offsets, lengths) + np.arange(total, dtype=np.int64)


def _first_per_group(sorted_groups: np.ndarray) -> np.ndarray:
    """Positions of the first element of each run in a sorted array."""
    if sorted_groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])


def _rank_in_group(sorted_groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of a sorted array."""
    starts = _first_per_group(sorted_groups)
    run_lengths = np.diff(np.r_[starts, sorted_groups.size])
    return np.arange(sorted_groups.size) - np.repeat(starts, run_lengths)


def rebalance(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, nparts: int,
              capacity: int) -> np.ndarray:
    """Move nodes out of parts holding more than ``capacity`` nodes.

    Exactly ``count - capacity`` nodes leave each over-full part (the fewest possible). Per round,
    the candidates are scored by the edges a move would cut (edges into their own part minus
    edges into the best part that still has room); the lowest scores move, to that best part,
    up to its room. Nodes with no neighbour in a part with room go to the part with the most room.

    Args:
        indptr (np.ndarray): CSR offsets of the symmetric subgraph, shape ``(n + 1,)``.
        indices (np.ndarray): CSR neighbours, shape ``(nnz,)``.
        labels (np.ndarray): part of every node in ``[0, nparts)``, shape ``(n,)``.
        nparts (int): number of parts.
        capacity (int): most nodes a part may hold; ``nparts * capacity >= n``.

    Returns:
        np.ndarray: ``int64`` labels, shape ``(n,)``, every part holding ``<= capacity`` nodes.
    """
    labels = np.array(labels, dtype=np.int64, copy=True)
    num_nodes = labels.shape[0]
    if nparts * capacity < num_nodes:
        raise ValueError(f"{nparts} parts of capacity {capacity} cannot hold {num_nodes} nodes")
    counts = np.bincount(labels, minlength=nparts)
    if counts.max(initial=0) <= capacity:
        return labels
    moved_total = int(np.maximum(counts - capacity, 0).sum())

    for _ in range(_MAX_REBALANCE_ROUNDS):
        excess = counts - capacity
        if excess.max() <= 0:
            break
        room = np.maximum(capacity - counts, 0)
        cand = np.flatnonzero(excess[labels] > 0)
        cand_part = labels[cand]
        degree = indptr[cand + 1] - indptr[cand]
        src = np.repeat(np.arange(cand.shape[0]), degree)
        neighbour_part = labels[indices[_ranges(indptr[cand], degree)]]
        internal = np.bincount(src, weights=(neighbour_part == cand_part[src]),
                               minlength=cand.shape[0]).astype(np.int64)

        # Keep a pool of the least internally connected candidates of each over-full part (a few
        # times its excess), then look for their best destination.
        order = np.lexsort((cand, degree, internal, cand_part))
        rank = _rank_in_group(cand_part[order])
        pool = order[rank < 4 * excess[cand_part[order]] + 16]
        in_pool = np.zeros(cand.shape[0], dtype=bool)
        in_pool[pool] = True
        edge_in_pool = in_pool[src] & (room[neighbour_part] > 0)
        best_part = np.full(cand.shape[0], int(np.argmax(room)), dtype=np.int64)
        best_links = np.zeros(cand.shape[0], dtype=np.int64)
        if edge_in_pool.any():
            key = src[edge_in_pool].astype(np.int64) * nparts + neighbour_part[edge_in_pool]
            uniq, links = np.unique(key, return_counts=True)
            node_u, part_u = uniq // nparts, uniq % nparts
            pick = np.lexsort((part_u, -links, node_u))
            first = pick[_first_per_group(node_u[pick])]
            best_part[node_u[first]] = part_u[first]
            best_links[node_u[first]] = links[first]

        score = internal - best_links  # edges newly cut by the move
        order = np.lexsort((cand[pool], degree[pool], score[pool], cand_part[pool]))
        pool = pool[order]
        chosen = pool[_rank_in_group(cand_part[pool]) < excess[cand_part[pool]]]
        # Respect the room of each destination: best-scored movers first.
        order = np.lexsort((cand[chosen], score[chosen], best_part[chosen]))
        chosen = chosen[order]
        fits = _rank_in_group(best_part[chosen]) < room[best_part[chosen]]
        chosen = chosen[fits]
        if chosen.size == 0:
            break
        labels[cand[chosen]] = best_part[chosen]
        counts = np.bincount(labels, minlength=nparts)

    excess = counts - capacity
    if excess.max() > 0:
        # Fallback (rare: destinations filled up round after round): move the least internally
        # connected excess nodes into free slots in order of room.
        cand = np.flatnonzero(excess[labels] > 0)
        cand_part = labels[cand]
        degree = indptr[cand + 1] - indptr[cand]
        src = np.repeat(np.arange(cand.shape[0]), degree)
        neighbour_part = labels[indices[_ranges(indptr[cand], degree)]]
        internal = np.bincount(src, weights=(neighbour_part == cand_part[src]), minlength=cand.shape[0])
        order = np.lexsort((cand, degree, internal, cand_part))
        movers = order[_rank_in_group(cand_part[order]) < excess[cand_part[order]]]
        room = np.maximum(capacity - counts, 0)
        slots = np.repeat(np.arange(nparts, dtype=np.int64), room)
        labels[cand[movers]] = slots[: movers.shape[0]]
        counts = np.bincount(labels, minlength=nparts)
    log.debug("rebalanced %d nodes into parts of capacity %d", moved_total, capacity)
    return labels


def metis_split(indptr: np.ndarray, indices: np.ndarray, nparts: int, capacity: int,
                seed: int = 0) -> np.ndarray:
    """METIS recursive bisection into ``nparts`` balanced parts, then strict capacities.

    Small or edgeless subgraphs are cut into balanced chunks without calling METIS (it cannot
    improve them and misbehaves when ``nparts`` approaches the node count).

    Args:
        indptr (np.ndarray): CSR offsets of a symmetric graph without self-loops, ``(n + 1,)``.
        indices (np.ndarray): CSR neighbours, ``(nnz,)``.
        nparts (int): number of parts.
        capacity (int): most nodes a part may hold; ``nparts * capacity >= n``.
        seed (int): METIS random seed.

    Returns:
        np.ndarray: ``int64`` part labels in ``[0, nparts)``, shape ``(n,)``.
    """
    import pymetis

    num_nodes = indptr.shape[0] - 1
    if nparts == 1:
        return np.zeros(num_nodes, dtype=np.int64)
    if num_nodes <= nparts or indices.shape[0] == 0:
        return chunk_split(num_nodes, nparts)
    xadj = np.ascontiguousarray(indptr, dtype=pymetis.zero_copy_dtype())
    adjncy = np.ascontiguousarray(indices, dtype=pymetis.zero_copy_dtype())
    try:
        result = pymetis.part_graph(nparts, adjacency=pymetis.CSRAdjacency(adj_starts=xadj, adjacent=adjncy),
                                    recursive=True, options=pymetis.Options(seed=int(seed)))
    except RuntimeError as err:  # METIS reports failures (e.g. out of memory) this way
        log.warning("METIS failed on a subgraph of %d nodes into %d parts (%s); cutting it into "
                    "chunks instead", num_nodes, nparts, err)
        return chunk_split(num_nodes, nparts)
    labels = np.frombuffer(result.vertex_part, dtype=np.int64 if result.vertex_part.itemsize == 8
                           else np.int32).astype(np.int64)
    return rebalance(indptr, indices, labels, nparts, capacity)
