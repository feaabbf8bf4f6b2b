"""The steps of ``ttgnn.train``: what each reports (losses, log lines, progress, summaries), the
table it builds, and how it stops (argument errors, Ctrl-C, the fault hook, a missing best model).

Found by mutation testing (docs/testing.md): each test here fails for a one-line change of
ttgnn/train.py that the end-to-end training tests let through.
"""
import dataclasses
import logging
import math

import pytest
import torch

import ttgnn.distributed as tdist
import ttgnn.train as ttrain
from ttgnn.checkpoint import BEST_MODEL_NAME, CHECKPOINT_NAME
from ttgnn.train import TrainConfig, TrainingInterrupted, build_classifier, summarize, train


def _config(out, **kw) -> TrainConfig:
    base = dict(dataset="planted", model="sage", embedding="tt", dim=16, rank=4, order="identity", hidden=16,
                num_layers=2, epochs=2, mode="full", fanouts=[5, 5], batch_size=64,
                output_dir=str(out) if out else None, progress=False, num_threads=1, label_input=False, seed=0)
    base.update(kw)
    return TrainConfig(**base)


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ttgnn.train"]


# ---------------------------------------------------------------------- losses and progress
@pytest.mark.parametrize("batch_size", [64, 1000])
def test_a_minibatch_epoch_loss_is_the_mean_over_the_training_nodes(tmp_path, planted, batch_size):
    # With nothing learned (learning rates of 1e-12, no dropout) and every neighbour sampled (fan-outs above
    # any degree), each batch's loss is the full graph's loss on its nodes; the epoch's loss is their
    # mean weighted by batch size (64: batches of 64 and a smaller last one), i.e. the full graph's.
    frozen = dict(lr=1e-12, emb_lr=1e-12, dropout=0.0, norm="none", epochs=1, fanouts=[1000, 1000],
                  batch_size=batch_size)
    full = train(_config(tmp_path / "full", **frozen), planted)
    mini = train(_config(tmp_path / "mini", mode="minibatch", **frozen), planted)
    loss = mini["epochs"][0]["loss"]
    assert loss == pytest.approx(full["epochs"][0]["loss"], rel=1e-5)
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
    config = _config(tmp_path, init="auto", max_params=600)
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
    assert caught.value.epoch == saved
    assert caught.value.checkpoint == (tmp_path / CHECKPOINT_NAME if saved else None)


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
