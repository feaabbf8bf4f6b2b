"""Data-parallel training of a featureless GNN with a TT embedding on several GPUs or machines.

Launch one process per GPU with torchrun; every rank holds the whole (small) TT table and the GNN,
samples its own shard of the training nodes, and DDP averages the gradients of both:

    # one machine, 4 GPUs
    torchrun --standalone --nproc-per-node=4 examples/multi_gpu_train.py --dataset ogbn-products --device cuda

    # two machines with 8 GPUs each: run on both, --node-rank 0 on the one at $HEAD
    torchrun --nnodes=2 --nproc-per-node=8 --node-rank=0 --master-addr=$HEAD --master-port=29500 \\
        examples/multi_gpu_train.py --dataset ogbn-papers100M --device cuda

    # CPU processes (gloo), e.g. to try it on a laptop; --tiny needs no dataset
    torchrun --standalone --nproc-per-node=2 examples/multi_gpu_train.py --tiny

``--max-restarts=N`` makes torchrun restart all ranks when one dies; they resume by themselves from
the last checkpoint in ``--output-dir``. The same runs work with the CLI: ``torchrun ... -m ttgnn train ...``.
"""

import sys

from ttgnn import distributed as tdist
from ttgnn.choices import DEVICES
from ttgnn.cli import format_summary, report_errors, script_parser, start_script
from ttgnn.train import TrainConfig, train

DEFAULTS = TrainConfig(dataset="ogbn-products", rank=16, mode="minibatch", fanouts=[15, 10, 5], epochs=20,
                       output_dir="runs/multi_gpu")


def main() -> int:
    parser = script_parser(__doc__.splitlines()[0], DEFAULTS)
    parser.add_argument("--device", choices=DEVICES, default="auto")
    parser.add_argument("--tiny", action="store_true",
                        help="6 epochs on a synthetic 2,000-node graph (valid accuracy about 0.9 on 2 ranks)")
    args, config = start_script(parser)
    config.num_layers = len(config.fanouts)
    dataset = None
    if args.tiny:
        from ttgnn.data import planted_partition

        dataset = planted_partition(2000, num_classes=8, avg_degree=10, seed=0)
        config.dataset, config.order, config.fanouts, config.num_layers = "planted", "identity", [5, 5], 2
        config.epochs, config.hidden, config.dim, config.batch_size, config.emb_lr = 6, 32, 32, 128, 0.05
        config.progress = False

    def run() -> None:
        # Reads RANK/WORLD_SIZE/LOCAL_RANK from torchrun: NCCL and cuda:LOCAL_RANK on GPUs, gloo on CPU.
        with tdist.distributed(device=args.device) as ctx:
            tdist.configure_logging()  # other ranks log warnings only
            metrics = train(config, dataset, device=ctx.device)
        if ctx.is_main:
            print(f"{ctx.world_size} rank(s): {format_summary(metrics)}")

    return report_errors(parser.prog, run)


if __name__ == "__main__":
    sys.exit(main())
