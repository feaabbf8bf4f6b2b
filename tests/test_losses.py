"""Training losses (``--loss``): values and gradients against their definitions, what a run
records and trains with, and the setting's checks."""
import functools
import math

import pytest
import torch
import torch.nn.functional as F

import ttgnn.train as ttrain
from ttgnn.cli import main
from ttgnn.losses import LOG_CE_EPS, node_loss
from ttgnn.train import train

from configs import small_config

_config = functools.partial(small_config, epochs=3, mode="full", label_input=False, correct_smooth=False)


def _logits_and_labels(n=7, classes=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, classes, generator=gen, dtype=torch.float64) * 3
    labels = torch.randint(0, classes, (n,), generator=gen)
    return logits, labels


def test_eps_is_one_minus_log_two():
    assert LOG_CE_EPS == pytest.approx(1 - math.log(2), abs=1e-15)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_values_against_the_definitions(smoothing):
    logits, labels = _logits_and_labels()
    assert node_loss(logits, labels, "ce", smoothing) == F.cross_entropy(logits, labels, label_smoothing=smoothing)
    assert node_loss(logits, labels, label_smoothing=smoothing) == node_loss(logits, labels, "ce", smoothing)  # default
    # cross-entropy written out: -sum_c q_c log softmax_c, q the smoothed one-hot target
    classes = logits.shape[1]
    target = torch.full_like(logits, smoothing / classes)
    target[torch.arange(len(labels)), labels] += 1 - smoothing
    per_node = -(target * torch.log_softmax(logits, dim=1)).sum(dim=1)
    expected = torch.log1p(per_node / LOG_CE_EPS).mean()  # log(eps + ce) - log(eps)
    torch.testing.assert_close(node_loss(logits, labels, "log-ce", smoothing), expected, rtol=1e-12, atol=1e-14)


def test_log_ce_is_zero_at_a_perfect_fit():
    logits, labels = _logits_and_labels()
    assert node_loss(logits, labels, "log-ce") > 0
    perfect = torch.full_like(logits, -50.0)
    perfect[torch.arange(len(labels)), labels] = 50.0
    assert float(node_loss(perfect, labels, "log-ce")) == pytest.approx(0.0, abs=1e-15)


def test_log_ce_gradient_is_ce_gradient_scaled_per_node():
    """d/dz mean(log(eps + ce_i)) = (1/n) sum_i grad ce_i / (eps + ce_i): badly fitted nodes weigh less."""
    logits, labels = _logits_and_labels()
    z = logits.clone().requires_grad_(True)
    node_loss(z, labels, "log-ce").backward()
    per_node = F.cross_entropy(logits, labels, reduction="none")
    ce_grad = torch.softmax(logits, dim=1) - F.one_hot(labels, logits.shape[1]).double()
    expected = ce_grad / (LOG_CE_EPS + per_node)[:, None] / len(labels)
    torch.testing.assert_close(z.grad, expected, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda t: node_loss(t, labels, "log-ce", 0.1), (logits.clone().requires_grad_(),))


def test_unknown_loss_is_refused(tmp_path, capsys):
    logits, labels = _logits_and_labels()
    with pytest.raises(ValueError, match="loss must be one of"):
        node_loss(logits, labels, "focal")
    with pytest.raises(ValueError, match="loss must be one of"):
        _config(tmp_path, loss="focal").validate()
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "planted", "--loss", "focal"])
    assert exit_info.value.code == 2 and "--loss" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_a_run_trains_with_its_loss_and_records_it(tmp_path, planted, mode):
    """The first epoch's recorded loss is the chosen loss of the initial weights (full graph: one step
    whose loss is taken before it), so log-ce's lies below log(1 + ce / eps) of ce's mean (Jensen: the
    log of the mean is above the mean of the logs); the runs differ from there on."""
    log_ce = train(_config(tmp_path / "log", loss="log-ce", mode=mode), planted)
    ce = train(_config(tmp_path / "ce", mode=mode), planted)
    assert log_ce["settings"]["loss"] == "log-ce" and ce["settings"]["loss"] == "ce"
    if mode == "full":
        first_ce = ce["epochs"][0]["loss"]
        assert 0 < log_ce["epochs"][0]["loss"] < math.log1p(first_ce / LOG_CE_EPS) - 1e-3
    assert all(a["loss"] != b["loss"] for a, b in zip(log_ce["epochs"], ce["epochs"]))
    # the weights differ after training: the losses' gradients differ
    runs = [ttrain.setup_run(_config(tmp_path / f"w{k}", loss=k, mode=mode), planted, 0, 1, torch.device("cpu"))
            for k in ("ce", "log-ce")]
    for run in runs:
        ttrain.train_epoch(run, 1)
    ce_weights, log_ce_weights = (torch.cat([p.detach().flatten() for p in run.net.parameters()]) for run in runs)
    assert not torch.equal(ce_weights, log_ce_weights)


@pytest.mark.parametrize("smoothing", [-0.1, float("nan"), 1.0])
def test_a_label_smoothing_outside_its_range_is_refused(smoothing):
    # torch took -0.1 and NaN as no smoothing
    logits, labels = torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 1])
    with pytest.raises(ValueError, match=r"^label_smoothing must be a number in \[0, 1\), got "):
        node_loss(logits, labels, label_smoothing=smoothing)


def test_distill_loss_refuses_a_teacher_that_is_not_probabilities():
    from ttgnn.losses import distill_loss

    logits = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    probs = torch.softmax(torch.randn(5, 3, generator=torch.Generator().manual_seed(1)), 1)
    assert float(distill_loss(logits, probs)) >= 0.0
    for teacher in (probs * 0.1, logits):  # -0.166 and nan before
        with pytest.raises(ValueError, match=r"^teacher_probs must be class probabilities"):
            distill_loss(logits, teacher)
