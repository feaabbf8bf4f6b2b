"""ttgnn.dropout: the compiled CPU dropout against its contract (keep probability, scale, the
same mask forward and backward, seeding by torch's generator) and torch's dropout where ours
does not apply. Fails (not skips) under ``$CI`` when the extension did not build."""
import math

import numpy as np
import pytest
import torch
from torch import nn

from extension import require_kernels
from ttgnn import dropout as drop
from ttgnn import graph_ops


@pytest.fixture(autouse=True)
def _kernel():
    require_kernels("cpu")
    assert drop.available(), "ttgnn._C loaded without the dropout op: rebuild it"


def _count_kernel_calls(monkeypatch):
    calls = []
    op = torch.ops.ttgnn.dropout

    class Counting:
        def __call__(self, *args):
            calls.append(args[1:])
            return op(*args)

    monkeypatch.setattr(drop.torch.ops.ttgnn, "dropout", Counting())
    return calls


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_element_is_kept_with_probability_one_minus_p_and_scaled(p, dtype):
    n = 1_000_001  # odd: the last element has no pair-mate
    x = torch.rand(n, dtype=dtype) + 0.5
    out = torch.ops.ttgnn.dropout(x, p, 12345)
    kept = out != 0
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * sigma
    torch.testing.assert_close(out[kept], x[kept] * (1 / (1 - p)), rtol=0, atol=0)
    assert out.dtype == dtype and out.shape == x.shape


def _documented_keep(numel: int, p: float, seed: int) -> torch.Tensor:
    """The mask of kernels/dropout.h in numpy: pair k's 64 bits are SplitMix64's output of
    seed + (k + 1) * gamma; element 2k is kept when the low half is >= p * 2^32, 2k + 1 the high."""
    k = np.arange((numel + 1) // 2, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (k + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    halves = np.stack([z & np.uint64(0xFFFFFFFF), z >> np.uint64(32)], axis=1).reshape(-1)[:numel]
    return torch.from_numpy(halves >= np.uint64(math.floor(p * 2**32)))


def test_every_cpu_path_draws_the_documented_mask(cpu_path):
    for numel, p, seed in ((100_001, 0.3, 5), (4096, 0.5, 2**62 - 1), (1, 0.9, 0), (7, 0.0, 3)):
        out = torch.ops.ttgnn.dropout(torch.ones(numel, dtype=torch.float64), p, seed)
        assert torch.equal(out != 0, _documented_keep(numel, p, seed)), (cpu_path, numel, p, seed)


def test_decisions_are_independent_across_positions_and_seeds():
    n = 1_000_000
    ones = torch.ones(n)
    masks = [(torch.ops.ttgnn.dropout(ones, 0.5, seed) != 0).double() for seed in (1, 2, 2**61 + 7)]
    bound = 5 / math.sqrt(n)

    def corr(a, b):
        return torch.corrcoef(torch.stack([a, b]))[0, 1].item()

    a = masks[0]
    assert abs(corr(a[0::2], a[1::2])) < 2 * bound  # the two halves of one draw
    assert abs(corr(a[1:-1:2], a[2::2])) < 2 * bound  # neighbours from two draws
    assert abs(corr(a[:-128], a[128:])) < bound  # one row of 128 apart
    assert abs(corr(masks[0], masks[1])) < bound and abs(corr(masks[1], masks[2])) < bound
    assert not torch.equal(masks[0], masks[1])


def test_the_same_seed_gives_the_same_mask_on_any_thread_count():
    x = torch.randn(300_001)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(torch.ops.ttgnn.dropout(x, 0.3, 99))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(results[0], other) for other in results[1:])


def test_seeds_come_from_torchs_generator(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    x = torch.randn(1000)
    torch.manual_seed(0)
    first = drop.dropout(x, 0.4)
    second = drop.dropout(x, 0.4)  # the generator has moved on: another mask
    torch.manual_seed(0)
    again = drop.dropout(x, 0.4)
    assert torch.equal(first, again) and not torch.equal(first, second)
    assert len(calls) == 3 and all(0 <= seed < drop.SEED_BOUND for _, seed in calls)


def test_backward_multiplies_by_the_same_mask_and_scale():
    x = (torch.rand(64, 128) + 0.5).requires_grad_()
    grad = torch.randn(64, 128)
    torch.manual_seed(3)
    out = drop.dropout(x, 0.25)
    out.backward(grad)
    torch.testing.assert_close(x.grad, grad * (out.detach() != 0) * (1 / 0.75), rtol=0, atol=0)
    x64 = torch.randn(9, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: torch.ops.ttgnn.dropout(v, 0.3, 17), (x64,))
    assert torch.autograd.gradgradcheck(lambda v: torch.ops.ttgnn.dropout(v, 0.3, 17), (x64,))


def test_a_strided_input_is_taken_in_row_major_order_and_nan_stays_nan():
    x = torch.randn(50, 30)
    strided, contiguous = torch.ops.ttgnn.dropout(x.t(), 0.5, 8), torch.ops.ttgnn.dropout(x.t().contiguous(), 0.5, 8)
    torch.testing.assert_close(strided, contiguous, rtol=0, atol=0)
    nan = torch.full((1000,), float("nan"))
    assert torch.ops.ttgnn.dropout(nan, 0.5, 1).isnan().all()  # a dropped NaN is NaN * 0, as in torch


def test_the_op_passes_torch_library_opcheck():
    torch.library.opcheck(torch.ops.ttgnn.dropout, (torch.randn(5, 6, requires_grad=True), 0.3, 5))
    torch.library.opcheck(torch.ops.ttgnn.dropout, (torch.randn(0, 3), 0.5, 1))


def test_bad_input_is_refused_by_name():
    with pytest.raises(RuntimeError, match=r"ttgnn::dropout: p must lie in \[0, 1\), got 1"):
        torch.ops.ttgnn.dropout(torch.randn(3), 1.0, 0)
    with pytest.raises(RuntimeError, match="ttgnn::dropout: x must be float32 or float64, got Long"):
        torch.ops.ttgnn.dropout(torch.arange(3), 0.5, 0)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got -0.1"):
        drop.dropout(torch.randn(3), -0.1)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        drop.Dropout(1.5)


def test_the_module_is_a_drop_in_for_nn_dropout(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    module, theirs = drop.Dropout(0.3), nn.Dropout(0.3)
    assert isinstance(module, nn.Dropout) and repr(module) == repr(theirs) and module.state_dict() == {}
    x = torch.randn(40, 8)
    assert module(x).shape == x.shape and len(calls) == 1
    module.eval()
    assert module(x) is x
    module.train()
    assert drop.Dropout(0.0)(x) is x
    assert not drop.Dropout(1.0)(x).any()
    inplace = x.clone()
    out = drop.Dropout(0.5, inplace=True)(inplace)
    assert len(calls) == 2 and ((out == 0) | (out == 2 * x)).all()


def test_torchs_dropout_runs_where_the_kernel_does_not_apply(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    x = torch.randn(100, 4)
    for other in (x.bfloat16(), x.half()):
        assert drop.dropout(other, 0.5).dtype == other.dtype
    with drop.reference_only():
        drop.dropout(x, 0.5)
    with graph_ops.reference_only():
        drop.dropout(x, 0.5)
    # torch.func: torch's dropout has the batching rules; the gradient is still the mask's
    torch.manual_seed(1)
    grad = torch.func.grad(lambda v: drop.dropout(v, 0.5).sum())(x)
    assert ((grad == 0) | (grad == 2)).all() and 0 < (grad == 0).sum() < x.numel()
    compiled = torch.compile(lambda v: drop.dropout(v, 0.5), backend="eager", fullgraph=True)(x)
    assert ((compiled == 0) | (compiled == 2 * x)).all()
    assert calls == []
    drop.dropout(x, 0.5)
    assert len(calls) == 1


def test_the_models_dropouts_are_ours():
    from ttgnn.layers import TensorGATConv, TensorSAGEConv
    from ttgnn.models import GAT, GraphSAGE

    tensor_backend = [TensorGATConv(8, 4, 2, feat_drop=0.1, attn_drop=0.1), TensorSAGEConv(8, 4, feat_drop=0.1),
                      GraphSAGE(8, 8, 4, num_layers=2, backend="torch"),
                      GAT(8, 8, 4, num_layers=2, heads=2, backend="torch")]
    dropouts = [m for module in tensor_backend for m in module.modules() if isinstance(m, nn.Dropout)]
    assert len(dropouts) == 3 + (2 + 2) + (2 + 2 * 2)  # the layers', each model's two and its layers'
    assert all(isinstance(m, drop.Dropout) for m in dropouts)
    dgl_backend = GraphSAGE(8, 8, 4, num_layers=2, backend="dgl")  # DGL's layers keep their own
    assert isinstance(dgl_backend.dropout, drop.Dropout) and isinstance(dgl_backend.input_dropout, drop.Dropout)


def test_a_build_without_the_op_leaves_torchs_dropout(monkeypatch):
    # a ttgnn._C built before the op existed does not define it: torch raises when asked for its
    # kernel, which made importing ttgnn.models fail
    from ttgnn import _ext

    assert _ext.has_op_kernel("dropout") and not _ext.has_op_kernel("no_such_op")
    monkeypatch.setattr(drop, "_available", None)
    monkeypatch.setattr(_ext, "has_op_kernel", lambda name, key="CPU": name != "dropout")
    assert not drop.available()
    calls = _count_kernel_calls(monkeypatch)
    out = drop.Dropout(0.5)(torch.ones(1000))
    assert calls == [] and ((out == 0) | (out == 2)).all()
