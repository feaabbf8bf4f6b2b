"""The steps of ``ttgnn.train``: what each reports (losses, log lines, progress, summaries), the
table it builds, and how it stops (argument errors, Ctrl-C, the fault hook, a missing best model).

Found by mutation testing (docs/testing.md): each test here fails for a one-line change of
ttgnn/train.py that the end-to-end training tests let through.
"""
import dataclasses
import functools
import json
import logging
import math
import os
import re
import resource
import signal

import numpy as np
import pytest
import torch

import ttgnn.distributed as tdist
import ttgnn.spectral as spectral
import ttgnn.train as ttrain
from ttgnn.checkpoint import BEST_MODEL_NAME, CHECKPOINT_NAME, save_checkpoint
from ttgnn.data import NodeDataset
from ttgnn.partition import hierarchical_order
from ttgnn.shapes import TTShape
from ttgnn.spectral import spectral_table
from ttgnn.train import TrainingInterrupted, build_classifier, summarize, train

from configs import small_config
from messages import logged
from raw_layout import write_raw_dataset


# The table trained directly (a graph of few labels would otherwise train the full table first: from_full).
_config = functools.partial(small_config, epochs=2, mode="full", label_input=False, seed=0, from_full=False)


# Nothing learned (learning rates of 1e-12): losses and draws can be compared across epochs and runs.
_NO_LEARNING = dict(lr=1e-12, emb_lr=1e-12)


def _first_losses(tmp_path, dataset, **kw) -> tuple[float, float]:
    """The first epoch's loss of a minibatch run and of a full-graph run with nothing learned, no
    dropout and every neighbour sampled (fan-outs above any degree): the two should agree."""
    exact = dict(_NO_LEARNING, dropout=0.0, norm="none", epochs=1, fanouts=[1000, 1000], correct_smooth=False, **kw)
    mini = train(_config(tmp_path / "mini", mode="minibatch", **exact), dataset)
    full = train(_config(tmp_path / "full", **exact), dataset)
    return mini["epochs"][0]["loss"], full["epochs"][0]["loss"]


def _messages(caplog) -> list[str]:
    return logged(caplog, "ttgnn.train")


# ---------------------------------------------------------------------- losses and progress
@pytest.mark.parametrize("batch_size,gnn_backend", [(64, "dgl"), (1000, "dgl"), (64, "torch")])
def test_a_minibatch_epoch_loss_is_the_mean_over_the_training_nodes(tmp_path, planted, batch_size, gnn_backend):
    # Each batch's loss is the full graph's loss on its nodes; the epoch's loss is their mean
    # weighted by batch size (64: batches of 64 and a smaller last one), i.e. the full graph's.
    # The tensor layers (gnn_backend "torch") get each sampled block as index tensors.
    loss, full = _first_losses(tmp_path, planted, batch_size=batch_size, gnn_backend=gnn_backend)
    assert loss == pytest.approx(full, rel=1e-5)
    assert 0.5 * math.log(4) < loss < 2 * math.log(4)  # an untrained 4-class model: about ln 4


def test_the_batch_progress_bar_counts_the_batches(tmp_path, planted, capsys):
    train(_config(tmp_path, mode="minibatch", epochs=1, progress=True), planted)
    batches = math.ceil(planted.split["train"].numel() / 64)
    assert f"0/{batches}" in capsys.readouterr().err


def test_summarize_takes_the_median_epoch_time_and_the_peak_memory():
    records = [dict(epoch_time=t, peak_memory_mib=m) for t, m in ((9.0, 100.0), (1.0, 300.0), (2.0, 200.0))]
    summary = summarize(dict(epochs=records, best_valid_acc=0.75))
    assert summary["epoch_time"] == 2.0 and summary["peak_memory_mib"] == 300.0
    assert summary["valid_acc_at_best"] == 0.75 and summary["epochs"] is records
    empty = summarize(dict(epochs=[], best_valid_acc=0.0))
    assert empty["epoch_time"] is None and empty["peak_memory_mib"] is None


# ---------------------------------------------------------------------- log lines
def test_the_log_lines_of_a_run_name_its_figures(tmp_path, planted, caplog):
    caplog.set_level(logging.INFO, logger="ttgnn")
    config = _config(tmp_path, init="auto", rank=None, max_params=600)
    m = train(config, planted)
    lines = _messages(caplog)
    params, ratio = f"{m['embedding_parameters']:,}", m["compression_ratio"]
    assert (f"TT rank {m['rank']}: the largest within the budget ({params} parameters, {ratio:.1f}x compression)"
            in lines)
    assert (f"model: sage / tt embedding ({params} params, {ratio:.1f}x compression) + "
            f"{m['gnn_parameters']:,} params in the GNN" in lines)
    assert str(planted) in lines
    # 200 of the 400 nodes train: the gaussian init, not the spectral one
    assert ("table init gaussian: training nodes are 50.0% of the graph, 400 nodes (spectral below 10% on "
            "graphs of at most 1,000,000 nodes; --init to choose)" in lines)
    cs = m["correct_smooth"]
    assert (f"correct and smooth (epoch {cs['epoch']} model, alphas {cs['correct_alpha']:.2f}/"
            f"{cs['smooth_alpha']:.2f}): train {cs['train_acc']:.4f} valid {cs['valid_acc']:.4f} "
            f"test {cs['test_acc']:.4f} | {cs['seconds']:.1f}s" in lines)
    caplog.clear()
    train(dataclasses.replace(config, epochs=3, resume=True), planted)
    assert f"resumed from {tmp_path / CHECKPOINT_NAME} at epoch 3" in _messages(caplog)


@pytest.mark.parametrize("embedding,order,logged", [("full", "random", True), ("tt", "random", False),
                                                    ("full", "identity", False)])
def test_an_order_given_for_a_full_table_is_reported_as_ignored(tmp_path, planted, caplog, embedding, order,
                                                                logged):
    caplog.set_level(logging.INFO, logger="ttgnn")
    train(_config(tmp_path, embedding=embedding, order=order, epochs=1, correct_smooth=False), planted)
    line = f"order {order!r} applies to TT embeddings only; ignored for {embedding!r}"
    assert (line in _messages(caplog)) == logged


# ---------------------------------------------------------------------- the table it builds
@pytest.mark.parametrize("embedding,init", [("tt", "gaussian"), ("tt", "ortho"), ("full", "gaussian")])
def test_the_input_table_starts_with_the_asked_std(planted, embedding, init):
    # ortho cores give orthonormal columns; the classifier scales them by sqrt(rows) so entries
    # have the same std as the gaussian ones.
    for scale in (0.05, 0.3):
        model = build_classifier(_config(None, embedding=embedding, init=init, init_scale=scale), planted)
        with torch.no_grad():
            table = model.node_input(torch.arange(planted.num_nodes))
        assert float(table.std()) == pytest.approx(scale, rel=0.15)


def test_a_feature_input_trains_without_a_table(tmp_path, planted):
    # Noisy one-hot class features: a model on them alone learns the classes.
    generator = torch.Generator().manual_seed(0)
    features = torch.nn.functional.one_hot(planted.labels, 4).float()
    features += 0.5 * torch.randn(features.shape, generator=generator)
    dataset = dataclasses.replace(planted, features=features)
    m = train(_config(tmp_path, embedding="features", epochs=20, lr=0.05), dataset)
    assert m["embedding_parameters"] == 0 and m["test_acc"] > 0.8


# ---------------------------------------------------------------------- how a run stops
def test_train_checks_the_process_rank(planted):
    with pytest.raises(ValueError, match=r"^process_rank must be in \[0, 1\), got 1$"):
        train(_config(None, epochs=1), planted, process_rank=1, world_size=1)


@pytest.mark.parametrize("stop_at,saved", [(1, 0), (3, 2)])
def test_ctrl_c_names_the_last_complete_checkpoint(tmp_path, planted, monkeypatch, stop_at, saved):
    real_epoch = ttrain.train_epoch

    def interrupted(run, epoch, show_progress=False):
        if epoch == stop_at:
            raise KeyboardInterrupt
        return real_epoch(run, epoch, show_progress)

    monkeypatch.setattr(ttrain, "train_epoch", interrupted)
    with pytest.raises(TrainingInterrupted) as caught:
        train(_config(tmp_path, epochs=4), planted)
    assert caught.value.epoch == saved and str(caught.value) == f"interrupted after epoch {saved}"
    assert caught.value.checkpoint == (tmp_path / CHECKPOINT_NAME if saved else None)
    if saved:  # metrics.json is written with every checkpoint: it lists the epochs done
        written = json.loads((tmp_path / ttrain.METRICS_NAME).read_text())
        assert [r["epoch"] for r in written["epochs"]] == list(range(1, saved + 1))


def test_ctrl_c_after_the_epochs_names_the_checkpoint_that_resumes_the_run(tmp_path, planted, monkeypatch):
    # during Correct and Smooth, and between from_full's stages: "before any checkpoint was written" was
    # printed, beside a finished checkpoint a resume continues from
    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "_final_correct_smooth", ctrl_c)
        with pytest.raises(TrainingInterrupted) as caught:
            train(_config(tmp_path / "cs", epochs=2, correct_smooth=True), planted)
    assert (caught.value.checkpoint, caught.value.epoch) == (tmp_path / "cs" / CHECKPOINT_NAME, 2)
    finished = train(_config(tmp_path / "cs", epochs=2, correct_smooth=True, resume=True), planted)
    assert [r["epoch"] for r in finished["epochs"]] == [1, 2] and "correct_smooth" in finished
    out = tmp_path / "ff"
    config = _config(out, epochs=2, from_full=True, finetune_epochs=1, correct_smooth=False, mode="full")
    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "_start_from_full", ctrl_c)
        with pytest.raises(TrainingInterrupted) as caught:
            train(config, planted)
    assert (caught.value.checkpoint, caught.value.epoch) == (out / ttrain.FULL_TABLE_DIR / CHECKPOINT_NAME, 2)
    assert caught.value.checkpoint.exists() and not (out / CHECKPOINT_NAME).exists()
    resumed = train(dataclasses.replace(config, resume=True), planted)
    assert [r["epoch"] for r in resumed["epochs"]] == [1] and resumed["from_full"]["full_table"]["best_epoch"] >= 1


def test_ctrl_c_while_a_resume_sets_up_or_in_from_fulls_second_stage_names_the_checkpoint(tmp_path, planted,
                                                                                         monkeypatch):
    # "interrupted before any checkpoint was written" was said beside a complete checkpoint: while a
    # --resume loaded its data and model, in the TT stage's first epoch, and while the full table's
    # predictions (the teacher) were computed
    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    train(_config(tmp_path / "run", epochs=2, correct_smooth=False), planted)
    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "setup_run", ctrl_c)
        with pytest.raises(TrainingInterrupted) as caught:
            train(_config(tmp_path / "run", epochs=3, correct_smooth=False, resume=True), planted)
    assert (caught.value.checkpoint, caught.value.epoch) == (tmp_path / "run" / CHECKPOINT_NAME, 2)
    with monkeypatch.context() as patch:  # not resuming: nothing to name (an --overwrite keeps the old run)
        patch.setattr(ttrain, "setup_run", ctrl_c)
        with pytest.raises(TrainingInterrupted) as caught:
            train(_config(tmp_path / "run", epochs=3, correct_smooth=False, overwrite=True), planted)
    assert (caught.value.checkpoint, caught.value.epoch) == (None, 0)

    config = _config(tmp_path / "ff", epochs=2, from_full=True, finetune_epochs=2, correct_smooth=False, mode="full")
    full_table = tmp_path / "ff" / ttrain.FULL_TABLE_DIR / CHECKPOINT_NAME
    real_epoch, calls = ttrain.train_epoch, []

    def stops_in_the_second_stage(run, epoch, show_progress=False):
        calls.append(run.config.embedding)
        if run.config.embedding == "tt":
            raise KeyboardInterrupt
        return real_epoch(run, epoch, show_progress)

    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "train_epoch", stops_in_the_second_stage)
        with pytest.raises(TrainingInterrupted) as caught:
            train(config, planted)
    assert calls == ["full", "full", "tt"] and (caught.value.checkpoint, caught.value.epoch) == (full_table, 2)
    # left to the graph (from_full None, as from the command line, until the data has loaded): the same
    assert ttrain._resume_point(dataclasses.replace(config, from_full=None, resume=True), False) == (full_table, 2)
    with monkeypatch.context() as patch:
        patch.setattr(ttrain, "all_logits", ctrl_c)
        with pytest.raises(TrainingInterrupted) as caught:
            train(dataclasses.replace(config, resume=True), planted)
    assert (caught.value.checkpoint, caught.value.epoch) == (full_table, 2)


def test_a_collective_failure_is_told_by_its_cause(tmp_path, planted, monkeypatch):
    # a rank that waited past --dist-timeout ended in a gloo traceback
    fails = ttrain._collective_failure
    gloo = "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 6000ms for recv operation"
    assert fails(RuntimeError(gloo), 2) == ("waited longer than the job's timeout (--dist-timeout) for another "
                                            "process of the job: Timed out waiting 6000ms for recv operation")
    assert fails(RuntimeError("Connection reset by peer"), 2).startswith("another process of the job stopped")
    assert fails(RuntimeError(gloo), 1) is None  # one process: no collective
    assert fails(RuntimeError("DataLoader worker (pid 7) timed out"), 2) is None


def test_an_epoch_that_scores_zero_on_validation_is_still_the_best_so_far(tmp_path, planted, monkeypatch):
    # validation accuracy 0 (few validation nodes, or classes no training node has) never beat the
    # initial 0.0: no best_model.pt, "test 0.0000" reported whatever the test accuracy was
    real = ttrain._evaluate_run

    def valid_zero(run, epoch):
        return dict(real(run, epoch), valid=0.0)

    monkeypatch.setattr(ttrain, "_evaluate_run", valid_zero)
    result = train(_config(tmp_path, epochs=2, correct_smooth=False), planted)
    assert result["best_epoch"] == 1 and result["best_valid_acc"] == 0.0
    assert result["test_acc"] == result["epochs"][0]["test_acc"] > 0
    assert ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["epoch"] == 1


def _second_rank(tmp_path, planted):
    """The run state of rank 1 of 2 (no process group: its collectives are no-ops here)."""
    return ttrain.setup_run(_config(tmp_path, epochs=4), planted, 1, 2, torch.device("cpu"))


def test_a_rank_other_than_0_names_the_checkpoint_rank_0_wrote(tmp_path, planted, monkeypatch):
    # SIGTERM to rank 1 said "before any checkpoint was written" while rank 0 had written epochs
    def epoch(run, number, show_progress=False):
        if number == 3:
            raise KeyboardInterrupt
        return 1.0

    monkeypatch.setattr(ttrain, "train_epoch", epoch)
    run = _second_rank(tmp_path, planted)
    with pytest.raises(TrainingInterrupted) as caught:
        ttrain._train_and_finish(run)
    assert (caught.value.checkpoint, caught.value.epoch, caught.value.reason) == (tmp_path / CHECKPOINT_NAME, 2, None)


def test_a_lost_process_stops_the_others_naming_the_checkpoint(tmp_path, planted, monkeypatch):
    # a collective that fails because another rank died printed a gloo traceback
    def epoch(run, number, show_progress=False):
        if number == 2:
            raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                               "[127.0.0.1]:5555\nmore")
        return 1.0

    monkeypatch.setattr(ttrain, "train_epoch", epoch)
    with pytest.raises(TrainingInterrupted) as caught:
        ttrain._train_and_finish(_second_rank(tmp_path, planted))
    assert (caught.value.checkpoint, caught.value.epoch) == (tmp_path / CHECKPOINT_NAME, 1)
    assert caught.value.reason == "another process of the job stopped: Connection closed by peer [127.0.0.1]:5555"
    monkeypatch.setattr(ttrain, "train_epoch", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="^a bug$"):  # not a lost peer: its traceback is wanted
        ttrain._train_and_finish(_second_rank(tmp_path / "b", planted))


def test_a_resume_by_another_number_of_processes_is_named_and_recorded(tmp_path, planted, caplog):
    train(_config(tmp_path, epochs=2, correct_smooth=False), planted)
    state = ttrain.load_checkpoint(tmp_path / CHECKPOINT_NAME)
    state["metrics"]["world_size"] = 2  # as a 2-process run writes it
    save_checkpoint(tmp_path / CHECKPOINT_NAME, epoch=state["epoch"], model=state["model"],
                    optimizer=state["optimizer"], metrics=state["metrics"], settings=state["settings"])
    with caplog.at_level(logging.WARNING, logger="ttgnn.train"):
        result = train(_config(tmp_path, epochs=3, correct_smooth=False, resume=True), planted)
    assert (f"checkpoint {tmp_path / CHECKPOINT_NAME} was written by a run of 2 process(es), this one has 1: the "
            "epochs from 3 on take other steps than the run would have (in mini-batches 1 x --batch-size nodes per "
            "step, not 2 x); resume with 2 process(es) to continue it exactly") in caplog.messages
    assert result["world_size_changes"] == [{"epoch": 3, "from": 2, "to": 1}]
    again = train(_config(tmp_path, epochs=4, correct_smooth=False, resume=True), planted)  # kept, not repeated
    assert again["world_size_changes"] == [{"epoch": 3, "from": 2, "to": 1}]


class _Killed(Exception):
    pass


@pytest.mark.parametrize("mode,step", [("full", 0), ("minibatch", 1)])
def test_the_fault_hook_fires_at_its_epoch_and_step(tmp_path, planted, monkeypatch, mode, step):
    killed = []

    def kill(pid, sig):
        killed.append(sig)
        raise _Killed

    monkeypatch.setattr(tdist.os, "kill", kill)
    monkeypatch.setenv(tdist.FAULT_ENV, f"0:2:{step}")
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    with pytest.raises(_Killed):
        train(_config(tmp_path, mode=mode, epochs=3), planted)
    assert len(killed) == 1
    assert ttrain.load_checkpoint(tmp_path / CHECKPOINT_NAME)["epoch"] == 1  # epoch 1 finished, 2 did not


def test_correct_and_smooth_falls_back_to_the_last_model_without_best_weights(tmp_path, planted, caplog):
    config = _config(tmp_path, epochs=3)
    first = train(config, planted)
    (tmp_path / BEST_MODEL_NAME).unlink()
    caplog.set_level(logging.INFO, logger="ttgnn")
    again = train(dataclasses.replace(config, resume=True), planted)
    assert "best model weights not found; Correct and Smooth uses the last epoch's model" in _messages(caplog)
    assert again["correct_smooth"]["epoch"] == 3 and again["best_epoch"] == first["best_epoch"]


# ---------------------------------------------------------------------- settings that reach their step
# Found by the full mutation run of ttgnn/train.py: each setting below was dropped, or replaced by
# its default, by a mutant that every training test let through.
@pytest.mark.parametrize("method,seed", [("random", 3), ("hierarchical-metis", 1)])
def test_the_tt_node_order_is_the_partition_order_of_the_settings(tmp_path, planted, method, seed):
    config = _config(None, order=method, seed=seed, cache_dir=str(tmp_path / "cache"))
    order = ttrain._build_order(config, planted, [5, 8, 10])
    expect = hierarchical_order(planted.csr(), [5, 8, 10], method=method, seed=seed)
    assert order.dtype == torch.int64
    assert order.tolist() == list(expect.perm)
    assert list((tmp_path / "cache").iterdir())  # cached in the run's cache folder
    other = hierarchical_order(planted.csr(), [5, 8, 10], method=method, seed=seed + 1)
    assert list(other.perm) != list(expect.perm)  # the seed matters, so it must be passed
    assert ttrain._build_order(dataclasses.replace(config, order="identity"), planted, [5, 8, 10]) is None


def test_the_tt_shape_of_a_default_rank_needs_the_graph_to_settle_it(planted):
    with pytest.raises(ValueError, match="rank=None is decided by the graph: settle the config first"):
        ttrain.tt_shape(_config(None, rank=None), planted.num_nodes)
    settled = ttrain.settle_by_graph(_config(None, rank=None), planted)
    assert ttrain.tt_shape(settled, planted.num_nodes).ranks[1] == settled.rank


def test_a_tt_shape_error_names_the_graphs_table():
    # the settings never name the node count, so a shape that does not fit the graph says whose table it is
    with pytest.raises(ValueError, match=r"^the TT table of this graph \(2,708 rows, one per node; dim 16\): "
                                         r"row_shape \[10, 10\] covers 100 rows, fewer than num_embeddings=2708"):
        ttrain.tt_shape(_config(None, rank=4, dim=16, row_shape=[10, 10], col_shape=[4, 4]), 2708)
    with pytest.raises(ValueError, match=r"^the TT table of this graph \(2,708 rows, .*: col_shape \[4, 4, 4\] "
                                         r"multiplies to 64"):
        ttrain.tt_shape(_config(None, rank=None, dim=16, compression=10.0, col_shape=[4, 4, 4]), 2708)


def test_the_auto_init_of_a_narrow_table_takes_at_most_its_width_in_eigenvectors(planted):
    few = dataclasses.replace(planted, split=dict(planted.split, train=planted.split["train"][:10]))
    narrow = ttrain.settle_by_graph(_config(None, init="auto", dim=6, col_shape=None), few)
    assert (narrow.init, narrow.spectral_vectors) == ("spectral", 6)  # 8 by default, capped at dim=6
    narrow.validate()  # the settled count is one the table can hold
    wide = ttrain.settle_by_graph(_config(None, init="auto", dim=16, col_shape=None), few)
    assert (wide.init, wide.spectral_vectors) == ("spectral", 8)


def _pairs(num_pairs: int) -> NodeDataset:
    """``2 * num_pairs`` nodes joined in pairs, one training node: few labels, so the automatic init is
    spectral, on a graph with ``num_pairs - 1`` eigenvectors past its trivial ones."""
    n = 2 * num_pairs
    edges = np.stack([np.arange(0, n, 2), np.arange(1, n, 2)])
    split = {"train": torch.tensor([0]), "valid": torch.arange(1, num_pairs), "test": torch.arange(num_pairs, n)}
    return NodeDataset(name="pairs", num_nodes=n, edge_index=edges, labels=torch.arange(n) % 2, split=split,
                       num_classes=2)


def test_the_auto_init_takes_at_most_the_eigenvectors_the_graph_has(tmp_path, caplog):
    # the automatic 8 on a graph with 5 to give failed in eigsh's limit check, with a setting never given
    caplog.set_level(logging.INFO, logger="ttgnn.train")
    pairs = _pairs(6)
    settled = ttrain.settle_by_graph(_config(None, init="auto", col_shape=None), pairs)
    assert (settled.init, settled.spectral_vectors) == ("spectral", 5)
    assert "table init: 5 eigenvectors, not 8: all that a graph of 12 nodes has to give past its trivial ones " \
           "(one per connected component)" in _messages(caplog)
    assert ttrain.settle_by_graph(_config(None, init="auto", col_shape=None), _pairs(9)).spectral_vectors == 8
    train(_config(tmp_path / "auto", init="auto", col_shape=None, epochs=1), pairs)  # trains
    # a count given is not changed: it is refused by the setting's name
    with pytest.raises(ValueError, match=r"^spectral_vectors=6: a graph of 12 nodes has at most 5 eigenvectors to "
                                         r"give past its trivial ones \(one per connected component\); give "
                                         r"spectral_vectors=5 or fewer$"):
        train(_config(tmp_path / "given", init="auto", spectral_vectors=6, col_shape=None, epochs=1), pairs)


def test_the_loss_left_to_the_rule_is_settled_by_the_model_the_mode_and_the_labels(tmp_path, planted, caplog):
    few = dataclasses.replace(planted, split=dict(planted.split, train=planted.split["train"][:10]))
    gat = _config(None, model="gat", loss=None)
    assert ttrain.settle_by_graph(gat, planted).loss == "log-ce"  # half the nodes are training nodes
    assert ttrain.settle_by_graph(gat, few).loss == "ce"  # 10 of 400
    assert ttrain.settle_by_graph(dataclasses.replace(gat, mode="minibatch"), planted).loss == "ce"
    assert ttrain.settle_by_graph(dataclasses.replace(gat, model="sage"), planted).loss == "ce"
    assert ttrain.settle_by_graph(dataclasses.replace(gat, loss="ce"), planted).loss == "ce"
    # the run trains with the settled loss, records it, says why, and refuses to resume with another
    caplog.set_level(logging.INFO, logger="ttgnn")
    metrics = train(dataclasses.replace(gat, epochs=1, output_dir=str(tmp_path)), planted)
    assert metrics["settings"]["loss"] == "log-ce"
    assert any(r.getMessage().startswith("loss log-ce: the default for gat in full-graph mode") for r in caplog.records)
    with pytest.raises(ValueError, match="written with loss='log-ce', this run has loss='ce'"):
        train(dataclasses.replace(gat, epochs=2, loss="ce", output_dir=str(tmp_path), resume=True), planted)


@pytest.mark.parametrize("budget", [{}, {"max_params": 900}, {"compression": 5.0}])
def test_the_tt_shape_keeps_the_given_cores_and_shapes(budget):
    for shapes in (dict(num_cores=4), dict(row_shape=[4, 10, 10], col_shape=[2, 2, 4])):
        shape = ttrain.tt_shape(_config(None, rank=3, **shapes, **budget), 400)
        if "row_shape" in shapes:
            assert list(shape.row_shape) == [4, 10, 10] and list(shape.col_shape) == [2, 2, 4]
        else:
            assert len(shape.row_shape) == len(shape.col_shape) == 4
        if not budget:
            assert shape == TTShape.build(400, 16, 3, shapes.get("num_cores"), shapes.get("row_shape"),
                                          shapes.get("col_shape"))


def test_the_spectral_init_keeps_unusual_tt_shapes_and_logs_its_error(tmp_path, planted, caplog):
    # Shapes unlike the automatic ones, at full rank for them: the TT table is the eigenvector table.
    config = _config(None, init="spectral", init_scale=0.1, rank=64, row_shape=[4, 10, 10], col_shape=[2, 2, 4],
                     order="random", seed=2, cache_dir=str(tmp_path))
    caplog.set_level(logging.INFO, logger="ttgnn")
    model = build_classifier(config, planted)
    expected = spectral_table(*planted.csr(), planted.num_nodes, 16, std=0.1, seed=2)
    torch.testing.assert_close(model.node_input(None).detach(), expected, rtol=1e-4, atol=1e-5)
    assert "spectral init: TT-SVD of the eigenvector table, relative error 0.000" in _messages(caplog)


@pytest.mark.parametrize("embedding,bytes_per_entry", [("full", 4), ("tt", 28)])
def test_the_spectral_init_refuses_a_table_beyond_the_available_memory(planted, monkeypatch, embedding,
                                                                       bytes_per_entry):
    # float32 for the full table; a TT table adds a float64 copy and the TT-SVD's working copies.
    need = planted.num_nodes * 16 * bytes_per_entry
    config = _config(None, embedding=embedding, init="spectral")
    monkeypatch.setattr(spectral, "available_memory", lambda: need)
    build_classifier(config, planted)  # exactly enough
    monkeypatch.setattr(spectral, "available_memory", lambda: need - 1)
    with pytest.raises(MemoryError, match="the spectral init builds a dense 400 x 16 table"):
        build_classifier(config, planted)


def test_peak_memory_is_the_resident_high_water_mark_in_mib():
    # getrusage's ru_maxrss is in KiB on Linux (the kernel's VmHWM, updated lazily)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = ttrain._peak_memory(torch.device("cpu"))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert before / 1024 <= peak["peak_memory_mib"] <= after / 1024
    assert set(peak) == {"peak_memory_mib"}  # no GPU figure for a CPU run


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_label_smoothing_reaches_the_loss(tmp_path, planted, mode):
    # The first epoch's loss is taken before any step: smoothing alone changes it. The runs are otherwise
    # the same computation (same seed, same draws), so any difference is the smoothing's; at the initial,
    # nearly uniform predictions it is small (0.07% with the dropout masks of 2026-12-07), so the bound is
    # far below that, above float rounding alone.
    plain = train(_config(tmp_path / "plain", mode=mode, epochs=1, correct_smooth=False), planted)
    smooth = train(_config(tmp_path / "smooth", mode=mode, epochs=1, correct_smooth=False, label_smoothing=0.5),
                   planted)
    assert abs(smooth["epochs"][0]["loss"] - plain["epochs"][0]["loss"]) > 1e-5


def test_metrics_json_is_the_returned_summary_and_a_run_without_folder_writes_nothing(tmp_path, planted):
    m = train(_config(tmp_path, epochs=2), planted)
    assert "correct_smooth" in m
    assert json.loads((tmp_path / ttrain.METRICS_NAME).read_text()) == json.loads(json.dumps(m))
    no_folder = train(_config(None, epochs=2), planted)
    assert no_folder["best_epoch"] >= 1 and "correct_smooth" in no_folder


def test_a_best_model_of_another_epoch_is_named_in_the_error(tmp_path, planted):
    config = _config(tmp_path, epochs=2)
    m = train(config, planted)
    best = ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)
    ttrain.save_best_model(tmp_path / BEST_MODEL_NAME, epoch=best["epoch"] + 5, model=best["model"],
                           settings=best["settings"])
    message = (f"corrupted checkpoint {tmp_path / BEST_MODEL_NAME}: it holds epoch {best['epoch'] + 5}, "
               f"{tmp_path / CHECKPOINT_NAME} says the best epoch is {m['best_epoch']}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        train(dataclasses.replace(config, epochs=3, resume=True), planted)


def _recording_batches(monkeypatch) -> list:
    """Record the output nodes of every sampled batch (a list of lists, one per epoch's batch)."""
    seen, real = [], ttrain.device_batches

    def recorded(loader, gnn, device):
        for batch in real(loader, gnn, device):
            seen.append(batch[1].tolist())
            yield batch

    monkeypatch.setattr(ttrain, "device_batches", recorded)
    return seen


def test_minibatches_are_shuffled_afresh_every_epoch(tmp_path, planted, monkeypatch):
    seen = _recording_batches(monkeypatch)
    train(_config(tmp_path, mode="minibatch", epochs=2, correct_smooth=False), planted)
    train_nodes = planted.split["train"].tolist()
    per_epoch = len(seen) // 2
    first, second = sum(seen[:per_epoch], []), sum(seen[per_epoch:], [])
    assert sorted(first) == sorted(second) == sorted(train_nodes)  # every training node once per epoch
    assert first != train_nodes and first != second


def test_a_minibatch_epoch_of_one_training_node_reports_its_loss(tmp_path, planted):
    one = dataclasses.replace(planted, split=dict(planted.split, train=planted.split["train"][:1]))
    loss, full = _first_losses(tmp_path, one)
    assert loss == pytest.approx(full, rel=1e-5)


def test_a_minibatch_epoch_loss_is_summed_in_double_precision(tmp_path, planted, monkeypatch):
    # Each batch's float32 loss, weighted by its size, is summed in float64: the epoch's loss is
    # exactly the Python-float sum divided by the node count (a float32 sum differs in the last bits).
    batches = []
    node_loss = ttrain.node_loss

    def recorded(logits, labels, *args, **kw):
        loss = node_loss(logits, labels, *args, **kw)
        if torch.is_grad_enabled():  # training steps (evaluation runs under no_grad)
            batches.append((float(loss), labels.numel()))
        return loss

    monkeypatch.setattr(ttrain, "node_loss", recorded)
    m = train(_config(tmp_path, mode="minibatch", epochs=1, batch_size=16, correct_smooth=False), planted)
    assert len(batches) == math.ceil(planted.split["train"].numel() / 16)
    total = 0.0
    for loss, size in batches:
        total += loss * size
    assert m["epochs"][0]["loss"] == total / sum(size for _, size in batches)


def test_minibatches_are_sampled_in_the_training_process(tmp_path, planted, monkeypatch):
    # No sampling worker processes: DGL's workers fork the process after torch has started its
    # thread pools, and the shard and seed of each step are drawn in this process.
    import dgl

    workers = []
    loader = dgl.dataloading.DataLoader

    def recorded(*args, **kw):
        workers.append(kw.get("num_workers"))
        return loader(*args, **kw)

    monkeypatch.setattr(dgl.dataloading, "DataLoader", recorded)
    train(_config(tmp_path, mode="minibatch", epochs=2, correct_smooth=False), planted)
    assert len(workers) >= 2 and set(workers) == {0}  # each epoch's training loader, and evaluation's


@pytest.mark.parametrize("progress", [True, False])
def test_the_batch_progress_bar_is_named_by_epoch_and_cleared_after_it(tmp_path, planted, capsys, progress):
    train(_config(tmp_path, mode="minibatch", epochs=2, progress=progress, correct_smooth=False), planted)
    err = capsys.readouterr().err
    if not progress:
        assert "epoch 1:" not in err and "epoch 2:" not in err
        return
    assert "epoch 1:" in err
    last = err[err.rindex("epoch 2:"):]
    assert last.endswith("\r") and "\n" not in last  # erased, not left on the screen


def _run(tmp_path, planted, **kw):
    config = _config(tmp_path, **kw)
    return ttrain.setup_run(config, planted, 0, 1, torch.device("cpu"))


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_setup_converts_the_graph_for_the_tensor_layers_in_full_graph_mode_only(tmp_path, planted, mode):
    # Full-graph mode: the graph becomes index tensors once, in setup (not at every forward);
    # mini-batch mode keeps the DGL graph, from which blocks are sampled.
    import dgl

    from ttgnn.layers import SparseGraph

    run = _run(tmp_path, planted, mode=mode, gnn_backend="torch")
    if mode == "full":
        assert isinstance(run.graph, SparseGraph) and run.graph.num_dst == planted.num_nodes
    else:
        assert isinstance(run.graph, dgl.DGLGraph) and run.graph.num_nodes() == planted.num_nodes


def test_build_classifier_gives_an_orthogonal_table_when_asked(planted):
    # init "ortho": the TT table's columns are orthogonal, each of squared norm
    # init_scale^2 * rows (rows 20 x 20 = the 400 nodes, no padding); the gaussian init is not.
    grams = {}
    for init in ("ortho", "gaussian"):
        config = _config(None, init=init, init_scale=0.5, row_shape=[20, 20], col_shape=[4, 4])
        model = build_classifier(config, planted)
        with torch.no_grad():
            weight = model.node_input.table.full_weight().double()
        assert weight.shape == (400, 16)
        grams[init] = weight.T @ weight / (0.5**2 * 400)
    eye = torch.eye(16, dtype=torch.float64)
    torch.testing.assert_close(grams["ortho"], eye, rtol=0, atol=1e-5)
    assert (grams["gaussian"] - eye).abs().max() > 0.05


@pytest.mark.parametrize("init", ["auto", "spectral"])
def test_a_feature_input_is_used_as_given_whatever_the_table_init(planted, init):
    # Few training nodes (10 of 400) would make "auto" pick the spectral init for a table; a
    # feature matrix is not a table: no eigenvectors, the features unchanged, the init left as set.
    features = torch.randn(planted.num_nodes, 5, generator=torch.Generator().manual_seed(0))
    dataset = dataclasses.replace(planted, features=features,
                                  split=dict(planted.split, train=planted.split["train"][:10]))
    config = _config(None, embedding="features", init=init)
    assert ttrain.settle_by_graph(config, dataset).init == init
    assert ttrain.settle_by_graph(_config(None, init="auto"), dataset).init == "spectral"  # a table would
    model = build_classifier(config, dataset)
    assert torch.equal(model.node_input(torch.arange(planted.num_nodes)), features)


def test_train_epoch_shows_no_progress_bar_unless_asked(tmp_path, planted, capsys):
    run = _run(tmp_path, planted, mode="minibatch")
    ttrain.train_epoch(run, 1)
    assert "epoch 1:" not in capsys.readouterr().err
    ttrain.train_epoch(run, 2, show_progress=True)
    assert "epoch 2:" in capsys.readouterr().err


def test_an_epochs_dropout_is_drawn_from_the_seed_rank_and_epoch(tmp_path, planted):
    # Nothing learned: each loss differs from the first only through the dropout masks of its epoch.
    run = _run(tmp_path, planted, dropout=0.5, **_NO_LEARNING)
    first = ttrain.train_epoch(run, 1)
    assert ttrain.train_epoch(run, 1) == first  # the same draws again
    assert ttrain.train_epoch(run, 2) != first
    run.process_rank = 1
    assert ttrain.train_epoch(run, 1) != first
    run.process_rank = 0
    run.config = dataclasses.replace(run.config, seed=5)
    assert ttrain.train_epoch(run, 1) != first


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_the_known_labels_of_an_epoch_are_the_model_input(tmp_path, planted, mode):
    run = _run(tmp_path, planted, mode=mode, label_input=True, label_rate=0.5, label_spread=0)  # the ids themselves
    given, real = [], run.net.forward

    def forward(*args, input_labels=None):
        given.append(input_labels)
        return real(*args, input_labels=input_labels)

    run.net.forward = forward
    ttrain.train_epoch(run, 3)
    known, _ = ttrain.split_known(planted.split["train"], 0.5, 0, 3)
    expect = torch.full((planted.num_nodes,), 4)
    expect[known] = planted.labels[known]
    assert given and all(torch.equal(labels, expect) for labels in given)


def test_correct_and_smooth_leaves_the_runs_model_at_its_last_weights(tmp_path, planted):
    run = _run(tmp_path, planted, epochs=3)
    for epoch in (1, 2, 3):
        loss = ttrain.train_epoch(run, epoch)
        ttrain.evaluate_and_checkpoint(run, epoch, loss, 0.0)
    last = {k: v.clone() for k, v in run.model.state_dict().items()}
    # a best epoch unlike the last (its weights zero; a TT table's row count kept, or it would not load)
    run.best_state = {k: torch.zeros_like(v) if v.is_floating_point() else v.clone() for k, v in last.items()}
    ttrain.finish_run(run)
    assert all(torch.equal(v, last[k]) for k, v in run.model.state_dict().items())


def test_an_epoch_record_and_its_log_line(tmp_path, planted, caplog):
    caplog.set_level(logging.INFO, logger="ttgnn")
    m = train(_config(tmp_path, epochs=2), planted)
    best = ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)
    assert best["settings"] == m["settings"]  # enough to rebuild the model from best_model.pt
    pattern = (r"epoch +(\d+) \| loss (\d\.\d{4}) \| train \d\.\d{4} valid (\d\.\d{4}) test \d\.\d{4} \| "
               r"best valid \d\.\d{4} \(test \d\.\d{4}, epoch \d+\) \| \d+\.\d\ds train \+ \d+\.\d\ds eval \| "
               r"peak mem \d+ MiB")
    lines = [re.fullmatch(pattern, line) for line in _messages(caplog) if line.startswith("epoch")]
    assert [int(line.group(1)) for line in lines] == [1, 2]
    for line, record in zip(lines, m["epochs"]):
        assert set(record) == {"epoch", "loss", "train_acc", "valid_acc", "test_acc", "valid_loss", "epoch_time",
                               "eval_time", "lr", "peak_memory_mib"}
        assert record["lr"] == 0.01  # the constant schedule
        assert float(line.group(2)) == pytest.approx(record["loss"], abs=5e-5)
        assert float(line.group(3)) == pytest.approx(record["valid_acc"], abs=5e-5)
        assert 0.0 <= record["eval_time"] < 60.0 and 0.0 <= record["epoch_time"] < 60.0
        assert record["valid_loss"] > 0.0


def test_a_tie_in_validation_accuracy_keeps_the_earlier_epoch_as_best(tmp_path, planted):
    # Nothing learned: every epoch has the same validation accuracy.
    m = train(_config(tmp_path, epochs=3, dropout=0.0, **_NO_LEARNING), planted)
    assert len({r["valid_acc"] for r in m["epochs"]}) == 1
    assert m["best_epoch"] == 1 and ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["epoch"] == 1


@pytest.mark.parametrize("embedding,gnn_backend", [("tt", "dgl"), ("full", "torch")])
def test_the_metrics_name_the_run(tmp_path, planted, embedding, gnn_backend):
    m = train(_config(tmp_path, embedding=embedding, order="random", gnn_backend=gnn_backend, epochs=1,
                      correct_smooth=False), planted)
    assert (m["dataset"], m["model"], m["embedding"], m["gnn_backend"]) == (planted.name, "sage", embedding,
                                                                            gnn_backend)
    assert m["order"] == ("random" if embedding == "tt" else None)  # a full table has no TT order


def test_a_new_run_starts_with_empty_metrics(tmp_path, planted):
    run = _run(tmp_path, planted)
    m = run.metrics
    assert (m["best_valid_acc"], m["test_acc"], m["best_epoch"], m["epochs"], m["world_size"]) == (0.0, 0.0, 0, [], 1)
    table = run.model.node_input.table
    assert (m["row_shape"], m["col_shape"], m["ranks"]) == (list(table.row_shape), list(table.col_shape),
                                                            list(table.ranks))
    full = _run(tmp_path / "full", planted, embedding="full").metrics
    assert not {"row_shape", "col_shape", "ranks"} & set(full) and full["rank"] is None


def test_restore_run_resumes_only_when_asked_and_says_when_there_is_nothing(tmp_path, planted, caplog):
    train(_config(tmp_path, epochs=2, correct_smooth=False), planted)
    with pytest.raises(ValueError, match=r"already holds a run \(checkpoint.pt, best_model.pt, metrics.json\)"):
        _run(tmp_path, planted, epochs=4)  # neither resume nor overwrite: refused by setup_run
    fresh = _run(tmp_path, planted, epochs=4, overwrite=True)  # resume not set: the checkpoint there is not read
    ttrain.restore_run(fresh)
    assert fresh.start_epoch == 1 and fresh.metrics["epochs"] == []
    resumed = _run(tmp_path, planted, epochs=4, resume=True)
    ttrain.restore_run(resumed)
    assert resumed.start_epoch == 3 and len(resumed.metrics["epochs"]) == 2
    empty, not_resuming = (_run(tmp_path / "empty", planted, epochs=4, resume=resume) for resume in (True, False))
    caplog.set_level(logging.INFO, logger="ttgnn")
    caplog.clear()
    ttrain.restore_run(empty)
    assert empty.start_epoch == 1
    assert _messages(caplog) == [f"no checkpoint at {tmp_path / 'empty' / CHECKPOINT_NAME}; starting from scratch"]
    caplog.clear()
    ttrain.restore_run(not_resuming)  # nothing to say
    assert _messages(caplog) == []


def test_resuming_with_other_settings_names_the_checkpoint_and_both_values(tmp_path, planted):
    train(_config(tmp_path, epochs=1, correct_smooth=False), planted)
    message = (f"checkpoint {tmp_path / CHECKPOINT_NAME} was written with model='sage', "
               f"this run has model='gat' (a default may have changed since): give model='sage' (--model sage) to "
               f"continue that run, or another output folder")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        train(_config(tmp_path, model="gat", epochs=2, resume=True), planted)


def test_a_data_parallel_torchrun_job_is_known_by_its_run_id_or_else_by_its_agent(monkeypatch):
    import os
    import socket

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert ttrain._elastic_job(2) is None  # not under torchrun
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "a1b2-uuid")
    assert ttrain._elastic_job(2) == "a1b2-uuid" and ttrain._elastic_job(1) is None
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's default: any job may have it
    assert ttrain._elastic_job(2) == f"none@{socket.gethostname()}:{os.getppid()}"


def test_the_epoch_progress_bar_of_a_full_graph_run_counts_from_where_it_resumes(tmp_path, planted, capsys):
    config = _config(tmp_path, epochs=3, progress=True, correct_smooth=False)
    train(config, planted)
    err = capsys.readouterr().err
    assert "epochs:   0%" in err and "| 0/3 [" in err
    last = err[err.rindex("epochs:"):]
    assert last.endswith("\r") and "\n" not in last  # erased, not left on the screen
    train(dataclasses.replace(config, epochs=4, resume=True), planted)
    err = capsys.readouterr().err
    assert "| 3/4 [" in err and "| 0/4 [" not in err
    train(_config(tmp_path / "quiet", epochs=2, progress=False), planted)
    train(_config(tmp_path / "batches", epochs=2, progress=True, mode="minibatch"), planted)
    assert "epochs:" not in capsys.readouterr().err  # off, or the batch bars only


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_the_classifier_is_built_with_every_network_setting(planted, model):
    config = _config(None, model=model, hidden=24, num_layers=3, dropout=0.3, input_dropout=0.2, norm="layer",
                     residual=True, heads=2, attn_dropout=0.1, label_input=True, gnn_backend="torch")
    classifier = build_classifier(config, planted)
    gnn = classifier.gnn
    assert (gnn.backend, gnn.num_layers, gnn.hidden, gnn.residual) == ("torch", 3, 24, True)
    assert (gnn.dropout.p, gnn.input_dropout.p) == (0.3, 0.2)
    assert len(gnn.norms) == 2 and all(isinstance(norm, torch.nn.LayerNorm) for norm in gnn.norms)
    if model == "gat":
        assert (gnn.heads, gnn.attn_dropout) == (2, 0.1)
    assert classifier.label_input is not None
    # the backend: the settings' ("auto" on a CPU: the tensor layers for full-graph GAT, else DGL's),
    # unless the caller names one
    auto = build_classifier(dataclasses.replace(config, gnn_backend="auto"), planted).gnn.backend
    assert auto == ("torch" if model == "gat" and config.mode == "full" else "dgl")
    minibatch = dataclasses.replace(config, gnn_backend="auto", mode="minibatch", fanouts=[5, 5, 5])
    assert build_classifier(minibatch, planted).gnn.backend == "dgl"
    assert build_classifier(config, planted, gnn_backend="dgl").gnn.backend == "dgl"


def test_the_tt_table_has_the_settings_shape_order_and_seeded_cores(planted):
    config = _config(None, rank=3, row_shape=[4, 10, 10], col_shape=[2, 2, 4], order="random", seed=4)
    table = build_classifier(config, planted).node_input.table
    shape = ttrain.tt_shape(config, planted.num_nodes)
    assert (list(table.ranks), list(table.row_shape), list(table.col_shape)) == (
        list(shape.ranks), [4, 10, 10], [2, 2, 4])
    expect = hierarchical_order(planted.csr(), [4, 10, 10], method="random", seed=4)
    assert table.node_order.tolist() == list(expect.perm)
    again = build_classifier(config, planted).node_input.table
    other = build_classifier(dataclasses.replace(config, seed=5), planted).node_input.table
    assert all(torch.equal(a, b) for a, b in zip(table.cores, again.cores))  # drawn from the seed
    assert not torch.equal(table.cores[0], other.cores[0])


def test_the_optimiser_gives_the_table_and_the_network_their_own_rates_and_decays(tmp_path, planted):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run = _run(tmp_path, planted, lr=0.01, weight_decay=1e-4, emb_lr=0.05, emb_weight_decay=1e-6, num_threads=1)
        assert torch.get_num_threads() == 1  # the run's thread count
    finally:
        torch.set_num_threads(threads)
    gnn_group, table_group = run.optimizer.param_groups
    assert (gnn_group["lr"], gnn_group["weight_decay"]) == (0.01, 1e-4)
    assert (table_group["lr"], table_group["weight_decay"]) == (0.05, 1e-6)
    assert {id(p) for p in table_group["params"]} == {id(p) for p in run.model.node_input.parameters()}


@pytest.mark.parametrize("usable,warned", [(4, False), (2, True)])
def test_more_threads_than_usable_cpus_is_warned(tmp_path, planted, monkeypatch, caplog, usable, warned):
    monkeypatch.setattr(ttrain, "_usable_cpus", lambda: usable)
    threads = torch.get_num_threads()
    try:
        with caplog.at_level(logging.WARNING, logger="ttgnn.train"):
            _run(tmp_path, planted, num_threads=3)
        assert torch.get_num_threads() == 3  # still set as asked
    finally:
        torch.set_num_threads(threads)
    assert ("--num-threads 3 is more than the 2 CPU(s)" in caplog.text) == warned


def test_setup_run_loads_the_dataset_from_the_settings_root_and_cache(tmp_path, monkeypatch):
    write_raw_dataset(tmp_path / "data" / "tiny", num_nodes=300, num_classes=3)
    monkeypatch.delenv("TTGNN_DATA", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./dataset: only the given root has the graph
    config = _config(None, dataset="tiny", root=str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"))
    run = ttrain.setup_run(config, None, 0, 1, torch.device("cpu"))
    assert (run.dataset.num_nodes, run.dataset.num_classes) == (300, 3)
    (tmp_path / "not-a-folder").write_text("")
    with pytest.raises(ValueError, match="cache directory .*not-a-folder exists and is not a folder"):
        ttrain.setup_run(dataclasses.replace(config, cache_dir=str(tmp_path / "not-a-folder")), None, 0, 1,
                         torch.device("cpu"))


@pytest.mark.parametrize("key,name", [("train", "training"), ("valid", "validation"), ("test", "test")])
def test_unlabeled_split_nodes_are_refused_by_name(planted, key, name):
    # before, an unlabeled validation or test node failed inside the loss ("Target -1 is out of bounds")
    labels = planted.labels.clone()
    labels[planted.split[key][[3, 5]]] = -1
    with pytest.raises(ValueError, match=rf"^{name} nodes of planted-400 include 2 unlabeled node\(s\) \(label -1\)$"):
        train(_config(None, epochs=1), dataclasses.replace(planted, labels=labels))


def test_a_checkpoint_write_restores_the_callers_sigint_handler():
    def handler(signum, frame):
        pass

    before = signal.signal(signal.SIGINT, handler)
    try:
        with ttrain._deferred_interrupt():
            assert signal.getsignal(signal.SIGINT) is not handler  # held back meanwhile
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_while_the_best_model_is_written_waits_for_the_checkpoint(tmp_path, planted, monkeypatch):
    # SIGINT arriving during best_model.pt's write (torch.save would fail half-way with its own
    # error) is held until the epoch's checkpoint is written too, then stops the run cleanly.
    import os

    real = ttrain.save_best_model

    def interrupted(*args, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kw)

    monkeypatch.setattr(ttrain, "save_best_model", interrupted)
    # SIGINT as at a terminal: a test run started in the background (`make test &`) inherits it
    # ignored, and the run then rightly keeps ignoring it.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(TrainingInterrupted) as caught:
            train(_config(tmp_path, epochs=3), planted)
    finally:
        signal.signal(signal.SIGINT, before)
    assert caught.value.epoch == 1 and caught.value.checkpoint == tmp_path / CHECKPOINT_NAME
    assert ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["epoch"] == 1
    assert ttrain.load_checkpoint(tmp_path / CHECKPOINT_NAME)["epoch"] == 1


def test_a_checkpoint_that_does_not_fit_the_model_is_named_in_the_error(tmp_path, planted):
    config = _config(tmp_path, epochs=1, correct_smooth=False)
    train(config, planted)
    state = ttrain.load_checkpoint(tmp_path / CHECKPOINT_NAME)
    name = next(iter(state["model"]))
    state["model"][name] = torch.zeros(3, 3, 3)  # the wrong shape for the model
    save_checkpoint(tmp_path / CHECKPOINT_NAME, epoch=state["epoch"], model=state["model"],
                    optimizer=state["optimizer"], metrics=state["metrics"], settings=state["settings"])
    prefix = re.escape(f"corrupted checkpoint {tmp_path / CHECKPOINT_NAME}: ")
    with pytest.raises(ValueError, match=f"(?s)^{prefix}.*{name}"):  # the loader's error, over several lines
        train(dataclasses.replace(config, epochs=2, resume=True), planted)


@pytest.mark.parametrize("config", [None, {"dataset": "planted"}])
def test_train_refuses_a_config_that_is_not_a_train_config(config):
    with pytest.raises(TypeError, match=f"config must be a TrainConfig, got {type(config).__name__}"):
        train(config)


def test_train_refuses_a_dataset_that_is_not_a_node_dataset(tmp_path):
    with pytest.raises(TypeError, match=r"dataset must be a NodeDataset \(ttgnn.data.load_dataset loads one\), got str"):
        train(_config(tmp_path), "planted")
    assert not tmp_path.joinpath(CHECKPOINT_NAME).exists()


def test_a_run_given_a_dataset_records_that_graphs_name(tmp_path, planted, caplog):
    # The setting's default names ogbn-arxiv; the run trains on the graph given, and its saved
    # settings (which `ttgnn predict` loads the graph by) and metrics name that graph.
    caplog.set_level(logging.WARNING, logger="ttgnn")
    metrics = train(_config(tmp_path, dataset="ogbn-arxiv", epochs=1), planted)
    assert ("the dataset given is 'planted-400' but config.dataset is 'ogbn-arxiv': the run trains on "
            "'planted-400' and records that name") in _messages(caplog)
    assert metrics["dataset"] == "planted-400"
    assert ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["settings"]["dataset"] == "planted-400"
    assert json.loads((tmp_path / "metrics.json").read_text())["settings"]["dataset"] == "planted-400"


def test_a_run_given_a_dataset_keeps_a_folder_path_that_ends_in_its_name(tmp_path, planted, caplog):
    caplog.set_level(logging.WARNING, logger="ttgnn")
    train(_config(tmp_path, dataset="graphs/planted-400", epochs=1), planted)
    assert "config.dataset" not in _messages(caplog)
    # (made absolute: the run is found again from any directory)
    assert ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["settings"]["dataset"] == os.path.abspath(
        "graphs/planted-400")


def test_a_loss_that_turns_nan_stops_the_run_and_keeps_the_epoch_before(tmp_path, planted):
    # GAT at the largest learning rate: epoch 1 trains, its step sends epoch 2's loss to NaN. The run
    # used to go on to the last epoch with NaN weights and report what it had.
    config = _config(tmp_path, model="gat", epochs=4, lr=1e6, emb_lr=1e6)
    with pytest.raises(ttrain.TrainingDiverged) as caught:
        train(config, planted)
    err = caught.value
    assert isinstance(err, ValueError) and err.epoch == 2 and math.isnan(err.loss)
    assert err.checkpoint == tmp_path / CHECKPOINT_NAME
    best = json.loads((tmp_path / "metrics.json").read_text())
    assert [r["epoch"] for r in best["epochs"]] == [1]
    assert str(err) == (f"training diverged: the loss is nan in epoch 2; start again with lower learning rates or a "
                        f"smaller init_scale (this run: lr 1e+06, emb_lr 1e+06, init_scale 0.1); {tmp_path} keeps "
                        f"epoch 1's checkpoint and the best model (epoch 1, validation accuracy "
                        f"{best['best_valid_acc']:.4f})")
    assert ttrain.load_checkpoint(tmp_path / CHECKPOINT_NAME)["epoch"] == 1
    assert ttrain.load_checkpoint(tmp_path / BEST_MODEL_NAME)["epoch"] == 1


@pytest.mark.parametrize("out", [True, False])
def test_a_nan_loss_in_the_first_epoch_of_a_minibatch_run_says_nothing_was_kept(tmp_path, planted, out, monkeypatch):
    loss = ttrain.node_loss
    monkeypatch.setattr(ttrain, "node_loss", lambda *a, **k: loss(*a, **k) * float("nan"))
    config = _config(tmp_path if out else None, mode="minibatch", epochs=2)
    with pytest.raises(ttrain.TrainingDiverged, match="the loss is nan in epoch 1;") as caught:
        train(config, planted)
    kept = f"no epoch finished, so {tmp_path} holds no checkpoint" if out else "nothing was saved (no output folder)"
    assert str(caught.value).endswith(kept) and caught.value.checkpoint is None
    assert not (tmp_path / CHECKPOINT_NAME).exists()


def test_a_minibatch_epoch_whose_loss_turns_nan_ends_at_the_next_look_not_at_its_end(planted, monkeypatch):
    # 200 training nodes in batches of 4: 50 steps. With a look every 5 steps, a NaN from step 1 on
    # ends the epoch after 5 (it used to run all 50, on a large graph hours).
    monkeypatch.setattr(ttrain, "FINITE_CHECK_STEPS", 5)
    steps = []
    loss = ttrain.node_loss
    monkeypatch.setattr(ttrain, "node_loss", lambda *a, **k: steps.append(1) or loss(*a, **k) * float("nan"))
    config = _config(None, mode="minibatch", batch_size=4, epochs=2)
    with pytest.raises(ttrain.TrainingDiverged, match="the loss is nan in epoch 1;"):
        train(config, planted)
    assert len(steps) == 5


def test_a_minibatch_epoch_of_finite_losses_runs_every_step_past_the_looks(planted, monkeypatch):
    monkeypatch.setattr(ttrain, "FINITE_CHECK_STEPS", 5)
    steps = []
    loss = ttrain.node_loss
    monkeypatch.setattr(ttrain, "node_loss", lambda *a, **k: steps.append(1) or loss(*a, **k))
    metrics = train(_config(None, mode="minibatch", batch_size=4, epochs=1), planted)
    assert len(steps) == 50 and math.isfinite(metrics["epochs"][0]["loss"])


# ---------------------------------------------------------------------- the steps alone, and a changed dataset
def test_a_dataset_changed_after_it_was_built_is_checked_again_when_a_run_starts(tmp_path, planted):
    # validation nodes added to the training split trained on them and reported validation accuracy 1.0
    planted = dataclasses.replace(planted, split=dict(planted.split))  # the fixture is the module's: a copy
    train_ids, valid_ids = planted.split["train"], planted.split["valid"]
    planted.split["train"] = torch.cat([train_ids, valid_ids])
    with pytest.raises(ValueError, match=r"^splits overlap: \d+ node\(s\), e\.g\. node \d+, are in both "
                                         r"split\['train'\] and split\['valid'\]$"):
        train(_config(None), planted)
    planted.split["train"] = torch.zeros(planted.num_nodes, dtype=torch.bool).index_fill_(0, train_ids, True)
    with pytest.raises(TypeError, match=r"^split\['train'\] must hold integers, got dtype torch.bool$"):
        train(_config(None), planted)  # a mask: an IndexError deep in the loss before
    planted.split["train"] = train_ids
    planted.num_classes = 2  # below the labels' classes: "Target 2 is out of bounds" before
    with pytest.raises(ValueError, match=r"^labels must be class ids in \[0, 2\) or -1"):
        ttrain.setup_run(_config(None), planted, 0, 1, torch.device("cpu"))


def test_setup_run_checks_the_settings_and_the_folder_as_train_does(tmp_path, planted):
    out = tmp_path / "run"
    train(_config(out), planted)  # a finished run
    before = (out / "metrics.json").read_text()
    with pytest.raises(ValueError, match=r"^lr must be"):  # a negative rate trained as gradient ascent
        ttrain.setup_run(_config(None, lr=-1.0), planted, 0, 1, torch.device("cpu"))
    with pytest.raises(ValueError, match=rf"^output folder {re.escape(str(out))} already holds a run \("):
        ttrain.setup_run(_config(out), planted, 0, 1, torch.device("cpu"))  # the steps replaced its files
    assert (out / "metrics.json").read_text() == before
    run = ttrain.setup_run(_config(out, overwrite=True), planted, 0, 1, torch.device("cpu"))
    ttrain.evaluate_and_checkpoint(run, 1, ttrain.train_epoch(run, 1), 0.0)
    for epoch in (1, 3):  # recorded [1, 1] before, which a resume then continued
        with pytest.raises(ValueError, match=rf"^epoch {epoch} cannot be recorded next: the run's next epoch is 2 "):
            ttrain.evaluate_and_checkpoint(run, epoch, 0.5, 0.0)
    assert [record["epoch"] for record in run.metrics["epochs"]] == [1]


def test_train_inside_no_grad_trains(planted):
    # a notebook's torch.no_grad() around train(): "element 0 of tensors does not require grad" before
    with torch.no_grad():
        metrics = train(_config(None, epochs=1, correct_smooth=False), planted)
    assert math.isfinite(metrics["epochs"][0]["loss"])
    assert torch.is_grad_enabled()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a CUDA device")
def test_train_on_cuda_without_a_gpu_says_so(planted):
    with pytest.raises(ValueError, match=r"^device 'cuda' requested but torch.cuda.is_available\(\) is False"):
        train(_config(None), planted, device="cuda")  # torch's AssertionError before
