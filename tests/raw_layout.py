"""Writes small graphs in OGB's raw node-property layout (gzip CSVs without header), for tests."""
import gzip
from pathlib import Path

import numpy as np


def write_csv(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        for row in rows:
            fh.write((",".join(str(v) for v in row) if isinstance(row, (list, tuple)) else str(row)) + "\n")


def write_raw_dataset(folder: Path, num_nodes: int = 60, num_classes: int = 3, seed: int = 0, *, edges=None,
                      labels=None, split=None) -> Path:
    """A ring-of-cliques graph with ``num_classes`` communities (labels = community), split 50/25/25%;
    any of ``edges`` (rows ``[src, dst]``), ``labels`` (one value per node) and ``split``
    (``{"train": ids, ...}``) may be given as raw values, written verbatim."""
    rng = np.random.default_rng(seed)
    community = np.arange(num_nodes) % num_classes
    if edges is None:
        src = rng.integers(0, num_nodes, 6 * num_nodes)
        dst = (src + num_classes * rng.integers(1, 4, src.size)) % num_nodes  # same community mostly
        edges = np.stack([src, dst], 1).tolist()
    if labels is None:
        labels = community.tolist()
    if split is None:
        perm = rng.permutation(num_nodes)
        a, b = num_nodes // 2, 3 * num_nodes // 4
        split = {"train": perm[:a].tolist(), "valid": perm[a:b].tolist(), "test": perm[b:].tolist()}
    write_csv(folder / "raw" / "num-node-list.csv.gz", [num_nodes])
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [len(edges)])
    write_csv(folder / "raw" / "edge.csv.gz", edges)
    write_csv(folder / "raw" / "node-label.csv.gz", labels)
    for key, ids in split.items():
        write_csv(folder / "split" / "random" / f"{key}.csv.gz", ids)
    return folder


def write_products_layout(root: Path, num_nodes: int = 40, *, folder: str = "ogbn_products", **layout) -> Path:
    """``root/folder``: a small graph (4 classes) in the layout of ogbn-products, which
    ``load_dataset("ogbn-products", root)`` reads through ogb (its split kind ``sales_ranking``);
    ``layout``: :func:`write_raw_dataset`'s ``edges``, ``labels``, ``split``."""
    folder = root / folder
    write_raw_dataset(folder, num_nodes=num_nodes, num_classes=4, **layout)
    (folder / "split" / "random").rename(folder / "split" / "sales_ranking")
    (folder / "RELEASE_v1.txt").write_text("test\n")
    return folder


def write_papers_layout(folder: Path, num_nodes: int = 50, compressed: bool = True, labels=None, fortran: bool = False,
                        edges=None):
    """``folder`` in ogbn-papers100M's binary layout (``raw/data.npz``, ``raw/node-label.npz``, split
    ``time``): ``edges`` (2, E) (default: 200 drawn), ``labels`` (N,) floats with NaN unlabelled
    (default: 5 classes, every 7th node unlabelled); returns ``(edges, labels)``."""
    rng = np.random.default_rng(0)
    drawn = rng.integers(0, num_nodes, (2, 200)).astype(np.int64)
    edges = drawn if edges is None else edges
    if fortran:  # (src, dst) pairs side by side in the file
        edges = np.asfortranarray(edges)
    save = np.savez_compressed if compressed else np.savez
    (folder / "raw").mkdir(parents=True)
    save(folder / "raw" / "data.npz", edge_index=edges, node_feat=rng.random((num_nodes, 4), dtype=np.float32),
         node_year=np.zeros((num_nodes, 1), dtype=np.int64), num_nodes_list=np.array([num_nodes]),
         num_edges_list=np.array([edges.shape[-1]]))
    if labels is None:
        labels = (np.arange(num_nodes) % 5).astype(np.float64)
        labels[::7] = np.nan  # unlabelled, as most of papers100M
    save(folder / "raw" / "node-label.npz", node_label=labels.reshape(-1, 1))
    perm = rng.permutation(np.flatnonzero(~np.isnan(labels)))
    third = perm.size // 3
    for key, ids in zip(("train", "valid", "test"), (perm[:third], perm[third:2 * third], perm[2 * third:])):
        write_csv(folder / "split" / "time" / f"{key}.csv.gz", sorted(ids.tolist()))
    return edges, labels
