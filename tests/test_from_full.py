"""``from_full``: train the full table, compress its best table into TT by TT-SVD, fine-tune."""
import functools
import re
import json

import pytest

from ttgnn.cli import build_parser, config_from_args
from ttgnn.config import TrainConfig, auto_rank, from_full_for
from ttgnn.train import FULL_TABLE_DIR, settle_from_full, train

from configs import small_config

_config = functools.partial(small_config, mode="full", label_input=False, seed=0, epochs=3, from_full=True,
                            finetune_epochs=2, correct_smooth=False)


def _full_metrics(out) -> dict:
    return json.loads((out / FULL_TABLE_DIR / "metrics.json").read_text())


def test_at_full_rank_the_tt_stage_starts_exactly_where_the_full_table_was_best(tmp_path, planted):
    # Ranks at their cap: the TT-SVD is exact, so epoch 0 of the TT stage (the compressed table with
    # the full run's best GNN) scores what the full table's best epoch scored.
    out = tmp_path / "run"
    result = train(_config(out, rank=10_000), planted)
    full = _full_metrics(out)
    start = result["from_full"]
    assert full["embedding"] == "full" and full["embedding_parameters"] == planted.num_nodes * 16
    assert start["svd_relative_error"] < 1e-5
    assert start["full_table"] == {key: full[key] for key in ("best_valid_acc", "test_acc", "best_epoch")}
    assert start["start_valid_acc"] == full["best_valid_acc"]
    assert start["start_test_acc"] == full["test_acc"]
    # The TT stage ran its own epochs and kept the best by validation, epoch 0 included.
    assert [r["epoch"] for r in result["epochs"]] == [1, 2]
    assert result["best_valid_acc"] >= start["start_valid_acc"]
    assert result["best_valid_acc"] == max([start["start_valid_acc"]] + [r["valid_acc"] for r in result["epochs"]])


def test_at_a_low_rank_the_start_is_a_lossy_copy_with_the_tt_size(tmp_path, planted):
    result = train(_config(None, rank=2), planted)
    assert result["embedding"] == "tt" and result["compression_ratio"] > 1
    assert 0.05 < result["from_full"]["svd_relative_error"] < 1.0


def test_the_tt_stage_uses_the_finetune_learning_rate_and_epochs(tmp_path, planted):
    result = train(_config(None, finetune_epochs=3, finetune_lr=0.002), planted)
    assert len(result["epochs"]) == 3
    assert {r["lr"] for r in result["epochs"]} == {0.002}
    full = train(_config(None, embedding="full", from_full=False), planted)
    assert {r["lr"] for r in full["epochs"]} == {TrainConfig().lr}


def test_a_resumed_run_keeps_the_full_tables_run_and_continues_the_tt_stage(tmp_path, planted):
    out = tmp_path / "run"
    first = train(_config(out), planted)
    full_before = _full_metrics(out)
    longer = train(_config(out, resume=True, finetune_epochs=4), planted)
    assert _full_metrics(out)["epochs"] == full_before["epochs"]  # not trained again
    assert longer["epochs"][:2] == first["epochs"]
    assert [r["epoch"] for r in longer["epochs"]] == [1, 2, 3, 4]
    assert longer["from_full"] == first["from_full"]


def test_an_overwritten_run_trains_the_full_table_again(tmp_path, planted):
    out = tmp_path / "run"
    train(_config(out), planted)
    (out / FULL_TABLE_DIR / "metrics.json").write_text("{}")
    train(_config(out, overwrite=True), planted)
    assert len(_full_metrics(out)["epochs"]) == 3
    # an overwrite whose TT table cannot be built fails before either stage's old run is deleted
    kept = {path: path.read_bytes() for path in sorted(out.rglob("*.pt")) + sorted(out.rglob("metrics.json"))}
    assert len(kept) == 6
    with pytest.raises(ValueError, match="covers 4 rows"):
        train(_config(out, overwrite=True, row_shape=[2, 2]), planted)
    assert {path: path.read_bytes() for path in kept} == kept


def test_overwriting_a_from_full_run_without_it_removes_its_full_table_stage(tmp_path, planted):
    # the old first stage stayed in full-table/, where predict and the plots would take it for this run's
    out = tmp_path / "run"
    train(_config(out), planted)
    (out / FULL_TABLE_DIR / "notes.txt").write_text("mine")
    train(_config(out, overwrite=True, from_full=False, epochs=1), planted)
    assert sorted(p.name for p in (out / FULL_TABLE_DIR).iterdir()) == ["notes.txt"]  # the user's file stays
    (out / FULL_TABLE_DIR / "notes.txt").unlink()
    train(_config(tmp_path / "again"), planted)
    train(_config(tmp_path / "again", overwrite=True, from_full=False, epochs=1), planted)
    assert not (tmp_path / "again" / FULL_TABLE_DIR).exists()
    assert json.loads((tmp_path / "again" / "metrics.json").read_text())["settings"]["from_full"] is False
    # a from_full overwrite trains its full table again, in the same place
    train(_config(out, overwrite=True), planted)
    assert len(_full_metrics(out)["epochs"]) == 3


def test_a_resume_its_checkpoint_refuses_fails_before_the_full_table_trains(tmp_path, planted):
    out = tmp_path / "run"
    train(_config(out, from_full=False, epochs=2), planted)
    with pytest.raises(ValueError, match=r"was written with from_full=False, this run has from_full=True"):
        train(_config(out, resume=True), planted)
    assert not (out / FULL_TABLE_DIR).exists()  # the full table's 3 epochs were trained, then thrown away
    # with the rank left to the run, from_full changes it too: the refusal names from_full, not the rank
    out = tmp_path / "auto-rank"
    from ttgnn.data import planted_partition

    graph = planted_partition(3000, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    auto = functools.partial(_config, dataset="planted-3000", rank=None, dim=128, epochs=1, finetune_epochs=1)
    assert train(auto(out, from_full=False), graph)["rank"] != train(auto(tmp_path / "tt-stage"), graph)["rank"]
    with pytest.raises(ValueError, match=r"was written with from_full=False, this run has from_full=True"):
        train(auto(out, resume=True), graph)
    # a from_full run resumes as before
    first = train(_config(tmp_path / "both"), planted)
    assert train(_config(tmp_path / "both", resume=True), planted)["epochs"] == first["epochs"]


@pytest.mark.parametrize("bad,message", [
    (dict(embedding="features"), "needs embedding='tt'"),
    (dict(finetune_epochs=0), "finetune_epochs"),
    (dict(finetune_lr=0.0), "finetune_lr"),
])
def test_bad_settings_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        small_config(None, from_full=True, **bad).validate()


@pytest.mark.parametrize("from_full", [True, None])  # asked for, or left to the graph (few labels: on)
@pytest.mark.parametrize("bad,message", [
    (dict(row_shape=[4, 4]), r"row_shape \[4, 4\] covers 16 rows"),
    (dict(col_shape=[3, 3]), "col_shape"),
])
def test_a_bad_tt_shape_fails_before_the_full_table_trains(tmp_path, monkeypatch, from_full, bad, message):
    from ttgnn import train as train_module
    from ttgnn.data import planted_partition

    few = planted_partition(300, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    monkeypatch.setattr(train_module, "_train_full_table",
                        lambda *a, **k: pytest.fail("the full table trained before the TT shape was checked"))
    with pytest.raises(ValueError, match=message):
        train(_config(tmp_path / "run", from_full=from_full, **bad), few)
    assert not (tmp_path / "run" / FULL_TABLE_DIR).exists()


def test_the_command_line_sets_the_three_settings():
    args = build_parser().parse_args(["train", "--from-full", "--finetune-epochs", "7", "--finetune-lr", "0.002"])
    config = config_from_args(args)
    assert (config.from_full, config.finetune_epochs, config.finetune_lr) == (True, 7, 0.002)
    assert config_from_args(build_parser().parse_args(["train"])).from_full is None  # by the graph
    assert config_from_args(build_parser().parse_args(["train", "--no-from-full"])).from_full is False


@pytest.mark.parametrize("embedding,mode,num_nodes,num_train,world_size,expected", [
    ("tt", "full", 2708, 140, 1, True),              # Cora: few labels
    ("tt", "full", 169_343, 90_941, 1, False),       # ogbn-arxiv: many labels
    ("tt", "full", 2_000_000, 1000, 1, False),       # too large for the full table
    ("tt", "minibatch", 2708, 140, 1, False),
    ("tt", "full", 2708, 140, 2, False),             # data-parallel
    ("full", "full", 2708, 140, 1, False),
])
def test_the_rule_trains_the_full_table_first_only_for_small_graphs_of_few_labels(embedding, mode, num_nodes,
                                                                                   num_train, world_size, expected):
    assert from_full_for(None, embedding, mode, num_nodes, num_train, world_size) is expected
    assert from_full_for(True, embedding, mode, num_nodes, num_train, world_size) is True
    assert from_full_for(False, embedding, mode, num_nodes, num_train, world_size) is False


def test_left_to_the_graph_it_runs_on_a_graph_of_few_labels_and_not_on_others(tmp_path):
    from ttgnn.data import planted_partition

    few = planted_partition(2000, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    many = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.5, seed=0)
    auto = functools.partial(_config, from_full=None, epochs=2)
    on = train(auto(tmp_path / "few", rank=None, dim=128), few)
    off = train(auto(tmp_path / "many"), many)
    assert on["settings"]["from_full"] is True and "from_full" in on
    # the TT rank left to the graph: the largest at >= 100x for a table compressed from a full one
    # (rank 4 otherwise where labels are few)
    largest = auto_rank(2000, 128, sparse_labels=True, largest=True)
    assert on["rank"] == largest > auto_rank(2000, 128, sparse_labels=True)
    assert on["compression_ratio"] >= 100.0
    assert (tmp_path / "few" / FULL_TABLE_DIR / "metrics.json").exists()
    assert off["settings"]["from_full"] is False and "from_full" not in off
    assert not (tmp_path / "many" / FULL_TABLE_DIR).exists()


def test_the_stage_configs_are_the_settings_each_stage_records(tmp_path, planted):
    # What a benchmark compares a finished run with: the two stages' settings, settled by the graph.
    from ttgnn.train import finetune_config, full_table_config, settle_by_graph

    out = tmp_path / "run"
    config = _config(out, from_full=None, finetune_epochs=3, finetune_lr=0.004)
    settled = settle_from_full(config, planted)
    assert settled.from_full is from_full_for(None, "tt", config.mode, planted.num_nodes,
                                              int(planted.split["train"].numel()), 1)
    assert settle_from_full(_config(out, from_full=False), planted).from_full is False  # an explicit value stays
    forced = settle_from_full(_config(out, from_full=True), planted)
    tt = train(forced, planted)
    full = _full_metrics(out)

    def comparable(settings):  # as the file holds them, less the run folder's handling
        return {k: v for k, v in json.loads(json.dumps(settings)).items() if k not in ("resume", "overwrite")}

    assert comparable(tt["settings"]) == comparable(settle_by_graph(finetune_config(forced), planted).settings())
    assert comparable(full["settings"]) == comparable(settle_by_graph(full_table_config(forced), planted).settings())
    stage = full_table_config(forced)
    assert (stage.embedding, stage.from_full, stage.rank, stage.output_dir) == ("full", False, None,
                                                                                 str(out / FULL_TABLE_DIR))
    tuned = finetune_config(forced)
    assert (tuned.epochs, tuned.lr, tuned.emb_lr) == (forced.finetune_epochs, forced.finetune_lr, forced.finetune_lr)


def test_distill_loss_is_zero_on_agreement_and_positive_otherwise():
    import torch

    from ttgnn.losses import distill_loss

    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    assert float(distill_loss(logits, torch.softmax(logits, dim=1))) == pytest.approx(0.0, abs=1e-7)
    teacher = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # KL(one-hot || p) = -log p of the teacher's class, averaged over the rows
    expected = -(torch.log_softmax(logits, 1)[0, 1] + torch.log_softmax(logits, 1)[1, 0]) / 2
    assert float(distill_loss(logits, teacher)) == pytest.approx(float(expected), rel=1e-6)
    with pytest.raises(ValueError, match=r"^logits \(2, 3\) and teacher probabilities \(1, 3\) must have the same shape$"):
        distill_loss(logits, teacher[:1])


def test_distillation_pulls_the_tt_stage_towards_the_full_tables_predictions(tmp_path, planted):
    # The same run with and without the distillation term: the term changes the TT stage's training
    # (and only it: the full table's run and the compressed start are the same).
    plain = train(_config(None, rank=2, finetune_epochs=3, finetune_distill=0.0), planted)
    distilled = train(_config(None, rank=2, finetune_epochs=3, finetune_distill=5.0), planted)
    assert distilled["from_full"] == plain["from_full"]
    assert [r["loss"] for r in distilled["epochs"]] != [r["loss"] for r in plain["epochs"]]
    assert all(d["loss"] > p["loss"] for d, p in zip(distilled["epochs"][:1], plain["epochs"][:1]))


def test_a_full_table_from_itself_starts_exactly_at_its_best_epoch(tmp_path, planted):
    # embedding="full": the second stage starts from the full run's best model as it is (the full
    # table distilled from itself), so epoch 0 scores exactly what the full run's best epoch did.
    out = tmp_path / "run"
    result = train(_config(out, embedding="full"), planted)
    full = _full_metrics(out)
    assert result["embedding"] == "full" and result["compression_ratio"] == 1.0
    assert result["from_full"]["svd_relative_error"] == 0.0
    assert result["from_full"]["start_valid_acc"] == full["best_valid_acc"]
    assert result["from_full"]["start_test_acc"] == full["test_acc"]
    assert [r["epoch"] for r in result["epochs"]] == [1, 2]


def test_a_spectral_init_is_computed_for_the_full_tables_stage_only(tmp_path, planted, monkeypatch, caplog):
    # the TT stage's table is replaced by the full table's TT-SVD: its own spectral init would be thrown away
    import logging

    import ttgnn.spectral

    real, calls = ttgnn.spectral.spectral_table, []
    monkeypatch.setattr(ttgnn.spectral, "spectral_table",
                        lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    with caplog.at_level(logging.INFO, logger="ttgnn.train"):
        result = train(_config(tmp_path / "run", rank=10_000, init="spectral", spectral_vectors=4,
                               cache_dir=str(tmp_path / "cache")), planted)
    assert len(calls) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert "spectral init: left to the full table's stage (this TT table starts from its TT-SVD)" in messages
    assert not any(m.startswith("spectral init: TT-SVD") for m in messages)
    assert result["from_full"]["svd_relative_error"] < 1e-5  # the start is the full table's, as before
    assert _full_metrics(tmp_path / "run")["settings"]["init"] == "spectral"


@pytest.mark.parametrize("changed, name", [(dict(finetune_distill=0.0), "finetune_distill"),
                                           (dict(finetune_lr=0.5), "finetune_lr")])
def test_a_resume_that_changes_the_tt_stages_rate_or_distillation_is_refused_by_its_name(tmp_path, planted,
                                                                                        changed, name):
    # A changed --finetune-distill was taken and recorded as the whole run's (epochs 1-2 had trained
    # with the old weight); a changed --finetune-lr was refused as "lr", which sent users to --lr.
    out = tmp_path / "run"
    train(_config(out), planted)
    with pytest.raises(ValueError, match=rf"was written with {name}=.*, this run has {name}="):
        train(_config(out, resume=True, finetune_epochs=4, **changed), planted)


def test_a_resume_that_would_train_the_full_table_further_under_the_tt_stage_is_refused(tmp_path, planted):
    # --epochs grown on a resume trained the full table on, then went on with the TT stage's checkpoint, which
    # had started from (and been distilled from) the shorter table: two runs mixed, exit 0
    out = tmp_path / "run"
    first = train(_config(out), planted)
    full_before = _full_metrics(out)
    message = (f"the TT stage of the run in {out} ({out / 'checkpoint.pt'}) started from its full table's run of "
               "epochs=3; this run has epochs=5, which would train another full table under the TT stage: give "
               "epochs=3 (--epochs 3) to continue that run (finetune_epochs may grow), or another output folder")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        train(_config(out, resume=True, epochs=5), planted)
    assert _full_metrics(out) == full_before
    again = train(_config(out, resume=True, finetune_epochs=3), planted)  # the TT stage may grow
    assert again["from_full"] == first["from_full"] and [r["epoch"] for r in again["epochs"]] == [1, 2, 3]


def test_a_refused_tt_stage_resume_names_the_finetune_settings_a_user_gives(tmp_path, planted):
    # "resume with epochs >= 2" and "give epochs=3" sent users to --epochs, the full table's
    out = tmp_path / "run"
    train(_config(out), planted)
    with pytest.raises(ValueError, match=r"past this run's last, finetune_epochs=1: resume with finetune_epochs >= 2"):
        train(_config(out, resume=True, finetune_epochs=1), planted)
    cosine = tmp_path / "cosine"
    train(_config(cosine, lr_schedule="cosine"), planted)
    with pytest.raises(ValueError, match=r"written with finetune_epochs=2, this run has finetune_epochs=4 .*give "
                                         r"finetune_epochs=2 \(--finetune-epochs 2\) to continue"):
        train(_config(cosine, resume=True, lr_schedule="cosine", finetune_epochs=4), planted)


def test_finetune_settings_a_run_leaves_unread_are_named(tmp_path, caplog):
    # left to the graph, from_full was off (many labels, or mini-batches, or several processes) and the
    # finetune settings given went unread without a word
    from ttgnn.data import planted_partition

    many = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.5, seed=0)
    with caplog.at_level("WARNING", logger="ttgnn.train"):
        train(_config(tmp_path / "a", from_full=None, epochs=1, finetune_epochs=7, finetune_lr=0.01), many)
    warned = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("finetune_epochs, finetune_lr ignored: from_full, which")
    caplog.clear()
    with caplog.at_level("WARNING", logger="ttgnn.train"):
        train(_config(tmp_path / "b", from_full=None, epochs=1, finetune_epochs=TrainConfig().finetune_epochs),
              many)  # the defaults: nothing said
    assert not [r for r in caplog.records if "ignored" in r.getMessage()]


def test_a_tt_stage_that_diverges_in_its_first_epoch_is_predicted_from_its_start_with_a_note(tmp_path, planted,
                                                                                               monkeypatch):
    import ttgnn.train as ttrain
    from ttgnn.inference import load_run

    real_epoch = ttrain.train_epoch
    monkeypatch.setattr(ttrain, "train_epoch", lambda run, epoch, show_progress=False: float("nan")
                        if run.config.embedding == "tt" else real_epoch(run, epoch, show_progress))
    with pytest.raises(ttrain.TrainingDiverged):
        train(_config(tmp_path / "run"), planted)
    run = load_run(tmp_path / "run", planted)
    assert (run.epoch, run.stopped, run.stop_reason) == (0, (0, 2), "diverged")


def test_a_resume_with_the_rule_left_open_keeps_the_from_full_its_run_was_started_with(tmp_path):
    # The rule is off in a job of several processes: a run started under torchrun (recorded from_full=False)
    # and resumed in one process, with the same options, was refused for a from_full nobody had set.
    from ttgnn.data import planted_partition

    few = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.05, seed=0)
    assert settle_from_full(_config(None, from_full=None), few).from_full  # the rule says on here
    out = tmp_path / "started-under-torchrun"
    train(_config(out, from_full=False, epochs=2), few)
    resumed = train(_config(out, from_full=None, epochs=3, resume=True), few)
    assert resumed["settings"]["from_full"] is False and len(resumed["epochs"]) == 3
    assert not (out / FULL_TABLE_DIR).exists()
    # a from_full run stopped in its full table's stage (no TT checkpoint yet) resumes as one, on a graph
    # whose rule says off
    many = planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, train_frac=0.6, seed=0)
    assert not settle_from_full(_config(None, from_full=None), many).from_full
    out = tmp_path / "stopped-in-the-full-table"
    train(_config(out), many)
    for name in ("checkpoint.pt", "metrics.json", "best_model.pt"):
        (out / name).unlink()
    resumed = train(_config(out, from_full=None, resume=True), many)
    assert resumed["settings"]["from_full"] is True and len(_full_metrics(out)["epochs"]) == 3


def test_the_full_table_distilled_from_itself_needs_no_tt_rank(planted):
    # `ttgnn train --from-full --embedding full` (rank left to the run, as on the command line) failed with
    # "rank=None is decided by the graph: settle the config first (settle_by_graph)"
    result = train(_config(None, embedding="full", rank=None, finetune_epochs=1), planted)
    assert result["embedding"] == "full" and result["compression_ratio"] == 1.0
    assert len(result["epochs"]) == 1 and "from_full" in result
