"""The compiled TT-lookup kernels (ttgnn._C) against the pure-PyTorch reference.

Kernel tests fail (not skip) when ``$CI`` is set and the extension did not build. CUDA cases run
only where a GPU is present. The CPU kernels' instruction-set paths (avx512, avx2, baseline) are
each compared with the reference where the CPU runs them, and skipped with a reason elsewhere.
"""
import math
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from extension import CPU_PATHS, cpu_paths, require_kernels
from ttgnn import TTNodeEmbedding
from ttgnn.ops import (
    lookup_backend,
    tt_lookup,
    tt_lookup_backward_kernel,
    tt_lookup_kernel,
    tt_lookup_reference,
)

HAS_GPU = torch.cuda.is_available()

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")),
]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    require_kernels(request.param)
    return request.param


def make_cores(row_shape, col_shape, rank, dtype=torch.float32, device="cpu", seed=0):
    """Random cores whose table entries are O(1)."""
    generator = torch.Generator().manual_seed(seed)
    num_cores = len(row_shape)
    ranks = [1] + [rank] * (num_cores - 1) + [1]
    cores = []
    for k, (n, m) in enumerate(zip(row_shape, col_shape)):
        scale = 1.0 / math.sqrt(ranks[k])
        core = torch.randn(n, ranks[k], m, ranks[k + 1], generator=generator, dtype=torch.float64)
        cores.append((core * scale).to(dtype=dtype, device=device))
    return cores


def draw_rows(num_rows, batch, device="cpu", seed=0, distinct=None):
    """Rows with repeats; ``distinct`` limits how many different rows appear."""
    generator = torch.Generator().manual_seed(seed)
    if distinct is None:
        rows = torch.randint(0, num_rows, (batch,), generator=generator)
    else:
        pool = torch.randperm(num_rows, generator=generator)[:distinct]
        rows = pool[torch.randint(0, pool.numel(), (batch,), generator=generator)]
    return rows.to(device)


def reference_grads(cores, rows, grad_out):
    leaves = [c.detach().clone().requires_grad_(True) for c in cores]
    out = tt_lookup_reference(leaves, rows.long())
    out.backward(grad_out)
    return out.detach(), [leaf.grad for leaf in leaves]


def assert_close_f(actual, expected, dtype):
    if dtype == torch.float64:
        torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-12)
    else:
        # Sums of up to a few hundred products of O(1) values in float32.
        scale = max(expected.abs().max().item(), 1.0)
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=2e-6 * scale)


SHAPES = [
    pytest.param((6, 7), (4, 2), 3, id="2cores"),
    pytest.param((5, 6, 7), (8, 4, 4), 16, id="3cores-arxiv-like"),
    pytest.param((3, 4, 2, 5), (2, 3, 2, 2), 4, id="4cores"),
    pytest.param((2, 3, 2, 3, 2), (2, 1, 2, 3, 2), 3, id="5cores"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("row_shape,col_shape,rank", SHAPES)
def test_kernel_matches_reference(device, row_shape, col_shape, rank, dtype):
    cores = make_cores(row_shape, col_shape, rank, dtype, device)
    num_rows = math.prod(row_shape)
    rows = draw_rows(num_rows, 300, device)
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=dtype, generator=torch.Generator().manual_seed(1)).to(device)
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert out.shape == (300, math.prod(col_shape))
    assert_close_f(out, expected, dtype)
    grads = tt_lookup_backward_kernel(grad_out, cores, rows)
    assert len(grads) == len(cores)
    for grad, want, core in zip(grads, expected_grads, cores):
        assert grad.shape == core.shape and grad.dtype == core.dtype
        assert_close_f(grad, want, dtype)


def test_every_row_of_a_table(device):
    cores = make_cores((4, 5, 3), (2, 2, 3), 5, torch.float64, device)
    rows = torch.arange(60, device=device).flip(0)
    assert_close_f(tt_lookup_kernel(cores, rows), tt_lookup_reference(cores, rows), torch.float64)


def test_autograd_through_tt_lookup(device):
    cores = [c.requires_grad_(True) for c in make_cores((5, 6, 7), (4, 2, 2), 4, device=device)]
    rows = draw_rows(210, 500, device)
    out = tt_lookup(cores, rows)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(device)
    out.backward(grad_out)
    _, expected = reference_grads(cores, rows, grad_out)
    for core, want in zip(cores, expected):
        assert_close_f(core.grad, want, torch.float32)


def test_gradcheck_float64(device):
    cores = [c.requires_grad_(True) for c in make_cores((3, 4, 5), (2, 3, 2), 3, torch.float64, device)]
    rows = torch.tensor([0, 59, 7, 7, 33, 34, 0, 21, 59], device=device)
    assert torch.autograd.gradcheck(lambda *cs: tt_lookup_kernel(list(cs), rows), cores)


def test_gradgradcheck_float64(device):
    # the backward op has no derivative of its own: second-order terms through it came out zero
    cores = [c.requires_grad_(True) for c in make_cores((3, 4, 5), (2, 3, 2), 3, torch.float64, device)]
    rows = torch.tensor([0, 59, 7, 7, 33, 34, 0, 21, 59], device=device)
    assert torch.autograd.gradgradcheck(lambda *cs: tt_lookup_kernel(list(cs), rows), cores)
    # a gradient penalty through the kernel: its gradient equals the reference's
    grads = []
    for lookup in (tt_lookup_kernel, tt_lookup_reference):
        leaves = [c.detach().clone().requires_grad_(True) for c in cores]
        first = torch.autograd.grad(lookup(leaves, rows).pow(2).sum(), leaves, create_graph=True)
        grads.append(torch.autograd.grad(sum(g.pow(2).sum() for g in first), leaves))
    for got, want in zip(*grads):
        assert want.abs().max() > 0 and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_forward_mode_and_func_transforms_through_tt_lookup(device):
    # the compiled op has no forward derivative (jvp gave zero tangents) and no functorch support: under
    # a transform tt_lookup takes the reference
    from torch.autograd import forward_ad

    cores = make_cores((3, 4, 5), (2, 3, 2), 3, torch.float64, device)
    tangents = make_cores((3, 4, 5), (2, 3, 2), 3, torch.float64, device, seed=1)
    rows = torch.tensor([0, 59, 7, 7, 33], device=device)
    _, want = torch.func.jvp(lambda *cs: tt_lookup_reference(list(cs), rows), tuple(cores), tuple(tangents))
    assert want.abs().max() > 0
    _, got = torch.func.jvp(lambda *cs: tt_lookup(list(cs), rows), tuple(cores), tuple(tangents))
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(c, t) for c, t in zip(cores, tangents)]
        got = forward_ad.unpack_dual(tt_lookup(duals, rows)).tangent
    assert got is not None and torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    grad = torch.func.grad(lambda *cs: tt_lookup(list(cs), rows).pow(2).sum(), argnums=(0, 1, 2))(*cores)
    leaves = [c.clone().requires_grad_(True) for c in cores]
    expected = torch.autograd.grad(tt_lookup_reference(leaves, rows).pow(2).sum(), leaves)
    for got, want in zip(grad, expected):
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    # vmap over stacked cores (an ensemble) and over rows
    stacked = [torch.stack([c, t]) for c, t in zip(cores, tangents)]
    got = torch.func.vmap(lambda *cs: tt_lookup(list(cs), rows))(*stacked)
    assert torch.allclose(got, torch.stack([tt_lookup_reference(cores, rows), tt_lookup_reference(tangents, rows)]),
                          rtol=1e-12, atol=1e-12)
    got = torch.func.vmap(lambda r: tt_lookup(cores, r))(rows.view(5, 1))
    assert torch.allclose(got, tt_lookup_reference(cores, rows).view(5, 1, -1), rtol=1e-12, atol=1e-12)
    # outside a transform the kernel still serves
    assert torch.equal(tt_lookup(cores, rows), tt_lookup_kernel(cores, rows))


def test_opcheck(device):
    cores = make_cores((3, 4, 5), (2, 2, 2), 3, torch.float64, device)
    rows = torch.tensor([5, 1, 5, 59, 0], device=device)
    torch.library.opcheck(torch.ops.ttgnn.tt_lookup.default, ([c.requires_grad_(True) for c in cores], rows))
    grad_out = torch.randn(5, 8, dtype=torch.float64, device=device)
    torch.library.opcheck(
        torch.ops.ttgnn.tt_lookup_backward.default, (grad_out, [c.detach() for c in cores], rows)
    )


def test_compile_fullgraph_forward_backward(device):
    torch._dynamo.reset()
    emb = TTNodeEmbedding(1000, 32, ranks=4, generator=torch.Generator().manual_seed(0), device=device)
    indices = draw_rows(1000, 256, device).reshape(16, 16)
    compiled = torch.compile(emb, fullgraph=True)
    out = compiled(indices)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(device)
    out.backward(grad_out)
    expected, expected_grads = reference_grads(list(emb.cores), indices.reshape(-1), grad_out.reshape(-1, 32))
    assert_close_f(out.reshape(-1, 32), expected, torch.float32)
    for core, want in zip(emb.cores, expected_grads):
        assert_close_f(core.grad, want, torch.float32)


@pytest.mark.parametrize(
    "row_shape,col_shape,rank",
    [
        pytest.param((600, 3), (8, 4), 8, id="first-core-600-slices"),
        pytest.param((3, 700, 2), (4, 4, 2), 8, id="middle-core-700-slices"),
        pytest.param((2, 3, 1024), (4, 4, 4), 8, id="last-core-1024-slices"),
        # Last core too large to tile on the CPU (plain last step).
        pytest.param((2, 6000), (16, 6), 8, id="last-core-6000-slices-untiled"),
    ],
)
def test_cores_with_many_slices(device, row_shape, col_shape, rank):
    cores = make_cores(row_shape, col_shape, rank, torch.float32, device)
    num_rows = math.prod(row_shape)
    rows = torch.cat([draw_rows(num_rows, 400, device), torch.tensor([num_rows - 1, 0], device=device)])
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(4)).to(device)
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, torch.float32)
    grads = tt_lookup_backward_kernel(grad_out, cores, rows)
    for grad, want in zip(grads, expected_grads):
        assert_close_f(grad, want, torch.float32)
    # The row num_rows - 1 selects the big core's last slice (index >= 512): it has a gradient.
    big = row_shape.index(max(row_shape))
    assert grads[big][row_shape[big] - 1].abs().sum() > 0


@pytest.mark.parametrize("distinct", [1, 7, 200], ids=["one-row", "7-rows", "200-rows"])
def test_duplicate_heavy_batches(device, distinct):
    cores = make_cores((11, 12, 13), (4, 4, 2), 6, torch.float64, device)
    rows = draw_rows(11 * 12 * 13, 5000, device, distinct=distinct)
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5)).to(device)
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, torch.float64)
    for grad, want in zip(tt_lookup_backward_kernel(grad_out, cores, rows), expected_grads):
        assert_close_f(grad, want, torch.float64)


@pytest.mark.parametrize("dtype,dim_shape", [(torch.float32, (8, 4, 4)), (torch.float64, (4, 4, 4))],
                         ids=["f32-d128", "f64-d64"])
def test_outputs_past_the_streaming_size(device, dtype, dim_shape, contraction):
    # The CPU kernel writes outputs of 16 MiB or more with streaming stores (rows computed once,
    # then copied to every position): 40,000 rows of 512 bytes. Every row must equal the one a
    # small batch (plain stores) computes, bit for bit, and the reference. (In one contraction
    # order: under "auto" the large batch goes left to right and the small ones, sharing fewer
    # prefixes, right to left, which rounds differently.)
    cores = make_cores((30, 31, 32), dim_shape, 8, dtype, device)
    rows = draw_rows(30 * 31 * 32, 40_000, device)
    out = tt_lookup_kernel(cores, rows)
    assert out.numel() * out.element_size() >= 16 << 20
    pieces = torch.cat([tt_lookup_kernel(cores, part) for part in rows.split(1000)])
    assert torch.equal(out, pieces)
    assert_close_f(out, tt_lookup_reference(cores, rows), dtype)


def test_empty_batch(device):
    cores = [c.requires_grad_(True) for c in make_cores((4, 5, 6), (2, 2, 2), 3, device=device)]
    rows = torch.empty(0, dtype=torch.long, device=device)
    out = tt_lookup(cores, rows)
    assert out.shape == (0, 8)
    out.sum().backward()
    for core in cores:
        assert torch.equal(core.grad, torch.zeros_like(core))
    emb = TTNodeEmbedding(100, 8, ranks=2, device=device)
    assert emb(torch.empty(0, 3, dtype=torch.long, device=device)).shape == (0, 3, 8)


def test_consecutive_batches_of_one_length(device):
    # The CPU kernel recognises a batch equal to its previous one (a lookup's backward) and reuses
    # that sort: batches of the same length that differ in one row, or the same tensor changed in
    # place, or the same rows against another table size, must each be sorted afresh.
    cores = make_cores((5, 6, 7), (4, 2, 2), 3, torch.float64, device)
    other = make_cores((5, 6, 8), (4, 2, 2), 3, torch.float64, device)
    rows = draw_rows(5 * 6 * 7, 200, device)
    changed = rows.clone()
    changed[17] = (changed[17] + 1) % (5 * 6 * 7)
    grad_out = torch.randn(200, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(device)
    for batch_cores, batch in [(cores, rows), (cores, rows), (cores, changed), (cores, rows.int()),
                               (other, rows), (cores, rows)]:
        assert_close_f(tt_lookup_kernel(batch_cores, batch), tt_lookup_reference(batch_cores, batch), torch.float64)
        _, expected = reference_grads(batch_cores, batch, grad_out)
        for grad, want in zip(tt_lookup_backward_kernel(grad_out, batch_cores, batch), expected):
            assert_close_f(grad, want, torch.float64)
    inplace = rows.clone()
    tt_lookup_kernel(cores, inplace)
    inplace[:50] = inplace[:50].flip(0)
    assert_close_f(tt_lookup_kernel(cores, inplace), tt_lookup_reference(cores, inplace), torch.float64)
    bad = rows.clone()
    bad[3] = 5 * 6 * 7
    with pytest.raises((RuntimeError, IndexError)):
        tt_lookup_kernel(cores, bad)
    assert_close_f(tt_lookup_kernel(cores, rows), tt_lookup_reference(cores, rows), torch.float64)


def test_int32_rows_equal_int64(device):
    cores = make_cores((7, 8, 9), (4, 2, 2), 4, device=device)
    rows = draw_rows(7 * 8 * 9, 400, device)
    torch.testing.assert_close(tt_lookup_kernel(cores, rows.int()), tt_lookup_kernel(cores, rows), rtol=0, atol=0)
    grad_out = torch.randn(400, 16, generator=torch.Generator().manual_seed(6)).to(device)
    # Both kernels sum in a fixed order (the CUDA one without atomics): equal to the last bit.
    for a, b in zip(
        tt_lookup_backward_kernel(grad_out, cores, rows.int()), tt_lookup_backward_kernel(grad_out, cores, rows)
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cpu_backward_is_the_same_on_every_call_with_several_threads():
    # Each thread sums its chunks of rows into a private buffer and the buffers are added in
    # thread order: which chunks a thread takes must not depend on timing, or the rounding
    # changed from call to call (seen with 3 and 16 threads, 2026-11-24).
    cores = make_cores((40, 30, 25), (4, 2, 2), 4)
    rows = draw_rows(40 * 30 * 25, 60_000, "cpu")
    grad_out = torch.randn(60_000, 16, generator=torch.Generator().manual_seed(6))
    saved = torch.get_num_threads()
    try:
        for threads in (3, 4):
            torch.set_num_threads(threads)
            first = tt_lookup_backward_kernel(grad_out, cores, rows)
            for _ in range(4):
                for a, b in zip(first, tt_lookup_backward_kernel(grad_out, cores, rows)):
                    assert torch.equal(a, b)
    finally:
        torch.set_num_threads(saved)


def test_noncontiguous_inputs(device):
    cores = make_cores((4, 5, 6), (2, 3, 2), 3, torch.float64, device)
    # Same values, transposed storage.
    strided = [c.transpose(0, 2).contiguous().transpose(0, 2) for c in cores]
    assert not strided[1].is_contiguous()
    rows = draw_rows(120, 200, device)[::2]
    assert_close_f(tt_lookup_kernel(strided, rows), tt_lookup_reference(cores, rows), torch.float64)


def kernel_at_threads(cores, rows, grad_out, num_threads):
    """The CPU kernel's forward and backward with torch set to ``num_threads`` threads."""
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(num_threads)
        return tt_lookup_kernel(cores, rows), tt_lookup_backward_kernel(grad_out, cores, rows)
    finally:
        torch.set_num_threads(saved)


def test_thread_counts_agree():
    require_kernels("cpu")
    cores = make_cores((30, 31, 32), (8, 4, 4), 16)
    rows = draw_rows(30 * 31 * 32, 20000)
    grad_out = torch.randn(20000, 128, generator=torch.Generator().manual_seed(7))
    out1, grads1 = kernel_at_threads(cores, rows, grad_out, 1)
    out2, grads2 = kernel_at_threads(cores, rows, grad_out, 2)
    assert torch.equal(out1, out2)
    # Gradients sum ~20,000 rows' terms in float32, in an order that depends on how rows are
    # split among threads: compare both with the float64 result, to within float32 rounding of
    # the sum of the terms' magnitudes (the gradients of |cores| for |grad_out|).
    cores64 = [c.double() for c in cores]
    _, exact = reference_grads(cores64, rows, grad_out.double())
    _, magnitude = reference_grads([c.abs() for c in cores64], rows, grad_out.double().abs())
    for a, b, want, bound in zip(grads1, grads2, exact, magnitude):
        for got in (a, b):
            assert ((got.double() - want).abs() <= 1e-5 * bound + 1e-6).all()


def test_backend_and_fallback():
    require_kernels("cpu")
    assert lookup_backend("cpu") == "cpu-kernel"
    assert lookup_backend(torch.device("meta")) == "reference"
    # Dtypes the kernels do not cover fall back to the reference.
    cores = make_cores((4, 5), (2, 2), 3, torch.bfloat16)
    rows = torch.tensor([0, 19, 3])
    torch.testing.assert_close(tt_lookup(cores, rows), tt_lookup_reference(cores, rows))


def _lookups(monkeypatch):
    """Record which implementation each tt_lookup call ran."""
    import ttgnn.ops as ops

    ran = []
    kernel, reference = ops.tt_lookup_kernel, ops.tt_lookup_reference
    monkeypatch.setattr(ops, "tt_lookup_kernel", lambda c, r: ran.append("kernel") or kernel(c, r))
    monkeypatch.setattr(ops, "tt_lookup_reference", lambda c, r: ran.append("reference") or reference(c, r))
    return ran


@pytest.mark.parametrize("num_cores", [2, 3, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_tt_lookup_runs_the_kernel_where_it_applies(monkeypatch, num_cores, dtype, index_dtype):
    from ttgnn.ops import kernel_applies

    require_kernels("cpu")
    cores = make_cores((2,) * num_cores, (1,) * (num_cores - 1) + (2,), 2, dtype)
    rows = torch.tensor([0, 2 ** num_cores - 1, 1], dtype=index_dtype)
    assert kernel_applies(cores, rows) is True
    ran = _lookups(monkeypatch)
    out = tt_lookup(cores, rows)
    assert ran == ["kernel"]
    assert_close_f(out, tt_lookup_reference(cores, rows.long()), dtype)


@pytest.mark.parametrize("case", ["one core", "nine cores", "bfloat16", "mixed dtypes", "int16 rows", "meta"])
def test_tt_lookup_runs_the_reference_where_no_kernel_applies(monkeypatch, case):
    from ttgnn.ops import KERNEL_MAX_CORES, kernel_applies

    num_cores = {"one core": 1, "nine cores": KERNEL_MAX_CORES + 1}.get(case, 3)
    cores = make_cores((2,) * num_cores, (1,) * (num_cores - 1) + (2,), 2)
    rows = torch.tensor([0, 1, 2 ** num_cores - 1])
    if case == "bfloat16":
        cores = [c.bfloat16() for c in cores]
    elif case == "mixed dtypes":  # the first core's dtype is a kernel's, a later one's is not
        cores[2] = cores[2].double()
    elif case == "int16 rows":
        rows = rows.to(torch.int16)
    elif case == "meta":
        cores, rows = [c.to("meta") for c in cores], rows.to("meta")
    assert kernel_applies(cores, rows) is False  # a bool, also for a device without kernels
    ran = _lookups(monkeypatch)
    if case == "mixed dtypes":  # refused before either path, as the kernel refuses them
        with pytest.raises(RuntimeError, match=r"^tt_lookup: core 2 has dtype torch.float64 but core 0 has"):
            tt_lookup(cores, rows)
        assert ran == []
    else:
        assert tt_lookup(cores, rows).shape == (3, 2)
        assert ran == ["reference"]


def test_the_dense_table_is_every_row_in_digit_order_with_the_same_gradients():
    from ttgnn.ops import tt_dense_table

    for row_shape, col_shape, rank in (((6, 7), (4, 2), 3), ((3, 4, 2, 5), (2, 3, 2, 2), 4), ((2, 3, 2), (1, 1, 1), 2)):
        cores = [c.double().requires_grad_(True) for c in make_cores(row_shape, col_shape, rank, torch.float64)]
        table = tt_dense_table(cores)
        num_rows = math.prod(row_shape)
        assert table.shape == (num_rows, math.prod(col_shape))
        expected = tt_lookup_reference(cores, torch.arange(num_rows))
        torch.testing.assert_close(table, expected, rtol=1e-12, atol=1e-12)
        weights = torch.randn(table.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        grads = torch.autograd.grad((table * weights).sum(), cores)
        expected_grads = torch.autograd.grad((expected * weights).sum(), cores)
        for got, want in zip(grads, expected_grads):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ bad input


def _bad(cores, rows, match):
    with pytest.raises(RuntimeError, match=match):
        tt_lookup_kernel(cores, rows)


def test_rows_out_of_range(device):
    cores = make_cores((4, 5, 6), (2, 2, 2), 3, device=device)
    _bad(cores, torch.tensor([0, 120, 3], device=device), r"row 120 .*out of range.*120 rows \(valid: 0 to 119\)")
    _bad(cores, torch.tensor([0, -1], device=device), r"row -1 .*out of range")
    _bad(cores, torch.tensor([2**40], device=device), r"row 1099511627776 .*out of range")
    grad_out = torch.zeros(1, 8, device=device)
    with pytest.raises(RuntimeError, match=r"row 120 .*out of range"):
        tt_lookup_backward_kernel(grad_out, cores, torch.tensor([120], device=device))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_tt_lookup_refuses_rows_out_of_range_on_both_paths(dtype, monkeypatch):
    # The reference path (float16/bfloat16, or no extension) wrapped row N onto row 0 and row -1
    # onto the last: a silent wrong row where the kernel raised.
    from ttgnn import ops

    cores = [c.to(dtype) for c in make_cores((4, 5, 6), (2, 2, 2), 3)]
    for no_kernel in (False, True):
        if no_kernel:
            monkeypatch.setattr(ops, "_KERNEL_DEVICES", {"cpu": False, "cuda": False})
        for bad in (120, -1, 2**40):
            with pytest.raises(RuntimeError, match=rf"row {bad} (at position 1 )?is out of range for a TT table "
                                                   r"with 120 rows \(valid: 0 to 119\)"):
                tt_lookup(cores, torch.tensor([0, bad, 3]))
        assert tt_lookup(cores, torch.tensor([119, 0], dtype=torch.int32)).shape == (2, 8)
        assert tt_lookup(cores, torch.zeros(0, dtype=torch.long)).shape == (0, 8)


@pytest.mark.parametrize("dtype, no_kernel", [(torch.float32, False), (torch.float32, True), (torch.float16, False)],
                         ids=["f32-kernel", "f32-no-extension", "f16-reference"])
def test_tt_lookup_refuses_bad_inputs_alike_on_both_paths(dtype, no_kernel, monkeypatch):
    # The reference path (float16 cores, or no extension) truncated float rows to row numbers, read bool
    # rows as 0/1, and failed on bad shapes with errors from inside its matmuls; meta rows with real
    # cores came back as uninitialised memory from the fake kernel.
    from ttgnn import ops

    if no_kernel:
        monkeypatch.setattr(ops, "_KERNEL_DEVICES", {"cpu": False, "cuda": False})
    good = [c.to(dtype) for c in make_cores((4, 5, 6), (2, 2, 2), 3)]
    rows = torch.tensor([0, 1])
    for bad_rows, match in ((torch.tensor([2.7, 119.9]), r"rows must be an integer tensor .*got torch.float32"),
                            (torch.tensor([True, True]), r"rows must be an integer tensor .*got torch.bool"),
                            (torch.tensor([1], dtype=torch.uint64), r"rows must be an integer .*got torch.uint64"),
                            (torch.zeros(2, 2, dtype=torch.long), r"rows must be 1-D \(B,\), got shape \(2, 2\)"),
                            (torch.zeros(2, dtype=torch.long, device="meta"), r"core 0 is on cpu but rows are on meta"),
                            ([0, 1], r"rows must be a tensor, got list")):
        with pytest.raises(RuntimeError, match=rf"^tt_lookup: {match}"):
            tt_lookup(good, bad_rows)
    for cores, match in (([], r"expected at least one core, got none"),
                         ([good[0].reshape(4, 6), *good[1:]], r"core 0 must be 4-D .*got \(4, 6\)"),
                         ([good[0], good[1].double(), good[2]], r"core 1 has dtype torch.float64 but core 0 has"),
                         ([good[1], good[2]], r"core 0 .*rank dimension 1 must be 1 \(the first core starts"),
                         ([good[0], good[0]], r"core 1 has shape \(4, 1, 2, 3\); its rank dimension 1 must be 3 "
                                              r"\(core 0's"),
                         (good[:2], r"the last core has shape \(5, 3, 2, 3\); its rank dimension 3 must be 1"),
                         ([good[0], good[1][:0], good[2]], r"core 1 has an empty dimension")):
        with pytest.raises(RuntimeError, match=rf"^tt_lookup: {match}"):
            tt_lookup(cores, rows)
    for index_dtype in (torch.int16, torch.uint8, torch.int32):  # other integer rows are read as they are
        torch.testing.assert_close(tt_lookup(good, torch.tensor([7, 0], dtype=index_dtype)),
                                   tt_lookup_reference(good, torch.tensor([7, 0])))


def test_the_compiled_ops_refuse_meta_rows_with_real_cores():
    # the dispatcher picks the fake (meta) kernel by the rows, which handed back uninitialised CPU tensors
    require_kernels("cpu")
    cores = make_cores((4, 5, 6), (2, 2, 2), 3)
    rows = torch.zeros(3, dtype=torch.long, device="meta")
    with pytest.raises(RuntimeError, match=r"tt_lookup: an input is on cpu but rows are on meta"):
        torch.ops.ttgnn.tt_lookup(cores, rows)
    with pytest.raises(RuntimeError, match=r"tt_lookup_backward: an input is on cpu but rows are on meta"):
        torch.ops.ttgnn.tt_lookup_backward(torch.ones(3, 8), cores, rows)
    meta = [core.to("meta") for core in cores]  # all on meta: shapes only, as torch.compile traces them
    assert torch.ops.ttgnn.tt_lookup(meta, rows).shape == (3, 8)


def test_the_kernel_functions_say_when_the_extension_lacks_them(monkeypatch):
    from ttgnn import ops

    monkeypatch.setattr(ops, "_KERNEL_DEVICES", {"cpu": False, "cuda": False})  # as without the extension
    cores = make_cores((4, 5), (2, 2), 3)
    for call, name in ((lambda: tt_lookup_kernel(cores, torch.tensor([0])), "tt_lookup"),
                       (lambda: tt_lookup_backward_kernel(torch.ones(1, 4), cores, torch.tensor([0])),
                        "tt_lookup_backward")):
        with pytest.raises(RuntimeError, match=rf"^ttgnn.ops: the compiled op ttgnn::{name} is not available \(.*\); "
                                               r"tt_lookup takes the pure-PyTorch reference then"):
            call()


def test_bad_row_tensors(device):
    cores = make_cores((4, 5, 6), (2, 2, 2), 3, device=device)
    _bad(cores, torch.tensor([0.0, 1.0], device=device), r"rows must be int64 or int32, got Float")
    _bad(cores, torch.tensor([0, 1], dtype=torch.int16, device=device), r"rows must be int64 or int32, got Short")
    _bad(cores, torch.zeros(2, 2, dtype=torch.long, device=device), r"rows must be 1-D \(B,\), got shape \[2, 2\]")


def test_kernel_takes_max_cores_and_no_more(device):
    from ttgnn.shapes import MAX_CORES

    # the shapes' limit is the compiled kernels' kMaxCores: the largest table runs, one core more is refused
    cores = make_cores((2,) * MAX_CORES, (2,) + (1,) * (MAX_CORES - 1), 3, device=device, dtype=torch.float64)
    rows = torch.tensor([0, 2**MAX_CORES - 1, 5, 5], device=device)
    torch.testing.assert_close(tt_lookup_kernel(cores, rows), tt_lookup_reference(cores, rows), rtol=1e-12, atol=1e-12)
    _bad(cores + cores[-1:], rows, rf"expected 2 to {MAX_CORES} cores, got {MAX_CORES + 1}")


def test_bad_cores(device):
    rows = torch.tensor([0, 1], device=device)
    good = make_cores((4, 5, 6), (2, 2, 2), 3, device=device)
    _bad(good[:1], rows, r"expected 2 to 8 cores, got 1")
    _bad(good * 3, rows, r"expected 2 to 8 cores, got 9")
    mismatched = [good[0], make_cores((5, 6), (2, 2), 4, device=device)[1], good[2]]
    _bad(mismatched, rows, r"core 1 has shape \[6, 4, 2, 1\]; its rank dimension 1 must be 3")
    _bad([good[0], good[1][:, :, :, :2].contiguous(), good[2]], rows, r"core 2 .*rank dimension 1 must be 2")
    _bad([good[1], good[2]], rows, r"core 0 .*rank dimension 1 must be 1 \(the first core starts with rank 1\)")
    _bad([good[0], good[1]], rows, r"last core has shape \[5, 3, 2, 3\]; its rank dimension 3 must be 1")
    _bad([good[0].reshape(4, 6), good[1], good[2]], rows, r"core 0 must be 4-D")
    _bad([good[0], good[1].double(), good[2]], rows, r"core 1 has dtype Double but core 0 has Float")
    _bad([c.half() for c in good], rows, r"cores must be float32 or float64, got Half")
    _bad([good[0], good[1][:0], good[2]], rows, r"core 1 has an empty dimension")


def test_bad_grad_output(device):
    cores = make_cores((4, 5, 6), (2, 2, 2), 3, device=device)
    rows = torch.tensor([0, 1, 2], device=device)
    with pytest.raises(RuntimeError, match=r"grad_out must have shape \(3, 8\), got \[3, 7\]"):
        tt_lookup_backward_kernel(torch.zeros(3, 7, device=device), cores, rows)
    with pytest.raises(RuntimeError, match=r"grad_out has dtype Double but the cores have Float"):
        tt_lookup_backward_kernel(torch.zeros(3, 8, dtype=torch.float64, device=device), cores, rows)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")
def test_mixed_devices():
    require_kernels("cuda")
    cores = make_cores((4, 5, 6), (2, 2, 2), 3, device="cuda")
    with pytest.raises(RuntimeError, match=r"core 0 is on cuda:0 but rows are on cpu"):
        tt_lookup_kernel(cores, torch.tensor([0, 1]))


# ------------------------------------------------------------------ properties


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_random_shapes_match_reference(data):
    require_kernels("cpu")
    num_cores = data.draw(st.integers(2, 8), label="num_cores")
    row_shape = data.draw(st.lists(st.integers(1, 7), min_size=num_cores, max_size=num_cores), label="row_shape")
    widest = 4 if num_cores <= 5 else 2  # at most 4^5 columns
    col_shape = data.draw(st.lists(st.integers(1, widest), min_size=num_cores, max_size=num_cores),
                          label="col_shape")
    ranks = [1] + data.draw(
        st.lists(st.integers(1, 5), min_size=num_cores - 1, max_size=num_cores - 1), label="ranks"
    ) + [1]
    num_rows = math.prod(row_shape)
    rows = torch.tensor(
        data.draw(st.lists(st.integers(0, num_rows - 1), max_size=60), label="rows"), dtype=torch.long
    )
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    cores = [
        torch.randn(n, ranks[k], m, ranks[k + 1], dtype=torch.float64, generator=generator)
        for k, (n, m) in enumerate(zip(row_shape, col_shape))
    ]
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=torch.float64, generator=generator)
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, torch.float64)
    for grad, want in zip(tt_lookup_backward_kernel(grad_out, cores, rows), expected_grads):
        assert_close_f(grad, want, torch.float64)


# ------------------------------------------------------------------ instruction-set paths

PATH_CASES = [
    # (row_shape, col_shape, rank, batch): the arxiv-like case at ranks 8, 16, 32 (row widths
    # m_k r_k of 32, 64, 128: one block, and panels of a block); a wide first core (width 64);
    # widths outside the fixed set (3, 5, 6: the generic loop); 4 cores; duplicate-heavy batches
    # (the backward's gather sums them); outputs past the streaming size.
    pytest.param((5, 6, 7), (8, 4, 4), 8, 600, id="3cores-r8"),
    pytest.param((5, 6, 7), (8, 4, 4), 16, 600, id="3cores-r16"),
    pytest.param((5, 6, 7), (8, 4, 4), 32, 600, id="3cores-r32"),
    pytest.param((9, 8), (64, 2), 16, 500, id="2cores-wide"),
    pytest.param((4, 5, 6), (3, 5, 2), 6, 400, id="odd-widths"),
    pytest.param((3, 4, 2, 5), (2, 4, 2, 2), 4, 300, id="4cores"),
    pytest.param((3, 3, 3), (4, 4, 4), 16, 5000, id="duplicate-heavy"),
    pytest.param((30, 31, 32), (8, 4, 4), 8, 40_000, id="streamed-output"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("row_shape,col_shape,rank,batch", PATH_CASES)
def test_every_cpu_path_matches_reference(cpu_path, row_shape, col_shape, rank, batch, dtype):
    cores = make_cores(row_shape, col_shape, rank, dtype, seed=11)
    rows = draw_rows(math.prod(row_shape), batch, seed=12)
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=dtype, generator=torch.Generator().manual_seed(13))
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, dtype)
    grads = tt_lookup_backward_kernel(grad_out, cores, rows)
    if batch <= 1000:
        for grad, want in zip(grads, expected_grads):
            assert_close_f(grad, want, dtype)
    else:
        assert_grads_within_rounding(grads, cores, rows, grad_out, dtype)


def assert_grads_within_rounding(grads, cores, rows, grad_out, dtype):
    """Gradients that sum thousands of terms: each within rounding of the sum of its terms'
    magnitudes (the gradients of |cores| for |grad_out|) of the float64 result (see
    test_thread_counts_agree)."""
    cores64 = [c.double() for c in cores]
    _, exact = reference_grads(cores64, rows, grad_out.double())
    _, magnitude = reference_grads([c.abs() for c in cores64], rows, grad_out.double().abs())
    eps = 1e-5 if dtype == torch.float32 else 1e-12
    for grad, want, bound in zip(grads, exact, magnitude):
        assert ((grad.double() - want).abs() <= eps * bound + eps).all()


def test_cpu_paths_agree_with_each_other():
    # Each path sums in the same order; they differ only in whether products and sums are fused
    # (FMA), so their results agree to float32 rounding.
    runnable = cpu_paths()
    if len(runnable) < 2:
        pytest.skip(f"only one CPU path runs here: {runnable}")
    from ttgnn import _C

    cores = make_cores((11, 12, 13), (8, 4, 4), 16, seed=21)
    rows = draw_rows(11 * 12 * 13, 3000, seed=22)
    grad_out = torch.randn(3000, 128, generator=torch.Generator().manual_seed(23))
    previous = _C.cpu_isa()
    results = {}
    try:
        for path in runnable:
            _C.set_cpu_isa(path)
            results[path] = (tt_lookup_kernel(cores, rows), tt_lookup_backward_kernel(grad_out, cores, rows))
    finally:
        _C.set_cpu_isa(previous)
    first_out, first_grads = results[runnable[0]]
    for path in runnable[1:]:
        out, grads = results[path]
        torch.testing.assert_close(out, first_out, rtol=1e-5, atol=1e-5)
        for grad, want in zip(grads, first_grads):
            torch.testing.assert_close(grad, want, rtol=1e-4, atol=1e-3)


def test_set_cpu_isa_rejects_bad_names():
    require_kernels("cpu")
    from ttgnn import _C

    previous = _C.cpu_isa()
    assert previous in _C.cpu_isas()
    with pytest.raises(ValueError, match=r"unknown CPU path 'sse9'; valid: auto, avx512, avx2, baseline"):
        _C.set_cpu_isa("sse9")
    with pytest.raises(TypeError, match=r"set_cpu_isa expects a str, got int"):
        _C.set_cpu_isa(2)
    missing = [p for p in CPU_PATHS + ("native",) if p not in _C.cpu_isas()]
    if missing:
        with pytest.raises(RuntimeError, match=rf"cannot run the '{missing[0]}' path|has no '{missing[0]}' path"):
            _C.set_cpu_isa(missing[0])
    assert _C.cpu_isa() == previous  # a refused choice changes nothing
    assert _C.set_cpu_isa("auto") == _C.cpu_isas()[0]
    _C.set_cpu_isa(previous)


def _run_with_cpu_isa(value: str, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TTGNN_CPU_ISA=value)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


_LOOKUP_AND_REPORT = (
    "import warnings, torch\n"
    "with warnings.catch_warnings(record=True) as caught:\n"
    "    warnings.simplefilter('always')\n"
    "    from ttgnn import _C\n"
    "    from ttgnn.ops import tt_lookup_kernel\n"
    "    cores = [torch.randn(3, 1, 2, 2), torch.randn(4, 2, 2, 1)]\n"
    "    tt_lookup_kernel(cores, torch.tensor([0, 11]))\n"
    "print('PATH', _C.cpu_isa())\n"
    "print('WARNINGS', [str(w.message) for w in caught if 'TTGNN_CPU_ISA' in str(w.message)])\n"
)


def test_env_variable_picks_the_path():
    runnable = cpu_paths()
    for path in runnable:
        proc = _run_with_cpu_isa(path, _LOOKUP_AND_REPORT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"PATH {path}" in proc.stdout
        assert "WARNINGS []" in proc.stdout


def test_env_variable_with_a_path_the_cpu_lacks_warns_and_falls_back():
    runnable = cpu_paths()
    missing = [p for p in CPU_PATHS + ("native",) if p not in runnable]
    if not missing:
        pytest.skip("this CPU and build run every path")
    proc = _run_with_cpu_isa(missing[0], _LOOKUP_AND_REPORT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"PATH {runnable[0]}" in proc.stdout
    assert f"TTGNN_CPU_ISA={missing[0]}" in proc.stdout and f"run the '{runnable[0]}' path instead" in proc.stdout


def test_env_variable_with_an_unknown_name_fails_the_lookup():
    require_kernels("cpu")
    proc = _run_with_cpu_isa("avx1024", _LOOKUP_AND_REPORT)
    assert proc.returncode != 0
    assert "TTGNN_CPU_ISA: unknown CPU path 'avx1024'; valid: auto, avx512, avx2, baseline" in proc.stderr


# ------------------------------------------------------------------ contraction orders
#
# The CPU kernels contract a row's slices left to right (sharing the products of common row
# prefixes) or right to left (fewer multiply-adds per row, nothing shared), per window of sorted
# rows, whichever costs less ("auto"); set_cpu_contraction forces one.

CONTRACTIONS = ("left-to-right", "right-to-left")


@pytest.fixture(params=CONTRACTIONS)
def contraction(request):
    """Runs the test with the CPU kernels forced to one contraction order, then restores auto."""
    require_kernels("cpu")
    from ttgnn import _C

    assert _C.set_cpu_contraction(request.param) == request.param
    try:
        yield request.param
    finally:
        _C.set_cpu_contraction("auto")


def unshared_rows(row_shape, batch, seed, repeats=1):
    """``batch`` distinct rows whose two-digit prefixes are all different (the right-to-left
    case: a large table, rows from all over it), each repeated ``repeats`` times, shuffled."""
    generator = torch.Generator().manual_seed(seed)
    prefixes = row_shape[0] * row_shape[1]
    assert batch <= prefixes
    under = math.prod(row_shape[2:])
    prefix = torch.randperm(prefixes, generator=generator)[:batch]
    rows = prefix * under + torch.randint(0, under, (batch,), generator=generator)
    rows = rows.repeat(repeats)
    return rows[torch.randperm(rows.numel(), generator=generator)]


CONTRACTION_CASES = [
    # (row_shape, col_shape, rank, batch, repeats): no shared two-digit prefixes, 3 to 5 cores,
    # ranks 8 to 32, odd widths (the generic loop), duplicates (the backward's gather sums them),
    # two cores (no middle level), outputs past the streaming size.
    pytest.param((40, 40, 40), (8, 4, 4), 8, 600, 1, id="3cores-r8"),
    pytest.param((40, 40, 40), (8, 4, 4), 16, 600, 1, id="3cores-r16"),
    pytest.param((40, 40, 40), (8, 4, 4), 32, 600, 1, id="3cores-r32"),
    pytest.param((40, 40, 40), (8, 4, 4), 16, 300, 3, id="3cores-duplicates"),
    pytest.param((20, 30, 7), (3, 5, 2), 6, 500, 2, id="3cores-odd-widths"),
    pytest.param((20, 20, 3, 4), (2, 4, 2, 2), 8, 300, 1, id="4cores"),
    pytest.param((15, 16, 2, 3, 2), (2, 2, 2, 4, 2), 12, 200, 2, id="5cores"),
    pytest.param((30, 40), (16, 8), 16, 500, 1, id="2cores"),
    pytest.param((250, 200, 20), (8, 4, 4), 16, 40_000, 1, id="streamed-output"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("row_shape,col_shape,rank,batch,repeats", CONTRACTION_CASES)
def test_both_contraction_orders_match_reference(cpu_path, contraction, row_shape, col_shape, rank,
                                                 batch, repeats, dtype):
    cores = make_cores(row_shape, col_shape, rank, dtype, seed=31)
    rows = unshared_rows(row_shape, batch, seed=32, repeats=repeats)
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=dtype, generator=torch.Generator().manual_seed(33))
    expected, expected_grads = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, dtype)
    grads = tt_lookup_backward_kernel(grad_out, cores, rows)
    if rows.numel() <= 1000:
        for grad, want in zip(grads, expected_grads):
            assert_close_f(grad, want, dtype)
    else:
        assert_grads_within_rounding(grads, cores, rows, grad_out, dtype)


def mixed_rows(seed):
    """About 3,000 distinct rows sharing few two-digit prefixes (5 rows each) followed, in sorted
    order, by 3,000 rows that share none: more than one window of each kind, and one of both."""
    generator = torch.Generator().manual_seed(seed)
    # Row shape (60, 60, 60). Shared: every prefix (t0, t1) with t0 < 10, 5 rows each.
    last_digits = torch.randperm(60, generator=generator)[:5]
    shared = (torch.arange(600).repeat_interleave(5) * 60 + last_digits.repeat(600))
    # Unshared: 3,000 rows with t0 >= 10, no two with one prefix.
    unshared = unshared_rows((50, 60, 60), 3000, seed=seed + 1) + 10 * 3600
    rows = torch.cat([shared, unshared, shared[:500]])  # some duplicates too
    return rows[torch.randperm(rows.numel(), generator=generator)]


def test_mixed_batch_matches_reference(cpu_path):
    # "auto" picks an order per window of sorted rows: here left to right for the first windows,
    # right to left for the last, in one batch (and one backward).
    from ttgnn import _C

    assert _C.cpu_contraction() == "auto"
    row_shape, dtype = (60, 60, 60), torch.float32
    cores = make_cores(row_shape, (8, 4, 4), 16, dtype, seed=41)
    rows = mixed_rows(seed=42)
    assert rows.unique().numel() > 5000
    out = tt_lookup_kernel(cores, rows)
    grad_out = torch.randn(out.shape, dtype=dtype, generator=torch.Generator().manual_seed(43))
    expected, _ = reference_grads(cores, rows, grad_out)
    assert_close_f(out, expected, dtype)
    grads = tt_lookup_backward_kernel(grad_out, cores, rows)
    assert_grads_within_rounding(grads, cores, rows, grad_out, dtype)
    # The same as either order alone, to rounding (the gradients sum in other orders).
    for order in CONTRACTIONS:
        _C.set_cpu_contraction(order)
        try:
            forced_out = tt_lookup_kernel(cores, rows)
            forced_grads = tt_lookup_backward_kernel(grad_out, cores, rows)
        finally:
            _C.set_cpu_contraction("auto")
        torch.testing.assert_close(forced_out, out, rtol=1e-5, atol=1e-5)
        assert_grads_within_rounding(forced_grads, cores, rows, grad_out, dtype)


def test_gradcheck_float64_right_to_left(contraction):
    cores = [c.requires_grad_(True) for c in make_cores((3, 4, 5, 2), (2, 3, 2, 2), 3, torch.float64)]
    rows = torch.tensor([0, 119, 7, 7, 33, 34, 0, 21, 59, 118])
    assert torch.autograd.gradcheck(lambda *cs: tt_lookup_kernel(list(cs), rows), cores)


def test_thread_counts_agree_right_to_left(contraction):
    cores = make_cores((150, 160, 32), (8, 4, 4), 16)
    rows = unshared_rows((150, 160, 32), 20000, seed=51)
    grad_out = torch.randn(20000, 128, generator=torch.Generator().manual_seed(52))
    out1, grads1 = kernel_at_threads(cores, rows, grad_out, 1)
    out2, grads2 = kernel_at_threads(cores, rows, grad_out, 2)
    assert torch.equal(out1, out2)
    for grads in (grads1, grads2):
        assert_grads_within_rounding(grads, cores, rows, grad_out, torch.float32)


def test_set_cpu_contraction_rejects_bad_names():
    require_kernels("cpu")
    from ttgnn import _C

    assert _C.cpu_contraction() == "auto"
    with pytest.raises(ValueError, match=r"unknown contraction order 'sideways'; valid: auto, "
                                         r"left-to-right, right-to-left"):
        _C.set_cpu_contraction("sideways")
    with pytest.raises(TypeError, match=r"set_cpu_contraction expects a str, got int"):
        _C.set_cpu_contraction(1)
    assert _C.cpu_contraction() == "auto"  # a refused choice changes nothing


def test_auto_order_does_not_depend_on_thread_count():
    # The orders round differently, so "auto" chooses per window of sorted rows, not per thread's
    # chunk: 1,500 rows, the first half sharing prefixes, the second none, give one thread one
    # chunk and two threads two, each all of one kind.
    require_kernels("cpu")
    from ttgnn import _C

    assert _C.cpu_contraction() == "auto"
    cores = make_cores((60, 60, 60), (8, 4, 4), 16, seed=61)
    shared = torch.arange(150).repeat_interleave(5) * 60 + torch.arange(5).repeat(150)
    rows = torch.cat([shared, unshared_rows((50, 60, 60), 750, seed=62) + 10 * 3600])
    grad_out = torch.randn(rows.numel(), 128, generator=torch.Generator().manual_seed(63))
    out1, grads1 = kernel_at_threads(cores, rows, grad_out, 1)
    out2, grads2 = kernel_at_threads(cores, rows, grad_out, 2)
    assert torch.equal(out1, out2)
    assert_close_f(out1, tt_lookup_reference(cores, rows), torch.float32)
    for grads in (grads1, grads2):
        assert_grads_within_rounding(grads, cores, rows, grad_out, torch.float32)


def test_a_reference_lookup_compiles_in_one_graph():
    # int16 rows (and 16-bit cores, 1 or 9 cores, no extension) take the reference, whose range check
    # summed a generator: "Failed to convert args/kwargs to proxy" under fullgraph=True
    torch._dynamo.reset()
    cores = make_cores((3, 4), (2, 3), 3)
    lookup = torch.compile(lambda c0, c1, r: tt_lookup([c0, c1], r), fullgraph=True, backend="eager")
    rows = torch.tensor([0, 5, 11], dtype=torch.int16)
    torch.testing.assert_close(lookup(*cores, rows), tt_lookup_reference(cores, rows.long()), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="row out of range for a TT table with 12 rows"):
        lookup(*cores, torch.tensor([12], dtype=torch.int16))


def test_the_kernel_wrappers_give_no_silent_zero_derivatives(device):
    # tt_lookup_kernel under jvp gave zero tangents; tt_lookup_backward_kernel's gradients had no second
    # derivative (None, with a torch warning)
    cores = make_cores((3, 4), (2, 3), 3, torch.float64, device)
    rows = torch.tensor([0, 11, 5, 11], device=device)
    tangents = tuple(torch.randn_like(core) for core in cores)
    with pytest.raises(RuntimeError, match=r"^tt_lookup_kernel: the compiled op has no forward-mode derivative"):
        torch.func.jvp(lambda *c: tt_lookup_kernel(list(c), rows), tuple(cores), tangents)
    leaves = [core.clone().requires_grad_() for core in cores]
    grad_out = torch.randn(4, 6, dtype=torch.float64, device=device, requires_grad=True)

    def second_order(backward):
        grads = backward(grad_out, leaves, rows)
        return torch.autograd.grad(sum(g.pow(2).sum() for g in grads), [grad_out, *leaves])

    def reference_backward(out_grad, cores_, rows_):
        return torch.autograd.grad(tt_lookup_reference(cores_, rows_), cores_, out_grad, create_graph=True)

    for got, want in zip(second_order(tt_lookup_backward_kernel), second_order(reference_backward)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # outside autograd: the compiled op, its values the reference's
        plain = tt_lookup_backward_kernel(grad_out, leaves, rows)
    for got, want in zip(plain, reference_backward(grad_out, leaves, rows)):
        torch.testing.assert_close(got, want.detach(), rtol=1e-12, atol=1e-12)


def test_the_dense_table_and_the_kernel_probe_check_the_cores():
    from ttgnn.ops import kernel_applies, tt_dense_table

    # IndexError and a bare einsum error before
    with pytest.raises(RuntimeError, match=r"^tt_dense_table: expected at least one core, got none$"):
        tt_dense_table([])
    with pytest.raises(RuntimeError, match=r"^tt_dense_table: core 1 has shape \(4, 2, 3, 1\); its rank dimension 1 "
                                           r"must be 3 \(core 0's last dimension\)$"):
        tt_dense_table([torch.randn(3, 1, 2, 3), torch.randn(4, 2, 3, 1)])
    assert not kernel_applies([], torch.tensor([0]))


def test_the_fake_kernel_names_a_core_that_is_not_4d():
    require_kernels("cpu")
    torch._dynamo.reset()
    lookup = torch.compile(lambda c, r: torch.ops.ttgnn.tt_lookup.default(c, r), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match=r"tt_lookup: core 0 must be 4-D \(n_k, r_\{k-1\}, m_k, r_k\), got shape "
                                        r"\(3, 2\)"):  # a bare IndexError from the shape product before
        lookup([torch.randn(3, 2), torch.randn(4, 3, 3, 1)], torch.tensor([0]))
