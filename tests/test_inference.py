"""Tests of ttgnn.inference and ``ttgnn predict``: a finished run's best model gives back the
accuracies the run recorded; its predictions and its node table are written as documented."""
import gzip
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch

from configs import small_config
from messages import logged
from raw_layout import write_raw_dataset
from ttgnn.cli import main
from ttgnn.inference import class_probabilities, load_run, predict, write_embeddings, write_predictions
from ttgnn.train import train


def _split_accuracy(classes, dataset, key):
    idx = dataset.split[key]
    return float((classes[idx] == dataset.labels[idx]).float().mean())


@pytest.mark.parametrize("settings", [
    dict(model="gat", mode="full", order="hierarchical-metis"),  # the node order comes back from the weights
    dict(model="sage", mode="minibatch", embedding="full"),
    dict(model="sage", mode="full", init="spectral", spectral_vectors=4, order="identity"),
])
def test_a_finished_run_gives_back_its_recorded_accuracies(tmp_path, planted, monkeypatch, settings):
    metrics = train(small_config(tmp_path / "run", epochs=3, correct_smooth=False, **settings), planted)
    import ttgnn.spectral
    import ttgnn.partition

    def recomputed(*args, **kw):
        raise AssertionError("load_run recomputed what the weights hold")

    monkeypatch.setattr(ttgnn.spectral, "spectral_table", recomputed)
    monkeypatch.setattr(ttgnn.partition, "hierarchical_order", recomputed)
    run = load_run(tmp_path / "run", planted)
    assert run.epoch == metrics["best_epoch"] and run.config.model == settings["model"]
    probs = class_probabilities(run)
    assert probs.shape == (planted.num_nodes, planted.num_classes)
    torch.testing.assert_close(probs.sum(1), torch.ones(planted.num_nodes), rtol=0, atol=1e-5)
    classes = predict(run, probs=probs)
    assert torch.equal(classes, probs.argmax(1)) and torch.equal(classes, predict(run))
    assert _split_accuracy(classes, planted, "test") == pytest.approx(metrics["test_acc"], abs=1e-6)
    assert _split_accuracy(classes, planted, "valid") == pytest.approx(metrics["best_valid_acc"], abs=1e-6)


def test_predict_after_correct_and_smooth_is_what_train_reported(tmp_path, planted):
    metrics = train(small_config(tmp_path / "run", epochs=2, mode="full"), planted)
    run = load_run(tmp_path / "run", planted)
    classes = predict(run, correct_smooth=True)
    reported = metrics["correct_smooth"]
    assert _split_accuracy(classes, planted, "test") == pytest.approx(reported["test_acc"], abs=1e-6)
    assert _split_accuracy(classes, planted, "valid") == pytest.approx(reported["valid_acc"], abs=1e-6)


def test_a_from_full_run_loads_its_tt_model(tmp_path, planted):
    metrics = train(small_config(tmp_path / "run", epochs=2, mode="full", from_full=True, finetune_epochs=2,
                                 correct_smooth=False), planted)
    run = load_run(tmp_path / "run", planted)
    assert run.config.embedding == "tt" and run.model.node_input.kind == "tt"
    assert _split_accuracy(predict(run), planted, "test") == pytest.approx(metrics["test_acc"], abs=1e-6)


@pytest.mark.parametrize("embedding", ["tt", "full"])
def test_embeddings_are_the_tables_rows_in_node_id_order(tmp_path, planted, embedding):
    train(small_config(tmp_path / "run", epochs=1, embedding=embedding, order="hierarchical-metis",
                       correct_smooth=False), planted)
    run = load_run(tmp_path / "run", planted)
    path = write_embeddings(run, tmp_path / "emb.npy", chunk_rows=7)  # chunks that do not divide N
    written = np.load(path)
    expected = run.model.node_input.table(torch.arange(planted.num_nodes)).detach().numpy()
    assert written.dtype == np.float32 and written.shape == (planted.num_nodes, run.config.dim)
    # float rounding only: a lookup of many rows may contract the whole table instead of row by row
    np.testing.assert_allclose(written, expected, rtol=1e-5, atol=1e-7)
    if embedding == "tt":  # node-id order, not TT-row order: a node order was used
        assert run.model.node_input.table.node_order is not None
    with pytest.raises(ValueError, match="embeddings go to a .npy file"):
        write_embeddings(run, tmp_path / "emb.csv")


def test_a_run_on_node_features_has_no_table_to_write(tmp_path, planted):
    import dataclasses

    features = torch.nn.functional.one_hot(planted.labels, planted.num_classes).float()
    dataset = dataclasses.replace(planted, features=features)
    train(small_config(tmp_path / "run", epochs=1, embedding="features", correct_smooth=False), dataset)
    run = load_run(tmp_path / "run", dataset)
    assert predict(run).shape == (planted.num_nodes,)
    with pytest.raises(ValueError, match=r"^the run's input is the node features \('features'\): there is no "
                                         r"learned table$"):
        write_embeddings(run, tmp_path / "emb.npy")
    assert not (tmp_path / "emb.npy").exists()


def test_predictions_are_written_as_npy_and_csv(tmp_path):
    classes = torch.tensor([2, 0, 1])
    probs = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25], [0.0, 1.0, 0.0]])
    assert np.load(write_predictions(tmp_path / "p.npy", classes)).tolist() == [2, 0, 1]
    with gzip.open(write_predictions(tmp_path / "p.csv.gz", classes, probs), "rt") as fh:
        assert fh.read().splitlines() == ["node,predicted_class,probability", "0,2,0.700000", "1,0,0.500000",
                                          "2,1,1.000000"]
    assert (tmp_path / "p.csv.gz").read_bytes()[4:8] == bytes(4)  # gzip's mtime 0: the same bytes every time
    assert (write_predictions(tmp_path / "p.csv", classes).read_text().splitlines()
            == ["node,predicted_class", "0,2", "1,0", "2,1"])
    with pytest.raises(ValueError, match="a .npy, .csv or .csv.gz file"):
        write_predictions(tmp_path / "p.txt", classes)


def test_a_run_evaluated_on_samples_is_not_predicted_exactly(tmp_path, planted):
    train(small_config(tmp_path / "run", epochs=1, mode="minibatch", eval_fanouts=[5, 5], correct_smooth=False),
          planted)
    run = load_run(tmp_path / "run", planted)
    with pytest.raises(ValueError, match=r"sampled neighbourhoods \(eval_fanouts \[5, 5\]\): .*400 nodes.* which "
                                         r"ttgnn predict does not attempt \(its learned table can still be written: "
                                         r"write_embeddings, or ttgnn predict --embeddings without --output and "
                                         r"--correct-smooth\)$"):
        predict(run)
    assert np.load(write_embeddings(run, tmp_path / "emb.npy")).shape == (400, 16)  # the table is there


def test_load_run_errors_name_the_problem(tmp_path, planted):
    with pytest.raises(FileNotFoundError, match="holds no finished epoch of a ttgnn run"):
        load_run(tmp_path)
    train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    with pytest.raises(FileNotFoundError, match=r"trained on 'planted-400': give its root, or the NodeDataset"):
        load_run(tmp_path / "run", root=tmp_path)
    from ttgnn.data import planted_partition

    other = planted_partition(300, num_classes=4, avg_degree=8, homophily=0.9, seed=0)
    with pytest.raises(ValueError, match=r"was not trained on this dataset \(planted-300, 300 nodes.*size mismatch"
                       ) as err:
        load_run(tmp_path / "run", other)
    assert "\n" not in str(err.value)
    # a graph of another size on the same row shape: the table's recorded row count tells, named the same way
    train(small_config(tmp_path / "ordered", epochs=1, correct_smooth=False, order="random", row_shape=[8, 8, 8]),
          planted)
    # the same name and size, other labels or fewer edges: refused (predict scored it silently)
    import dataclasses

    shifted = dataclasses.replace(planted, labels=(planted.labels + 1) % planted.num_classes)
    fewer = dataclasses.replace(planted, edge_index=planted.edge_index[:, ::2].copy(), _csr=None, _adjacency={})
    for other in (shifted, fewer):
        with pytest.raises(ValueError, match=r"was not trained on this dataset \(planted-400, 400 nodes, 4 classes\): "
                                             r"its nodes, edges, labels or split differ"):
            load_run(tmp_path / "run", other)
        with pytest.raises(ValueError, match="its nodes, edges, labels or split differ"):
            load_run(tmp_path / "run" / "checkpoint.pt", other)
    assert load_run(tmp_path / "run", planted).dataset is planted
    smaller = planted_partition(390, num_classes=4, avg_degree=8, homophily=0.9, seed=0)
    with pytest.raises(ValueError, match=r"was not trained on this dataset \(planted-390, 390 nodes, 4 classes\): "
                                         r"size mismatch for node_input.table.num_embeddings: the checkpoint's table "
                                         r"has 400 rows, this TTNodeEmbedding 390"):
        load_run(tmp_path / "ordered", smaller)
    # so it does without a node order (whose length told before the row count was recorded; without one the
    # load went through)
    train(small_config(tmp_path / "unordered", epochs=1, correct_smooth=False, order="identity",
                       row_shape=[8, 8, 8]), planted)
    with pytest.raises(ValueError, match=r"not trained on this dataset \(planted-390, 390 nodes, 4 classes\): "
                                         r"size mismatch for node_input.table.num_embeddings: the checkpoint's "
                                         r"table has 400 rows, this TTNodeEmbedding 390"):
        load_run(tmp_path / "unordered", smaller)


def _train_tiny(tmp_path, *options):
    """``ttgnn train`` for 2 epochs on a 300-node graph in OGB's raw layout (plus ``options``); its root and run
    folder."""
    root = tmp_path / "data"
    write_raw_dataset(root / "tiny", num_nodes=300, num_classes=3)
    out = tmp_path / "run"
    assert main(["train", "--dataset", "tiny", "--root", str(root), "--output-dir", str(out), "--no-progress",
                 "--num-threads", "1", "--epochs", "2", "--hidden", "16", "--dim", "16", "--rank", "4",
                 "--num-layers", "2", "--cache-dir", str(tmp_path / "cache"), *options]) == 0
    return root, out


def test_cli_predict_writes_the_table_of_a_run_evaluated_on_samples(tmp_path, capsys):
    """Such a run (a 10^8-node graph's) cannot be predicted exactly, but its learned table is written; asking
    for predictions is refused before anything is written."""
    root, out = _train_tiny(tmp_path, "--mode", "minibatch", "--model", "sage", "--fanouts", "3,3",
                                "--eval-fanouts", "3,3")
    capsys.readouterr()
    where = ["--root", str(root), "--cache-dir", str(tmp_path / "cache")]
    assert main(["predict", str(out), *where, "--embeddings", str(tmp_path / "emb.npy")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"{re.escape(str(out))}: sage \+ tt on tiny, best epoch [12]; no predictions: the run "
                        r"evaluated on sampled neighbourhoods \(eval_fanouts \[3, 3\]\), its accuracies are in "
                        r"metrics.json", printed[0])
    assert printed[1:] == [f"input table, 300 x 16 float32 rows in node-id order: {tmp_path / 'emb.npy'}"]
    assert np.load(tmp_path / "emb.npy").shape == (300, 16)
    for option in (["--output", str(tmp_path / "pred.npy")], ["--correct-smooth"]):
        assert main(["predict", str(out), *where, *option, "--embeddings", str(tmp_path / "emb2.npy")]) == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(
            "which ttgnn predict does not attempt (its learned table can still be written: write_embeddings, or "
            "ttgnn predict --embeddings without --output and --correct-smooth)")
    assert not (tmp_path / "pred.npy").exists() and not (tmp_path / "emb2.npy").exists()


def test_cli_predict_reads_the_dataset_from_the_root_it_is_given(tmp_path, capsys):
    root, out = _train_tiny(tmp_path)
    moved = tmp_path / "moved"
    shutil.move(root, moved)  # the run recorded the first root
    capsys.readouterr()
    assert main(["predict", str(out), "--root", str(moved), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: gat + tt on tiny, best epoch ")
    (tmp_path / "a-file").write_text("x")  # a root that is a file: said so, with the run's hint
    assert main(["predict", str(out), "--root", str(tmp_path / "a-file"), "--cache-dir", str(tmp_path / "cache")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"ttgnn predict: error: dataset root {tmp_path / 'a-file'} is a file, not a folder (given as --root or root=); "
        f"the run in {out} trained on 'tiny': give its root, or the NodeDataset itself for a graph built in Python")


def test_cli_predict_and_partition_never_write_into_the_dataset_folder(tmp_path, capsys):
    # an --output over raw/node-label.csv.gz (or edge.csv.gz) replaced the graph's own file: it no longer loaded
    root, out = _train_tiny(tmp_path)
    labels = root / "tiny" / "raw" / "node-label.csv.gz"
    before = labels.read_bytes()
    cache = ["--cache-dir", str(tmp_path / "cache")]
    for option in ("--output", "--embeddings"):
        target = labels if option == "--output" else root / "tiny" / "emb.npy"
        assert main(["predict", str(out), "--root", str(root), *cache, option, str(target)]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"ttgnn predict: error: {option} {target} is inside the dataset folder {root / 'tiny'}, which ttgnn "
            "reads and never writes to: give a file elsewhere")
    edges = root / "tiny" / "raw" / "edge.csv.gz"
    for dataset in ("tiny", str(root / "tiny")):
        assert main(["partition", "--dataset", dataset, "--root", str(root), *cache, "--method", "random",
                     "--output", str(edges)]) == 2
        assert "is inside the dataset folder" in capsys.readouterr().err
    assert labels.read_bytes() == before and not (root / "tiny" / "emb.npy").exists()
    assert main(["partition", "--dataset", "tiny", "--root", str(root), *cache, "--method", "random",
                 "--output", str(root / "order.npy")]) == 0  # beside it, in the root: as asked


def test_cli_predict_writes_predictions_and_embeddings(tmp_path, capsys):
    root, out = _train_tiny(tmp_path)
    recorded = json.loads((out / "metrics.json").read_text())
    capsys.readouterr()
    assert main(["predict", str(out), "--root", str(root), "--cache-dir", str(tmp_path / "cache"),
                 "--output", str(tmp_path / "pred.csv.gz"), "--embeddings", str(tmp_path / "emb.npy")]) == 0
    printed = capsys.readouterr().out
    assert re.fullmatch(
        rf"{re.escape(str(out))}: gat \+ tt on tiny, best epoch {recorded['best_epoch']}; accuracy: train [01]\.\d{{4}}, "
        rf"valid {recorded['best_valid_acc']:.4f}, test {recorded['test_acc']:.4f}", printed.splitlines()[0])
    assert printed.splitlines()[1:] == [f"predicted classes of 300 nodes: {tmp_path / 'pred.csv.gz'}",
                                        f"input table, 300 x 16 float32 rows in node-id order: {tmp_path / 'emb.npy'}"]
    with gzip.open(tmp_path / "pred.csv.gz", "rt") as fh:
        lines = fh.read().splitlines()
    assert lines[0] == "node,predicted_class,probability" and len(lines) == 301
    assert np.load(tmp_path / "emb.npy").shape == (300, 16)
    assert main(["predict", str(out), "--root", str(root), "--cache-dir", str(tmp_path / "cache"), "--embeddings",
                 str(tmp_path / "again.npy"), "--progress"]) == 0
    assert "embeddings: 100%" in capsys.readouterr().err  # the bar asked for
    for name, which in (("best_model.pt", f"best epoch {recorded['best_epoch']}"),
                        ("checkpoint.pt", "epoch 2 (the checkpoint's last)")):  # a file instead of the folder
        assert main(["predict", str(out / name), "--root", str(root), "--cache-dir", str(tmp_path / "cache")]) == 0
        assert which in capsys.readouterr().out
    assert main(["predict", str(out), "--root", str(root), "--correct-smooth",
                 "--output", str(tmp_path / "cs.csv")]) == 0
    smoothed = recorded["correct_smooth"]
    assert (tmp_path / "cs.csv").read_text().splitlines()[0] == "node,predicted_class"  # no probability after C&S
    assert re.fullmatch(
        rf"{re.escape(str(out))}: gat \+ tt on tiny, best epoch {recorded['best_epoch']}; accuracy after Correct and "
        rf"Smooth: train [01]\.\d{{4}}, valid {smoothed['valid_acc']:.4f}, test {smoothed['test_acc']:.4f}",
        capsys.readouterr().out.splitlines()[0])
    # the cache folder given, not the run's: a file there is refused by name
    (tmp_path / "not-a-cache").write_text("x")
    assert main(["predict", str(out), "--root", str(root), "--cache-dir", str(tmp_path / "not-a-cache")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (f"ttgnn predict: error: cache directory "
                                                        f"{tmp_path / 'not-a-cache'} exists and is not a folder")
    # bad values: one line, exit code 2, nothing computed
    assert main(["predict", str(out), "--output", str(tmp_path / "pred.txt")]) == 2
    assert "--output must name a .npy / .csv / .csv.gz file" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "nothing")]) == 2
    assert "holds no finished epoch" in capsys.readouterr().err
    # an output that cannot be written is refused before the run loads (the run named here does not exist)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for option in ("--output", "--embeddings"):
        assert main(["predict", str(tmp_path / "nothing"), option, str(a_file / "sub" / "out.npy")]) == 2
        assert capsys.readouterr().err.strip() == (f"ttgnn predict: error: cannot write {option} "
                                                   f"{a_file / 'sub' / 'out.npy'}: {a_file} is a file, not a folder")
    # one file for both outputs (here through a link to its folder): refused before the run loads
    (tmp_path / "link").symlink_to(tmp_path)
    assert main(["predict", str(tmp_path / "nothing"), "--output", str(tmp_path / "both.npy"), "--embeddings",
                 str(tmp_path / "link" / "both.npy")]) == 2
    assert capsys.readouterr().err.strip() == (f"ttgnn predict: error: --output and --embeddings name the same file, "
                                               f"{tmp_path / 'both.npy'}: the table would replace the predictions")


def test_load_run_messages_log_line_and_a_file_without_settings(tmp_path, planted, caplog):
    import logging

    from ttgnn.checkpoint import CHECKPOINT_VERSION

    with pytest.raises(FileNotFoundError, match=r"^.*best_model.pt not found: .* holds no finished epoch of a ttgnn "
                                                r"run \(best_model.pt is written after the first epoch\)$"):
        load_run(tmp_path)
    metrics = train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    with caplog.at_level(logging.INFO, logger="ttgnn.inference"):
        load_run(tmp_path / "run", planted)
    assert logged(caplog, "ttgnn.inference") == [
        f"loaded the best model of {tmp_path / 'run'} (epoch {metrics['best_epoch']}): sage + tt on planted-400"]
    # a checkpoint.pt is the last epoch's state: it was announced as "the best model"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.inference"):
        load_run(tmp_path / "run" / "checkpoint.pt", planted)
    assert logged(caplog, "ttgnn.inference")[-1].startswith(
        f"loaded the last checkpoint (not the best model) of {tmp_path / 'run'} (epoch 1)")
    # weights without the settings they were trained with: not a model load_run can rebuild
    torch.save({"version": CHECKPOINT_VERSION, "epoch": 1, "model": {"w": torch.zeros(1)}}, tmp_path / "bare.pt")
    with pytest.raises(ValueError, match=r"^.*bare.pt is not a ttgnn best model \(it has no settings or no "
                                         r"weights\)$"):
        load_run(tmp_path / "bare.pt", planted)


def test_load_run_finds_the_graph_where_asked_else_where_the_run_did(tmp_path, planted, monkeypatch):
    import dataclasses

    import ttgnn.inference

    config = dataclasses.replace(small_config(tmp_path / "run", epochs=1, correct_smooth=False),
                                 root=str(tmp_path / "run-root"), cache_dir=str(tmp_path / "run-cache"))
    train(config, planted)
    calls = []

    def load_dataset(name, root=None, cache_dir=None):
        calls.append((name, root, cache_dir))
        return planted

    monkeypatch.setattr(ttgnn.inference, "load_dataset", load_dataset)
    load_run(tmp_path / "run")
    load_run(tmp_path / "run", root=tmp_path / "other-root", cache_dir=tmp_path / "other-cache")
    assert calls == [(config.dataset, str(tmp_path / "run-root"), str(tmp_path / "run-cache")),
                     (config.dataset, tmp_path / "other-root", tmp_path / "other-cache")]


def test_predict_takes_the_probabilities_it_is_given(tmp_path, planted):
    train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    run = load_run(tmp_path / "run", planted)
    probs = torch.zeros(planted.num_nodes, planted.num_classes)
    probs[:, planted.num_classes - 1] = 1.0  # not the model's: every node in the last class
    assert torch.equal(predict(run, probs=probs), torch.full((planted.num_nodes,), planted.num_classes - 1))


def test_write_embeddings_shows_a_bar_over_chunks_only_when_asked(tmp_path, planted, capsys):
    train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    run = load_run(tmp_path / "run", planted)
    capsys.readouterr()
    write_embeddings(run, tmp_path / "quiet.npy", chunk_rows=100)  # the default: no bar
    assert capsys.readouterr().err == ""
    write_embeddings(run, tmp_path / "bar.npy", chunk_rows=100, progress=True)
    err = capsys.readouterr().err
    assert "embeddings: 100%" in err and "4/4 [" in err
    assert re.search(r"[0-9.]+(chunk/s|s/chunk)\]", err)  # the rate in chunks, however slow the machine


@pytest.mark.parametrize("chunk_rows", [0, -5, 2.5, True])
def test_write_embeddings_refuses_a_chunk_size_that_is_not_a_positive_integer(tmp_path, planted, chunk_rows):
    # -5 wrote the header of a (400, 16) array and no rows (a truncated .npy); 0 failed in range().
    train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    run = load_run(tmp_path / "run", planted)
    with pytest.raises(ValueError, match=re.escape(f"chunk_rows must be an integer >= 1, got {chunk_rows!r}")):
        write_embeddings(run, tmp_path / "emb.npy", chunk_rows=chunk_rows)
    assert not (tmp_path / "emb.npy").exists()


@pytest.mark.parametrize("classes, probs, message", [
    (torch.zeros(2, 3, dtype=torch.long), None, r"classes must be \(N,\) class ids, got shape \(2, 3\) \(torch.int64\)"),
    (torch.zeros(3), None, r"classes must be \(N,\) class ids, got shape \(3,\) \(torch.float32\)"),
    (torch.zeros(3, dtype=torch.long), torch.ones(4, 2), r"probs must be \(3, C\) for 3 nodes, got shape \(4, 2\)"),
    (torch.zeros(3, dtype=torch.long), torch.ones(3), r"probs must be \(3, C\) for 3 nodes, got shape \(3,\)"),
    # a class id that is no column of probs: numpy's IndexError before
    (torch.tensor([2, 0, 7]), torch.ones(3, 3), r"classes must lie in \[0, 3\) to index probs \(N, 3\), got 0 to 7"),
    (torch.tensor([-1, 0, 1]), torch.ones(3, 3), r"classes must lie in \[0, 3\) .*got -1 to 1"),
])
def test_write_predictions_refuses_classes_and_probabilities_of_the_wrong_shape(tmp_path, classes, probs, message):
    with pytest.raises(ValueError, match=message):
        write_predictions(tmp_path / "pred.csv", classes, probs)
    assert not (tmp_path / "pred.csv").exists()


def test_write_predictions_and_load_run_name_an_argument_of_the_wrong_type(tmp_path):
    # a list of classes failed on its missing .dim(); a dataset given by its name deep in train.py
    for classes, probs, name in (([1, 2, 3], None, "classes"), (torch.zeros(3, dtype=torch.long), [[1.0]], "probs")):
        with pytest.raises(TypeError, match=rf"^{name} must be a torch.Tensor, got list$"):
            write_predictions(tmp_path / "pred.csv", classes, probs)
    with pytest.raises(TypeError, match=r"^dataset must be a NodeDataset \(the graph built in Python\) or None "
                                        r"\(loaded by the run's dataset name, under root=\), got str$"):
        load_run(tmp_path, "cora")
    assert not (tmp_path / "pred.csv").exists()


def test_a_best_model_with_nan_weights_is_refused_before_its_graph_loads(tmp_path, planted):
    # A run that diverged before ttgnn stopped such runs could save NaN weights; predict would
    # have written the argmax of NaN scores (class 0) for every node.
    from ttgnn.checkpoint import BEST_MODEL_NAME, load_checkpoint, save_best_model

    train(small_config(tmp_path / "run", epochs=1, correct_smooth=False), planted)
    path = tmp_path / "run" / BEST_MODEL_NAME
    state = load_checkpoint(path)
    weights = dict(state["model"])
    names = [name for name, value in weights.items() if value.is_floating_point()]
    for name in names[:4]:
        weights[name] = weights[name].clone()
        weights[name].view(-1)[-1] = float("inf") if name == names[0] else float("nan")
    save_best_model(path, epoch=state["epoch"], model=weights, settings=state["settings"])
    with pytest.raises(ValueError, match=re.escape(f"{path} holds NaN or inf weights ({', '.join(names[:3])} and 1 "
                                                   "more): the run that saved it diverged; train again with lower "
                                                   "learning rates")):
        load_run(tmp_path / "run")  # no dataset given: the check comes before the graph would load


@pytest.mark.parametrize("shape", [dict(row_shape=[8, 8, 8]), dict(col_shape=[4, 2, 2])])
def test_a_run_recorded_with_a_core_count_its_shape_overrode_still_loads(tmp_path, planted, shape):
    # Before 2026-11-30 a shape silently overrode num_cores; such a run's settings hold both.
    from ttgnn.checkpoint import BEST_MODEL_NAME, load_checkpoint, save_best_model

    metrics = train(small_config(tmp_path / "run", epochs=1, correct_smooth=False, **shape), planted)
    path = tmp_path / "run" / BEST_MODEL_NAME
    state = load_checkpoint(path)
    save_best_model(path, epoch=state["epoch"], model=state["model"], settings={**state["settings"], "num_cores": 5})
    run = load_run(tmp_path / "run", planted)
    assert run.config.num_cores == 5  # the run's settings as recorded
    assert len(run.model.node_input.table.cores) == 3
    assert _split_accuracy(predict(run), planted, "test") == pytest.approx(metrics["test_acc"], abs=1e-6)


def test_the_finite_check_reads_every_chunk_of_a_weight(tmp_path):
    from ttgnn.inference import _check_finite_weights

    weight = torch.ones(3, 5)
    _check_finite_weights({"w": weight, "step": torch.tensor(7)}, tmp_path / "m.pt", chunk=4)
    weight[2, 4] = float("nan")  # entry 14: in the last of four chunks
    with pytest.raises(ValueError, match=r"holds NaN or inf weights \(w\)"):
        _check_finite_weights({"w": weight, "step": torch.tensor(7)}, tmp_path / "m.pt", chunk=4)


def test_a_run_that_stopped_early_is_predicted_with_a_note(tmp_path, planted, monkeypatch, capsys):
    import ttgnn.train as ttrain
    from ttgnn.train import TrainingInterrupted

    real_epoch = ttrain.train_epoch

    def stop_at_3(run, epoch, show_progress=False):
        if epoch == 3:
            raise KeyboardInterrupt
        return real_epoch(run, epoch, show_progress)

    config = small_config(tmp_path / "run", epochs=4, correct_smooth=False)
    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "train_epoch", stop_at_3)
        with pytest.raises(TrainingInterrupted):
            train(config, planted)
    assert load_run(tmp_path / "run", planted).stopped == (2, 4)
    train(config.__class__(**{**config.__dict__, "resume": True}), planted)
    assert load_run(tmp_path / "run", planted).stopped is None  # finished: no note
    assert load_run(tmp_path / "run" / "checkpoint.pt", planted).stopped is None
    (tmp_path / "run" / "metrics.json").write_text("not json")  # unreadable: no note, and no error
    assert load_run(tmp_path / "run", planted).stopped is None


def test_a_run_that_diverged_or_is_still_training_is_not_called_interrupted(tmp_path, planted, monkeypatch, capsys):
    # predict told every run short of its epochs to --resume, also one whose loss became NaN (a resume
    # diverges again: it is exact) and one another process still trains (a resume is refused: folder in use)
    import ttgnn.train as ttrain
    from ttgnn.checkpoint import RunFolder
    from ttgnn.train import TrainingDiverged

    real_epoch = ttrain.train_epoch
    config = small_config(tmp_path / "run", epochs=4, correct_smooth=False)
    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "train_epoch", lambda run, epoch, show_progress=False:
                      float("nan") if epoch == 3 else real_epoch(run, epoch, show_progress))
        with pytest.raises(TrainingDiverged):
            train(config, planted)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["diverged"] == {"epoch": 3, "loss": "nan"} and len(metrics["epochs"]) == 2
    run = load_run(tmp_path / "run", planted)
    assert (run.stopped, run.stop_reason) == ((2, 4), "diverged")
    with RunFolder(tmp_path / "run", resume=True):  # another run holds the folder
        run = load_run(tmp_path / "run", planted)
        assert (run.stopped, run.stop_reason) == ((2, 4), "running")
    assert RunFolder.in_use(tmp_path / "run") is False and RunFolder.in_use(tmp_path / "none") is False


def test_cli_predict_notes_a_run_that_stopped_early(tmp_path, capsys):
    root, out = _train_tiny(tmp_path)
    command = ["predict", str(out), "--root", str(root), "--cache-dir", str(tmp_path / "cache")]
    assert main(command) == 0
    assert "note:" not in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["settings"]["epochs"] = 5  # as a run of 5 epochs interrupted after its second records it
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "note: the run stopped after epoch 2 of 5 (interrupted); its best model so far is used: `ttgnn train` with "
        "the run's command plus --resume finishes it")
    from ttgnn.checkpoint import RunFolder

    with RunFolder(out, resume=True):  # another process trains it still
        assert main(command) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "note: the run is still training (epoch 2 of 5 done; its folder is locked); its best model so far is used: "
        "predict again when it ends")
    metrics["diverged"] = {"epoch": 3, "loss": "nan"}
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "note: the run stopped after epoch 2 of 5 (diverged: its loss became NaN or inf); its best model so far is "
        "used; a --resume would diverge again (it is exact): train again with lower learning rates")


def test_an_empty_cache_dir_or_root_is_refused_by_predict_as_elsewhere(tmp_path, capsys):
    # predict read --cache-dir "" as "not given" and went on with the run's recorded cache
    root, out = _train_tiny(tmp_path)
    capsys.readouterr()
    assert main(["predict", str(out), "--root", str(root), "--cache-dir", ""]) == 2
    assert "the cache directory is empty" in capsys.readouterr().err
    assert main(["predict", str(out), "--root", "", "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "the dataset root is empty" in capsys.readouterr().err


def test_a_run_on_a_relative_dataset_path_is_found_again_from_anywhere(tmp_path, monkeypatch, capsys):
    # the run recorded "data/tiny" as typed: predict from another folder failed, and a resume with the absolute
    # path of the same folder was refused as another dataset
    from ttgnn.checkpoint import differing_settings

    write_raw_dataset(tmp_path / "data" / "tiny", num_nodes=300, num_classes=3)
    monkeypatch.chdir(tmp_path)
    options = ["--num-threads", "1", "--hidden", "16", "--dim", "16", "--rank", "4", "--num-layers", "2",
               "--no-progress", "--cache-dir", str(tmp_path / "cache"), "--output-dir", "run"]
    assert main(["train", "--dataset", "data/tiny", "--epochs", "1", *options]) == 0
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())["settings"]["dataset"]
    assert recorded == str(tmp_path / "data" / "tiny")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "run")]) == 0
    assert "accuracy" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--dataset", str(tmp_path / "data" / "tiny") + "/", "--epochs", "2", *options,
                 "--resume"]) == 0
    assert [e["epoch"] for e in json.loads((tmp_path / "run" / "metrics.json").read_text())["epochs"]] == [1, 2]
    # a run recorded before the path was made absolute (relative to where it ran) resumes from there
    assert differing_settings({"dataset": "data/tiny"}, {"dataset": str(tmp_path / "data" / "tiny")},
                              ["dataset"]) == []
    assert differing_settings({"dataset": "data/other"}, {"dataset": str(tmp_path / "data" / "tiny")},
                              ["dataset"]) == ["dataset"]
    # the dataset folder moved: --root names the folder that holds it now
    shutil.move(str(tmp_path / "data"), str(tmp_path / "moved"))
    assert main(["predict", str(tmp_path / "run")]) == 2
    assert "give the folder that holds 'tiny'" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "run"), "--root", str(tmp_path / "moved")]) == 0
    assert "accuracy" in capsys.readouterr().out


def test_a_dataset_path_is_recorded_absolute_and_a_name_as_given():
    from pathlib import Path

    from ttgnn.config import TrainConfig

    assert TrainConfig(dataset="graphs/planted").dataset == os.path.abspath("graphs/planted")
    assert TrainConfig(dataset=Path("planted")).dataset == os.path.abspath("planted")  # a PathLike is a path
    for name in ("cora", "cora/", "ogbn-arxiv"):
        assert TrainConfig(dataset=name).dataset == name


def test_write_predictions_refuses_a_negative_class_without_probabilities(tmp_path):
    from ttgnn.inference import write_predictions

    # -1 (an unlabelled node's id) was written as a predicted class
    with pytest.raises(ValueError, match=r"^classes must be class ids >= 0, got -1$"):
        write_predictions(tmp_path / "p.csv", torch.tensor([0, -1, 2]))
    assert not (tmp_path / "p.csv").exists()
    write_predictions(tmp_path / "p.npy", torch.tensor([0, 1, 2]))
    assert np.load(tmp_path / "p.npy").tolist() == [0, 1, 2]


def test_a_from_full_run_stopped_in_its_full_tables_stage_names_that_stage_and_resume(tmp_path, planted):
    # it said only "holds no finished epoch of a ttgnn run" though full-table/ held 52 epochs
    from ttgnn.train import FULL_TABLE_DIR

    out = tmp_path / "run"
    train(small_config(out, mode="full", epochs=2, finetune_epochs=1, from_full=True, correct_smooth=False), planted)
    for name in ("best_model.pt", "checkpoint.pt", "metrics.json"):  # as if stopped before the TT stage's epoch 1
        (out / name).unlink()
    with pytest.raises(FileNotFoundError, match=rf"^{re.escape(str(out / 'best_model.pt'))} not found: the from_full "
                                                rf"run in {re.escape(str(out))} stopped before its TT stage's first "
                                                rf"epoch; --resume continues it, and its full table's run can be "
                                                rf"predicted now: ttgnn predict {re.escape(str(out / FULL_TABLE_DIR))}$"):
        load_run(out, planted)
    assert load_run(out / FULL_TABLE_DIR, planted) is not None


def test_a_best_model_path_that_is_a_folder_is_named_as_one(tmp_path):
    # it said "best_model.pt not found: ... holds no finished epoch"
    (tmp_path / "best_model.pt").mkdir()
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path / 'best_model.pt'))} is a folder, not a ttgnn "
                                         r"best model or checkpoint$"):
        load_run(tmp_path)
