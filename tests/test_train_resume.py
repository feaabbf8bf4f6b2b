"""Exact resume of ``ttgnn.train.train`` when validation accuracy falls after the best epoch.

A resumed run must carry over the best validation accuracy so far: otherwise its first epoch
after the restart is taken as the best one, ``best_model.pt`` is overwritten with worse weights,
and Correct and Smooth runs on them. Runs whose validation accuracy only rises cannot show that,
so the run here overfits on purpose (full table, high learning rates, no dropout) and the test
first checks that its validation accuracy does fall after its best epoch.
"""
import functools

import pytest
import torch

from ttgnn.checkpoint import BEST_MODEL_NAME, CHECKPOINT_NAME, load_checkpoint
from ttgnn.data import planted_partition
from ttgnn.train import train

from configs import small_config

EPOCHS = 8


# Measured with these settings: validation accuracy peaks at epoch 5 (0.973) and stays below
# it afterwards (0.96, 0.96, 0.947); deterministic for the seed (one thread).
_config = functools.partial(small_config, embedding="full", hidden=32, epochs=EPOCHS, mode="full", lr=0.05,
                            emb_lr=0.3, dropout=0.0, norm="none", init_scale=1.0, label_input=False,
                            correct_smooth=True, seed=0)


@pytest.fixture(scope="module")
def overfitting():
    return planted_partition(300, num_classes=4, avg_degree=6, homophily=0.8, seed=0)


@pytest.fixture(scope="module")
def uninterrupted(overfitting, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    metrics = train(_config(out), overfitting)
    valid = [r["valid_acc"] for r in metrics["epochs"]]
    best = metrics["best_epoch"]
    # The precondition of this file: the best epoch is neither the last nor the one before it,
    # and every later epoch is strictly worse on validation.
    assert 1 < best < EPOCHS - 1, valid
    assert max(valid[best:]) < metrics["best_valid_acc"] == valid[best - 1], valid
    return out, metrics


def _weights(path):
    state = load_checkpoint(path)
    return state["epoch"], state["model"]


@pytest.mark.parametrize("stop", ["at_best", "after_best"])
def test_resume_after_the_best_epoch_keeps_it(tmp_path, overfitting, uninterrupted, stop):
    whole_dir, whole = uninterrupted
    stop_epoch = whole["best_epoch"] + (0 if stop == "at_best" else 1)
    train(_config(tmp_path, epochs=stop_epoch), overfitting)
    resumed = train(_config(tmp_path, resume=True), overfitting)

    assert [r["epoch"] for r in resumed["epochs"]] == list(range(1, EPOCHS + 1))
    for key in ("loss", "train_acc", "valid_acc", "test_acc"):
        assert [r[key] for r in resumed["epochs"]] == [r[key] for r in whole["epochs"]], key
    assert resumed["best_epoch"] == whole["best_epoch"]
    assert resumed["best_valid_acc"] == whole["best_valid_acc"]
    assert resumed["test_acc"] == whole["test_acc"]
    assert resumed["valid_acc_at_best"] == whole["valid_acc_at_best"]

    # best_model.pt holds the best epoch's weights, bit for bit, in both runs.
    whole_epoch, whole_best = _weights(whole_dir / BEST_MODEL_NAME)
    resumed_epoch, resumed_best = _weights(tmp_path / BEST_MODEL_NAME)
    assert resumed_epoch == whole_epoch == whole["best_epoch"]
    assert whole_best.keys() == resumed_best.keys()
    for key in whole_best:
        assert torch.equal(whole_best[key], resumed_best[key]), key
    # ... and differs from the last epoch's (the run did move on after its best epoch).
    last = load_checkpoint(tmp_path / CHECKPOINT_NAME)["model"]
    assert any(not torch.equal(last[key], resumed_best[key]) for key in last)

    # Correct and Smooth runs on the best epoch's model, restored from best_model.pt.
    cs_whole, cs_resumed = whole["correct_smooth"], resumed["correct_smooth"]
    assert cs_resumed["epoch"] == whole["best_epoch"]
    assert {k: v for k, v in cs_resumed.items() if k != "seconds"} == \
        {k: v for k, v in cs_whole.items() if k != "seconds"}


def test_resuming_a_finished_run_changes_nothing(tmp_path, overfitting, uninterrupted):
    _, whole = uninterrupted
    train(_config(tmp_path), overfitting)
    _, before = _weights(tmp_path / BEST_MODEL_NAME)
    again = train(_config(tmp_path, resume=True), overfitting)
    assert [r["valid_acc"] for r in again["epochs"]] == [r["valid_acc"] for r in whole["epochs"]]
    assert (again["best_epoch"], again["best_valid_acc"], again["test_acc"]) == \
        (whole["best_epoch"], whole["best_valid_acc"], whole["test_acc"])
    epoch, after = _weights(tmp_path / BEST_MODEL_NAME)
    assert epoch == whole["best_epoch"]
    assert all(torch.equal(before[key], after[key]) for key in before)


def test_a_resume_that_would_end_before_the_checkpoint_is_refused(tmp_path, overfitting):
    train(_config(tmp_path, epochs=3), overfitting)
    before = (tmp_path / "metrics.json").read_text()
    with pytest.raises(ValueError) as err:
        train(_config(tmp_path, epochs=2, resume=True), overfitting)
    assert str(err.value) == (f"{tmp_path / CHECKPOINT_NAME} holds epoch 3, past this run's last, epochs=2: "
                              "resume with epochs >= 3, or overwrite the run")
    assert (tmp_path / "metrics.json").read_text() == before  # the run's record as it was
    finished = train(_config(tmp_path, epochs=3, resume=True), overfitting)  # its own count: a finished run
    assert [r["epoch"] for r in finished["epochs"]] == [1, 2, 3]


def test_a_resume_with_other_table_shapes_is_refused_by_name_not_as_corrupted(tmp_path, overfitting):
    # --row-shape / --col-shape are no resume settings: the weights of other shapes read as "corrupted checkpoint"
    tt = functools.partial(_config, tmp_path, embedding="tt", rank=2, epochs=2, order="random")
    train(tt(), overfitting)
    before = (tmp_path / CHECKPOINT_NAME).read_bytes()
    saved = load_checkpoint(tmp_path / CHECKPOINT_NAME)["metrics"]
    for changed in (dict(col_shape=[2, 2, 4]), dict(row_shape=[10, 6, 5])):  # (7, 7, 7) x (4, 2, 2) saved
        with pytest.raises(ValueError) as err:
            train(tt(epochs=3, resume=True, **changed), overfitting)
        message = str(err.value)
        assert message.startswith(f"checkpoint {tmp_path / CHECKPOINT_NAME} holds a TT table of row_shape "
                                  f"{saved['row_shape']}, col_shape {saved['col_shape']}, ranks {saved['ranks']}; "
                                  "this run builds row_shape "), message
        assert "corrupted" not in message and message.endswith(
            "give the checkpoint's --row-shape / --col-shape (or leave them automatic, as it did) to continue that "
            "run, or another output folder")
    assert (tmp_path / CHECKPOINT_NAME).read_bytes() == before
    same = dict(row_shape=saved["row_shape"], col_shape=saved["col_shape"])  # given as the run chose them: the same
    assert [r["epoch"] for r in train(tt(epochs=3, resume=True, **same), overfitting)["epochs"]] == [1, 2, 3]
    # with the rank left to the run, another shape gives another rank (2 on [14, 15, 15], 3 on [10, 10, 30]):
    # the shape is named, not "written with rank=2, this run has rank=3"
    larger = planted_partition(3000, num_classes=4, avg_degree=6, homophily=0.8, seed=0)
    auto = functools.partial(_config, tmp_path / "auto", embedding="tt", rank=None, epochs=1, order="random")
    train(auto(), larger)
    with pytest.raises(ValueError, match=r"holds a TT table of row_shape \[14, 15, 15\], col_shape \[4, 2, 2\], "
                                         r"ranks \[1, 2, 2, 1\]; this run builds row_shape \[10, 10, 30\], .*"
                                         r"ranks \[1, 3, 3, 1\]: give the checkpoint's --row-shape"):
        train(auto(epochs=2, resume=True, row_shape=[10, 10, 30]), larger)
    # another rank alone is named as the rank
    with pytest.raises(ValueError, match=r"written with rank=2, this run has rank=3"):
        train(tt(epochs=3, resume=True, rank=3), overfitting)
    # settings that change the table as a side effect are named themselves, not as a shape
    with pytest.raises(ValueError, match=r"written with embedding='tt', this run has embedding='full'"):
        train(tt(epochs=3, resume=True, embedding="full"), overfitting)
    with pytest.raises(ValueError, match=r"written with num_cores=None, this run has num_cores=2"):
        train(tt(epochs=3, resume=True, num_cores=2), overfitting)


def test_a_resume_on_other_data_of_the_same_name_and_size_is_refused(tmp_path, overfitting):
    import dataclasses

    train(_config(tmp_path, epochs=2), overfitting)
    before = (tmp_path / CHECKPOINT_NAME).read_bytes()
    labels = overfitting.labels.clone()
    labels[overfitting.split["train"][0]] = (labels[overfitting.split["train"][0]] + 1) % overfitting.num_classes
    for other in (dataclasses.replace(overfitting, labels=labels),
                  dataclasses.replace(overfitting, edge_index=overfitting.edge_index[:, 1:].copy(), _csr=None,
                                      _adjacency={})):
        with pytest.raises(ValueError) as err:
            train(_config(tmp_path, epochs=3, resume=True), other)
        assert str(err.value) == (
            f"checkpoint {tmp_path / CHECKPOINT_NAME} was trained on other data than {overfitting.name} here (its "
            "edges, labels or split differ, though the name and size match): resume with the dataset root it was "
            "trained on (--root), or train anew in another output folder")
    assert (tmp_path / CHECKPOINT_NAME).read_bytes() == before
    assert [r["epoch"] for r in train(_config(tmp_path, epochs=3, resume=True), overfitting)["epochs"]] == [1, 2, 3]


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_the_first_epochs_of_a_longer_run_are_the_shorter_run(overfitting, model):
    # benchmarks/train_arxiv.py --paired-epochs K reads a K-epoch run off a longer run's first K records:
    # with a constant learning rate and one thread nothing in training depends on the epoch count.
    config = functools.partial(small_config, None, model=model, mode="full", label_input=True, label_reuse=1,
                               heads=2, seed=3)
    short, long = train(config(epochs=3), overfitting), train(config(epochs=6), overfitting)
    measured = ("epoch_time", "eval_time", "peak_memory_mib")  # the machine's, not the computation's

    def computed(records):
        return [{k: v for k, v in r.items() if k not in measured} for r in records]

    assert len(long["epochs"]) == 6 and "valid_acc" in computed(short["epochs"])[0]
    assert computed(long["epochs"][:3]) == computed(short["epochs"])


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs, no handler sees it."""


@pytest.mark.parametrize("where", ["before_checkpoint", "before_commit"])
def test_a_run_killed_between_its_best_model_and_its_checkpoint_resumes_exactly(tmp_path, overfitting, uninterrupted,
                                                                               monkeypatch, where):
    # A new best epoch writes two files; a run killed between them left a best_model.pt of an epoch its
    # checkpoint had never seen (resume refused it as corrupted, and the previous best's weights were gone).
    import ttgnn.train as ttrain

    whole_dir, whole = uninterrupted
    best = whole["best_epoch"]
    name = "save_checkpoint" if where == "before_checkpoint" else "commit_staged_best"
    real = getattr(ttrain, name)

    def dies_at_the_best_epoch(*args, **kw):
        epoch = kw["epoch"] if name == "save_checkpoint" else load_checkpoint(tmp_path / CHECKPOINT_NAME)["epoch"]
        if epoch == best:
            raise _Killed
        return real(*args, **kw)

    monkeypatch.setattr(ttrain, name, dies_at_the_best_epoch)
    with pytest.raises(_Killed):
        train(_config(tmp_path), overfitting)
    monkeypatch.setattr(ttrain, name, real)
    assert load_checkpoint(tmp_path / CHECKPOINT_NAME)["epoch"] == best - (where == "before_checkpoint")

    resumed = train(_config(tmp_path, resume=True), overfitting)
    assert [r["valid_acc"] for r in resumed["epochs"]] == [r["valid_acc"] for r in whole["epochs"]]
    assert (resumed["best_epoch"], resumed["test_acc"]) == (whole["best_epoch"], whole["test_acc"])
    assert not (tmp_path / "best_model.next.pt").exists()
    resumed_epoch, resumed_best = _weights(tmp_path / BEST_MODEL_NAME)
    _, whole_best = _weights(whole_dir / BEST_MODEL_NAME)
    assert resumed_epoch == best and all(torch.equal(whole_best[k], resumed_best[k]) for k in whole_best)


def test_a_job_of_several_processes_resumes_a_dataset_folder_that_lies_elsewhere_on_each_machine(tmp_path,
                                                                                                    monkeypatch):
    # a dataset path is recorded absolute (rank 0's): a rank whose working directory differs made the same
    # relative --dataset another absolute path, and refused the checkpoint rank 0 sent it
    from ttgnn.checkpoint import differing_settings
    from ttgnn.train import _resume_settings

    monkeypatch.chdir(tmp_path)
    config = small_config(None, dataset="graphs/planted-400")
    state = {"settings": dict(config.settings(), dataset="/elsewhere/graphs/planted-400")}
    keys = config.resume_keys()
    assert differing_settings(state["settings"], _resume_settings(config, state, 2), keys) == []
    assert differing_settings(state["settings"], _resume_settings(config, state, 1), keys) == ["dataset"]
    state["settings"]["dataset"] = "/elsewhere/graphs/other-400"  # another folder's name: another dataset
    assert differing_settings(state["settings"], _resume_settings(config, state, 2), keys) == ["dataset"]


def test_a_run_resumes_under_the_other_spelling_of_its_dataset_folder(tmp_path, monkeypatch):
    # "--dataset cora" (a name under the root) and "--dataset ROOT/cora" (its path) read one folder; a resume
    # under the other spelling was refused as another dataset
    from raw_layout import write_raw_dataset

    root = tmp_path / "data"
    write_raw_dataset(root / "ring")
    write_raw_dataset(root / "other", seed=1)
    monkeypatch.setenv("TTGNN_DATA", str(root))
    config = functools.partial(small_config, epochs=1, mode="full", label_input=False, from_full=False, seed=0)
    train(config(tmp_path / "by-name", dataset="ring"))
    train(config(tmp_path / "by-name", dataset=str(root / "ring"), epochs=2, resume=True))
    assert load_checkpoint(tmp_path / "by-name" / CHECKPOINT_NAME)["epoch"] == 2
    train(config(tmp_path / "by-path", dataset=str(root / "ring"), root=str(root)))
    train(config(tmp_path / "by-path", dataset="ring", root=str(root), epochs=2, resume=True))
    assert load_checkpoint(tmp_path / "by-path" / CHECKPOINT_NAME)["epoch"] == 2
    with pytest.raises(ValueError, match=r"was written with dataset='.*ring', this run has dataset='other'"):
        train(config(tmp_path / "by-path", dataset="other", epochs=3, resume=True))


def test_a_checkpoint_that_cannot_be_written_names_the_last_complete_one_and_resume_continues(tmp_path, planted,
                                                                                              monkeypatch):
    # a full disk or a folder made read-only mid-run: the error named a temporary file, not what the folder
    # still holds or that --resume continues the run
    import errno

    import ttgnn.train as train_module

    out = tmp_path / "run"
    config = small_config(out, mode="full", epochs=3, seed=0)
    real_save = train_module.save_checkpoint

    def full_disk_at_epoch_2(path, *, epoch, **kwargs):
        if epoch == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save(path, epoch=epoch, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(train_module, "save_checkpoint", full_disk_at_epoch_2)
        with pytest.raises(OSError, match=rf"^could not write the run's files after epoch 2 \(No space left on "
                                          rf"device: {out / CHECKPOINT_NAME}\); the last complete checkpoint is "
                                          rf"epoch 1's \({out / CHECKPOINT_NAME}\): make room .* then --resume"):
            train(config, planted)
    assert load_checkpoint(out / CHECKPOINT_NAME)["epoch"] == 1
    resumed = train(small_config(out, mode="full", epochs=3, seed=0, resume=True), planted)
    assert [r["epoch"] for r in resumed["epochs"]] == [1, 2, 3]
