"""The ``ttgnn`` command line.

Sub-commands::

    ttgnn info --rows N --dim D --rank R     shapes, parameters, memory, compression of a TT table
    ttgnn partition --dataset ogbn-arxiv --method ...   node order onto TT rows: quality and time
    ttgnn train --dataset ogbn-arxiv --model sage|gat --embedding tt|full ...   train a featureless GNN
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

__all__ = ["main", "build_parser"]


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints such as 55,55,56, got {text!r}") from None


def _format_bytes(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if num < 1024 or unit == "TiB":
            return f"{num:.1f} {unit}" if unit != "B" else f"{int(num)} B"
        num /= 1024
    return f"{num:.1f} TiB"


def _cmd_info(args: argparse.Namespace) -> int:
    from .shapes import TTShape

    bytes_per = 8 if args.dtype == "float64" else 4
    print(f"{'rank':>6} {'row shape':>20} {'col shape':>12} {'ranks':>20} {'params':>12} "
          f"{'TT memory':>11} {'dense memory':>13} {'compression':>12}")
    for rank in args.rank:
        shape = TTShape.build(args.rows, args.dim, rank, args.num_cores, args.row_shape, args.col_shape)
        dense = shape.num_rows * shape.dim * bytes_per
        print(f"{rank:>6} {str(list(shape.row_shape)):>20} {str(list(shape.col_shape)):>12} "
              f"{str(list(shape.ranks)):>20} {shape.num_parameters:>12,} "
              f"{_format_bytes(shape.num_parameters * bytes_per):>11} {_format_bytes(dense):>13} "
              f"{shape.compression_ratio:>11,.1f}x")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    import dataclasses
    import datetime

    from . import distributed as tdist
    from .train import TrainConfig, train

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in names})
    # Under torchrun, one process per rank (gloo on CPU; NCCL, one GPU per rank); else one process.
    with tdist.distributed(device=args.device, timeout=datetime.timedelta(minutes=args.dist_timeout)) as ctx:
        tdist.configure_logging(ctx.rank, ctx.world_size)
        metrics = train(config, rank=ctx.rank, world_size=ctx.world_size, device=ctx.device)
    if not ctx.is_main:
        return 0
    print(f"{metrics['dataset']} {metrics['model']}+{metrics['embedding']}: best valid {metrics['best_valid_acc']:.4f}"
          f" (epoch {metrics['best_epoch']}), test {metrics['test_acc']:.4f}, compression "
          f"{metrics['compression_ratio']:,.1f}x, epoch time {metrics['epoch_time']:.2f}s, "
          f"peak memory {metrics['peak_memory_mib']:.0f} MiB")
    if "correct_smooth" in metrics:
        cs = metrics["correct_smooth"]
        print(f"  with correct and smooth: valid {cs['valid_acc']:.4f}, test {cs['test_acc']:.4f}")
    return 0


def _add_train_parser(sub) -> None:
    """``ttgnn train``: defaults are the README's ogbn-arxiv settings (see ttgnn.train.TrainConfig)."""
    from .train import ORDERS, TrainConfig

    d = TrainConfig()
    p = sub.add_parser("train", help="train a featureless GNN (GraphSAGE/GAT) on a TT, full or feature input",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default=d.dataset, help="ogbn-arxiv|ogbn-products|ogbn-papers100M, a folder "
                   "name under --root (cora, citeseer, pubmed) or a path in OGB raw layout")
    p.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    p.add_argument("--cache-dir", default=None, help="cache for ogb files and node orders (default: ~/.cache/ttgnn)")
    p.add_argument("--model", choices=["sage", "gat"], default=d.model)
    p.add_argument("--embedding", choices=["tt", "full", "features"], default=d.embedding)
    p.add_argument("--dim", type=int, default=d.dim, help="embedding dimension")
    p.add_argument("--rank", type=int, default=d.rank, help="TT rank")
    p.add_argument("--num-cores", type=int, default=d.num_cores, help="TT cores (2-5)")
    p.add_argument("--row-shape", type=_int_list, default=None, help="TT row shape, e.g. 55,55,56 (default: automatic)")
    p.add_argument("--col-shape", type=_int_list, default=None, help="TT column shape, e.g. 8,4,4 (default: automatic)")
    p.add_argument("--order", choices=list(ORDERS), default=d.order, help="node order for the TT rows")
    p.add_argument("--init", choices=["ortho", "gaussian"], default=d.init, help="TT init")
    p.add_argument("--init-scale", type=float, default=d.init_scale,
                   help="std of the initial table entries (ortho TT: gain init_scale*sqrt(rows))")
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--num-layers", type=int, default=d.num_layers)
    p.add_argument("--heads", type=int, default=d.heads, help="GAT heads")
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--input-dropout", type=float, default=d.input_dropout)
    p.add_argument("--attn-dropout", type=float, default=d.attn_dropout, help="GAT attention dropout")
    p.add_argument("--norm", choices=["batch", "layer", "none"], default=d.norm)
    p.add_argument("--residual", action=argparse.BooleanOptionalAction, default=d.residual)
    p.add_argument("--mode", choices=["full", "minibatch"], default=d.mode, help="full-graph or neighbour sampling")
    p.add_argument("--fanouts", type=_int_list, default=d.fanouts, help="neighbours per layer (minibatch)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size)
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--lr", type=float, default=d.lr, help="GNN learning rate")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="GNN weight decay")
    p.add_argument("--emb-lr", type=float, default=d.emb_lr, help="embedding learning rate")
    p.add_argument("--emb-weight-decay", type=float, default=d.emb_weight_decay, help="embedding weight decay")
    p.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    p.add_argument("--label-input", action=argparse.BooleanOptionalAction, default=d.label_input,
                   help="label reuse: known training labels are node inputs (a random --label-rate of the "
                   "training nodes each epoch, the loss on the rest; every training label at evaluation; "
                   "validation and test labels never)")
    p.add_argument("--label-rate", type=float, default=d.label_rate,
                   help="share of training nodes whose labels are inputs in an epoch (with --label-input)")
    p.add_argument("--correct-smooth", action=argparse.BooleanOptionalAction, default=d.correct_smooth,
                   help="after training, also report the best model's accuracy after Correct and Smooth "
                   "(label propagation from the training nodes; strengths chosen on validation)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--num-threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--output-dir", default=None, help="checkpoint.pt and metrics.json go here")
    p.add_argument("--resume", action="store_true", help="continue from --output-dir/checkpoint.pt")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no tqdm bars")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu",
                   help="cuda: one GPU per rank (LOCAL_RANK) under torchrun, NCCL; needs a CUDA build of DGL")
    p.add_argument("--dist-timeout", type=float, default=60.0,
                   help="minutes a rank waits for the others (e.g. while rank 0 evaluates) before failing")
    p.set_defaults(func=_cmd_train)


def _cmd_partition(args: argparse.Namespace) -> int:
    """Order a dataset's nodes onto TT rows with each method; print quality figures and time."""
    import time

    from .data import default_cache_dir, load_dataset
    from .partition import hierarchical_order
    from .shapes import factor_rows

    started = time.perf_counter()
    dataset = load_dataset(args.dataset, root=args.root, cache_dir=args.cache_dir)
    load_seconds = time.perf_counter() - started
    row_shape = args.row_shape or factor_rows(dataset.num_nodes, args.num_cores)
    cache_dir = None if args.no_cache else default_cache_dir(args.cache_dir)
    print(f"{dataset.name}: {dataset.num_nodes:,} nodes, {dataset.num_edges:,} stored edges "
          f"(loaded in {load_seconds:.1f} s); row shape {list(row_shape)}")
    prefix_keys = [f"shared_prefix_{level}" for level in range(1, len(row_shape))]
    header = "".join(f"{'shared ' + str(level) + ' digit' + ('s' if level > 1 else ''):>18}"
                     for level in range(1, len(row_shape)))
    print(f"{'method':>20}{header}{'seconds':>10}{'total s':>10}")
    for method in args.method:
        started = time.perf_counter()
        order = hierarchical_order(dataset.edge_index, row_shape, method=method, seed=args.seed,
                                   num_nodes=dataset.num_nodes, cache_dir=cache_dir, progress=args.progress)
        total = time.perf_counter() - started
        figures = "".join(f"{order.quality[key]:>18.4f}" for key in prefix_keys)
        print(f"{method:>20}{figures}{order.quality['seconds']:>10.2f}{total:>10.2f}")
        if args.output:
            import numpy as np

            path = args.output if len(args.method) == 1 else f"{args.output}.{method}"
            with open(path, "wb") as fh:
                np.save(fh, order.perm)
            print(f"{'':>20}perm (node id -> TT row) written to {path}")
    return 0


def _add_partition_parser(sub) -> None:
    from .partition import METHODS

    p = sub.add_parser("partition", help="order a graph's nodes onto TT rows (hierarchical METIS and baselines)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", required=True, help="ogbn-arxiv|ogbn-products|ogbn-papers100M, a folder name "
                   "under --root (cora, citeseer, pubmed) or a path in OGB raw layout")
    p.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    p.add_argument("--cache-dir", default=None, help="cache for ogb files and node orders (default: ~/.cache/ttgnn)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached node orders")
    p.add_argument("--row-shape", type=_int_list, default=None, help="TT row shape, e.g. 55,55,56 "
                   "(default: automatic from --num-cores)")
    p.add_argument("--num-cores", type=int, default=3, help="TT cores when --row-shape is automatic (2-5)")
    p.add_argument("--method", nargs="+", choices=METHODS, default=["hierarchical-metis"],
                   help="one or more node orders to compute and compare")
    p.add_argument("--seed", type=int, default=0, help="seed for METIS and the random order")
    p.add_argument("--output", default=None, help="write perm as .npy here (suffixed by method when several)")
    p.add_argument("--progress", action="store_true", help="tqdm bars over the METIS calls")
    p.set_defaults(func=_cmd_partition)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttgnn", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="shapes, parameter count, memory and compression of a TT table",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    info.add_argument("--rows", type=int, required=True, help="number of embedding rows N")
    info.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    info.add_argument("--rank", type=int, nargs="+", default=[16], help="one or more TT ranks")
    info.add_argument("--num-cores", type=int, default=3, help="number of TT cores (2-5)")
    info.add_argument("--row-shape", type=_int_list, default=None, help="e.g. 55,55,56 (default: automatic)")
    info.add_argument("--col-shape", type=_int_list, default=None, help="e.g. 8,4,4 (default: automatic)")
    info.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    info.set_defaults(func=_cmd_info)

    _add_train_parser(sub)
    _add_partition_parser(sub)
    # Further sub-commands register here (partition, train).
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (ValueError, TypeError, IndexError, FileNotFoundError) as err:
        print(f"ttgnn {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
