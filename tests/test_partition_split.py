"""Tests of ttgnn.partition.split: METIS splits under strict capacities and the rebalancing behind them."""
import numpy as np
import pytest

from ttgnn.partition import canonical_csr, hierarchical_order
from ttgnn.partition.split import metis_split, rebalance

from partition_graphs import check_order, sbm_edges


def test_rebalance_moves_exactly_the_excess_and_prefers_loosely_connected_nodes():
    # Part 0: a 5-clique {0..4} and node 5, which hangs off the clique by one edge but has two
    # edges into part 1. Capacity 5 forces one node out: it must be node 5, and it goes to part 1.
    clique = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    edges = np.array(clique + [(4, 5), (5, 6), (5, 7), (6, 7)]).T
    csr = canonical_csr(edges, 10)
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 2])
    out = rebalance(csr.indptr, csr.indices, labels, nparts=3, capacity=5)
    assert np.bincount(out, minlength=3).max() <= 5
    assert np.count_nonzero(out != labels) == 1
    assert out[5] == 1


def test_rebalance_moves_the_fewest_nodes_on_heavy_overload():
    rng = np.random.default_rng(0)
    edge_index = rng.integers(0, 400, size=(2, 3000))
    csr = canonical_csr(edge_index, 400)
    labels = np.zeros(400, dtype=np.int64)
    labels[:40] = rng.integers(1, 8, 40)  # part 0 holds 360 of 400 nodes
    out = rebalance(csr.indptr, csr.indices, labels, nparts=8, capacity=50)
    counts = np.bincount(out, minlength=8)
    assert counts.max() <= 50 and counts.sum() == 400
    assert np.count_nonzero(out != labels) == 360 - 50  # only part 0's excess moves


def test_rebalance_rejects_impossible_capacity():
    with pytest.raises(ValueError, match="cannot hold"):
        rebalance(np.array([0, 0, 0]), np.array([], dtype=np.int64), np.array([0, 0]), nparts=1, capacity=1)


@pytest.mark.parametrize("nparts,capacity", [(55, 56), (7, 100), (2, 350), (64, 11)])
def test_metis_split_respects_tight_capacities(nparts, capacity):
    edge_index, _ = sbm_edges(10, 70, 5000, 0.7, seed=1)
    csr = canonical_csr(edge_index, 700)
    labels = metis_split(csr.indptr, csr.indices, nparts, capacity, seed=0)
    assert labels.shape == (700,) and labels.min() >= 0 and labels.max() < nparts
    assert np.bincount(labels).max() <= capacity


def test_tight_shape_on_a_larger_graph():
    # 3,000 nodes onto 3,024 rows: every level is nearly full, so METIS's slack must be repaired.
    edge_index, _ = sbm_edges(12, 250, 30_000, 0.6, seed=2)
    order = hierarchical_order(edge_index, (12, 14, 18))
    check_order(order, 3000, (12, 14, 18))


def _skewed_labellings(count, seed):
    """Random graphs with labels crowded into a few parts, and a capacity that overfills them."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        num_nodes = int(rng.integers(20, 120))
        nparts = int(rng.integers(2, 9))
        capacity = -(-num_nodes // nparts) + int(rng.integers(0, 4))
        edge_index = rng.integers(0, num_nodes, size=(2, int(rng.integers(0, 5 * num_nodes))))
        csr = canonical_csr(edge_index, num_nodes)
        weights = rng.dirichlet(np.full(nparts, 0.3))  # a few parts get most of the nodes
        labels = rng.choice(nparts, size=num_nodes, p=weights)
        yield csr, labels, nparts, capacity


def test_rebalance_moves_exactly_the_excess_on_random_skewed_labellings():
    # A node moved into a part must never overfill it (it would have to move again, and more nodes
    # than the excess would move). One case alone rarely shows that; 400 random ones do.
    overfull = 0
    for csr, labels, nparts, capacity in _skewed_labellings(400, seed=11):
        out = rebalance(csr.indptr, csr.indices, labels, nparts=nparts, capacity=capacity)
        before = np.bincount(labels, minlength=nparts)
        after = np.bincount(out, minlength=nparts)
        assert after.max() <= capacity
        excess = int(np.maximum(before - capacity, 0).sum())
        moved = out != labels
        assert np.count_nonzero(moved) == excess
        # Only over-full parts lose nodes, and only parts with room gain them.
        assert np.all(before[labels[moved]] > capacity)
        assert np.all(before[out[moved]] < capacity)
        overfull += excess > 0
    assert overfull >= 300  # the precondition: most labellings do need rebalancing


def test_rebalance_sends_a_node_along_its_only_edge():
    # Part 0 holds one node too many; node 3's one edge leads into part 1, which has room for
    # exactly one node. Node 3 must go there, not to the emptier part 2.
    csr = canonical_csr(np.array([[3], [4]]), 6)
    labels = np.array([0, 0, 0, 0, 1, 1])
    out = rebalance(csr.indptr, csr.indices, labels, nparts=3, capacity=3)
    np.testing.assert_array_equal(out, [0, 0, 0, 1, 1, 1])


def _er_graph(num_nodes=300, num_edges=900):
    rng = np.random.default_rng(0)
    return canonical_csr(rng.integers(0, num_nodes, size=(2, num_edges)), num_nodes)


def test_metis_split_small_or_edgeless_graphs_are_cut_into_chunks():
    edgeless = canonical_csr(np.zeros((2, 0), dtype=np.int64), 10)
    np.testing.assert_array_equal(metis_split(edgeless.indptr, edgeless.indices, 3, 4),
                                  [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    path = canonical_csr(np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]), 6)
    np.testing.assert_array_equal(metis_split(path.indptr, path.indices, 6, 2), np.arange(6))  # n == nparts
    np.testing.assert_array_equal(metis_split(path.indptr[:5], path.indices[:6], 6, 2), np.arange(4))  # n < nparts
    one = metis_split(path.indptr, path.indices, 1, 6)
    assert one.dtype == np.int64
    np.testing.assert_array_equal(one, np.zeros(6))


def test_metis_split_seed_reaches_metis():
    csr = _er_graph()
    first, again = (metis_split(csr.indptr, csr.indices, 4, 80, seed=2) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    assert np.count_nonzero(first != metis_split(csr.indptr, csr.indices, 4, 80, seed=3)) > 50
    np.testing.assert_array_equal(metis_split(csr.indptr, csr.indices, 4, 80),
                                  metis_split(csr.indptr, csr.indices, 4, 80, seed=0))
    assert np.count_nonzero(first != metis_split(csr.indptr, csr.indices, 4, 80)) > 50


def test_metis_split_reads_32_bit_labels(monkeypatch):
    # pymetis built with 32-bit idx_t hands back an array('i'); the labels must be the same.
    import array

    import pymetis

    csr = _er_graph()
    expected = metis_split(csr.indptr, csr.indices, 4, 80, seed=2)
    real = pymetis.part_graph

    def part_graph_32(*args, **kwargs):
        result = real(*args, **kwargs)
        return type(result)(result.edge_cuts, array.array("i", result.vertex_part))

    monkeypatch.setattr(pymetis, "part_graph", part_graph_32)
    labels = metis_split(csr.indptr, csr.indices, 4, 80, seed=2)
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(labels, expected)


def test_metis_failure_falls_back_to_chunks_with_a_warning(monkeypatch, caplog):
    import pymetis

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("METIS ran out of memory")

    monkeypatch.setattr(pymetis, "part_graph", out_of_memory)
    csr = _er_graph()
    with caplog.at_level("WARNING", logger="ttgnn.partition.split"):
        labels = metis_split(csr.indptr, csr.indices, 4, 80)
    np.testing.assert_array_equal(labels, np.repeat(np.arange(4), 75))
    (record,) = caplog.records
    message = record.getMessage()
    assert "METIS failed on a subgraph of 300 nodes into 4 parts (METIS ran out of memory)" in message
    assert "cutting it into chunks instead" in message


def test_rebalance_spreads_an_excess_over_more_parts_than_its_rounds():
    # Part 0 holds 21 nodes, 17 over its capacity of 4; nine parts have room 2 each. The rounds fill
    # one destination each, so after eight rounds the last mover is placed by the fallback. Nodes
    # 0..3 are a clique and stay. Nodes 4..19 have one edge into the clique and move first; node 50
    # also has one edge into the clique (the fewest inside part 0, like them) but the most edges of
    # all (ten more into the full parts 1..3, nodes 20..31): it must move too, and no clique node.
    clique = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    edges = clique + [(x, x % 4) for x in range(4, 20)] + [(50, 0)] + [(50, x) for x in range(20, 30)]
    csr = canonical_csr(np.array(edges).T, 51)
    labels = np.r_[np.zeros(20), np.repeat(np.arange(1, 4), 4), np.repeat(np.arange(4, 13), 2), 0].astype(np.int64)
    out = rebalance(csr.indptr, csr.indices, labels, nparts=13, capacity=4)
    assert out.dtype == np.int64
    assert np.bincount(out, minlength=13).max() <= 4
    np.testing.assert_array_equal(np.flatnonzero(out == 0), [0, 1, 2, 3])
    np.testing.assert_array_equal(out[20:50], labels[20:50])


def test_rebalance_fallback_handles_an_edgeless_node_with_the_highest_id():
    # Part 0: a 4-clique {0..3} and 17 edgeless nodes 4..20 (excess 17); parts 1..9 have room 2
    # each. Edgeless movers all go to the part with the most room, so each round fills one part:
    # eight rounds move nodes 4..19 (lowest ids first) and the fallback places node 20, the
    # highest-numbered node left in part 0 and one without edges.
    clique = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    csr = canonical_csr(np.array(clique).T, 39)
    labels = np.r_[np.zeros(21), np.repeat(np.arange(1, 10), 2)].astype(np.int64)
    out = rebalance(csr.indptr, csr.indices, labels, nparts=10, capacity=4)
    np.testing.assert_array_equal(out[:4], 0)
    np.testing.assert_array_equal(out[4:20], np.repeat(np.arange(1, 9), 2))
    assert out[20] == 9
    np.testing.assert_array_equal(out[21:], labels[21:])


def test_rebalance_takes_movers_from_a_pool_of_the_least_connected_candidates():
    # The movers of a round come from a pool of 4 * excess + 16 candidates of the over-full part,
    # the least connected inside it (a speed heuristic: the pool, not the whole part, is scored).
    # Part 0 (capacity 26) holds 28 nodes, excess 2, so the pool is the 24 least connected:
    #   nodes 0..17  (9 pairs):             1 edge inside, no edge out -> cut +1 by moving
    #   nodes 18..23 (2 triangles):         2 inside, 4 into part 1     -> cut -2
    #   nodes 24..27 (a 4-clique):          3 inside, 10 into part 1    -> cut -7, outside the pool
    # Part 1 (nodes 28..39) has room. The two movers are the best-scored in the pool: 18 and 19.
    part1 = np.arange(28, 40)
    edges = [(2 * i, 2 * i + 1) for i in range(9)]
    for t in (18, 21):
        edges += [(t, t + 1), (t + 1, t + 2), (t, t + 2)]
    edges += [(a, b) for a in range(24, 28) for b in range(a + 1, 28)]
    edges += [(x, int(p)) for x in range(18, 24) for p in part1[:4]]
    edges += [(x, int(p)) for x in range(24, 28) for p in part1[:10]]
    csr = canonical_csr(np.array(edges).T, 40)
    labels = np.r_[np.zeros(28), np.ones(12)].astype(np.int64)
    out = rebalance(csr.indptr, csr.indices, labels, nparts=2, capacity=26)
    np.testing.assert_array_equal(np.flatnonzero(out != labels), [18, 19])
    assert (out[[18, 19]] == 1).all()


def test_rebalance_returns_int64_labels_for_int32_input():
    csr = canonical_csr(np.array([[3], [4]]), 6)
    for labels in ([0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 2]):  # over-full, and already within capacity
        out = rebalance(csr.indptr, csr.indices, np.array(labels, dtype=np.int32), nparts=3, capacity=3)
        assert out.dtype == np.int64
        assert np.bincount(out, minlength=3).max() <= 3


def test_rebalance_mover_without_a_neighbour_in_a_part_with_room_goes_to_the_most_room():
    # Node 3 is the only node of part 0 with no edge inside it; parts 1 and 2 have room 1 and 2.
    csr = canonical_csr(np.array([[0, 0, 1], [1, 2, 2]]), 5)
    out = rebalance(csr.indptr, csr.indices, np.array([0, 0, 0, 0, 1]), nparts=3, capacity=2)
    # Two of part 0's nodes leave: node 3 (no edge) first, then one of the triangle {0, 1, 2}.
    assert np.count_nonzero(out != [0, 0, 0, 0, 1]) == 2
    assert out[3] == 2


def test_rebalance_mover_goes_to_the_part_with_room_it_has_most_edges_to():
    # Node 3 (no edge inside part 0) has two edges into part 1 and one into part 2; both have room.
    edges = np.array([[0, 0, 1, 3, 3, 3], [1, 2, 2, 4, 5, 6]])
    csr = canonical_csr(edges, 8)
    labels = np.array([0, 0, 0, 0, 1, 1, 2, 3])
    out = rebalance(csr.indptr, csr.indices, labels, nparts=4, capacity=3)
    np.testing.assert_array_equal(out, [0, 0, 0, 1, 1, 1, 2, 3])


def test_rebalance_edges_into_a_full_part_do_not_attract_a_mover():
    # Part 0 = {0, 1, 2, 3} holds one node too many. Node 0 has three edges into part 1, which is
    # full; node 3 the fewest edges inside part 0 (one) and one into part 3: node 3 moves there.
    edges = np.array([[0, 0, 1, 3, 0, 0, 0, 3], [1, 2, 2, 1, 4, 5, 6, 8]])
    csr = canonical_csr(edges, 9)
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 2, 3])
    out = rebalance(csr.indptr, csr.indices, labels, nparts=4, capacity=3)
    np.testing.assert_array_equal(out, [0, 0, 0, 3, 1, 1, 1, 2, 3])
