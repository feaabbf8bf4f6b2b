"""The ``ttgnn`` command line.

Sub-commands::

    ttgnn info --rows N --dim D --rank R     shapes, parameters, memory, compression of a TT table
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
