"""Dropout on the CPU in a compiled kernel of ours, a drop-in for ``torch.nn.Dropout``.

torch's CPU dropout draws its mask from a Mersenne Twister one element at a time on one thread
(except on Intel CPUs, where it uses MKL). On an AMD EPYC that was 13% of a GraphSAGE + TT epoch
on ogbn-arxiv and 6% of a GAT + TT epoch. ``torch.ops.ttgnn.dropout`` (``kernels/dropout.cpp``,
``kernels/cpu/dropout_cpu.cpp``) decides each element from a hash of ``(seed, position)``: every
thread works on its own range, the mask does not depend on the thread count, and the backward
is the same op with the same seed (nothing is stored between the passes). The seed of each call
is drawn from torch's default generator, so ``torch.manual_seed`` fixes the masks as it fixes
torch's own.

The kernel runs for float32 and float64 tensors on the CPU when the ``ttgnn._C`` extension is
loaded, outside ``torch.func`` transforms and ``torch.compile`` traces, and outside
:func:`ttgnn.graph_ops.reference_only` and :func:`reference_only`; elsewhere (GPUs included)
:func:`torch.nn.functional.dropout` runs. The two draw different masks from the same seed: each
keeps an element with probability ``1 - p`` and scales it by ``1 / (1 - p)``.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _ext, graph_ops

__all__ = ["Dropout", "dropout", "available", "reference_only"]

_available: Optional[bool] = None
_switch = graph_ops.ThreadSwitch()
#: Seeds are drawn uniformly from [0, SEED_BOUND).
SEED_BOUND = 2**62


def available() -> bool:
    """Whether the loaded extension has the CPU kernel of ``torch.ops.ttgnn.dropout``."""
    global _available
    if _available is None:
        _available = _ext.has_op_kernel("dropout")
        if _available:
            _register()
    return _available


def reference_only() -> contextlib.AbstractContextManager:
    """Within this block :func:`dropout` calls torch's dropout (for tests and side-by-side
    benchmarks). It holds for the calling thread only."""
    return _switch.off()


def _applies(x: Tensor) -> bool:
    return not _switch.is_off() and available() and graph_ops.applies(x)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """:func:`torch.nn.functional.dropout` (not in place), through the compiled kernel where it
    applies (see the module's docstring).

    Args:
        x (Tensor): any shape.
        p (float, optional): probability of zeroing an element, in ``[0, 1]``. (default: ``0.5``)
        training (bool, optional): when ``False``, ``x`` is returned unchanged. (default: ``True``)

    Shapes:
        - **output:** ``x``'s shape.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0 or not _applies(x):
        return F.dropout(x, p, training)
    seed = int(torch.randint(SEED_BOUND, (), dtype=torch.int64))
    return torch.ops.ttgnn.dropout(x, p, seed)


class Dropout(nn.Dropout):
    """``torch.nn.Dropout`` whose CPU forward and backward run :func:`dropout`'s kernel. Same
    arguments, state (none) and representation; ``inplace=True`` is accepted and computes out of
    place on the kernel's path."""

    def forward(self, input: Tensor) -> Tensor:
        if self.inplace and not _applies(input):
            return F.dropout(input, self.p, self.training, inplace=True)
        return dropout(input, self.p, self.training)


def _register() -> None:
    """The fake kernel and the autograd formula of ``ttgnn::dropout`` (once, by :func:`available`)."""

    @torch.library.register_fake("ttgnn::dropout")
    def _dropout_fake(x, p, seed):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    def _setup_context(ctx, inputs, output) -> None:
        _, ctx.p, ctx.seed = inputs

    def _backward(ctx, grad: Tensor):
        # the gradient is the incoming one under the same mask and scale: the same op, same seed
        return torch.ops.ttgnn.dropout(grad, ctx.p, ctx.seed), None, None

    torch.library.register_autograd("ttgnn::dropout", _backward, setup_context=_setup_context)


available()  # decided once, at import: the fake kernel and the formula are registered before any trace
