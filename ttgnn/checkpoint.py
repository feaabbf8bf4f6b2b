"""Checkpoints and run folders: what a training run writes, how it is read back, and who may write.

A run folder (``--output-dir``) holds one run:

* ``checkpoint.pt``: the last complete epoch (model, optimiser, metrics so far, settings);
* ``best_model.pt``: the weights of the epoch with the best validation accuracy;
* ``best_model.next.pt``: a new best epoch's weights while its checkpoint is written (see
  :func:`commit_staged_best`); present only when a run was stopped in between;
* ``metrics.json``: the metrics so far, human-readable;
* ``run.lock``: held (``flock``) by the process writing the folder, with its pid and host;
* ``elastic-job``: the ``torchrun`` job whose run the folder holds (a data-parallel run under
  ``torchrun``), so that a restart of that job, and only of that job, continues it.

Checkpoints are read with ``torch.load(weights_only=True)``: tensors and plain containers only, so
a crafted file cannot run code; anything else is reported as an error. :func:`upgrade_checkpoint`
converts a checkpoint of an older ttgnn that stored pickled NumPy random states (only for files
one trusts: it unpickles them).
"""
from __future__ import annotations

import errno
import logging
import os
import pickle
import socket
import stat
import time
from pathlib import Path
from typing import Optional, Union

import torch

from .config import option_text, recorded_dataset
from .fileio import atomic_torch_save, atomic_write, fsync_dir, remove_abandoned_temporaries

__all__ = ["CHECKPOINT_NAME", "BEST_MODEL_NAME", "METRICS_NAME", "LOCK_NAME", "JOB_NAME", "CHECKPOINT_VERSION",
           "load_checkpoint", "save_checkpoint", "save_best_model", "check_resumable", "differing_settings",
           "upgrade_checkpoint", "RunFolder", "STAGED_BEST_NAME", "commit_staged_best", "settle_staged_best"]

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
BEST_MODEL_NAME = "best_model.pt"
METRICS_NAME = "metrics.json"
LOCK_NAME = "run.lock"
JOB_NAME = "elastic-job"
STAGED_BEST_NAME = "best_model.next.pt"
RUN_FILES = (CHECKPOINT_NAME, BEST_MODEL_NAME, METRICS_NAME, STAGED_BEST_NAME)
#: 2: no pickled objects (version 1 stored NumPy/Python random states, which need unpickling).
CHECKPOINT_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # a version-1 file that holds only tensors (e.g. best_model.pt) loads as is

PathLike = Union[str, os.PathLike]


def _gist(err: Exception, most: int = 200) -> str:
    """One line of ``err``'s message: torch's load errors run to paragraphs of advice, the cause in
    one line of them (``Unsupported operand 103``) or in the first."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    line = next((line for line in lines if line.startswith("Unsupported")), lines[0] if lines else "")
    return line if len(line) <= most else line[:most - 3] + "..."


def _check_torch_save_file(path: Path) -> None:
    """Raise unless ``path`` is a file that starts as :func:`torch.save` files do: a zip archive (the
    format since torch 1.6) or a pickle (the legacy one). ``FileNotFoundError`` when nothing is
    there, ``ValueError`` otherwise."""
    if not path.is_file():
        if path.exists() and not path.is_dir():  # a device, a FIFO: "not found" misled
            raise ValueError(f"{path} is not a regular file: a checkpoint is a file that ttgnn train wrote")
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if not head:
        raise ValueError(f"corrupted checkpoint {path}: the file is empty")
    if not (head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"):
        raise ValueError(f"{path} is not a checkpoint: torch.save writes a zip archive or a pickle, and this "
                         f"file is neither (it starts with {head!r})")
    if head.startswith(b"PK\x03\x04"):
        _check_zip_checksums(path)


def _check_zip_checksums(path: Path) -> None:
    """Raise ``ValueError`` when a record of the zip archive ``path`` fails its CRC-32: torch.save
    stores one per record, and torch.load does not check them, so a file damaged after it was
    written (a flipped bit, a bad disk) loaded as weights no run ever had. An archive too damaged
    to open is left to :func:`torch.load`, whose error names it."""
    import zipfile
    import zlib

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError):  # torch.load's error says more
        return
    with archive:
        try:
            bad = archive.testzip()  # the first record that fails its CRC-32 or cannot be read, else None
        except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, RuntimeError, zlib.error) as err:
            raise ValueError(f"corrupted checkpoint {path}: a record cannot be read ({type(err).__name__}: "
                             f"{_gist(err)})") from None
    if bad is not None:
        raise ValueError(f"corrupted checkpoint {path}: record {bad} is damaged (its CRC-32 or its header fails "
                         "the check; the file changed after it was written)")


def load_checkpoint(path: PathLike) -> dict:
    """Read a checkpoint or best-model file written by :func:`ttgnn.train.train`, without unpickling code.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is damaged, holds objects other than tensors and plain containers,
            or is not a ttgnn checkpoint; the message says which.
    """
    path = Path(path)
    _check_torch_save_file(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "Unsupported global" in str(err) or "Unsupported class" in str(err):
            raise ValueError(
                f"checkpoint {path} holds objects other than tensors and plain containers, and ttgnn does not "
                f"unpickle them (they could run code). If it is a checkpoint of an older ttgnn that you trust, "
                f"convert it once with: ttgnn upgrade-checkpoint {path}") from None
        raise ValueError(f"corrupted checkpoint {path}: {type(err).__name__}: {_gist(err)}") from None
    except Exception as err:  # noqa: BLE001 - torch raises many types for a damaged file
        raise ValueError(f"corrupted checkpoint {path}: {type(err).__name__}: {_gist(err)}") from None
    if not isinstance(state, dict) or state.get("version") not in _READABLE_VERSIONS or "model" not in state:
        raise ValueError(f"corrupted checkpoint {path}: not a ttgnn checkpoint (versions {_READABLE_VERSIONS})")
    return state


def save_checkpoint(path: PathLike, *, epoch: int, model: dict, optimizer: dict, metrics: dict,
                    settings: dict, weight_average: Optional[dict] = None) -> None:
    """Write the state after ``epoch`` atomically (see :mod:`ttgnn.fileio`); ``weight_average``:
    :meth:`ttgnn.averaging.WeightAverage.state_dict`, where the run averages its weights."""
    state = {"version": CHECKPOINT_VERSION, "epoch": int(epoch), "model": model,
             "optimizer": optimizer, "metrics": metrics, "settings": settings}
    if weight_average is not None:
        state["weight_average"] = weight_average
    atomic_torch_save(state, path)


def save_best_model(path: PathLike, *, epoch: int, model: dict, settings: dict,
                    dataset_fingerprint: Optional[str] = None) -> None:
    """Write the best epoch's weights atomically, with the settings and the fingerprint of the data
    they were trained on (:meth:`ttgnn.data.NodeDataset.fingerprint`; ``None``: not recorded)."""
    state = {"version": CHECKPOINT_VERSION, "epoch": int(epoch), "model": model, "settings": settings}
    if dataset_fingerprint is not None:
        state["dataset_fingerprint"] = dataset_fingerprint
    atomic_torch_save(state, path)


def commit_staged_best(folder: PathLike) -> None:
    """Make the staged best model (``best_model.next.pt``) the run's ``best_model.pt``.

    A new best epoch's weights are written to the staged file first, then the checkpoint that
    names that epoch as the best, then this renames the staged file: ``best_model.pt`` never
    runs ahead of ``checkpoint.pt`` (a run killed between the two writes left a best model that
    its checkpoint disowned, and the previous best's weights were gone).
    """
    folder = Path(folder)
    os.replace(folder / STAGED_BEST_NAME, folder / BEST_MODEL_NAME)
    fsync_dir(folder)


def settle_staged_best(folder: PathLike, best_epoch: int) -> None:
    """Finish what a run stopped between :func:`save_checkpoint` and :func:`commit_staged_best` left:
    a staged best model of ``best_epoch`` (the checkpoint's best) is committed; one of another
    epoch (its checkpoint was never written) is deleted. Nothing staged: nothing to do."""
    staged = Path(folder) / STAGED_BEST_NAME
    if not staged.exists():
        return
    try:
        epoch = load_checkpoint(staged).get("epoch")
    except ValueError:  # written atomically, so whole; anything else is no best model of this run
        epoch = None
    if epoch == best_epoch:
        commit_staged_best(folder)
        log.info("completed %s from %s (the run stopped between the two)", BEST_MODEL_NAME, staged)
    else:
        staged.unlink()
        log.info("removed %s: its epoch %s was never checkpointed", staged, epoch)


def differing_settings(saved: dict, wanted: dict, keys, absent: Optional[dict] = None,
                       missing_differs: bool = False) -> list:
    """The keys among ``keys`` on which a run's recorded settings differ from this run's, in order.

    Args:
        saved (dict): the settings a checkpoint or ``metrics.json`` recorded.
        wanted (dict): this run's settings (:meth:`ttgnn.config.TrainConfig.settings`).
        keys (iterable of str): the settings to compare.
        absent (dict, optional): the value of a setting added after some runs were recorded, as
            those runs had it (the feature off); it fills ``saved`` where the key is missing.
        missing_differs (bool, optional): a key still missing from ``saved`` counts as differing
            (else it is skipped). (default: ``False``)
    """
    saved = dict(absent or {}, **saved)
    return [key for key in keys
            if (key in saved and _plain(saved[key], key) != _plain(wanted.get(key), key))
            or (key not in saved and missing_differs)]


def _plain(value, key: Optional[str] = None):
    """``value`` with tuples as lists: a setting read back from JSON, or given as a tuple in Python
    and as a list on the command line, is the same setting. A ``dataset`` folder path is made absolute
    (:class:`~ttgnn.config.TrainConfig` records it so; runs before 2026-12-07 recorded it as typed,
    relative to where they ran)."""
    if key == "dataset" and isinstance(value, str):
        return recorded_dataset(value)
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def check_resumable(state: dict, settings: dict, keys, path: PathLike, absent: Optional[dict] = None,
                    shown: Optional[dict] = None) -> None:
    """Raise ``ValueError`` when the checkpoint's settings differ from this run's on any of ``keys``.

    ``absent`` maps a setting added after some checkpoints were written to the value those
    checkpoints had without it (the feature off), so that resuming one with the feature on is
    refused rather than silently changing the run; other keys missing from a checkpoint are skipped.
    ``shown`` maps a key to the setting the user gives it by, where the two differ (the second stage
    of ``from_full`` runs ``epochs`` and ``lr`` as given by ``finetune_epochs`` and ``finetune_lr``).
    """
    saved = dict(absent or {}, **state.get("settings", {}))
    differ = differing_settings(saved, settings, keys)
    if differ:
        key = differ[0]
        name = (shown or {}).get(key, key)
        decided = " (None: decided by the run, e.g. from --compression or --max-params)" \
            if settings.get(key) is None else ""
        raise ValueError(f"checkpoint {path} was written with {name}={saved[key]!r}, "
                         f"this run has {name}={settings.get(key)!r}{decided} (a default may have changed since): "
                         f"give {name}={saved[key]!r} ({option_text(name, saved[key])}) to continue that run, or "
                         "another output folder")
    for key in ("epoch", "optimizer", "metrics"):
        if key not in state:
            raise ValueError(f"corrupted checkpoint {path}: no {key!r} entry")


def upgrade_checkpoint(path: PathLike) -> bool:
    """Rewrite an older ttgnn checkpoint in the current, pickle-free format (in place, atomically).

    A file already in the current format is read safely and left as it is. Any other file is
    unpickled (``weights_only=False``): use this only on files you trust.

    Returns:
        Whether the file was rewritten (``False``: it was current already).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give the checkpoint file in it ({path / CHECKPOINT_NAME} or "
                         f"{path / BEST_MODEL_NAME})")
    _check_torch_save_file(path)
    try:
        current = load_checkpoint(path)
    except ValueError:
        current = None  # pickled objects (an older format), or damaged: the full load below tells which
    if current is not None and current.get("version") == CHECKPOINT_VERSION and "rng" not in current:
        return False
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001
        raise ValueError(f"corrupted checkpoint {path}: {type(err).__name__}: {_gist(err)}") from None
    if not isinstance(state, dict) or "model" not in state or state.get("version") not in _READABLE_VERSIONS:
        raise ValueError(f"{path} is not a ttgnn checkpoint")
    state.pop("rng", None)  # per-epoch seeding makes the saved random states unnecessary
    state["version"] = CHECKPOINT_VERSION
    # NumPy values (a metric an older ttgnn or the user's code left as np.float64) do not load without
    # unpickling: rewritten, the file was then refused, with the advice to run this again
    state = _without_numpy(state)
    atomic_torch_save(state, path, mode=stat.S_IMODE(path.stat().st_mode))  # a read-only file stays read-only
    load_checkpoint(path)  # the result must load without unpickling
    return True


def _without_numpy(value):
    """``value`` with NumPy scalars as Python numbers and NumPy arrays as tensors, through dicts,
    lists and tuples (a named tuple becomes a plain one, which loads without unpickling)."""
    import numpy as np

    if isinstance(value, dict):
        return {key: _without_numpy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_numpy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_without_numpy(item) for item in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    return value


#: Tries at a run folder's lock, 20 ms apart, before it counts as held by another run.
_LOCK_ATTEMPTS = 10


class RunFolder:
    """Exclusive use of a run folder for the lifetime of a run (a context manager).

    On entry the folder is created, ``run.lock`` is locked with :func:`fcntl.flock` (released by
    the operating system when the process ends, however it ends) and a folder that already holds
    a run is refused unless the run resumes it or replaces it (``overwrite``: its run files are
    deleted by :meth:`replace_existing`, which the new run calls once its settings, data and model
    have been checked: a run that fails before that leaves the old one as it was).

    Args:
        path (str or PathLike): the folder.
        resume (bool, optional): the run continues the folder's run. (default: ``False``)
        overwrite (bool, optional): the run replaces the folder's run. (default: ``False``)
        job (str, optional): the identity of the elastic ``torchrun`` job the run belongs to, the
            same in each of its restarts. When the folder's run was recorded by this job
            (:meth:`record_job`), the run continues it (``resume`` set, ``overwrite`` cleared): a
            restart picks up where the job's last attempt stopped, and never takes over the run
            of another job. (default: ``None``, no job)

    Raises:
        ValueError: the path is not a folder, another process holds the lock (its pid and host
            named), or the folder holds a run and neither ``resume`` nor ``overwrite`` is set.
    """

    def __init__(self, path: PathLike, *, resume: bool = False, overwrite: bool = False,
                 job: Optional[str] = None) -> None:
        self.path = Path(path)
        self.resume = resume
        self.overwrite = overwrite
        self.job = job
        self._fd: Optional[int] = None
        self._created = False

    def existing_run_files(self) -> list[str]:
        return [name for name in RUN_FILES if (self.path / name).exists()]

    @staticmethod
    def in_use(path: PathLike) -> bool:
        """Whether a run holds folder ``path`` now (its ``run.lock`` is locked; ``False`` when the
        folder has no lock file or it cannot be opened). Probed with a shared lock, released at once."""
        import fcntl

        try:
            fd = os.open(Path(path) / LOCK_NAME, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            return err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
        finally:
            os.close(fd)  # closing the descriptor releases a lock it took
        return False

    def __enter__(self) -> "RunFolder":
        import fcntl

        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"output folder {self.path} exists and is not a folder")
        self._created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot create output folder {self.path}: {err.strerror or err}") from None
        lock = self.path / LOCK_NAME
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        for attempt in range(_LOCK_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
            # held: by a run, or for an instant by a probe of in_use (`ttgnn predict`), which must not refuse this run
            if attempt + 1 < _LOCK_ATTEMPTS:
                time.sleep(0.02)
        else:
            os.close(fd)
            holder = lock.read_text().strip() or "another process"
            raise ValueError(f"output folder {self.path} is in use by {holder} (lock {lock}); "
                             f"wait for that run or choose another --output-dir") from None
        self._fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        self._remove_stale_temporaries()
        if self.job is not None and self._recorded_job() == self.job:
            self.resume, self.overwrite = True, False  # this job's own run: a restart continues it
        try:
            self.check_existing()
        except BaseException:
            self.release()
            raise
        return self

    def _remove_stale_temporaries(self) -> None:
        """Delete the temporaries of run files that a process killed mid-write left (``.checkpoint.pt.*.tmp``,
        see :func:`~ttgnn.fileio.atomic_write`): the lock is held, so no writer of this folder is alive."""
        for name in (*RUN_FILES, JOB_NAME):
            for stale in remove_abandoned_temporaries(self.path / name, max_age=0):
                log.info("removed %s, left by a run killed while writing %s", stale, name)

    def _recorded_job(self) -> Optional[str]:
        try:
            return (self.path / JOB_NAME).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def record_job(self) -> None:
        """Record ``job`` as the one whose run the folder now holds (call it once the folder is the
        run's: after :meth:`replace_existing`); without a job, forget any recorded before."""
        path = self.path / JOB_NAME
        if self.job is None:
            path.unlink(missing_ok=True)
        elif self._recorded_job() != self.job:
            atomic_write(path, lambda fh: fh.write(f"{self.job}\n".encode()))

    def check_existing(self) -> None:
        """``ValueError`` when the folder holds a run and neither ``resume`` nor ``overwrite`` is set
        (checked on entry; :func:`ttgnn.train.setup_run` checks it too, for steps run without ``train``)."""
        found = self.existing_run_files()
        if not found or self.resume:
            return
        if not self.overwrite:
            raise ValueError(f"output folder {self.path} already holds a run ({', '.join(found)}): pass --resume "
                             f"to continue it, --overwrite to replace it, or choose another --output-dir")

    def replace_existing(self) -> None:
        """With ``overwrite`` (and without ``resume``), delete the folder's run files, once; else nothing."""
        if not self.overwrite or self.resume:
            return
        found = self.existing_run_files()
        for name in found:
            (self.path / name).unlink()
        if found:
            log.info("replaced the run in %s (--overwrite)", self.path)
        self.overwrite = False  # done: the files from here on are the new run's

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __exit__(self, exc_type, *exc) -> None:
        self.release()
        if exc_type is not None and self._created:
            # a run that failed before writing anything (a mistyped dataset) leaves no folder of its own behind
            left = {entry.name for entry in self.path.iterdir()}
            if left <= {LOCK_NAME}:
                (self.path / LOCK_NAME).unlink(missing_ok=True)
                self.path.rmdir()
