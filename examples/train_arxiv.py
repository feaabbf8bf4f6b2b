"""Featureless GraphSAGE / GAT on ogbn-arxiv with a TT embedding (the README's headline run).

    TTGNN_DATA=/path/to/datasets python examples/train_arxiv.py --model sage     # 200 epochs
    python examples/train_arxiv.py --model gat --embedding full      # the full-embedding baseline (100 epochs)
    python examples/train_arxiv.py --model gat --label-input        # training labels as inputs too
    python examples/train_arxiv.py --tiny                            # a 2-epoch smoke run

ogbn-arxiv has 169,343 nodes; its node features are not used. The TT table (rank 8, row shape
55x55x56, column shape 8x4x4) has 19,392 parameters against 21.7M for a full 128-d table (1,117x).
After training, the best epoch's model is also scored after Correct and Smooth (label
propagation from the training nodes). See the README's results table for the accuracy and time
these settings reach.
"""
import argparse
import logging

from ttgnn.train import ORDERS, TrainConfig, train

EPOCHS = {"sage": 200, "gat": 100}  # the README's results table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", choices=["sage", "gat"], default="sage")
    parser.add_argument("--embedding", choices=["tt", "full"], default="tt")
    parser.add_argument("--order", choices=list(ORDERS), default="hierarchical-metis")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=None, help="(default: 200 for sage, 100 for gat)")
    parser.add_argument("--label-input", action=argparse.BooleanOptionalAction, default=False,
                        help="known training labels as node inputs (label reuse; see the README)")
    parser.add_argument("--dropout", type=float, default=TrainConfig.dropout)
    parser.add_argument("--root", default=None, help="datasets root (default: $TTGNN_DATA, else ./dataset)")
    parser.add_argument("--output-dir", default="runs/arxiv")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="2 epochs of a small model (smoke test)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    config = TrainConfig(dataset="ogbn-arxiv", root=args.root, model=args.model, embedding=args.embedding,
                         order=args.order, rank=args.rank, row_shape=[55, 55, 56], col_shape=[8, 4, 4],
                         label_input=args.label_input, dropout=args.dropout, output_dir=args.output_dir,
                         resume=args.resume)
    config.epochs = args.epochs if args.epochs is not None else EPOCHS[args.model]
    if args.tiny:
        config.epochs, config.hidden, config.num_layers, config.progress = 2, 32, 2, False
        config.correct_smooth = False
    metrics = train(config)
    print(f"best valid {metrics['best_valid_acc']:.4f}, test {metrics['test_acc']:.4f} "
          f"(epoch {metrics['best_epoch']}), {metrics['compression_ratio']:,.0f}x compression")
    if "correct_smooth" in metrics:
        cs = metrics["correct_smooth"]
        print(f"with correct and smooth: valid {cs['valid_acc']:.4f}, test {cs['test_acc']:.4f}")


if __name__ == "__main__":
    main()
