"""Graphs and checks shared by the tests of ttgnn.partition (tests/test_partition_*.py)."""
import math

import numpy as np

from ttgnn.partition import NodeOrder


def check_order(order: NodeOrder, num_nodes: int, row_shape) -> None:
    """perm is an injection into the rows, inv_perm its inverse, parts its digit prefixes."""
    num_rows = math.prod(row_shape)
    assert order.row_shape == tuple(row_shape)
    assert order.perm.dtype == np.int64 and order.perm.shape == (num_nodes,)
    assert order.inv_perm.dtype == np.int64 and order.inv_perm.shape == (num_rows,)
    assert order.perm.min() >= 0 and order.perm.max() < num_rows
    assert np.unique(order.perm).shape[0] == num_nodes
    np.testing.assert_array_equal(order.inv_perm[order.perm], np.arange(num_nodes))
    assert np.count_nonzero(order.inv_perm == -1) == num_rows - num_nodes
    assert len(order.parts) == len(row_shape) - 1
    for level, part in enumerate(order.parts):
        stride = math.prod(row_shape[level + 1:])
        np.testing.assert_array_equal(part, order.perm // stride)
        # The capacity of a level-`level` part is the rows below it.
        assert np.bincount(part).max() <= stride
        assert part.max() < math.prod(row_shape[:level + 1])


def sbm_edges(num_blocks, block_size, num_edges, p_in, seed=0):
    """Planted partition with shuffled node ids; returns (edge_index, block of every node)."""
    rng = np.random.default_rng(seed)
    num_nodes = num_blocks * block_size
    src = rng.integers(0, num_nodes, num_edges)
    inside = rng.random(num_edges) < p_in
    dst = np.where(inside, (src // block_size) * block_size + rng.integers(0, block_size, num_edges),
                   rng.integers(0, num_nodes, num_edges))
    relabel = rng.permutation(num_nodes)
    block = np.empty(num_nodes, dtype=np.int64)
    block[relabel] = np.arange(num_nodes) // block_size
    return np.stack([relabel[src], relabel[dst]]), block
