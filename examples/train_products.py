"""Mini-batch (neighbour sampling) GraphSAGE / GAT on ogbn-products with a TT embedding.

    python examples/train_products.py             # data: --root, else $TTGNN_DATA (ogb downloads if absent)
    python examples/train_products.py --tiny      # synthetic stand-in, 1 epoch

ogbn-products has 2,449,029 nodes; a full 128-d table needs 1.25 GB, the TT table at rank 16
(row shape 135x135x135, automatic) 164,160 parameters, about 0.66 MB (``ttgnn info --rows 2449029
--rank 16``). Training uses neighbour sampling with fan-outs 15,10,5 and layer-wise full-neighbour
inference for evaluation. The node features are not used
(``--embedding features`` trains on them for comparison). Every ``ttgnn train`` option applies.
"""

import sys

from ttgnn.cli import format_summary, report_errors, run_training, script_parser, small_run, start_script
from ttgnn.data import planted_partition
from ttgnn.train import TrainConfig

PRODUCTS = TrainConfig(dataset="ogbn-products", rank=16, mode="minibatch", fanouts=[15, 10, 5], epochs=20,
                       output_dir="runs/products")


def main() -> int:
    parser = script_parser(__doc__.splitlines()[0], PRODUCTS)
    parser.add_argument("--tiny", action="store_true", help="1 epoch on a 5,000-node synthetic graph (options "
                        "given with it are kept)")
    args, config = start_script(parser)  # one layer per fan-out unless --num-layers is given
    dataset = None
    if args.tiny:
        dataset = planted_partition(5000, num_classes=10, avg_degree=10, seed=0)
        config = small_run(config, args.given, forced=("dataset",), dataset=dataset.name, epochs=1,
                           hidden=32, progress=False, dim=32, rank=4)

    def run() -> None:
        metrics = run_training(args, config, dataset)
        if metrics is not None:
            print(format_summary(metrics))

    return report_errors(parser.prog, run)


if __name__ == "__main__":
    sys.exit(main())
