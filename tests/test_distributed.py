"""Tests of ttgnn.distributed: environment, shards, seeds, atomic saves, fault hook, and DDP on gloo.

The DDP tests start real processes (gloo on CPU). Every one runs under a deadline and kills its
processes when it passes, so a hung rank fails the test instead of hanging the suite.
"""
from __future__ import annotations

import datetime
import gzip
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ttgnn import distributed as tdist

from network import free_port

DEADLINE_S = 150


# ---------------------------------------------------------------------- environment
def test_detect_single_process():
    info = tdist.detect({})
    assert (info.rank, info.world_size, info.local_rank, info.is_distributed, info.is_main) == (0, 1, 0, False, True)


def test_detect_torchrun_environment():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "1",
           "TORCHELASTIC_MAX_RESTARTS": "2"}
    info = tdist.detect(env)
    assert info == tdist.DistInfo(rank=3, world_size=4, local_rank=1, local_world_size=2, node_rank=1,
                                  master_addr="10.0.0.1", master_port=29500, restart_count=1, max_restarts=2)
    assert info.is_distributed and not info.is_main


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0"}, "RANK and WORLD_SIZE must be set together"),
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, r"RANK must lie in \[0, 2\), got 2"),
    ({"RANK": "0", "WORLD_SIZE": "x"}, "WORLD_SIZE must be an integer, got 'x'"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_PORT must be set"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, r"MASTER_PORT must lie in \[1, 65535\]"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
     r"LOCAL_RANK must lie in \[0, 2\), got 2"),
])
def test_detect_rejects_bad_environment(env, message):
    with pytest.raises(ValueError, match=message):
        tdist.detect(env)


def test_setup_without_torchrun_is_a_single_cpu_process():
    ctx = tdist.setup("cpu", environ={})
    assert ctx.backend is None and not ctx.is_distributed and ctx.device == torch.device("cpu")
    assert tdist.get_world_size() == 1 and tdist.is_main_process()
    assert tdist.all_reduce_sums({"loss": 2.5, "count": 3}) == {"loss": 2.5, "count": 3.0}
    assert tdist.broadcast_object({"a": 1}) == {"a": 1}
    model = torch.nn.Linear(2, 2)
    assert tdist.wrap_model(model, ctx) is model and tdist.unwrap_model(model) is model
    with pytest.raises(ValueError, match="device must be one of"):
        tdist.setup("tpu", environ={})


def test_setup_takes_the_environment_as_detect_reads_it_and_names_a_failed_rendezvous():
    # RANK=0 WORLD_SIZE=1 alone: detect() needs no address or port, but setup() went through env:// and
    # failed with torch's "MASTER_ADDR expected, but not set"
    ctx = tdist.setup("cpu", environ={"RANK": "0", "WORLD_SIZE": "1"})
    try:
        assert ctx.backend == "gloo" and tdist.get_world_size() == 1
        assert tdist.all_reduce_sums({"x": 2.0}) == {"x": 2.0}
    finally:
        tdist.teardown(wait=False)
    # no peer ever comes: one line naming where it waited (a DistStoreError traceback before)
    port = free_port()
    with pytest.raises(ConnectionError, match=rf"^rank 0 of 2 could not join the job at 127.0.0.1:{port} "
                                              r"\(MASTER_ADDR:MASTER_PORT\): .*1/2 clients joined"):
        tdist.setup("cpu", timeout=datetime.timedelta(seconds=1),
                    environ={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    assert not torch.distributed.is_initialized()


def test_train_with_world_size_needs_a_process_group():
    from ttgnn.train import TrainConfig, train

    with pytest.raises(ValueError, match="world_size=2 needs an initialised process group"):
        train(TrainConfig(dataset="unused", epochs=1), process_rank=0, world_size=2)
    with pytest.raises(ValueError, match=r"process_rank must be in \[0, 2\), got 2"):
        train(TrainConfig(dataset="unused", epochs=1), process_rank=2, world_size=2)


def test_one_process_of_a_larger_group_cannot_train_alone(monkeypatch):
    # world_size=1 inside a group of two would wait at the group's barrier for a rank that is not
    # training: an error before anything starts.
    from ttgnn.train import TrainConfig, train

    monkeypatch.setattr(tdist, "get_world_size", lambda: 2)
    with pytest.raises(ValueError, match="world_size=1 needs an initialised process group of that size .* got 2"):
        train(TrainConfig(dataset="unused", epochs=1), process_rank=0, world_size=1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_setup_cuda_without_gpu_is_an_error():
    with pytest.raises(ValueError, match="torch.cuda.is_available"):
        tdist.setup("cuda", environ={})


# ---------------------------------------------------------------------- shards and seeds
@pytest.mark.parametrize("num, world_size", [(10, 2), (11, 2), (7, 3), (2, 4), (1, 1)])
def test_epoch_shards_are_disjoint_equal_and_cover(num, world_size):
    ids = torch.arange(100, 100 + num)
    shards = [tdist.epoch_shard(ids, 3, seed=7, rank=r, world_size=world_size) for r in range(world_size)]
    per_rank = -(-num // world_size)
    assert all(s.shape == (per_rank,) for s in shards)
    merged = torch.cat(shards)
    assert set(merged.tolist()) == set(ids.tolist())  # every node, padding repeats a few
    if num % world_size == 0:
        assert merged.unique().numel() == num  # disjoint


def test_epoch_shard_union_of_rank_batches_is_the_single_process_batch():
    ids = torch.arange(48) * 3
    world_size, batch = 4, 5
    whole = tdist.epoch_shard(ids, 2, seed=1, rank=0, world_size=1)
    shards = [tdist.epoch_shard(ids, 2, seed=1, rank=r, world_size=world_size) for r in range(world_size)]
    for step in range(-(-12 // batch)):
        union = torch.cat([s[step * batch:(step + 1) * batch] for s in shards])
        expect = whole[step * batch * world_size:(step + 1) * batch * world_size]
        assert sorted(union.tolist()) == sorted(expect.tolist())


def test_epoch_shard_is_deterministic_per_epoch_and_changes_between_epochs():
    ids = torch.arange(1000)
    a = tdist.epoch_shard(ids, 5, seed=3, rank=1, world_size=2)
    assert torch.equal(a, tdist.epoch_shard(ids, 5, seed=3, rank=1, world_size=2))
    assert not torch.equal(a, tdist.epoch_shard(ids, 6, seed=3, rank=1, world_size=2))
    assert not torch.equal(a, tdist.epoch_shard(ids, 5, seed=4, rank=1, world_size=2))
    assert torch.equal(tdist.epoch_shard(ids, 0, seed=0, shuffle=False, rank=1, world_size=2), ids[1::2])


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(rank=2, world_size=2), IndexError, r"rank must lie in \[0, 2\), got 2"),
    (dict(world_size=0), ValueError, "world_size must be >= 1, got 0"),
    (dict(epoch=-1), ValueError, "epoch must be >= 0, got -1"),
])
def test_epoch_shard_bad_arguments(kwargs, error, message):
    args = dict(ids=torch.arange(4), epoch=0, seed=0)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        tdist.epoch_shard(**args)
    with pytest.raises(ValueError, match="ids is empty"):
        tdist.epoch_shard(torch.arange(0), 0, 0)
    with pytest.raises(ValueError, match="one-dimensional"):
        tdist.epoch_shard(torch.zeros(2, 2, dtype=torch.long), 0, 0)


def test_rank_seeds_are_distinct_and_reproducible():
    seeds = {tdist.rank_seed(0, rank, epoch) for rank in range(4) for epoch in range(50)}
    seeds |= {tdist.rank_seed(0, rank) for rank in range(4)}
    assert len(seeds) == 4 * 51
    assert tdist.rank_seed(5, 1, 2) == tdist.rank_seed(5, 1, 2)
    with pytest.raises(ValueError, match="must be >= 0"):
        tdist.rank_seed(0, -1)
    tdist.seed_everything(tdist.rank_seed(1, 0, 0))
    first = torch.rand(3)
    tdist.seed_everything(tdist.rank_seed(1, 0, 0))
    assert torch.equal(first, torch.rand(3))


# ---------------------------------------------------------------------- rank 0 duties
def test_save_atomic_keeps_the_old_file_when_a_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    tdist.save_atomic({"epoch": 1}, path)
    assert torch.load(path)["epoch"] == 1

    def broken_save(obj, fh):
        fh.write(b"partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        tdist.save_atomic({"epoch": 2}, path)
    monkeypatch.undo()
    assert torch.load(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_rank_filter_keeps_warnings_only_on_other_ranks():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.levelno, self.format(record)))

    handler = Keep()
    handler.addFilter(tdist._RankFilter(rank=1, min_level=logging.WARNING))
    logger = logging.getLogger("ttgnn.test_rank_filter")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.info("epoch 1")
    logger.warning("slow")
    assert records == [(logging.WARNING, "[rank 1] slow")]


def test_fault_hook_kills_only_the_chosen_rank_on_the_first_attempt():
    assert tdist.maybe_inject_fault(0, 0, rank=0, environ={}) is None
    env = {tdist.FAULT_ENV: "1:2:3"}
    tdist.maybe_inject_fault(2, 3, rank=0, environ=env)  # other rank
    tdist.maybe_inject_fault(2, 4, rank=1, environ=env)  # other step
    tdist.maybe_inject_fault(2, 3, rank=1, environ={**env, "TORCHELASTIC_RESTART_COUNT": "1"})  # a restart
    with pytest.raises(ValueError, match="'rank:epoch:step'"):
        tdist.maybe_inject_fault(0, 0, rank=0, environ={tdist.FAULT_ENV: "1:2"})
    code = ("from ttgnn.distributed import maybe_inject_fault as f\n"
            "f(0, 1, rank=1); f(2, 3, rank=1); print('survived')")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, tdist.FAULT_ENV: "1:2:3"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and "survived" not in proc.stdout


# ---------------------------------------------------------------------- DDP on gloo
def _tiny_setup(seed: int, gnn_backend: str = "dgl"):
    """A 2-layer GraphSAGE on a TT embedding over a 240-node planted-partition graph."""
    from ttgnn.data import planted_partition
    from ttgnn.models import NodeInput, build_model

    dataset = planted_partition(240, num_classes=4, avg_degree=6, seed=seed)
    graph = dataset.dgl_graph()
    tdist.seed_everything(tdist.rank_seed(seed))  # the same init on every rank and in the reference
    node_input = NodeInput("tt", dataset.num_nodes, 16, ranks=4, init="gaussian", init_scale=0.5)
    # No dropout, LayerNorm (per node) rather than BatchNorm (per batch), full neighbourhoods:
    # the forward of a node does not depend on which batch it is in, so only the gradient
    # averaging decides whether DDP matches the single process.
    model = build_model("sage", node_input, dataset.num_classes, hidden=16, num_layers=2, dropout=0.0,
                        norm="layer", gnn_backend=gnn_backend)
    return dataset, graph, model


def train_steps(rank: int, world_size: int, batch_size: int, epochs: int, seed: int, use_ddp: bool,
                gnn_backend: str = "dgl") -> dict:
    """Train the tiny model on this rank's shards; returns the final state_dict."""
    import dgl
    import torch.nn.functional as F

    dataset, graph, model = _tiny_setup(seed, gnn_backend)
    net = tdist.wrap_model(model) if use_ddp else model
    emb_params, gnn_params = model.parameter_groups()
    optimisers = [torch.optim.Adam(emb_params, lr=0.02), torch.optim.Adam(gnn_params, lr=0.01)]
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
    train_ids = dataset.split["train"]
    for epoch in range(epochs):
        tdist.seed_everything(tdist.rank_seed(seed, rank, epoch))
        nodes = tdist.epoch_shard(train_ids, epoch, seed, rank, world_size)
        loader = dgl.dataloading.DataLoader(graph, nodes, sampler, batch_size=batch_size, shuffle=False)
        for input_nodes, output_nodes, blocks in loader:
            logits = net(blocks, input_nodes)
            loss = F.cross_entropy(logits, dataset.labels[output_nodes.long()])
            for opt in optimisers:
                opt.zero_grad()
            loss.backward()
            for opt in optimisers:
                opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _ddp_worker(rank: int, world_size: int, port: int, out_dir: str, batch_size: int, epochs: int, seed: int,
                gnn_backend: str = "dgl"):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    torch.set_num_threads(1)
    ctx = tdist.setup("cpu", timeout=datetime.timedelta(seconds=60))
    try:
        assert ctx.backend == "gloo" and ctx.world_size == world_size
        state = train_steps(rank, world_size, batch_size, epochs, seed, use_ddp=True, gnn_backend=gnn_backend)
        torch.save(state, Path(out_dir) / f"rank{rank}.pt")
    finally:
        tdist.teardown()


def run_spawned(fn, world_size: int, args: tuple, deadline_s: float = DEADLINE_S) -> None:
    """``torch.multiprocessing`` spawn with a deadline: kills every process when it passes.

    Spawned, not forked from a preloaded fork server (3-4 s of CPU less per rank): fork-server
    children end with ``os._exit``, skipping the interpreter shutdown where gloo's exit-time abort
    showed (``benchmarks/exit_race.py``); spawned ranks go through it."""
    import torch.multiprocessing as mp

    context = mp.start_processes(fn, args=(world_size,) + args, nprocs=world_size, join=False,
                                 start_method="spawn")
    stop = time.monotonic() + deadline_s
    try:
        while not context.join(timeout=1.0):
            if time.monotonic() > stop:
                raise TimeoutError(f"ranks still running after {deadline_s} s")
    finally:
        for proc in context.processes:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def test_two_ranks_match_one_process_on_the_union_of_their_batches(tmp_path):
    seed, batch, epochs = 11, 10, 2  # 120 training nodes: 6 steps of 2 x 10 per epoch
    run_spawned(_ddp_worker, 2, (free_port(), str(tmp_path), batch, epochs, seed))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    union = train_steps(0, 1, 2 * batch, epochs, seed, use_ddp=False)
    alone = train_steps(0, 2, batch, epochs, seed, use_ddp=False)  # rank 0's half, no averaging
    _, _, init = _tiny_setup(seed)
    init = init.state_dict()

    names = [k for k, v in union.items() if v.is_floating_point()]
    assert any(k.startswith("node_input.table.cores") for k in names)
    assert any(k.startswith("gnn.convs") for k in names)
    for name in names:
        # Identical on both ranks (bitwise: same averaged gradient, same optimiser step).
        assert torch.equal(ranks[0][name], ranks[1][name]), name
        # Equal to one process on the union of the two ranks' batches.
        torch.testing.assert_close(ranks[0][name], union[name], rtol=1e-5, atol=2e-6, msg=name)
    # ... and the test can tell: training moved every core, and rank 0's half alone ends elsewhere.
    for k in range(3):
        name = f"node_input.table.cores.{k}"
        assert (union[name] - init[name]).abs().max() > 1e-2, name
    assert max((alone[k] - union[k]).abs().max().item() for k in names) > 1e-2


def _planted_run_worker(rank: int, world_size: int, port: int, out_dir: str, settings: dict,
                        check_steps: int = 64, nan_step: int = 0, nan_ranks: tuple = (1,), rank_settings=None):
    """Train the 100-node planted graph with ``TrainConfig(**settings)`` on this rank and write what
    came of it: "trained", a ``TrainingDiverged``'s epoch and last clause, or a ``ValueError``.
    With ``nan_step``, the loss of that step (counted from 1) is NaN on ``nan_ranks``, not on the others;
    ``rank_settings`` maps a rank to settings of its own (``graph_seed``: the planted graph's seed, 0)."""
    settings = {**settings, **(rank_settings or {}).get(rank, {})}
    graph_seed = settings.pop("graph_seed", 0)  # None: no graph given, the run loads config.dataset
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    import ttgnn.train as ttgnn_train
    from ttgnn.data import planted_partition
    from ttgnn.train import TrainConfig, TrainingDiverged, train

    torch.set_num_threads(1)
    ttgnn_train.FINITE_CHECK_STEPS = check_steps
    if nan_step and rank in nan_ranks:
        calls, loss = [], ttgnn_train.node_loss

        def nan_once(*args, **kwargs):
            calls.append(1)
            value = loss(*args, **kwargs)
            return value * float("nan") if len(calls) == nan_step else value

        ttgnn_train.node_loss = nan_once
    tdist.setup("cpu", timeout=datetime.timedelta(seconds=60))
    try:
        config = TrainConfig(dataset="planted-100", dim=8, rank=2, hidden=8, num_layers=2, order="identity",
                             label_input=False, progress=False, **settings)
        train(config, None if graph_seed is None else planted_partition(100, num_classes=2, seed=graph_seed))
        outcome = "trained"
    except TrainingDiverged as err:
        outcome = f"diverged in epoch {err.epoch}: {str(err).rsplit('; ', 1)[-1]}"
    except ValueError as err:
        outcome = f"ValueError: {err}"
    finally:
        tdist.teardown(wait=False)
    (Path(out_dir) / f"rank{rank}.txt").write_text(outcome)


def test_a_refused_run_folder_stops_every_rank_with_rank_0s_error(tmp_path):
    # Only rank 0 looks at the folder; the other ranks must raise its error too, not go on
    # training alone and wait for rank 0 at the first collective.
    run_dir = tmp_path / "not-a-folder"
    run_dir.write_text("a file")
    settings = dict(epochs=1, mode="full", output_dir=str(run_dir))
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings))
    expected = f"ValueError: output folder {run_dir} exists and is not a folder"
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == [expected, expected]


def test_processes_started_with_other_settings_stop_together_naming_them(tmp_path):
    # another --lr on one process trained replicas apart without a word; another --epochs waited at the
    # first unmatched collective for --dist-timeout (an hour by default) and ended in a gloo traceback
    settings = dict(epochs=2, mode="full", lr=0.01, root=str(tmp_path / "rank-own"))  # root: each its own
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings, 64, 0, (1,),
                                         {1: dict(lr=0.05, epochs=3, root=str(tmp_path / "other"))}))
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == [
        "ValueError: 1 of 2 processes of the job were started with other settings than rank 0 (their errors name "
        "them); start every process of the job with the same options",
        "ValueError: this process was started with other settings than rank 0 of the job: epochs=3 (rank 0: 2), "
        "lr=0.05 (rank 0: 0.01); start every process of the job with the same options"]


def test_processes_that_read_other_data_stop_together_naming_it(tmp_path):
    # each process reads its own copy of the dataset folder: a stale copy trained silently on mixed data
    # (another label per node), or, where the split differed, the job died in DDP's constructor or gloo
    settings = dict(epochs=1, mode="full")
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings, 64, 0, (1,), {1: dict(graph_seed=1)}))
    outcomes = [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)]
    assert outcomes[0] == ("ValueError: 1 of 2 processes of the job could not load the dataset or read other data "
                           "than rank 0 (their errors say which); every process must read the same dataset")
    assert re.fullmatch(r"ValueError: this process read other data than rank 0 of the job \(dataset fingerprint "
                        r"[0-9a-f]{24}, rank 0: [0-9a-f]{24}\): every process must read the same dataset; copy rank "
                        r"0's dataset folder to this machine again", outcomes[1]), outcomes[1]


def test_a_process_that_cannot_load_the_dataset_stops_the_job_with_it(tmp_path):
    # it raised alone, and the others waited for it at a collective until --dist-timeout
    settings = dict(epochs=1, mode="full", root=str(tmp_path))
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings, 64, 0, (1,), {1: dict(graph_seed=None)}))
    outcomes = [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)]
    assert outcomes[0] == ("ValueError: 1 of 2 processes of the job could not load the dataset or read other data "
                           "than rank 0 (their errors say which); every process must read the same dataset")
    assert outcomes[1].startswith(f"ValueError: this process could not load the dataset: dataset folder not found: "
                                  f"{tmp_path / 'planted-100'}"), outcomes[1]


@pytest.mark.parametrize("mode, check_steps", [("full", 64), ("minibatch", 64), ("minibatch", 3)])
def test_a_nan_loss_stops_every_rank_in_the_same_epoch(tmp_path, mode, check_steps):
    # The loss is averaged over the ranks, and the looks within a mini-batch epoch are too, so all
    # of them see the NaN and stop at once: none waits at a collective for a rank that stopped.
    # Mini-batch: 25 training nodes a rank in batches of 5, 5 steps; a look at the loss every 64
    # (never within the epoch: the ranks meet at its end) or every 3 (after step 3, together).
    settings = dict(epochs=3, mode=mode, fanouts=[3, 3], batch_size=5)
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings, check_steps, 1, (0, 1)))
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == [
        "diverged in epoch 1: nothing was saved (no output folder)",
        "diverged in epoch 1: rank 0's message names what the run folder keeps"]


def test_a_nan_on_one_rank_at_a_look_stops_both_ranks_there(tmp_path):
    # Rank 1's loss of step 3 is NaN, rank 0's is not: at the look after step 3 only rank 1's sum
    # is NaN, and the look's all-reduce stops rank 0 with it (alone, rank 1 would leave the epoch
    # while rank 0 waited in step 4's gradient all-reduce).
    settings = dict(epochs=3, mode="minibatch", fanouts=[3, 3], batch_size=5)
    run_spawned(_planted_run_worker, 2, (free_port(), str(tmp_path), settings, 3, 3))
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == [
        "diverged in epoch 1: nothing was saved (no output folder)",
        "diverged in epoch 1: rank 0's message names what the run folder keeps"]


def _full_graph_config():
    """Full-graph training without dropout: the two ranks' shards are the only difference from
    one process, so the epoch-1 loss (computed before the first step) is the same number."""
    from ttgnn.train import TrainConfig

    return TrainConfig(dataset="planted", dim=8, rank=2, hidden=8, num_layers=2, epochs=2, mode="full",
                       order="identity", label_input=False, dropout=0.0, correct_smooth=False, progress=False, seed=5)


def _full_graph_worker(rank: int, world_size: int, port: int, out_dir: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    from ttgnn.data import planted_partition
    from ttgnn.train import train

    torch.set_num_threads(1)
    tdist.setup("cpu", timeout=datetime.timedelta(seconds=60))
    try:
        summary = train(_full_graph_config(), planted_partition(200, num_classes=4, seed=2))
    finally:
        tdist.teardown()
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(summary))


def test_two_ranks_log_the_epoch_mean_loss_and_return_rank_0s_metrics(tmp_path):
    from ttgnn.data import planted_partition
    from ttgnn.train import train

    run_spawned(_full_graph_worker, 2, (free_port(), str(tmp_path)))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["world_size"] == 2 and [r["epoch"] for r in ranks[0]["epochs"]] == [1, 2]
    # Every rank returns rank 0's metrics (rank 1 evaluates nothing itself).
    assert ranks[1] == ranks[0]
    alone = train(_full_graph_config(), planted_partition(200, num_classes=4, seed=2))
    # The logged loss is the mean over all training nodes: the mean of the two equal shards' means,
    # not one rank's own shard mean, nor their sum.
    first = ranks[0]["epochs"][0]["loss"]
    assert first == pytest.approx(alone["epochs"][0]["loss"], rel=1e-6)
    # Full-graph gradients averaged over equal shards are the one-process gradient: the next
    # epoch's loss agrees too, to rounding.
    assert ranks[0]["epochs"][1]["loss"] == pytest.approx(alone["epochs"][1]["loss"], rel=1e-5)
    assert ranks[0]["epochs"][1]["loss"] < first


def test_two_ranks_match_one_process_with_tensor_layers(tmp_path):
    # The same DDP equivalence with the tensor layers (--gnn-backend torch): blocks become index
    # tensors on each rank; averaged gradients give one process's result on the union of batches.
    seed, batch, epochs = 11, 10, 2
    run_spawned(_ddp_worker, 2, (free_port(), str(tmp_path), batch, epochs, seed, "torch"))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    union = train_steps(0, 1, 2 * batch, epochs, seed, use_ddp=False, gnn_backend="torch")
    alone = train_steps(0, 2, batch, epochs, seed, use_ddp=False, gnn_backend="torch")
    dgl_union = train_steps(0, 1, 2 * batch, epochs, seed, use_ddp=False)
    names = [k for k, v in union.items() if v.is_floating_point()]
    assert any(k.startswith("gnn.convs.0.fc_neigh") for k in names)
    for name in names:
        assert torch.equal(ranks[0][name], ranks[1][name]), name
        torch.testing.assert_close(ranks[0][name], union[name], rtol=1e-5, atol=2e-6, msg=name)
        torch.testing.assert_close(union[name], dgl_union[name], rtol=1e-4, atol=1e-5, msg=name)  # = DGL's layers
    assert max((alone[k] - union[k]).abs().max().item() for k in names) > 1e-2


# ---------------------------------------------------------------------- ttgnn train under torchrun
TRAIN_ARGS = ["--model", "sage", "--embedding", "tt", "--dim", "16", "--rank", "4", "--order", "identity",
              "--hidden", "16", "--num-layers", "2", "--mode", "minibatch", "--fanouts", "5,5",
              "--batch-size", "32", "--epochs", "3", "--num-threads", "1", "--no-progress"]
RECORD_KEYS = ("epoch", "loss", "train_acc", "valid_acc", "test_acc", "valid_loss")


@pytest.fixture(scope="module")
def toy_folder(tmp_path_factory) -> Path:
    """A 400-node planted-partition graph written in OGB's raw layout (what ``ttgnn train`` reads)."""
    from ttgnn.data import planted_partition

    dataset = planted_partition(400, num_classes=4, avg_degree=8, seed=3)
    folder = tmp_path_factory.mktemp("data") / "toy"

    def write(path, lines):
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as fh:
            fh.write("".join(f"{line}\n" for line in lines))

    write(folder / "raw" / "num-node-list.csv.gz", [dataset.num_nodes])
    write(folder / "raw" / "edge.csv.gz", [f"{u},{v}" for u, v in dataset.edge_index.T.tolist()])
    write(folder / "raw" / "node-label.csv.gz", dataset.labels.tolist())
    for key, ids in dataset.split.items():
        write(folder / "split" / "random" / f"{key}.csv.gz", ids.tolist())
    return folder


def run_jobs(commands: list, logs: list, env: dict, deadline_s: float = DEADLINE_S) -> list:
    """Start the commands together, each in its own process group; wait for all under one deadline,
    then kill whatever is left (torchrun agents and their workers). Returns the exit codes."""
    procs = []
    try:
        for cmd, log_path in zip(commands, logs):
            with open(log_path, "w") as fh:
                procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
        stop = time.monotonic() + deadline_s
        for proc in procs:
            proc.wait(timeout=max(1.0, stop - time.monotonic()))
        return [proc.returncode for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def torchrun_train(launcher_args: list, toy_folder: Path, out_dir: Path, tmp: Path, extra_env=None,
                   name: str = "job", extra_args=()) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != tdist.FAULT_ENV and not k.startswith("TORCHELASTIC")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(extra_env or {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", *launcher_args, "-m", "ttgnn.cli", "train",
           "--dataset", str(toy_folder), "--cache-dir", str(tmp / "cache"), "--output-dir", str(out_dir), *TRAIN_ARGS,
           *extra_args]
    log_path = tmp / f"{name}.log"
    (code,) = run_jobs([cmd], [log_path], env)
    return code, log_path.read_text()


def epoch_records(out_dir: Path) -> list:
    metrics = json.loads((out_dir / "metrics.json").read_text())
    return [tuple(r[k] for k in RECORD_KEYS) for r in metrics["epochs"]]


def final_model(out_dir: Path) -> dict:
    from ttgnn.train import load_checkpoint

    return load_checkpoint(out_dir / "checkpoint.pt")["model"]


def assert_same_models(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def two_rank_run(toy_folder, tmp_path_factory) -> Path:
    """``torchrun --standalone --nproc-per-node=2 -m ttgnn.cli train ...``: the reference run."""
    tmp = tmp_path_factory.mktemp("two_ranks")
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, tmp / "out", tmp)
    assert code == 0, log[-3000:]
    return tmp / "out"


def test_ttgnn_train_under_torchrun_two_ranks(two_rank_run, toy_folder):
    metrics = json.loads((two_rank_run / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    assert [r["epoch"] for r in metrics["epochs"]] == [1, 2, 3]
    losses = [r["loss"] for r in metrics["epochs"]]
    assert losses[-1] < losses[0] - 0.3  # it trains (2.39 -> 1.34 measured)
    # Each rank trains on its half of each epoch's target nodes (label input is on for this graph:
    # half of the training nodes are inputs), in batches of 32: the optimiser's step count.
    from ttgnn.train import load_checkpoint, split_known

    assert metrics["label_input"] is True
    with gzip.open(toy_folder / "split" / "random" / "train.csv.gz", "rt") as fh:
        train_ids = torch.tensor([int(line) for line in fh.read().split()])
    targets = [split_known(train_ids, 0.5, 0, epoch)[1].numel() for epoch in (1, 2, 3)]
    expected = sum(math.ceil(math.ceil(n / 2) / 32) for n in targets)
    alone = sum(math.ceil(n / 32) for n in targets)  # what each rank would run without shards
    assert expected < alone
    optimizer = load_checkpoint(two_rank_run / "checkpoint.pt")["optimizer"]
    assert {int(state["step"]) for state in optimizer["state"].values()} == {expected}
    assert set(final_model(two_rank_run)) >= {f"node_input.table.cores.{k}" for k in range(3)}


def test_label_input_and_reuse_under_torchrun_two_ranks(toy_folder, tmp_path):
    # Every rank draws the same known/target split and an equal shard of the targets: the ranks
    # run the same number of steps (an unequal count would hang DDP until the timeout). With label
    # reuse, each rank runs the no-grad rounds on its own unwrapped model before its DDP step.
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, tmp_path / "out", tmp_path,
                               name="labels", extra_args=["--label-input", "--label-reuse", "1", "--dist-timeout", "60"])
    assert code == 0, log[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["label_input"] is True and metrics["world_size"] == 2
    assert metrics["settings"]["label_reuse"] == 1
    assert [r["epoch"] for r in metrics["epochs"]] == [1, 2, 3]
    assert "label_input.table.weight" in final_model(tmp_path / "out")


def test_two_nodes_on_one_machine_match_one_node(two_rank_run, toy_folder, tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != tdist.FAULT_ENV and not k.startswith("TORCHELASTIC")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    commands, logs = [], []
    for node in range(2):
        commands.append([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                         f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}",
                         "-m", "ttgnn.cli", "train", "--dataset", str(toy_folder),
                         "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out"), *TRAIN_ARGS])
        logs.append(tmp_path / f"node{node}.log")
    codes = run_jobs(commands, logs, env)
    assert codes == [0, 0], "\n".join(p.read_text()[-2000:] for p in logs)
    assert "rank 1/2 (node 1, local rank 0)" in logs[1].read_text()
    # Same ranks, same shards, same seeds: bit-for-bit the single-node two-rank run.
    assert epoch_records(tmp_path / "out") == epoch_records(two_rank_run)
    assert_same_models(final_model(tmp_path / "out"), final_model(two_rank_run))


def test_killed_rank_restarts_from_the_last_checkpoint(two_rank_run, toy_folder, tmp_path):
    # Rank 1 SIGKILLs itself at step 1 of epoch 2 on the first attempt; torchrun stops rank 0,
    # restarts both, and they resume from the checkpoint of epoch 1.
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2", "--max-restarts=1"], toy_folder,
                               tmp_path / "out", tmp_path, extra_env={tdist.FAULT_ENV: "1:2:1"})
    assert code == 0, log[-3000:]
    assert "rank 1 kills itself at epoch 2 step 1" in log
    assert "restart 1" in log and "at epoch 2" in log and "resumed from" in log
    records = epoch_records(tmp_path / "out")
    assert [r[0] for r in records] == [1, 2, 3]  # no epoch lost or duplicated
    assert records == epoch_records(two_rank_run)  # and the same numbers as without the crash
    assert_same_models(final_model(tmp_path / "out"), final_model(two_rank_run))


def test_a_restart_applies_the_users_options_to_a_run_of_another_job(two_rank_run, toy_folder, tmp_path):
    # The folder holds a finished run of another job; this job has neither --resume nor --overwrite, so
    # its first attempt is refused. Its restart took that refusal for a crash and resumed the other run,
    # training a fourth epoch into it and exiting 0.
    shutil.copytree(two_rank_run, tmp_path / "out")
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2", "--max-restarts=1"], toy_folder,
                               tmp_path / "out", tmp_path, extra_args=["--epochs", "4"])
    assert code != 0, log[-3000:]
    assert log.count("already holds a run") >= 2 and "resumed from" not in log  # refused on both attempts
    assert epoch_records(tmp_path / "out") == epoch_records(two_rank_run)


def test_a_resume_rank_0_refuses_stops_every_rank_in_one_line(two_rank_run, toy_folder, tmp_path):
    # rank 0 reads the checkpoint and finds it damaged; rank 1, waiting for its broadcast, printed a gloo
    # traceback ("Connection closed by peer") instead of a line
    shutil.copytree(two_rank_run, tmp_path / "out")
    checkpoint = tmp_path / "out" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, tmp_path / "out", tmp_path,
                               extra_args=["--epochs", "4", "--resume"])
    assert code != 0 and f"ttgnn train: error: corrupted checkpoint {checkpoint}" in log, log[-3000:]
    # the ranks' output: what comes before torchrun's report (its "failed (exitcode: ...)" line, logged once
    # every worker has ended), less torchrun's own log lines among it: on a loaded machine the agent sees
    # rank 0 exit before rank 1 has said a word and logs "Sending process ... closing signal SIGTERM" first
    agent = re.compile(r"^[DIWEF]\d{4} [\d:.]+ +\d+ \S*torch/distributed/elastic/")  # the path may be longer
    lines = log.splitlines()
    end = next((i for i, line in enumerate(lines) if agent.match(line) and "failed (exitcode" in line), len(lines))
    workers = [line for line in lines[:end] if not agent.match(line)]
    assert not any("Traceback" in line for line in workers), log[-3000:]
    assert any(line.startswith(("ttgnn train: stopped, another process of the job stopped", "ttgnn train: stopped "
                                "by SIGTERM")) for line in workers), log[-3000:]  # rank 1, in a line


def test_a_rank_that_dies_without_restarts_leaves_one_line_naming_the_checkpoint(toy_folder, tmp_path):
    # Rank 1 SIGKILLs itself at step 1 of epoch 2; without --max-restarts rank 0 stops (its collective fails, or
    # torchrun's SIGTERM arrives): it printed a gloo traceback and no word of the checkpoint
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, tmp_path / "out", tmp_path,
                               extra_env={tdist.FAULT_ENV: "1:2:1"})
    assert code != 0 and "rank 1 kills itself at epoch 2 step 1" in log
    line = next((line for line in log.splitlines() if line.startswith("ttgnn train: stopped")), None)
    assert line is not None, log[-3000:]
    assert line.endswith(f"; the last complete checkpoint is {tmp_path / 'out' / 'checkpoint.pt'} (epoch 1); "
                         "continue with the same command plus --resume"), line
    assert "Traceback" not in log.split(line)[0]  # the workers' output: one line (torchrun's own report follows)
    assert len(line) < 400, line


def test_multi_gpu_example_tiny_on_two_cpu_ranks(tmp_path):
    script = Path(__file__).resolve().parents[1] / "examples" / "multi_gpu_train.py"
    env = {k: v for k, v in os.environ.items() if k != tdist.FAULT_ENV and not k.startswith("TORCHELASTIC")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script),
           "--tiny", "--device", "cpu", "--output-dir", str(tmp_path / "out")]
    codes = run_jobs([cmd], [tmp_path / "log"], env)
    log = (tmp_path / "log").read_text()
    assert codes == [0], log[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and len(metrics["epochs"]) == 6
    assert metrics["best_valid_acc"] > 0.7  # 8 classes (chance 0.125); 0.92 measured
    assert "2 rank(s): planted-2000 sage+tt: best valid" in log
    assert "WARNING" not in log, log[-3000:]  # it warned about its own dataset's name, once per rank


def test_ttgnn_train_under_torchrun_with_tensor_layers(two_rank_run, toy_folder, tmp_path):
    # --gnn-backend torch under torchrun (gloo): the same epochs as DGL's layers, to float rounding
    code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, tmp_path / "out", tmp_path,
                               name="torch_layers", extra_args=["--gnn-backend", "torch"])
    assert code == 0, log[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["gnn_backend"] == "torch" and metrics["world_size"] == 2
    reference = json.loads((two_rank_run / "metrics.json").read_text())
    assert reference["gnn_backend"] == "dgl"
    for ours, ref in zip(metrics["epochs"], reference["epochs"]):
        assert ours["loss"] == pytest.approx(ref["loss"], rel=5e-3)  # rounding carried by Adam's steps
        assert abs(ours["valid_acc"] - ref["valid_acc"]) <= 0.02


def test_weight_average_under_torchrun_and_resume(two_rank_run, toy_folder, tmp_path):
    # --weight-average 2 under torchrun, one epoch per launch (each launch resumes the last one's
    # checkpoint): rank 0 alone keeps the average, and training is the reference run's to the bit.
    out, trained = tmp_path / "out", []
    for epochs in (1, 2, 3):
        args = ["--weight-average", "2", "--epochs", str(epochs)] + (["--resume"] if epochs > 1 else [])
        code, log = torchrun_train(["--standalone", "--nproc-per-node=2"], toy_folder, out, tmp_path,
                                   name=f"average{epochs}", extra_args=args)
        assert code == 0, log[-3000:]
        trained.append(final_model(out))  # the checkpoint's model: the weights as trained
    metrics = json.loads((out / "metrics.json").read_text())
    reference = json.loads((two_rank_run / "metrics.json").read_text())
    assert [r["loss"] for r in metrics["epochs"]] == [r["loss"] for r in reference["epochs"]]
    assert [r["raw_valid_acc"] for r in metrics["epochs"]] == [r["valid_acc"] for r in reference["epochs"]]
    assert [r["raw_test_acc"] for r in metrics["epochs"]] == [r["test_acc"] for r in reference["epochs"]]
    assert_same_models(trained[-1], final_model(two_rank_run))
    # the average: epoch 1's weights, then the mean of epochs 1-2, then decay 1/2
    averages = [trained[0]]
    for weights in trained[1:]:
        averages.append({k: (averages[-1][k] / 2 + v / 2) if v.is_floating_point() else v
                         for k, v in weights.items()})
    from ttgnn.train import load_checkpoint

    saved = load_checkpoint(out / "checkpoint.pt")["weight_average"]
    assert saved["updates"] == 3 and saved["horizon"] == 2
    best = load_checkpoint(out / "best_model.pt")
    assert best["epoch"] == metrics["best_epoch"]
    cores = [k for k in trained[0] if k.startswith("node_input.table.cores.")]
    assert cores and not torch.equal(saved["state"][cores[0]], trained[-1][cores[0]])
    for key in trained[0]:
        assert torch.allclose(saved["state"][key], averages[-1][key], atol=1e-6, rtol=0), key
        assert torch.allclose(best["model"][key], averages[best["epoch"] - 1][key], atol=1e-6, rtol=0), key
