"""Tests of ttgnn.checkpoint: pickle-free loading, old checkpoints, one run per folder."""
import os
import pickle
import re
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from ttgnn.checkpoint import (BEST_MODEL_NAME, CHECKPOINT_NAME, JOB_NAME, LOCK_NAME, METRICS_NAME, RunFolder,
                              check_resumable, differing_settings, load_checkpoint, save_checkpoint,
                              upgrade_checkpoint)


class _Payload:
    """Unpickling this runs ``open(marker, "w")``: what a crafted checkpoint could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _state(**extra):
    state = {"version": 2, "epoch": 1, "model": {"w": torch.ones(2)}, "optimizer": {"state": {}, "param_groups": []},
             "metrics": {"epochs": []}, "settings": {"model": "sage"}}
    state.update(extra)
    return state


def test_differing_settings_fills_absent_keys_and_treats_missing_ones_as_asked():
    wanted = {"model": "gat", "rank": 8, "label_spread": 10, "lr": 0.01}
    keys = ["model", "rank", "label_spread", "lr"]
    saved = {"model": "gat", "rank": 4, "lr": 0.01}
    assert differing_settings(saved, wanted, keys) == ["rank"]  # label_spread missing: skipped
    assert differing_settings(saved, wanted, keys, missing_differs=True) == ["rank", "label_spread"]
    # an older run without the setting had the feature off: it differs from a run with it on
    assert differing_settings(saved, wanted, keys, absent={"label_spread": 0}) == ["rank", "label_spread"]
    assert differing_settings(saved, dict(wanted, label_spread=0, rank=4), keys, absent={"label_spread": 0}) == []
    assert differing_settings(saved, wanted, ["model", "lr"]) == []  # only the keys asked about


def test_check_resumable_names_the_first_differing_setting(tmp_path):
    state = _state(settings={"model": "sage", "rank": 8})
    check_resumable(state, {"model": "sage", "rank": 8}, ["model", "rank"], tmp_path / "c.pt")
    with pytest.raises(ValueError, match=r"written with rank=8, this run has rank=4 \(a default"):
        check_resumable(state, {"model": "sage", "rank": 4}, ["model", "rank"], tmp_path / "c.pt")
    with pytest.raises(ValueError, match=r"written with rank=8, this run has rank=None \(None: decided by the run, "
                                         r"e.g. from --compression or --max-params\) \(a default"):
        check_resumable(state, {"model": "sage", "rank": None}, ["model", "rank"], tmp_path / "c.pt")
    with pytest.raises(ValueError, match=r"label_spread=0, this run has label_spread=10"):
        check_resumable(state, {"model": "sage", "rank": 8, "label_spread": 10}, ["model", "rank", "label_spread"],
                        tmp_path / "c.pt", absent={"label_spread": 0})
    del state["optimizer"]
    with pytest.raises(ValueError, match="no 'optimizer' entry"):
        check_resumable(state, {"model": "sage", "rank": 8}, ["model", "rank"], tmp_path / "c.pt")


def test_malicious_checkpoint_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / CHECKPOINT_NAME
    torch.save(_state(payload=_Payload(marker)), path)
    with pytest.raises(ValueError, match="does not unpickle"):
        load_checkpoint(path)
    assert not marker.exists()
    # the same payload as a plain pickle (not a torch zip file) runs nothing either
    path.write_bytes(pickle.dumps(_state(payload=_Payload(marker))))
    with pytest.raises(ValueError):
        load_checkpoint(path)
    assert not marker.exists()


def test_checkpoint_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, epoch=3, model={"w": torch.arange(3.0)}, optimizer={"state": {}, "param_groups": []},
                    metrics={"epochs": [{"epoch": 3, "loss": 0.5}]}, settings={"model": "gat", "fanouts": [5, 5]})
    state = load_checkpoint(path)
    assert state["epoch"] == 3 and torch.equal(state["model"]["w"], torch.arange(3.0))
    assert state["settings"]["fanouts"] == [5, 5]
    path.write_bytes(b"garbage")  # neither of torch.save's formats
    with pytest.raises(ValueError, match=r"^.*ckpt.pt is not a checkpoint: torch.save writes a zip archive or a "
                                         r"pickle, and this file is neither \(it starts with b'garbage'\)$"):
        load_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"^corrupted checkpoint .*ckpt.pt: the file is empty$"):
        load_checkpoint(path)
    path.write_bytes(b"PK\x03\x04garbage")  # a damaged zip archive: torch's message runs to a paragraph
    with pytest.raises(ValueError, match="corrupted checkpoint .*: RuntimeError: PytorchStreamReader") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400  # one line, not torch's paragraphs
    path.write_bytes(b"\x80\x02garbage\n")  # torch's message: "Weights only load failed ..." over several lines
    with pytest.raises(ValueError, match=r"corrupted checkpoint .*: UnpicklingError: Unsupported operand") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)
    torch.save({"version": 99, "model": {}}, path)
    with pytest.raises(ValueError, match="not a ttgnn checkpoint"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")


def test_a_checkpoint_damaged_after_it_was_written_is_refused_not_loaded(tmp_path):
    # torch.load does not check the zip's CRC-32s: flipped bits in the weights resumed silently
    # (a Cora run then ended 5 points lower than the run it continued).
    import zipfile

    path = tmp_path / "ckpt.pt"
    weights = torch.linspace(-1.0, 1.0, 1000)
    save_checkpoint(path, epoch=3, model={"w": weights}, optimizer={"state": {}, "param_groups": []},
                    metrics={"epochs": []}, settings={})
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)  # the weights
    data = bytearray(path.read_bytes())
    start = record.header_offset + 30 + len(record.filename.encode()) + len(record.extra)
    data[start + 1001] ^= 0x01  # one low bit of one weight
    path.write_bytes(bytes(data))
    assert not torch.equal(torch.load(path, weights_only=True)["model"]["w"], weights)  # torch reads it as it is
    with pytest.raises(ValueError, match=rf"^corrupted checkpoint {re.escape(str(path))}: record "
                                         rf"{re.escape(record.filename)} is damaged \(its CRC-32"):
        load_checkpoint(path)
    # a deflated record whose data is damaged: zlib's error, not a traceback
    import os

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", os.urandom(10) * 1000)
        record = archive.infolist()[0]
    data = bytearray(path.read_bytes())
    start = record.header_offset + 30 + len(record.filename.encode()) + len(record.extra)
    data[start + 5:start + 40] = bytes(35)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"^corrupted checkpoint {re.escape(str(path))}: a record cannot be read "
                                         r"\(error: Error -3 while decompressing data"):
        load_checkpoint(path)


def test_old_checkpoint_with_numpy_state_is_refused_then_upgraded(tmp_path):
    path = tmp_path / CHECKPOINT_NAME
    old = _state(version=1, rng={"numpy": np.random.get_state(), "python": (3, tuple(range(5)), None)})
    torch.save(old, path)
    path.chmod(0o440)  # rewritten in place: its permissions stay (it came out 0644, the umask's)
    with pytest.raises(ValueError, match="ttgnn upgrade-checkpoint"):
        load_checkpoint(path)
    assert upgrade_checkpoint(path) is True
    state = load_checkpoint(path)
    assert state["version"] == 2 and "rng" not in state and torch.equal(state["model"]["w"], torch.ones(2))
    assert stat.S_IMODE(path.stat().st_mode) == 0o440


def test_an_old_checkpoint_with_numpy_values_in_its_metrics_is_upgraded_to_one_that_loads(tmp_path):
    # rewritten (rng dropped, version 2) and then refused, with the advice to run the command that had just run
    path = tmp_path / CHECKPOINT_NAME
    metrics = {"epochs": [{"epoch": 1, "valid_acc": np.float64(0.5)}], "best": (np.int64(1), [np.float32(0.25)]),
               "curve": np.arange(3)}
    torch.save(_state(version=1, rng={"numpy": np.random.get_state()}, metrics=metrics), path)
    assert upgrade_checkpoint(path) is True
    state = load_checkpoint(path)
    assert state["metrics"]["epochs"] == [{"epoch": 1, "valid_acc": 0.5}] and state["metrics"]["best"] == (1, [0.25])
    assert type(state["metrics"]["epochs"][0]["valid_acc"]) is float and torch.equal(state["metrics"]["curve"],
                                                                                       torch.arange(3))


def test_a_current_checkpoint_is_left_as_it_is_without_unpickling(tmp_path, monkeypatch, capsys):
    from ttgnn.cli import main

    path = tmp_path / CHECKPOINT_NAME
    torch.save(_state(), path)
    before = path.read_bytes()
    safe_load = torch.load

    def load(*args, **kwargs):
        assert kwargs.get("weights_only") is True, "unpickled a file that a safe load reads"
        return safe_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", load)
    assert upgrade_checkpoint(path) is False
    assert main(["upgrade-checkpoint", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: already in the current checkpoint format, left as it is\n"
    assert path.read_bytes() == before


def test_upgrade_checkpoint_command_names_a_folder_and_a_missing_file(tmp_path, capsys):
    from ttgnn.cli import main

    assert main(["upgrade-checkpoint", str(tmp_path)]) == 2
    assert f"{tmp_path} is a folder: give the checkpoint file in it ({tmp_path / CHECKPOINT_NAME}" in capsys.readouterr().err
    assert main(["upgrade-checkpoint", str(tmp_path / "missing.pt")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not a checkpoint\n")  # refused before anything is unpickled
    assert main(["upgrade-checkpoint", str(tmp_path / "notes.txt")]) == 2
    assert "notes.txt is not a checkpoint: torch.save writes a zip archive or a pickle" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "not a checkpoint\n"
    torch.save(_state(version=1, rng={"numpy": np.random.get_state()}), tmp_path / CHECKPOINT_NAME)
    assert main(["upgrade-checkpoint", str(tmp_path / CHECKPOINT_NAME)]) == 0
    assert "converted to the current checkpoint format" in capsys.readouterr().out
    # several files: one that cannot be read stopped the command, the ones after it left unconverted, unnamed
    torch.save(_state(version=1, rng={"numpy": np.random.get_state()}), tmp_path / "old.pt")
    assert main(["upgrade-checkpoint", str(tmp_path / "missing.pt"), str(tmp_path / "old.pt")]) == 2
    out, err = capsys.readouterr()
    assert out == f"{tmp_path / 'old.pt'}: converted to the current checkpoint format\n"
    assert "checkpoint not found" in err and err.splitlines()[-1] == (
        f"ttgnn upgrade-checkpoint: 1 of 2 files not converted: {tmp_path / 'missing.pt'}")
    assert load_checkpoint(tmp_path / CHECKPOINT_NAME)["version"] == 2


def test_files_follow_the_umask(tmp_path, set_umask):
    set_umask(0o027)
    save_checkpoint(tmp_path / "a.pt", epoch=1, model={}, optimizer={}, metrics={}, settings={})
    assert stat.S_IMODE((tmp_path / "a.pt").stat().st_mode) == 0o640


def test_run_folder_refuses_an_existing_run_without_resume_or_overwrite(tmp_path):
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"x")
    (tmp_path / METRICS_NAME).write_text("{}")
    with pytest.raises(ValueError, match="already holds a run .*--resume.*--overwrite"):
        with RunFolder(tmp_path):
            pass
    with RunFolder(tmp_path, resume=True):
        assert (tmp_path / CHECKPOINT_NAME).exists()
    (tmp_path / BEST_MODEL_NAME).write_bytes(b"y")
    names = (CHECKPOINT_NAME, METRICS_NAME, BEST_MODEL_NAME)
    with RunFolder(tmp_path, overwrite=True):  # a run that fails before replacing leaves the old one
        pass
    assert all((tmp_path / n).exists() for n in names)
    with RunFolder(tmp_path, overwrite=True) as folder:
        assert all((tmp_path / n).exists() for n in names)
        folder.replace_existing()
        assert not any((tmp_path / n).exists() for n in names)
        (tmp_path / CHECKPOINT_NAME).write_bytes(b"new")
        folder.replace_existing()  # once: the new run's files stay
        assert (tmp_path / CHECKPOINT_NAME).read_bytes() == b"new"
    (tmp_path / CHECKPOINT_NAME).unlink()
    with RunFolder(tmp_path):  # now empty apart from the lock file
        pass
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"x")
    with RunFolder(tmp_path, resume=True, overwrite=True) as folder:
        folder.replace_existing()  # a resume keeps its run
    assert (tmp_path / CHECKPOINT_NAME).exists()


def test_a_restart_of_the_job_that_wrote_the_run_continues_it_and_another_job_does_not(tmp_path):
    # torchrun's restarts used to resume whatever run the folder held: a refused or --overwrite job became a
    # silent resume of another job's run on its first restart
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"old job's")
    with RunFolder(tmp_path, resume=True, job="job-a") as folder:  # job a continues the run, and records it
        folder.replace_existing()
        folder.record_job()
    with pytest.raises(ValueError, match="already holds a run"):
        RunFolder(tmp_path, job="job-b").__enter__()  # another job: the user's own options decide
    with RunFolder(tmp_path, job="job-a") as folder:  # a restart of job a, without --resume: continues
        assert (folder.resume, folder.overwrite) == (True, False)
    with RunFolder(tmp_path, overwrite=True, job="job-a") as folder:  # a restart never replaces its own run
        folder.replace_existing()
    assert (tmp_path / CHECKPOINT_NAME).read_bytes() == b"old job's"
    with RunFolder(tmp_path, overwrite=True, job="job-b") as folder:  # job b replaces it, as asked
        assert not folder.resume
        folder.replace_existing()
        folder.record_job()
    assert not (tmp_path / CHECKPOINT_NAME).exists() and (tmp_path / JOB_NAME).read_text() == "job-b\n"
    with RunFolder(tmp_path) as folder:  # a run outside torchrun forgets the job
        folder.record_job()
    assert not (tmp_path / JOB_NAME).exists()


def test_run_folder_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        RunFolder(path).__enter__()


def test_second_process_is_refused_while_the_first_holds_the_folder(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from ttgnn.checkpoint import RunFolder
        with RunFolder({str(tmp_path)!r}):
            print("locked", flush=True)
            sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ValueError, match=f"in use by pid {holder.pid} on "):
            with RunFolder(tmp_path):
                pass
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=60)
    with RunFolder(tmp_path):  # released when the holder ended
        assert (tmp_path / LOCK_NAME).exists()


def test_lock_is_released_when_the_holder_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from ttgnn.checkpoint import RunFolder
        folder = RunFolder({str(tmp_path)!r}).__enter__()
        print("locked", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait(timeout=60)
    with RunFolder(tmp_path):
        pass


# ---------------------------------------------------------------------- what mutation testing found untested
def test_a_long_load_error_is_cut_to_one_line_of_at_most_200_characters():
    from ttgnn.checkpoint import _gist

    assert _gist(RuntimeError("x" * 200)) == "x" * 200
    assert _gist(RuntimeError("y" * 201)) == "y" * 197 + "..."
    assert _gist(RuntimeError("\n\nfirst line\nsecond\n")) == "first line"
    assert _gist(RuntimeError("advice\nUnsupported operand 103\nmore")) == "Unsupported operand 103"
    assert _gist(RuntimeError("")) == ""


def test_a_missing_checkpoint_is_named():
    with pytest.raises(FileNotFoundError, match=r"^checkpoint not found: nowhere/checkpoint.pt$"):
        load_checkpoint("nowhere/checkpoint.pt")


def test_a_checkpoint_without_settings_resumes_against_the_absent_values_only(tmp_path):
    state = {"epoch": 1, "optimizer": {}, "metrics": {}}  # written before settings were recorded
    check_resumable(state, {"model": "gat"}, ["model"], tmp_path / "c.pt")  # nothing recorded: nothing differs
    with pytest.raises(ValueError, match=r"written with label_spread=0, this run has label_spread=10"):
        check_resumable(state, {"label_spread": 10}, ["label_spread"], tmp_path / "c.pt", absent={"label_spread": 0})


def test_settings_that_are_tuples_in_one_and_lists_in_the_other_do_not_differ():
    assert differing_settings({"fanouts": [15, 10, 5]}, {"fanouts": (15, 10, 5)}, ["fanouts"]) == []
    assert differing_settings({"shapes": [[2, 3], [4]]}, {"shapes": ((2, 3), (4,))}, ["shapes"]) == []
    assert differing_settings({"fanouts": [15, 10]}, {"fanouts": (15, 10, 5)}, ["fanouts"]) == ["fanouts"]
    assert differing_settings({"fanouts": [15, 10, 5]}, {"fanouts": (15, 10, 6)}, ["fanouts"]) == ["fanouts"]


def test_upgrade_rewrites_what_is_not_current_and_names_what_it_cannot(tmp_path):
    path = tmp_path / "c.pt"
    torch.save(_state(version=1), path)  # an old version that holds only tensors and no random states
    assert upgrade_checkpoint(path) is True and load_checkpoint(path)["version"] == 2
    torch.save(_state(rng={"t": torch.zeros(1)}), path)  # current version, but random states kept
    assert upgrade_checkpoint(path) is True and "rng" not in load_checkpoint(path)
    for bad in ({"version": 1, "epoch": 1}, {"version": 7, "model": {}}):  # no weights; an unknown version
        torch.save(bad, path)
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} is not a ttgnn checkpoint$"):
            upgrade_checkpoint(path)
    torch.save(_state(), path)
    path.write_bytes(path.read_bytes()[:200])  # a zip archive cut short
    with pytest.raises(ValueError, match=rf"^corrupted checkpoint {re.escape(str(path))}: RuntimeError: "
                                         r"PytorchStreamReader failed"):
        upgrade_checkpoint(path)


def test_best_model_and_checkpoint_files_hold_what_they_are_given(tmp_path):
    from ttgnn.checkpoint import CHECKPOINT_VERSION, save_best_model

    save_best_model(tmp_path / BEST_MODEL_NAME, epoch=3, model={"w": torch.ones(1)}, settings={"model": "gat"})
    best = load_checkpoint(tmp_path / BEST_MODEL_NAME)
    assert best["settings"] == {"model": "gat"} and best["epoch"] == 3 and best["version"] == CHECKPOINT_VERSION
    save_checkpoint(tmp_path / "a.pt", epoch=1, model={}, optimizer={}, metrics={}, settings={})
    assert "weight_average" not in load_checkpoint(tmp_path / "a.pt")
    average = {"horizon": 2, "updates": 1, "state": {"w": torch.zeros(1)}}
    save_checkpoint(tmp_path / "b.pt", epoch=1, model={}, optimizer={}, metrics={}, settings={},
                    weight_average=average)
    assert load_checkpoint(tmp_path / "b.pt")["weight_average"]["horizon"] == 2


def test_run_folder_creates_nested_folders_names_what_it_cannot_create_and_logs_a_replacement(tmp_path, caplog,
                                                                                             set_umask):
    import logging

    nested = tmp_path / "a" / "b" / "run"
    with RunFolder(nested):
        assert nested.is_dir()
    set_umask(0o002)
    with RunFolder(tmp_path / "masked"):
        pass
    assert stat.S_IMODE((tmp_path / "masked" / LOCK_NAME).stat().st_mode) == 0o664
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=rf"^cannot create output folder {tmp_path / 'file' / 'run'}: Not a directory$"):
        RunFolder(tmp_path / "file" / "run").__enter__()
    (nested / CHECKPOINT_NAME).write_bytes(b"x")
    with caplog.at_level(logging.INFO, logger="ttgnn.checkpoint"):
        with RunFolder(nested, overwrite=True) as folder:
            folder.replace_existing()
    assert f"replaced the run in {nested} (--overwrite)" in [r.getMessage() for r in caplog.records]
    (nested / CHECKPOINT_NAME).write_bytes(b"x")
    (nested / METRICS_NAME).write_text("{}")
    with pytest.raises(ValueError, match=r"already holds a run \(checkpoint.pt, metrics.json\): pass --resume"):
        RunFolder(nested).__enter__()


def test_the_temporaries_of_a_killed_writer_are_removed_when_the_folder_is_claimed(tmp_path, caplog):
    import logging

    stale = [tmp_path / f".{name}.x1y2z3.tmp" for name in (CHECKPOINT_NAME, METRICS_NAME)]
    others = [tmp_path / ".notes.txt.abc.tmp", tmp_path / "keep.tmp", tmp_path / CHECKPOINT_NAME]
    for path in stale + others:
        path.write_bytes(b"x")
    with caplog.at_level(logging.INFO, logger="ttgnn.checkpoint"):
        with RunFolder(tmp_path, resume=True):
            pass
    assert not any(path.exists() for path in stale) and all(path.exists() for path in others)
    assert f"removed {stale[0]}, left by a run killed while writing {CHECKPOINT_NAME}" in caplog.messages


def test_a_holder_that_has_not_written_its_pid_yet_is_another_process_and_release_is_idempotent(tmp_path):
    import fcntl

    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR | os.O_CREAT)  # held, still empty
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(ValueError, match=rf"^output folder {re.escape(str(tmp_path))} is in use by another process "
                                             r"\(lock "):
            RunFolder(tmp_path).__enter__()
    finally:
        os.close(fd)
    folder = RunFolder(tmp_path)
    folder.release()  # never entered: nothing to release
    with folder:
        pass
    folder.release()  # released already by the with block


def test_a_run_starting_while_predict_probes_the_lock_is_not_refused(tmp_path, monkeypatch):
    # RunFolder.in_use takes a shared lock for an instant: a run that tried the lock in that instant was refused
    # as "in use by" the pid its lock file still named
    import fcntl
    import time

    import ttgnn.checkpoint as checkpoint_module

    with RunFolder(tmp_path):
        assert RunFolder.in_use(tmp_path)
    assert not RunFolder.in_use(tmp_path)
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # the probe, caught in the middle
    waits, real_sleep = [], time.sleep

    def probe_ends_during_the_third_wait(seconds):  # not a timer thread, which a loaded machine can delay
        waits.append(seconds)
        if len(waits) == 3:
            os.close(fd)
        real_sleep(seconds)

    monkeypatch.setattr(checkpoint_module.time, "sleep", probe_ends_during_the_third_wait)
    with RunFolder(tmp_path, resume=True):
        monkeypatch.undo()
        assert RunFolder.in_use(tmp_path)
    assert len(waits) == 3
