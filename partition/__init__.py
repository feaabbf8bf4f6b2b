"""ttgnn.partition: hierarchical METIS node reordering that maps graph locality onto TT digits.

Its algorithms use numpy, scipy, pymetis and kaminpar; the package is imported through ``ttgnn``,
which imports torch::

    from ttgnn.partition import hierarchical_order
    order = hierarchical_order(edge_index, (55, 55, 56))   # ogbn-arxiv
    order.perm          # node id -> TT row
    order.quality       # {"shared_prefix_1": ..., "shared_prefix_2": ..., "seconds": ...}
"""
from .graph import CSRGraph, canonical_csr
from .quality import shared_prefix_fractions
from .reorder import METHODS, NodeOrder, hierarchical_order, order_from_perm

__all__ = [
    "METHODS",
    "NodeOrder",
    "hierarchical_order",
    "shared_prefix_fractions",
    "canonical_csr",
    "CSRGraph",
    "order_from_perm",
]
