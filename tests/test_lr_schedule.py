"""Learning-rate schedules (``--lr-schedule``): the factor per epoch, what the optimiser gets, the
record of each epoch, and the setting's checks. Exact resume under the cosine is in test_train."""
import functools
import math

import pytest
import torch

import ttgnn.train as ttrain
from ttgnn.cli import main
from ttgnn.train import lr_factor, train

from configs import small_config


_config = functools.partial(small_config, epochs=4, mode="full", label_input=False, lr=0.02, emb_lr=0.05,
                            correct_smooth=False)


def test_cosine_factor_per_epoch():
    epochs = 10
    factors = [lr_factor("cosine", e, epochs) for e in range(1, epochs + 1)]
    assert factors[0] == 1.0
    assert factors[5] == pytest.approx(0.5, abs=1e-12)  # epoch 6 of 10: half way through
    assert factors[-1] == pytest.approx((1 - math.cos(math.pi / epochs)) / 2, abs=1e-12) and factors[-1] > 0
    assert all(a > b for a, b in zip(factors, factors[1:]))
    assert [lr_factor("constant", e, epochs) for e in (1, 5, 10)] == [1.0, 1.0, 1.0]
    assert lr_factor("cosine", 1, 1) == 1.0  # a one-epoch run trains at the set rates
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        lr_factor("linear", 1, 10)


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_both_parameter_groups_follow_the_schedule(tmp_path, planted, schedule):
    config = _config(tmp_path, lr_schedule=schedule)
    run = ttrain.setup_run(config, planted, 0, 1, torch.device("cpu"))
    seen = []
    for epoch in range(1, config.epochs + 1):
        ttrain.train_epoch(run, epoch)
        seen.append([group["lr"] for group in run.optimizer.param_groups])
    expected = [[0.02 * lr_factor(schedule, e, 4), 0.05 * lr_factor(schedule, e, 4)] for e in range(1, 5)]
    assert seen == expected  # the same products, computed the same way
    assert len({tuple(lrs) for lrs in seen}) == (1 if schedule == "constant" else 4)


def test_each_epoch_records_its_rate_and_the_cosine_changes_training(tmp_path, planted):
    cosine = train(_config(tmp_path / "cosine", lr_schedule="cosine"), planted)
    constant = train(_config(tmp_path / "constant"), planted)
    assert [r["lr"] for r in cosine["epochs"]] == pytest.approx([0.02 * lr_factor("cosine", e, 4) for e in range(1, 5)])
    assert [r["lr"] for r in constant["epochs"]] == [0.02] * 4
    assert cosine["settings"]["lr_schedule"] == "cosine"
    # One full-graph step per epoch, its loss taken before the step: epoch 2's loss is that of the
    # weights after epoch 1's step at the same rates; from epoch 3 the smaller steps show.
    assert [r["loss"] for r in cosine["epochs"][:2]] == [r["loss"] for r in constant["epochs"][:2]]
    assert all(a["loss"] != b["loss"] for a, b in zip(cosine["epochs"][2:], constant["epochs"][2:]))


def test_a_resumed_run_keeps_its_rates_and_refuses_another_lr(tmp_path, planted):
    """lr is a resume key: a resumed run trains at the rates its checkpoint was written with, and one
    given another --lr is refused (it would mix two runs under one record)."""
    train(_config(tmp_path, epochs=2), planted)
    with pytest.raises(ValueError, match="written with lr=0.02, this run has lr=0.005"):
        train(_config(tmp_path, epochs=3, lr=0.005, resume=True), planted)
    resumed = train(_config(tmp_path, epochs=3, resume=True), planted)
    assert [r["lr"] for r in resumed["epochs"]] == [0.02, 0.02, 0.02]


def test_bad_schedule_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        _config(tmp_path, lr_schedule="step").validate()
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "planted", "--lr-schedule", "step"])
    assert exit_info.value.code == 2 and "--lr-schedule" in capsys.readouterr().err
