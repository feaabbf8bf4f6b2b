"""Crash-safe file writes: every file ttgnn writes (checkpoints, metrics, cached node orders) goes
through :func:`atomic_write`; work that several processes may start at once on one cache folder
(compiling the kernels, ogb's processing of a dataset) runs under :func:`exclusive_lock`.

The bytes go to a temporary file in the target's folder, are flushed and ``fsync``'d, and the
file is moved over the target with :func:`os.replace`; the folder is ``fsync``'d too, so after a
crash or a power loss readers find the old file or the new one, never a partial one. Files get
the permissions an ordinary ``open(path, "w")`` would give (``0o666`` minus the umask), not the
``0o600`` of :func:`tempfile.mkstemp`.

Only the standard library is imported at module level (``ttgnn.partition`` uses it without torch).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional, Union

__all__ = ["atomic_write", "atomic_write_json", "atomic_torch_save", "check_output_file", "current_umask",
           "exclusive_lock", "fsync_dir", "remove_abandoned_temporaries", "write_cache_file", "write_node_column",
           "ABANDONED_AFTER_S", "NODE_COLUMN_SUFFIXES"]

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]


def current_umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    """``fsync`` ``folder``, so that a rename in it survives a crash (where the platform allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms/file systems do not open folders
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_output_file(path: PathLike, option: str = "path") -> Path:
    """Refuse, before any work, an output file that :func:`atomic_write` could not write.

    Args:
        path (str or PathLike): the file to be written later; missing folders above it will be created.
        option (str, optional): how the caller names it in messages (e.g. ``"--output"``).
            (default: ``"path"``)

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``path`` is a folder or another file that is not a regular one (a device, a
            FIFO, a socket), or the nearest existing folder above it is a file or cannot be written
            (both named).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give a file name")
    # a link is written through: the folder that must take the file is its target's
    target = _write_target(path, option)
    shown = path if target == path else f"{path} (a link to {target})"
    above = target.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise ValueError(f"cannot write {option} {shown}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {option} {shown}: folder {above} is not writable")
    try:  # os.access says yes to root everywhere (/proc too): a file made and removed says it for sure
        fd, probe = tempfile.mkstemp(dir=above, prefix=".ttgnn-probe.", suffix=".tmp")
    except OSError as err:
        raise ValueError(f"cannot write {option} {shown}: no file can be made in folder {above} "
                         f"({err.strerror})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def _write_target(path: Path, option: str = "path") -> Path:
    """The file a write of ``path`` replaces: the file a symbolic link points to (a link is written
    through, not replaced by a file), after refusing an existing one that is not a regular file
    (renaming over ``/dev/null`` or a FIFO would replace it)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.exists() and not target.is_file() and not target.is_dir():
        kind = ("a device" if target.is_char_device() or target.is_block_device() else
                "a FIFO" if target.is_fifo() else "a socket" if target.is_socket() else "not a regular file")
        shown = path if target == path else f"{path} (a link to {target})"
        raise ValueError(f"{option} {shown} is {kind}, not a regular file; give a file name")
    return target


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], None], mode: Optional[int] = None) -> Path:
    """Write ``path`` atomically: ``write(fh)`` fills a temporary binary file, which then replaces it.

    Args:
        path (str or PathLike): the target file; its folder is created when missing.
        write (callable): called once with the open temporary file (binary mode).
        mode (int, optional): the new file's permission bits. (default: ``0o666`` less the umask,
            as a file :func:`open` creates)

    Returns:
        ``path``. On any exception the temporary file is removed, the target is left as it
        was, and the exception propagates. A symbolic link is written through (the file it points
        to is replaced; the link stays). A writer killed by SIGKILL leaves its temporary
        (``.<name>.*.tmp``) behind: run folders remove theirs under their lock
        (:class:`~ttgnn.checkpoint.RunFolder`), caches by age (:func:`write_cache_file`).

    Raises:
        ValueError: ``path`` exists and is not a regular file (a device such as ``/dev/null``, a
            FIFO, a socket), before anything is written.
    """
    given = Path(path)
    path = _write_target(given)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # it names the temporary it could not create: name the target
        raise OSError(err.errno, err.strerror, str(path)) from err
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~current_umask() if mode is None else mode)
        try:
            os.replace(tmp, path)
        except OSError as err:  # it names the temporary first, which is about to be removed: name the target
            raise OSError(err.errno, err.strerror, str(path)) from err
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None and err.filename in (None, tmp):
            # a failed write (a full disk) names no file, or the temporary, which is gone: name the target
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    fsync_dir(path.parent)
    return given


#: Seconds after its last change that a temporary file of :func:`atomic_write` counts as abandoned
#: (its writer was killed, so it was never renamed or removed): a live writer changes its file all
#: the time until it renames it.
ABANDONED_AFTER_S = 3600.0


def remove_abandoned_temporaries(path: PathLike, max_age: float = ABANDONED_AFTER_S) -> list:
    """Remove the temporary files that :func:`atomic_write` calls for ``path`` (``.<name>.*.tmp``
    beside it) and that have not changed for ``max_age`` seconds: a writer killed with SIGKILL (or a
    power loss) leaves one behind, which no later write would otherwise reclaim. Files that cannot
    be removed are left; nothing is raised.

    Args:
        path (str or PathLike): the target file (not the temporary).
        max_age (float): seconds since a temporary's last change; ``0`` removes every one (a caller
            holding the lock that all writers of ``path`` take). (default: :data:`ABANDONED_AFTER_S`)

    Returns:
        The removed files, as :class:`~pathlib.Path` (the caller logs them).
    """
    import time

    path = Path(path)
    prefix = f".{path.name}."
    try:
        names = [name for name in os.listdir(path.parent) if name.startswith(prefix) and name.endswith(".tmp")]
    except OSError:
        return []
    removed, now = [], time.time()
    for name in names:
        candidate = path.parent / name
        try:
            info = candidate.lstat()
            if not candidate.is_file() or candidate.is_symlink() or (max_age and now - info.st_mtime < max_age):
                continue
            candidate.unlink()
        except OSError:  # not ours to remove after all: it stays
            continue
        removed.append(candidate)
    return removed


#: The files :func:`write_node_column` writes.
NODE_COLUMN_SUFFIXES = (".npy", ".csv", ".csv.gz")


def write_node_column(path: PathLike, values, name: str, extra=()) -> Path:
    """Write one value per node atomically: a ``.csv`` or ``.csv.gz`` file (by ``path``'s name, any
    case) holds a ``node,<name>`` header and a line per node, then any ``extra`` columns; any other
    file holds the ``.npy`` array ``values``.

    Args:
        path (str or PathLike): the file.
        values (numpy.ndarray): ``(N,)`` integers, node ``i``'s value at ``i``.
        name (str): the column's name in a CSV header.
        extra (sequence of (str, numpy.ndarray, str)): further CSV columns as ``(name, (N,) values,
            printf format)``; not written to ``.npy``. (default: none)

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    import gzip

    import numpy as np

    lower = Path(path).name.lower()
    if not lower.endswith((".csv", ".csv.gz")):
        return atomic_write(path, lambda fh: np.save(fh, values))
    columns = [np.arange(len(values)), values, *(column for _, column, _ in extra)]
    header = ",".join(["node", name, *(column_name for column_name, _, _ in extra)])
    fmt = ",".join(["%d", "%d", *(column_fmt for _, _, column_fmt in extra)])

    def write(raw: IO[bytes]) -> None:
        fh = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if lower.endswith(".gz") else raw
        np.savetxt(fh, np.column_stack(columns), fmt=fmt, header=header, comments="")
        if fh is not raw:
            fh.close()  # writes the gzip trailer; atomic_write closes raw

    return atomic_write(path, write)


def write_cache_file(path: PathLike, write: Callable[[IO[bytes]], None], what: str) -> bool:
    """:func:`atomic_write` for a cache file, which only saves time: when the folder cannot be
    created or written (read-only, full, not a folder) or the path is not a regular file's (a
    device, a link to ``/dev/null``), log one warning naming the file and the reason and go on,
    rather than fail the work whose result it would have kept. Temporaries of ``path`` that a
    killed writer left behind are removed once they are old (:func:`remove_abandoned_temporaries`):
    cache writers take no lock, so a young one may belong to a writer still at work.

    Args:
        path, write: as in :func:`atomic_write`.
        what (str): what the file holds, for the warning (e.g. ``"node order"``).

    Returns:
        Whether the file was written.
    """
    for stale in remove_abandoned_temporaries(os.path.realpath(path)):  # a link's lie beside its target
        log.info("removed %s, a temporary file left by a writer that was stopped", stale)
    try:
        atomic_write(path, write)
    except (OSError, ValueError) as err:  # ValueError: the path is a device or a link to one (/dev/null)
        log.warning("could not write the %s cache file %s (%s); going on without caching it (--cache-dir or "
                    "cache_dir= chooses another folder)", what, path, getattr(err, "strerror", None) or err)
        return False
    return True


def atomic_write_json(obj: Any, path: PathLike) -> Path:
    """:func:`json.dump` ``obj`` (indented) to ``path`` atomically."""
    data = (json.dumps(obj, indent=2) + "\n").encode()
    return atomic_write(path, lambda fh: fh.write(data))


def atomic_torch_save(obj: Any, path: PathLike, mode: Optional[int] = None) -> Path:
    """:func:`torch.save` ``obj`` to ``path`` atomically (``mode``: as :func:`atomic_write`). A failed
    write (a full disk) raises the ``OSError`` naming ``path``, as :func:`atomic_write` does: torch's zip
    writer reports it as a ``RuntimeError`` ("unexpected pos ...") raised while handling the ``OSError``."""
    import torch

    def write(fh: IO[bytes]) -> None:
        try:
            torch.save(obj, fh)
        except RuntimeError as err:
            cause = err.__cause__ or err.__context__
            if isinstance(cause, OSError):
                raise cause from None
            raise

    return atomic_write(path, write, mode)


@contextlib.contextmanager
def exclusive_lock(path: PathLike, waiting: str = "") -> Iterator[None]:
    """Hold an exclusive :func:`fcntl.flock` on ``path`` (created, never removed) for the block.

    Processes (and threads, each entering on its own) that take the same ``path`` run the block
    one at a time; the kernel releases the lock when the holder exits, even when it is killed.
    Where ``fcntl`` does not exist (Windows) the block runs unlocked.

    Args:
        path (str or PathLike): the lock file; its folder is created when missing.
        waiting (str): logged at WARNING, with the path, when the lock is held by someone else and
            the caller has to wait ("" logs nothing). (default: "")
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                log.warning("%s (lock %s)", waiting, path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
