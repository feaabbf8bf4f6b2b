"""Sampled evaluation (``eval_fanouts``): the split nodes' accuracies from sampled neighbourhoods, for
graphs whose every-node inference does not fit (mini-batch mode; automatic above
``SAMPLED_EVAL_MIN_NODES`` nodes)."""
import dataclasses
import functools
import json
import logging

import pytest
import torch

import ttgnn.config as tconfig
from ttgnn.cli import build_parser, config_from_args
from ttgnn.evaluation import evaluate, evaluate_sampled
from ttgnn.seeding import seed_everything
from ttgnn.train import setup_run, train

from configs import minibatch_config


_config = functools.partial(minibatch_config, epochs=2)


@pytest.mark.parametrize("model,backend,label_input", [("sage", "dgl", False), ("sage", "dgl", True),
                                                       ("gat", "torch", True), ("sage", "torch", False)])
def test_sampled_evaluation_with_every_neighbour_equals_exact_inference(planted, model, backend, label_input):
    run = setup_run(_config(None, model=model, gnn_backend=backend, label_input=label_input, heads=2), planted, 0, 1,
                    torch.device("cpu"))
    graph = run.graph
    everyone = int(graph.in_degrees().max()) + 1  # a fan-out above every in-degree samples every neighbour
    exact = evaluate(run.model, graph, planted, "minibatch", eval_batch_size=50)
    sampled = evaluate_sampled(run.model, graph, planted, [everyone, everyone], batch_size=37)
    assert set(sampled) == set(exact) == {"train", "valid", "test", "valid_loss"}
    for key in ("train", "valid", "test"):
        assert sampled[key] == exact[key], key
    assert sampled["valid_loss"] == pytest.approx(exact["valid_loss"], rel=1e-5)


def test_sampled_evaluation_samples_and_repeats_under_a_seed(planted):
    run = setup_run(_config(None, epochs=1), planted, 0, 1, torch.device("cpu"))
    results = []
    for seed in (1, 1, 2):
        seed_everything(seed)
        results.append(evaluate_sampled(run.model, run.graph, planted, [1, 1], batch_size=64)["valid_loss"])
    assert results[0] == results[1]  # same seed, same neighbourhoods
    assert results[0] != results[2]  # one neighbour per layer: another seed draws others


def test_evaluation_progress_bars_change_nothing_else(planted, capsys):
    run = setup_run(_config(None, epochs=1), planted, 0, 1, torch.device("cpu"))
    quiet, shown = [], []
    for progress, out in ((False, quiet), (True, shown)):
        seed_everything(3)
        out.append(evaluate_sampled(run.model, run.graph, planted, [2, 2], batch_size=64, progress=progress))
        out.append(evaluate(run.model, run.graph, planted, "minibatch", eval_batch_size=64, progress=progress))
        out.append(capsys.readouterr().err)
    assert quiet[:2] == shown[:2]
    assert quiet[2] == "" and "evaluate valid" in shown[2] and "inference layer 2" in shown[2]


def test_eval_fanouts_setting_is_checked():
    with pytest.raises(ValueError, match="eval_fanouts \\(sampled evaluation\\) needs mode='minibatch'"):
        _config(None, mode="full", eval_fanouts=[5, 5]).validate()
    with pytest.raises(ValueError, match="need one evaluation fan-out per layer: 2 layers, eval_fanouts \\[5\\]"):
        _config(None, eval_fanouts=[5]).validate()
    with pytest.raises(ValueError, match="every entry of eval_fanouts must be an integer >= 1, got 0"):
        _config(None, eval_fanouts=[5, 0]).validate()
    with pytest.raises(ValueError, match="label_reuse=1 feeds back every node's prediction"):
        _config(None, eval_fanouts=[5, 5], label_reuse=1, label_input=None).validate()
    with pytest.raises(ValueError, match="label_spread=3 builds a \\(num_nodes, num_classes\\) label input"):
        _config(None, eval_fanouts=[5, 5], label_spread=3, label_input=None).validate()
    _config(None, eval_fanouts=[5, 5]).validate()
    _config(None, eval_fanouts=[5, 5], label_spread=0).validate()


def test_eval_fanouts_rule():
    big = tconfig.SAMPLED_EVAL_MIN_NODES + 1
    assert tconfig.eval_fanouts_for(None, "minibatch", [15, 10], big) == [15, 10]
    assert tconfig.eval_fanouts_for(None, "minibatch", [15, 10], tconfig.SAMPLED_EVAL_MIN_NODES) is None
    assert tconfig.eval_fanouts_for(None, "full", [15, 10], big) is None
    assert tconfig.eval_fanouts_for([30, 20], "minibatch", [15, 10], 100) == [30, 20]


def test_cli_option():
    args = build_parser().parse_args(["train", "--mode", "minibatch", "--num-layers", "2", "--fanouts", "5,5",
                                      "--eval-fanouts", "20,10"])
    assert config_from_args(args).eval_fanouts == [20, 10]
    assert config_from_args(build_parser().parse_args(["train"])).eval_fanouts is None


def test_large_graph_training_evaluates_sampled_and_skips_correct_and_smooth(planted, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tconfig, "SAMPLED_EVAL_MIN_NODES", planted.num_nodes - 1)  # planted counts as large
    caplog.set_level(logging.INFO, logger="ttgnn")
    config = _config(tmp_path / "run", epochs=3, correct_smooth=True)
    metrics = train(config, planted)
    assert metrics["eval_fanouts"] == [5, 5] and "correct_smooth" not in metrics
    assert "evaluation on sampled neighbourhoods (fan-outs [5, 5]) of the split nodes" in caplog.text
    assert "correct and smooth skipped" in caplog.text
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["settings"]["eval_fanouts"] == [5, 5]
    assert all(0.0 <= e["valid_acc"] <= 1.0 for e in metrics["epochs"])
    # exact resume: the evaluation's draws are seeded by the epoch
    train(dataclasses.replace(config, epochs=2, output_dir=str(tmp_path / "part")), planted)
    resumed = train(dataclasses.replace(config, epochs=3, output_dir=str(tmp_path / "part"), resume=True), planted)
    assert [e["valid_acc"] for e in resumed["epochs"]] == [e["valid_acc"] for e in metrics["epochs"]]
    assert [e["valid_loss"] for e in resumed["epochs"]] == [e["valid_loss"] for e in metrics["epochs"]]
    with pytest.raises(ValueError, match="label_reuse=1 feeds back every node's prediction"):
        train(_config(tmp_path / "reuse", label_reuse=1, label_input=None), planted)
    with pytest.raises(ValueError, match="label_spread=2 builds a .* which sampled evaluation"):
        train(_config(tmp_path / "spread", label_spread=2, label_input=None), planted)
