"""Data-parallel training of a featureless GNN with a TT embedding on several GPUs or machines.

Launch one process per GPU with torchrun; every rank holds the whole (small) TT table and the GNN,
samples its own shard of the training nodes, and DDP averages the gradients of both:

    # one machine, 4 GPUs (needs a CUDA build of DGL)
    torchrun --standalone --nproc-per-node=4 examples/multi_gpu_train.py --dataset ogbn-products --device cuda

    # two machines with 8 GPUs each: run on both, --node-rank 0 on the one at $HEAD
    torchrun --nnodes=2 --nproc-per-node=8 --node-rank=0 --master-addr=$HEAD --master-port=29500 \\
        examples/multi_gpu_train.py --dataset ogbn-papers100M --device cuda

    # CPU processes (gloo), e.g. to try it on a laptop; --tiny needs no dataset
    torchrun --standalone --nproc-per-node=2 examples/multi_gpu_train.py --tiny

``--max-restarts=N`` makes torchrun restart all ranks when one dies; they resume by themselves from
the last checkpoint in ``--output-dir``. The same runs work with the CLI: ``torchrun ... -m ttgnn.cli train ...``.
"""
import argparse
import logging

from ttgnn import distributed as tdist
from ttgnn.train import ORDERS, TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset", default="ogbn-products")
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--model", choices=["sage", "gat"], default="sage")
    parser.add_argument("--embedding", choices=["tt", "full"], default="tt")
    parser.add_argument("--order", choices=list(ORDERS), default="hierarchical-metis")
    parser.add_argument("--rank", type=int, default=16, help="TT rank")
    parser.add_argument("--fanouts", default="15,10,5", help="neighbours per layer")
    parser.add_argument("--batch-size", type=int, default=1024, help="training nodes per rank per step")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    parser.add_argument("--output-dir", default="runs/multi_gpu")
    parser.add_argument("--resume", action="store_true", help="continue from --output-dir/checkpoint.pt")
    parser.add_argument("--tiny", action="store_true",
                        help="6 epochs on a synthetic 2,000-node graph (valid accuracy 0.92 on 2 ranks)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    fanouts = [int(v) for v in args.fanouts.split(",")]
    config = TrainConfig(dataset=args.dataset, root=args.root, model=args.model, embedding=args.embedding,
                         order=args.order, rank=args.rank, mode="minibatch", fanouts=fanouts,
                         num_layers=len(fanouts), batch_size=args.batch_size, epochs=args.epochs,
                         output_dir=args.output_dir, resume=args.resume)
    dataset = None
    if args.tiny:
        from ttgnn.data import planted_partition

        dataset = planted_partition(2000, num_classes=8, avg_degree=10, seed=0)
        config.dataset, config.order, config.fanouts, config.num_layers = "planted", "identity", [5, 5], 2
        config.epochs, config.hidden, config.dim, config.batch_size, config.emb_lr = 6, 32, 32, 128, 0.05
        config.progress = False

    # Reads RANK/WORLD_SIZE/LOCAL_RANK from torchrun: NCCL and cuda:LOCAL_RANK on GPUs, gloo on CPU.
    with tdist.distributed(device=args.device) as ctx:
        tdist.configure_logging()  # other ranks log warnings only
        metrics = train(config, dataset, device=ctx.device)
    if ctx.is_main:
        print(f"{ctx.world_size} rank(s): best valid {metrics['best_valid_acc']:.4f}, test {metrics['test_acc']:.4f} "
              f"(epoch {metrics['best_epoch']}), {metrics['compression_ratio']:,.0f}x compression")


if __name__ == "__main__":
    main()
