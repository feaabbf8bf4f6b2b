"""ttgnn.partition: hierarchical METIS node reordering that maps graph locality onto TT digits."""
