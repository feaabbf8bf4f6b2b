"""Tests of ttgnn.data: OGB and raw-layout loading, symmetrisation, errors, synthetic graphs."""
import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

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
def test_ogbn_arxiv_offline_without_writing_root(data_root, tmp_path):
    before = sorted(str(p) for p in (data_root / "ogbn_arxiv").rglob("*"))
    ds = load_dataset("ogbn-arxiv", data_root, cache_dir=tmp_path)
    assert (ds.num_nodes, ds.num_edges, ds.num_classes) == (169_343, 1_166_243, 40)
    assert [len(ds.split[k]) for k in ("train", "valid", "test")] == [90_941, 29_799, 48_603]
    assert ds.evaluator_name == "ogbn-arxiv" and ds.features is None
    assert (tmp_path / "ogb" / "ogbn_arxiv" / "processed").is_dir()
    # Second load reads ogb's processed file (the torch weights_only pitfall) and gives the same data.
    again = load_dataset("ogbn-arxiv", data_root, cache_dir=tmp_path)
    assert np.array_equal(again.edge_index, ds.edge_index)
    assert torch.equal(again.labels, ds.labels)
    assert sorted(str(p) for p in (data_root / "ogbn_arxiv").rglob("*")) == before


@pytest.mark.data
def test_ogb_folder_without_release_file_does_not_prompt(data_root, tmp_path):
    root = tmp_path / "root"
    src = data_root / "ogbn_arxiv"
    (root / "ogbn_arxiv").mkdir(parents=True)
    for sub in ("raw", "split"):
        (root / "ogbn_arxiv" / sub).symlink_to(src / sub)
    ds = load_dataset("ogbn-arxiv", root, cache_dir=tmp_path / "cache")  # would call input() otherwise
    assert ds.num_nodes == 169_343


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


@pytest.mark.data
def test_corrupted_ogb_file_names_the_file(data_root, tmp_path):
    root = tmp_path / "root"
    folder = root / "ogbn_arxiv"
    folder.mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("x")
    (folder / "split").symlink_to(data_root / "ogbn_arxiv" / "split")
    (folder / "raw").mkdir()
    for path in (data_root / "ogbn_arxiv" / "raw").iterdir():
        (folder / "raw" / path.name).symlink_to(path)
    (folder / "raw" / "node-label.csv.gz").unlink()
    with gzip.open(folder / "raw" / "node-label.csv.gz", "wt") as fh:
        fh.write("1\n2\n")
    raw = (folder / "raw" / "node-label.csv.gz").read_bytes()
    (folder / "raw" / "node-label.csv.gz").write_bytes(raw[:-6])  # cut the gzip trailer
    with pytest.raises(ValueError, match="node-label.csv.gz"):
        load_dataset("ogbn-arxiv", root, cache_dir=tmp_path / "cache")


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


# ---------------------------------------------------------------------- bad values in raw files
from raw_layout import write_csv, write_raw_dataset  # noqa: E402


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


@pytest.mark.parametrize("split,message", [
    ({"train": [0, 1, 2], "valid": [3, 4], "test": [0, 1, 2]}, r"3 node\(s\), e.g. node 0, are in both .*train.csv.gz and .*test.csv.gz"),
    ({"train": [0, 1, 2], "valid": [2, 4], "test": [5]}, r"e.g. node 2, are in both .*train.csv.gz and .*valid.csv.gz"),
    ({"train": [0, 1, 99], "valid": [3], "test": [4]}, r"train.csv.gz, line 3: node id 99 is outside \[0, 60\)"),
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
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="dataset folder not found: .*empty/cora"):
        load_dataset("cora", tmp_path / "empty")
    assert load_dataset("./cora", tmp_path / "empty").num_nodes == 60  # an explicit path is used as given


def test_cache_dir_that_is_a_file(tmp_path):
    (tmp_path / "cache").write_text("x")
    folder = write_raw_dataset(tmp_path / "g")
    with pytest.raises(ValueError, match="cache directory .* is not a folder"):
        load_dataset(str(folder), cache_dir=tmp_path / "cache")
