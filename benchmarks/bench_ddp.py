"""Data-parallel training throughput: training steps per second with 1 and K ranks (torchrun, gloo).

Each configuration is a separate ``torchrun --standalone --nproc-per-node=K`` job running this file
with ``--worker``: every rank loads the graph, builds the same GraphSAGE + TT embedding model,
wraps it in DDP (:mod:`ttgnn.distributed`) and trains on its own shard of the training nodes with
neighbour sampling, ``--batch-size`` seed nodes per rank per step. After ``--warmup`` steps it
times ``--steps`` steps; a step of K ranks processes ``K * batch_size`` seed nodes.

On one CPU machine the ranks share its cores; ``--configs`` sets ranks and OpenMP threads per rank
(``OMP_NUM_THREADS``). Configurations alternate within a repeat so a busy machine affects them alike.

Usage::

    python benchmarks/bench_ddp.py --dataset ogbn-arxiv --configs 1:1 1:2 2:1
    python benchmarks/bench_ddp.py --dataset synthetic --configs 1:1 2:1 --steps 5   # no data needed
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttgnn.cli import report_errors


def _fanouts(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _config(text: str) -> tuple[int, int]:
    try:
        ranks, threads = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RANKS:THREADS such as 2:1, got {text!r}") from None
    if ranks < 1 or threads < 1:
        raise argparse.ArgumentTypeError(f"ranks and threads must be >= 1, got {text!r}")
    return ranks, threads


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset", default="ogbn-arxiv",
                        help="a ttgnn.data.load_dataset name, or 'synthetic' (planted partition, 20k nodes)")
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA)")
    parser.add_argument("--cache-dir", default=None, help="ogb processed-file cache (default: ~/.cache/ttgnn)")
    parser.add_argument("--configs", type=_config, nargs="+", default=[(1, 1), (1, 2), (2, 1)],
                        help="RANKS:THREADS_PER_RANK pairs to compare, e.g. 1:1 1:2 2:1")
    parser.add_argument("--model", choices=["sage", "gat"], default="sage")
    parser.add_argument("--embedding", choices=["tt", "full"], default="tt")
    parser.add_argument("--tt-rank", type=int, default=16, help="TT rank")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--fanouts", type=_fanouts, default=[10, 10, 10], help="neighbours per layer")
    parser.add_argument("--batch-size", type=int, default=1024, help="seed nodes per rank per step")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--repeats", type=int, default=1, help="alternating repeats of all configurations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per torchrun job")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    return parser


# ---------------------------------------------------------------------- worker (one rank)
def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.nn.functional as F

    from ttgnn import distributed as tdist
    from ttgnn.data import load_dataset, planted_partition
    from ttgnn.models import NodeInput, build_model

    import dgl

    ctx = tdist.setup("cpu")
    try:
        if args.dataset == "synthetic":
            dataset = planted_partition(20_000, num_classes=16, avg_degree=12, seed=args.seed)
        else:
            dataset = load_dataset(args.dataset, args.root, args.cache_dir)
        graph = dataset.dgl_graph()
        tdist.seed_everything(tdist.rank_seed(args.seed))
        tt_kwargs = {"ranks": args.tt_rank} if args.embedding == "tt" else {}
        node_input = NodeInput(args.embedding, dataset.num_nodes, args.dim, **tt_kwargs)
        model = build_model(args.model, node_input, dataset.num_classes, hidden=args.hidden,
                            num_layers=len(args.fanouts))
        net = tdist.wrap_model(model, ctx)
        emb_params, gnn_params = model.parameter_groups()
        optimisers = [torch.optim.Adam(emb_params, lr=0.01), torch.optim.Adam(gnn_params, lr=0.003)]
        sampler = dgl.dataloading.NeighborSampler(args.fanouts)
        labels = dataset.labels
        total = args.warmup + args.steps

        def batches():
            epoch = 0
            while True:
                tdist.seed_everything(tdist.rank_seed(args.seed, ctx.rank, epoch))
                nodes = tdist.epoch_shard(dataset.split["train"], epoch, args.seed, ctx.rank, ctx.world_size)
                loader = dgl.dataloading.DataLoader(graph, nodes, sampler, batch_size=args.batch_size,
                                                    shuffle=False, drop_last=True)
                yield from loader
                epoch += 1

        model.train()
        stream = batches()
        loss_sum = 0.0
        for step in range(total):
            if step == args.warmup:
                tdist.barrier()
                start = time.perf_counter()
            input_nodes, output_nodes, blocks = next(stream)
            loss = F.cross_entropy(net(blocks, input_nodes), labels[output_nodes.long()])
            for opt in optimisers:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            for opt in optimisers:
                opt.step()
            loss_sum += float(loss)
        tdist.barrier()
        elapsed = time.perf_counter() - start
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        sums = tdist.all_reduce_sums({"elapsed": elapsed, "peak_mib": peak_mib, "loss": loss_sum})
        if ctx.is_main:
            result = {
                "ranks": ctx.world_size,
                "threads": torch.get_num_threads(),
                "steps": args.steps,
                "seconds": sums["elapsed"] / ctx.world_size,
                "steps_per_s": args.steps / (sums["elapsed"] / ctx.world_size),
                "seed_nodes_per_s": args.steps * args.batch_size * ctx.world_size / (sums["elapsed"] / ctx.world_size),
                "rss_mib_per_rank": sums["peak_mib"] / ctx.world_size,
                "mean_loss": sums["loss"] / (ctx.world_size * total),
                "tt_parameters": node_input.num_parameters,
                "train_nodes": int(dataset.split["train"].numel()),
            }
            Path(args.result).write_text(json.dumps(result))
    finally:
        tdist.teardown()


# ---------------------------------------------------------------------- driver
def run_config(args: argparse.Namespace, ranks: int, threads: int, out: Path) -> dict:
    forwarded = ["--dataset", args.dataset, "--model", args.model, "--embedding", args.embedding,
                 "--tt-rank", str(args.tt_rank), "--dim", str(args.dim), "--hidden", str(args.hidden),
                 "--fanouts", ",".join(map(str, args.fanouts)), "--batch-size", str(args.batch_size),
                 "--warmup", str(args.warmup), "--steps", str(args.steps), "--seed", str(args.seed)]
    if args.root:
        forwarded += ["--root", args.root]
    if args.cache_dir:
        forwarded += ["--cache-dir", args.cache_dir]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
           os.path.abspath(__file__), "--worker", "--result", str(out), *forwarded]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, timeout=args.timeout, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        # a worker's own one-line error says it all; else torchrun's last words
        said = [line for line in proc.stderr.splitlines() if line.startswith(f"{Path(__file__).name}: error: ")]
        raise SystemExit(f"torchrun with {ranks} ranks failed ({proc.returncode}): "
                         + (said[0] if said else "\n" + proc.stderr[-4000:]))
    return json.loads(out.read_text())


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    for option, value, least in (("--steps", args.steps, 1), ("--warmup", args.warmup, 0),
                                 ("--repeats", args.repeats, 1), ("--batch-size", args.batch_size, 1)):
        if value < least:  # --steps 0 timed nothing and failed on an unset start time
            parser.error(f"{option} must be >= {least}, got {value}")
    if args.worker:
        worker(args)
        return
    results: dict[tuple[int, int], list[dict]] = {c: [] for c in args.configs}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for ranks, threads in args.configs:
                res = run_config(args, ranks, threads, Path(tmp) / f"r{ranks}-t{threads}-{repeat}.json")
                results[(ranks, threads)].append(res)
                print(f"repeat {repeat}: {ranks} rank(s) x {threads} thread(s): {res['steps_per_s']:.3f} steps/s",
                      file=sys.stderr)
    print(f"{args.dataset}, {args.model} + {args.embedding} (rank {args.tt_rank}), fan-outs {args.fanouts}, "
          f"batch {args.batch_size} per rank, {args.steps} timed steps, best of {args.repeats}")
    print(f"| ranks | threads/rank | steps/s | seed nodes/s | speed-up (nodes/s) | epoch estimate | RSS/rank |")
    print("|---|---|---|---|---|---|---|")
    best = {k: max(v, key=lambda r: r["steps_per_s"]) for k, v in results.items()}
    base = best[args.configs[0]]["seed_nodes_per_s"]
    for config in args.configs:
        res = best[config]
        ranks = res["ranks"]
        epoch_s = res["train_nodes"] / res["seed_nodes_per_s"]
        print(f"| {ranks} | {res['threads']} | {res['steps_per_s']:.2f} | {res['seed_nodes_per_s']:,.0f} | "
              f"{res['seed_nodes_per_s'] / base:.2f}x | {epoch_s:.0f} s | {res['rss_mib_per_rank']:,.0f} MiB |")
    if args.json:
        Path(args.json).write_text(json.dumps({f"{r}:{t}": v for (r, t), v in results.items()}, indent=2))


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
