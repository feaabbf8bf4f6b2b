"""TT lookup, side by side: the compiled kernel, the pure-PyTorch reference, tensorly-torch's
FactorizedEmbedding, and dense nn.Embedding (dense and sparse gradients).

Prints one table from one run: forward; forward + backward (gradients of every parameter); and the
whole table step, forward + backward + the optimiser's ``step()`` (Adam for the TT methods and the
dense table, SparseAdam for ``nn.Embedding(sparse=True)``, the optimiser each needs), per table
shape, TT rank and batch size, with the kernel's speed-up over each alternative (``time of the
method / time of the kernel``; above 1 means the kernel is faster). The table's caption names the
CPU model, the CPU kernels' instruction-set path and the allocator regime it was measured with.

Indices are drawn with repeats as a neighbour sampler draws them: a node's chance of being drawn
is proportional to its degree, and degrees follow a power law with exponent 2.5 (the node of
degree rank i has probability proportional to (i + 1)^(-2/3); sampled by inverse CDF as
``i = floor(N u^3)``), with node ids in a random order (no METIS reordering, the worst case for
shared prefixes). On ogbn-arxiv this gives about 57,000 distinct rows per 100,000 draws; the real
ogbn-arxiv degrees give 52,600.

Shapes: ``arxiv`` is ogbn-arxiv's 169,343 x 128 table (row shape [55, 55, 56], column shape
[8, 4, 4]); ``papers100M`` is ogbn-papers100M's 111,059,956 x 128 table (row shape
[481, 481, 481], the smallest balanced cover, ``ttgnn.shapes.factor_rows``), TT methods only (its
dense table would need 57 GB).

tensorly-torch is not a dependency of ttgnn; install it for this benchmark with
``pip install tensorly tensorly-torch`` (without it, its rows are left out).

Usage::

    python benchmarks/bench_lookup.py                 # everything (a few minutes)
    python benchmarks/bench_lookup.py --quick         # arxiv, rank 16, 100,000 indices
    python benchmarks/bench_lookup.py --threads 2 --json results.json
    python benchmarks/bench_lookup.py --device cuda   # on a GPU (times after torch.cuda.synchronize)
    python benchmarks/bench_lookup.py --quick --cpu-isa baseline   # another instruction-set path
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import torch
from torch import nn

from ttgnn.ops import lookup_backend, tt_lookup_kernel, tt_lookup_reference
from ttgnn.shapes import TTShape
from machine import cpu_model, select_cpu_isa  # noqa: E402  (benchmarks/machine.py)

SHAPES = {
    "arxiv": dict(num_rows=169_343, dim=128, row_shape=[55, 55, 56], col_shape=[8, 4, 4], dense=True),
    "papers100M": dict(
        num_rows=111_059_956, dim=128, row_shape=[481, 481, 481], col_shape=[8, 4, 4], dense=False
    ),
}
METHODS = ("kernel", "reference", "tensorly", "dense", "dense-sparse")


@dataclass
class Result:
    shape: str
    rank: int
    batch: int
    unique: int
    method: str
    forward_ms: float
    fwd_bwd_ms: float
    step_ms: float  # forward + backward + optimiser step


def sample_rows(num_rows: int, batch: int, generator: torch.Generator) -> torch.Tensor:
    """Degree-proportional draw with power-law degrees (exponent 2.5), random node order."""
    u = torch.rand(batch, generator=generator, dtype=torch.float64)
    degree_rank = (num_rows * u**3).long().clamp_(max=num_rows - 1)
    # A random bijection of [0, num_rows) (affine map with a multiplier coprime to num_rows), so
    # that high-degree nodes are spread over the table like real node ids are.
    multiplier = int(torch.randint(num_rows // 3, num_rows, (1,), generator=generator))
    while math.gcd(multiplier, num_rows) != 1:
        multiplier += 1
    offset = int(torch.randint(0, num_rows, (1,), generator=generator))
    return (degree_rank * multiplier + offset) % num_rows


def set_malloc_regime(regime: str) -> None:
    """How glibc serves this process's large CPU allocations (outputs and dense gradients are
    tens of MB), so that every method runs in the same regime:

    * ``fresh``: every block of 1 MiB or more is a new ``mmap`` and is unmapped when freed, so
      each call pays the page faults of its large outputs (what a training step sees with
      glibc's defaults for blocks over 32 MiB);
    * ``reuse``: no ``mmap`` and no trimming, so freed blocks are reused and, after the
      warm-up, no call faults pages in (what a caching allocator gives);
    * ``default``: glibc's own dynamic choice, which depends on what ran before in the process
      (a method may then run in either regime).
    """
    if regime == "default":
        return
    import ctypes
    import ctypes.util

    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # glibc's mallopt parameters
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        raise SystemExit(f"--malloc {regime} needs glibc's mallopt; use --malloc default") from None
    if regime == "fresh":
        ok = mallopt(M_MMAP_THRESHOLD, 1 << 20)
    else:
        ok = mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    if not ok:
        raise SystemExit(f"mallopt refused --malloc {regime}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(runs: dict[str, Callable[[], None]], budget_s: float, max_repeats: int,
                     device: torch.device = torch.device("cpu"), warmup: int = 3) -> dict[str, float]:
    """Median time of each of ``runs``, in milliseconds, timed in rounds: every round runs each
    method once, in turn. (A shared machine's load drifts over seconds; timing all runs of one
    method, then all of the next, would put that drift into their ratio.)

    Each method first runs ``warmup`` times untimed (its first runs grow the process's heap and
    the kernels' scratch buffers and fault their pages in, which no later step of a training
    loop pays; a method slower than ``budget_s / 2`` warms up once), then is timed
    ``budget_s / (its time)`` times, at least 3 and at most ``max_repeats``. The median, not the
    best run: a batch-sized output is sometimes served from memory the process already holds
    and skips the page faults every other run pays, so the best run is an outlier. On a GPU each
    run is timed from a synchronised start to a synchronised end."""
    repeats = {}
    for name, run in runs.items():
        start = time.perf_counter()
        done = 0
        while done < max(warmup, 1):
            run()
            _sync(device)
            done += 1
            if time.perf_counter() - start > budget_s / 2:
                break
        per_run = (time.perf_counter() - start) / done
        repeats[name] = int(min(max_repeats, max(3, budget_s // max(per_run, 1e-9))))
    times: dict[str, list[float]] = {name: [] for name in runs}
    while any(len(times[name]) < repeats[name] for name in runs):
        for name, run in runs.items():
            if len(times[name]) >= repeats[name]:
                continue
            t0 = time.perf_counter()
            run()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def make_tt_cores(shape: TTShape, generator: torch.Generator,
                  device: torch.device) -> list[nn.Parameter]:
    cores = []
    for k, core_shape in enumerate(shape.core_shapes):
        core = torch.randn(core_shape, generator=generator) / math.sqrt(core_shape[1])
        cores.append(nn.Parameter(core.to(device)))
    return cores


def build_method(name: str, spec: dict, rank: int, generator: torch.Generator,
                 device: torch.device):
    """(parameters, lookup function) for a method on ``device``, or None when it does not
    apply."""
    shape = TTShape.build(spec["num_rows"], spec["dim"], rank, row_shape=spec["row_shape"],
                          col_shape=spec["col_shape"])
    if name in ("kernel", "reference"):
        cores = make_tt_cores(shape, generator, device)
        fn = tt_lookup_kernel if name == "kernel" else tt_lookup_reference
        return cores, lambda rows: fn(cores, rows)
    if name == "tensorly":
        try:
            import tltorch
        except ImportError:
            return None
        # tensorly-torch needs an exact factorisation of the row count: the padded row count.
        module = tltorch.FactorizedEmbedding(
            shape.num_rows_padded, spec["dim"], auto_tensorize=False,
            tensorized_num_embeddings=list(spec["row_shape"]),
            tensorized_embedding_dim=list(spec["col_shape"]), factorization="blocktt", rank=rank,
        ).to(device)
        return list(module.parameters()), module
    if not spec["dense"]:
        return None
    module = nn.Embedding(spec["num_rows"], spec["dim"], sparse=name == "dense-sparse", device=device)
    return list(module.parameters()), module


def make_optimizer(name: str, params: list) -> torch.optim.Optimizer:
    """The optimiser a user pairs with each method: SparseAdam for sparse gradients, else Adam."""
    if name == "dense-sparse":
        return torch.optim.SparseAdam(params, lr=1e-3)
    return torch.optim.Adam(params, lr=1e-3)


def method_runs(name, spec, rank, batches, grad_out, generator):
    """(forward, forward + backward, forward + backward + optimiser step) closures of ``name``, or
    None when it does not apply.
    Successive calls take the ``batches`` in turn, so no run sees the batch of the run before it
    (as in training, where every step has new rows; the CPU kernel's backward reuses its own
    forward's sort, never the last step's)."""
    device = batches[0].device
    built = build_method(name, spec, rank, generator, device)
    if built is None:
        return None
    params, lookup = built
    turn = itertools.count()

    def next_batch():
        return batches[next(turn) % len(batches)]

    def forward():
        with torch.no_grad():
            lookup(next_batch())

    def forward_backward():
        for p in params:
            p.grad = None
        lookup(next_batch()).backward(grad_out)

    optimizer = make_optimizer(name, params)

    def step():
        optimizer.zero_grad(set_to_none=True)
        lookup(next_batch()).backward(grad_out)
        optimizer.step()

    return forward, forward_backward, step


def bench_config(methods, spec, rank, batches, grad_out, seed, budget_s, max_repeats, warmup):
    """{method: (forward ms, forward + backward ms, step ms)} for one shape, rank and batch: every
    method timed in the same rounds (time_interleaved)."""
    runs = {}
    for name in methods:
        built = method_runs(name, spec, rank, batches, grad_out, torch.Generator().manual_seed(seed))
        if built is not None:
            runs[name] = built
    device = batches[0].device
    forward = time_interleaved({name: r[0] for name, r in runs.items()}, budget_s, max_repeats,
                               device, warmup)
    forward_backward = time_interleaved({name: r[1] for name, r in runs.items()}, budget_s,
                                        max_repeats, device, warmup)
    step = time_interleaved({name: r[2] for name, r in runs.items()}, budget_s, max_repeats, device,
                            warmup)
    return {name: (forward[name], forward_backward[name], step[name]) for name in runs}


def main(argv: Optional[list[str]] = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--ranks", nargs="+", type=int, default=[8, 16, 32])
    parser.add_argument("--batches", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--quick", action="store_true",
                        help="only arxiv, rank 16, 100,000 indices (the acceptance setting)")
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of timed runs per method and measurement (after the warm-up)")
    parser.add_argument("--max-repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs before the timed ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    parser.add_argument("--malloc", choices=["fresh", "reuse", "default"], default="fresh",
                        help="large CPU allocations: fresh pages every call, reused pages, or glibc's "
                        "own history-dependent choice (see set_malloc_regime)")
    parser.add_argument("--cpu-isa", default="auto", choices=["auto", "avx512", "avx2", "baseline", "native"],
                        help="instruction-set path of the CPU kernels (auto: the best this CPU runs)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False")
    if args.quick:
        args.shapes, args.ranks, args.batches = ["arxiv"], [16], [100_000]

    torch.set_num_threads(args.threads)
    set_malloc_regime(args.malloc)
    cpu_isa = select_cpu_isa(args.cpu_isa)
    backend = lookup_backend(device.type)
    if backend != f"{device.type}-kernel":
        print(f"warning: ttgnn._C has no {device.type} kernel; 'kernel' rows time the "
              "reference path", file=sys.stderr)
    try:
        import tltorch  # noqa: F401
    except ImportError:
        print("note: tensorly-torch is not installed; its rows are skipped "
              "(pip install tensorly tensorly-torch)", file=sys.stderr)

    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{cpu_model()}, {torch.get_num_threads()} threads, CPU path {cpu_isa}")
    print(f"# torch {torch.__version__}, {where}, lookup backend {backend}, malloc {args.malloc}, "
          "times are medians of repeated runs")
    results: list[Result] = []
    for shape_name in args.shapes:
        spec = SHAPES[shape_name]
        for batch in args.batches:
            generator = torch.Generator().manual_seed(args.seed)
            rows = sample_rows(spec["num_rows"], batch, generator)
            unique = int(rows.unique().numel())
            grad_out = torch.randn(batch, spec["dim"], generator=generator)
            rows, grad_out = rows.to(device), grad_out.to(device)
            # the same rows in another order: the same work, but not the same batch
            shuffled = rows[torch.randperm(batch, generator=generator).to(device)]
            for rank in args.ranks:
                timings = bench_config(args.methods, spec, rank, (rows, shuffled), grad_out,
                                       args.seed, args.budget, args.max_repeats, args.warmup)
                for method, timing in timings.items():
                    results.append(Result(shape_name, rank, batch, unique, method, *timing))
                    print(f"  {shape_name} r{rank} B{batch} {method}: fwd {timing[0]:.1f} ms, "
                          f"fwd+bwd {timing[1]:.1f} ms, step {timing[2]:.1f} ms", file=sys.stderr,
                          flush=True)
    print()
    print(f"CPU {cpu_model()}, {torch.get_num_threads()} threads, CPU path {cpu_isa}, "
          f"malloc {args.malloc}" if device.type == "cpu" else
          f"{torch.cuda.get_device_name(device)}, host CPU {cpu_model()}")
    print()
    print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    return results


STEP_OPTIMIZER = {"dense-sparse": "SparseAdam"}


def print_table(results: list[Result]) -> None:
    kernel = {(r.shape, r.rank, r.batch): r for r in results if r.method == "kernel"}
    header = ("| shape | rank | batch | unique | method | fwd ms | fwd+bwd ms | step ms "
              "| kernel speed-up fwd | fwd+bwd | step |")
    print(header)
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        k = kernel.get((r.shape, r.rank, r.batch))
        ratios = [f"{mine / theirs:.2f}x" if k else "-" for mine, theirs in
                  ((r.forward_ms, k and k.forward_ms), (r.fwd_bwd_ms, k and k.fwd_bwd_ms),
                   (r.step_ms, k and k.step_ms))]
        method = f"{r.method} + {STEP_OPTIMIZER.get(r.method, 'Adam')}"
        print(f"| {r.shape} | {r.rank} | {r.batch:,} | {r.unique:,} | {method} | "
              f"{r.forward_ms:.1f} | {r.fwd_bwd_ms:.1f} | {r.step_ms:.1f} | {' | '.join(ratios)} |")


if __name__ == "__main__":
    main()
