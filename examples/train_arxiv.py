"""Featureless GraphSAGE / GAT on ogbn-arxiv with a TT embedding (the README's headline run).

    python examples/train_arxiv.py --model sage                    # data: --root, else $TTGNN_DATA
    python examples/train_arxiv.py --model gat --embedding full    # the full-embedding baseline
    python examples/train_arxiv.py --no-label-input                # without training labels as inputs
    python examples/train_arxiv.py --tiny                          # a 2-epoch smoke run

ogbn-arxiv has 169,343 nodes; its node features are not used. The TT table (rank 8, row shape
55x55x56, column shape 8x4x4) has 19,392 parameters against 21.7M for a full 128-d table (1,118x).
Known training labels are inputs by default (54% of arxiv's nodes are training nodes). After
training, the best epoch's model is also scored after Correct and Smooth (label propagation from
the training nodes). Every ``ttgnn train`` option applies (``--help``).
"""

import sys

from ttgnn.cli import format_summary, report_errors, run_training, script_parser, small_run, start_script
from ttgnn.train import TrainConfig

ARXIV = TrainConfig(dataset="ogbn-arxiv", rank=8, row_shape=[55, 55, 56], col_shape=[8, 4, 4], epochs=200,
                    output_dir="runs/arxiv")


def main() -> int:
    parser = script_parser(__doc__.splitlines()[0], ARXIV)
    parser.add_argument("--tiny", action="store_true", help="2 epochs of a small model (smoke test; options given "
                        "with it are kept)")
    args, config = start_script(parser)
    if args.tiny:
        config = small_run(config, args.given, epochs=2, hidden=32, num_layers=2, progress=False,
                           correct_smooth=False)

    def run() -> None:
        metrics = run_training(args, config)
        if metrics is not None:
            print(format_summary(metrics))

    return report_errors(parser.prog, run)


if __name__ == "__main__":
    sys.exit(main())
