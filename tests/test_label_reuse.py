"""Label reuse: a model's predicted class probabilities fed back as the label input of the nodes
whose labels it does not see (ttgnn.evaluation.reuse_labels), in training and at evaluation."""
import pytest
import torch

import ttgnn.train as ttrain
from ttgnn.evaluation import all_logits, known_labels, reuse_labels, soft_labels
from ttgnn.train import TrainConfig


def _run(tmp_path, dataset, **kw):
    base = dict(dataset="planted", model="sage", embedding="tt", dim=16, rank=4, order="identity", hidden=16,
                num_layers=2, epochs=2, mode="full", fanouts=[5, 5], batch_size=64, output_dir=str(tmp_path),
                progress=False, num_threads=1, label_input=True, seed=0, dropout=0.5,
                label_spread=0)  # reuse alone; the spreading tests name their steps
    base.update(kw)
    return ttrain.setup_run(TrainConfig(**base), dataset, 0, 1, torch.device("cpu"))


def _record_inputs(run) -> list:
    """Wrap ``run.net.forward`` to record ``(grad enabled, training mode, input_labels)`` of each call."""
    given, real = [], run.net.forward

    def record(*args, input_labels=None):
        given.append((torch.is_grad_enabled(), run.net.training, input_labels))
        return real(*args, input_labels=input_labels)

    run.net.forward = record
    return given


def test_soft_labels_are_one_hot_where_known_and_softmax_elsewhere():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]], dtype=torch.float64)
    labels = torch.tensor([3, 1, 3])  # 3 = unknown
    out = soft_labels(logits, labels)
    assert out.dtype == torch.float32 and out.shape == (3, 3)
    torch.testing.assert_close(out[1], torch.tensor([0.0, 1.0, 0.0]), rtol=0, atol=0)
    torch.testing.assert_close(out[0], torch.softmax(logits[0].float(), 0))
    torch.testing.assert_close(out[2], torch.full((3,), 1 / 3))


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_each_round_feeds_the_last_rounds_predictions_back(tmp_path, planted, mode):
    run = _run(tmp_path, planted, mode=mode)
    model, graph = run.model, run.graph
    hard = known_labels(planted, planted.split["train"][::2])
    model.train()
    assert reuse_labels(model, graph, mode, 128, hard, iters=0) is hard
    assert not model.training  # the rounds run in eval mode (no dropout) and leave it there
    with torch.no_grad():
        if mode == "full":
            forward = lambda labels: model(graph, input_labels=labels)  # noqa: E731
        else:
            forward = lambda labels: model.inference(graph, batch_size=128, input_labels=labels)  # noqa: E731
        expect = hard
        for rounds in (1, 2, 3):
            expect = soft_labels(forward(expect), hard)
            got = reuse_labels(model, graph, mode, 128, hard, iters=rounds)
            torch.testing.assert_close(got, expect, rtol=1e-5, atol=1e-6)
            known = hard < planted.num_classes
            assert torch.equal(got[known].argmax(1), hard[known]) and torch.equal(got[known].max(1).values,
                                                                                  torch.ones(int(known.sum())))
        # the model's own setting is the default; evaluation sees every training label, then reuses
        model.label_input.reuse_iters = 2
        # (layer-wise inference differs between two identical calls at float32 rounding, ~2e-7)
        torch.testing.assert_close(reuse_labels(model, graph, mode, 128, hard),
                                   reuse_labels(model, graph, mode, 128, hard, iters=2), rtol=1e-5, atol=1e-6)
        every = known_labels(planted, planted.split["train"])
        torch.testing.assert_close(all_logits(model, graph, mode, 128, planted),
                                   forward(reuse_labels(model, graph, mode, 128, every, iters=2)),
                                   rtol=1e-5, atol=1e-5)
        assert not torch.allclose(all_logits(model, graph, mode, 128, planted), forward(every), atol=1e-3)


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_a_training_step_sees_the_reused_labels_of_its_epoch(tmp_path, planted, mode):
    run = _run(tmp_path, planted, mode=mode, label_reuse=2)
    known, _ = ttrain.split_known(planted.split["train"], 0.5, 0, 3)
    hard = known_labels(planted, known)
    expect = reuse_labels(run.model, run.graph, mode, run.config.eval_batch_size, hard, iters=2)
    given = _record_inputs(run)
    ttrain.train_epoch(run, 3)
    steps = [labels for grad, training, labels in given if grad]
    assert steps and all(training for grad, training, _ in given if grad)
    for labels in steps:  # (the same rounds before the epoch, up to float32 rounding of inference)
        torch.testing.assert_close(labels, expect, rtol=1e-5, atol=1e-6)
    if mode == "full":  # two no-grad rounds in eval mode, then the training step
        assert [(grad, training) for grad, training, _ in given] == [(False, False), (False, False), (True, True)]


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_label_spread_is_the_first_input_in_training_and_at_evaluation(tmp_path, planted, mode):
    from ttgnn.evaluation import label_inputs
    from ttgnn.smoothing import spread_labels

    run = _run(tmp_path, planted, mode=mode, label_reuse=1, label_spread=4)
    model, graph = run.model, run.graph
    assert (model.label_input.reuse_iters, model.label_input.spread_steps) == (1, 4)
    known, _ = ttrain.split_known(planted.split["train"], 0.5, 0, 3)
    hard = known_labels(planted, known)
    spread = spread_labels(planted.normalized_adjacency(), hard, planted.num_classes, 4, 0.9)
    torch.testing.assert_close(label_inputs(model, planted, hard), spread, rtol=0, atol=0)
    unknown = hard == planted.num_classes
    assert spread[unknown].sum(1).gt(0).float().mean() > 0.9  # most unknown nodes get a distribution
    expect = reuse_labels(model, graph, mode, 128, hard, iters=1, start=spread)
    assert not torch.allclose(expect, reuse_labels(model, graph, mode, 128, hard, iters=1), atol=1e-3)
    with torch.no_grad():  # reuse starts from the spread; known rows stay one-hot
        forward = ((lambda labels: model(graph, input_labels=labels)) if mode == "full" else  # noqa: E731
                   (lambda labels: model.inference(graph, batch_size=128, input_labels=labels)))
        torch.testing.assert_close(expect, soft_labels(forward(spread), hard), rtol=1e-5, atol=1e-6)
        every = known_labels(planted, planted.split["train"])
        start = spread_labels(planted.normalized_adjacency(), every, planted.num_classes, 4, 0.9)
        torch.testing.assert_close(all_logits(model, graph, mode, 128, planted),
                                   forward(reuse_labels(model, graph, mode, 128, every, iters=1, start=start)),
                                   rtol=1e-5, atol=1e-5)
    given = _record_inputs(run)
    ttrain.train_epoch(run, 3)
    steps = [labels for grad, _, labels in given if grad]
    assert steps
    for labels in steps:
        torch.testing.assert_close(labels, expect, rtol=1e-5, atol=1e-6)


def test_label_spread_without_reuse_feeds_the_spread_itself(tmp_path, planted):
    from ttgnn.smoothing import spread_labels

    run = _run(tmp_path, planted, label_reuse=0, label_spread=2)
    known, _ = ttrain.split_known(planted.split["train"], 0.5, 0, 1)
    expect = spread_labels(planted.normalized_adjacency(), known_labels(planted, known), planted.num_classes, 2, 0.9)
    given = _record_inputs(run)
    ttrain.train_epoch(run, 1)
    assert len(given) == 1 and given[0][:2] == (True, True) and torch.equal(given[0][2], expect)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_split_known_always_leaves_a_node_to_take_the_loss_on(size):
    # Three training nodes could all be drawn as known: the loss over no node was NaN and the run
    # stopped as "diverged", advising lower learning rates.
    nodes = torch.arange(10, 10 + size)
    for seed in range(40):
        for epoch in range(1, 4):
            known, target = ttrain.split_known(nodes, 0.9, seed, epoch)
            assert target.numel() >= 1 and sorted(known.tolist() + target.tolist()) == nodes.tolist()
            again = ttrain.split_known(nodes, 0.9, seed, epoch)
            assert torch.equal(again[0], known) and torch.equal(again[1], target)
