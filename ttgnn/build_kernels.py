"""``python -m ttgnn.build_kernels``: the compiled kernels for the running torch, built if need be.

Importing ttgnn loads the kernels (prebuilt, from the first-use cache, or compiled then; see
:mod:`ttgnn._ext`). This command says which, and where there are none (a failed or missing
build) or with ``--force``, deletes this torch's first-use build and compiles it again. The
compile runs in a child process: a process can load the kernels' library only once.

Exit status: 0 when compiled kernels load, 1 otherwise.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from typing import Optional, Sequence

import torch

from . import _ext

# What the child prints: the origin, then the library path, then the error ('' when none).
_CHILD = ("from ttgnn import _ext\n"
          "i = _ext.info()\n"
          "print(i.origin); print(i.path or ''); print(i.error or '')\n")


def _describe(info: _ext.ExtensionInfo) -> str:
    lines = [f"kernels: {info.origin}" + (f" ({info.path})" if info.path else "")]
    if info.error:
        lines.append(f"error: {info.error}")
    if info.cuda_skipped:
        lines.append(f"no CUDA kernels: {info.cuda_skipped}")
    lines += [f"note: {note}" for note in info.notes]
    if info.loaded:
        devices = [d for d in ("cpu", "cuda") if _ext.has_kernel(d)]
        lines.append(f"devices: {', '.join(devices) or 'none'}")
    lines.append(f"torch: {torch.__version__} (CUDA {torch.version.cuda or 'none'})")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ttgnn.build_kernels",
        description="Build the compiled TT-lookup kernels for the running torch, if need be, and "
                    "say where they come from.")
    parser.add_argument("--force", action="store_true",
                        help="delete this torch's first-use build and compile it again")
    args = parser.parse_args(argv)

    with warnings.catch_warnings():  # its advice is to run this command: what follows says what it finds
        warnings.simplefilter("ignore", _ext.ExtensionWarning)
        info = _ext.info()
    if info.origin == "disabled":
        print("TTGNN_NO_EXTENSION is set: the pure-PyTorch reference is used; unset it to build")
        return 1
    if info.origin == "prebuilt":
        print(_describe(info))
        if args.force:
            print("the prebuilt ttgnn._C matches this torch; to rebuild it, reinstall ttgnn "
                  "(pip install --no-build-isolation --force-reinstall ...)")
        return 0
    if info.loaded and not args.force:
        print(_describe(info))
        return 0

    build_dir = _ext.jit_build_dir()
    if build_dir is None:
        print(_describe(info))
        return 1
    _ext._remove_build(build_dir)
    print(f"compiling into {build_dir} (a few minutes) ...", flush=True)
    child = subprocess.run([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    origin, path, error = (child.stdout.splitlines() + ["", "", ""])[:3]
    print(f"kernels: {origin or 'unknown'}" + (f" ({path})" if path else ""))
    if error:
        print(f"error: {error}")
    return 0 if child.returncode == 0 and origin in ("compiled", "cache") else 1


if __name__ == "__main__":
    sys.exit(main())
