"""A TT embedding of ogbn-arxiv's size next to the dense table it replaces.

    python examples/tt_embedding_demo.py --rows 169343 --dim 128 --rank 16
"""
import argparse
import sys
import time

import torch

from ttgnn import TTNodeEmbedding
from ttgnn.cli import parse_count, report_errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows", type=parse_count, default=169_343,
                        help="rows N of the table (ogbn-arxiv's nodes; 1e5 and 100_000 are read too)")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    parser.add_argument("--rank", type=int, default=16, help="TT rank")
    parser.add_argument("--batch", type=parse_count, default=100_000,
                        help="random rows looked up, forward and backward")
    args = parser.parse_args()
    if args.batch < 1:
        parser.error(f"--batch must be >= 1, got {args.batch}")
    try:
        emb = TTNodeEmbedding(args.rows, args.dim, ranks=args.rank)
    except ValueError as err:  # a bad size or rank: one line, exit code 2
        parser.error(str(err))
    print(emb)
    print(f"parameters {emb.num_parameters:,} vs dense {args.rows * args.dim:,}: "
          f"compression {emb.compression_ratio:,.1f}x")

    def lookup() -> None:  # a batch too large for memory: one line, exit code 2
        idx = torch.randint(0, args.rows, (args.batch,))
        start = time.perf_counter()
        out = emb(idx)
        out.square().mean().backward()
        print(f"forward+backward of {args.batch:,} rows: {1e3 * (time.perf_counter() - start):.0f} ms; "
              f"output {tuple(out.shape)}, std {out.std().item():.3f}")

    return report_errors(parser.prog, lookup, trains=False, memory_hint="a smaller --dim or --batch needs less")


if __name__ == "__main__":
    sys.exit(main())
