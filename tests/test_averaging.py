"""Weight averaging (``--weight-average``): the average's arithmetic, the swap, its checkpoint state,
and what a training run evaluates, selects and saves with it. Exact resume is in test_train."""
import functools
import re

import pytest
import torch
from torch import nn

import ttgnn.train as ttrain
from ttgnn.averaging import WeightAverage
from ttgnn.cli import main
from ttgnn.train import BEST_MODEL_NAME, CHECKPOINT_NAME, TrainConfig, load_checkpoint, train

from configs import small_config


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))


def _set(net: _Net, value: float, count: int) -> None:
    with torch.no_grad():
        net.lin.weight.fill_(value)
        net.lin.bias.fill_(-value)
    net.count.fill_(count)


def test_the_average_is_the_mean_then_an_exponential_moving_average():
    net = _Net()
    average = WeightAverage(net, horizon=3)
    values = [1.0, 2.0, 6.0, 10.0, -4.0]
    expected = []
    for t, v in enumerate(values, start=1):
        _set(net, v, t)
        average.update(net)
        if t <= 3:  # the plain mean of the weights so far
            expected.append(sum(values[:t]) / t)
        else:  # decay 1 - 1/3
            expected.append(expected[-1] * 2 / 3 + v / 3)
        assert torch.allclose(average.state["lin.weight"], torch.full((2, 3), expected[-1]), atol=1e-6, rtol=0)
        assert torch.allclose(average.state["lin.bias"], torch.full((2,), -expected[-1]), atol=1e-6, rtol=0)
        assert int(average.state["count"]) == t  # integer buffers are copied, not averaged
    assert expected == pytest.approx([1.0, 1.5, 3.0, 2.0 + 10 / 3, (2.0 + 10 / 3) * 2 / 3 - 4 / 3])
    assert average.updates == 5 and average.decay() == pytest.approx(2 / 3)


def test_a_horizon_of_one_is_the_latest_weights():
    net = _Net()
    average = WeightAverage(net, horizon=1)
    for v in (3.0, -1.0):
        _set(net, v, 0)
        average.update(net)
        assert torch.equal(average.state["lin.weight"], net.lin.weight.detach())


def test_swapped_into_puts_the_models_own_weights_back_even_on_error():
    net = _Net()
    _set(net, 1.0, 1)
    average = WeightAverage(net, horizon=2)
    average.update(net)
    _set(net, 5.0, 2)
    average.update(net)  # the mean: 3
    _set(net, 7.0, 3)
    with average.swapped_into(net):
        assert torch.equal(net.lin.weight.detach(), torch.full((2, 3), 3.0))
    assert torch.equal(net.lin.weight.detach(), torch.full((2, 3), 7.0)) and int(net.count) == 3
    with pytest.raises(RuntimeError, match="boom"):
        with average.swapped_into(net):
            raise RuntimeError("boom")
    assert torch.equal(net.lin.weight.detach(), torch.full((2, 3), 7.0))


def test_a_tensor_shared_by_two_entries_is_swapped_once():
    net = nn.Module()
    net.a = nn.Linear(2, 2, bias=False)
    net.b = nn.Linear(2, 2, bias=False)
    net.b.weight = net.a.weight  # tied: two state-dict entries, one tensor
    net.c = nn.Linear(2, 1, bias=False)  # an entry after the tied pair is still exchanged
    with torch.no_grad():
        net.a.weight.fill_(1.0)
        net.c.weight.fill_(10.0)
    average = WeightAverage(net, horizon=2)
    average.update(net)
    with torch.no_grad():
        net.a.weight.fill_(3.0)
        net.c.weight.fill_(30.0)
    average.update(net)  # the mean: 2 and 20
    with average.swapped_into(net):
        assert torch.equal(net.b.weight.detach(), torch.full((2, 2), 2.0))
        assert torch.equal(net.c.weight.detach(), torch.full((1, 2), 20.0))
    assert torch.equal(net.a.weight.detach(), torch.full((2, 2), 3.0))
    assert torch.equal(net.c.weight.detach(), torch.full((1, 2), 30.0))
    assert torch.equal(average.state["b.weight"], torch.full((2, 2), 2.0))


def test_state_dict_round_trip_and_refusals():
    net = _Net()
    average = WeightAverage(net, horizon=4)
    for v in (1.0, 2.0):
        _set(net, v, 0)
        average.update(net)
    saved = average.state_dict()
    again = WeightAverage(_Net(), horizon=4)
    again.load_state_dict(saved)
    assert again.updates == 2 and torch.equal(again.state["lin.weight"], average.state["lin.weight"])
    with pytest.raises(ValueError, match="spans 4 epochs, this run 5"):
        WeightAverage(_Net(), horizon=5).load_state_dict(saved)
    other = nn.Linear(3, 2)
    keys = sorted(saved["state"])  # no entry in common with other's ["bias", "weight"]: all of both named
    with pytest.raises(ValueError, match=re.escape(f"the saved weight average has other entries than the model: "
                                                   f"{sorted(keys + ['bias', 'weight'])}")):
        WeightAverage(other, horizon=4).load_state_dict(saved)
    with pytest.raises(ValueError, match=re.escape(f"the model's state dict has other entries than the average's: "
                                                   f"{sorted(keys + ['bias', 'weight'])}")):
        average.update(other)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="horizon must be an integer >= 1"):
            WeightAverage(net, horizon=bad)


def test_an_older_average_without_the_tables_row_count_loads():
    # A TT table's state dict records its row count since 2026-12-07 (an integer, copied, not averaged):
    # the average in a checkpoint from before lacks it, and a resumed run must still load it.
    from ttgnn import TTNodeEmbedding

    model = nn.Sequential(TTNodeEmbedding(50, 4, ranks=2), nn.Linear(4, 2))
    saved = WeightAverage(model, horizon=3).state_dict()
    assert saved["state"].pop("0.num_embeddings").item() == 50
    again = WeightAverage(model, horizon=3)
    again.load_state_dict(saved)
    assert again.state["0.num_embeddings"].item() == 50
    del saved["state"]["1.bias"]  # an averaged entry missing is still refused
    with pytest.raises(ValueError, match=re.escape("other entries than the model: ['1.bias']")):
        WeightAverage(model, horizon=3).load_state_dict(saved)


_config = functools.partial(small_config, epochs=5, mode="full", model="gat", heads=2, label_input=False, lr=0.02,
                            emb_lr=0.05, correct_smooth=False)


def test_training_evaluates_selects_and_saves_the_averaged_weights(tmp_path, planted, monkeypatch):
    trained = []  # the weights as trained after each epoch
    real_epoch = ttrain.train_epoch

    def recording(run, epoch, **kwargs):
        loss = real_epoch(run, epoch, **kwargs)
        trained.append({k: v.detach().clone() for k, v in run.model.state_dict().items()})
        return loss

    plain = train(_config(tmp_path / "plain"), planted)
    monkeypatch.setattr(ttrain, "train_epoch", recording)
    m = train(_config(tmp_path / "avg", weight_average=2), planted)
    # Averaging does not change training: the same losses, and the trained weights score as the plain run's
    assert [r["loss"] for r in m["epochs"]] == [r["loss"] for r in plain["epochs"]]
    assert [r["raw_valid_acc"] for r in m["epochs"]] == [r["valid_acc"] for r in plain["epochs"]]
    assert [r["raw_test_acc"] for r in m["epochs"]] == [r["test_acc"] for r in plain["epochs"]]
    assert m["best_valid_acc"] == max(r["valid_acc"] for r in m["epochs"])  # selected on the average's accuracy
    # best_model.pt holds the average at the best epoch: the mean of the first two epochs, then decay 1/2
    best = load_checkpoint(tmp_path / "avg" / BEST_MODEL_NAME)
    assert best["epoch"] == m["best_epoch"]
    key = next(k for k, v in trained[0].items() if v.is_floating_point() and v.dim() == 2)
    expected = trained[0][key]
    for t in range(1, m["best_epoch"]):
        expected = expected / 2 + trained[t][key] / 2
    assert torch.allclose(best["model"][key], expected, atol=1e-6, rtol=0)
    # the checkpoint holds the trained weights and the average, which resume needs
    ckpt = load_checkpoint(tmp_path / "avg" / CHECKPOINT_NAME)
    assert torch.equal(ckpt["model"][key], trained[-1][key])
    assert ckpt["weight_average"]["updates"] == 5 and ckpt["weight_average"]["horizon"] == 2
    assert "weight_average" not in load_checkpoint(tmp_path / "plain" / CHECKPOINT_NAME)
    assert "raw_valid_acc" not in plain["epochs"][0]


def test_the_setting_is_checked_and_kept_on_resume(tmp_path, planted):
    with pytest.raises(ValueError, match="weight_average must be an integer >= 0, got -1"):
        TrainConfig(weight_average=-1).validate()
    train(_config(tmp_path, epochs=1, weight_average=3), planted)
    with pytest.raises(ValueError, match="weight_average"):
        train(_config(tmp_path, epochs=2, weight_average=4, resume=True), planted)


def test_cli_flag(tmp_path, capsys):
    assert main(["train", "--weight-average", "-2", "--dataset", "cora", "--root", str(tmp_path),
                 "--no-progress"]) == 2
    assert "weight_average must be an integer >= 0" in capsys.readouterr().err


def test_a_model_of_other_shapes_is_refused_before_anything_is_averaged_or_swapped():
    # a (1, 4) weight was broadcast into the (3, 4) average; the swap back then failed half done
    class Model(nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.a = nn.Parameter(torch.zeros(2))
            self.b = nn.Parameter(torch.zeros(rows, 4))

    average, other = WeightAverage(Model(3), 2), Model(1)
    kept = {key: value.clone() for key, value in average.state.items()}
    with torch.no_grad():
        other.a.fill_(7.0)
    message = r"^the model's 'b' has shape \(1, 4\), the average's \(3, 4\)$"
    with pytest.raises(ValueError, match=message):
        average.update(other)
    with pytest.raises(ValueError, match=message):
        with average.swapped_into(other):
            pass
    assert all(torch.equal(average.state[key], kept[key]) for key in kept)
    assert torch.equal(other.a.detach(), torch.full((2,), 7.0))
