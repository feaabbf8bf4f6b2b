"""Data-parallel training helpers: torchrun environment, process group, shards, seeds, rank 0 duties.

A TT embedding table is small (kilobytes to a few megabytes), so it is replicated on every rank
and trained by plain data parallelism, like the GNN: every rank samples its own share of the
training nodes, :class:`torch.nn.parallel.DistributedDataParallel` averages the gradients of the
GNN *and* of the TT cores (they are ordinary dense parameters), and every rank applies the same
optimiser step. A full ``N x D`` table would instead need model-parallel sharding.

What ``ttgnn train`` (:mod:`ttgnn.cli`, :mod:`ttgnn.train`) uses:

* :func:`detect` reads the variables ``torchrun`` sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``,
  ``TORCHELASTIC_RESTART_COUNT``); without them the run is a single process.
* :func:`distributed` (a context manager around :func:`setup` / :func:`teardown`) initialises the
  process group: NCCL on GPUs, one GPU per rank chosen by ``LOCAL_RANK``; gloo on CPU.
* :func:`epoch_shard` gives each rank a disjoint, equally sized shard of the training nodes,
  reshuffled every epoch from ``(seed, epoch)`` alone, so a restarted job sees exactly the
  shards it would have seen. With ``W`` ranks and batch size ``B`` per rank, the union of the
  ranks' ``i``-th batches is the ``i``-th batch of size ``W * B`` of a single process
  (``world_size=1``): with mean-reduced losses, DDP's gradient average equals that process's
  gradient.
* :func:`wrap_model` wraps the whole model in DDP; :func:`all_reduce_sums` for metrics;
  :func:`barrier` and :func:`broadcast_object` for rank 0 duties (evaluation, checkpoints);
  :func:`configure_logging` (rank 0 logs at the requested level, the other ranks only warnings);
  :func:`maybe_inject_fault`, a test hook that kills one rank at a chosen step on the first attempt
  of an elastic job (``TTGNN_FAULT=rank:epoch:step``).

For training loops of one's own (``examples/multi_gpu_train.py``, ``benchmarks/bench_ddp.py``):
:func:`rank_seed` / :func:`seed_everything` (deterministic, distinct per-rank seeds, from
:mod:`ttgnn.seeding`), :func:`unwrap_model`, :func:`is_main_process`, and :func:`save_atomic`
(:mod:`ttgnn.fileio`: a crash mid-write never leaves a partial file under the final name).

Example (what ``ttgnn train`` does under ``torchrun``)::

    with distributed(device="auto") as ctx:
        model = wrap_model(build(...).to(ctx.device), ctx)
        for epoch in range(epochs):
            seed_everything(rank_seed(seed, ctx.rank, epoch))
            nodes = epoch_shard(train_ids, epoch, seed, ctx.rank, ctx.world_size)
            ...  # batches of `nodes`, loss.backward() averages gradients over ranks
            totals = all_reduce_sums({"loss": loss_sum, "count": count})
            barrier()
            if ctx.is_main:
                save_atomic(state, path)
            barrier()
"""
from __future__ import annotations

import collections
import contextlib
import datetime
import inspect
import logging
import os
import pickle
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from .fileio import atomic_torch_save
from .seeding import derive_seed, generator, seed_everything

__all__ = [
    "DistInfo",
    "DistContext",
    "detect",
    "setup",
    "teardown",
    "distributed",
    "rank_seed",
    "seed_everything",
    "wrap_model",
    "unwrap_model",
    "epoch_shard",
    "all_reduce_sums",
    "barrier",
    "broadcast_object",
    "is_main_process",
    "get_rank",
    "get_world_size",
    "configure_logging",
    "save_atomic",
    "maybe_inject_fault",
    "FAULT_ENV",
]

log = logging.getLogger(__name__)

#: Test hook: ``"rank:epoch:step"`` makes that rank kill itself (SIGKILL) at that training step
#: on the first attempt of an elastic job (``TORCHELASTIC_RESTART_COUNT`` 0 or unset).
FAULT_ENV = "TTGNN_FAULT"

_DEVICES = ("auto", "cpu", "cuda")


# ---------------------------------------------------------------------- environment
@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a (possibly single-process) job, as ``torchrun`` describes it.

    Attributes:
        rank (int): global rank in ``[0, world_size)``.
        world_size (int): number of processes in the job.
        local_rank (int): rank on this machine; picks the GPU.
        local_world_size (int): processes on this machine.
        node_rank (int): index of this machine (``GROUP_RANK``).
        master_addr (str, optional): address of the rendezvous store.
        master_port (int, optional): its port.
        restart_count (int): how many times the elastic agent restarted the workers.
        max_restarts (int): the ``--max-restarts`` the job was launched with.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    restart_count: int = 0
    max_restarts: int = 0

    @property
    def is_distributed(self) -> bool:
        """``True`` when launched by ``torchrun`` (or with ``RANK``/``WORLD_SIZE`` set)."""
        return self.master_addr is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(environ: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    text = environ.get(key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {key} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"environment variable {key} must be >= {minimum}, got {value}")
    return value


def detect(environ: Optional[Mapping[str, str]] = None) -> DistInfo:
    """Read the distributed environment set by ``torchrun`` (``torch.distributed.run``).

    A job is distributed when ``WORLD_SIZE`` and ``RANK`` are set; ``MASTER_ADDR`` then defaults
    to ``127.0.0.1`` and ``MASTER_PORT`` must be set unless ``WORLD_SIZE`` is 1.

    Args:
        environ (mapping, optional): the environment. (default: :data:`os.environ`)

    Raises:
        ValueError: a variable is not an integer or out of range (``RANK >= WORLD_SIZE``,
            ``LOCAL_RANK >= LOCAL_WORLD_SIZE``), or only one of ``RANK``/``WORLD_SIZE`` is set.
    """
    env = os.environ if environ is None else environ
    has_rank, has_world = "RANK" in env, "WORLD_SIZE" in env
    if has_rank != has_world:
        raise ValueError("RANK and WORLD_SIZE must be set together (as torchrun does), "
                         f"got RANK={env.get('RANK')!r}, WORLD_SIZE={env.get('WORLD_SIZE')!r}")
    restart_count = _env_int(env, "TORCHELASTIC_RESTART_COUNT", 0)
    max_restarts = _env_int(env, "TORCHELASTIC_MAX_RESTARTS", 0)
    if not has_rank:
        return DistInfo(restart_count=restart_count, max_restarts=max_restarts)
    world_size = _env_int(env, "WORLD_SIZE", 1, minimum=1)
    rank = _env_int(env, "RANK", 0)
    if rank >= world_size:
        raise ValueError(f"RANK must lie in [0, {world_size}), got {rank}")
    local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", world_size, minimum=1)
    local_rank = _env_int(env, "LOCAL_RANK", rank % local_world_size)
    if local_rank >= local_world_size:
        raise ValueError(f"LOCAL_RANK must lie in [0, {local_world_size}), got {local_rank}")
    port = env.get("MASTER_PORT")
    if port is None and world_size > 1:
        raise ValueError("MASTER_PORT must be set for a job of WORLD_SIZE > 1 (torchrun sets it)")
    master_port = _env_int(env, "MASTER_PORT", 0) if port is not None else None
    if master_port is not None and not 0 < master_port < 65536:
        raise ValueError(f"MASTER_PORT must lie in [1, 65535], got {master_port}")
    return DistInfo(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        local_world_size=local_world_size,
        node_rank=_env_int(env, "GROUP_RANK", rank // local_world_size),
        master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
        master_port=master_port,
        restart_count=restart_count,
        max_restarts=max_restarts,
    )


@dataclass(frozen=True)
class DistContext:
    """The set-up of this process: its :class:`DistInfo`, backend and device.

    Attributes:
        info (DistInfo): the environment.
        backend (str, optional): ``"nccl"`` or ``"gloo"``; ``None`` for a single process.
        device (torch.device): where this rank computes (``cuda:LOCAL_RANK`` on GPUs).
    """

    info: DistInfo
    backend: Optional[str]
    device: torch.device

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def is_main(self) -> bool:
        return self.info.is_main

    @property
    def is_distributed(self) -> bool:
        return self.backend is not None


def check_cuda_available(device: Union[str, torch.device]) -> None:
    """``ValueError`` naming ``device`` when it is a CUDA device and this torch has none (torch's own
    words are an ``AssertionError`` at the first tensor moved there)."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but torch.cuda.is_available() is False")


def _pick_device(device: Union[str, torch.device], info: DistInfo) -> torch.device:
    if isinstance(device, torch.device):
        kind = device.type
    elif device in _DEVICES:
        kind = device
    else:
        raise ValueError(f"device must be one of {_DEVICES} or a torch.device, got {device!r}")
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if kind != "cuda":
        raise ValueError(f"distributed training supports cpu and cuda devices, got {device!r}")
    check_cuda_available(kind)
    count = torch.cuda.device_count()
    if info.local_rank >= count:
        raise ValueError(f"LOCAL_RANK {info.local_rank} has no GPU: this machine has {count} "
                         f"(launch at most {count} processes per node)")
    torch.cuda.set_device(info.local_rank)
    return torch.device("cuda", info.local_rank)


def _forget_failed_group() -> None:
    """Undo what a failed ``init_process_group`` left behind. torch (2.13) numbers the default group
    before its rendezvous and resets the number only when a group is destroyed: after a failed
    attempt, a second one in the same process names its group "1" while its fresh peers name theirs
    "0", and it waits for keys nobody writes until its timeout."""
    world = getattr(dist.distributed_c10d, "_world", None)
    if world is not None and hasattr(world, "group_count"):
        world.group_count = 0


def setup(device: Union[str, torch.device] = "auto", backend: Optional[str] = None,
          timeout: Optional[datetime.timedelta] = None,
          environ: Optional[Mapping[str, str]] = None) -> DistContext:
    """Pick this rank's device and, under ``torchrun``, initialise the default process group.

    Args:
        device (str or torch.device, optional): ``"auto"`` (a GPU when there is one),
            ``"cpu"`` or ``"cuda"``; on GPUs rank ``LOCAL_RANK`` is pinned to ``cuda:LOCAL_RANK``.
            (default: ``"auto"``)
        backend (str, optional): process-group backend. (default: ``"nccl"`` on GPUs, ``"gloo"``
            on CPU)
        timeout (datetime.timedelta, optional): collective timeout; a rank that waits longer for
            the others fails instead of hanging. (default: torch's)
        environ (mapping, optional): the environment. (default: :data:`os.environ`)

    Returns:
        DistContext: ``backend`` is ``None`` outside ``torchrun`` (nothing initialised).
    """
    info = detect(environ)
    dev = _pick_device(device, info)
    if not info.is_distributed:
        return DistContext(info, None, dev)
    if backend is None:
        backend = "nccl" if dev.type == "cuda" else "gloo"
    if dist.is_initialized():
        log.debug("process group already initialised; reusing it")
        return DistContext(info, dist.get_backend(), dev)
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if dev.type == "cuda":
        kwargs["device_id"] = dev
    env = os.environ if environ is None else environ
    try:
        if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # The elastic agent's store lives on across restarts at the same MASTER_PORT, and the
            # process group's keys are not namespaced per attempt (torch 2.13): after a restart, gloo
            # reads the dead workers' addresses and fails ("Connection refused") or hangs. A prefix
            # per attempt gives every attempt a clean namespace.
            store = dist.TCPStore(info.master_addr, info.master_port, info.world_size, is_master=False,
                                  timeout=timeout or datetime.timedelta(minutes=30))
            kwargs["store"] = dist.PrefixStore(f"ttgnn/attempt_{info.restart_count}", store)
        elif info.master_port is None:  # WORLD_SIZE=1 without a port (detect allows it): nobody to meet
            kwargs["store"] = dist.HashStore()
        else:  # what init_method="env://" does, from the DistInfo detect read (its defaults included)
            host = f"[{info.master_addr}]" if ":" in info.master_addr else info.master_addr  # an IPv6 address
            kwargs["init_method"] = f"tcp://{host}:{info.master_port}"
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size, **kwargs)
    except dist.DistError as err:  # no such host, a port in use, peers that never came: a line, not a traceback
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise ConnectionError(f"rank {info.rank} of {info.world_size} could not join the job at "
                              f"{info.master_addr}:{info.master_port} (MASTER_ADDR:MASTER_PORT): {first}") from None
    finally:
        if not dist.is_initialized():
            _forget_failed_group()
    log.info("rank %d/%d (node %d, local rank %d) on %s, backend %s, restart %d",
             info.rank, info.world_size, info.node_rank, info.local_rank, dev, backend, info.restart_count)
    return DistContext(info, backend, dev)


#: Handles of this process's latest collectives (see :func:`_wait_and_keep`).
_FINISHED_WORK: collections.deque = collections.deque(maxlen=16)


def _wait_and_keep(work) -> None:
    """Wait for a collective started with ``async_op=True`` and keep its handle.

    Why: gloo's worker thread drops its reference to a finished collective a moment after the
    caller's ``wait()`` has returned. When that reference is the last one, the worker frees the
    tensors the collective used, and freeing tensors that Python has seen takes the GIL. If the
    process was already shutting down (a rank leaving right after its last collective, as on a
    diverged run), the worker was killed inside that destructor and the rank aborted ("terminate
    called without an active exception": 16 of 100 loaded runs of ``benchmarks/exit_race.py``, 0 of
    100 with this). Holding the handle here makes the main thread, not the worker, free the
    collective and its tensors. Each worker thread lets go of one collective before it takes the
    next, so the last few handles suffice.
    """
    work.wait()
    _FINISHED_WORK.append(work)


def teardown(wait: bool = True) -> None:
    """Destroy the default process group if there is one (safe to call twice).

    Args:
        wait (bool): meet the other ranks at a barrier first; pass ``False`` when leaving on an
            error, where the peers may be stuck elsewhere and a barrier would hang.
            (default: ``True``)

    The collectives of this module keep their handles (:func:`_wait_and_keep`), so a rank may
    leave on an error right after one of them.
    """
    if dist.is_available() and dist.is_initialized():
        if wait:
            try:
                _wait_and_keep(dist.barrier(async_op=True))
            except RuntimeError as exc:  # DistBackendError included: a peer is gone, nothing to wait for
                log.warning("barrier before destroying the process group failed: %s", exc)
        dist.destroy_process_group()


@contextlib.contextmanager
def distributed(device: Union[str, torch.device] = "auto", backend: Optional[str] = None,
                timeout: Optional[datetime.timedelta] = None) -> Iterator[DistContext]:
    """Context manager around :func:`setup` and :func:`teardown` (a process group that existed
    before is reused and left alone)."""
    owned = not (dist.is_available() and dist.is_initialized())
    ctx = setup(device, backend, timeout)
    try:
        yield ctx
    except BaseException:
        if owned:
            teardown(wait=False)
        raise
    if owned:
        teardown()


# ---------------------------------------------------------------------- queries and collectives
def _active() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """Global rank (0 without a process group)."""
    return dist.get_rank() if _active() else 0


def get_world_size() -> int:
    """Number of ranks (1 without a process group)."""
    return dist.get_world_size() if _active() else 1


def is_main_process() -> bool:
    """``True`` on rank 0 and in a single process."""
    return get_rank() == 0


def barrier() -> None:
    """Wait for all ranks (no-op without a process group)."""
    if _active():
        _wait_and_keep(dist.barrier(async_op=True))


def _collective_device() -> torch.device:
    """Where a collective's tensors must live: the current GPU for NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` of rank ``src`` on every rank (picklable objects; no-op without a process group).

    The wire format of :func:`torch.distributed.broadcast_object_list` with one object (its pickled
    size as an int64 tensor, then the pickle as a uint8 tensor), so a peer may use either; unlike
    it, the collectives' handles are kept (:func:`_wait_and_keep`), and the payload's memory is
    released once the object is read (it can be a whole checkpoint).
    """
    if not _active():
        return obj
    device = _collective_device()
    is_src = dist.get_rank() == src
    payload = pickle.dumps(obj) if is_src else b""
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    _wait_and_keep(dist.broadcast(size, src=src, async_op=True))
    if is_src:  # a copy that torch owns: a tensor over a Python buffer would free it under the GIL
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device, copy=True)
    else:
        data = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    _wait_and_keep(dist.broadcast(data, src=src, async_op=True))
    if not is_src:  # copied out (data.numpy() would pin data's memory) and read
        received = np.empty(data.numel(), dtype=np.uint8)
        torch.from_numpy(received).copy_(data)
        obj = pickle.loads(received)
    elif device.type == "cuda":  # NCCL's wait() only orders the stream: let the send finish first
        torch.cuda.current_stream(device).synchronize()
    data.untyped_storage().resize_(0)
    return obj


def all_reduce_sums(values: Mapping[str, float], device: Optional[torch.device] = None) -> dict[str, float]:
    """Sum scalar metrics over ranks (float64, so counts stay exact).

    Reduce sums and counts, then divide: ``loss_sum / count`` over all ranks is the mean over all
    training nodes of the epoch, whatever each rank's share.

    Args:
        values (mapping): name -> this rank's number.
        device (torch.device, optional): where the reduction tensor lives; must be a GPU for
            NCCL. (default: ``cuda:current`` for NCCL, else CPU)

    Returns:
        dict: name -> sum over ranks (``values`` itself as floats without a process group).
    """
    names = list(values)
    if not _active() or not names:
        return {k: float(values[k]) for k in names}
    if device is None:
        device = _collective_device()
    buf = torch.tensor([float(values[k]) for k in names], dtype=torch.float64, device=device)
    _wait_and_keep(dist.all_reduce(buf, op=dist.ReduceOp.SUM, async_op=True))
    return {k: float(v) for k, v in zip(names, buf.tolist())}


# ---------------------------------------------------------------------- seeds and shards
def rank_seed(seed: int, rank: int = 0, epoch: Optional[int] = None) -> int:
    """The seed of ``rank`` in ``epoch`` (or for the whole run when ``epoch`` is ``None``):
    :func:`ttgnn.seeding.derive_seed` of ``(seed, rank, epoch)``, distinct per rank and epoch.

    Re-seeding every rank at the start of every epoch with this makes neighbour sampling and
    dropout depend only on ``(seed, rank, epoch)``, so a job resumed at an epoch boundary repeats
    the random draws of an uninterrupted one without saving per-rank RNG states.
    """
    if seed < 0 or rank < 0 or (epoch is not None and epoch < 0):
        raise ValueError(f"seed, rank and epoch must be >= 0, got seed={seed}, rank={rank}, epoch={epoch}")
    return derive_seed(seed, rank) if epoch is None else derive_seed(seed, rank, epoch)


def epoch_shard(ids: torch.Tensor, epoch: int, seed: int, rank: int = 0, world_size: int = 1,
                shuffle: bool = True) -> torch.Tensor:
    """This rank's share of ``ids`` for ``epoch``: disjoint across ranks, equal in size.

    All ranks draw the same permutation from ``(seed, epoch)``; when ``len(ids)`` is not a
    multiple of ``world_size`` it is padded by repeating its first entries (as
    :class:`torch.utils.data.DistributedSampler` does), so every rank runs the same number of
    steps. Rank ``r`` takes positions ``r, r + W, r + 2W, ...``: its ``i``-th batch of ``B``
    nodes and those of the other ranks together are positions ``[i W B, (i + 1) W B)`` of the
    permutation, i.e. the ``i``-th batch of ``epoch_shard(ids, epoch, seed, 0, 1)`` with batch
    size ``W B``.

    Args:
        ids (Tensor): ``(n,)`` node ids (e.g. the training split), ``n >= 1``.
        epoch (int): epoch number (``>= 0``); the shuffle changes every epoch.
        seed (int): run seed, the same on all ranks.
        rank (int, optional): this rank, in ``[0, world_size)``. (default: ``0``)
        world_size (int, optional): number of ranks. (default: ``1``)
        shuffle (bool, optional): ``False`` keeps the order of ``ids``. (default: ``True``)

    Shapes:
        - **output:** ``(ceil(n / world_size),)``.
    """
    if ids.dim() != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {tuple(ids.shape)}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise IndexError(f"rank must lie in [0, {world_size}), got {rank}")
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    num = ids.numel()
    if num == 0:
        raise ValueError("ids is empty: no training nodes to shard")
    if shuffle:
        order = torch.randperm(num, generator=generator(seed, "shard", epoch))
    else:
        order = torch.arange(num)
    total = -(-num // world_size) * world_size
    if total > num:
        order = torch.cat([order, order.repeat(-(-(total - num) // num))[: total - num]])
    return ids[order[rank:total:world_size].to(ids.device)]


# ---------------------------------------------------------------------- model
def wrap_model(model: nn.Module, ctx: Optional[DistContext] = None, *, find_unused_parameters: bool = False,
               broadcast_buffers: bool = False, **ddp_kwargs) -> nn.Module:
    """Wrap ``model`` (GNN and embedding together) in DDP when a process group is active.

    DDP broadcasts rank 0's parameters and buffers at construction, so all ranks start from the
    same model whatever their seeds, and averages gradients in ``backward``. TT cores are dense
    parameters, so their gradients are all-reduced like the GNN's. Parameters of the model must
    already be on the rank's device.

    Args:
        model (nn.Module): the model, on ``ctx.device``.
        ctx (DistContext, optional): from :func:`setup`. (default: infer from the process group)
        find_unused_parameters (bool, optional): needed only when some parameters get no gradient
            in a step (slower). (default: ``False``)
        broadcast_buffers (bool, optional): re-send rank 0's buffers before every forward. Off by
            default: re-sending them each step would include a TT node order (8 bytes per node:
            0.9 GB for 111M nodes) for nothing. Buffers are synchronised once at construction
            (``forward_sync_buffers=False`` on torch >= 2.13; older torch skips that too, and the
            ranks' buffers are equal anyway when they build the model alike). BatchNorm running
            statistics then stay per rank; rank 0's are the ones evaluated and saved; training
            steps use batch statistics and are not affected. (default: ``False``)
        **ddp_kwargs: passed to :class:`~torch.nn.parallel.DistributedDataParallel`.

    Returns:
        the DDP module, or ``model`` itself without a process group.
    """
    if not _active():
        return model
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters to synchronise")
    device = ctx.device if ctx is not None else next(model.parameters()).device
    device_ids = [device.index] if device.type == "cuda" else None
    ddp = nn.parallel.DistributedDataParallel
    if "forward_sync_buffers" in inspect.signature(ddp.__init__).parameters:
        ddp_kwargs.setdefault("forward_sync_buffers", broadcast_buffers)
    else:
        ddp_kwargs.setdefault("broadcast_buffers", broadcast_buffers)
    return ddp(model, device_ids=device_ids, find_unused_parameters=find_unused_parameters, **ddp_kwargs)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (``model`` itself otherwise)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# ---------------------------------------------------------------------- rank 0 duties
class _RankFilter(logging.Filter):
    """Prefix records with the rank; drop those below ``min_level`` on ranks other than 0."""

    def __init__(self, rank: int, min_level: int) -> None:
        super().__init__()
        self.rank = rank
        self.min_level = min_level

    def filter(self, record: logging.LogRecord) -> bool:
        if self.rank != 0 and record.levelno < self.min_level:
            return False
        if not getattr(record, "_ttgnn_rank_tagged", False):
            record.msg = f"[rank {self.rank}] {record.msg}"
            record._ttgnn_rank_tagged = True
        return True


def configure_logging(rank: Optional[int] = None, world_size: Optional[int] = None,
                      other_ranks_level: int = logging.WARNING) -> None:
    """Log from rank 0 only: on the root handlers, other ranks keep records of at least
    ``other_ranks_level``; in a job of several ranks every record is prefixed with its rank.

    Call after :func:`logging.basicConfig`. No-op for a single process.
    """
    rank = get_rank() if rank is None else rank
    world_size = get_world_size() if world_size is None else world_size
    if world_size <= 1:
        return
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RankFilter) for f in handler.filters):
            handler.addFilter(_RankFilter(rank, other_ranks_level))


def save_atomic(obj: Any, path: Union[str, os.PathLike]) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (:func:`ttgnn.fileio.atomic_torch_save`): readers see
    the old file or the new one, never a partial one."""
    return atomic_torch_save(obj, path)


def maybe_inject_fault(epoch: int, step: int, rank: Optional[int] = None,
                       environ: Optional[Mapping[str, str]] = None) -> None:
    """Test hook: kill this process with SIGKILL when ``$TTGNN_FAULT`` is ``"rank:epoch:step"``
    matching this rank, ``epoch`` and ``step``, on the first attempt of an elastic job only
    (``TORCHELASTIC_RESTART_COUNT`` unset or 0), so ``torchrun --max-restarts`` recovers.

    Raises:
        ValueError: ``$TTGNN_FAULT`` is set but malformed.
    """
    env = os.environ if environ is None else environ
    spec = env.get(FAULT_ENV)
    if not spec:
        return
    parts = spec.split(":")
    try:
        fault_rank, fault_epoch, fault_step = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{FAULT_ENV} must be 'rank:epoch:step' integers, got {spec!r}") from None
    if _env_int(env, "TORCHELASTIC_RESTART_COUNT", 0) != 0:
        return
    rank = get_rank() if rank is None else rank
    if (rank, epoch, step) == (fault_rank, fault_epoch, fault_step):
        log.warning("%s=%s: rank %d kills itself at epoch %d step %d", FAULT_ENV, spec, rank, epoch, step)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
