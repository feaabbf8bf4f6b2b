"""Tests of ttgnn.data: raw-layout and binary-layout loading, symmetrisation, errors, synthetic graphs
(the OGB loader: test_data_ogb.py)."""
import functools
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from messages import logged, raised
from raw_layout import write_csv, write_papers_layout, write_raw_dataset
from ttgnn.data import NodeDataset, load_dataset, planted_partition, resolve_root, symmetric_csr

PLANETOID = {  # name: (nodes, stored edges, classes, train, valid, test), from data/README.md
    "cora": (2708, 5278, 7, 140, 500, 1000),
    "citeseer": (3327, 4552, 6, 120, 500, 1000),
    "pubmed": (19717, 44324, 3, 60, 500, 1000),
}


def _copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_symmetric_csr_drops_self_loops_and_duplicates():
    edges = np.array([[0, 1, 1, 2, 2], [1, 0, 1, 0, 0]])
    indptr, indices = symmetric_csr(edges, 4)
    assert indptr.tolist() == [0, 2, 3, 4, 4]
    assert indices.tolist() == [1, 2, 0, 0]
    assert indptr.dtype == np.int64 and indices.dtype == np.int32  # lean: int32 ids below 2**31 nodes


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_loads(data_root, name):
    nodes, edges, classes, n_train, n_valid, n_test = PLANETOID[name]
    ds = load_dataset(name, data_root)
    assert (ds.num_nodes, ds.num_edges, ds.num_classes) == (nodes, edges, classes)
    assert [len(ds.split[k]) for k in ("train", "valid", "test")] == [n_train, n_valid, n_test]
    assert ds.features is None and ds.labels.dtype == torch.long
    assert int(ds.labels.min()) == 0 and int(ds.labels.max()) == classes - 1
    indptr, indices = ds.csr()
    # Undirected edges listed once: symmetrised without duplicates gives exactly 2E entries.
    assert indices.shape[0] == 2 * edges
    graph = ds.dgl_graph(self_loops=True)
    assert graph.num_edges() == 2 * edges + nodes
    assert bool((graph.in_degrees() >= 1).all())


@pytest.mark.data
def test_corrupted_raw_file_names_the_file(data_root, tmp_path):
    folder = _copy_dataset(data_root / "cora", tmp_path / "cora")
    edge_file = folder / "raw" / "edge.csv.gz"
    data = edge_file.read_bytes()
    edge_file.write_bytes(data[: len(data) // 2])  # truncated gzip
    with pytest.raises(ValueError, match="edge.csv.gz"):
        load_dataset(str(folder))
    (folder / "raw" / "node-label.csv.gz").unlink()
    edge_file.write_bytes(data)
    with pytest.raises(FileNotFoundError, match="node-label.csv.gz"):
        load_dataset(str(folder))


def test_missing_dataset_and_unknown_ogb_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        load_dataset("nonexistent", tmp_path)
    with pytest.raises(ValueError, match="ogbn-foo"):
        load_dataset("ogbn-foo", tmp_path)


def test_resolve_root(monkeypatch, tmp_path):
    monkeypatch.setenv("TTGNN_DATA", str(tmp_path))
    assert resolve_root() == tmp_path
    assert resolve_root("/x") == Path("/x")
    monkeypatch.delenv("TTGNN_DATA")
    assert resolve_root() == Path("dataset")


def test_planted_partition_is_homophilous_and_seeded():
    ds = planted_partition(5000, num_classes=5, avg_degree=8, homophily=0.9, seed=3)
    again = planted_partition(5000, num_classes=5, avg_degree=8, homophily=0.9, seed=3)
    assert np.array_equal(ds.edge_index, again.edge_index) and torch.equal(ds.labels, again.labels)
    src, dst = ds.edge_index
    same = (ds.labels[src] == ds.labels[dst]).float().mean().item()
    assert 0.88 < same < 0.95  # 0.9 planted + 0.1 * 1/5 by chance
    assert ds.num_edges == 20_000
    sizes = sum(len(v) for v in ds.split.values())
    assert sizes == 5000 and len(torch.unique(torch.cat(list(ds.split.values())))) == 5000


def test_node_dataset_validates():
    with pytest.raises(ValueError, match="edge endpoints"):
        NodeDataset("x", 3, np.array([[0], [5]]), torch.zeros(3, dtype=torch.long),
                    {"train": torch.tensor([0]), "valid": torch.tensor([1]), "test": torch.tensor([2])}, 1)
    with pytest.raises(ValueError, match="homophily"):
        planted_partition(100, homophily=1.5)


def _built(**change):
    """A 10-node ring built in Python, with ``change`` in place of its arguments."""
    args = dict(name="x", num_nodes=10, edge_index=np.stack([np.arange(10), (np.arange(10) + 1) % 10]),
                labels=torch.arange(10) % 3, split={"train": torch.arange(5), "valid": torch.tensor([5, 6]),
                                                    "test": torch.tensor([7, 8, 9])}, num_classes=3)
    args.update(change)
    return NodeDataset(**args)


def test_node_dataset_built_in_python_takes_integer_arrays_and_lists():
    ds = _built(labels=(np.arange(10) % 3).astype(np.int32), split={"train": [0, 1, 2, 3, 4],
                                                                       "valid": np.array([5, 6]), "test": (7, 8, 9)})
    assert ds.labels.dtype == torch.int64 and ds.labels.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    assert all(ids.dtype == torch.int64 for ids in ds.split.values()) and ds.split["test"].tolist() == [7, 8, 9]
    assert _built(labels=torch.tensor([-1] + [0, 1, 2] * 3)).labels[0] == -1  # -1: unlabeled


@pytest.mark.parametrize("change,error,message", [
    # before: a silent wrong answer (node -1 read as node 9 in the test accuracy; a node scored
    # twice), or an error from deep inside training
    (dict(split={"train": torch.arange(5), "valid": torch.tensor([5, 6]), "test": torch.tensor([7, -1])}),
     ValueError, r"split\['test'\], position 1: node id -1 is outside \[0, 10\)"),
    (dict(split={"train": torch.arange(5), "valid": torch.tensor([5, 6]), "test": torch.tensor([10])}),
     ValueError, r"split\['test'\], position 0: node id 10 is outside"),
    (dict(split={"train": torch.arange(5), "valid": torch.tensor([5, 6]), "test": torch.tensor([7, 8, 7])}),
     ValueError, r"split\['test'\]: node 7 is listed more than once \(positions 0, 2\)"),
    (dict(split={"train": torch.arange(5), "valid": torch.tensor([5, 6]), "test": torch.tensor([4, 9])}),
     ValueError, r"splits overlap: 1 node\(s\), e.g. node 4, are in both split\['train'\] and split\['test'\]"),
    (dict(split={"train": torch.tensor([0.0, 1.0]), "valid": torch.tensor([5]), "test": torch.tensor([7])}),
     TypeError, r"split\['train'\] must hold integers, got dtype torch.float32"),
    (dict(split={"train": torch.arange(4).view(2, 2), "valid": torch.tensor([5]), "test": torch.tensor([7])}),
     ValueError, r"split\['train'\] must be 1-D, got shape \(2, 2\)"),
    (dict(num_classes=2), ValueError, r"labels must be class ids in \[0, 2\) or -1 \(unlabeled\); node 2 has 2"),
    (dict(labels=torch.tensor([-2] + [0] * 9)), ValueError, r"node 0 has -2"),
    (dict(labels=torch.zeros(10)), TypeError, r"labels must hold integers, got dtype torch.float32"),
    (dict(num_classes=0), ValueError, r"num_classes must be an integer >= 1, got 0"),
    (dict(num_nodes=0), ValueError, r"num_nodes must be an integer >= 1, got 0"),
    # whole messages: edge ids at the node count, shapes, non-integer counts, the culprit node named
    (dict(edge_index=np.array([[0, 1], [2, 10]])), ValueError, r"^edge endpoints must lie in \[0, 10\), got \[0, 10\]$"),
    (dict(edge_index=np.zeros((3, 2), dtype=np.int64)), ValueError, r"^edge_index must have shape \(2, E\), got \(3, 2\)$"),
    (dict(num_classes=2.5), ValueError, r"^num_classes must be an integer >= 1, got 2.5$"),
    (dict(num_nodes=10.0), ValueError, r"^num_nodes must be an integer >= 1, got 10.0$"),
    (dict(labels=torch.tensor([-1, 0, 9] + [0] * 7)), ValueError,
     r"^labels must be class ids in \[0, 3\) or -1 \(unlabeled\); node 2 has 9$"),
    (dict(labels=torch.zeros(3, dtype=torch.long)), ValueError, r"^labels must have shape \(10,\), got \(3,\)$"),
    (dict(edge_index=None), ValueError, r"^a NodeDataset needs edge_index or its symmetric CSR \(_csr\)$"),
    (dict(split={"train": torch.tensor([0]), "valid": torch.tensor([1])}), ValueError,
     r"^split is missing 'test' \(has \['train', 'valid'\]\)$"),
])
def test_node_dataset_built_in_python_is_checked_as_files_are(change, error, message):
    with pytest.raises(error, match=message):
        _built(**change)


def test_a_dataset_built_in_python_without_training_nodes_is_for_evaluation_only():
    from ttgnn.train import TrainConfig, train

    none = torch.tensor([], dtype=torch.long)
    evaluation_only = _built(split={"train": none, "valid": torch.tensor([5, 6]), "test": none})
    assert evaluation_only.split["valid"].tolist() == [5, 6]  # e.g. benchmarks/bench_scale.py's validation pass
    with pytest.raises(ValueError, match=r"x has no training nodes \(its training split is empty\)"):
        train(TrainConfig(dataset="x", epochs=1, dim=8, hidden=8, rank=2, order="identity", progress=False),
              evaluation_only)


def test_a_dataset_without_validation_nodes_is_refused_for_training():
    # its validation accuracy (NaN) never improved: the best model kept was epoch 1's, without a word
    from ttgnn.train import TrainConfig, train

    none = torch.tensor([], dtype=torch.long)
    no_valid = _built(split={"train": torch.arange(5), "valid": none, "test": torch.tensor([7, 8])})
    with pytest.raises(ValueError, match=r"^x has no validation nodes \(its validation split is empty\): a run keeps "
                                         r"the epoch of the best validation accuracy"):
        train(TrainConfig(dataset="x", epochs=1, dim=8, hidden=8, rank=2, order="identity", progress=False),
              no_valid)


def test_an_empty_edge_index_may_be_a_tensor():
    # the check of the endpoints took a tensor's size method for a count and reduced an empty tensor
    empty = _built(edge_index=torch.zeros((2, 0), dtype=torch.long))
    assert empty.csr()[0].tolist() == [0] * 11
    with pytest.raises(ValueError, match=r"^edge endpoints must lie in \[0, 10\), got \[0, 10\]$"):
        _built(edge_index=torch.tensor([[0, 1], [2, 10]]))


# ---------------------------------------------------------------------- bad values in raw files


def test_raw_folder_loads(tmp_path):
    ds = load_dataset(str(write_raw_dataset(tmp_path / "g")))
    assert ds.num_nodes == 60 and ds.num_classes == 3


@pytest.mark.parametrize("file,rows,message", [
    ("raw/edge.csv.gz", [[0, 1], [1.5, 5]], r"edge.csv.gz, line 2: \[1.5, 5.0\] is not a list of integers"),
    ("raw/edge.csv.gz", [[0, 1], ["a", 5]], r"edge.csv.gz, line 2"),
    ("split/random/train.csv.gz", [0, 1, 3.7], r"train.csv.gz, line 3: \[3.7\] is not a list of integers"),
    ("raw/node-label.csv.gz", [0, 1, 2.5] + [0] * 57, r"node-label.csv.gz, line 3: label 2.5 is not a class id"),
    ("raw/node-label.csv.gz", [0, 1, -3] + [0] * 57, r"node-label.csv.gz, line 3: label -3.0 is not a class id"),
    ("raw/node-label.csv.gz", [0, 1, 1_000_000] + [0] * 57,
     r"node-label.csv.gz, line 3: label 1000000 is out of range \(1000001 classes would exceed the 60 labelled"),
])
def test_bad_values_name_file_line_and_value(tmp_path, file, rows, message):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / file, rows)
    with pytest.raises(ValueError, match=message):
        load_dataset(str(folder))


@pytest.mark.parametrize("file", ["raw/edge.csv.gz", "raw/node-label.csv.gz", "split/random/valid.csv.gz"])
def test_empty_file_is_named_as_empty(tmp_path, file):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / file, [])  # a valid gzip holding no lines
    with pytest.raises(ValueError, match=f"corrupted dataset file .*{file}: it holds no lines"):
        load_dataset(str(folder))


@pytest.mark.parametrize("layout,file", [("csv", "raw/edge.csv.gz"), ("csv", "raw/node-label.csv.gz"),
                                         ("papers", "raw/data.npz"), ("papers", "raw/node-label.npz")])
def test_an_unreadable_file_is_named_as_unreadable_not_corrupted(tmp_path, monkeypatch, layout, file):
    import builtins

    if layout == "csv":
        folder = write_raw_dataset(tmp_path / "g")
        load = functools.partial(load_dataset, str(folder))
    else:  # ogbn-papers100M's binary layout
        folder = tmp_path / "ogbn_papers100M"
        write_papers_layout(folder)
        load = functools.partial(load_dataset, "ogbn-papers100M", root=tmp_path, cache_dir=tmp_path / "cache")
    denied, real_open = folder / file, builtins.open

    def fake_open(path, *args, **kwargs):  # chmod does not stop root, who runs these tests in CI
        if str(path) == str(denied):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    with pytest.raises(PermissionError) as err:
        load()
    assert err.value.filename == str(denied)


@pytest.mark.parametrize("file,rows,message", [
    ("raw/num-edge-list.csv.gz", [5], r"edge.csv.gz holds 360 edges, but .*num-edge-list.csv.gz says 5 \(a truncated"),
    ("raw/num-edge-list.csv.gz", [180, 180], r"num-edge-list.csv.gz: 2 values, expected one"),
    ("raw/num-node-list.csv.gz", [30, 30], r"num-node-list.csv.gz: 2 values, expected one"),
])
def test_node_and_edge_counts_must_be_one_graphs_and_match_the_edges(tmp_path, file, rows, message):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / file, rows)
    with pytest.raises(ValueError, match=f"^corrupted dataset.*{message}"):
        load_dataset(str(folder))


def test_the_edge_count_file_is_optional(tmp_path):
    folder = write_raw_dataset(tmp_path / "g")
    (folder / "raw" / "num-edge-list.csv.gz").unlink()
    assert load_dataset(str(folder)).num_nodes == 60


def test_several_split_kinds_take_the_first_by_name_with_a_warning(tmp_path, caplog):
    import logging
    import shutil

    folder = write_raw_dataset(tmp_path / "g")
    shutil.copytree(folder / "split" / "random", folder / "split" / "another")
    first = load_dataset(str(folder)).split["test"].tolist()
    write_csv(folder / "split" / "another" / "test.csv.gz", first[1:])  # tells the two kinds apart
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.data"):
        ds = load_dataset(str(folder))
    assert ds.split["test"].tolist() == first[1:]
    assert [r.getMessage() for r in caplog.records] == [
        f"{folder / 'split'} holds 2 split kinds (another, random); using 'another', the first by name"]


@pytest.mark.parametrize("split,message", [
    ({"train": [0, 1, 2], "valid": [3, 4], "test": [0, 1, 2]}, r"3 node\(s\), e.g. node 0, are in both .*train.csv.gz and .*test.csv.gz"),
    ({"train": [0, 1, 2], "valid": [2, 4], "test": [5]}, r"e.g. node 2, are in both .*train.csv.gz and .*valid.csv.gz"),
    ({"train": [0, 1, 99], "valid": [3], "test": [4]}, r"train.csv.gz, line 3: node id 99 is outside \[0, 60\)"),
    ({"train": [0, 1, 2], "valid": [3, 4, 7, 4], "test": [5]},
     r"valid.csv.gz: node 4 is listed more than once \(lines 2, 4\); 1 repeated entries in all"),
])
def test_bad_splits(tmp_path, split, message):
    folder = write_raw_dataset(tmp_path / "g", split=split)
    with pytest.raises(ValueError, match=message):
        load_dataset(str(folder))


def test_explicit_root_is_the_only_place_searched(tmp_path, monkeypatch):
    write_raw_dataset(tmp_path / "cwd" / "cora")  # a folder named like the dataset in the working directory
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(FileNotFoundError, match="dataset root not found: .*missing"):
        load_dataset("cora", tmp_path / "missing")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"^dataset root .*a-file is a file, not a folder \(given as --root"):
        load_dataset("cora", tmp_path / "a-file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="dataset folder not found: .*empty/cora"):
        load_dataset("cora", tmp_path / "empty")
    assert load_dataset("./cora", tmp_path / "empty").num_nodes == 60  # an explicit path is used as given
    with pytest.raises(FileNotFoundError, match=r"empty holds no dataset folder; set --root"):
        load_dataset("cora", tmp_path / "empty")


def test_a_name_not_found_lists_the_roots_datasets_and_a_close_match(tmp_path):
    for name in ("cora", "pubmed", "ogbn_arxiv"):
        write_raw_dataset(tmp_path / "data" / name)
    (tmp_path / "data" / "notes").mkdir()  # no raw/: not a dataset
    with pytest.raises(FileNotFoundError, match=r"data/Cora; did you mean 'cora'\? \(root .*data holds cora, "
                                                r"ogbn-arxiv, pubmed; set --root or \$TTGNN_DATA\)"):
        load_dataset("Cora", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match=r"data/citeseer \(root .*data holds cora, ogbn-arxiv, pubmed;"):
        load_dataset("citeseer", tmp_path / "data")
    # a trailing separator (shell completion) still names a folder under the root, not one here
    assert load_dataset("cora/", tmp_path / "data").name == load_dataset("cora", tmp_path / "data").name
    with pytest.raises(FileNotFoundError, match=r"data/Cora; did you mean 'cora'\?"):
        load_dataset("Cora//", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match=r"^dataset folder not found: sub/cora$"):  # a path stays a path
        load_dataset("sub/cora/", tmp_path / "data")
    # an OGB name misspelt, or in the wrong case: the name it is closest to
    for typed, meant in (("ogbn-arxvi", "ogbn-arxiv"), ("ogbn-papers100m", "ogbn-papers100M")):
        with pytest.raises(ValueError, match=rf"^unknown OGB dataset '{typed}'; did you mean '{meant}'\? \(supported: "
                                             r"ogbn-arxiv, ogbn-products, ogbn-papers100M\)$"):
            load_dataset(typed, tmp_path / "data")
    with pytest.raises(ValueError, match=r"^unknown OGB dataset 'ogbn-mag' \(supported: "):
        load_dataset("ogbn-mag", tmp_path / "data")


def test_cache_dir_that_is_a_file(tmp_path):
    (tmp_path / "cache").write_text("x")
    folder = write_raw_dataset(tmp_path / "g")
    with pytest.raises(ValueError, match="cache directory .* is not a folder"):
        load_dataset(str(folder), cache_dir=tmp_path / "cache")


# ----------------------------------------------------------------------------- lean CSR, large layouts
def _scipy_symmetric(edges: np.ndarray, num_nodes: int):
    import scipy.sparse as sparse

    src, dst = edges
    keep = src != dst
    src, dst = src[keep], dst[keep]
    matrix = sparse.csr_matrix((np.ones(2 * src.size), (np.r_[src, dst], np.r_[dst, src])), shape=(num_nodes,) * 2)
    matrix.sum_duplicates()
    return matrix.indptr, matrix.indices


@pytest.mark.parametrize("seed", range(4))
def test_lean_csr_equals_the_scipy_one(seed, monkeypatch):
    from ttgnn.partition import graph as graph_module

    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(2, 500))
    edges = rng.integers(0, num_nodes, (2, int(rng.integers(0, 3000))))
    edges[:, :5] = edges[::-1, :5]  # reversed duplicates
    monkeypatch.setattr(graph_module, "_EDGE_CHUNK", 97)  # many chunks and row blocks
    indptr, indices = symmetric_csr(edges, num_nodes)
    ref_indptr, ref_indices = _scipy_symmetric(edges, num_nodes)
    np.testing.assert_array_equal(indptr, ref_indptr)
    np.testing.assert_array_equal(indices, ref_indices)
    assert indices.dtype == np.int32


def test_dgl_graph_from_the_csr_has_self_loops_first_and_all_edges():
    ds = planted_partition(300, num_classes=3, avg_degree=6, seed=1)
    indptr, indices = ds.csr()
    graph = ds.dgl_graph(self_loops=True)
    assert graph.num_edges() == indices.shape[0] + 300 and graph.idtype == torch.int64
    src, dst = graph.in_edges(torch.arange(300))
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert all((v, v) in pairs for v in range(300))
    rows = np.repeat(np.arange(300), np.diff(indptr))
    assert set(zip(indices.tolist(), rows.tolist())) | {(v, v) for v in range(300)} == pairs
    bare = ds.dgl_graph(self_loops=False, edge_ids=False)
    assert bare.num_edges() == indices.shape[0]


@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
@pytest.mark.parametrize("compressed", [True, False], ids=["savez_compressed", "savez"])
def test_papers100m_binary_layout_loads(tmp_path, monkeypatch, compressed, fortran):
    import ttgnn.data as data_module

    edges, labels = write_papers_layout(tmp_path / "ogbn_papers100M", compressed=compressed, fortran=fortran)
    monkeypatch.setattr(data_module, "_NPZ_CHUNK", 16)  # several chunks from both streams
    ds = load_dataset("ogbn-papers100M", root=tmp_path, cache_dir=tmp_path / "cache")
    assert ds.num_nodes == 50 and ds.edge_index is None and ds.features is None
    ref_indptr, ref_indices = _scipy_symmetric(edges, 50)
    np.testing.assert_array_equal(ds.csr().indptr, ref_indptr)
    np.testing.assert_array_equal(ds.csr().indices, ref_indices)
    assert int((ds.labels == -1).sum()) == int(np.isnan(labels).sum())
    assert ds.labels[1].item() == 1 and ds.num_classes == 5
    assert sum(len(v) for v in ds.split.values()) == int((~np.isnan(labels)).sum())
    assert not (tmp_path / "cache").exists()  # read in place, nothing processed or written


def test_papers100m_layout_errors_name_the_file(tmp_path):
    write_papers_layout(tmp_path / "ogbn_papers100M")
    (tmp_path / "ogbn_papers100M" / "raw" / "node-label.npz").unlink()
    with pytest.raises(FileNotFoundError, match="node-label.npz"):
        load_dataset("ogbn-papers100M", root=tmp_path)
    other = tmp_path / "second"
    write_papers_layout(other / "ogbn_papers100M")
    (other / "ogbn_papers100M" / "raw" / "data.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="data.npz"):
        load_dataset("ogbn-papers100M", root=other)


@pytest.mark.parametrize("member,compressed", [("edge_index.npy", False), ("edge_index.npy", True),
                                               ("node_label.npy", True)])
def test_papers100m_layout_names_a_damaged_archive_member(tmp_path, member, compressed):
    # A byte flipped inside a member ended in zipfile's "Bad CRC-32" or zlib's "invalid distance too
    # far back" with a traceback (exit 1): the edges are read while they stream, outside the checks
    import zipfile

    folder = tmp_path / "ogbn_papers100M"
    write_papers_layout(folder, edges=np.random.default_rng(0).integers(0, 50, (2, 400_000)), compressed=compressed)
    path = folder / "raw" / ("data.npz" if member == "edge_index.npy" else "node-label.npz")
    info = zipfile.ZipFile(path).getinfo(member)
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + int(0.3 * info.compress_size)] ^= 0x55
    path.write_bytes(bytes(data))
    message = raised(ValueError, load_dataset, "ogbn-papers100M", root=tmp_path)
    assert message.startswith("corrupted dataset file ") and str(path) in message


def test_hidden_folders_and_folders_without_a_training_file_are_no_split_kinds(tmp_path, caplog):
    # split/.ipynb_checkpoints (or a backup folder) sorts first and was read: "dataset file not
    # found: .../split/.ipynb_checkpoints/train.csv.gz"
    import logging

    folder = write_raw_dataset(tmp_path / "g")
    expected = load_dataset(folder).split["test"].tolist()
    (folder / "split" / ".ipynb_checkpoints").mkdir()
    (folder / "split" / "Random_old").mkdir()
    write_csv(folder / "split" / "Random_old" / "test.csv.gz", [0])
    with caplog.at_level(logging.WARNING, logger="ttgnn.data"):
        assert load_dataset(folder).split["test"].tolist() == expected
    assert caplog.messages == []  # one split kind: nothing to warn about
    shutil.rmtree(folder / "split" / "random")  # no folder holds train.csv.gz: the first by name lacks it
    assert raised(FileNotFoundError, load_dataset, folder) == (
        f"dataset file not found: {folder / 'split' / 'Random_old' / 'train.csv.gz'}")
    shutil.rmtree(folder / "split" / "Random_old")
    assert raised(FileNotFoundError, load_dataset, folder) == (
        f"no split kind (e.g. {folder / 'split'}/time) found in {folder / 'split'}")


def test_an_empty_or_missing_dataset_name_is_refused_before_the_root_is_read(tmp_path):
    # An empty name used to read the root itself as a dataset folder ("dataset folder not found: ROOT/raw").
    for name in ("", "  "):
        with pytest.raises(ValueError, match='name is empty: give a dataset name \\("ogbn-arxiv", "cora"...\\) or a folder path'):
            load_dataset(name, tmp_path / "missing")
    with pytest.raises(TypeError, match="name must be a dataset name or a folder path, got NoneType"):
        load_dataset(None, tmp_path)


@pytest.mark.parametrize("rows, message", [
    ([[0.5, 1.0]] * 59, "59 rows of features for 60 nodes"),
    ([[0.5, 1.0]] * 7 + [[0.5, "nan"]] + [[0.5, 1.0]] * 52, "line 8 holds a value that is not a finite float32 number"),
    ([[0.5, 1.0]] * 3 + [[0.5, ""]] + [[0.5, 1.0]] * 56, "line 4 holds a value that is not a finite float32 number"),
])
def test_a_features_file_of_other_rows_or_non_finite_values_names_the_file(tmp_path, rows, message):
    # Features of 59 rows for 60 nodes used to load, and fail (or NaN the loss) in training.
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / "raw" / "node-feat.csv.gz", rows)
    expected = f"corrupted dataset file {folder / 'raw' / 'node-feat.csv.gz'}: {message}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        load_dataset(str(folder))


def test_features_of_the_right_rows_load_as_float32(tmp_path):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / "raw" / "node-feat.csv.gz", [[i, 0.5] for i in range(60)])
    features = load_dataset(str(folder)).features
    assert features.dtype == torch.float32 and features.shape == (60, 2) and features[7, 0] == 7


@pytest.mark.parametrize("changes, message", [
    (dict(features=torch.ones(3, 5)), r"features must be a \(4, F\) floating-point tensor or None, got Tensor of "
                                      r"shape \(3, 5\) \(torch.float32\)"),
    (dict(features=torch.ones(4, 5, dtype=torch.long)), r"got Tensor of shape \(4, 5\) \(torch.int64\)"),
    (dict(features=torch.ones(4)), r"got Tensor of shape \(4,\) \(torch.float32\)"),
    (dict(features=np.ones((4, 5))), r"got ndarray of shape \(4, 5\)$"),
    (dict(name=""), "name must be a non-empty str, got ''"),
    (dict(name=5), "name must be a non-empty str, got 5"),
])
def test_a_dataset_built_in_python_checks_its_features_and_name(changes, message):
    args = dict(name="g", num_nodes=4, edge_index=np.array([[0, 1, 2], [1, 2, 3]]), labels=[0, 1, 0, 1],
                split={"train": [0, 1], "valid": [2], "test": [3]}, num_classes=2)
    with pytest.raises(ValueError, match=message):
        NodeDataset(**{**args, **changes})


@pytest.mark.parametrize("seed", [-1, 2.5, True])
def test_planted_partition_names_a_bad_seed(seed):
    with pytest.raises(ValueError, match=re.escape(f"seed must be an int >= 0, got {seed!r}")):
        planted_partition(100, num_classes=2, seed=seed)


def test_an_empty_training_split_file_is_refused(tmp_path):
    write_raw_dataset(tmp_path / "g", num_nodes=20, split={"train": [], "valid": [1, 2], "test": [3, 4]})
    with pytest.raises(ValueError, match=r"train\.csv\.gz: it holds no lines \(empty or blank\)$"):
        load_dataset(tmp_path / "g")
    write_raw_dataset(tmp_path / "h", num_nodes=20, split={"train": [0], "valid": [1, 2], "test": [3, 4]})
    assert load_dataset(tmp_path / "h").split["train"].tolist() == [0]  # one training node is enough


def test_an_edge_file_of_three_columns_is_named(tmp_path):
    write_raw_dataset(tmp_path / "g", num_nodes=20, edges=[[0, 1, 2], [1, 2, 3]])
    assert raised(ValueError, load_dataset, tmp_path / "g") == (
        f"corrupted dataset file {tmp_path / 'g' / 'raw' / 'edge.csv.gz'}: expected 2 columns, got (2, 3)")


@pytest.mark.parametrize("kwargs,message", [
    (dict(num_classes=0), "num_classes"), (dict(num_nodes=3, num_classes=4), "num_classes"),
    (dict(homophily=1.5), r"^homophily must be in \[0, 1\], got 1.5$"),
    # NaN passed every range test (comparisons are false) and failed deep inside as an int conversion
    (dict(avg_degree=float("nan")), r"^avg_degree must be a finite number, got nan$"),
    (dict(avg_degree=float("inf")), r"^avg_degree must be a finite number, got inf$"),
    (dict(train_frac=float("nan")), r"^train_frac must be a finite number, got nan$"),
    (dict(homophily=float("nan")), r"^homophily must be a finite number, got nan$"),
    (dict(valid_frac="0.2"), r"^valid_frac must be a finite number, got '0.2'$"),
])
def test_planted_partition_bounds(kwargs, message):
    with pytest.raises(ValueError, match=message):
        planted_partition(**{"num_nodes": 100, **kwargs})


def test_planted_partition_edge_values_and_one_node_datasets():
    pure = planted_partition(100, num_classes=4, homophily=1.0, seed=0)
    src, dst = pure.edge_index
    assert bool((pure.labels[src] == pure.labels[dst]).all())  # every edge inside its community
    assert planted_partition(4, num_classes=4, seed=0).num_nodes == 4  # one node per class
    one = NodeDataset("one", 1, np.zeros((2, 0), dtype=np.int64), torch.zeros(1, dtype=torch.long),
                      {"train": torch.tensor([0]), "valid": torch.tensor([], dtype=torch.long),
                       "test": torch.tensor([], dtype=torch.long)}, 1)
    assert one.num_nodes == 1


def test_label_file_errors_have_exact_messages(tmp_path):
    write_raw_dataset(tmp_path / "short", num_nodes=20, labels=[0, 1] * 9 + [2])
    path = tmp_path / "short" / "raw" / "node-label.csv.gz"
    assert raised(ValueError, load_dataset, tmp_path / "short") == f"corrupted dataset file {path}: 19 labels for 20 nodes"
    write_raw_dataset(tmp_path / "none", num_nodes=20, labels=[-1] * 20)
    assert raised(ValueError, load_dataset, tmp_path / "none") == (
        f"corrupted dataset file {tmp_path / 'none' / 'raw' / 'node-label.csv.gz'}: no node has a label")


def test_planted_partition_defaults_and_edges():
    assert planted_partition(100).num_classes == 8
    assert planted_partition(100, num_classes=1).num_classes == 1
    mixed = planted_partition(400, num_classes=4, homophily=0.0, seed=0)  # every edge to a random node
    src, dst = mixed.edge_index
    assert 0.1 < float((mixed.labels[src] == mixed.labels[dst]).float().mean()) < 0.4


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_self_loops_are_added_block_by_block_as_in_one_block(dtype):
    from ttgnn.data import _with_self_loops

    rng = np.random.default_rng(3)
    degrees = rng.integers(0, 5, 23)
    degrees[[0, 7, 22]] = 0  # empty rows at the start, inside and at the end
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = rng.integers(0, 23, int(indptr[-1])).astype(dtype)
    expected_indptr = indptr + np.arange(24)
    expected = np.concatenate([np.concatenate([[v], indices[indptr[v]:indptr[v + 1]]]) for v in range(23)])
    for block in (1, 2, 3, 7, 23, 1 << 24):
        new_indptr, out = _with_self_loops(indptr, indices, block=block)
        np.testing.assert_array_equal(new_indptr, expected_indptr)
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == dtype and new_indptr.dtype == np.int64


def test_planted_partition_sizes_splits_and_spread():
    ds = planted_partition(100, train_frac=0.3, valid_frac=0.2)
    assert [ds.split[k].numel() for k in ("train", "valid", "test")] == [30, 20, 50]
    assert planted_partition(100, train_frac=0.001).split["train"].numel() == 1  # at least one training node
    assert planted_partition(100, train_frac=0.5, valid_frac=0.0).split["valid"].numel() == 0
    assert planted_partition(100).num_edges == 500 and planted_partition(100, avg_degree=0.5).num_edges == 25
    assert planted_partition(100, avg_degree=0.001).num_edges == 1
    default, seeded = planted_partition(100), planted_partition(100, seed=0)
    assert np.array_equal(default.edge_index, seeded.edge_index)
    pure = planted_partition(400, num_classes=4, homophily=1.0, avg_degree=10, seed=0)
    src, dst = pure.edge_index
    assert src.min() == 0 and dst.min() == 0 and src.max() == dst.max() == 399  # every node can be an end
    assert np.unique(dst).size > 300  # ends spread over each community, not piled on one node


@pytest.mark.parametrize("kwargs,message", [
    (dict(avg_degree=0), "avg_degree must be > 0, got 0"),
    (dict(train_frac=0.0), "need train_frac > 0, valid_frac >= 0, sum < 1; got 0.0, 0.25"),
    (dict(valid_frac=-0.1), "need train_frac > 0, valid_frac >= 0, sum < 1; got 0.5, -0.1"),
    (dict(train_frac=0.5, valid_frac=0.5), "need train_frac > 0, valid_frac >= 0, sum < 1; got 0.5, 0.5"),
    (dict(train_frac=1.5, valid_frac=0.0), "need train_frac > 0, valid_frac >= 0, sum < 1; got 1.5, 0.0"),
])
def test_planted_partition_refuses_bad_sizes_exactly(kwargs, message):
    assert raised(ValueError, planted_partition, 100, **kwargs) == message


def test_one_split_kind_loads_without_a_warning(tmp_path, caplog):
    folder = write_raw_dataset(tmp_path / "g")
    with caplog.at_level("WARNING", logger="ttgnn.data"):
        load_dataset(str(folder))
    assert caplog.records == []


@pytest.mark.parametrize("edges,bad", [([[0, 1], [2, 20]], "line 2: edge [2, 20]"),
                                       ([[0, 1], [1, 2], [-1, 2]], "line 3: edge [-1, 2]")])
def test_raw_edge_ids_outside_the_nodes_are_refused_at_their_line(tmp_path, edges, bad):
    write_raw_dataset(tmp_path / "g", num_nodes=20, edges=edges)
    with pytest.raises(ValueError, match=re.escape(f"edge.csv.gz, {bad} names a node outside [0, 20)")):
        load_dataset(tmp_path / "g")


def test_a_csr_only_dataset_counts_undirected_edges():
    ds = planted_partition(50, num_classes=2, seed=1)
    indptr, indices = ds.csr()
    csr_only = NodeDataset("c", 50, None, ds.labels, ds.split, 2, _csr=ds.csr())
    assert csr_only.num_edges == indices.shape[0] // 2 and isinstance(csr_only.num_edges, int)


def test_the_fingerprint_tells_labels_split_and_edge_count_apart_and_ignores_the_name():
    import dataclasses

    ds = planted_partition(50, num_classes=2, seed=1)
    same = planted_partition(50, num_classes=2, seed=1)
    assert ds.fingerprint() == same.fingerprint() == dataclasses.replace(same, name="other").fingerprint()
    assert len(ds.fingerprint()) == 24
    labels = ds.labels.clone()
    labels[7] = 1 - labels[7]
    split = dict(ds.split, valid=ds.split["valid"][1:])
    changed = [dataclasses.replace(ds, labels=labels), dataclasses.replace(ds, split=split),
               dataclasses.replace(ds, edge_index=ds.edge_index[:, :-1].copy(), _csr=None),
               planted_partition(50, num_classes=2, seed=2),
               NodeDataset("c", 50, None, ds.labels, ds.split, 2, _csr=ds.csr())]  # held as CSR: read as such
    prints = {d.fingerprint() for d in changed}
    assert len(prints) == len(changed) and ds.fingerprint() not in prints
    # a graph of 2**21 edges is read at 2**20 of them: still one digest per graph, and the count counts
    big = np.arange(2 * 2**21, dtype=np.int64).reshape(2, -1) % 50
    one = NodeDataset("b", 50, big, ds.labels, ds.split, 2)
    assert one.fingerprint() == NodeDataset("b", 50, big.copy(), ds.labels, ds.split, 2).fingerprint()
    assert one.fingerprint() != NodeDataset("b", 50, big[:, 1:].copy(), ds.labels, ds.split, 2).fingerprint()


@pytest.mark.parametrize("edge_index,message", [
    (np.array([[0, 1], [2, 50]]), "edge_index has node ids outside [0, 50)"),
    (np.array([[0, -1], [2, 3]]), "edge_index has node ids outside [0, 50)"),
    (np.zeros((3, 4), dtype=np.int64), "edge_index must be integers of shape (2, E), got int64 (3, 4)"),
    (np.zeros((2, 4), dtype=np.float64), "edge_index must be integers of shape (2, E), got float64 (2, 4)"),
])
def test_papers100m_layout_refuses_bad_edges(tmp_path, edge_index, message):
    folder = tmp_path / "ogbn_papers100M"
    write_papers_layout(folder, compressed=False, edges=edge_index)
    assert raised(ValueError, load_dataset, "ogbn-papers100M", root=tmp_path) == (
        f"corrupted dataset file {folder / 'raw' / 'data.npz'}: {message}")


def test_papers100m_layout_never_unpickles_and_names_its_evaluator(tmp_path):
    folder = tmp_path / "ogbn_papers100M"
    write_papers_layout(folder)
    ds = load_dataset("ogbn-papers100M", root=tmp_path)
    assert ds.evaluator_name == "ogbn-papers100M" and ds.split_files["train"].name == "train.csv.gz"
    labels = np.empty((50, 1), dtype=object)
    labels[:] = 1
    np.savez(folder / "raw" / "node-label.npz", node_label=labels)  # an object array: a pickle inside
    with pytest.raises(ValueError, match="allow_pickle=False"):
        load_dataset("ogbn-papers100M", root=tmp_path)


# ---------------------------------------------------------------------- whole messages of the raw layout
def _label_rows(*first):
    """60 labels: ``first``, then -1 (unlabelled) for the rest."""
    return list(first) + [-1] * (60 - len(first))


@pytest.mark.parametrize("file,rows,message", [
    ("raw/num-node-list.csv.gz", [0], "{path}: 0 nodes"),
    ("raw/num-node-list.csv.gz", [3.5], "{path}, line 1: [3.5] is not a list of integers"),
    ("raw/num-node-list.csv.gz", [60, 60], "{path}: 2 values, expected one (a node property dataset is one graph)"),
    # the line and the values as written, a string among numbers included
    ("raw/edge.csv.gz", [[0, 1], [2, 3], [1, "x"]], "{path}, line 3: [1, 'x'] is not a list of integers"),
    ("raw/edge.csv.gz", [[0, 1], [2, 3], [1, 2.5]], "{path}, line 3: [1.0, 2.5] is not a list of integers"),
    ("raw/node-label.csv.gz", _label_rows(0, 1, "x"), "{path}, line 3: label 'x' is not a class id (an integer >= 0, "
                                                      "or empty/-1 for an unlabelled node)"),
    ("raw/node-label.csv.gz", _label_rows(0, 1, -2), "{path}, line 3: label -2.0 is not a class id (an integer >= 0, "
                                                     "or empty/-1 for an unlabelled node)"),
    # classes 0..2 for 2 labelled nodes: one class too many (a label equal to the labelled count)
    ("raw/node-label.csv.gz", _label_rows(2, 0), "{path}, line 1: label 2 is out of range (3 classes would exceed "
                                                 "the 2 labelled nodes; labels must be ids 0..C-1)"),
    ("raw/node-feat.csv.gz", [[0.5, 1.0]] * 4 + [[0.5, "x"]] + [[0.5, 1.0]] * 55,
     "{path}: could not convert string to float: 'x'"),
    ("raw/node-feat.csv.gz", [[0.5, 1.0]] + [[0.5, "nan"]] + [[0.5, 1.0]] * 58,
     "{path}: line 2 holds a value that is not a finite float32 number (NaN, inf, empty or beyond 3.4e38)"),
    # past float32's range: inf after the cast, with a NumPy overflow warning printed before
    ("raw/node-feat.csv.gz", [[0.5, 1.0]] * 2 + [[1e300, 1.0]] + [[0.5, 1.0]] * 57,
     "{path}: line 3 holds a value that is not a finite float32 number (NaN, inf, empty or beyond 3.4e38)"),
])
def test_bad_raw_values_have_whole_messages(tmp_path, file, rows, message):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / file, rows)
    expected = "corrupted dataset file " + message.format(path=folder / file)
    assert raised(ValueError, load_dataset, folder) == expected


def test_a_truncated_raw_file_has_a_whole_message(tmp_path):
    folder = write_raw_dataset(tmp_path / "g")
    edges = folder / "raw" / "edge.csv.gz"
    edges.write_bytes(edges.read_bytes()[:-6])  # a gzip without its trailer
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {edges}: Compressed file ended before the end-of-stream marker was reached")


def test_a_huge_count_is_read_exactly_not_through_floats(tmp_path):
    folder = write_raw_dataset(tmp_path / "g")
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [2 ** 62 + 1])  # a float64 reads 2**62
    raw = folder / "raw"
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset: {raw / 'edge.csv.gz'} holds 360 edges, but {raw / 'num-edge-list.csv.gz'} says "
        "4,611,686,018,427,387,905 (a truncated or mismatched file?)")


def test_whole_number_floats_in_an_edge_file_load_as_int64(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", num_nodes=20, edges=[[0.0, 1.0], [2.0, 19.0]])
    ds = load_dataset(folder)
    assert ds.edge_index.dtype == np.int64 and ds.edge_index.tolist() == [[0, 2], [1, 19]]


@pytest.mark.parametrize("remove,error,message", [
    ("raw", FileNotFoundError, "dataset folder not found: {folder}/raw (expected OGB raw layout)"),
    ("raw/num-node-list.csv.gz", FileNotFoundError, "dataset file not found: {folder}/raw/num-node-list.csv.gz"),
    ("raw/edge.csv.gz", FileNotFoundError, "dataset file not found: {folder}/raw/edge.csv.gz"),
    ("split", FileNotFoundError, "dataset split folder not found: {folder}/split"),
    ("split/random", FileNotFoundError, "no split kind (e.g. {folder}/split/time) found in {folder}/split"),
])
def test_missing_raw_files_and_folders_have_whole_messages(tmp_path, remove, error, message):
    folder = write_raw_dataset(tmp_path / "g")
    path = folder / remove
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    assert raised(error, load_dataset, folder) == message.format(folder=folder)


def test_a_node_listed_many_times_names_its_first_five_places(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", split={"train": [0, 1], "valid": [2] + [3] * 7, "test": [4]})
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted split file {folder / 'split' / 'random' / 'valid.csv.gz'}: node 3 is listed more than once "
        "(lines 2, 3, 4, 5, 6); 6 repeated entries in all")


# ---------------------------------------------------------------------- NodeDataset's views and messages
def test_a_dataset_shows_its_sizes_and_its_feature_width():
    ds = _built()
    assert repr(ds) == "NodeDataset('x', nodes=10, edges=10, classes=3, features=0, train=5, valid=2, test=3)"
    assert ds.num_features == 0 and _built(features=torch.ones(10, 7)).num_features == 7


def test_the_csr_keeps_isolated_nodes_at_the_end():
    ds = _built(edge_index=np.array([[0, 1], [1, 2]]))  # nodes 3-9 have no edge
    graph = ds.csr()
    assert graph.num_nodes == 10 and graph.indptr.tolist() == [0, 1, 3, 4] + [4] * 7
    assert graph.indices.tolist() == [1, 0, 2, 1] and ds.csr() is graph  # cached


def test_the_normalized_adjacency_is_cached_per_device():
    ds = _built(edge_index=np.array([[0, 1, 1], [1, 2, 3]]))  # a star around node 1, nodes 4-9 isolated
    adjacency = ds.normalized_adjacency()
    degree = np.array([1, 3, 1, 1] + [0] * 6, dtype=np.float64)
    dense = np.zeros((10, 10))
    for u, v in ((0, 1), (1, 2), (1, 3)):
        dense[u, v] = dense[v, u] = 1 / np.sqrt(degree[u] * degree[v])
    np.testing.assert_allclose(adjacency.to_dense().numpy(), dense, rtol=1e-6)
    assert adjacency.dtype == torch.float32 and adjacency.layout == torch.sparse_csr
    assert ds.normalized_adjacency("cpu") is adjacency and ds.normalized_adjacency(torch.device("cpu")) is adjacency


def test_the_dgl_graph_has_self_loops_and_edge_ids_by_default():
    ds = _built()
    graph = ds.dgl_graph()
    indptr, indices, edge_ids = graph.adj_tensors("csc")
    assert graph.num_edges() == 20 + 10 and graph.num_nodes() == 10 and graph.idtype == torch.int64
    assert indices[indptr[:-1]].tolist() == list(range(10))  # each column's self-loop first
    assert edge_ids.tolist() == list(range(30))
    bare = ds.dgl_graph(self_loops=False, edge_ids=False)
    assert bare.num_edges() == 20 and bare.adj_tensors("csc")[2].numel() == 0


@pytest.mark.parametrize("change,error,message", [
    (dict(features=[[1.0]] * 10), ValueError,
     "features must be a (10, F) floating-point tensor or None, got list of shape ()"),
    (dict(split={"train": torch.tensor([], dtype=torch.long), "valid": torch.tensor([5]), "test": torch.tensor([7])},
          split_files={"train": Path("t.csv.gz"), "valid": Path("v.csv.gz"), "test": Path("s.csv.gz")}),
     ValueError, "the training split t.csv.gz is empty"),
])
def test_a_dataset_built_in_python_has_whole_messages(change, error, message):
    assert raised(error, _built, **change) == message


def test_a_csr_of_another_node_count_is_refused():
    other = planted_partition(12, num_classes=3, seed=0).csr()
    assert raised(ValueError, _built, edge_index=None, _csr=other) == "the CSR has 12 nodes, num_nodes is 10"


def test_planted_partition_draws_random_ends_from_every_node():
    src, dst = planted_partition(10, num_classes=2, avg_degree=40, homophily=0.0, seed=0).edge_index
    assert sorted(set(src.tolist())) == sorted(set(dst.tolist())) == list(range(10))


# ---------------------------------------------------------------------- load_dataset's arguments
def test_the_cache_directory_defaults_to_the_users_cache(tmp_path, monkeypatch):
    from ttgnn.data import default_cache_dir

    monkeypatch.delenv("TTGNN_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "ttgnn"
    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    assert default_cache_dir(tmp_path / "given") == tmp_path / "given"  # the argument first


@pytest.mark.parametrize("count,shown", [
    (20, ", ".join(f"g{i:02d}" for i in range(20))),
    (21, ", ".join(f"g{i:02d}" for i in range(20)) + " and 1 more"),
    (23, ", ".join(f"g{i:02d}" for i in range(20)) + " and 3 more"),
])
def test_a_name_not_found_under_a_crowded_root_lists_twenty_datasets(tmp_path, count, shown):
    for i in range(count):
        (tmp_path / f"g{i:02d}" / "raw").mkdir(parents=True)
    assert raised(FileNotFoundError, load_dataset, "nothing-like-these", tmp_path) == (
        f"dataset folder not found: {tmp_path / 'nothing-like-these'} (root {tmp_path} holds {shown}; "
        "set --root or $TTGNN_DATA)")


def test_a_name_not_found_under_the_environments_root_says_what_that_root_is(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("x")
    for root, what in ((tmp_path / "missing", "does not exist"), (tmp_path / "a-file", "is a file")):
        monkeypatch.setenv("TTGNN_DATA", str(root))  # no root given: the variable's, which may be anything
        assert raised(FileNotFoundError, load_dataset, "cora") == (
            f"dataset folder not found: {root / 'cora'} (root {root} {what}; set --root or $TTGNN_DATA)")


def test_load_dataset_refuses_bad_names_with_whole_messages(tmp_path):
    assert raised(TypeError, load_dataset, 3, tmp_path) == "name must be a dataset name or a folder path, got int"
    assert raised(ValueError, load_dataset, " ", tmp_path) == (
        'name is empty: give a dataset name ("ogbn-arxiv", "cora"...) or a folder path')
    assert raised(FileNotFoundError, load_dataset, str(tmp_path / "absent"), tmp_path) == (
        f"dataset folder not found: {tmp_path / 'absent'}")


# ---------------------------------------------------------------------- the binary layout's edges
def _rewrite_npz(path, version=(1, 0), drop=(), edges_cut_to=None):
    """Rewrite the ``.npz`` at ``path`` member by member in npy format ``version``, without the
    arrays named in ``drop``; ``edges_cut_to`` keeps that many values of ``edge_index`` (its header
    unchanged: a file cut short)."""
    import zipfile

    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files if key not in drop}
    with zipfile.ZipFile(path, "w") as out:
        for key, array in arrays.items():
            with out.open(f"{key}.npy", "w") as fh:
                if key == "edge_index" and edges_cut_to is not None:
                    np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(array))
                    fh.write(array.reshape(-1)[:edges_cut_to].tobytes())
                else:
                    np.lib.format.write_array(fh, array, version=version)


def test_papers100m_layout_reads_npy_format_2(tmp_path):
    edges, _ = write_papers_layout(tmp_path / "ogbn_papers100M", compressed=False)
    reference = load_dataset("ogbn-papers100M", root=tmp_path).csr()
    _rewrite_npz(tmp_path / "ogbn_papers100M" / "raw" / "data.npz", version=(2, 0))
    again = load_dataset("ogbn-papers100M", root=tmp_path).csr()
    np.testing.assert_array_equal(again.indptr, reference.indptr)
    np.testing.assert_array_equal(again.indices, reference.indices)


@pytest.mark.parametrize("change,message", [
    (dict(drop=("edge_index",)), "no 'edge_index' array in it"),
    (dict(edges_cut_to=150), "edge_index ends early"),
])
def test_papers100m_layout_names_a_missing_or_short_edge_list(tmp_path, change, message):
    data = tmp_path / "ogbn_papers100M" / "raw" / "data.npz"
    write_papers_layout(tmp_path / "ogbn_papers100M", compressed=False)
    _rewrite_npz(data, **change)
    assert raised(ValueError, load_dataset, "ogbn-papers100M", tmp_path) == f"corrupted dataset file {data}: {message}"


def test_papers100m_layout_counts_and_labels_have_whole_messages(tmp_path, caplog):
    folder = tmp_path / "ogbn_papers100M"
    write_papers_layout(folder, compressed=False)
    with caplog.at_level("INFO", logger="ttgnn.data"):
        load_dataset("ogbn-papers100M", root=tmp_path)
    assert logged(caplog, "ttgnn.data") == [
        f"ogbn-papers100M: 50 nodes, 200 stored edges read from {folder / 'raw' / 'data.npz'} (features not loaded)"]
    labels = np.zeros(50)
    labels[3] = -2
    np.savez(folder / "raw" / "node-label.npz", node_label=labels.reshape(-1, 1))
    assert raised(ValueError, load_dataset, "ogbn-papers100M", tmp_path) == (
        f"corrupted dataset file {folder / 'raw' / 'node-label.npz'}, line 4: label -2.0 is not a class id (an "
        "integer >= 0, or empty/-1 for an unlabelled node)")
    with np.load(folder / "raw" / "data.npz") as archive:
        arrays = dict(archive)
    np.savez(folder / "raw" / "data.npz", **{**arrays, "num_nodes_list": np.array([0])})
    assert raised(ValueError, load_dataset, "ogbn-papers100M", tmp_path) == (
        f"corrupted dataset file {folder / 'raw' / 'data.npz'}: num_nodes_list says 0 nodes")


# ---------------------------------------------------------------------- malformed raw files (QA, 2026-12-01)
def test_a_split_file_with_two_columns_is_refused_not_flattened(tmp_path):
    # "0,3" on one line was read as two training nodes.
    folder = write_raw_dataset(tmp_path / "g", num_nodes=20)
    write_csv(folder / "split" / "random" / "train.csv.gz", [[0, 3], [5, 6]])
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted split file {folder / 'split' / 'random' / 'train.csv.gz'}: 2 columns, expected one node id per line")


def test_a_label_file_with_two_columns_is_named_as_such(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [1, 2]], labels=[[0, 1], [1, 0], [0, 0], [1, 1]],
                               split={"train": [0], "valid": [1], "test": [2]})
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'raw' / 'node-label.csv.gz'}: 2 columns, expected one label per line")


def test_a_blank_label_line_is_an_unlabelled_node_and_line_numbers_count_blank_lines(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [1, 2], [2, 3]], labels=[0, "", 1, 1],
                               split={"train": [0, 2], "valid": [3], "test": [1]})
    assert load_dataset(folder).labels.tolist() == [0, -1, 1, 1]  # was "3 labels for 4 nodes"
    # a blank line inside the edge list is refused at its own line (the error named line 3 for line 5)
    write_csv(folder / "raw" / "edge.csv.gz", [[0, 1], "", "", [1, 2], [2, "x"]])
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [5])
    assert raised(ValueError, load_dataset, folder).startswith(
        f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}, line 2: [nan, nan] is not a list of integers")
    # blank lines after the last edge are not rows
    write_csv(folder / "raw" / "edge.csv.gz", [[0, 1], [1, 2], "", ""])
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [2])
    assert load_dataset(folder).edge_index.shape == (2, 2)


def test_blank_lines_at_the_start_of_a_file_are_rows_too(tmp_path):
    # pandas finds no columns when the first line is blank: node 0 unlabelled was refused as
    # "it holds no lines (empty or blank)", and a leading blank edge line named no line
    folder = write_raw_dataset(tmp_path / "g", num_nodes=5, edges=[[0, 1], [1, 2], [2, 3], [3, 4]],
                               labels=["", "", 1, 0, 1], split={"train": [2, 3], "valid": [4], "test": [0, 1]})
    ds = load_dataset(folder)
    assert ds.labels.tolist() == [-1, -1, 1, 0, 1] and ds.num_classes == 2
    write_csv(folder / "raw" / "node-label.csv.gz", ["  ", 1, " ", 0, 1])  # spaces only: blank lines too
    assert load_dataset(folder).labels.tolist() == [-1, 1, -1, 0, 1]  # were "labels must be integers"
    write_csv(folder / "raw" / "edge.csv.gz", ["", [0, 1], [1, 2]])
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [3])
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}, line 1: [nan, nan] is not a list of integers")
    write_csv(folder / "raw" / "edge.csv.gz", ["   ", [0, 1], [1, 2]])  # was "Expected 1 fields in line 2, saw 2"
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}, line 1: [nan, nan] is not a list of integers")
    # past blank first lines, pandas' own errors keep the file's line numbers
    write_csv(folder / "raw" / "edge.csv.gz", ["", [0, 1], [1, 2, 7]])
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}: Error tokenizing data. C error: Expected 2 "
        "fields in line 3, saw 3")  # one line: pandas' message ends in a newline
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [2])
    write_csv(folder / "raw" / "edge.csv.gz", [[0, 1], [1, 2]])
    write_csv(folder / "raw" / "node-label.csv.gz", ["  ", 1, [0, 5], 1, 0])  # the real fault: line 3
    assert "line 3" in raised(ValueError, load_dataset, folder)
    write_csv(folder / "raw" / "num-edge-list.csv.gz", [3])
    write_csv(folder / "raw" / "edge.csv.gz", ["", "", ""])  # nothing but blank lines: still no lines
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}: it holds no lines (empty or blank)")


@pytest.mark.parametrize("label", ["9223372036854775807", "9223372036854775808", "1e30"])
def test_a_huge_label_is_named_with_its_file_line_and_value(tmp_path, label):
    # It wrapped to -9223372036854775808 (with a NumPy cast warning) and no file was named.
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [1, 2]], labels=[0, 1, 0, label],
                               split={"train": [0, 1], "valid": [2], "test": [3]})
    message = raised(ValueError, load_dataset, folder)
    assert message.startswith(f"corrupted dataset file {folder / 'raw' / 'node-label.csv.gz'}, line 4: label ")
    assert f"label {float(label):.0f} is out of range" in message and "-9223372036854775808" not in message


def test_an_edge_id_past_64_bits_is_named_at_its_line(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [99999999999999999999, 3]],
                               split={"train": [0, 1], "valid": [2], "test": [3]}, labels=[0, 1, 0, 1])
    message = raised(ValueError, load_dataset, folder)
    assert message.startswith(f"corrupted dataset file {folder / 'raw' / 'edge.csv.gz'}, line 2: ")
    assert "beyond 64-bit integers" in message


def test_an_empty_list_is_an_empty_split_of_a_graph_built_in_python():
    ds = NodeDataset("x", 4, np.array([[0, 1, 2], [1, 2, 3]]), [0, 1, 0, 1], {"train": [0], "valid": [], "test": [2]}, 2)
    assert ds.split["valid"].dtype == torch.int64 and ds.split["valid"].numel() == 0


def test_an_empty_cache_directory_is_refused_not_the_working_folder():
    from ttgnn.data import default_cache_dir

    for empty in ("", "  "):  # (Path("") is Path("."), the working folder named)
        with pytest.raises(ValueError, match="the cache directory is empty"):
            default_cache_dir(empty)


def test_an_empty_dataset_root_is_refused_not_the_working_folder(tmp_path, monkeypatch):
    # --root "$UNSET" read a same-named folder in the working directory (another graph, silently)
    from ttgnn.data import resolve_root

    write_raw_dataset(tmp_path / "cora", num_nodes=4, edges=[[0, 1]], labels=[0, 1, 0, 1],
                      split={"train": [0, 1], "valid": [2], "test": [3]})
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="the dataset root is empty"):
            resolve_root(empty)
        with pytest.raises(ValueError, match="the dataset root is empty"):
            load_dataset("cora", root=empty, cache_dir=tmp_path / "cache")


def test_blank_lines_after_the_last_label_are_not_nodes(tmp_path):
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [1, 2]], labels=[0, 1, 0, 1, "", ""],
                               split={"train": [0, 1], "valid": [2], "test": [3]})
    assert load_dataset(folder).labels.tolist() == [0, 1, 0, 1]


def test_a_node_id_that_only_unsigned_64_bits_hold_is_named_not_wrapped(tmp_path):
    # pandas reads such a column as uint64; the cast made 18446744073709551615 node -1
    folder = write_raw_dataset(tmp_path / "g", num_nodes=4, edges=[[0, 1], [1, 2]], labels=[0, 1, 0, 1],
                               split={"train": [0, 18446744073709551615], "valid": [2], "test": [3]})
    assert raised(ValueError, load_dataset, folder) == (
        f"corrupted dataset file {folder / 'split' / 'random' / 'train.csv.gz'}, line 2: [18446744073709551615] "
        "holds a value beyond 64-bit integers")


def test_node_dataset_refuses_edges_features_and_splits_it_cannot_use_when_built():
    ring = np.stack([np.arange(10), (np.arange(10) + 1) % 10])
    # a list failed on its missing .ndim; float edges were accepted and failed inside train()
    assert raised(TypeError, _built, edge_index=ring.tolist()) == (
        "edge_index must be a (2, E) integer ndarray or tensor, got list (np.asarray makes an array of a list)")
    assert raised(TypeError, _built, edge_index=ring + 0.5) == "edge_index must hold integer node ids, got dtype float64"
    assert raised(TypeError, _built, edge_index=torch.as_tensor(ring).bool()) == (
        "edge_index must hold integer node ids, got dtype torch.bool")
    assert _built(edge_index=torch.as_tensor(ring).int()).num_edges == 10
    # a NaN feature trained on, and the loss's NaN was blamed on the learning rate
    features = torch.randn(10, 4)
    features[7, 3] = float("inf")
    assert raised(ValueError, _built, features=features) == (
        "features hold a value that is not a finite number (NaN or inf): node 7, column 3")
    # a set: torch's "can't convert np.ndarray of type numpy.object_"
    split = {"train": set(range(5)), "valid": [5, 6], "test": [7, 8, 9]}
    assert raised(TypeError, _built, split=split) == (
        "split['train'] must be a tensor, array or list of integers, got set")
