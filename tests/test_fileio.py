"""Tests of ttgnn.fileio: atomic writes keep the old file on failure and follow the umask."""
import json
import os
import stat
import time
from pathlib import Path

import pytest

from ttgnn.fileio import atomic_write, atomic_write_json, check_output_file


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_json({"a": 1}, path)

    def broken(fh):
        fh.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, broken)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_permissions_follow_the_umask(tmp_path, umask, mode, set_umask):
    set_umask(umask)
    atomic_write(tmp_path / "f", lambda fh: fh.write(b"x"))
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == mode


def test_creates_the_folder(tmp_path):
    atomic_write_json([1, 2], tmp_path / "a" / "b" / "c.json")
    assert json.loads((tmp_path / "a" / "b" / "c.json").read_text()) == [1, 2]


def test_check_output_file_takes_new_folders_and_refuses_what_cannot_be_written(tmp_path):
    assert check_output_file(tmp_path / "a" / "b" / "out.npy") == tmp_path / "a" / "b" / "out.npy"
    assert check_output_file(str(tmp_path / "out.npy")) == tmp_path / "out.npy"
    assert not (tmp_path / "a").exists()  # a check only: nothing is created
    with pytest.raises(ValueError, match=r"^--output .* is a folder; give a file name$"):
        check_output_file(tmp_path, "--output")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match=rf"^cannot write path {a_file / 'sub' / 'x.npy'}: {a_file} is a file, not a folder$"):
        check_output_file(a_file / "sub" / "x.npy")
    with pytest.raises(ValueError, match=rf"^cannot write path {a_file / 'x.npy'}: {a_file} is a file"):
        check_output_file(a_file / "x.npy")


def test_check_output_file_refuses_a_folder_it_cannot_write(tmp_path, monkeypatch):
    # os.access decides (a permission check that root passes anyway, so it is stood in for here)
    import ttgnn.fileio

    asked = []

    def access(path, mode):
        asked.append((Path(path), mode))
        return False

    monkeypatch.setattr(ttgnn.fileio.os, "access", access)
    with pytest.raises(ValueError, match=rf"^cannot write path {tmp_path / 'new' / 'x.npy'}: folder {tmp_path} is "
                                         r"not writable$"):
        check_output_file(tmp_path / "new" / "x.npy")
    assert asked == [(tmp_path, os.W_OK | os.X_OK)]


def test_a_link_is_written_through_and_a_file_that_is_not_regular_is_refused(tmp_path):
    # a rename over /dev/null (as root), a FIFO or a link replaced it with a regular file
    target = tmp_path / "data" / "target.npy"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.npy"
    link.symlink_to(target)
    assert atomic_write(link, lambda fh: fh.write(b"new")) == link
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert [p.name for p in target.parent.iterdir()] == ["target.npy"]  # the temporary was the target's sibling
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "later.csv")
    atomic_write(dangling, lambda fh: fh.write(b"x"))
    assert dangling.is_symlink() and (tmp_path / "later.csv").read_bytes() == b"x"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fifo_link = tmp_path / "fifo-link"
    fifo_link.symlink_to(fifo)
    for path, shown, kind in ((fifo, fifo, "a FIFO"), (fifo_link, f"{fifo_link} (a link to {fifo})", "a FIFO"),
                              (Path(os.devnull), os.devnull, "a device")):
        message = f"--output {shown} is {kind}, not a regular file; give a file name"
        with pytest.raises(ValueError) as err:
            check_output_file(path, "--output")
        assert str(err.value) == message
        with pytest.raises(ValueError, match="not a regular file"):
            atomic_write(path, lambda fh: pytest.fail("wrote"))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.csv", "data", "fifo", "fifo-link", "later.csv",
                                                          "link.npy"]


def test_a_failed_write_names_the_file_it_was_writing(tmp_path):
    import errno

    def full_disk(fh):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "checkpoint.pt", full_disk)
    assert (err.value.errno, err.value.filename) == (errno.ENOSPC, str(tmp_path / "checkpoint.pt"))
    assert list(tmp_path.iterdir()) == []

    def named(fh):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/elsewhere")

    with pytest.raises(FileNotFoundError) as err:  # an error that names its file keeps it, and its type
        atomic_write(tmp_path / "x", named)
    assert err.value.filename == "/elsewhere"


def test_the_temporary_file_is_a_hidden_sibling_of_the_target(tmp_path):
    # os.replace is atomic only within one file system: the temporary file must sit beside the target
    seen = []
    atomic_write(tmp_path / "out.npy", lambda fh: seen.extend(p.name for p in tmp_path.iterdir()) or fh.write(b"x"))
    (temporary,) = seen  # while writing, the folder holds the temporary file alone
    assert temporary.startswith(".out.npy.") and temporary.endswith(".tmp")
    assert [p.name for p in tmp_path.iterdir()] == ["out.npy"]


def test_json_is_written_indented_with_a_final_newline(tmp_path):
    atomic_write_json({"a": [1, 2]}, tmp_path / "m.json")
    assert (tmp_path / "m.json").read_text() == json.dumps({"a": [1, 2]}, indent=2) + "\n"


def test_a_cache_file_that_cannot_be_written_warns_and_says_so(tmp_path, caplog):
    import logging

    from ttgnn.fileio import write_cache_file

    assert write_cache_file(tmp_path / "c.npy", lambda fh: fh.write(b"x"), "node order") is True
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "c.npy"
    with caplog.at_level(logging.WARNING, logger="ttgnn.fileio"):
        assert write_cache_file(target, lambda fh: fh.write(b"x"), "node order") is False
    assert [r.getMessage() for r in caplog.records] == [
        f"could not write the node order cache file {target} (File exists); going on without caching it "
        "(--cache-dir or cache_dir= chooses another folder)"]


def test_exclusive_lock_runs_one_holder_at_a_time_and_says_why_it_waits(tmp_path, caplog, set_umask):
    import logging
    import threading
    import time

    from ttgnn.fileio import exclusive_lock

    lock = tmp_path / "a" / "b" / ".x.lock"  # its folders are created
    inside, order = threading.Event(), []

    def first(until_logged=True):
        with exclusive_lock(lock):
            inside.set()
            order.append("first in")
            # held until the second holder has found it taken (a fixed hold lost that race under load)
            deadline = time.monotonic() + (60 if until_logged else 0.3)
            while time.monotonic() < deadline and not (until_logged and caplog.records):
                time.sleep(0.01)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(10)
    with caplog.at_level(logging.WARNING, logger="ttgnn.fileio"):
        with exclusive_lock(lock, waiting="waiting for the other"):
            order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert [r.getMessage() for r in caplog.records] == [f"waiting for the other (lock {lock})"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.fileio"):
        with exclusive_lock(lock, waiting="not logged: the lock is free"):
            pass
    assert caplog.records == []
    inside.clear()
    thread = threading.Thread(target=first, args=(False,))
    thread.start()
    inside.wait(10)
    with caplog.at_level(logging.WARNING, logger="ttgnn.fileio"):
        with exclusive_lock(lock):  # waits, and says nothing without a message
            pass
    thread.join()
    assert caplog.records == []
    set_umask(0o002)
    with exclusive_lock(tmp_path / "masked.lock"):
        pass
    assert stat.S_IMODE((tmp_path / "masked.lock").stat().st_mode) == 0o664  # a plain file's mode


def test_check_output_file_makes_a_file_to_be_sure_where_permissions_say_yes(tmp_path, monkeypatch):
    # os.access says yes to root everywhere: `--output /proc/x.csv` was found unwritable only after the
    # work, in an error naming a hidden temporary file.
    import errno
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "mkstemp", read_only)
        with pytest.raises(ValueError, match=rf"^cannot write --output {tmp_path}/x.csv: no file can be made in "
                                             rf"folder {tmp_path} \(Read-only file system\)$"):
            check_output_file(tmp_path / "x.csv", "--output")
    if Path("/proc/self").is_dir():  # Linux: no file can be made in /proc, whoever asks
        with pytest.raises(ValueError, match=r"^cannot write --output /proc/x.npy: no file can be made in folder /proc"):
            check_output_file("/proc/x.npy", "--output")
    assert check_output_file(tmp_path / "x.csv") == tmp_path / "x.csv"
    assert list(tmp_path.iterdir()) == []  # the probe is gone


def test_a_torch_save_that_fills_the_disk_names_the_file_as_any_failed_write(tmp_path, monkeypatch):
    # torch.save's zip writer turns the OSError of a full disk into "RuntimeError: [enforce fail at
    # inline_container.cc] . unexpected pos": the command line then printed a traceback as for a bug.
    import errno

    import torch

    import ttgnn.fileio as fileio

    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fh):
            self.fh, self.written = fh, 0

        def write(self, data):
            self.written += len(data)
            if self.written > 4096:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(fileio.os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    target = tmp_path / "checkpoint.pt"
    with pytest.raises(OSError) as err:
        fileio.atomic_torch_save({"w": torch.zeros(10_000)}, target)
    assert (err.value.errno, err.value.filename) == (errno.ENOSPC, str(target))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="not an OSError"):  # torch's other errors stay as they were
        fileio.atomic_torch_save({"w": _Unsaveable()}, target)


class _Unsaveable:
    def __reduce__(self):
        raise RuntimeError("not an OSError")


def test_a_target_that_cannot_be_replaced_is_named_not_the_temporary(tmp_path):
    # os.replace's error names the temporary file first (removed at once); the user needs the target
    target = tmp_path / "checkpoint.pt"
    target.mkdir()  # e.g. a folder made where the run writes its checkpoint
    with pytest.raises(OSError) as err:
        atomic_write(target, lambda fh: fh.write(b"x"))
    assert err.value.filename == str(target)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_a_link_is_checked_where_its_target_would_be_written(tmp_path):
    # the check looked at the link's folder: a link into a file's "folder" passed it, and the command failed
    # after all its work, naming the target's folder or a temporary that never existed
    (tmp_path / "a-file").write_text("x")
    link = tmp_path / "out.npy"
    link.symlink_to(tmp_path / "a-file" / "x.npy")
    with pytest.raises(ValueError) as err:
        check_output_file(link, "--output")
    assert str(err.value) == (f"cannot write --output {link} (a link to {tmp_path / 'a-file' / 'x.npy'}): "
                              f"{tmp_path / 'a-file'} is a file, not a folder")
    fine = tmp_path / "fine.npy"
    fine.symlink_to(tmp_path / "new" / "x.npy")  # a folder atomic_write makes: accepted
    assert check_output_file(fine, "--output") == fine


def test_cache_writes_remove_old_temporaries_that_a_killed_writer_left(tmp_path):
    from ttgnn.fileio import ABANDONED_AFTER_S, write_cache_file

    path = tmp_path / "order-abc.npz"
    old = tmp_path / ".order-abc.npz.k1ll3d.tmp"           # a writer killed two hours ago
    young = tmp_path / ".order-abc.npz.w0rk1n.tmp"         # a writer still at work
    other = tmp_path / ".order-xyz.npz.k1ll3d.tmp"         # another target's: not this write's to judge
    linked = tmp_path / ".order-abc.npz.l1nk.tmp"          # a link is never followed or removed
    for stale in (old, young, other):
        stale.write_bytes(b"partial")
    linked.symlink_to(tmp_path / "elsewhere")
    hours_ago = time.time() - 2 * ABANDONED_AFTER_S
    for stale in (old, other):
        os.utime(stale, (hours_ago, hours_ago))
    os.utime(linked, (hours_ago, hours_ago), follow_symlinks=False)
    assert write_cache_file(path, lambda fh: fh.write(b"order"), "node order")
    assert path.read_bytes() == b"order"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, young.name, other.name, linked.name])


def test_a_failure_to_create_or_fill_the_temporary_names_the_target(tmp_path, monkeypatch):
    # a folder made immutable mid-run: "Operation not permitted: .../.checkpoint.pt.cvxj1eu4.tmp", a
    # hidden file that never existed, not the checkpoint
    import errno
    import tempfile

    path = tmp_path / "checkpoint.pt"

    def refused(dir, prefix, suffix):
        raise PermissionError(errno.EPERM, "Operation not permitted", os.path.join(dir, f"{prefix}x1y2{suffix}"))

    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "mkstemp", refused)
        with pytest.raises(PermissionError) as err:
            atomic_write(path, lambda fh: fh.write(b"x"))
    assert err.value.filename == str(path) and err.value.errno == errno.EPERM

    def chmod_refused(name, mode):
        raise PermissionError(errno.EPERM, "Operation not permitted", name)

    monkeypatch.setattr(os, "chmod", chmod_refused)
    with pytest.raises(PermissionError) as err:
        atomic_write(path, lambda fh: fh.write(b"x"))
    assert err.value.filename == str(path)
    assert list(tmp_path.iterdir()) == []
