"""Tests of ttgnn.data's OGB loader: ogb's pitfalls handled (no prompt, its ``processed/`` folder,
the ``weights_only`` reload), its cache (the mirror of the dataset folder, the stamp, the lock
between processes), downloads (served from a local zip), and errors that name the files read."""
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from messages import logged, raised
from raw_layout import write_csv, write_products_layout, write_raw_dataset
from waiting import wait_for_log
from ttgnn.data import load_dataset


@pytest.mark.data
def test_ogbn_arxiv_offline_without_writing_root(data_root, tmp_path):
    before = sorted(str(p) for p in (data_root / "ogbn_arxiv").rglob("*"))
    ds = load_dataset("ogbn-arxiv", data_root, cache_dir=tmp_path)
    assert (ds.num_nodes, ds.num_edges, ds.num_classes) == (169_343, 1_166_243, 40)
    assert [len(ds.split[k]) for k in ("train", "valid", "test")] == [90_941, 29_799, 48_603]
    assert ds.evaluator_name == "ogbn-arxiv" and ds.features is None
    assert (tmp_path / "ogb" / "local" / "ogbn_arxiv" / "processed").is_dir()
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


def test_products_csv_layout_loads_through_ogb(tmp_path):
    folder = tmp_path / "ogbn_products"
    write_raw_dataset(folder, num_nodes=40, num_classes=4)
    (folder / "split" / "random").rename(folder / "split" / "sales_ranking")
    (folder / "RELEASE_v1.txt").write_text("test\n")
    ds = load_dataset("ogbn-products", root=tmp_path, cache_dir=tmp_path / "cache")
    assert ds.num_nodes == 40 and ds.evaluator_name == "ogbn-products" and ds.num_classes == 47
    assert sorted(torch.cat(list(ds.split.values())).tolist()) == list(range(40))
    indptr, indices = ds.csr()
    assert indices.dtype == np.int32 and indptr[-1] == indices.shape[0] > 0


def test_ogb_loader_waits_for_another_process_preparing_the_same_cache(tmp_path, caplog):
    """Two trainings started at once on a fresh cache both cleared ogb's processed files (one
    crashed on a file the other had removed); the second now waits and reads the first's files."""
    import fcntl
    import threading

    write_products_layout(tmp_path / "root")
    cache = tmp_path / "cache"
    lock = cache / "ogb" / "local" / ".ogbn_products.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is preparing the dataset
    result = []
    with caplog.at_level("WARNING"):
        loader = threading.Thread(target=lambda: result.append(
            load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=cache)))
        loader.start()
        wait_for_log(caplog, "waiting for another process that is preparing ogbn-products", loader)
        assert loader.is_alive() and not (cache / "ogb" / "local" / "ogbn_products").exists()
        os.close(fd)
        loader.join(timeout=120)
    assert not loader.is_alive() and result[0].num_nodes == 40


def test_ogb_processing_killed_midway_is_redone(tmp_path, monkeypatch):
    """A kill while ogb writes its processed file leaves no stamp and no half file, so the next load
    starts over (the stamp used to be written first: the next load met a half-written file and failed)."""
    write_products_layout(tmp_path / "root")
    reference = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "other")
    cache = tmp_path / "cache"
    saved_save = torch.save

    def killed_save(obj, f, *args, **kwargs):
        f.write(b"half a file")
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(torch, "save", killed_save)
    with pytest.raises(KeyboardInterrupt):
        load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=cache)
    processed = cache / "ogb" / "local" / "ogbn_products" / "processed"
    assert not any(processed.iterdir())  # no half file, no stamp
    monkeypatch.setattr(torch, "save", saved_save)
    again = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=cache)
    assert np.array_equal(again.edge_index, reference.edge_index) and torch.equal(again.labels, reference.labels)
    assert (processed / "ttgnn-source.txt").is_file()


def test_concurrent_processes_load_one_fresh_ogb_cache(tmp_path):
    """Three processes on one fresh cache: one builds ogb's processed file, the others wait and
    read it. Building is slowed to 4 s so that, without the lock, all three would build at once."""
    write_products_layout(tmp_path / "root")
    code = ("import os, sys, time\n"
            "from ogb.nodeproppred import dataset as ogb_dataset\n"
            "original = ogb_dataset.NodePropPredDataset.pre_process\n"
            "def slow(self):\n"
            "    if not os.path.exists(os.path.join(self.root, 'processed', 'data_processed')):\n"
            "        print('BUILDS', file=sys.stderr, flush=True)\n"
            "        time.sleep(4)\n"
            "    return original(self)\n"
            "ogb_dataset.NodePropPredDataset.pre_process = slow\n"
            "from ttgnn.data import load_dataset\n"
            "ds = load_dataset('ogbn-products', root=sys.argv[1], cache_dir=sys.argv[2])\n"
            "print(ds.num_nodes, int(ds.labels.sum()))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "root"), str(tmp_path / "cache")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1 and outputs[0][0].split()[0] == "40"
    assert sum("BUILDS" in err for _, err in outputs) == 1


@pytest.mark.parametrize("release", [None, "RELEASE_v1.txt", "RELEASE_v2.txt"])
def test_any_release_file_or_none_loads_without_a_prompt(tmp_path, release):
    """ogb asks on stdin whether to delete a folder that lacks the release file of the version it
    knows; a folder naming another release (v2 here, a newer download) made it ask before, which
    read as 'EOFError: EOF when reading a line' without a terminal."""
    folder = write_products_layout(tmp_path / "root")
    (folder / "RELEASE_v1.txt").unlink()
    if release is not None:
        (folder / release).write_text("a release\n")
    ds = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    mirror = tmp_path / "cache" / "ogb" / "local" / "ogbn_products"
    assert ds.num_nodes == 40 and (mirror / "RELEASE_v1.txt").is_file()


def test_ogb_cache_is_reused_while_the_source_holds_and_rebuilt_when_it_changes(tmp_path, monkeypatch):
    from ogb.nodeproppred import dataset as ogb_dataset

    folder = write_products_layout(tmp_path / "root")
    builds = []
    original = ogb_dataset.NodePropPredDataset.pre_process

    def counted(self):
        if not (Path(self.root) / "processed" / "data_processed").exists():
            builds.append(self.root)
        return original(self)

    monkeypatch.setattr(ogb_dataset.NodePropPredDataset, "pre_process", counted)
    first = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    again = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert len(builds) == 1 and torch.equal(first.labels, again.labels)  # the cache is reused
    new_labels = [(label + 1) % 4 for label in first.labels.tolist()]
    write_csv(folder / "raw" / "node-label.csv.gz", new_labels)  # the source changes
    changed = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert len(builds) == 2 and changed.labels.tolist() == new_labels


def test_an_ogb_label_beyond_the_datasets_classes_is_named(tmp_path):
    folder = write_products_layout(tmp_path / "root", num_nodes=60)  # more labelled nodes than classes
    labels = [i % 4 for i in range(60)]
    labels[5] = 47  # ogbn-products has 47 classes: 0..46
    write_csv(folder / "raw" / "node-label.csv.gz", labels)
    assert raised(ValueError, load_dataset, "ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache") == (
        f"corrupted dataset file {folder / 'raw' / 'node-label.csv.gz'}, line 6: label 47 is out of range (this "
        "dataset has 47 classes)")


def test_the_ogb_mirror_follows_a_dataset_folder_that_moved(tmp_path):
    """One cache, the same dataset name under two roots (a folder moved or replaced): the mirror's
    links and ogb's processed files follow the root loaded."""
    write_products_layout(tmp_path / "a")
    second = write_products_layout(tmp_path / "b")
    write_csv(second / "raw" / "node-label.csv.gz", [(i + 1) % 4 for i in range(40)])
    a = load_dataset("ogbn-products", root=tmp_path / "a", cache_dir=tmp_path / "cache")
    shutil.rmtree(tmp_path / "a")  # the mirror's links now point nowhere
    b = load_dataset("ogbn-products", root=tmp_path / "b", cache_dir=tmp_path / "cache")
    assert a.labels.tolist() == [i % 4 for i in range(40)] and b.labels.tolist() == [(i + 1) % 4 for i in range(40)]
    link = tmp_path / "cache" / "ogb" / "local" / "ogbn_products" / "raw" / "node-label.csv.gz"
    assert link.is_symlink() and Path(os.readlink(link)) == (second / "raw" / "node-label.csv.gz").resolve()


def test_an_ogb_folder_loads_offline_with_its_log_and_its_mirror(tmp_path, caplog):
    import ogb.utils.url as ogb_url
    from ogb.nodeproppred import dataset as ogb_dataset

    folder = write_products_layout(tmp_path / "root")
    write_csv(folder / "mapping" / "nodeidx2asin.csv.gz", [[i, f"a{i}"] for i in range(40)])
    decide = ogb_dataset.decide_download
    target = tmp_path / "cache" / "ogb" / "local" / "ogbn_products"
    with caplog.at_level("INFO", logger="ttgnn.data"):
        load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert logged(caplog, "ttgnn.data") == [
        f"loading ogbn-products offline from {folder} (ogb cache {target})",
        "ogb: Loading necessary files...", "ogb: This might take a while.", "ogb: Processing graphs...",
        "ogb: Saving..."]  # ogb's prints, into the log
    assert ogb_dataset.decide_download is decide is ogb_url.decide_download  # ogb is left as found
    link = target / "mapping" / "nodeidx2asin.csv.gz"
    assert link.is_symlink() and Path(os.readlink(link)) == (folder / "mapping" / "nodeidx2asin.csv.gz").resolve()
    assert (target / "RELEASE_v1.txt").read_text() == "mirrored by ttgnn\n"  # ogb's marker, written by us


def test_a_file_added_to_an_ogb_folder_joins_the_mirror(tmp_path):
    folder = write_products_layout(tmp_path / "root")
    assert load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache").features is None
    write_csv(folder / "raw" / "node-feat.csv.gz", [[i, 0.5] for i in range(40)])
    ds = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert ds.features.dtype == torch.float32 and ds.features[:3, 0].tolist() == [0.0, 1.0, 2.0]


def test_a_changed_split_is_read_without_processing_ogbs_files_again(tmp_path):
    folder = write_products_layout(tmp_path / "root")
    first = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    processed = tmp_path / "cache" / "ogb" / "local" / "ogbn_products" / "processed" / "data_processed"
    built = processed.stat().st_mtime_ns
    test_file = folder / "split" / "sales_ranking" / "test.csv.gz"
    write_csv(test_file, first.split["test"].tolist()[1:])
    again = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert again.split["test"].tolist() == first.split["test"].tolist()[1:]  # ogb reads the split on every load
    assert processed.stat().st_mtime_ns == built  # its processed graph and labels kept


def test_ogb_errors_name_the_source(tmp_path):
    folder = write_products_layout(tmp_path / "root")
    load = dict(name="ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    split = folder / "split" / "sales_ranking"
    good = (split / "valid.csv.gz").read_bytes()
    write_csv(split / "valid.csv.gz", [1, 1])
    assert raised(ValueError, load_dataset, **load) == (
        f"corrupted split file {split / 'valid.csv.gz'}: node 1 is listed more than once "
        "(lines 1, 2); 1 repeated entries in all")
    (split / "valid.csv.gz").write_bytes(good[:-6])  # a gzip without its trailer: ogb fails, the file is named
    assert raised(ValueError, load_dataset, **load) == (
        f"corrupted dataset file {split / 'valid.csv.gz'}: Compressed file ended before the end-of-stream marker "
        "was reached")
    (split / "valid.csv.gz").write_bytes(good)
    (folder / "raw" / "edge.csv.gz").unlink()
    assert raised(FileNotFoundError, load_dataset, **load) == f"dataset file not found: {folder}/raw/edge.csv.gz"


def test_blank_label_lines_in_a_folder_ogb_reads_are_named_and_minus_one_works(tmp_path):
    # ogb skips blank lines, so its labels came out shorter than the nodes: "38 labels for 40 nodes"
    labels = [0, 1, 2, 3] * 10
    labels[0], labels[5] = "", ""
    folder = write_products_layout(tmp_path / "root", labels=labels)
    load = dict(name="ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    for _ in range(2):  # the second load reads ogb's processed files: the same message
        assert raised(ValueError, load_dataset, **load) == (
            f"corrupted dataset file {folder / 'raw' / 'node-label.csv.gz'}: ogb read 38 labels from it for 40 nodes, "
            "as it skips blank lines; in a folder that ogb reads (ogbn-products) an unlabelled node is -1 or nan, "
            "not a blank line")
    labels[0], labels[5] = -1, "nan"  # as the message says
    write_csv(folder / "raw" / "node-label.csv.gz", labels)
    assert load_dataset(**load).labels[:8].tolist() == [-1, 1, 2, 3, 0, -1, 2, 3]


def test_a_broken_processed_ogb_file_is_named_and_rebuilt_from_the_source(tmp_path, caplog):
    import logging

    folder = write_products_layout(tmp_path / "root")
    load = dict(name="ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    reference = load_dataset(**load)
    processed = tmp_path / "cache" / "ogb" / "local" / "ogbn_products" / "processed" / "data_processed"
    processed.write_bytes(b"garbage")  # e.g. a full disk; the stamp still matches the source
    with caplog.at_level(logging.WARNING, logger="ttgnn.data"):
        rebuilt = load_dataset(**load)  # it blamed the dataset and stayed broken until the next load
    assert torch.equal(rebuilt.labels, reference.labels) and np.array_equal(rebuilt.edge_index, reference.edge_index)
    assert (f"ogb's processed files of ogbn-products in {processed.parent} could not be read (UnpicklingError: pickle "
            f"data was truncated); processing {folder} again") in caplog.messages
    assert processed.stat().st_size > 100 and (processed.parent / "ttgnn-source.txt").is_file()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.data"):
        load_dataset(**load)  # read from the rebuilt files, without a word
    assert caplog.messages == []
    # a source that fails to process fails the same way twice: named once, not rebuilt forever
    (folder / "raw" / "node-label.csv.gz").write_bytes(gzip.compress(b"not a label\n"))
    processed.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"corrupted dataset file .*node-label\.csv\.gz, line 1: label 'not a label' is not a class id"):
        load_dataset(**load)


def test_an_ogb_cache_folder_that_cannot_be_created_is_named_with_its_errno(tmp_path):
    import errno

    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError) as err:
        load_dataset("ogbn-arxiv", tmp_path, cache_dir=tmp_path / "file" / "cache")
    assert err.value.errno == errno.ENOTDIR and str(err.value) == (
        f"[Errno {errno.ENOTDIR}] cannot create the cache folder {tmp_path}/file/cache/ogb, where ogb writes its "
        "processed files (Not a directory); choose another with --cache-dir")


def _serve_products(monkeypatch, tmp_path, **layout):
    """ogb's download of ogbn-products replaced by a zip of a small graph in its layout (``layout``:
    :func:`write_raw_dataset`'s keywords); the zip's path is returned as ogb's download_url does."""
    from ogb.nodeproppred import dataset as ogb_dataset

    staging = tmp_path / "server"
    folder = write_products_layout(staging, folder="products", **layout)  # the zip's folder name
    write_csv(folder / "raw" / "node-feat.csv.gz", [[i, 1] for i in range(40)])  # integers: ogb reads int64
    urls = []

    def download_url(url, into):
        urls.append(url)
        return shutil.make_archive(str(Path(into) / "products"), "zip", root_dir=staging, base_dir="products")

    monkeypatch.setattr(ogb_dataset, "download_url", download_url)
    return urls


def test_an_ogb_dataset_not_under_the_root_is_downloaded_into_the_cache(tmp_path, monkeypatch, caplog):
    urls = _serve_products(monkeypatch, tmp_path)
    (tmp_path / "root").mkdir()
    cache = tmp_path / "cache" / "ogb"
    with caplog.at_level("INFO", logger="ttgnn.data"):
        ds = load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert urls == ["http://snap.stanford.edu/ogb/data/nodeproppred/products.zip"]
    assert ds.num_nodes == 40 and ds.num_classes == 47 and ds.features.dtype == torch.float32
    assert ds.features[:3].tolist() == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    assert logged(caplog, "ttgnn.data")[:2] == [
        f"ogbn-products not found under {tmp_path / 'root'}; ogb downloads it into {cache}",
        f"ogb: Extracting {cache}/products.zip"]
    assert (cache / "ogbn_products" / "raw" / "edge.csv.gz").is_file() and not (tmp_path / "root").joinpath(
        "ogbn_products").exists()  # downloaded into the cache, never into the root
    assert ds.split_files["train"] == cache / "ogbn_products" / "split" / "train (as read by ogb)"


@pytest.mark.parametrize("layout,message", [
    (dict(labels=[50] + [i % 4 for i in range(1, 40)]),
     "corrupted dataset file {cache}/ogbn_products/raw/node-label.csv.gz, line 1: label 50 is out of range "
     "(this dataset has 47 classes)"),
    (dict(split={"train": [0, 1], "valid": [2, 2], "test": [3]}),
     "corrupted split file {cache}/ogbn_products/split/valid (as read by ogb): node 2 is listed more than once "
     "(lines 1, 2); 1 repeated entries in all"),
])
def test_errors_in_a_downloaded_ogb_dataset_name_the_cache(tmp_path, monkeypatch, layout, message):
    _serve_products(monkeypatch, tmp_path, **layout)
    assert raised(ValueError, load_dataset, "ogbn-products", tmp_path, cache_dir=tmp_path / "cache") == (
        message.format(cache=tmp_path / "cache" / "ogb"))


def test_a_failed_download_names_the_cache(tmp_path, monkeypatch):
    from ogb.nodeproppred import dataset as ogb_dataset

    def offline(url, into):
        raise OSError("network unreachable")

    monkeypatch.setattr(ogb_dataset, "download_url", offline)
    assert raised(ValueError, load_dataset, "ogbn-products", tmp_path, cache_dir=tmp_path / "cache") == (
        f"ogb could not load ogbn-products from {tmp_path / 'cache' / 'ogb'}: OSError: network unreachable")


def test_ogbs_prints_reach_the_log_a_line_at_a_time(caplog):
    from ttgnn.data import _ogb_guards

    with caplog.at_level("INFO", logger="ttgnn.data"), _ogb_guards():
        print("Extracting", "a.zip")
        sys.stdout.write("50%\n\nno newline at the end")
    assert logged(caplog, "ttgnn.data") == ["ogb: Extracting a.zip", "ogb: 50%", "ogb: no newline at the end"]


def test_ogb_saves_into_a_new_folder_with_its_arguments_and_is_left_as_found(tmp_path, monkeypatch):
    import ogb.utils.url
    from ogb.nodeproppred import dataset as ogb_dataset

    from ttgnn.data import _ogb_guards

    saved = []

    def save(obj, f, *args, **kwargs):
        saved.append((obj, args, kwargs))
        f.write(b"saved")

    monkeypatch.setattr(torch, "save", save)
    path = tmp_path / "ogbn_x" / "processed" / "data_processed"
    with _ogb_guards():
        assert ogb_dataset.decide_download("any url") is True  # never asks
        torch.save({"graph": 1}, str(path), 4, pickle_protocol=4)  # ogb passes the pickle protocol
    assert saved == [({"graph": 1}, (4,), {"pickle_protocol": 4})]
    assert path.read_bytes() == b"saved" and sorted(path.parent.iterdir()) == [path]  # through a temporary
    assert ogb_dataset.decide_download is ogb.utils.url.decide_download  # ogb's own, put back
    assert torch.save is not saved and torch.load is torch.serialization.load


@pytest.mark.parametrize("edit, expected", [
    # ogb cut the edges to the count and truncated fractional ids, silently
    (lambda f: write_csv(f / "raw" / "num-edge-list.csv.gz", [3]), "edge.csv.gz holds 240 edges, but {f}/raw/num-edge-list.csv.gz says 3"),
    (lambda f: write_csv(f / "split" / "sales_ranking" / "train.csv.gz", [0, 1.5, 2]),
     "corrupted dataset file {f}/split/sales_ranking/train.csv.gz, line 2: [1.5] is not a list of integers"),
    (lambda f: write_csv(f / "split" / "sales_ranking" / "train.csv.gz", [[0, 3], [5, 6]]),
     "corrupted split file {f}/split/sales_ranking/train.csv.gz: 2 columns, expected one node id per line"),
    (lambda f: (f / "raw" / "num-node-list.csv.gz").unlink(), "dataset file not found: {f}/raw/num-node-list.csv.gz"),
    (lambda f: write_csv(f / "raw" / "edge.csv.gz", [[0, 1]] * 239 + [[4, 40]]),
     "corrupted dataset file {f}/raw/edge.csv.gz, line 240: edge [4, 40] names a node outside [0, 40)"),
])
def test_an_ogb_folder_is_checked_as_a_raw_folder_is_and_errors_name_its_files(tmp_path, edit, expected):
    folder = write_products_layout(tmp_path / "root")
    edit(folder)
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        load_dataset("ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert expected.format(f=folder) in str(err.value)
    assert "cache" not in str(err.value)


def test_a_root_without_the_dataset_downloads_it_and_never_reads_another_roots_mirror(tmp_path, monkeypatch,
                                                                                        caplog):
    # The mirror of root A's folder shared the download's place: root B, without the dataset, was
    # served A's 60-node graph with no word and no download.
    urls = _serve_products(monkeypatch, tmp_path)  # the download: 40 nodes
    write_products_layout(tmp_path / "a", num_nodes=60)
    (tmp_path / "b").mkdir()
    load = dict(name="ogbn-products", cache_dir=tmp_path / "cache")
    assert load_dataset(root=tmp_path / "a", **load).num_nodes == 60 and urls == []
    assert load_dataset(root=tmp_path / "b", **load).num_nodes == 40 and len(urls) == 1
    assert load_dataset(root=tmp_path / "a", **load).num_nodes == 60 and len(urls) == 1  # each kept apart
    # a mirror where downloads go (ttgnn before 2026-12-07 put them there) is removed, not read
    shutil.rmtree(tmp_path / "cache" / "ogb" / "ogbn_products")
    shutil.move(tmp_path / "cache" / "ogb" / "local" / "ogbn_products", tmp_path / "cache" / "ogb" / "ogbn_products")
    with caplog.at_level("INFO", logger="ttgnn.data"):
        assert load_dataset(root=tmp_path / "b", **load).num_nodes == 40 and len(urls) == 2
    assert (f"removing {tmp_path / 'cache' / 'ogb' / 'ogbn_products'}, a mirror of a local folder that an older ttgnn "
            "left where downloads go") in caplog.messages
    assert (tmp_path / "a" / "ogbn_products" / "raw" / "edge.csv.gz").is_file()  # the links' files untouched
    # and a root's own folder, read into ogb/local/, lets such an old mirror go (its disk space)
    old = tmp_path / "cache" / "ogb" / "ogbn_products"
    assert load_dataset(root=tmp_path / "a", **load).num_nodes == 60 and old.is_dir()  # a download: kept
    shutil.rmtree(old)
    shutil.copytree(tmp_path / "cache" / "ogb" / "local" / "ogbn_products", old, symlinks=True)
    assert load_dataset(root=tmp_path / "a", **load).num_nodes == 60 and not old.exists() and len(urls) == 2


def test_the_mirror_holds_only_what_the_source_holds(tmp_path):
    # Links of files that the source did not hold stayed: root B was read with root A's features,
    # and ogb cut B's 300 edges to A's num-edge-list.csv.gz
    a = write_products_layout(tmp_path / "a")
    write_csv(a / "raw" / "node-feat.csv.gz", [[7.0, 7.0]] * 40)
    write_csv(a / "split" / "other" / "train.csv.gz", [0])  # a second split kind, only in a
    b = write_products_layout(tmp_path / "b", seed=1, edges=[[i % 40, (i * 7 + 1) % 40] for i in range(300)])
    load = dict(name="ogbn-products", cache_dir=tmp_path / "cache")
    assert load_dataset(root=tmp_path / "a", **load).features.tolist() == [[7.0, 7.0]] * 40
    ds = load_dataset(root=tmp_path / "b", **load)
    assert ds.features is None and ds.num_edges == 600  # 300 and their reverses (ogbn-products: ogb adds them)
    mirror = tmp_path / "cache" / "ogb" / "local" / "ogbn_products"
    assert sorted(p.name for p in (mirror / "raw").iterdir()) == sorted(p.name for p in (b / "raw").iterdir())
    assert not (mirror / "split" / "other").exists()
    (b / "raw" / "num-edge-list.csv.gz").unlink()  # optional in a raw folder; ogb's reader needs it
    assert raised(FileNotFoundError, load_dataset, root=tmp_path / "b", **load) == (
        f"dataset file not found: {b / 'raw' / 'num-edge-list.csv.gz'} (ogb, which reads ogbn-products, needs it: "
        "one line, the number of edges)")


@pytest.mark.parametrize("rows,message", [
    ([[1.0, 2.0]] * 3 + [[float("nan"), 2.0]] + [[1.0, 2.0]] * 36,
     ": line 4 holds a value that is not a finite float32 number (NaN, inf, empty or beyond 3.4e38)"),
    ([[1.0, 2.0]] * 39, ": 39 rows of features for 40 nodes"),
])
def test_features_of_a_folder_ogb_reads_are_checked_as_a_raw_folders(tmp_path, rows, message):
    # ogb took them on trust: NaN features were served, and a short file failed in NodeDataset
    # without naming it
    folder = write_products_layout(tmp_path / "root")
    write_csv(folder / "raw" / "node-feat.csv.gz", rows)
    assert raised(ValueError, load_dataset, "ogbn-products", tmp_path / "root", tmp_path / "cache") == (
        f"corrupted dataset file {folder / 'raw' / 'node-feat.csv.gz'}" + message)


def test_a_file_ogb_misses_is_named_in_the_users_folder_not_in_the_cache_mirror(tmp_path, monkeypatch):
    # a missing raw/node_year.csv.gz of an ogbn_arxiv folder was named in the cache's mirror of the folder
    import ogb.nodeproppred

    folder = write_products_layout(tmp_path / "root")

    def misses_a_file(name, root):
        missing = Path(root) / "ogbn_products" / "raw" / "node_year.csv.gz"
        raise FileNotFoundError(2, "No such file or directory", str(missing))

    monkeypatch.setattr(ogb.nodeproppred, "NodePropPredDataset", misses_a_file)
    message = raised(ValueError, load_dataset, name="ogbn-products", root=tmp_path / "root", cache_dir=tmp_path / "cache")
    assert message == (f"ogb could not load ogbn-products from {folder}: FileNotFoundError: [Errno 2] No such file or "
                       f"directory: '{folder / 'raw' / 'node_year.csv.gz'}'")
