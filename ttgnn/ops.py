"""The TT-lookup op: rows of a TT table from its cores.

:func:`tt_lookup_reference` is the pure-PyTorch definition (gather the core slices, batched
matmul). It is always available, differentiable by autograd, and the oracle the compiled kernels
are tested against. :func:`tt_lookup` is what :class:`ttgnn.TTNodeEmbedding` calls: it runs the
compiled kernels (``torch.ops.ttgnn.tt_lookup``, built from ``kernels/``) when the extension is
present for the cores' device and dtype, and the reference otherwise;
:func:`lookup_backend` says which.

The compiled ops are registered with a fake (meta) implementation, so ``torch.compile`` traces
them, and with an autograd formula whose backward is itself a registered op,
``torch.ops.ttgnn.tt_lookup_backward``, returning dense gradients for every core.

Core layout and digit convention: see :mod:`ttgnn.shapes`.
"""
from __future__ import annotations

import math
from typing import Sequence, Union

import torch
from torch import Tensor
from torch.autograd import forward_ad

from . import _ext
from .shapes import MAX_CORES, _index_to_digits

__all__ = [
    "tt_lookup",
    "tt_lookup_reference",
    "tt_dense_table",
    "tt_lookup_kernel",
    "tt_lookup_backward_kernel",
    "lookup_backend",
    "kernel_applies",
    "KERNEL_DTYPES",
    "KERNEL_INDEX_DTYPES",
]

#: Core dtypes the compiled kernels support (others use the reference).
KERNEL_DTYPES = (torch.float32, torch.float64)
#: Row dtypes the compiled kernels support.
KERNEL_INDEX_DTYPES = (torch.int32, torch.int64)
#: Core counts the compiled kernels support: 2 to this (:data:`ttgnn.shapes.MAX_CORES`).
KERNEL_MAX_CORES = MAX_CORES


def tt_lookup_reference(cores: Sequence[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """Materialise the TT-table rows ``rows``, in plain PyTorch.

    Args:
        cores (sequence of Tensor): ``K`` cores, core ``k`` of shape ``(n_k, r_{k-1}, m_k, r_k)``
            with ``r_0 = r_K = 1``.
        rows (LongTensor): row indices in ``[0, n_1 * ... * n_K)``, shape ``(B,)``. Not checked
            here: callers validate.

    Returns:
        Tensor of shape ``(B, m_1 * ... * m_K)``.
    """
    row_shape = [c.shape[0] for c in cores]
    digits = _index_to_digits(rows, row_shape)  # (B, K), rows validated by the caller
    batch = rows.shape[0]
    first = cores[0]
    # (B, 1, m_1, r_1) -> (B, m_1, r_1): rows of the partial product, columns its rank index.
    partial = first[digits[:, 0]].reshape(batch, first.shape[2], first.shape[3])
    width = first.shape[2]  # m_1 * ... * m_k so far (explicit: -1 is ambiguous for empty batches)
    for k in range(1, len(cores)):
        core = cores[k]
        _, r_in, m, r_out = core.shape
        slices = core[digits[:, k]].reshape(batch, r_in, m * r_out)
        width *= m
        partial = torch.bmm(partial, slices).reshape(batch, width, r_out)
    return partial.reshape(batch, width)


def tt_dense_table(cores: Sequence[torch.Tensor]) -> torch.Tensor:
    """The whole padded TT table by sequential dense contraction of the cores.

    ``O(N D r)`` work in a few large matmuls and no per-row work, differentiable by autograd: the
    cheaper way to get (nearly) all rows when no compiled kernel applies.

    Args:
        cores (sequence of Tensor): core ``k`` of shape ``(n_k, r_{k-1}, m_k, r_k)``.

    Raises:
        RuntimeError: ``cores`` do not form a TT (:func:`check_lookup_inputs`: none, not 4-D,
            ranks that do not chain, mixed dtypes or devices).

    Shapes:
        - **output:** ``(n_1 * ... * n_K, m_1 * ... * m_K)``, rows in the TT digit order of
          :mod:`ttgnn.shapes`.
    """
    cores = list(cores)
    if not cores:  # an IndexError before
        raise RuntimeError("tt_dense_table: expected at least one core, got none")
    device = cores[0].device if isinstance(cores[0], Tensor) else None
    check_lookup_inputs(cores, torch.empty(0, dtype=torch.long, device=device), "tt_dense_table")
    first = cores[0]
    partial = first.reshape(first.shape[0], first.shape[2], first.shape[3])  # (rows, cols, r)
    for core in cores[1:]:
        rows, cols, _ = partial.shape
        n, _, m, r_out = core.shape
        # out[p, t, q, c, s] = sum_r partial[p, q, r] core[t, r, c, s]
        out = torch.einsum("pqr,trcs->ptqcs", partial, core)
        partial = out.reshape(rows * n, cols * m, r_out)
    return partial.reshape(partial.shape[0], partial.shape[1])


# Which device types have compiled kernels, decided once (a plain dict lookup in the hot path,
# which torch.compile traces without a graph break).
_KERNEL_DEVICES = {device_type: _ext.has_kernel(device_type) for device_type in ("cpu", "cuda")}


def lookup_backend(device: Union[str, torch.device, None] = None) -> str:
    """Which implementation :func:`tt_lookup` uses for float32/float64 cores on ``device``.

    Args:
        device (str or torch.device, optional): device of the cores. (default: ``"cpu"``)

    Returns:
        ``"cpu-kernel"``, ``"cuda-kernel"`` (compiled ``ttgnn._C`` kernels) or ``"reference"``
        (pure PyTorch).
    """
    return _ext.backend(device)


def kernel_applies(cores: Sequence[Tensor], rows: Tensor) -> bool:
    """Whether :func:`tt_lookup` of ``rows`` from ``cores`` runs in a compiled kernel (else the reference)."""
    return _use_kernel(cores, rows)


def _use_kernel(cores: Sequence[Tensor], rows: Tensor) -> bool:
    if not len(cores):  # no TT: the lookup's own checks say so
        return False
    first = cores[0]
    return (
        _KERNEL_DEVICES.get(first.device.type, False)
        and 2 <= len(cores) <= KERNEL_MAX_CORES
        and first.dtype in KERNEL_DTYPES
        and rows.dtype in KERNEL_INDEX_DTYPES
        and all(core.dtype == first.dtype for core in cores)
        and not _transformed(cores, rows)
    )


def in_transform(*tensors: Tensor) -> bool:
    """Whether any of ``tensors`` is inside a ``torch.func`` transform (grad, jvp, vmap, ...) or
    carries a forward-mode tangent: compiled ops without a forward derivative or a batching rule
    must leave those to a reference path (here and in :mod:`ttgnn.graph_ops`)."""
    if any(torch._C._functorch.is_functorch_wrapped_tensor(t) for t in tensors):
        return True
    return forward_ad._current_level >= 0 and any(forward_ad.unpack_dual(t).tangent is not None for t in tensors)


def _transformed(cores: Sequence[Tensor], rows: Tensor) -> bool:
    """Whether the lookup is inside a transform or the cores carry forward-mode tangents
    (:func:`in_transform`): the compiled op has neither a forward derivative nor a batching rule
    (it gave zero tangents), so those lookups take the reference, which autograd and every
    transform handle."""
    if torch.compiler.is_compiling():
        return False  # traced graphs meet transforms through the fake kernel and the autograd formula
    return in_transform(*cores, rows)


def tt_lookup(cores: Sequence[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` of the TT table, through the compiled kernel when present.

    Same contract as :func:`tt_lookup_reference`; ``rows`` may be of any integer dtype but uint64.
    The inputs are checked alike on both paths: ``RuntimeError`` naming a row outside
    ``[0, n_1 * ... * n_K)``, rows that are not a 1-D integer tensor on the cores' device, or cores
    whose shapes, dtypes or devices do not chain. The kernel is used for float32/float64 cores on a
    device it was built for (see :func:`lookup_backend`), the reference otherwise (other dtypes, or
    no extension).
    """
    cores = list(cores)
    check_lookup_inputs(cores, rows)
    if not _use_kernel(cores, rows):
        # The kernel checks the row range; the reference would wrap a bad row onto a valid one.
        # a list, not a generator: torch.compile(fullgraph=True) traces math.prod of a list only
        check_in_range(rows, math.prod([core.shape[0] for core in cores]), "tt_lookup: row", "a TT table",
                       RuntimeError)
    return lookup_checked_rows(cores, rows)


def check_lookup_inputs(cores: Sequence[Tensor], rows: Tensor, op: str = "tt_lookup") -> None:
    """Raise ``RuntimeError`` unless ``cores`` form a TT (1 or more 4-D cores of one dtype and device,
    core ``k`` ``(n_k, r_{k-1}, m_k, r_k)`` with ``r_0 = r_K = 1``) and ``rows`` is a 1-D integer
    tensor on their device: what the compiled op checks, for the reference path too (which would
    truncate float rows, or fail on a bad shape with an error from deep inside). Values are not read."""
    if not cores:
        raise RuntimeError(f"{op}: expected at least one core, got none")
    if not isinstance(rows, Tensor):
        raise RuntimeError(f"{op}: rows must be a tensor, got {type(rows).__name__}")
    if rows.dtype == torch.bool or rows.is_floating_point() or rows.is_complex() or rows.dtype == torch.uint64:
        raise RuntimeError(f"{op}: rows must be an integer tensor (bool and uint64 are not), got {rows.dtype}")
    if rows.dim() != 1:
        raise RuntimeError(f"{op}: rows must be 1-D (B,), got shape {tuple(rows.shape)}")
    first = cores[0]
    rank = 1
    for k, core in enumerate(cores):
        if not isinstance(core, Tensor) or core.dim() != 4:
            shape = tuple(core.shape) if isinstance(core, Tensor) else type(core).__name__
            raise RuntimeError(f"{op}: core {k} must be 4-D (n_k, r_{{k-1}}, m_k, r_k), got {shape}")
        if core.dtype != first.dtype:
            raise RuntimeError(f"{op}: core {k} has dtype {core.dtype} but core 0 has {first.dtype}; all cores "
                               "need one dtype")
        if core.device != rows.device:
            raise RuntimeError(f"{op}: core {k} is on {core.device} but rows are on {rows.device}; all inputs "
                               "must be on one device")
        if min(core.shape) < 1:
            raise RuntimeError(f"{op}: core {k} has an empty dimension, shape {tuple(core.shape)}")
        if core.shape[1] != rank:
            start = " (the first core starts with rank 1)" if k == 0 else f" (core {k - 1}'s last dimension)"
            raise RuntimeError(f"{op}: core {k} has shape {tuple(core.shape)}; its rank dimension 1 must be "
                               f"{rank}{start}")
        rank = core.shape[3]
    if rank != 1:
        raise RuntimeError(f"{op}: the last core has shape {tuple(cores[-1].shape)}; its rank dimension 3 must be 1")


def lookup_checked_rows(cores: Sequence[Tensor], rows: Tensor) -> Tensor:
    """:func:`tt_lookup` of ``rows`` its caller has range-checked (:class:`~ttgnn.TTNodeEmbedding`
    checks every index): the reference path then skips a second check and host sync."""
    cores = list(cores)
    if _use_kernel(cores, rows):
        return tt_lookup_kernel(cores, rows)
    return tt_lookup_reference(cores, rows)


def check_in_range(values: Tensor, size: int, what: str, owner: str, error: type = IndexError) -> None:
    """Raise ``error`` unless every entry of ``values`` lies in ``[0, size)``.

    The message reads "``what`` V is out of range for ``owner`` with ``size`` rows". Under
    ``vmap`` every batch's values are checked; inside a ``torch.compile`` graph the check runs on
    the device (no host sync) and fails without naming the value; empty and meta tensors pass.
    """
    flat = values.reshape(-1)
    if flat.numel() == 0 or flat.device.type == "meta":
        return
    if flat.dtype in (torch.uint16, torch.uint32):  # torch's min/max have no kernels for these
        flat = flat.long()
    if torch.compiler.is_compiling():
        lo, hi = torch.aminmax(flat)
        torch._assert_async((lo >= 0) & (hi < size), f"{what} out of range for {owner} with {size} rows")
        return
    lo, hi = torch.aminmax(plain_values(flat))
    lo, hi = int(lo), int(hi)
    if lo < 0 or hi >= size:
        raise error(f"{what} {lo if lo < 0 else hi} is out of range for {owner} with {size} rows "
                    f"(valid: 0 to {size - 1})")


def tt_lookup_kernel(cores: Sequence[Tensor], rows: Tensor) -> Tensor:
    """The compiled lookup, ``torch.ops.ttgnn.tt_lookup``, differentiable with respect to the cores.

    Deduplicates ``rows``, computes each unique row once, reusing the product of the leading
    core slices across rows that share leading TT digits, and copies it to every position.
    Every input is checked (shapes, dtypes, devices, row range); bad input raises
    ``RuntimeError`` naming the bad value.

    Args:
        cores (sequence of Tensor): 2 to 8 float32/float64 cores, core ``k`` of shape
            ``(n_k, r_{k-1}, m_k, r_k)`` with ``r_0 = r_K = 1``, on one device.
        rows (Tensor): int32 or int64 row indices in ``[0, n_1 * ... * n_K)``.

    Raises:
        RuntimeError: bad input, as above; or the lookup is inside a ``torch.func`` transform or
            carries forward-mode tangents: the op has no forward derivative or batching rule (it gave
            zero tangents), and :func:`tt_lookup` takes the reference there.

    Shapes:
        - **rows:** ``(B,)``
        - **output:** ``(B, m_1 * ... * m_K)``
    """
    cores = list(cores)
    if _transformed(cores, rows):
        raise RuntimeError("tt_lookup_kernel: the compiled op has no forward-mode derivative or batching rule, so "
                           "it cannot run inside torch.func transforms or with forward-mode tangents; "
                           "ttgnn.ops.tt_lookup takes the pure-PyTorch reference there")
    return _compiled_op("tt_lookup")(cores, rows)


def tt_lookup_backward_kernel(grad_out: Tensor, cores: Sequence[Tensor], rows: Tensor) -> list[Tensor]:
    """Gradients of ``(grad_out * tt_lookup(cores, rows)).sum()`` for every core,
    ``torch.ops.ttgnn.tt_lookup_backward``.

    Accumulates per unique slice (each unique row and prefix once); the gradients are dense,
    shaped like the cores. Where autograd records (``grad_out`` or a core requires grad, grad mode
    on), the gradients are the reference's, as a graph: the compiled op has no derivative of its
    own, and its second-order gradients came out ``None``.

    Shapes:
        - **grad_out:** ``(B, D)``
        - **rows:** ``(B,)``
        - **output:** list of ``K`` tensors, ``(n_k, r_{k-1}, m_k, r_k)``
    """
    cores = list(cores)
    op = _compiled_op("tt_lookup_backward")
    if torch.is_grad_enabled() and (grad_out.requires_grad or any(core.requires_grad for core in cores)):
        op(grad_out.detach(), [core.detach() for core in cores], rows)  # the op's own checks of the inputs
        leaves = [core if core.requires_grad else core.detach().requires_grad_() for core in cores]
        return list(torch.autograd.grad(tt_lookup_reference(leaves, rows), leaves, grad_out, create_graph=True))
    return list(op(grad_out, cores, rows))


def _compiled_op(name: str):
    """``torch.ops.ttgnn.<name>.default``; ``RuntimeError`` saying so when the extension lacks it."""
    if not any(_KERNEL_DEVICES.values()):  # the lookup ops are loaded (for some device) or not
        why = _ext.load_error() or "the loaded ttgnn._C was built without it"
        raise RuntimeError(f"ttgnn.ops: the compiled op ttgnn::{name} is not available ({why}); tt_lookup takes "
                           "the pure-PyTorch reference then (lookup_backend() says which one runs)")
    return getattr(torch.ops.ttgnn, name).default


def plain_values(tensor: Tensor) -> Tensor:
    """The tensor that holds ``tensor``'s values outside any ``torch.func`` transform (``tensor``
    itself outside one; under ``vmap``, every batch's values), for checks that read values on the host."""
    while torch._C._functorch.is_functorch_wrapped_tensor(tensor):
        tensor = torch._C._functorch.get_unwrapped(tensor)
    return tensor


def _differentiable_grads(grad_out: Tensor, cores: Sequence[Tensor], rows: Tensor) -> list:
    """The cores' gradients of ``(grad_out * tt_lookup(cores, rows)).sum()`` as a graph in ``grad_out``
    and ``cores`` (``None`` for a core that does not require grad), for double backward."""
    wanted = [core for core in cores if core.requires_grad]
    grads = iter(torch.autograd.grad(tt_lookup_reference(cores, rows), wanted, grad_out, create_graph=True,
                                     allow_unused=True) if wanted else ())
    return [next(grads) if core.requires_grad else None for core in cores]


def _check_one_device(tensors: Sequence[Tensor], rows: Tensor, op: str) -> None:
    """The fake kernels' device check: the meta kernel also runs for meta rows with real cores (the
    dispatcher picks it by the rows), where it would hand back uninitialised real tensors."""
    for tensor in tensors:
        torch._check(tensor.device == rows.device, lambda: f"{op}: an input is on {tensor.device} but rows are on "
                     f"{rows.device}; all inputs must be on one device")


def _register_python_parts() -> None:
    """Fake (meta) kernels and the autograd formula of the compiled ops."""

    @torch.library.register_fake("ttgnn::tt_lookup")
    def _tt_lookup_fake(cores: list[Tensor], rows: Tensor) -> Tensor:
        torch._check(rows.dim() == 1, lambda: f"rows must be 1-D, got shape {tuple(rows.shape)}")
        torch._check(len(cores) >= 2, lambda: f"expected at least 2 cores, got {len(cores)}")
        for k, core in enumerate(cores):  # a 2-D core failed in the shape product with a bare IndexError
            torch._check(core.dim() == 4, lambda: f"tt_lookup: core {k} must be 4-D (n_k, r_{{k-1}}, m_k, r_k), "
                         f"got shape {tuple(core.shape)}")
        _check_one_device(cores, rows, "tt_lookup")
        dim = math.prod(core.shape[2] for core in cores)
        return cores[0].new_empty((rows.shape[0], dim))

    @torch.library.register_fake("ttgnn::tt_lookup_backward")
    def _tt_lookup_backward_fake(grad_out: Tensor, cores: list[Tensor], rows: Tensor) -> list[Tensor]:
        _check_one_device([grad_out, *cores], rows, "tt_lookup_backward")
        return [core.new_empty(core.shape) for core in cores]

    def _setup_context(ctx, inputs, output) -> None:
        cores, rows = inputs
        ctx.save_for_backward(rows, *cores)

    def _backward(ctx, grad_out: Tensor):
        rows, *cores = ctx.saved_tensors
        if torch.is_grad_enabled():
            # create_graph=True: the backward op has no derivative of its own (second-order terms
            # through it came out zero); the reference's gradients are differentiable
            return _differentiable_grads(grad_out, cores, rows), None
        grads = torch.ops.ttgnn.tt_lookup_backward.default(grad_out, cores, rows)
        return list(grads), None

    torch.library.register_autograd("ttgnn::tt_lookup", _backward, setup_context=_setup_context)


if _ext.available():
    _register_python_parts()
