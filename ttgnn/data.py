"""Node-classification datasets: OGB (offline-capable), any OGB-raw-layout folder, synthetic graphs.

Three sources, one result type (:class:`NodeDataset`):

* ``"ogbn-arxiv"``, ``"ogbn-products"``, ``"ogbn-papers100M"`` go through the ``ogb`` package,
  except a folder in OGB's binary layout (``raw/data.npz``, ``raw/node-label.npz``: how
  papers100M ships), which is read here lean: its edges streamed into the CSR, features skipped.
  When the dataset folder (``<root>/ogbn_arxiv`` ...) exists it is read offline and never written
  to: its files are mirrored by symlinks into the cache directory, where ``ogb`` keeps its
  ``processed/`` files. When it does not exist, ``ogb`` downloads it into the cache directory.
  The ``ogb`` 1.3.6 pitfalls are handled here: the ``input()`` prompt when ``RELEASE_v1.txt`` is
  missing, the missing ``processed/`` folder, and the ``weights_only`` reload failure of its own
  processed file under torch >= 2.6.
* Any other name (``"cora"``, ``"citeseer"``, ``"pubmed"``) or a path is read directly as a folder in
  OGB's raw node-property layout (gzip CSVs without header)::

      NAME/raw/edge.csv.gz           "src,dst" per line
      NAME/raw/num-node-list.csv.gz  node count
      NAME/raw/node-label.csv.gz     one integer label per line
      NAME/raw/node-feat.csv.gz      optional float features, one row per node
      NAME/split/<kind>/{train,valid,test}.csv.gz

* :func:`planted_partition` generates a synthetic graph with planted communities as labels.

The root of the datasets is the ``root`` argument, else ``$TTGNN_DATA``, else ``./dataset``.
Missing or unreadable files raise :class:`FileNotFoundError` / :class:`ValueError` naming the file.
"""
from __future__ import annotations

import contextlib
import difflib
import gzip
import hashlib
import logging
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from .checkpoint import _gist
from .config import is_dataset_path
from .fileio import atomic_write, exclusive_lock

__all__ = [
    "NodeDataset",
    "OGB_NAMES",
    "load_dataset",
    "dataset_folder",
    "ogb_folder",
    "resolve_root",
    "default_cache_dir",
    "planted_partition",
    "symmetric_csr",
]

log = logging.getLogger(__name__)

OGB_NAMES = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")
SPLIT_NAMES = ("train", "valid", "test")


def resolve_root(root: Optional[Union[str, os.PathLike]] = None) -> Path:
    """The datasets root: ``root`` if given, else ``$TTGNN_DATA``, else ``./dataset``.

    Raises:
        ValueError: ``root`` is empty (``Path("")`` is the working folder: an unset shell variable in
            ``--root "$VAR"`` would have read a same-named folder there).
    """
    if root is not None:
        if not os.fspath(root).strip():
            raise ValueError("the dataset root is empty (\"\"): give a folder path, or none for the default "
                             "($TTGNN_DATA, else ./dataset)")
        return Path(root)
    env = os.environ.get("TTGNN_DATA")
    return Path(env) if env else Path("dataset")


def default_cache_dir(cache_dir: Optional[Union[str, os.PathLike]] = None) -> Path:
    """The cache directory: ``cache_dir`` if given, else ``$TTGNN_CACHE``, else ``~/.cache/ttgnn``.

    Raises:
        ValueError: ``cache_dir`` is empty (``Path("")`` is the working folder: an unset shell
            variable would have put caches there).
    """
    if cache_dir is not None:
        if not os.fspath(cache_dir).strip():
            raise ValueError("the cache directory is empty (\"\"): give a folder path, or none for the default "
                             "($TTGNN_CACHE, else ~/.cache/ttgnn)")
        return Path(cache_dir)
    env = os.environ.get("TTGNN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ttgnn"


def symmetric_csr(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The symmetrised adjacency as CSR ``(indptr, indices)``, without self-loops or duplicates.

    Built lean (:func:`ttgnn.partition.graph.csr_from_edge_chunks`): in chunks of edges, no
    ``(2, 2E)`` copy and no dense temporaries.

    Args:
        edge_index (ndarray): ``(2, E)`` integer edges, directed or listed once per pair.
        num_nodes (int): ``N``.

    Returns:
        ``indptr`` ``(N + 1,)`` int64 and ``indices`` ``(nnz,)``, int32 for ``N < 2**31 - 1``
        (else int64), column indices sorted within each row.
    """
    from .partition.graph import canonical_csr

    graph = canonical_csr(np.asarray(edge_index), num_nodes)
    return graph.indptr, graph.indices


@dataclass
class NodeDataset:
    """A node-classification graph.

    Attributes:
        name (str): dataset name.
        num_nodes (int): ``N``.
        edge_index (ndarray, optional): ``(2, E)`` integer edges as stored in the source (possibly
            directed or listed once per undirected pair); use :meth:`csr` / :meth:`dgl_graph` for
            the symmetrised graph. ``None`` for a graph given only as its symmetric CSR (the
            streaming generators of :mod:`ttgnn.synthetic`, which never hold an edge list).
        labels (LongTensor): ``(N,)`` class ids; ``-1`` marks unlabeled nodes.
        split (dict): ``"train"``, ``"valid"``, ``"test"`` -> LongTensor of node ids.
        num_classes (int): number of classes.
        features (Tensor, optional): ``(N, F)`` float node features, ``None`` when absent.
        evaluator_name (str, optional): the ``ogb.nodeproppred.Evaluator`` name for OGB datasets.
        split_files (dict, optional): split name -> the file it was read from. The constructor
            checks the split (:func:`_check_split`): its errors name these files and lines, and a
            dataset read from files needs training nodes; without them (a graph built in Python)
            they name the ``split`` entries.
    """

    name: str
    num_nodes: int
    edge_index: Optional[np.ndarray]
    labels: torch.Tensor
    split: dict
    num_classes: int
    features: Optional[torch.Tensor] = None
    evaluator_name: Optional[str] = None
    _csr: Optional[tuple] = field(default=None, repr=False, compare=False)
    _adjacency: dict = field(default_factory=dict, repr=False, compare=False)  # device -> tensor
    split_files: Optional[dict] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Check the dataset as its constructor does, again: :func:`ttgnn.train.setup_run` calls it, so a
        dataset changed after it was built (a split reassigned, ``num_classes`` lowered) is refused, not
        trained on. Converts ``labels`` and the split's entries to int64 tensors.

        The graph caches (:meth:`csr`, :meth:`dgl_graph`, :meth:`normalized_adjacency`) are not
        rebuilt: after changing the edges, build a new dataset (``dataclasses.replace(dataset,
        edge_index=..., _csr=None, _adjacency={})``).

        Raises:
            TypeError: ``edge_index`` is not an integer array or tensor, or a split entry not integers.
            ValueError: a shape, a range, a non-finite feature, or the split (missing, repeated or
                shared nodes) is wrong; the message names it.
        """
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty str, got {self.name!r}")
        if isinstance(self.num_nodes, bool) or not isinstance(self.num_nodes, (int, np.integer)) or self.num_nodes < 1:
            raise ValueError(f"num_nodes must be an integer >= 1, got {self.num_nodes!r}")
        if self.edge_index is None:
            if self._csr is None:
                raise ValueError("a NodeDataset needs edge_index or its symmetric CSR (_csr)")
            if self._csr.num_nodes != self.num_nodes:
                raise ValueError(f"the CSR has {self._csr.num_nodes} nodes, num_nodes is {self.num_nodes}")
        else:
            if not isinstance(self.edge_index, (np.ndarray, torch.Tensor)):
                raise TypeError(f"edge_index must be a (2, E) integer ndarray or tensor, got "
                                f"{type(self.edge_index).__name__} (np.asarray makes an array of a list)")
            dtype = self.edge_index.dtype
            if not (_is_integer(dtype) if isinstance(dtype, torch.dtype) else np.issubdtype(dtype, np.integer)):
                raise TypeError(f"edge_index must hold integer node ids, got dtype {dtype}")
            if self.edge_index.ndim != 2 or self.edge_index.shape[0] != 2:
                raise ValueError(f"edge_index must have shape (2, E), got {tuple(self.edge_index.shape)}")
        if isinstance(self.num_classes, bool) or not isinstance(self.num_classes, (int, np.integer)) \
                or self.num_classes < 1:
            raise ValueError(f"num_classes must be an integer >= 1, got {self.num_classes!r}")
        self.labels = _integer_tensor(self.labels, "labels")
        if self.labels.shape != (self.num_nodes,):
            raise ValueError(f"labels must have shape ({self.num_nodes},), got {tuple(self.labels.shape)}")
        if self.labels.numel() and (int(self.labels.min()) < -1 or int(self.labels.max()) >= self.num_classes):
            at = int(torch.nonzero((self.labels < -1) | (self.labels >= self.num_classes))[0])
            raise ValueError(f"labels must be class ids in [0, {self.num_classes}) or -1 (unlabeled); node {at} has "
                             f"{int(self.labels[at])}")
        if self.features is not None and (not isinstance(self.features, torch.Tensor)
                                          or not self.features.is_floating_point() or self.features.dim() != 2
                                          or self.features.shape[0] != self.num_nodes):
            got = (f"{type(self.features).__name__} of shape {tuple(getattr(self.features, 'shape', ()))}"
                   + (f" ({self.features.dtype})" if isinstance(self.features, torch.Tensor) else ""))
            raise ValueError(f"features must be a ({self.num_nodes}, F) floating-point tensor or None, got {got}")
        if self.features is not None:
            bad = _first_non_finite(self.features)
            if bad is not None:
                raise ValueError(f"features hold a value that is not a finite number (NaN or inf): node {bad[0]}, "
                                 f"column {bad[1]}")
        if self.edge_index is not None and self.edge_index.shape[1]:  # (2, E), an ndarray or a tensor
            lo, hi = int(self.edge_index.min()), int(self.edge_index.max())
            if lo < 0 or hi >= self.num_nodes:
                raise ValueError(f"edge endpoints must lie in [0, {self.num_nodes}), got [{lo}, {hi}]")
        for key in SPLIT_NAMES:
            if key not in self.split:
                raise ValueError(f"split is missing {key!r} (has {sorted(self.split)})")
        self.split = {key: _integer_tensor(ids, f"split[{key!r}]") for key, ids in self.split.items()}
        _check_split(self.split, self.num_nodes, self.split_files)

    @property
    def num_edges(self) -> int:
        """Number of stored edges ``E`` (before symmetrisation; undirected edges for a CSR-only graph)."""
        if self.edge_index is None:
            return self._csr.num_entries // 2
        return int(self.edge_index.shape[1])

    @property
    def num_features(self) -> int:
        """Feature width ``F`` (0 when there are no features)."""
        return 0 if self.features is None else int(self.features.shape[1])

    def fingerprint(self) -> str:
        """A short digest of the graph's data, to tell it from another graph of the same name and size
        (a resume, or ``ttgnn predict``, on edges, labels or a split the run was not trained on).

        Every label and split id is read, and the edges' count with up to ``2**20`` evenly spaced
        edges (or CSR entries, for a graph held as CSR): cheap at ``10^8`` nodes, and any change of
        labels, split or edge count shows; features are not read.
        """
        digest = hashlib.blake2b(digest_size=12)
        digest.update(np.array([self.num_nodes, self.num_classes], dtype=np.int64).tobytes())
        edges = (self.edge_index[0], self.edge_index[1]) if self.edge_index is not None else tuple(self._csr)
        for array in edges:
            step = max(1, len(array) >> 20)
            digest.update(np.int64(len(array)).tobytes())
            digest.update(np.ascontiguousarray(array[::step], dtype=np.int64).tobytes())
        for tensor in (self.labels, *(self.split[key] for key in SPLIT_NAMES)):
            values = tensor.detach().cpu().to(torch.int64).numpy()
            digest.update(np.int64(values.size).tobytes())
            digest.update(values.tobytes())
        return digest.hexdigest()

    def csr(self):
        """Symmetric CSR without self-loops (the partitioner's input), cached.

        Returns:
            CSRGraph: unpacks as ``indptr, indices = dataset.csr()`` (``int64`` offsets, ``int32``
            ids below ``2**31 - 1`` nodes); :func:`~ttgnn.partition.hierarchical_order` takes it
            without re-checking it.
        """
        if self._csr is None:
            from .partition.graph import canonical_csr

            self._csr = canonical_csr(self.edge_index, self.num_nodes)
        return self._csr

    def normalized_adjacency(self, device=None) -> torch.Tensor:
        r"""``D^{-1/2} A D^{-1/2}`` of :meth:`csr` as a float32 sparse CSR tensor, cached per device
        (:func:`ttgnn.smoothing.normalized_adjacency`; Correct and Smooth and label spreading use it).

        Args:
            device (torch.device or str, optional): where it is wanted. (default: the CPU)
        """
        cpu = torch.device("cpu")
        device = cpu if device is None else torch.device(device)
        if cpu not in self._adjacency:
            from .smoothing import normalized_adjacency

            self._adjacency[cpu] = normalized_adjacency(*self.csr(), self.num_nodes)
        if device not in self._adjacency:
            self._adjacency[device] = self._adjacency[cpu].to(device)
        return self._adjacency[device]

    def drop_adjacency(self, device) -> None:
        """Forget the copy of :meth:`normalized_adjacency` kept on ``device`` (its memory is freed
        once nothing else holds it); the next call makes it again."""
        self._adjacency.pop(torch.device(device), None)

    def dgl_graph(self, self_loops: bool = True, edge_ids: bool = True):
        """The symmetrised graph as a ``dgl.DGLGraph`` (no duplicate edges, ``int64`` ids).

        Built straight from the CSR (self-loops inserted there, in blocks) as DGL's ``csc``
        format (the graph is symmetric): neighbour sampling reads in-edges from it, so a
        mini-batch run never makes a COO or CSR copy; DGL makes those itself, when first needed,
        for full-graph kernels that want them (e.g. GAT's edge softmax). The ids are ``int64``:
        DGL 1.1.3's CPU message passing crashed (segmentation fault in ``_gspmm``) on the blocks
        sampled from an ``int32`` graph, with or without libxsmm, so only the NumPy CSR is lean.

        Args:
            self_loops (bool, optional): add one self-loop per node. (default: ``True``)
            edge_ids (bool, optional): store edge ids explicitly (4 bytes an entry). DGL's
                full-graph CPU kernels (libxsmm SpMM) refuse a graph without them; neighbour
                sampling does not need them, so a huge mini-batch-only graph may leave them
                out. (default: ``True``)
        """
        import dgl  # the package's __init__ has set DGLBACKEND

        indptr, indices = self.csr()
        if self_loops:
            indptr, indices = _with_self_loops(indptr, indices)
        dtype, ids_np = torch.int64, np.int64
        graph = dgl.graph(("csc", (torch.from_numpy(np.ascontiguousarray(indptr, dtype=ids_np)),
                                   torch.from_numpy(np.ascontiguousarray(indices, dtype=ids_np)),
                                   torch.arange(indices.shape[0], dtype=dtype) if edge_ids
                                   else torch.tensor([], dtype=dtype))),
                          num_nodes=self.num_nodes, idtype=dtype)
        return graph

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.split.items())
        return (f"NodeDataset({self.name!r}, nodes={self.num_nodes}, edges={self.num_edges}, "
                f"classes={self.num_classes}, features={self.num_features}, {sizes})")


def _with_self_loops(indptr: np.ndarray, indices: np.ndarray, block: int = 1 << 24) -> tuple[np.ndarray, np.ndarray]:
    """The CSR with one self-loop added in every row (placed first), built in blocks of rows."""
    num_nodes = indptr.shape[0] - 1
    new_indptr = indptr + np.arange(num_nodes + 1, dtype=np.int64)
    out = np.empty(indices.shape[0] + num_nodes, dtype=indices.dtype)
    row = 0
    while row < num_nodes:
        end = min(row + block, num_nodes)
        lo, hi = int(indptr[row]), int(indptr[end])
        first = new_indptr[row:end] - new_indptr[row]  # where each row's self-loop goes in this block
        piece = np.empty(hi - lo + end - row, dtype=indices.dtype)
        mask = np.ones(piece.shape[0], dtype=bool)
        mask[first] = False
        piece[first] = np.arange(row, end, dtype=indices.dtype)
        piece[mask] = indices[lo:hi]
        out[new_indptr[row]:new_indptr[end]] = piece
        row = end
    return new_indptr, out


# ---------------------------------------------------------------------- raw-layout reading
def _check_file(path: Path) -> None:
    """Raise ``ValueError`` naming ``path`` when it is not a complete gzip stream."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 22):
                pass
    except PermissionError:
        raise  # unreadable, not damaged: the CLI names the file and the cause
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"corrupted dataset file {path}: {err}") from None


def _first_bad_row(bad: np.ndarray) -> int:
    """The 1-based line number of the first ``True`` row of ``bad`` (rows x columns or rows)."""
    return int(np.argwhere(bad.reshape(bad.shape[0], -1).any(axis=1))[0][0]) + 1


def _blank_rows(values: np.ndarray) -> np.ndarray:
    """``(rows,)``: whether each row of a table read by :func:`_read_csv` is empty (a blank line)."""
    import pandas as pd

    return pd.isna(pd.DataFrame(values)).to_numpy().all(axis=1)


def _leading_blank_lines(path: Path) -> Optional[int]:
    """How many blank lines a gzip text file starts with; ``None`` when every line is blank."""
    with gzip.open(path, "rt") as fh:
        for count, line in enumerate(fh):
            if line.strip():
                return count
    return None


def _read_csv(path: Path, dtype, required: bool = True, blank_lines: bool = False) -> Optional[np.ndarray]:
    """Read a header-less gzip CSV into a 2-D array; errors name the file (and the line of a bad value).

    Every line is a row, so line numbers in errors are the file's: a blank line is a row of NaN
    (``blank_lines=True``: kept, an unlabelled node in a label file), else refused at its line.
    Blank lines at the end of the file are dropped, except with ``blank_lines=True``.
    """
    import pandas as pd

    if not path.is_file():
        if required:
            raise FileNotFoundError(f"dataset file not found: {path}")
        return None
    try:
        try:
            values = pd.read_csv(path, compression="gzip", header=None, skip_blank_lines=False).values
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            # pandas counts the columns on the first line: blank (or spaces-only) first lines give it
            # none (or one); read past them, and they are rows of NaN as any blank line is
            leading = _leading_blank_lines(path)
            if not leading:
                raise
            values = pd.read_csv(path, compression="gzip", header=None, skip_blank_lines=False,
                                 skiprows=leading).values
            values = np.concatenate([np.full((leading, values.shape[1]), np.nan), values])
        if not blank_lines:
            filled = np.flatnonzero(~_blank_rows(values))
            values = values[: filled[-1] + 1 if filled.size else 0]  # trailing blank lines: not rows
            if values.shape[0] == 0:
                raise pd.errors.EmptyDataError("no data")
    except pd.errors.EmptyDataError:  # pandas says "No columns to parse from file"
        raise ValueError(f"corrupted dataset file {path}: it holds no lines (empty or blank)") from None
    except PermissionError:
        raise  # unreadable, not damaged
    except (OSError, EOFError, zlib.error, ValueError, pd.errors.ParserError) as err:
        # pandas' tokenizer messages end in a newline ("Expected 1 fields in line 2, saw 2\n")
        raise ValueError(f"corrupted dataset file {path}: {' '.join(str(err).split())}") from None
    if dtype is None:
        return values
    if np.issubdtype(dtype, np.integer):
        return _integers(values, path)
    try:
        return values.astype(dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"corrupted dataset file {path}: {err}") from None


def _integers(values: np.ndarray, path: Path) -> np.ndarray:
    """``values`` as int64, refusing non-numbers, NaNs and fractions (never truncated) with file and line."""
    if values.dtype.kind == "i":
        return values.astype(np.int64)
    if values.dtype.kind == "u":  # pandas reads a column as uint64 when a value passes int64's range
        _refuse_past_int64(values > np.iinfo(np.int64).max, values, path)
        return values.astype(np.int64)
    if values.dtype.kind != "f":
        import pandas as pd

        original = values
        values = pd.DataFrame(values).apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values != np.round(values))  # text, empty or fractional: the first line
        if bad.any():
            line = _first_bad_row(bad)
            raise ValueError(f"corrupted dataset file {path}, line {line}: "
                             f"{original.reshape(original.shape[0], -1)[line - 1].tolist()} is not a list of integers")
    bad = ~np.isfinite(values) | (values != np.round(values))
    if bad.any():
        line = _first_bad_row(bad)
        raise ValueError(f"corrupted dataset file {path}, line {line}: "
                         f"{values.reshape(values.shape[0], -1)[line - 1].tolist()} is not a list of integers")
    _refuse_past_int64(np.abs(values) >= 2.0**63, values, path)
    return values.astype(np.int64)


def _refuse_past_int64(too_large: np.ndarray, values: np.ndarray, path: Path) -> None:
    """Raise ``ValueError`` naming the first line where ``too_large`` holds: values the cast to int64
    would wrap (with a NumPy warning at most) into other ids."""
    if too_large.any():
        line = _first_bad_row(too_large)
        raise ValueError(f"corrupted dataset file {path}, line {line}: "
                         f"{values.reshape(values.shape[0], -1)[line - 1].tolist()} holds a value beyond 64-bit integers")


def _one_count(path: Path, required: bool) -> Optional[int]:
    """The single integer of ``num-node-list.csv.gz`` / ``num-edge-list.csv.gz`` (one graph: one line)."""
    values = _read_csv(path, np.int64, required=required)
    if values is None:
        return None
    if values.size != 1:
        raise ValueError(f"corrupted dataset file {path}: {values.size} values, expected one (a node property "
                         "dataset is one graph)")
    return int(values.reshape(-1)[0])


def _read_split(folder: Path, kind: Optional[str] = None) -> tuple[dict, dict]:
    """``(split, files)``: node ids of every split, and the file each came from (the split kind
    ``kind``, else the first by name of the folders in ``split/`` that hold ``train.csv.gz``, hidden
    folders aside)."""
    split_root = folder / "split"
    if not split_root.is_dir():
        raise FileNotFoundError(f"dataset split folder not found: {split_root}")
    kinds = sorted(p.name for p in split_root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not kinds:
        raise FileNotFoundError(f"no split kind (e.g. {split_root}/time) found in {split_root}")
    if kind is None:
        # a folder without train.csv.gz (a backup, an editor's) is no split kind; without any, the
        # first by name is named as missing its files
        kinds = [k for k in kinds if (split_root / k / "train.csv.gz").is_file()] or kinds
        kind = kinds[0]
        if len(kinds) > 1:
            log.warning("%s holds %d split kinds (%s); using %r, the first by name", split_root, len(kinds),
                        ", ".join(kinds), kind)
    elif kind not in kinds:
        raise FileNotFoundError(f"dataset split folder not found: {split_root / kind} ({split_root} holds "
                                f"{', '.join(kinds)})")
    split, files = {}, {}
    for key in SPLIT_NAMES:
        files[key] = split_root / kind / f"{key}.csv.gz"
        ids = _read_csv(files[key], np.int64)
        if ids.shape[1] != 1:  # flattened, "0,3" would have listed two nodes
            raise ValueError(f"corrupted split file {files[key]}: {ids.shape[1]} columns, expected one node id "
                             "per line")
        split[key] = torch.from_numpy(np.ascontiguousarray(ids.reshape(-1)))
    return split, files


def _labels_from(values: np.ndarray, path: Path, num_nodes: int, num_classes: Optional[int] = None) -> torch.Tensor:
    """``(N,)`` int64 class ids from a label column (NaN or ``-1``: unlabelled), checked.

    Without ``num_classes`` (a raw folder), the classes are ``0..max``; their count may not exceed
    the number of labelled nodes (a stray huge value would otherwise make a huge output layer).
    """
    if np.ndim(values) == 2 and np.shape(values)[1] != 1:
        raise ValueError(f"corrupted dataset file {path}: {np.shape(values)[1]} columns, expected one label per line")
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind not in "iuf":  # text in the column: blank (spaces only) is unlabelled
        import pandas as pd

        text = pd.Series(values, dtype=object)
        blank = text.isna() | text.map(lambda v: isinstance(v, str) and not v.strip())
        numbers = pd.to_numeric(text.mask(blank), errors="coerce").to_numpy(dtype=np.float64)
        bad = np.isnan(numbers) & ~blank.to_numpy()
        if bad.any():
            line = _first_bad_row(bad)
            raise ValueError(f"corrupted dataset file {path}, line {line}: label {values[line - 1]!r} is not a class "
                             "id (an integer >= 0, or empty/-1 for an unlabelled node)")
        values = numbers
    values = values.astype(np.float64)
    if values.shape[0] != num_nodes:
        raise ValueError(f"corrupted dataset file {path}: {values.shape[0]} labels for {num_nodes} nodes")
    values = np.where(np.isnan(values), -1.0, values)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < -1)
    if bad.any():
        line = _first_bad_row(bad)
        raise ValueError(f"corrupted dataset file {path}, line {line}: label {values[line - 1].item()!r} is not a class id "
                         f"(an integer >= 0, or empty/-1 for an unlabelled node)")
    labelled = int((values >= 0).sum())
    if labelled == 0:
        raise ValueError(f"corrupted dataset file {path}: no node has a label")
    top = float(values.max())  # compared before the cast: a label past int64 would wrap into another
    limit = num_classes if num_classes is not None else labelled
    if top >= limit:
        line = int(np.argmax(values)) + 1
        rule = (f"this dataset has {num_classes} classes" if num_classes is not None else
                f"{top + 1:.0f} classes would exceed the {labelled} labelled nodes; labels must be ids 0..C-1")
        raise ValueError(f"corrupted dataset file {path}, line {line}: label {top:.0f} is out of range ({rule})")
    return torch.from_numpy(values.astype(np.int64))


def _check_split(split: dict, num_nodes: int, files: Optional[dict] = None) -> None:
    """Node ids in range and each listed once, and no node in two splits; a dataset read from
    ``files`` also needs a non-empty training split (one built in Python may hold a split of
    evaluation nodes only; :func:`ttgnn.train.setup_run` refuses it for training). Errors name the
    split files (``files``: split name -> path; lines count from 1), or without ``files`` the
    entries of the ``split`` dict (positions count from 0)."""
    def where(key):
        return f"corrupted split file {files[key]}" if files else f"split[{key!r}]"

    def name(key):
        return files[key] if files else f"split[{key!r}]"

    first_at = 1 if files else 0
    unit = "line" if files else "position"
    for key, ids in split.items():
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            bad = (ids < 0) | (ids >= num_nodes)
            at = int(torch.nonzero(bad)[0])
            raise ValueError(f"{where(key)}, {unit} {at + first_at}: node id {int(ids[at])} is outside "
                             f"[0, {num_nodes})")
        # a node listed twice would count twice in the loss or the accuracy
        values, counts = np.unique(ids.numpy(), return_counts=True)
        if counts.size and counts.max() > 1:
            node = int(values[np.argmax(counts > 1)])
            places = (np.flatnonzero(ids.numpy() == node) + first_at).tolist()
            raise ValueError(f"{where(key)}: node {node} is listed more than once ({unit}s "
                             f"{', '.join(map(str, places[:5]))}); {int((counts - 1).sum())} repeated entries in all")
    if files and split["train"].numel() == 0:
        raise ValueError(f"the training split {name('train')} is empty")
    for i, first in enumerate(SPLIT_NAMES):
        for second in SPLIT_NAMES[i + 1:]:
            both = np.intersect1d(split[first].numpy(), split[second].numpy())
            if both.size:
                raise ValueError(f"splits overlap: {both.size} node(s), e.g. node {int(both[0])}, are in both "
                                 f"{name(first)} and {name(second)}")


def _is_integer(dtype: torch.dtype) -> bool:
    """Whether a torch dtype holds integers (not bool)."""
    return dtype != torch.bool and not dtype.is_floating_point and not dtype.is_complex


def _first_non_finite(features: torch.Tensor, rows: int = 1 << 16) -> Optional[tuple[int, int]]:
    """``(node, column)`` of the first NaN or inf in ``features``, ``None`` when all are finite; read in
    blocks of ``rows`` rows (a bool copy of a whole table of 10^8 rows would be gigabytes)."""
    for start in range(0, features.shape[0], rows):
        bad = ~torch.isfinite(features[start:start + rows])
        if bool(bad.any()):
            row, column = (int(i) for i in torch.nonzero(bad)[0])
            return start + row, column
    return None


def _integer_tensor(values, what: str) -> torch.Tensor:
    """``values`` (a tensor, array or sequence of integers) as a 1-D int64 tensor; else ``TypeError``."""
    if isinstance(values, torch.Tensor):
        tensor = values
    else:
        array = np.asarray(values)
        if array.dtype == object:  # a set, ragged lists: torch said "can't convert np.ndarray of type numpy.object_"
            raise TypeError(f"{what} must be a tensor, array or list of integers, got {type(values).__name__}")
        tensor = torch.as_tensor(array)
        if tensor.numel() == 0:
            tensor = tensor.to(torch.int64)  # [] is "no nodes", not a float array
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(f"{what} must hold integers, got dtype {tensor.dtype}")
    if tensor.dim() != 1:
        raise ValueError(f"{what} must be 1-D, got shape {tuple(tensor.shape)}")
    return tensor.to(torch.int64)


def _read_raw_graph(raw: Path) -> tuple[int, np.ndarray, torch.Tensor]:
    """``(num_nodes, edge_index (2, E), labels (N,))`` of a ``raw/`` folder in OGB's layout, checked:
    errors name the file and, for a bad value, its line."""
    num_nodes = _one_count(raw / "num-node-list.csv.gz", required=True)
    if num_nodes < 1:
        raise ValueError(f"corrupted dataset file {raw / 'num-node-list.csv.gz'}: {num_nodes} nodes")
    edges = _read_csv(raw / "edge.csv.gz", np.int64)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"corrupted dataset file {raw / 'edge.csv.gz'}: expected 2 columns, got {edges.shape}")
    num_edges = _one_count(raw / "num-edge-list.csv.gz", required=False)  # optional; OGB writes it
    if num_edges is not None and num_edges != edges.shape[0]:
        raise ValueError(f"corrupted dataset: {raw / 'edge.csv.gz'} holds {edges.shape[0]:,} edges, but "
                         f"{raw / 'num-edge-list.csv.gz'} says {num_edges:,} (a truncated or mismatched file?)")
    outside = (edges < 0) | (edges >= num_nodes)
    if outside.any():
        line = _first_bad_row(outside)
        raise ValueError(f"corrupted dataset file {raw / 'edge.csv.gz'}, line {line}: edge {edges[line - 1].tolist()} "
                         f"names a node outside [0, {num_nodes})")
    label_path = raw / "node-label.csv.gz"
    values = _read_csv(label_path, None, blank_lines=True)
    if values.shape[0] > num_nodes and _blank_rows(values[num_nodes:]).all():
        values = values[:num_nodes]  # blank lines after the last node's label: not nodes
    labels = _labels_from(values, label_path, num_nodes)
    return num_nodes, np.ascontiguousarray(edges.T), labels


def _read_features(raw: Path, num_nodes: int) -> Optional[np.ndarray]:
    """``(N, F)`` float32 node features of ``raw/node-feat.csv.gz`` (``None`` without that file),
    checked by :func:`_check_features`."""
    feat_path = raw / "node-feat.csv.gz"
    with np.errstate(over="ignore"):  # a value past float32's range becomes inf, refused below
        feats = _read_csv(feat_path, np.float32, required=False)
    if feats is not None:
        _check_features(feats, feat_path, num_nodes)
    return feats


def _check_features(feats: np.ndarray, path: Path, num_nodes: int) -> None:
    """Raise ``ValueError`` naming ``path`` unless ``feats`` (float32, read from it) holds one row per
    node and only finite values."""
    if feats.shape[0] != num_nodes:
        raise ValueError(f"corrupted dataset file {path}: {feats.shape[0]:,} rows of features for {num_nodes:,} nodes")
    if not np.isfinite(feats).all():
        raise ValueError(f"corrupted dataset file {path}: line {_first_bad_row(~np.isfinite(feats))} holds "
                         "a value that is not a finite float32 number (NaN, inf, empty or beyond 3.4e38)")


def _load_raw_folder(folder: Path, name: str) -> NodeDataset:
    raw = folder / "raw"
    if not raw.is_dir():
        raise FileNotFoundError(f"dataset folder not found: {raw} (expected OGB raw layout)")
    num_nodes, edge_index, labels = _read_raw_graph(raw)
    feats = _read_features(raw, num_nodes)
    features = None if feats is None else torch.from_numpy(feats)
    split, files = _read_split(folder)
    num_classes = int(labels.max()) + 1
    return NodeDataset(name, num_nodes, edge_index, labels, split, num_classes, features, split_files=files)


# ---------------------------------------------------------------------- OGB binary (papers100M) layout
_NPZ_CHUNK = 1 << 24


def _npy_member(archive, key: str, path: Path):
    """``(shape, fortran_order, dtype, header_bytes)`` of ``key`` in an open ``.npz`` zip."""
    try:
        with archive.open(f"{key}.npy") as fh:
            version = np.lib.format.read_magic(fh)
            reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = reader(fh)
            return shape, fortran, dtype, fh.tell()
    except KeyError:
        raise ValueError(f"corrupted dataset file {path}: no {key!r} array in it") from None


def _npz_edge_chunks(path: Path):
    """A re-iterable of ``(src, dst)`` chunks of ``edge_index`` in ``data.npz``, read without loading it.

    OGB saves papers100M's 1.6 billion edges (26 GB as int64) in one array; reading it in chunks
    (two streams into the member: sources and destinations) keeps memory at one chunk.
    """
    import zipfile

    with zipfile.ZipFile(path) as archive:
        shape, fortran, dtype, header = _npy_member(archive, "edge_index", path)
    if len(shape) != 2 or shape[0] != 2 or dtype.kind not in "iu":
        raise ValueError(f"corrupted dataset file {path}: edge_index must be integers of shape (2, E), "
                         f"got {dtype} {shape}")
    num_edges = shape[1]
    item = dtype.itemsize

    def read(fh, count):
        data = fh.read(count * item)
        if len(data) != count * item:
            raise ValueError(f"corrupted dataset file {path}: edge_index ends early")
        return np.frombuffer(data, dtype=dtype)

    def chunks():
        # one ZipFile per stream: Python 3.12's fast seek in a stored member moved the position
        # that another open member of the same ZipFile reads from (CPython gh-127847; seen on
        # Python 3.12.3, 2026-11-24: node ids out of range)
        with zipfile.ZipFile(path) as archive_a, zipfile.ZipFile(path) as archive_b, \
                archive_a.open("edge_index.npy") as first, archive_b.open("edge_index.npy") as second:
            first.read(header)
            if fortran:  # (src, dst) pairs side by side
                for start in range(0, num_edges, _NPZ_CHUNK):
                    pairs = read(first, 2 * min(_NPZ_CHUNK, num_edges - start)).reshape(-1, 2)
                    yield pairs[:, 0], pairs[:, 1]
                return
            second.seek(header + num_edges * item)  # a stored member seeks; a deflated one reads through
            for start in range(0, num_edges, _NPZ_CHUNK):
                count = min(_NPZ_CHUNK, num_edges - start)
                yield read(first, count), read(second, count)

    return chunks, num_edges


def _load_npz_folder(folder: Path, name: str) -> NodeDataset:
    """An OGB binary raw folder (``raw/data.npz``, ``raw/node-label.npz``, ``split/<kind>/*.csv.gz``),
    papers100M's layout, read lean: edges streamed into the symmetric CSR, features not loaded
    (ttgnn trains featureless; 111M x 128 float32 features alone are 57 GB)."""
    import zipfile

    from .partition.graph import csr_from_edge_chunks

    raw = folder / "raw"
    data_path, label_path = raw / "data.npz", raw / "node-label.npz"
    for path in (data_path, label_path):
        if not path.is_file():
            raise FileNotFoundError(f"dataset file not found: {path}")
    try:
        with np.load(data_path, allow_pickle=False) as archive:
            num_nodes = int(np.asarray(archive["num_nodes_list"]).reshape(-1)[0])
        with np.load(label_path, allow_pickle=False) as archive:
            label_values = np.asarray(archive["node_label"])
        chunks, num_edges = _npz_edge_chunks(data_path)
    except PermissionError:
        raise  # unreadable, not damaged
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, zlib.error) as err:
        if isinstance(err, ValueError) and "corrupted" in str(err):
            raise
        raise ValueError(f"corrupted dataset file {data_path} or {label_path}: {err}") from None
    if num_nodes < 1:
        raise ValueError(f"corrupted dataset file {data_path}: num_nodes_list says {num_nodes} nodes")

    def checked():
        for src, dst in chunks():
            if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
                raise ValueError(f"corrupted dataset file {data_path}: edge_index has node ids outside "
                                 f"[0, {num_nodes})")
            yield src, dst

    try:
        csr = csr_from_edge_chunks(checked, num_nodes)
    except PermissionError:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as err:  # read as it streams: damage shows here
        raise ValueError(f"corrupted dataset file {data_path}: {err}") from None
    labels = _labels_from(label_values, label_path, num_nodes)
    split, files = _read_split(folder)
    log.info("%s: %d nodes, %d stored edges read from %s (features not loaded)", name, num_nodes, num_edges,
             data_path)
    return NodeDataset(name, num_nodes, None, labels, split, int(labels.max()) + 1, None,
                       evaluator_name=name, _csr=csr, split_files=files)


# ---------------------------------------------------------------------- ogb
@contextlib.contextmanager
def _ogb_guards():
    """Let ogb run non-interactively, save its processed files into a folder its downloads lack,
    and reload them under torch >= 2.6; its prints go to the log."""
    import ogb.nodeproppred.dataset as ogb_dataset

    saved_decide = ogb_dataset.decide_download
    saved_load, saved_save = torch.load, torch.save

    def trusted_load(*args, **kwargs):
        # Only ogb's own processed files in our cache directory are read through this.
        kwargs.setdefault("weights_only", False)
        return saved_load(*args, **kwargs)

    def save_into_new_folder(obj, f, *args, **kwargs):
        # ogb 1.3.6 saves to <dataset>/processed/ without creating it, and a downloaded dataset
        # has none (torch then fails: "Parent directory ... does not exist"); written atomically, so a
        # process killed while saving leaves no half file for the next one to read
        if isinstance(f, (str, os.PathLike)):
            atomic_write(f, lambda fh: saved_save(obj, fh, *args, **kwargs))
            return None
        return saved_save(obj, f, *args, **kwargs)

    ogb_dataset.decide_download = lambda url: True
    torch.load, torch.save = trusted_load, save_into_new_folder
    writer = _LogWriter()
    try:
        with contextlib.redirect_stdout(writer):
            yield
    finally:
        writer.flush()
        ogb_dataset.decide_download = saved_decide
        torch.load, torch.save = saved_load, saved_save


class _LogWriter:
    """File-like object that forwards ogb's prints to the log, a line at a time (``print(a, b)``
    writes its pieces separately)."""

    def __init__(self) -> None:
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._log(line)
        return len(text)

    def flush(self) -> None:
        self._log(self._partial)
        self._partial = ""

    @staticmethod
    def _log(line: str) -> None:
        if line.strip():
            log.info("ogb: %s", line.strip())


def _ogb_release_file(name: str) -> str:
    """The release file ogb looks for in the folder of dataset ``name`` (``RELEASE_v1.txt`` for
    the ``ogbn-*`` datasets of ogb 1.3.6): its master table's version of the dataset."""
    import ogb.nodeproppred
    import pandas as pd

    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / "master.csv", index_col=0, keep_default_na=False)
    return f"RELEASE_v{master[name]['version']}.txt"


def _ogb_folders(name: str, root: Path, cache: Path) -> tuple[Path, Path, Path]:
    """``(source, ogb_root, target)`` of ogb dataset ``name``: its folder under ``root``; the folder
    ogb is given; the dataset's folder in it, where ogb writes. A folder under a root is mirrored
    into ``cache/ogb/local/`` (one mirror per dataset, processed again when another root's folder is
    read), a download goes to ``cache/ogb/``: a root without the dataset never reads a mirror."""
    source = ogb_folder(name, root)
    ogb_root = cache / "ogb" / "local" if source.is_dir() else cache / "ogb"
    return source, ogb_root, ogb_root / source.name


def _drop_old_mirror(target: Path) -> None:
    """Remove ``target`` (``cache/ogb/<dataset>``, where downloads go) when it holds the mirror of a
    local folder that ttgnn made there before 2026-12-07, not ogb's download."""
    import shutil

    raw = target / "raw"
    if (target / "processed" / "ttgnn-source.txt").is_file() or (
            raw.is_dir() and any(path.is_symlink() for path in raw.iterdir())):
        log.info("removing %s, a mirror of a local folder that an older ttgnn left where downloads go", target)
        shutil.rmtree(target)


def _mirror(source: Path, target: Path) -> None:
    """Mirror ``source`` into ``target`` with symlinks, so ogb's writes land in ``target``; what
    ``source`` no longer holds (a file removed since, another root's file) is removed."""
    import shutil

    target.mkdir(exist_ok=True)  # in the cache's ogb folder, which exists
    for sub in ("raw", "split", "mapping"):
        src = source / sub
        dst_dir = target / sub
        if not src.is_dir():
            if dst_dir.is_dir():
                shutil.rmtree(dst_dir)
            continue
        dst_dir.mkdir(exist_ok=True)
        for dst in sorted(dst_dir.rglob("*"), reverse=True):  # a folder's entries before the folder
            counterpart = src / dst.relative_to(dst_dir)
            if dst.is_dir() and not dst.is_symlink():
                if not counterpart.is_dir():
                    shutil.rmtree(dst)
            elif not counterpart.is_file():
                dst.unlink()
        for path in src.rglob("*"):
            rel = path.relative_to(src)
            dst = dst_dir / rel
            if path.is_dir():
                dst.mkdir(parents=True, exist_ok=True)
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_symlink() or dst.exists():
                if dst.is_symlink() and Path(os.readlink(dst)) == path.resolve():
                    continue
                dst.unlink()
            os.symlink(path.resolve(), dst)


def _ogb_stamp(folder: Path) -> str:
    """What identifies the version of a dataset folder that ogb's processed files (the graph and
    the labels) were made from: each raw file's path within the folder, size and modification time
    in nanoseconds (whole seconds missed a file rewritten in the same second at the same size: a
    stale cache was read). ogb reads the split files anew on every load."""
    parts = []
    for path in sorted((folder / "raw").glob("*")):
        if path.is_file():
            st = path.stat()
            parts.append(f"{path.relative_to(folder)}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _load_ogb(name: str, root: Path, cache: Path) -> NodeDataset:
    from ogb.nodeproppred import NodePropPredDataset

    source, ogb_root, target = _ogb_folders(name, root, cache)
    dir_name = target.name
    # Two processes started at once on a fresh (or stale) cache would both clear and rebuild
    # ogb's processed files; one at a time, the second then reads what the first wrote.
    lock = ogb_root / f".{dir_name}.lock"
    try:  # ogb needs a folder it can write (its processed files, or the download)
        ogb_root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(err.errno, f"cannot create the cache folder {ogb_root}, where ogb writes its processed "
                                 f"files ({err.strerror}); choose another with --cache-dir") from None
    with exclusive_lock(lock, waiting=f"waiting for another process that is preparing {name} in {target}"):
        fresh = True  # ogb's processed files match the source (nothing to stamp for a download)
        if source.is_dir():
            if not (source / "raw" / "edge.csv.gz").is_file():  # (load_dataset reads data.npz folders itself)
                raise FileNotFoundError(f"dataset file not found: {source / 'raw' / 'edge.csv.gz'}")
            # its processed files: disk space; under the downloads' lock, as a root without the dataset
            # removes it there
            with exclusive_lock(cache / "ogb" / f".{dir_name}.lock"):
                _drop_old_mirror(cache / "ogb" / dir_name)
            _mirror(source, target)
            # ogb asks on stdin whether to delete the folder when the release file of the version it
            # knows is missing, whatever release the folder names; we know the folder is the dataset.
            release = target / _ogb_release_file(name)
            if not release.is_file():
                release.write_text("mirrored by ttgnn\n")
            stamp_file = target / "processed" / "ttgnn-source.txt"
            stamp = f"{source.resolve()}\n{_ogb_stamp(source)}"
            fresh = stamp_file.is_file() and stamp_file.read_text() == stamp
            if not fresh:  # the stamp is written once ogb has processed it all (a kill leaves none)
                # ogb takes the raw files on trust (it cut edges to a smaller num-edge-list, truncated
                # fractional ids): check them as a raw folder is checked, naming the source's files
                raw = source / "raw"
                if not (raw / "num-edge-list.csv.gz").is_file():  # optional in a raw folder, not for ogb
                    raise FileNotFoundError(f"dataset file not found: {raw / 'num-edge-list.csv.gz'} (ogb, which "
                                            f"reads {name}, needs it: one line, the number of edges)")
                _read_raw_graph(raw)  # (the features are checked as ogb parsed them, below)
                for stale in (target / "processed").glob("*"):
                    stale.unlink()
            log.info("loading %s offline from %s (ogb cache %s)", name, source, target)
        else:  # a mirror of a folder under another root is not this root's dataset
            _drop_old_mirror(target)
            log.info("%s not found under %s; ogb downloads it into %s", name, root, ogb_root)
        for attempt in (1, 2):
            try:
                with _ogb_guards():
                    dataset = NodePropPredDataset(name=name, root=str(ogb_root))
                    split = None if source.is_dir() else dataset.get_idx_split()
                break
            except Exception as err:  # noqa: BLE001 - ogb raises anything; name the broken file
                if source.is_dir():
                    for path in sorted(source.rglob("*.gz")):
                        _check_file(path)
                processed = sorted((target / "processed").glob("*"))
                for stale in processed:
                    stale.unlink()
                if attempt == 1 and source.is_dir() and fresh and processed:
                    # the source reads well and ogb's processed files were complete: they were damaged
                    # since (a disk error, a truncated copy); they are ours to rebuild, once
                    log.warning("ogb's processed files of %s in %s could not be read (%s: %s); processing %s "
                                "again", name, target / "processed", type(err).__name__, _gist(err), source)
                    fresh = False
                    continue
                reason = f"{type(err).__name__}: {err}"
                if source.is_dir():  # ogb read our mirror of the folder: name the user's files, not the mirror's
                    reason = reason.replace(str(target), str(source))
                raise ValueError(f"ogb could not load {name} from {source if source.is_dir() else ogb_root}: "
                                 f"{reason}") from err
        if not fresh:
            stamp_file.write_text(stamp)
    files = None
    if split is None:
        # a local folder's split is read and checked by us, naming its files (ogb's reader truncated
        # fractional ids and flattened extra columns)
        split, files = _read_split(source, dataset.meta_info["split"])
    graph, labels = dataset.graph, dataset.labels
    num_nodes = int(graph["num_nodes"])
    edge_index = np.ascontiguousarray(np.asarray(graph["edge_index"], dtype=np.int64))
    label_path = (source if source.is_dir() else target) / "raw" / "node-label.csv.gz"
    if source.is_dir() and np.size(labels) < num_nodes:  # the file passed our check with one line per node
        raise ValueError(f"corrupted dataset file {label_path}: ogb read {np.size(labels):,} labels from it for "
                         f"{num_nodes:,} nodes, as it skips blank lines; in a folder that ogb reads ({name}) an "
                         "unlabelled node is -1 or nan, not a blank line")
    label_tensor = _labels_from(labels, label_path, num_nodes, int(dataset.num_classes))
    feats = graph.get("node_feat")
    if feats is not None:
        with np.errstate(over="ignore"):  # past float32's range: inf, refused
            feats = np.asarray(feats, dtype=np.float32)
        _check_features(feats, label_path.with_name("node-feat.csv.gz"), num_nodes)
    features = None if feats is None else torch.from_numpy(feats)
    if files is None:  # ogb's download, read by ogb
        split = {k: torch.from_numpy(np.array(split[k], dtype=np.int64).reshape(-1)) for k in SPLIT_NAMES}
        files = {k: target / "split" / f"{k} (as read by ogb)" for k in SPLIT_NAMES}
    return NodeDataset(name, num_nodes, edge_index, label_tensor, split, int(dataset.num_classes),
                       features, evaluator_name=name, split_files=files)


def _dataset_text(name: Union[str, os.PathLike]) -> str:
    """``name`` as :func:`load_dataset` reads it: ``"cora/"``, as shell completion writes it, is the
    name ``"cora"``, not ``./cora``."""
    text = os.fspath(name)
    return text if is_dataset_path(name) else text.rstrip(os.sep + (os.altsep or "")) or text


def dataset_folder(name: Union[str, os.PathLike], root: Optional[Union[str, os.PathLike]] = None) -> Optional[Path]:
    """The folder :func:`load_dataset` reads for ``name`` and ``root``: a path as given, a name under the
    datasets root (:func:`resolve_root`); ``None`` for the OGB names, which ``ogb`` reads (from
    :func:`ogb_folder`)."""
    text = _dataset_text(name)
    if text in OGB_NAMES:
        return None
    return Path(text) if is_dataset_path(name) else resolve_root(root) / text


def ogb_folder(name: str, root: Optional[Union[str, os.PathLike]] = None) -> Path:
    """The folder of OGB dataset ``name`` under the datasets root: ``ogbn-arxiv`` in ``ogbn_arxiv``, as
    ``ogb`` names it."""
    return resolve_root(root) / _dataset_text(name).replace("-", "_")


def load_dataset(
    name: Union[str, os.PathLike],
    root: Optional[Union[str, os.PathLike]] = None,
    cache_dir: Optional[Union[str, os.PathLike]] = None,
) -> NodeDataset:
    """Load a node-classification dataset.

    Args:
        name (str or path): ``"ogbn-arxiv"``, ``"ogbn-products"``, ``"ogbn-papers100M"`` (through
            ``ogb``), the name of a folder under ``root`` in OGB's raw layout (``"cora"``...), or
            a path to such a folder (with a separator: ``"./cora"``, ``"DIR/cora"``; a trailing
            one alone, ``"cora/"``, still names ``"cora"`` under ``root``).
        root (str, optional): datasets root; when given, the only place a name is looked up, and
            it must exist. (default: ``$TTGNN_DATA``, else ``./dataset``)
        cache_dir (str, optional): where ``ogb``'s processed files (and downloads) go; the dataset
            root is never written to. (default: ``$TTGNN_CACHE``, else ``~/.cache/ttgnn``)

    Raises:
        FileNotFoundError: a required file or folder is missing (named in the message).
        NotADirectoryError: the given ``root`` is a file.
        ValueError: an empty ``name``, or a file is unreadable or inconsistent (named in the message).
        TypeError: ``name`` is neither a str nor a path.
    """
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"name must be a dataset name or a folder path, got {type(name).__name__}")
    if not os.fspath(name).strip():
        raise ValueError("name is empty: give a dataset name (\"ogbn-arxiv\", \"cora\"...) or a folder path")
    root_path = resolve_root(root)
    if root is not None and not root_path.is_dir():
        if root_path.exists():
            raise NotADirectoryError(f"dataset root {root_path} is a file, not a folder (given as --root or root=)")
        raise FileNotFoundError(f"dataset root not found: {root_path} (given as --root or root=)")
    cache = default_cache_dir(cache_dir)
    if cache.exists() and not cache.is_dir():
        raise ValueError(f"cache directory {cache} exists and is not a folder")
    text = _dataset_text(name)
    if text in OGB_NAMES:
        binary = ogb_folder(text, root_path)
        if (binary / "raw" / "data.npz").is_file():  # papers100M's binary layout: read lean, without ogb
            return _load_npz_folder(binary, text)
        return _load_ogb(text, root_path, cache)
    if text.lower().startswith("ogbn-"):
        # matched after the shared "ogbn-", which would make every name look close
        guess = _did_you_mean(text, OGB_NAMES, skip=len("ogbn-"))
        raise ValueError(f"unknown OGB dataset {text!r}{guess} (supported: {', '.join(OGB_NAMES)})")
    # A bare name is looked up under the root only; a path (with a separator) is used as given.
    is_path = is_dataset_path(name)
    folder = dataset_folder(name, root_path)
    if not folder.is_dir():
        if is_path:
            raise FileNotFoundError(f"dataset folder not found: {folder}")
        names = _datasets_under(root_path)
        guess = _did_you_mean(text, names)
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        holds = (f" holds {shown}" if names else " holds no dataset folder" if root_path.is_dir()
                 else " is a file" if root_path.exists() else " does not exist")
        raise FileNotFoundError(f"dataset folder not found: {folder}{guess} (root {root_path}{holds}; "
                                "set --root or $TTGNN_DATA)")
    return _load_raw_folder(folder, folder.name)


def _did_you_mean(typed: str, names, skip: int = 0) -> str:
    """``"; did you mean 'X'?"`` for the name of ``names`` closest to ``typed`` (case ignored, the
    first ``skip`` characters of each left out of the match), ``""`` when none is close."""
    key = {name[skip:].lower(): name for name in names}
    close = difflib.get_close_matches(typed[skip:].lower(), list(key), n=1, cutoff=0.6)
    return f"; did you mean {key[close[0]]!r}?" if close else ""


def _datasets_under(root: Path) -> list:
    """The dataset names under ``root``: its folders that hold a ``raw/`` folder, OGB's ``ogbn_x``
    folders by their dataset name; ``[]`` when none or ``root`` cannot be listed."""
    try:
        found = sorted(entry.name for entry in root.iterdir() if (entry / "raw").is_dir())
    except OSError:
        return []
    ogb_folders = {n.replace("-", "_"): n for n in OGB_NAMES}
    return [ogb_folders.get(n, n) for n in found]


# ---------------------------------------------------------------------- synthetic
def planted_partition(
    num_nodes: int,
    num_classes: int = 8,
    avg_degree: float = 10.0,
    homophily: float = 0.8,
    train_frac: float = 0.5,
    valid_frac: float = 0.25,
    seed: int = 0,
) -> NodeDataset:
    """A random graph with planted communities (a stochastic block model); labels = communities.

    Each node draws ``avg_degree / 2`` edges; each goes to a node of the same community with
    probability ``homophily`` and to a uniformly random node otherwise. Memory and time are
    ``O(num_nodes * avg_degree)``, so it scales to large synthetic runs.

    Args:
        num_nodes (int): ``N`` (>= ``num_classes``).
        num_classes (int, optional): number of communities. (default: ``8``)
        avg_degree (float, optional): mean degree after symmetrisation. (default: ``10.0``)
        homophily (float, optional): probability that an edge stays inside a community, in
            ``[0, 1]``. (default: ``0.8``)
        train_frac, valid_frac (float, optional): random split fractions; the rest is test.
        seed (int, optional): random seed. (default: ``0``)
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if num_classes < 1 or num_nodes < num_classes:
        raise ValueError(f"need 1 <= num_classes <= num_nodes, got num_classes={num_classes}, num_nodes={num_nodes}")
    for name, value in (("homophily", homophily), ("avg_degree", avg_degree), ("train_frac", train_frac),
                        ("valid_frac", valid_frac)):
        number = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
        if not number or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    if avg_degree <= 0:
        raise ValueError(f"avg_degree must be > 0, got {avg_degree}")
    if train_frac <= 0 or valid_frac < 0 or train_frac + valid_frac >= 1:
        raise ValueError(f"need train_frac > 0, valid_frac >= 0, sum < 1; got {train_frac}, {valid_frac}")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=num_nodes)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=num_classes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    num_edges = max(1, int(round(num_nodes * avg_degree / 2)))
    src = rng.integers(0, num_nodes, size=num_edges)
    inside = rng.random(num_edges) < homophily
    dst = rng.integers(0, num_nodes, size=num_edges)
    cls = labels[src[inside]]
    offsets = (rng.random(inside.sum()) * counts[cls]).astype(np.int64)
    dst[inside] = order[starts[cls] + offsets]
    edge_index = np.stack([src, dst]).astype(np.int64)
    perm = rng.permutation(num_nodes)
    n_train = max(1, int(train_frac * num_nodes))
    n_valid = int(valid_frac * num_nodes)
    split = {
        "train": torch.from_numpy(np.sort(perm[:n_train])),
        "valid": torch.from_numpy(np.sort(perm[n_train:n_train + n_valid])),
        "test": torch.from_numpy(np.sort(perm[n_train + n_valid:])),
    }
    return NodeDataset(f"planted-{num_nodes}", num_nodes, edge_index, torch.from_numpy(labels.astype(np.int64)),
                       split, num_classes)
