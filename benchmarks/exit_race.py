"""Gloo ranks that leave right after a collective: how many abort at exit, with and without kept handles.

A rank that stops on an error every rank shares (a loss gone NaN, a refused run folder) destroys
the process group without a barrier and exits. gloo's worker thread lets go of a finished
collective a moment after the caller's ``wait()`` has returned; if its reference is the last one,
it frees the collective's tensors, which takes the GIL, and when the interpreter is already
exiting the thread is stopped inside that destructor: the rank aborts with "terminate called
without an active exception". It happens when something (a DDP model) still holds the process
group at exit, so its worker threads are still there.

Each run spawns two ranks that hold the default group past ``destroy_process_group`` (as a DDP
model does), sum a fresh float64 tensor three times, destroy the group and exit. Modes,
alternated run by run on a machine loaded by ``--hogs`` busy processes:

* ``plain``: ``dist.all_reduce(buf)``, as ``ttgnn.distributed.all_reduce_sums`` did before;
* ``kept``: ``dist.all_reduce(buf, async_op=True)`` through ``ttgnn.distributed._wait_and_keep``,
  which waits and keeps the handle, so the main thread frees the collective.

Both modes import ``ttgnn.distributed`` (the import's cost changes how soon a process exits).

The ranks hold the group itself (torch's ``_get_default_group()``, a private function) rather
than through a DDP model: with a one-weight ``DistributedDataParallel`` model holding it instead,
as a training run does, no rank aborted in 100 plain runs (2026-11-30, the same 2-core EPYC and
load). The model's construction and reducer change the timing, and the race is rarer there (CI
saw it once; about 2 aborts in 140 runs of the NaN-loss test); holding the group itself shows it
in about one run in six.

Usage::

    python benchmarks/exit_race.py --runs 100
"""
from __future__ import annotations

import argparse
import datetime
import os
import socket
import subprocess
import sys
import time

MODES = ("plain", "kept")
_HELD: list = []  # a rank's process group, kept until the interpreter exits


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank(rank: int, world_size: int, port: int, mode: str) -> None:
    import torch
    import torch.distributed as dist

    from ttgnn import distributed as tdist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=30))
    _HELD.append(dist.distributed_c10d._get_default_group())  # outlives destroy_process_group, as under DDP
    for _ in range(3):
        buf = torch.tensor([float(rank)], dtype=torch.float64)
        if mode == "plain":
            dist.all_reduce(buf)
        else:
            tdist._wait_and_keep(dist.all_reduce(buf, async_op=True))
        if float(buf) != world_size * (world_size - 1) / 2:
            raise RuntimeError(f"wrong sum {float(buf)}")
        del buf
    dist.destroy_process_group()


def _one_run(mode: str, deadline_s: float) -> str:
    """Spawn two ranks; ``"ok"``, ``"aborted"`` (a rank died of SIGABRT) or another failure's text."""
    import torch.multiprocessing as mp

    context = mp.start_processes(_rank, args=(2, _free_port(), mode), nprocs=2, join=False, start_method="spawn")
    stop = time.monotonic() + deadline_s
    try:
        while not context.join(timeout=1.0):
            if time.monotonic() > stop:
                return f"still running after {deadline_s} s"
    except mp.ProcessExitedException as exc:
        return "aborted" if exc.signal_name == "SIGABRT" else str(exc)
    except mp.ProcessRaisedException as exc:
        return str(exc).strip().splitlines()[-1]
    finally:
        for proc in context.processes:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    return "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of each mode (default: 50)")
    parser.add_argument("--hogs", type=int, default=2,
                        help="busy processes loading the CPU during the runs (default: 2)")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds a run may take (default: 60)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.hogs < 0:
        parser.error("--runs must be >= 1 and --hogs >= 0")

    from machine import cpu_model  # benchmarks/machine.py

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    outcomes = {mode: [] for mode in MODES}
    try:
        for i in range(args.runs):
            for mode in MODES:
                outcomes[mode].append(_one_run(mode, args.deadline))
            print(f"run {i + 1}/{args.runs}: " + ", ".join(f"{m} {outcomes[m].count('aborted')} aborted"
                                                          for m in MODES), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    print(f"\n{cpu_model()}, {os.cpu_count()} cores, {args.hogs} busy processes\n")
    print("| mode | runs | a rank aborted | other failures |")
    print("|---|---|---|---|")
    failed = bool(outcomes["kept"].count("aborted"))
    for mode in MODES:
        others = [o for o in outcomes[mode] if o not in ("ok", "aborted")]
        print(f"| {mode} | {len(outcomes[mode])} | {outcomes[mode].count('aborted')} | {len(others)} |")
        for text in sorted(set(others)):
            print(f"  {mode}: {text}")
        failed = failed or bool(others)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
