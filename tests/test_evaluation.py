"""Tests of ttgnn.evaluation: Accuracy (plain accuracy and ogb's Evaluator agree, node by node, whatever the
column shape), and what evaluate, all_logits, evaluate_sampled and correct_and_smooth_metrics pass on."""
import dataclasses
import math
import time

import pytest
import torch

from ttgnn.evaluation import (Accuracy, all_logits, evaluate, evaluate_sampled, known_labels, model_label_inputs,
                              reuse_labels)
from ttgnn.train import setup_run

from configs import minibatch_config

PRED = torch.tensor([0, 1, 2, 2, 1])
LABELS = torch.tensor([0, 1, 1, 2, 0])  # 3 of 5 right


@pytest.mark.parametrize("name", [None, "ogbn-arxiv"], ids=["plain", "ogb"])
@pytest.mark.parametrize("pred_shape, label_shape", [((5,), (5,)), ((5, 1), (5,)), ((5,), (5, 1)), ((5, 1), (5, 1))])
def test_accuracy_compares_node_by_node_in_any_column_shape(name, pred_shape, label_shape):
    # a (5, 1) column against (5,) ids broadcast to a 5 x 5 comparison before: 0.32, not 0.6
    accuracy = Accuracy(name)
    assert accuracy(PRED.reshape(pred_shape), LABELS.reshape(label_shape)) == pytest.approx(0.6)


@pytest.mark.parametrize("name", [None, "ogbn-arxiv"], ids=["plain", "ogb"])
def test_accuracy_of_no_nodes_is_nan_and_of_mismatched_counts_an_error(name):
    accuracy = Accuracy(name)
    assert math.isnan(accuracy(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)))
    with pytest.raises(ValueError, match=r"^4 predictions for 5 labels: one class id per node in each$"):
        accuracy(PRED[:4], LABELS)


# --- evaluate, all_logits, evaluate_sampled and C&S on a small model at its initialisation ---------------


def _run(planted, **kw):
    config = minibatch_config(None, **{"epochs": 1, **kw})
    return setup_run(config, planted, 0, 1, torch.device("cpu"))


class _Calls(list):
    """The ``progress`` of each call, and their ``batch_size`` in :attr:`batch_sizes`."""

    def __init__(self):
        super().__init__()
        self.batch_sizes = []


def _spy_inference(monkeypatch, model):
    """Record every layer-wise inference pass of ``model`` (a :class:`_Calls`)."""
    calls, real = _Calls(), model.inference

    def spy(*args, **kwargs):
        calls.append(kwargs.get("progress"))
        calls.batch_sizes.append(kwargs.get("batch_size"))
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "inference", spy)
    return calls


def test_evaluation_is_quiet_by_default(planted, capsys):
    run = _run(planted, label_input=True, label_reuse=1)
    evaluate(run.model, run.graph, planted, "minibatch", eval_batch_size=64)
    all_logits(run.model, run.graph, "minibatch", 64, planted)
    evaluate_sampled(run.model, run.graph, planted, [2, 2], batch_size=64)
    assert capsys.readouterr().err == ""


def test_progress_reaches_every_inference_pass(planted, monkeypatch):
    run = _run(planted, label_input=True, label_reuse=2)
    calls = _spy_inference(monkeypatch, run.model)
    all_logits(run.model, run.graph, "minibatch", 64, planted, progress=True)
    assert calls == [True, True, True]  # two reuse rounds, then the logits
    calls.clear()
    evaluate(run.model, run.graph, planted, "minibatch", eval_batch_size=37)
    assert calls == [False, False, False] and calls.batch_sizes[-3:] == [37, 37, 37]
    calls.clear()
    labels = known_labels(planted, planted.split["train"])
    model_label_inputs(run.model, run.graph, "minibatch", 64, planted, labels)
    reuse_labels(run.model, run.graph, "minibatch", 64, labels)
    assert calls == [False, False, False, False]  # quiet by default
    calls.clear()
    calls.batch_sizes.clear()
    evaluate(run.model, run.graph, planted, "minibatch")
    assert calls.batch_sizes == [8192] * 3  # the documented default


def test_full_graph_mode_runs_one_forward_not_layer_wise_inference(planted, monkeypatch):
    run = _run(planted, label_input=True, label_reuse=1)
    calls = _spy_inference(monkeypatch, run.model)
    full = all_logits(run.model, run.graph, "full", 64, planted)
    assert calls == []
    layer_wise = all_logits(run.model, run.graph, "minibatch", 64, planted)
    assert len(calls) == 2 and torch.allclose(full, layer_wise, atol=1e-5)
    evaluate(run.model, run.graph, planted, "full")
    assert len(calls) == 2


def test_evaluate_uses_the_accuracy_given(planted):
    run = _run(planted)
    seen = []

    def accuracy(pred, labels):
        seen.append(labels.numel())
        return 0.25

    result = evaluate(run.model, run.graph, planted, "minibatch", eval_batch_size=64, accuracy=accuracy)
    assert [result[k] for k in ("train", "valid", "test")] == [0.25] * 3
    assert seen == [planted.split[k].numel() for k in planted.split]
    sampled = evaluate_sampled(run.model, run.graph, planted, [2, 2], accuracy=accuracy)
    assert [sampled[k] for k in ("train", "valid", "test")] == [0.25] * 3


def test_empty_and_one_node_splits(planted):
    run = _run(planted)
    split = dict(planted.split, valid=planted.split["valid"][:0], test=planted.split["test"][:1])
    small = dataclasses.replace(planted, split=split)
    exact = evaluate(run.model, run.graph, small, "minibatch", eval_batch_size=64)
    sampled = evaluate_sampled(run.model, run.graph, small, [100, 100], batch_size=64)
    for result in (exact, sampled):
        assert math.isnan(result["valid"]) and math.isnan(result["valid_loss"])
        assert result["test"] in (0.0, 1.0) and result["train"] == exact["train"]
    assert sampled["test"] == exact["test"]


def test_known_labels_marks_the_rest_unknown(planted):
    unknown = torch.full((planted.num_nodes,), planted.num_classes)
    assert torch.equal(known_labels(planted, None), unknown)
    assert torch.equal(known_labels(planted, torch.tensor([], dtype=torch.long)), unknown)
    some = planted.split["train"][:5]
    out = known_labels(planted, some)
    assert out.dtype == torch.long and torch.equal(out[some], planted.labels[some].long())
    assert int((out < planted.num_classes).sum()) == 5


def test_correct_and_smooth_runs_where_the_model_is_and_on_the_cpu_when_that_device_is_full(planted, monkeypatch,
                                                                                             caplog):
    # it ran on the CPU whatever the model's device: minutes on two cores for ogbn-arxiv at the end of a GPU run
    import logging

    from ttgnn import smoothing
    from ttgnn.evaluation import correct_and_smooth_metrics

    run = _run(planted)
    logits = all_logits(run.model, run.graph, "minibatch", 64, planted)
    real, devices = smoothing.tune_correct_and_smooth, []

    def tune(logits, adjacency, labels, train_idx, valid_idx, **kwargs):
        devices.append({t.device.type for t in (logits, adjacency, labels, train_idx, valid_idx)})
        if adjacency.device.type == "meta":  # stands in for a GPU without room for the sparse products
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(logits, adjacency, labels, train_idx, valid_idx, **kwargs)

    monkeypatch.setattr(smoothing, "tune_correct_and_smooth", tune)
    on_cpu = correct_and_smooth_metrics(run.model, run.graph, planted, "minibatch", logits=logits, progress=True)
    assert devices == [{"cpu"}]
    run.model.to("meta")  # a model on another device: the work goes there first
    with caplog.at_level(logging.WARNING, logger="ttgnn.evaluation"):
        moved = correct_and_smooth_metrics(run.model, run.graph, planted, "minibatch", logits=logits)
    assert devices == [{"cpu"}, {"meta"}, {"cpu"}]
    assert caplog.messages == ["correct and smooth: out of memory on meta; continuing on the CPU (slower)"]
    assert torch.device("meta") not in planted._adjacency  # the device's copy of the graph is let go
    assert {k: v for k, v in moved.items() if k != "seconds"} == {k: v for k, v in on_cpu.items() if k != "seconds"}
    # a model without parameters (logits given): where the logits are
    bare = correct_and_smooth_metrics(torch.nn.Module(), None, planted, "minibatch", logits=logits)
    assert devices[-1] == {"cpu"} and bare["test_acc"] == on_cpu["test_acc"]


def test_correct_and_smooth_metrics_tunes_on_the_splits(planted, monkeypatch):
    from ttgnn.evaluation import correct_and_smooth_metrics
    from ttgnn.smoothing import tune_correct_and_smooth

    run = _run(planted, label_input=True)  # the logits see the training labels: the dataset reaches all_logits
    logits = all_logits(run.model, run.graph, "minibatch", 64, planted)
    calls = _spy_inference(monkeypatch, run.model)
    given = correct_and_smooth_metrics(run.model, run.graph, planted, "minibatch", logits=logits)
    assert calls == []  # the logits given are used, not recomputed
    start = time.perf_counter()
    computed = correct_and_smooth_metrics(run.model, run.graph, planted, "minibatch")
    assert calls == [False] and 0 <= computed["seconds"] <= time.perf_counter() - start
    assert calls.batch_sizes == [8192]  # the documented default
    full = correct_and_smooth_metrics(run.model, run.graph, planted, "full")
    assert calls == [False] and full["test_acc"] == pytest.approx(computed["test_acc"], abs=1 / 80)  # no inference
    expected = tune_correct_and_smooth(logits, planted.normalized_adjacency(), planted.labels,
                                       planted.split["train"], planted.split["valid"])
    assert set(given) == {"train_acc", "valid_acc", "test_acc", "correct_alpha", "smooth_alpha", "seconds"}
    for result in (given, computed):
        for key in ("train", "valid", "test"):
            idx = planted.split[key]
            assert result[f"{key}_acc"] == float((expected.pred[idx] == planted.labels[idx]).float().mean())
        assert (result["correct_alpha"], result["smooth_alpha"]) == (expected.correct_alpha, expected.smooth_alpha)
        assert result["seconds"] >= 0
    fixed = correct_and_smooth_metrics(run.model, run.graph, planted, "minibatch", logits=logits,
                                       accuracy=lambda pred, labels: 0.5)
    assert [fixed[f"{k}_acc"] for k in ("train", "valid", "test")] == [0.5] * 3
