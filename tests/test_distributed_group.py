"""Process-group code of ttgnn.distributed run in the test process itself.

test_distributed.py checks data-parallel training end to end with spawned ranks; the code those
ranks run (setup, collectives, DDP wrapping, teardown) executes in other processes there. Here it
runs in the test process: against one real gloo peer (a plain ``torch.distributed`` script that
does not import ttgnn, so it is a fixed reference), or against recorders standing in for
``torch.distributed``'s calls where the real thing needs a GPU (NCCL) or an elastic agent.
Every peer runs under a deadline and collectives under a timeout, so a broken call fails the test
instead of hanging it.
"""
from __future__ import annotations

import datetime
import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ttgnn import distributed as tdist

from network import free_port

# The peer imports torch before its store listens: 30 s on a loaded 2-core machine, so more than that.
TIMEOUT = datetime.timedelta(seconds=120)
PEER_DEADLINE_S = 240


# The peer is rank 0 of a two-rank gloo group; the test process is rank 1. Each scenario mirrors,
# with raw torch.distributed calls, the collectives the matching test makes through ttgnn.
PEER = textwrap.dedent("""
    import datetime, os, sys
    import torch, torch.distributed as dist
    from torch import nn

    scenario = sys.argv[1]
    timeout = datetime.timedelta(seconds=120)
    if scenario == "agent_store":
        store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), 2, is_master=True, timeout=timeout)
        store = dist.PrefixStore("ttgnn/attempt_" + os.environ["TORCHELASTIC_RESTART_COUNT"], store)
        dist.init_process_group("gloo", store=store, rank=0, world_size=2, timeout=timeout)
    else:
        dist.init_process_group("gloo", init_method="env://", rank=0, world_size=2, timeout=timeout)
    if scenario == "collectives":
        buf = torch.tensor([10.0, 2.0 ** 25], dtype=torch.float64)
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        print("sums", buf.tolist(), flush=True)
        dist.broadcast_object_list([{"from": 0, "best": 0.9}], src=0)
        box = [None]
        dist.broadcast_object_list(box, src=1)
        print("received", box[0], flush=True)
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        with torch.no_grad():
            model.weight.fill_(0.5)
            model.bias.zero_()
        ddp = nn.parallel.DistributedDataParallel(model, forward_sync_buffers=False)
        ddp(torch.full((4, 3), 2.0)).sum().backward()
    if scenario in ("collectives", "agent_store"):
        dist.barrier()  # the test's teardown
    if scenario == "join":
        # Leaving right after its own side of the rendezvous could close the connections while the
        # test's side is still being set up (gloo's connectFullMesh then fails with "Connection closed
        # by peer"); the test's one barrier says that it has joined.
        dist.barrier()
    dist.destroy_process_group()
    print("peer done", flush=True)
    # Out without the interpreter's shutdown: plain collectives leave gloo's worker thread to free their
    # tensors, and one that does so while the interpreter exits aborts the process ("terminate called
    # without an active exception"; docs/distributed.md, "Leaving on an error"). ttgnn's own collectives
    # keep their handles against it; this fixed reference does not use them, so it must not fail on it.
    os._exit(0)
""")


@pytest.fixture
def peer(monkeypatch):
    """Start the peer for a scenario with the torchrun variables of a two-rank job (this process
    is rank 1); yields a function that waits for the peer and returns its output."""
    procs = []

    def start(scenario: str, **extra_env: str):
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
               "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0", **extra_env}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        proc = subprocess.Popen([sys.executable, "-c", PEER, scenario],
                                env={**os.environ, "RANK": "0", "LOCAL_RANK": "0"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("LOCAL_RANK", "1")

        def finish() -> str:
            out, _ = proc.communicate(timeout=PEER_DEADLINE_S)
            assert proc.returncode == 0, out
            return out

        return finish

    yield start
    for proc in procs:
        if proc.returncode is None:  # the test did not wait for it (it failed first): show what the peer said
            if proc.poll() is None:
                proc.kill()
            out, _ = proc.communicate()
            print(f"peer (exit code {proc.returncode}) printed:\n{out}")
    if dist.is_initialized():  # a failed test must not leave its group to the next one
        dist.destroy_process_group()


@pytest.fixture
def no_rank_filters_left():
    """Remove the rank filters that configure_logging put on the root handlers, pytest's log capture
    handlers among them (they live for the whole session)."""
    yield
    for handler in logging.getLogger().handlers:
        for rank_filter in [f for f in handler.filters if isinstance(f, tdist._RankFilter)]:
            handler.removeFilter(rank_filter)


# ---------------------------------------------------------------------- a real gloo peer
def test_rank_1_of_a_gloo_group_sums_broadcasts_and_averages_gradients(peer, caplog, no_rank_filters_left):
    finish = peer("collectives")
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    caplog.set_level(logging.DEBUG, logger="ttgnn.distributed")
    try:
        with tdist.distributed("cpu", timeout=TIMEOUT) as ctx:
            assert (ctx.backend, ctx.rank, ctx.world_size, ctx.device) == ("gloo", 1, 2, torch.device("cpu"))
            assert ctx.is_distributed and not ctx.is_main and ctx.info.local_rank == 1
            assert dist.is_initialized() and dist.get_rank() == 1
            assert (tdist.get_rank(), tdist.get_world_size(), tdist.is_main_process()) == (1, 2, False)
            # an inner context reuses the group and leaves it alone, also on an error
            with tdist.distributed("cpu") as inner:
                assert inner.backend == "gloo" and inner.rank == 1 and inner.device == torch.device("cpu")
            with pytest.raises(KeyError):
                with tdist.distributed("cpu"):
                    raise KeyError("inner")
            assert dist.is_initialized()
            # float64: 2^25 + 1 is exact (not in float32)
            kept = tdist._FINISHED_WORK
            kept.clear()
            assert tdist.all_reduce_sums({"loss": 0.25, "count": 1.0}) == {"loss": 10.25, "count": 2.0 ** 25 + 1}
            assert tdist.all_reduce_sums({}) == {}
            # The handle (and with it the summed tensor) is kept: this thread, not gloo's, frees it.
            assert [w.result()[0].tolist() for w in kept] == [[10.25, 2.0 ** 25 + 1]]
            assert tdist.broadcast_object({"from": 1}) == {"from": 0, "best": 0.9}
            assert tdist.broadcast_object({"from": 1, "epoch": 7}, src=1) == {"from": 1, "epoch": 7}
            # Each broadcast kept its size's and its payload's handles; the payloads' memory is freed.
            sizes = [len(pickle.dumps({"from": 0, "best": 0.9})), len(pickle.dumps({"from": 1, "epoch": 7}))]
            assert [w.result()[0].tolist() for w in list(kept)[1::2]] == [[size] for size in sizes]
            assert [w.result()[0].untyped_storage().nbytes() for w in list(kept)[2::2]] == [0, 0]
            tdist.configure_logging()
            filters = [f for f in handler.filters if isinstance(f, tdist._RankFilter)]
            assert [(f.rank, f.min_level) for f in filters] == [(1, logging.WARNING)]

            model = nn.Linear(3, 2)  # other weights than the peer's: DDP takes rank 0's
            ddp = tdist.wrap_model(model, ctx)
            assert isinstance(ddp, nn.parallel.DistributedDataParallel) and tdist.unwrap_model(ddp) is model
            assert ddp.device_ids is None and not ddp.find_unused_parameters and not ddp.forward_sync_buffers
            assert torch.equal(model.weight, torch.full((2, 3), 0.5)) and torch.equal(model.bias, torch.zeros(2))
            ddp(torch.full((4, 3), 4.0)).sum().backward()
            # d(sum)/dW = 4 rows of x per output; the mean over ranks of x = 2 and x = 4
            assert torch.equal(model.weight.grad, torch.full((2, 3), 4 * 3.0))
            assert torch.equal(model.bias.grad, torch.full((2,), 4.0))
        assert not dist.is_initialized()
    finally:
        root.removeHandler(handler)
    out = finish()
    assert "sums [10.25, 33554433.0]" in out and "received {'from': 1, 'epoch': 7}" in out
    messages = [r.getMessage() for r in caplog.records]
    assert "rank 1/2 (node 0, local rank 1) on cpu, backend gloo, restart 0" in messages  # before configure_logging
    assert "process group already initialised; reusing it" in messages
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_error_inside_the_context_leaves_without_a_barrier(peer, caplog):
    finish = peer("join")
    caplog.set_level(logging.WARNING, logger="ttgnn.distributed")
    with pytest.raises(RuntimeError, match="boom"):
        with tdist.distributed("cpu", timeout=TIMEOUT):
            dist.barrier()  # the peer's; after it the peer leaves
            raise RuntimeError("boom")
    assert not dist.is_initialized()
    assert "peer done" in finish()
    assert not caplog.records  # no barrier was tried against a peer that has left


def test_a_setup_after_a_failed_rendezvous_meets_its_peer(peer):
    # torch numbers the default group before its rendezvous; a failed attempt left the number at 1, and
    # the next setup in this process waited for the keys of group "1" while its peer wrote group "0"
    port = free_port()
    with pytest.raises(ConnectionError, match="could not join"):
        tdist.setup("cpu", timeout=datetime.timedelta(seconds=1),
                    environ={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    finish = peer("join")
    ctx = tdist.setup("cpu", timeout=TIMEOUT)
    try:
        assert ctx.info.rank == 1 and dist.get_world_size() == 2
        dist.barrier()
    finally:
        tdist.teardown(wait=False)
    assert "peer done" in finish()


def test_an_elastic_restart_joins_under_its_attempts_store_prefix(peer):
    finish = peer("agent_store", TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="3")
    with tdist.distributed("cpu", timeout=TIMEOUT) as ctx:
        assert ctx.info.restart_count == 3 and dist.get_world_size() == 2
    assert not dist.is_initialized()
    assert "peer done" in finish()


# ---------------------------------------------------------------------- recorded calls
class Recorder:
    """Stands in for a function; keeps the arguments of every call."""

    def __init__(self, result=None):
        self.calls = []
        self.result = result

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.result


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine with two GPUs, as far as _pick_device and setup can tell."""
    set_device = Recorder()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    return set_device


def _env(rank: int, **extra: str) -> dict:
    return {"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_PORT": "29400", **extra}


@pytest.mark.parametrize("device", ["auto", "cuda", torch.device("cuda")])
def test_pick_device_pins_a_rank_to_the_gpu_of_its_local_rank(two_gpus, device):
    info = tdist.detect(_env(1))
    assert tdist._pick_device(device, info) == torch.device("cuda", 1)
    assert two_gpus.calls == [((1,), {})]


def test_pick_device_rejects_a_local_rank_without_gpu_and_other_device_types(two_gpus):
    assert tdist._pick_device("cpu", tdist.detect({})) == torch.device("cpu") and not two_gpus.calls
    assert tdist._pick_device(torch.device("cpu"), tdist.detect({})) == torch.device("cpu")
    info = tdist.detect(_env(1, LOCAL_RANK="2", LOCAL_WORLD_SIZE="4"))
    message = r"^LOCAL_RANK 2 has no GPU: this machine has 2 \(launch at most 2 processes per node\)$"
    with pytest.raises(ValueError, match=message):
        tdist._pick_device("cuda", info)
    with pytest.raises(ValueError, match=r"^distributed training supports cpu and cuda devices, got device"):
        tdist._pick_device(torch.device("meta"), info)
    with pytest.raises(ValueError, match=r"^device must be one of \('auto', 'cpu', 'cuda'\) or a torch.device, "
                                         r"got 'gpu'$"):
        tdist._pick_device("gpu", info)
    assert not two_gpus.calls


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def single_process_environment(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)


def test_without_a_gpu_auto_is_the_cpu_and_cuda_an_error(no_gpu, single_process_environment):
    assert tdist._pick_device("auto", tdist.detect({})) == torch.device("cpu")
    ctx = tdist.setup(environ={})  # device "auto" by default
    assert ctx.device == torch.device("cpu") and ctx.info == tdist.detect({}) and ctx.rank == 0
    with tdist.distributed() as ctx:
        assert ctx.device == torch.device("cpu") and ctx.backend is None and ctx.world_size == 1
    with pytest.raises(ValueError, match=r"^device 'cuda' requested but torch.cuda.is_available\(\) is False$"):
        tdist.setup("cuda", environ={})
    tdist.teardown()  # no process group: nothing to do
    tdist.teardown(wait=False)


def test_distributed_passes_backend_and_timeout_to_setup(monkeypatch, single_process_environment):
    init = Recorder()
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", init)
    for key, value in _env(1).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    with tdist.distributed("cpu", backend="mpi", timeout=TIMEOUT) as ctx:
        assert ctx.backend == "mpi"
    # the address and port detect() read (env:// read os.environ again, not the environ given to setup)
    tcp = "tcp://127.0.0.1:29400"
    assert init.calls == [((), dict(backend="mpi", rank=1, world_size=2, timeout=TIMEOUT, init_method=tcp))]


def test_setup_on_gpus_initialises_nccl_with_the_ranks_device(two_gpus, monkeypatch):
    init = Recorder()
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", init)
    ctx = tdist.setup("cuda", timeout=TIMEOUT, environ=_env(1, LOCAL_RANK="1"))
    assert (ctx.backend, ctx.device, ctx.rank, ctx.world_size) == ("nccl", torch.device("cuda", 1), 1, 2)
    assert init.calls == [((), dict(backend="nccl", rank=1, world_size=2, timeout=TIMEOUT,
                                    device_id=torch.device("cuda", 1), init_method="tcp://127.0.0.1:29400"))]
    ctx = tdist.setup("cpu", backend="mpi", environ=_env(0))  # torch's default timeout, no device id
    assert ctx.backend == "mpi" and ctx.device == torch.device("cpu")
    assert init.calls[1] == ((), dict(backend="mpi", rank=0, world_size=2, init_method="tcp://127.0.0.1:29400"))
    assert tdist.setup("cpu", environ=_env(0)).backend == "gloo"
    assert init.calls[2][1]["backend"] == "gloo"


def test_setup_under_the_elastic_agent_uses_a_store_prefix_per_attempt(monkeypatch):
    init, tcp, prefix = Recorder(), Recorder(result="tcp store"), Recorder(result="prefixed store")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(dist, "TCPStore", tcp)
    monkeypatch.setattr(dist, "PrefixStore", prefix)
    env = _env(1, MASTER_ADDR="10.1.2.3", TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="4")
    tdist.setup("cpu", environ=env)
    assert tcp.calls == [(("10.1.2.3", 29400, 2), dict(is_master=False, timeout=datetime.timedelta(minutes=30)))]
    assert prefix.calls == [(("ttgnn/attempt_4", "tcp store"), {})]
    assert init.calls == [((), dict(backend="gloo", rank=1, world_size=2, store="prefixed store"))]
    tdist.setup("cpu", timeout=TIMEOUT, environ=env)
    assert tcp.calls[1][1]["timeout"] == TIMEOUT and init.calls[1][1]["timeout"] == TIMEOUT
    tdist.setup("cpu", environ={**env, "TORCHELASTIC_USE_AGENT_STORE": "False"})
    assert len(tcp.calls) == 2 and init.calls[2][1]["init_method"] == "tcp://10.1.2.3:29400"
    tdist.setup("cpu", environ={**env, "TORCHELASTIC_USE_AGENT_STORE": "False", "MASTER_ADDR": "fe80::1"})
    assert init.calls[3][1]["init_method"] == "tcp://[fe80::1]:29400"  # an IPv6 address, bracketed


class _Work:
    def __init__(self):
        self.waited = False

    def wait(self):
        self.waited = True


@pytest.fixture
def recorded_barrier(monkeypatch):
    """A group that looks initialised, whose barrier is recorded and returns a :class:`_Work`;
    no handles kept yet. Yields ``(work, barrier)``."""
    work = _Work()
    barrier = Recorder(result=work)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "barrier", barrier)
    monkeypatch.setattr(tdist, "_FINISHED_WORK", [])
    return work, barrier


def test_a_barrier_waits_and_keeps_its_handle(recorded_barrier):
    work, barrier = recorded_barrier
    tdist.barrier()
    assert barrier.calls == [((), {"async_op": True})] and work.waited and tdist._FINISHED_WORK == [work]


def test_teardown_waits_at_a_barrier_keeps_its_handle_and_destroys_the_group(recorded_barrier, monkeypatch, caplog):
    (work, barrier), destroy = recorded_barrier, Recorder()
    monkeypatch.setattr(dist, "destroy_process_group", destroy)
    tdist.teardown()
    assert barrier.calls == [((), {"async_op": True})] and work.waited and tdist._FINISHED_WORK == [work]
    assert len(destroy.calls) == 1
    tdist.teardown(wait=False)
    assert len(barrier.calls) == 1 and len(destroy.calls) == 2

    def broken_barrier(async_op):
        raise RuntimeError("peer gone")

    monkeypatch.setattr(dist, "barrier", broken_barrier)
    caplog.set_level(logging.WARNING, logger="ttgnn.distributed")
    tdist.teardown()
    assert len(destroy.calls) == 3
    assert [r.getMessage() for r in caplog.records] == [
        "barrier before destroying the process group failed: peer gone"]


class _FakeDDP(nn.Module):
    """Records what wrap_model passes to DistributedDataParallel (torch >= 2.13 signature)."""

    def __init__(self, module, device_ids=None, find_unused_parameters=False, forward_sync_buffers=None,
                 **kwargs):
        super().__init__()
        self.module = module
        self.kwargs = dict(device_ids=device_ids, find_unused_parameters=find_unused_parameters,
                           forward_sync_buffers=forward_sync_buffers, **kwargs)


class _OldFakeDDP(nn.Module):
    """An older DistributedDataParallel without forward_sync_buffers."""

    def __init__(self, module, device_ids=None, find_unused_parameters=False, broadcast_buffers=True, **kwargs):
        super().__init__()
        self.module = module
        self.kwargs = dict(device_ids=device_ids, find_unused_parameters=find_unused_parameters,
                           broadcast_buffers=broadcast_buffers, **kwargs)


def test_wrap_model_arguments(monkeypatch):
    monkeypatch.setattr(tdist, "_active", lambda: True)
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel", _FakeDDP)
    model = nn.Linear(2, 2)
    wrapped = tdist.wrap_model(model)
    assert wrapped.module is model and tdist.unwrap_model(wrapped) is model
    assert wrapped.kwargs == dict(device_ids=None, find_unused_parameters=False, forward_sync_buffers=False)
    info = tdist.detect(_env(1))
    gpu = tdist.DistContext(info, "nccl", torch.device("cuda", 1))
    wrapped = tdist.wrap_model(model, gpu, find_unused_parameters=True, broadcast_buffers=True,
                               gradient_as_bucket_view=True)
    assert wrapped.kwargs == dict(device_ids=[1], find_unused_parameters=True, forward_sync_buffers=True,
                                  gradient_as_bucket_view=True)
    assert tdist.wrap_model(model, forward_sync_buffers=True).kwargs["forward_sync_buffers"] is True
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel", _OldFakeDDP)
    assert tdist.wrap_model(model).kwargs == dict(device_ids=None, find_unused_parameters=False,
                                                  broadcast_buffers=False)
    assert tdist.wrap_model(model, broadcast_buffers=True).kwargs["broadcast_buffers"] is True
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="^model has no trainable parameters to synchronise$"):
        tdist.wrap_model(frozen)
    half = nn.Sequential(nn.Linear(2, 2).requires_grad_(False), nn.Linear(2, 2))
    assert tdist.wrap_model(half).module is half


def test_fault_hook_kills_with_sigkill_after_logging_and_flushing(monkeypatch, caplog):
    kill = Recorder()
    monkeypatch.setattr(os, "kill", kill)
    flushed = []

    class Flushing(logging.Handler):
        def emit(self, record):
            pass

        def flush(self):
            flushed.append(True)

    handler = Flushing()
    logging.getLogger().addHandler(handler)
    caplog.set_level(logging.WARNING, logger="ttgnn.distributed")
    try:
        tdist.maybe_inject_fault(2, 3, rank=1, environ={tdist.FAULT_ENV: "1:2:3"})
        assert kill.calls == [((os.getpid(), signal.SIGKILL), {})] and flushed
        assert [r.getMessage() for r in caplog.records] == ["TTGNN_FAULT=1:2:3: rank 1 kills itself at epoch 2 step 3"]
        tdist.maybe_inject_fault(2, 3, environ={tdist.FAULT_ENV: "0:2:3"})  # rank from the (absent) group: 0
        assert len(kill.calls) == 2
        tdist.maybe_inject_fault(2, 3, environ={tdist.FAULT_ENV: "1:2:3"})
        tdist.maybe_inject_fault(2, 3, rank=1, environ={tdist.FAULT_ENV: "1:2:3", "TORCHELASTIC_RESTART_COUNT": ""})
        assert len(kill.calls) == 3  # an empty restart count is the first attempt
        monkeypatch.setenv(tdist.FAULT_ENV, "0:1:1")
        monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
        tdist.maybe_inject_fault(1, 1)  # reads os.environ
        assert len(kill.calls) == 4
    finally:
        logging.getLogger().removeHandler(handler)


def test_rank_filter_tags_a_record_once_and_keeps_the_minimum_level_on_other_ranks():
    def record(level, msg="step"):
        return logging.LogRecord("ttgnn", level, __file__, 1, msg, None, None)

    main, other = tdist._RankFilter(0, logging.WARNING), tdist._RankFilter(1, logging.WARNING)
    rec = record(logging.DEBUG)
    assert main.filter(rec) and rec.getMessage() == "[rank 0] step"
    assert main.filter(rec) and rec.getMessage() == "[rank 0] step"  # a second handler does not tag again
    assert not other.filter(record(logging.INFO))
    rec = record(logging.WARNING, "slow %s")
    rec.args = ("rank",)
    assert other.filter(rec) and rec.getMessage() == "[rank 1] slow rank"


def test_configure_logging_adds_one_rank_filter_per_root_handler(no_rank_filters_left):
    root = logging.getLogger()
    handlers = [logging.NullHandler(), logging.NullHandler()]
    for handler in handlers:
        root.addHandler(handler)
    try:
        tdist.configure_logging(rank=0, world_size=1)  # a single process: nothing
        assert not any(h.filters for h in handlers)
        tdist.configure_logging(rank=2, world_size=4, other_ranks_level=logging.ERROR)
        tdist.configure_logging(rank=2, world_size=4)
        for handler in handlers:
            assert [(f.rank, f.min_level) for f in handler.filters] == [(2, logging.ERROR)]
        tdist.configure_logging()  # no process group: rank 0 of 1, nothing
        assert all(len(h.filters) == 1 for h in handlers)
    finally:
        for handler in handlers:
            root.removeHandler(handler)


# ---------------------------------------------------------------------- environment details
def test_detect_defaults_from_rank_and_world_size_alone():
    info = tdist.detect({"RANK": "5", "WORLD_SIZE": "8", "MASTER_PORT": "1"})
    assert info == tdist.DistInfo(rank=5, world_size=8, local_rank=5, local_world_size=8, node_rank=0,
                                  master_addr="127.0.0.1", master_port=1)
    info = tdist.detect({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "65535"})
    assert (info.local_rank, info.node_rank, info.master_port) == (1, 2, 65535)
    info = tdist.detect({"RANK": "5", "WORLD_SIZE": "8", "MASTER_PORT": "1", "GROUP_RANK": "3"})
    assert info.node_rank == 3  # GROUP_RANK wins over rank // LOCAL_WORLD_SIZE
    one = tdist.detect({"RANK": "0", "WORLD_SIZE": "1"})  # one rank needs no port
    assert one.master_port is None and one.is_distributed
    # empty variables count as unset
    empty = tdist.detect({"RANK": "", "WORLD_SIZE": "", "LOCAL_RANK": "", "TORCHELASTIC_RESTART_COUNT": ""})
    assert (empty.rank, empty.world_size, empty.local_rank, empty.restart_count) == (0, 1, 0, 0)
    single = tdist.detect({"TORCHELASTIC_RESTART_COUNT": "2", "TORCHELASTIC_MAX_RESTARTS": "3"})
    assert (single.restart_count, single.max_restarts, single.is_distributed) == (2, 3, False)
    assert tdist.detect({}) == tdist.DistInfo(restart_count=0, max_restarts=0)


def test_detect_reads_os_environ(monkeypatch, single_process_environment):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_PORT", "29400")
    assert (tdist.detect().rank, tdist.detect().master_port) == (1, 29400)


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0"}, r"^RANK and WORLD_SIZE must be set together \(as torchrun does\), got RANK='0', WORLD_SIZE=None$"),
    ({"WORLD_SIZE": "2"}, r"got RANK=None, WORLD_SIZE='2'$"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, r"^MASTER_PORT must be set for a job of WORLD_SIZE > 1 \(torchrun sets it\)$"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, r"^environment variable WORLD_SIZE must be >= 1, got 0$"),
    ({"RANK": "-1", "WORLD_SIZE": "1"}, r"^environment variable RANK must be >= 0, got -1$"),
    ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE must be >= 1, got 0$"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": ""}, r"^MASTER_PORT must lie in \[1, 65535\], got 0$"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "65536"}, r"^MASTER_PORT must lie in \[1, 65535\], got 65536$"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "0"}, r"got 0$"),
    ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "1"}, r"^LOCAL_RANK must lie in \[0, 1\), got 1$"),
    ({"TORCHELASTIC_RESTART_COUNT": "one"}, r"^environment variable TORCHELASTIC_RESTART_COUNT must be an integer, "
                                            r"got 'one'$"),
])
def test_detect_error_messages(env, message):
    with pytest.raises(ValueError, match=message):
        tdist.detect(env)


def test_rank_seed_defaults_and_each_argument_checked():
    assert tdist.rank_seed(5) == tdist.rank_seed(5, 0) != tdist.rank_seed(5, 1)
    assert tdist.rank_seed(5, 1) != tdist.rank_seed(6, 1)
    for args in [(-1, 0, 0), (0, -1, 0), (0, 0, -1)]:
        with pytest.raises(ValueError, match="seed, rank and epoch must be >= 0"):
            tdist.rank_seed(*args)


def test_epoch_shard_defaults_to_the_whole_split_and_names_an_empty_one():
    ids = torch.arange(10, 17)
    whole = tdist.epoch_shard(ids, 0, seed=1)  # rank 0 of 1
    assert sorted(whole.tolist()) == ids.tolist()
    with pytest.raises(ValueError, match="^ids is empty: no training nodes to shard$"):
        tdist.epoch_shard(ids[:0], 0, seed=1)
