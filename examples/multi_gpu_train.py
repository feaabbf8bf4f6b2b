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

from ttgnn.cli import format_summary, report_errors, run_training, script_parser, small_run, start_script
from ttgnn.train import TrainConfig

DEFAULTS = TrainConfig(dataset="ogbn-products", rank=16, mode="minibatch", fanouts=[15, 10, 5], epochs=20,
                       output_dir="runs/multi_gpu")


def main() -> int:
    parser = script_parser(__doc__.splitlines()[0], DEFAULTS, device="auto")
    parser.add_argument("--tiny", action="store_true",
                        help="6 epochs on a synthetic 2,000-node graph (valid accuracy about 0.9 on 2 ranks; options "
                        "given with it are kept)")
    args, config = start_script(parser)  # one layer per fan-out unless --num-layers is given
    dataset = None
    if args.tiny:
        from ttgnn.data import planted_partition

        dataset = planted_partition(2000, num_classes=8, avg_degree=10, seed=0)
        config = small_run(config, args.given, forced=("dataset",), dataset=dataset.name, order="identity",
                           fanouts=[5, 5], epochs=6, hidden=32, dim=32, batch_size=128, emb_lr=0.05, progress=False)

    def run() -> None:
        # Reads RANK/WORLD_SIZE/LOCAL_RANK from torchrun: NCCL and cuda:LOCAL_RANK on GPUs, gloo on CPU.
        metrics = run_training(args, config, dataset)
        if metrics is not None:
            print(f"{metrics['world_size']} rank(s): {format_summary(metrics)}")

    return report_errors(parser.prog, run)


if __name__ == "__main__":
    sys.exit(main())
