"""Mini-batch (neighbour sampling) GraphSAGE / GAT on ogbn-products with a TT embedding.

    TTGNN_DATA=/path/to/datasets python examples/train_products.py      # downloads into the cache if absent
    python examples/train_products.py --tiny                            # synthetic stand-in, 1 epoch

ogbn-products has 2,449,029 nodes; a full 128-d table needs 1.25 GB, the TT table at rank 16
(row shape 135x135x135, automatic) about 0.3 MB. Training uses neighbour sampling with fan-outs
15,10,5 and layer-wise full-neighbour inference for evaluation. The node features are not used
(pass --embedding features to train on them for comparison). Not measured in this repository
(the dataset is not in the shared data folder); the --tiny mode runs the same pipeline on a
synthetic planted-partition graph.
"""
import argparse
import logging

from ttgnn.data import planted_partition
from ttgnn.train import ORDERS, TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", choices=["sage", "gat"], default="sage")
    parser.add_argument("--embedding", choices=["tt", "full", "features"], default="tt")
    parser.add_argument("--order", choices=list(ORDERS), default="hierarchical-metis")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--fanouts", default="15,10,5")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--output-dir", default="runs/products")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="1 epoch on a 5,000-node synthetic graph")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    fanouts = [int(v) for v in args.fanouts.split(",")]
    config = TrainConfig(dataset="ogbn-products", root=args.root, model=args.model, embedding=args.embedding,
                         order=args.order, rank=args.rank, mode="minibatch", fanouts=fanouts,
                         num_layers=len(fanouts), batch_size=args.batch_size, epochs=args.epochs,
                         output_dir=args.output_dir, resume=args.resume)
    dataset = None
    if args.tiny:
        dataset = planted_partition(5000, num_classes=10, avg_degree=10, seed=0)
        config.dataset, config.epochs, config.hidden, config.progress = dataset.name, 1, 32, False
        config.dim, config.rank = 32, 4
    metrics = train(config, dataset)
    print(f"best valid {metrics['best_valid_acc']:.4f}, test {metrics['test_acc']:.4f} "
          f"(epoch {metrics['best_epoch']}), {metrics['compression_ratio']:,.0f}x compression")


if __name__ == "__main__":
    main()
