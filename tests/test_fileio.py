"""Tests of ttgnn.fileio: atomic writes keep the old file on failure and follow the umask."""
import json
import os
import stat

import pytest

from ttgnn.fileio import atomic_write, atomic_write_json


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
def test_permissions_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "f", lambda fh: fh.write(b"x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == mode


def test_creates_the_folder(tmp_path):
    atomic_write_json([1, 2], tmp_path / "a" / "b" / "c.json")
    assert json.loads((tmp_path / "a" / "b" / "c.json").read_text()) == [1, 2]
