"""Mini-batch GraphSAGE on ogbn-papers100M with a TT embedding, evaluated on sampled neighbourhoods.

    python examples/train_papers100m.py                       # data: --root, else $TTGNN_DATA (ogb downloads)
    python examples/train_papers100m.py --synthetic 12000000  # the same pipeline on a synthetic graph
    python examples/train_papers100m.py --tiny                # 1 epoch on 3,000 synthetic nodes, sampled evaluation

ogbn-papers100M has 111,059,956 nodes; a 128-d float32 table is 57 GB, the TT table at rank 16
(row shape 102x103x103x103, automatic) 0.8 MB. Training samples 15/10/5 neighbours per layer;
exact evaluation would hold ``(N, hidden)`` floats per layer, so a graph of more than 10^7 nodes
is evaluated on sampled neighbourhoods of its split nodes (``--eval-fanouts``, logged) and
Correct and Smooth is skipped. ``ttgnn plan --nodes 111059956 --avg-degree 29`` shows the memory
per process before a run. Every ``ttgnn train`` option applies.

``--synthetic N`` replaces the dataset by :func:`ttgnn.synthetic.nested_communities` (planted
nested communities, power-law degrees, 172 planted classes, papers100M's split fractions): the
whole pipeline (order, training, sampled evaluation, checkpoints) at a size this machine holds.
"""

import logging
import sys

from ttgnn.cli import (format_summary, parse_count, report_errors, run_training, script_parser, small_run,
                       start_script)
from ttgnn.train import TrainConfig

log = logging.getLogger(__name__)

PAPERS = TrainConfig(dataset="ogbn-papers100M", rank=16, hidden=128, mode="minibatch", fanouts=[15, 10, 5],
                     epochs=10, output_dir="runs/papers100m")
#: Shares of papers100M's nodes in its train / valid / test splits (1,207,179 / 125,265 / 214,338).
SPLIT_FRACTIONS = (0.01087, 0.00113, 0.00193)


def main() -> int:
    parser = script_parser(__doc__.splitlines()[0], PAPERS)
    parser.add_argument("--synthetic", type=parse_count, default=None, metavar="N",
                        help="train on a synthetic graph of N nodes instead of the dataset (1.2e7 is read too)")
    parser.add_argument("--avg-degree", type=float, default=4.0, help="mean degree of the --synthetic graph")
    parser.add_argument("--tiny", action="store_true",
                        help="1 epoch of a small model on 3,000 synthetic nodes, evaluated on sampled neighbourhoods")
    args, config = start_script(parser)  # one layer per fan-out unless --num-layers is given
    given = args.given
    if args.tiny:
        if "synthetic" in given and args.synthetic != 3000:
            log.warning("--tiny: --synthetic %s not read (the smoke run trains on 3,000 nodes)", args.synthetic)
        args.synthetic = 3000
        # a small graph would be evaluated exactly: sampled, as papers100M is
        config = small_run(config, given, epochs=1, hidden=16, dim=16, rank=4, progress=False,
                           eval_fanouts=[5] * len(config.fanouts))
    if args.synthetic is None and "avg_degree" in given:
        log.warning("--avg-degree %s: not read without --synthetic (it sets the synthetic graph's degree); ignored",
                    args.avg_degree)
    if args.synthetic is not None and "dataset" in given:  # --tiny trains on a synthetic graph too
        log.warning("--dataset %s: not read with --synthetic (the run trains on the synthetic graph); ignored",
                    args.dataset)
    if args.synthetic is not None and args.synthetic < 1000:
        parser.error(f"--synthetic needs at least 1000 nodes, got {args.synthetic}")

    def run() -> None:
        dataset = None
        if args.synthetic is not None:
            from ttgnn.synthetic import nested_communities

            sizes = tuple(max(1, round(f * args.synthetic)) for f in SPLIT_FRACTIONS)
            dataset = nested_communities(args.synthetic, args.avg_degree, num_classes=172, split_sizes=sizes,
                                         seed=config.seed, progress=config.progress)
            config.dataset = dataset.name
        metrics = run_training(args, config, dataset)
        if metrics is not None:
            print(format_summary(metrics))

    return report_errors(parser.prog, run)


if __name__ == "__main__":
    sys.exit(main())
