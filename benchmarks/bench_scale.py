"""Order and train TT GraphSAGE on a synthetic graph of papers100M's or products' size, on one machine.

Phases, each with its wall time and peak resident memory (sampled every 0.1 s from /proc):

1. ``generate``: :func:`ttgnn.synthetic.nested_communities` (streaming; planted nested
   communities, power-law degrees, planted labels);
2. ``order``: the node order onto the TT rows (``--order``, default ``hierarchical-kaminpar``);
3. ``graph``: the DGL graph (``csc``, self-loops, no edge ids: sampling needs none);
4. ``train``: ``--steps`` mini-batch steps of GraphSAGE on ``--batch-size`` seeds each, for each
   ``--embeddings`` (``tt`` and/or ``full``): loss curve, steps per second;
5. ``validate``: accuracy on the planted labels of the validation nodes against chance (the
   largest class's share), by ``ttgnn train``'s sampled evaluation
   (:func:`ttgnn.evaluation.evaluate_sampled`, the training fan-outs, ``--eval-batch-size`` nodes
   per batch).

``ttgnn plan``'s prediction for the same configuration (:func:`ttgnn.plan.plan`) is printed
beside the measured peaks.

The dense ``N x D`` float32 table is also tried (``torch.empty``): at papers100M's size it is
57 GB, and the allocation error is reported. Usage (the figures in docs/scale.md)::

    python benchmarks/bench_scale.py --nodes 111059956 --avg-degree 4 --steps 300 --json scale.json
    python benchmarks/bench_scale.py --nodes 2449029 --avg-degree 25 --embeddings tt full --epoch

The allocator set-up of :mod:`ttgnn.allocator` is applied after the order, before the graph and
training phases (``TTGNN_MALLOC=default`` turns it off).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

from ttgnn.cli import int_at_least, report_errors

log = logging.getLogger("bench_scale")


class PhaseMemory:
    """Peak resident memory per named phase (a sampling thread reading ``/proc/self/statm``)."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.phase = None
        self.peaks: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.starts: dict[str, float] = {}  # resident memory as each phase began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def rss(self) -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        if self.phase is not None:
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), self.rss() / 2**30)

    def start(self, phase: str) -> float:
        self.phase = phase
        self.starts[phase] = self.rss() / 2**30
        self.sample()
        return time.perf_counter()

    def stop(self, phase: str, started: float) -> None:
        self.sample()
        self.seconds[phase] = time.perf_counter() - started
        log.info("phase %s: %.1f s, peak RSS %.2f GiB", phase, self.seconds[phase], self.peaks.get(phase, 0))
        self.phase = None


def try_full_table(num_nodes: int, dim: int) -> dict:
    """Try to allocate the dense float32 table; its size and the error (or that it fitted)."""
    import torch

    size = num_nodes * dim * 4
    try:
        table = torch.empty(num_nodes, dim)
        del table
        return {"bytes": size, "allocated": True, "error": None}
    except RuntimeError as err:
        return {"bytes": size, "allocated": False, "error": str(err).splitlines()[0]}


def train_steps(dataset, graph, embedding: str, args, memory: PhaseMemory, result: dict) -> None:
    import dgl
    import torch
    import torch.nn.functional as F

    from ttgnn.config import TrainConfig
    from ttgnn.evaluation import evaluate_sampled
    from ttgnn.seeding import seed_everything
    from ttgnn.train import build_classifier

    config = TrainConfig(dataset=dataset.name, model="sage", embedding=embedding, dim=args.dim, rank=args.rank,
                         order=args.order, hidden=args.hidden, num_layers=len(args.fanouts), fanouts=args.fanouts,
                         batch_size=args.batch_size, mode="minibatch", cache_dir=args.cache_dir, dropout=0.0,
                         seed=args.seed, lr=args.lr, emb_lr=args.emb_lr,
                         # The same model at every size (the automatic choices switch below 10^6 nodes
                         # or with many training labels): Gaussian cores, no label input.
                         init="gaussian", label_input=False)
    seed_everything(args.seed)
    started = memory.start(f"build {embedding}")
    model = build_classifier(config, dataset)
    memory.stop(f"build {embedding}", started)
    emb_params, gnn_params = model.parameter_groups()
    optimizer = torch.optim.Adam([dict(params=gnn_params, lr=config.lr),
                                  dict(params=emb_params, lr=config.emb_lr)])
    sampler = dgl.dataloading.NeighborSampler(list(args.fanouts))
    train_nodes = dataset.split["train"].to(graph.idtype)
    loader = dgl.dataloading.DataLoader(graph, train_nodes, sampler, batch_size=args.batch_size, shuffle=True,
                                        drop_last=False, num_workers=0)
    losses, step_times = [], []
    steps = len(loader) if args.epoch else args.steps
    from tqdm.auto import tqdm

    phase = f"train {embedding}"
    started = memory.start(phase)
    model.train()
    bar = tqdm(total=steps, desc=phase, disable=not args.progress)
    done = 0
    while done < steps:
        for input_nodes, output_nodes, blocks in loader:
            t0 = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            logits = model(blocks, input_nodes.long())
            loss = F.cross_entropy(logits, dataset.labels[output_nodes.long()])
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
            step_times.append(time.perf_counter() - t0)
            done += 1
            bar.update(1)
            if done % 50 == 0:
                log.info("%s step %d: loss %.4f", embedding, done, np.mean(losses[-50:]))
            if done >= steps:
                break
    bar.close()
    memory.stop(phase, started)

    # ttgnn train's sampled evaluation (the default above 10^7 nodes), on the validation nodes only.
    del logits, loss, blocks, input_nodes, output_nodes
    phase = f"validate {embedding}"
    started = memory.start(phase)
    empty = dataset.split["valid"][:0]
    valid_only = dataclasses.replace(dataset, split={"train": empty, "valid": dataset.split["valid"], "test": empty})
    with torch.no_grad():
        valid_acc = evaluate_sampled(model, graph, valid_only, args.fanouts, batch_size=args.eval_batch_size)["valid"]
    memory.stop(phase, started)
    counts = np.bincount(dataset.labels.numpy(), minlength=dataset.num_classes)
    result[embedding] = {
        "steps": done, "steps_per_second": done / memory.seconds[f"train {embedding}"],
        "median_step_seconds": float(np.median(step_times)), "epoch_seconds": memory.seconds[f"train {embedding}"],
        "loss_first_10": float(np.mean(losses[:10])), "loss_last_10": float(np.mean(losses[-10:])),
        "loss_curve": [float(np.mean(losses[i:i + 25])) for i in range(0, len(losses), 25)],
        "valid_acc": valid_acc, "chance": float(counts.max() / counts.sum()),
        "embedding_parameters": sum(p.numel() for p in emb_params),
        "peak_rss_gib_train": memory.peaks[f"train {embedding}"],
        "peak_rss_gib_validate": memory.peaks[f"validate {embedding}"],
        "validate_rise_gib": memory.peaks[f"validate {embedding}"] - memory.starts[f"validate {embedding}"],
    }
    log.info("%s: %s", embedding, {k: v for k, v in result[embedding].items() if k != "loss_curve"})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--nodes", type=int_at_least(1), default=111_059_956, help="node count (papers100M: 111,059,956)")
    parser.add_argument("--avg-degree", type=float, default=4.0, help="edges drawn per node x 2")
    parser.add_argument("--classes", type=int, default=172, help="planted label classes")
    parser.add_argument("--order", default="hierarchical-kaminpar", help="node order (ttgnn.choices.ORDERS)")
    parser.add_argument("--embeddings", nargs="+", default=["tt"], choices=["tt", "full"])
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--fanouts", type=lambda s: [int(v) for v in s.split(",")], default=[15, 10, 5])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--eval-batch-size", type=int, default=8192,
                        help="validation nodes per batch (ttgnn train's --eval-batch-size)")
    parser.add_argument("--steps", type=int, default=300, help="training steps (ignored with --epoch)")
    parser.add_argument("--epoch", action="store_true", help="one full epoch over the training nodes")
    parser.add_argument("--train-nodes", type=int, default=None,
                        help="training nodes (default: steps x batch size, or 8%% of N with --epoch)")
    parser.add_argument("--valid-nodes", type=int, default=20_000)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--emb-lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="order cache (default: ~/.cache/ttgnn)")
    parser.add_argument("--num-threads", type=int, default=os.cpu_count(),
                        help="KaMinPar's threads for the order (one thread repeats an order exactly)")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if not args.epoch and args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    train_nodes = args.train_nodes or (int(0.08 * args.nodes) if args.epoch else args.steps * args.batch_size)
    if train_nodes + args.valid_nodes > args.nodes:  # a traceback from the generator's split check before
        parser.error(f"{train_nodes:,} training and {args.valid_nodes:,} validation nodes do not fit in --nodes "
                     f"{args.nodes:,}: lower --valid-nodes, --train-nodes or --steps x --batch-size")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    from ttgnn.data import default_cache_dir
    from ttgnn.partition import hierarchical_order
    from ttgnn.shapes import TTShape
    from ttgnn.synthetic import nested_communities

    args.cache_dir = str(default_cache_dir(args.cache_dir))  # --cache-dir, else $TTGNN_CACHE, else ~/.cache/ttgnn
    memory = PhaseMemory()
    result = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "threads": torch.get_num_threads(),
              "args": vars(args)}
    started = memory.start("generate")
    dataset = nested_communities(args.nodes, args.avg_degree, num_classes=args.classes, seed=args.seed,
                                 split_sizes=(train_nodes, args.valid_nodes, 0), progress=True)
    memory.stop("generate", started)
    csr = dataset.csr()
    result["graph"] = {"nodes": dataset.num_nodes, "entries": csr.num_entries,
                       "mean_degree": csr.num_entries / dataset.num_nodes,
                       "csr_gib": (csr.indptr.nbytes + csr.indices.nbytes) / 2**30,
                       "train_nodes": train_nodes, "valid_nodes": args.valid_nodes}
    result["full_table"] = try_full_table(args.nodes, args.dim)
    log.info("dense %d x %d float32 table: %s", args.nodes, args.dim, result["full_table"])

    if "tt" in args.embeddings and args.order != "identity":
        shape = TTShape.build(args.nodes, args.dim, args.rank, None, None, None)
        started = memory.start("order")
        order = hierarchical_order(csr, shape.row_shape, method=args.order, seed=args.seed,
                                   cache_dir=args.cache_dir, progress=args.progress,
                                   num_threads=args.num_threads)
        memory.stop("order", started)
        result["order"] = {"method": args.order, "row_shape": list(shape.row_shape),
                           "seconds": order.quality["seconds"], **{k: v for k, v in order.quality.items()
                                                                  if k.startswith("shared_prefix")}}
        del order
    # Only now: a heap that keeps what it frees would hold the generator's and the order's
    # temporaries through KaMinPar's peak (the first 1.1e8-node attempt ran out of memory there).
    from ttgnn.allocator import configure_allocator

    configure_allocator()
    started = memory.start("graph")
    graph = dataset.dgl_graph(self_loops=True, edge_ids=False)
    memory.stop("graph", started)
    from ttgnn.plan import plan

    predicted = plan(args.nodes, args.dim, args.rank, num_layers=len(args.fanouts), hidden=args.hidden,
                     num_classes=args.classes, fanouts=args.fanouts, batch_size=args.batch_size,
                     avg_degree=csr.num_entries / dataset.num_nodes, eval_fanouts=args.fanouts,
                     eval_batch_size=args.eval_batch_size)
    for embedding in args.embeddings:
        train_steps(dataset, graph, embedding, args, memory, result)
        memory_plan = predicted[embedding].memory
        result[embedding]["predicted_gib"] = {
            "training": (memory_plan["total"] - memory_plan["evaluation"]) / 2**30,
            "with_evaluation": memory_plan["total"] / 2**30,
            "evaluation_peak": predicted[embedding].details["evaluation_peak"] / 2**30}
        log.info("%s: ttgnn plan predicts %s", embedding, result[embedding]["predicted_gib"])
    result["phase_seconds"] = memory.seconds
    result["phase_peak_rss_gib"] = memory.peaks
    result["phase_start_rss_gib"] = memory.starts
    print(json.dumps({k: v for k, v in result.items() if k != "args"}, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(report_errors(Path(__file__).name, main, trains=False))
