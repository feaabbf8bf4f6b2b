"""Tests of ttgnn.train and ``ttgnn train``: real graphs, resume, checkpoints, errors, examples."""
import dataclasses
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ttgnn.cli import main
from ttgnn.data import planted_partition
import ttgnn.train as ttrain
from ttgnn.train import (BEST_MODEL_NAME, CHECKPOINT_NAME, METRICS_NAME, TrainConfig, TrainingInterrupted,
                         load_checkpoint, train)

from configs import small_config

REPO = Path(__file__).resolve().parents[1]


def _metrics(out: Path) -> dict:
    return json.loads((out / METRICS_NAME).read_text())


def _cli(args, tmp_path, data_root) -> dict:
    out = tmp_path / "run"
    code = main(["train", "--root", str(data_root), "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out),
                 "--no-progress", "--num-threads", "2", *args])
    assert code == 0
    return _metrics(out)


@pytest.mark.data
@pytest.mark.parametrize("dataset,model,embedding,epochs,min_test", [
    # Thresholds: the measured test accuracy (cora 0.571, citeseer 0.456, pubmed 0.373; deterministic
    # for a seed on one platform) minus a margin. Chance: 1/7 (cora, majority class 0.319), 1/6
    # (citeseer, majority 0.231), 1/3 (pubmed, majority 0.413). Featureless pubmed (60 labels) learns
    # slowly: in 10 epochs it checks that loading and training work. GAT on citeseer has label input
    # with 3 reuse rounds by default (few labels), and the loss on half the training nodes per epoch:
    # 0.385 after 10 epochs, 0.456 after 20.
    ("cora", "sage", "tt", 30, 0.50),
    ("citeseer", "gat", "full", 20, 0.40),
    ("pubmed", "sage", "tt", 10, 0.34),
])
def test_cli_trains_planetoid(data_root, tmp_path, dataset, model, embedding, epochs, min_test):
    m = _cli(["--dataset", dataset, "--model", model, "--embedding", embedding, "--order", "hierarchical-metis",
              "--epochs", str(epochs), "--hidden", "64", "--num-layers", "2", "--norm", "none", "--dropout", "0.5",
              "--weight-decay", "5e-4", "--heads", "2", "--init-scale", "0.02", "--lr", "0.01", "--emb-lr", "0.01",
              "--no-from-full"], tmp_path, data_root)
    assert m["dataset"] == dataset and m["model"] == model and m["embedding"] == embedding
    assert len(m["epochs"]) == epochs
    assert m["test_acc"] >= min_test
    best = max(m["epochs"], key=lambda r: r["valid_acc"])
    assert m["best_valid_acc"] == best["valid_acc"] and m["test_acc"] == best["test_acc"]
    if embedding == "tt":
        assert m["compression_ratio"] > 10


@pytest.mark.data
def test_cli_trains_arxiv_full_graph(data_root, tmp_path):
    m = _cli(["--dataset", "ogbn-arxiv", "--model", "sage", "--embedding", "tt", "--rank", "8",
              "--row-shape", "55,55,56", "--col-shape", "8,4,4", "--epochs", "3", "--hidden", "64",
              "--num-layers", "2", "--no-correct-smooth"], tmp_path, data_root)
    assert m["compression_ratio"] == pytest.approx(169_343 * 128 / 19_392, rel=1e-6)
    assert m["order"] == "hierarchical-kaminpar" and m["rank"] == 8
    # measured 0.60 test; chance (the largest class) is below 0.07 on the test split
    assert m["test_acc"] > 0.4 and len(m["epochs"]) == 3
    # 54% of arxiv's nodes are training nodes: label input is on by default
    assert m["label_input"] is True and m["settings"]["label_input"] is True
    # Correct and Smooth's tuning on arxiv takes 75 s here (12 propagations of 50 steps): it is checked
    # on arxiv by test_smoothing.py's label propagation and wired into runs by the planted-graph tests
    assert "correct_smooth" not in m


_tiny_config = functools.partial(small_config, epochs=4, mode="minibatch")


@pytest.mark.parametrize("model,mode,labels,reuse,schedule,edge_dropout,average", [
    ("sage", "minibatch", False, 0, "constant", 0.0, 0), ("gat", "full", False, 0, "constant", 0.3, 0),
    ("sage", "minibatch", True, 0, "cosine", 0.0, 2), ("gat", "full", True, 1, "constant", 0.0, 3),
    ("sage", "full", False, 0, "cosine", 0.3, 0)])
def test_resume_matches_uninterrupted(tmp_path, planted, monkeypatch, model, mode, labels, reuse, schedule,
                                      edge_dropout, average):
    kw = dict(model=model, mode=mode, label_input=labels, label_reuse=reuse, lr_schedule=schedule,
              edge_dropout=edge_dropout, weight_average=average)
    whole = train(_tiny_config(tmp_path / "whole", **kw), planted)
    # The same 4-epoch run, stopped (Ctrl-C) in epoch 3: the cosine follows --epochs, so the first
    # half is not a 2-epoch run.
    real_epoch = ttrain.train_epoch

    def interrupted(run, epoch, **kwargs):
        if epoch == 3:
            raise KeyboardInterrupt
        return real_epoch(run, epoch, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "train_epoch", interrupted)
        with pytest.raises(TrainingInterrupted):
            train(_tiny_config(tmp_path / "split", **kw), planted)
    resumed = train(_tiny_config(tmp_path / "split", resume=True, **kw), planted)
    assert [r["epoch"] for r in resumed["epochs"]] == [1, 2, 3, 4]
    for key in ("loss", "train_acc", "valid_acc", "test_acc") + (("raw_valid_acc",) if average else ()):
        assert [r[key] for r in resumed["epochs"]] == [r[key] for r in whole["epochs"]], key
    assert resumed["test_acc"] == whole["test_acc"] and resumed["best_valid_acc"] == whole["best_valid_acc"]
    a = load_checkpoint(tmp_path / "whole" / CHECKPOINT_NAME)
    b = load_checkpoint(tmp_path / "split" / CHECKPOINT_NAME)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    if average:  # the weight average came through the interruption
        assert a["weight_average"]["updates"] == b["weight_average"]["updates"] == 4
        for key, value in a["weight_average"]["state"].items():
            assert torch.equal(value, b["weight_average"]["state"][key]), key


def test_train_gives_back_the_callers_thread_count(tmp_path, planted):
    # num_threads is the run's: a notebook calling train() kept the run's count for everything after it
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        train(_tiny_config(tmp_path / "ok", epochs=1, mode="full", num_threads=1), planted)
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="has no training nodes"):  # a run that fails in setup, too
            empty = dataclasses.replace(planted, split={**planted.split, "train": planted.split["train"][:0]})
            train(_tiny_config(tmp_path / "bad", epochs=1, mode="full", num_threads=1), empty)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_best_model_and_correct_smooth(tmp_path, planted):
    m = train(_tiny_config(tmp_path, epochs=6, mode="full", lr=0.02, emb_lr=0.05), planted)
    best = load_checkpoint(tmp_path / BEST_MODEL_NAME)
    assert best["epoch"] == m["best_epoch"]
    assert m["best_valid_acc"] == max(r["valid_acc"] for r in m["epochs"])
    cs = m["correct_smooth"]
    assert cs["epoch"] == m["best_epoch"] and set(cs) >= {"valid_acc", "test_acc", "correct_alpha", "smooth_alpha"}
    # C&S is applied to the saved best model: recomputing it from best_model.pt gives the same figures
    from ttgnn.train import build_classifier, correct_and_smooth_metrics

    config = _tiny_config(tmp_path, mode="full")
    model = build_classifier(config, planted)
    model.load_state_dict(best["model"])
    again = correct_and_smooth_metrics(model, planted.dgl_graph(), planted, "full")
    assert (again["valid_acc"], again["test_acc"]) == (cs["valid_acc"], cs["test_acc"])
    # ... and from the model's logits given by the caller (one pass less)
    from ttgnn.evaluation import all_logits

    given = correct_and_smooth_metrics(model, None, planted, "full",
                                       logits=all_logits(model, planted.dgl_graph(), "full", 8192, planted))
    assert (given["valid_acc"], given["test_acc"]) == (cs["valid_acc"], cs["test_acc"])
    assert cs["test_acc"] > 0.6  # 4 classes with homophily 0.9: chance 0.25
    # off by flag; resuming a finished run keeps the best epoch's weights
    off = train(_tiny_config(tmp_path / "off", epochs=2, mode="full", correct_smooth=False), planted)
    assert "correct_smooth" not in off
    resumed = train(_tiny_config(tmp_path, epochs=6, mode="full", lr=0.02, emb_lr=0.05, resume=True), planted)
    assert resumed["correct_smooth"] == dict(cs, seconds=resumed["correct_smooth"]["seconds"])


def test_planted_partition_learns(tmp_path, planted):
    m = train(_tiny_config(tmp_path, epochs=15, mode="full", embedding="full", order="identity", lr=0.02,
                           emb_lr=0.05), planted)
    assert m["test_acc"] > 0.6  # 4 classes: chance 0.25
    assert m["compression_ratio"] == 1.0 and (tmp_path / CHECKPOINT_NAME).is_file()


def test_corrupted_checkpoint_is_a_clear_error(tmp_path, planted):
    train(_tiny_config(tmp_path, epochs=1), planted)
    ckpt = tmp_path / CHECKPOINT_NAME
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="corrupted checkpoint"):
        train(_tiny_config(tmp_path, resume=True), planted)
    ckpt.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a checkpoint: torch.save writes"):
        load_checkpoint(ckpt)


def test_resume_refuses_other_settings(tmp_path, planted):
    train(_tiny_config(tmp_path, epochs=1), planted)
    with pytest.raises(ValueError, match="model"):
        train(_tiny_config(tmp_path, model="gat", resume=True), planted)


@pytest.mark.parametrize("change,message", [
    ({"lr": 0.05}, "written with lr=0.01, this run has lr=0.05"),
    ({"dropout": 0.1}, "dropout="),
    ({"label_smoothing": 0.1}, "label_smoothing=0.0, this run has label_smoothing=0.1"),
    ({"fanouts": [7, 7]}, "fanouts="),  # minibatch: the sampled neighbourhoods
])
def test_resume_refuses_a_changed_training_setting(tmp_path, planted, change, message):
    # a resume that changed how epochs update the model would mix two runs under one record
    train(_tiny_config(tmp_path, epochs=1, lr=0.01, correct_smooth=False), planted)
    with pytest.raises(ValueError, match=message):
        train(_tiny_config(tmp_path, epochs=2, resume=True, correct_smooth=False, **{"lr": 0.01, **change}), planted)


def test_resume_accepts_what_does_not_change_the_updates(tmp_path, planted):
    first = small_config(tmp_path, epochs=1, lr=0.01, correct_smooth=False, mode="full", fanouts=(5, 5),
                         batch_size=64)
    train(first, planted)
    # more epochs; fan-outs and batch size unused in full-graph training; a list for a tuple
    again = dataclasses.replace(first, epochs=2, resume=True, fanouts=[9, 9], batch_size=32)
    assert len(train(again, planted)["epochs"]) == 2


def test_resume_of_a_scheduled_run_refuses_other_epochs(tmp_path, planted):
    # the cosine schedule spans --epochs: resuming with more would change the rates already used
    train(_tiny_config(tmp_path, epochs=2, lr_schedule="cosine", correct_smooth=False), planted)
    with pytest.raises(ValueError, match="written with epochs=2, this run has epochs=3"):
        train(_tiny_config(tmp_path, epochs=3, lr_schedule="cosine", resume=True, correct_smooth=False), planted)


def test_cli_reports_bad_dataset(tmp_path, capsys):
    code = main(["train", "--dataset", "nonexistent", "--root", str(tmp_path), "--no-progress"])
    assert code == 2
    assert "nonexistent" in capsys.readouterr().err


def test_split_known_is_a_seeded_partition_of_the_training_nodes():
    from ttgnn.train import known_labels, split_known

    nodes = torch.arange(1000, 3000)
    known, target = split_known(nodes, 0.5, seed=3, epoch=7)
    assert sorted(torch.cat([known, target]).tolist()) == nodes.tolist()  # disjoint, covering
    assert 900 < known.numel() < 1100
    again, _ = split_known(nodes, 0.5, seed=3, epoch=7)
    assert torch.equal(known, again)
    assert not torch.equal(split_known(nodes, 0.5, seed=3, epoch=8)[0][:50], known[:50])
    assert split_known(nodes, 0.2, seed=3, epoch=7)[0].numel() < 500
    ds = planted_partition(50, num_classes=3, seed=0)
    ids = known_labels(ds, torch.tensor([1, 4]))
    assert ids.shape == (50,) and ids[1] == ds.labels[1] and ids[4] == ds.labels[4]
    assert (ids[[0, 2, 3]] == 3).all() and (ids == 3).sum() == 48


@pytest.mark.parametrize("mode,reuse", [("full", 0), ("minibatch", 0), ("full", 1), ("minibatch", 2)])
def test_label_input_never_uses_validation_or_test_labels(tmp_path, planted, mode, reuse):
    # Scrambling the validation and test labels changes nothing the model learns or predicts:
    # no such label is ever an input, in training or in evaluation (with label reuse, the model's
    # predictions of those nodes are).
    import dataclasses

    from ttgnn.evaluation import all_logits
    from ttgnn.train import build_classifier

    labels = planted.labels.clone()
    hidden = torch.cat([planted.split["valid"], planted.split["test"]])
    labels[hidden] = (labels[hidden] + 1) % planted.num_classes
    scrambled = dataclasses.replace(planted, labels=labels)
    kw = dict(mode=mode, label_input=True, label_reuse=reuse, epochs=3, correct_smooth=False)
    a = train(_tiny_config(tmp_path / "a", **kw), planted)
    b = train(_tiny_config(tmp_path / "b", **kw), scrambled)
    assert [r["loss"] for r in a["epochs"]] == [r["loss"] for r in b["epochs"]]
    assert [r["train_acc"] for r in a["epochs"]] == [r["train_acc"] for r in b["epochs"]]
    state_a = load_checkpoint(tmp_path / "a" / CHECKPOINT_NAME)["model"]
    state_b = load_checkpoint(tmp_path / "b" / CHECKPOINT_NAME)["model"]
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key
    model = build_classifier(_tiny_config(tmp_path / "a", **kw), planted)
    model.load_state_dict(state_a)
    graph = planted.dgl_graph(self_loops=True)
    # (layer-wise inference differs between two identical calls at float32 rounding, ~2e-6;
    # a label input would move logits by O(1))
    torch.testing.assert_close(all_logits(model, graph, mode, 128, planted),
                               all_logits(model, graph, mode, 128, scrambled), rtol=1e-5, atol=1e-5)
    # the per-class table is counted with the GNN's parameters; the embedding's count is the TT's
    label_params = (planted.num_classes + 1) * 16
    assert model.label_input.table.weight.numel() == label_params
    assert a["label_input"] is True
    assert a["gnn_parameters"] == sum(p.numel() for p in model.gnn.parameters()) + label_params
    assert a["embedding_parameters"] == model.node_input.num_parameters


def test_config_validation():
    with pytest.raises(ValueError, match="label_rate"):
        TrainConfig(label_rate=1.0).validate()
    with pytest.raises(ValueError, match="fan-out"):
        TrainConfig(mode="minibatch", num_layers=3, fanouts=[5, 5]).validate()
    with pytest.raises(ValueError, match="order"):
        TrainConfig(order="spectral").validate()


@pytest.mark.data
@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "examples").glob("train_*.py")))
def test_examples_run_tiny(data_root, tmp_path, script):
    env = dict(os.environ, TTGNN_DATA=str(data_root), TTGNN_CACHE=str(tmp_path / "cache"))
    # one epoch, not --tiny's two: the smoke run's second epoch adds 11 s on arxiv and checks nothing more
    proc = subprocess.run([sys.executable, str(REPO / "examples" / script), "--tiny", "--epochs", "1", "--output-dir",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = _metrics(tmp_path / "out")
    assert len(m["epochs"]) == 1 and 0.0 <= m["test_acc"] <= 1.0


def test_tiny_keeps_the_options_given_with_it_and_names_those_it_replaces(tmp_path, caplog):
    # --tiny --epochs 5 trained 1 epoch (and --tiny --epochs 3 --resume trained nothing), silently
    import argparse
    import logging

    from ttgnn.cli import explicit_options, script_parser, small_run

    parser = script_parser("x", TrainConfig(dataset="ogbn-products", epochs=20))
    parser.add_argument("--tiny", action="store_true")
    given = explicit_options(parser, ["--tiny", "--epo", "5", "--hidden=64", "--no-progress", "--dataset", "d"])
    assert given == {"tiny", "epochs", "hidden", "progress", "dataset"}
    assert explicit_options(parser, ["--epochs", "20"]) == {"epochs"}  # a default typed out is given too
    config = TrainConfig(dataset="d", epochs=5, hidden=64)
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        small = small_run(config, given, forced=("dataset",), dataset="planted-5000", epochs=1, hidden=32, dim=32)
    assert (small.dataset, small.epochs, small.hidden, small.dim) == ("planted-5000", 5, 64, 32)
    assert caplog.messages == ["--tiny: --dataset not read (the smoke run sets it itself)"]
    assert small_run(config, set(), epochs=1).epochs == 1 and config.epochs == 5  # a copy
    # the smoke run took the script's own folder: the real run after it was refused ("already holds a run"),
    # and so was a second smoke run
    script = TrainConfig(dataset="d", output_dir="runs/arxiv/")
    assert (small_run(script, {"tiny"}).output_dir, small_run(script, {"tiny"}).overwrite) == ("runs/arxiv-tiny", True)
    resumed = small_run(script, {"tiny", "resume"})
    assert (resumed.output_dir, resumed.overwrite) == ("runs/arxiv-tiny", False)
    assert small_run(script, {"tiny", "output_dir"}).output_dir == "runs/arxiv/"  # given: as given
    assert small_run(TrainConfig(dataset="d"), {"tiny"}).output_dir is None
    with pytest.raises(SystemExit):
        explicit_options(argparse.ArgumentParser(), ["--nope"])


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "examples").glob("*train*.py")))
def test_every_training_example_takes_the_run_options_of_ttgnn_train(script, run_main, monkeypatch):
    # --device and --dist-timeout were missing from three of them: they could not train on a GPU
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_main(f"examples/{script}", "--help")
    assert code == 0 and "--device {cpu,cuda,auto}" in out and "--dist-timeout" in out
    code, out, err = run_main(f"examples/{script}", "--tiny", "--dist-timeout", "0")
    assert code == 2 and err.strip().splitlines()[-1] == (
        f"{script}: error: --dist-timeout must be a number of minutes in (0, 1e+06], got 0.0"), err


@pytest.mark.data
def test_a_tiny_example_run_keeps_the_epochs_it_is_given(data_root, tmp_path):
    env = dict(os.environ, TTGNN_DATA=str(data_root), TTGNN_CACHE=str(tmp_path / "cache"))
    command = [sys.executable, str(REPO / "examples" / "train_products.py"), "--tiny", "--epochs", "2", "--output-dir",
               str(tmp_path / "out")]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["epoch"] for r in _metrics(tmp_path / "out")["epochs"]] == [1, 2]
    proc = subprocess.run([*command[:-4], "--epochs", "3", "--resume", *command[-2:]], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["epoch"] for r in _metrics(tmp_path / "out")["epochs"]] == [1, 2, 3]


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "examples").glob("*train*.py")))
def test_examples_report_a_user_error_in_one_line(tmp_path, script, run_main):
    # as `ttgnn train` does: one line naming the problem, exit code 2, no traceback
    code, out, err = run_main(f"examples/{script}", "--root", str(tmp_path / "missing"), "--output-dir",
                              str(tmp_path / "out"))
    lines = err.strip().splitlines()
    assert code == 2 and lines[-1].startswith(f"{script}: error: dataset root not found: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize("embedding,vectors", [("tt", None), ("full", None), ("tt", 4)])
def test_spectral_init_starts_from_the_eigenvector_table(tmp_path, planted, embedding, vectors):
    from ttgnn.spectral import spectral_table
    from ttgnn.train import build_classifier

    # rank 64 is full rank for this shape: the TT table equals the eigenvector table
    config = _tiny_config(tmp_path, embedding=embedding, init="spectral", init_scale=0.1, rank=64,
                          order="hierarchical-metis", cache_dir=str(tmp_path / "cache"), spectral_vectors=vectors)
    model = build_classifier(config, planted)
    expected = spectral_table(*planted.csr(), planted.num_nodes, 16, std=0.1, vectors=vectors)
    assert bool(expected[:, 4:].any()) == (vectors is None)
    torch.testing.assert_close(model.node_input(None).detach(), expected, rtol=1e-4, atol=1e-5)
    assert list((tmp_path / "cache").glob("spectral-*.npz"))  # cached like node orders
    m = train(dataclasses_replace(config, epochs=2), planted)
    assert m["settings"]["init"] == "spectral" and len(m["epochs"]) == 2


def dataclasses_replace(config, **kw):
    import dataclasses

    return dataclasses.replace(config, **kw)


def test_rank_from_a_compression_budget(tmp_path, planted):
    m = train(_tiny_config(tmp_path, rank=None, compression=20.0, epochs=1, correct_smooth=False), planted)
    from ttgnn.shapes import TTShape

    assert m["compression_ratio"] >= 20.0
    assert TTShape.build(400, 16, m["rank"] + 1).compression_ratio < 20.0  # the largest rank that fits
    with pytest.raises(ValueError, match="at most one of compression and max_params"):
        TrainConfig(compression=10.0, max_params=100).validate()
    for budget in (dict(compression=10.0), dict(max_params=100)):  # a rank and a budget: which one?
        with pytest.raises(ValueError, match=f"rank=4 and {next(iter(budget))} both size the TT table"):
            TrainConfig(rank=4, **budget).validate()


def test_a_run_that_names_no_rank_keeps_the_table_compressed(tmp_path, planted, caplog):
    import logging

    from ttgnn.config import AUTO_MIN_COMPRESSION, AUTO_RANK

    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        m = train(_tiny_config(tmp_path / "auto", rank=None, dim=128, epochs=1, correct_smooth=False), planted)
    # 400 nodes x 128, half of them training nodes: rank 8 would compress the table 12x; rank 2 168x, rank 3 93x
    assert m["rank"] == m["settings"]["rank"] == 2 and m["compression_ratio"] >= AUTO_MIN_COMPRESSION
    assert (f"TT rank 2: the largest that compresses the table at least 100x (rank {AUTO_RANK} otherwise; --rank "
            "to choose)" in [r.getMessage() for r in caplog.records])
    # resuming with the default settles the same way; the rank is a resume key
    resumed = train(_tiny_config(tmp_path / "auto", rank=None, dim=128, epochs=2, resume=True,
                                 correct_smooth=False), planted)
    assert resumed["epochs"][:1] == m["epochs"] and resumed["settings"]["rank"] == 2
    with pytest.raises(ValueError, match="written with rank=2, this run has rank=3"):
        train(_tiny_config(tmp_path / "auto", rank=3, dim=128, epochs=3, resume=True, correct_smooth=False), planted)
    # a rank given is kept, even under the floor; a full table has no rank
    named = train(_tiny_config(tmp_path / "named", rank=3, dim=128, epochs=1, correct_smooth=False), planted)
    full = train(_tiny_config(tmp_path / "full", rank=None, embedding="full", epochs=1, correct_smooth=False), planted)
    assert named["rank"] == 3 and named["compression_ratio"] < AUTO_MIN_COMPRESSION and full["rank"] is None
    # few labels (5% training nodes): rank 4, logged with the reason
    from ttgnn.data import planted_partition

    sparse = planted_partition(3000, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        few = train(_tiny_config(None, rank=None, dim=64, epochs=1, correct_smooth=False, init="gaussian"), sparse)
    assert few["rank"] == 4
    assert ("TT rank 4: training nodes are 5.0% of the graph, under 10% (rank 8 otherwise; --rank to choose)"
            in [r.getMessage() for r in caplog.records])


@pytest.mark.parametrize("progress", [True, False])
def test_the_node_order_shows_progress_when_the_run_does(planted, monkeypatch, progress):
    # on a 10^8-node graph the order takes about an hour: before, training gave it no bar
    import ttgnn.partition

    asked = []
    real = ttgnn.partition.hierarchical_order

    def spy(*args, **kw):
        asked.append(kw.get("progress"))
        return real(*args, **kw)

    monkeypatch.setattr(ttgnn.partition, "hierarchical_order", spy)
    train(_tiny_config(None, epochs=1, correct_smooth=False, order="hierarchical-metis", progress=progress), planted)
    assert asked == [progress]


def test_a_tt_table_larger_than_the_full_one_is_warned_of(tmp_path, planted, caplog):
    import logging

    def warnings_of(**kw):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ttgnn.train"):
            m = train(_tiny_config(None, epochs=1, correct_smooth=False, **kw), planted)
        return m, [r.getMessage() for r in caplog.records if "more parameters" in r.getMessage()]

    big, said = warnings_of(rank=64, dim=16)  # 400 x 16: 6,400 entries
    assert big["compression_ratio"] < 1.0 and said == [
        f"the TT table has more parameters ({big['embedding_parameters']:,}) than a full 400 x 16 table (6,400): "
        "lower --rank (or give --compression) for a smaller one, or use --embedding full"]
    small, said = warnings_of(rank=2, dim=16)
    assert small["compression_ratio"] > 1.0 and said == []
    full, said = warnings_of(rank=None, embedding="full", dim=16)
    assert said == []


def test_label_reuse_is_decided_by_the_model_and_kept_on_resume(tmp_path, planted, monkeypatch, caplog):
    import logging

    import ttgnn.config as tconfig

    kw = dict(model="gat", mode="full", label_input=None, epochs=2, correct_smooth=False)
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        gat = train(_tiny_config(tmp_path / "gat", **kw), planted)
    assert gat["label_input"] is True and gat["settings"]["label_reuse"] == 1
    assert ("label reuse: 1 round(s) for gat with label input in full-graph mode (--label-reuse 0 to turn it off)"
            in [r.getMessage() for r in caplog.records])
    # the same run with one round given explicitly is the same run
    explicit = train(_tiny_config(tmp_path / "explicit", **dict(kw, label_reuse=1)), planted)
    assert [e["valid_acc"] for e in explicit["epochs"]] == [e["valid_acc"] for e in gat["epochs"]]
    # resuming with the default decides the same way; an explicit other count is refused
    resumed = train(_tiny_config(tmp_path / "gat", **dict(kw, epochs=3, resume=True)), planted)
    assert len(resumed["epochs"]) == 3 and resumed["settings"]["label_reuse"] == 1
    with pytest.raises(ValueError, match="written with label_reuse=1, this run has label_reuse=0"):
        train(_tiny_config(tmp_path / "gat", **dict(kw, epochs=4, resume=True, label_reuse=0)), planted)
    # off for GraphSAGE, without label input, and in mini-batch mode, also where evaluation is sampled
    # (no error there: nothing was asked for)
    sage = train(_tiny_config(tmp_path / "sage", **dict(kw, model="sage")), planted)
    no_labels = train(_tiny_config(tmp_path / "nolabels", **dict(kw, label_input=False)), planted)
    minibatch = train(_tiny_config(tmp_path / "minibatch", **dict(kw, mode="minibatch")), planted)
    assert [m["settings"]["label_reuse"] for m in (sage, no_labels, minibatch)] == [0, 0, 0]
    monkeypatch.setattr(tconfig, "SAMPLED_EVAL_MIN_NODES", planted.num_nodes - 1)  # planted counts as large
    sampled = train(_tiny_config(tmp_path / "sampled", **dict(kw, mode="minibatch")), planted)
    assert sampled["eval_fanouts"] == [5, 5] and sampled["settings"]["label_reuse"] == 0


def test_the_model_is_decided_by_the_mode_and_kept_on_resume(tmp_path, planted, caplog):
    import logging

    kw = dict(model="auto", label_input=None, epochs=2, correct_smooth=False)
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        full = train(_tiny_config(tmp_path / "full", **dict(kw, mode="full")), planted)
    assert full["model"] == full["settings"]["model"] == "gat"
    assert "model gat: the default for full-graph training (--model sage or gat to choose)" in caplog.text
    assert "model: gat / tt embedding (" in caplog.text  # the summary line names the settled model, not "auto"
    assert full["settings"]["label_reuse"] == 1  # GAT's rounds follow from the settled model
    # the same run as naming GAT
    named = train(_tiny_config(tmp_path / "named", **dict(kw, mode="full", model="gat")), planted)
    assert [e["valid_acc"] for e in named["epochs"]] == [e["valid_acc"] for e in full["epochs"]]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        minibatch = train(_tiny_config(tmp_path / "minibatch", **kw), planted)
    assert minibatch["model"] == "sage" and "model sage: the default for mini-batch training" in caplog.text
    # an explicit model is kept, and not logged as a decision
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        sage = train(_tiny_config(tmp_path / "sage", **dict(kw, mode="full", model="sage")), planted)
    assert sage["model"] == "sage" and "the default for" not in caplog.text
    # resuming with the default decides the same way; a checkpoint of another model is refused with a hint
    resumed = train(_tiny_config(tmp_path / "full", **dict(kw, mode="full", epochs=3, resume=True)), planted)
    assert resumed["model"] == "gat" and resumed["epochs"][:2] == full["epochs"]
    with pytest.raises(ValueError, match="written with model='sage', this run has model='gat'"):
        train(_tiny_config(tmp_path / "sage", **dict(kw, mode="full", epochs=3, resume=True)), planted)


def test_label_input_is_decided_by_the_graph_and_kept_on_resume(tmp_path, planted, caplog):
    # planted: half the nodes are training nodes -> on; a 5% training split -> off
    import logging

    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        dense = train(_tiny_config(tmp_path / "dense", label_input=None, epochs=2, correct_smooth=False), planted)
    assert dense["label_input"] is True and dense["settings"]["label_input"] is True
    assert ("label input on: training nodes are 50.0% of the graph (on from 10%; --label-input or "
            "--no-label-input to choose)") in [r.getMessage() for r in caplog.records]
    sparse_graph = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        sparse = train(_tiny_config(tmp_path / "sparse", label_input=None, epochs=2, correct_smooth=False),
                       sparse_graph)
    assert sparse["label_input"] is False
    assert ("label input off: training nodes are 5.0% of the graph (on from 10%; --label-input or "
            "--no-label-input to choose)") in [r.getMessage() for r in caplog.records]
    # the table init follows the same share: gaussian with many labels, 8 eigenvectors with few
    assert (dense["settings"]["init"], dense["settings"]["spectral_vectors"]) == ("gaussian", None)
    assert (sparse["settings"]["init"], sparse["settings"]["spectral_vectors"]) == ("spectral", 8)
    assert ("table init gaussian: training nodes are 50.0% of the graph, 400 nodes (spectral below 10% on graphs "
            "of at most 1,000,000 nodes") in caplog.text
    assert "table init spectral (8 eigenvectors): training nodes are 5.0% of the graph" in caplog.text
    # resuming with the default decides the same way, so the checkpoint's setting matches
    resumed = train(_tiny_config(tmp_path / "dense", label_input=None, epochs=3, correct_smooth=False, resume=True),
                    planted)
    assert resumed["label_input"] is True and len(resumed["epochs"]) == 3
    assert resumed["settings"]["init"] == "gaussian"
    assert resumed["epochs"][:2] == dense["epochs"][:2]
    with pytest.raises(ValueError, match="label_input"):  # an explicit other choice is refused, as before
        train(_tiny_config(tmp_path / "dense", label_input=False, epochs=4, correct_smooth=False, resume=True),
              planted)
    with pytest.raises(ValueError, match="written with label_reuse=0, this run has label_reuse=1"):
        train(_tiny_config(tmp_path / "dense", label_input=None, label_reuse=1, epochs=4, correct_smooth=False,
                           resume=True), planted)
    # label reuse feeds predictions back as label input: it turns label input on where the rule would not
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        reuse = train(_tiny_config(tmp_path / "reuse", label_input=None, label_reuse=1, epochs=2,
                                   correct_smooth=False), sparse_graph)
    assert reuse["label_input"] is True and reuse["settings"]["label_reuse"] == 1
    assert "label input on: label reuse (1 rounds) needs it" in [r.getMessage() for r in caplog.records]
    assert "label input off" not in caplog.text


def test_few_labels_give_gat_in_full_graph_training_label_input_with_three_reuse_rounds(tmp_path, caplog):
    import logging

    sparse_graph = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    kw = dict(model="auto", mode="full", label_input=None, epochs=2, correct_smooth=False, from_full=False)
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        gat = train(_tiny_config(tmp_path / "gat", **kw), sparse_graph)
    assert gat["model"] == "gat" and gat["label_input"] is True and gat["settings"]["label_reuse"] == 3
    assert gat["settings"]["label_spread"] == 10  # and 10 label spreading steps
    lines = [r.getMessage() for r in caplog.records]
    assert ("label input on: training nodes are 5.0% of the graph, under 10%, but gat's label reuse in full-graph "
            "training spreads the few labels (--no-label-input to turn it off)") in lines
    assert ("label reuse: 3 round(s) for gat with label input in full-graph mode (--label-reuse 0 to turn it off)"
            in lines)
    assert ("label spreading: 10 steps with label input in full-graph mode: the nodes without a known label start "
            "from the known labels around them (--label-spread 0 to turn it off)") in lines
    # GraphSAGE (no reuse), reuse turned off, or label input turned off: the share of training nodes decides (off)
    sage = train(_tiny_config(tmp_path / "sage", **dict(kw, model="sage")), sparse_graph)
    no_reuse = train(_tiny_config(tmp_path / "no-reuse", **dict(kw, label_reuse=0)), sparse_graph)
    no_labels = train(_tiny_config(tmp_path / "no-labels", **dict(kw, label_input=False)), sparse_graph)
    assert [(m["label_input"], m["settings"]["label_reuse"], m["settings"]["label_spread"])
            for m in (sage, no_reuse, no_labels)] == [(False, 0, 0)] * 3
    # spreading turned off alone keeps label input and reuse; an explicit spread turns label input on
    no_spread = train(_tiny_config(tmp_path / "no-spread", **dict(kw, label_spread=0)), sparse_graph)
    assert (no_spread["label_input"], no_spread["settings"]["label_reuse"], no_spread["settings"]["label_spread"]) == (
        True, 3, 0)
    assert no_spread["epochs"][0]["loss"] != gat["epochs"][0]["loss"]  # the inputs of the first step differ
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        sage_spread = train(_tiny_config(tmp_path / "sage-spread", **dict(kw, model="sage", label_spread=2)),
                            sparse_graph)
    assert (sage_spread["label_input"], sage_spread["settings"]["label_spread"]) == (True, 2)
    assert "label input on: label spreading (2 steps) needs it" in [r.getMessage() for r in caplog.records]
    # resuming with the defaults settles the same way
    resumed = train(_tiny_config(tmp_path / "gat", **dict(kw, epochs=3, resume=True)), sparse_graph)
    assert resumed["settings"]["label_reuse"] == 3 and resumed["epochs"][:2] == gat["epochs"]
    assert resumed["settings"]["label_spread"] == 10
    with pytest.raises(ValueError, match="written with label_spread=10, this run has label_spread=0"):
        train(_tiny_config(tmp_path / "gat", **dict(kw, epochs=4, resume=True, label_spread=0)), sparse_graph)
    # a checkpoint from before label spreading existed (no such key) had none: the default's 10 steps
    # are refused on resume instead of changing the run's inputs silently
    from ttgnn.checkpoint import load_checkpoint
    from ttgnn.fileio import atomic_torch_save

    old_path = tmp_path / "no-spread" / CHECKPOINT_NAME
    state = load_checkpoint(old_path)
    del state["settings"]["label_spread"]
    atomic_torch_save(state, old_path)
    with pytest.raises(ValueError, match="written with label_spread=0, this run has label_spread=10"):
        train(_tiny_config(tmp_path / "no-spread", **dict(kw, epochs=3, resume=True)), sparse_graph)
    continued = train(_tiny_config(tmp_path / "no-spread", **dict(kw, epochs=3, resume=True, label_spread=0)),
                      sparse_graph)
    assert continued["epochs"][:2] == no_spread["epochs"] and len(continued["epochs"]) == 3


def test_a_row_shape_far_above_the_nodes_is_warned_about_and_the_rank_rule_says_why_it_gives_rank_1(caplog):
    # --row-shape 1000,1000 on Cora's 2,708 nodes ran 6 minutes (the spectral start's TT-SVD of a 10^6-row
    # table) without a word, and the log said rank 1 was "the largest that compresses the table at least 100x"
    # at 14x
    import logging

    from ttgnn.data import planted_partition

    graph = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, seed=0)
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        result = train(small_config(None, mode="full", epochs=1, rank=None, row_shape=[300, 300], init="gaussian",
                                    from_full=False), graph)
    assert result["rank"] == 1 and result["compression_ratio"] < 100
    assert "TT rank 1: the smallest rank; no rank compresses the table 100x with this shape (rank 1: 2.7x)" in caplog.text
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["row shape [300, 300] covers 90,000 TT rows for 400 nodes (225x): the padding rows cost memory "
                      "and time (a spectral or --from-full start factors the whole padded table); leave --row-shape "
                      "out to have it factored from the node count"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.train"):
        train(small_config(None, mode="full", epochs=1, row_shape=[20, 21], init="gaussian", from_full=False), graph)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]  # a little padding is no matter


def test_a_tt_run_records_which_lookup_implementation_it_used(planted, monkeypatch):
    # nothing in a run said whether the compiled kernels or the pure-PyTorch reference did its lookups
    import ttgnn.ops

    assert train(small_config(None, mode="full", epochs=1), planted)["lookup_backend"] == ttgnn.ops.lookup_backend("cpu")
    monkeypatch.setattr(ttgnn.ops, "lookup_backend", lambda device=None: "reference")  # as without the extension
    assert train(small_config(None, mode="full", epochs=1), planted)["lookup_backend"] == "reference"
    assert "lookup_backend" not in train(small_config(None, mode="full", epochs=1, embedding="full"), planted)
