import math
import re

import pytest
import torch

from messages import logged
from ttgnn import TTNodeEmbedding
import ttgnn.init as tt_init
from ttgnn.init import gaussian_core_std, orthogonal_, tt_svd
from ttgnn.shapes import TTShape


@pytest.mark.parametrize(
    "num_rows, dim, ranks, num_cores, target",
    [(169_343, 128, 16, 3, 1.0), (50_000, 64, 8, 3, 0.1), (20_000, 32, [4, 12, 6], 4, 0.5), (9_000, 16, 32, 2, 2.0)],
)
def test_gaussian_init_materialised_std(num_rows, dim, ranks, num_cores, target):
    # The std of one table is itself random (core slices are shared between rows): average the
    # second moment over a few independent tables.
    second_moments = []
    for seed in range(4):
        gen = torch.Generator().manual_seed(seed)
        emb = TTNodeEmbedding(num_rows, dim, ranks=ranks, num_cores=num_cores, init_scale=target, generator=gen)
        with torch.no_grad():
            weight = emb.full_weight()
        second_moments.append(weight.double().square().mean())
        assert abs(float(weight.mean())) < 0.05 * target
    std = math.sqrt(float(torch.stack(second_moments).mean()))
    assert std == pytest.approx(target, rel=0.05)


def test_gaussian_core_std_formula():
    # Var(W) = sigma^(2K) * prod(r): three cores, ranks 16 and 16, target std 1.
    sigma = gaussian_core_std([1, 16, 16, 1], 1.0)
    assert sigma**6 * 256 == pytest.approx(1.0)


@pytest.mark.parametrize(
    "row_shape, col_shape, ranks",
    [([55, 55, 56], [8, 4, 4], 16), ([20, 30, 40], [4, 4, 4], 8), ([10, 10, 10, 10], [2, 2, 2, 2], 6),
     ([64, 64], [8, 8], 32), ([8, 8, 8, 8, 8], [2, 2, 2, 2, 2], 4)],
)
def test_ortho_init_gives_orthonormal_columns(row_shape, col_shape, ranks):
    num_rows = math.prod(row_shape)
    emb = TTNodeEmbedding(num_rows, math.prod(col_shape), ranks=ranks, row_shape=row_shape,
                          col_shape=col_shape, init="ortho", generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        weight = emb.full_weight().double()
    gram = weight.T @ weight
    torch.testing.assert_close(gram, torch.eye(gram.shape[0], dtype=torch.float64), rtol=0, atol=1e-5)


def test_ortho_gain_and_gradients_reach_truncated_rank_channels():
    # Rank 16 with n_1 = 55 < m_1 * r_1 = 128: the effective first rank is 6, yet every core
    # entry must get a gradient so training can use the full rank.
    emb = TTNodeEmbedding(55 * 55 * 56, 128, ranks=16, row_shape=[55, 55, 56], init="ortho", init_scale=3.0)
    with torch.no_grad():
        weight = emb.full_weight().double()
    torch.testing.assert_close(weight.T @ weight, 9 * torch.eye(128, dtype=torch.float64), rtol=0, atol=1e-4)
    emb(torch.randint(0, emb.num_embeddings, (4096,))).square().sum().backward()
    first_grad = emb.cores[0].grad
    assert (first_grad[:, :, :, 6:].abs().sum()) > 0


def test_ortho_effective_ranks_reported():
    cores = [torch.empty(s) for s in TTShape.build(55 * 55 * 56, 128, 16, row_shape=[55, 55, 56]).core_shapes]
    assert orthogonal_(cores) == [1, 6, 16, 1]


def test_ortho_impossible_shape_raises():
    # Fewer padded rows than columns: no table with orthonormal columns exists.
    with pytest.raises(ValueError, match="orthogonal init impossible"):
        TTNodeEmbedding(20, 64, ranks=4, row_shape=[4, 5], col_shape=[8, 8], init="ortho")


@pytest.mark.parametrize("num_rows, dim, row_shape, col_shape", [(240, 12, [4, 6, 10], [2, 3, 2]), (97, 8, None, None)])
def test_tt_svd_exact_at_full_rank(num_rows, dim, row_shape, col_shape):
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(num_rows, dim, generator=gen, dtype=torch.float64)
    emb = TTNodeEmbedding.from_pretrained(weight, ranks=10**6, row_shape=row_shape, col_shape=col_shape)
    assert emb.svd_relative_error < 1e-12
    torch.testing.assert_close(emb.full_weight(), weight, rtol=1e-10, atol=1e-10)
    assert not any(c.requires_grad for c in emb.cores)  # frozen by default, like nn.Embedding


def test_tt_svd_error_decreases_with_rank():
    gen = torch.Generator().manual_seed(0)
    # A table with decaying structure so that low ranks are meaningful.
    base = TTNodeEmbedding(1000, 16, ranks=6, generator=gen, dtype=torch.float64).full_weight().detach()
    weight = base + 0.05 * torch.randn(1000, 16, generator=gen, dtype=torch.float64)
    errors = [TTNodeEmbedding.from_pretrained(weight, ranks=r).svd_relative_error for r in (1, 2, 4, 6, 12, 40)]
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert errors[3] < 0.1 < errors[0]  # rank 6 recovers the planted table up to the noise
    assert errors[-1] < 1e-10


def test_tt_svd_with_node_order_and_unfrozen():
    gen = torch.Generator().manual_seed(3)
    weight = torch.randn(50, 8, generator=gen, dtype=torch.float64)
    order = torch.randperm(50, generator=gen) + 3
    emb = TTNodeEmbedding.from_pretrained(weight, ranks=10**6, row_shape=[6, 9], node_order=order, freeze=False)
    torch.testing.assert_close(emb(torch.arange(50)), weight, rtol=1e-10, atol=1e-10)
    assert all(c.requires_grad for c in emb.cores)


def test_tt_svd_rejects_bad_weight():
    shape = TTShape.build(10, 4, 2)
    with pytest.raises(ValueError, match=r"shape \(10, 4\)"):
        tt_svd(torch.zeros(9, 4), shape)
    with pytest.raises(TypeError, match="floating-point"):
        tt_svd(torch.zeros(10, 4, dtype=torch.long), shape)
    with pytest.raises(ValueError, match="2-D"):
        TTNodeEmbedding.from_pretrained(torch.zeros(10))
    weight = torch.randn(10, 4)
    weight[3, 1] = float("nan")
    weight[7, 0] = float("inf")
    with pytest.raises(ValueError, match=r"^weight has 2 non-finite value\(s\) \(NaN or inf\); TT-SVD needs a finite "
                                         r"table$"):
        tt_svd(weight, shape)
    with pytest.raises(ValueError, match="non-finite"):
        TTNodeEmbedding.from_pretrained(weight, ranks=2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("init", ["gaussian", "ortho"])
def test_cpu_generator_initialises_cuda_cores_like_cpu_cores(init):
    def build(device):
        generator = torch.Generator().manual_seed(3)
        return TTNodeEmbedding(500, 16, ranks=4, init=init, device=device, generator=generator)

    cpu, cuda = build("cpu"), build("cuda")
    for a, b in zip(cpu.cores, cuda.cores):
        assert b.device.type == "cuda"
        torch.testing.assert_close(b.cpu(), a, rtol=0, atol=0)


@pytest.mark.parametrize("row_shape, col_shape, ranks, effective", [
    ([14, 10, 10], [2, 2, 2], 8, [1, 7, 8, 1]),  # core 0's unfolding allows 14 // 2 = 7 of 8 channels
    ([40, 7, 20], [2, 8, 2], 8, [1, 8, 7, 1]),  # core 1's allows 8 * 7 // 8 = 7 of 8
    ([55, 55, 56], [8, 4, 4], 16, [1, 6, 16, 1]),  # ten channels missing
])
def test_ortho_every_rank_channel_learns(row_shape, col_shape, ranks, effective):
    # A channel that the orthogonal construction cannot fill starts at zero in one core; the
    # matching channel of the next core must start random, or both get zero gradient forever.
    # After one optimiser step every input and output channel of every core has a gradient.
    num_rows, dim = math.prod(row_shape), math.prod(col_shape)
    shape = TTShape.build(num_rows, dim, ranks, row_shape=row_shape, col_shape=col_shape)
    assert orthogonal_([torch.empty(s) for s in shape.core_shapes]) == effective
    emb = TTNodeEmbedding(num_rows, dim, ranks=ranks, row_shape=row_shape, col_shape=col_shape, init="ortho",
                          generator=torch.Generator().manual_seed(0))
    target = torch.randn(num_rows, dim, generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.SGD(emb.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        (emb.full_weight() * target).sum().backward()
        optimizer.step()
    for k, core in enumerate(emb.cores):
        per_input = core.grad.abs().sum(dim=(0, 2, 3))
        per_output = core.grad.abs().sum(dim=(0, 1, 2))
        assert torch.all(per_input > 0), f"core {k}: input channels without gradient {per_input}"
        assert torch.all(per_output > 0), f"core {k}: output channels without gradient {per_output}"


def test_tt_svd_pads_ranks_above_what_the_previous_rank_allows():
    # With r_1 = 1 the second unfolding has only n_2 m_2 = 4 rows, so a requested r_2 = 16 gets 4
    # singular vectors and 12 zero channels: the same table as ranks (1, 1, 4, 4, 1), in the
    # requested core shapes, and trainable in every channel.
    row_shape, col_shape = [2, 2, 2, 2], [2, 2, 2, 2]
    weight = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    padded = TTNodeEmbedding.from_pretrained(weight, ranks=[1, 1, 16, 4, 1], row_shape=row_shape, col_shape=col_shape)
    plain = TTNodeEmbedding.from_pretrained(weight, ranks=[1, 1, 4, 4, 1], row_shape=row_shape, col_shape=col_shape)
    assert [tuple(c.shape) for c in padded.cores] == [(2, 1, 2, 1), (2, 1, 2, 16), (2, 16, 2, 4), (2, 4, 2, 1)]
    assert padded.svd_relative_error == pytest.approx(plain.svd_relative_error, rel=1e-12)
    torch.testing.assert_close(padded.full_weight(), plain.full_weight(), rtol=1e-12, atol=1e-12)
    assert torch.count_nonzero(padded.cores[1][..., 4:]) == 0 and torch.count_nonzero(padded.cores[2][:, 4:]) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_tt_svd_of_a_cuda_table_equals_the_cpu_one():
    weight = torch.randn(240, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    shape = TTShape.build(240, 12, 4, row_shape=[4, 6, 10], col_shape=[2, 3, 2])
    cpu_cores, cpu_error = tt_svd(weight, shape)
    cuda_cores, cuda_error = tt_svd(weight.cuda(), shape)
    assert all(c.device.type == "cuda" for c in cuda_cores)
    assert cuda_error == pytest.approx(cpu_error, rel=1e-9)
    for a, b in zip(cpu_cores, cuda_cores):  # singular vectors agree up to sign: compare the tables
        assert a.shape == b.shape
    from ttgnn.ops import tt_lookup_reference

    rows = torch.arange(240)
    torch.testing.assert_close(tt_lookup_reference([c.cuda() for c in cpu_cores], rows.cuda()).cpu(),
                               tt_lookup_reference(cuda_cores, rows.cuda()).cpu(), rtol=1e-9, atol=1e-9)


def test_gaussian_draws_from_its_generator_with_std_one_by_default():
    from ttgnn.init import gaussian_

    shapes = [(4, 1, 2, 3), (5, 3, 2, 1)]

    def draw(**kwargs):
        cores = [torch.empty(s, dtype=torch.float64) for s in shapes]
        torch.manual_seed(kwargs.pop("global_seed"))  # the global stream must not matter
        gaussian_(cores, generator=torch.Generator().manual_seed(7), **kwargs)
        return cores

    first, second = draw(global_seed=1), draw(global_seed=2)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    explicit = draw(global_seed=3, std=1.0)
    assert all(torch.equal(a, b) for a, b in zip(first, explicit))
    sigma = gaussian_core_std([1, 3, 1], 1.0)
    expected = torch.empty(shapes[0], dtype=torch.float64).normal_(0.0, sigma, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first[0], expected)


@pytest.mark.parametrize("std", [0.0, -1.0, float("inf"), float("nan")])
def test_gaussian_rejects_a_std_that_is_not_a_finite_positive_number(std):
    from ttgnn.init import gaussian_

    core = torch.zeros(2, 1, 2, 1)
    with pytest.raises(ValueError, match=re.escape(f"std must be a finite number > 0, got {std!r}")):
        gaussian_([core], std=std)
    assert not core.any()


@pytest.mark.parametrize("gain", [0.0, -2.0, float("inf"), float("nan")])
def test_orthogonal_rejects_a_gain_that_is_not_a_finite_positive_number(gain):
    core = torch.zeros(4, 1, 2, 1)
    with pytest.raises(ValueError, match=re.escape(f"gain must be a finite number > 0, got {gain!r}")):
        orthogonal_([core], gain=gain)
    assert not core.any()


@pytest.mark.parametrize("scale", [True, "1", None, 1 + 0j, torch.ones(2), torch.tensor(True)])
def test_a_scale_that_is_no_real_number_is_a_type_error(scale):
    from ttgnn.init import gaussian_

    core = torch.zeros(2, 1, 2, 1)
    with pytest.raises(TypeError, match="std must be a real number, got "):
        gaussian_([core], std=scale)
    with pytest.raises(TypeError, match="gain must be a real number, got "):
        orthogonal_([torch.zeros(4, 1, 2, 1)], gain=scale)
    with pytest.raises(TypeError, match="init_scale must be a real number, got "):
        TTNodeEmbedding(100, 8, init_scale=scale)
    assert not core.any()


def test_a_one_element_tensor_is_taken_as_the_scale_as_table_std_gives_it():
    table = torch.randn(500, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.3
    by_tensor = TTNodeEmbedding(500, 8, ranks=4, init_scale=table.std(), generator=torch.Generator().manual_seed(1))
    by_float = TTNodeEmbedding(500, 8, ranks=4, init_scale=float(table.std()), generator=torch.Generator().manual_seed(1))
    assert type(by_tensor.init_scale) is float and by_tensor.init_scale == float(table.std())
    assert all(torch.equal(a, b) for a, b in zip(by_tensor.cores, by_float.cores))


@pytest.mark.parametrize("scale", [1e-170, 1e160])
def test_gaussian_calibrates_scales_whose_square_no_float_holds(scale):
    # std**2 underflowed to 0 (an all-zero table) or raised OverflowError; in logarithms both work.
    sigma = gaussian_core_std([1, 4, 4, 1], scale)
    assert math.isclose(math.log(sigma) * 6 + math.log(16), 2 * math.log(scale), rel_tol=1e-12)
    emb = TTNodeEmbedding(1000, 16, ranks=4, init_scale=scale, dtype=torch.float64,
                          generator=torch.Generator().manual_seed(0))
    table = emb.full_weight().detach() / scale
    assert 0.8 < float(table.std()) < 1.2


@pytest.mark.parametrize("init, scale, dtype", [("gaussian", 1e5, torch.float16), ("gaussian", 1e-6, torch.float16),
                                                ("gaussian", 1e307, torch.float64), ("ortho", 1e4, torch.float16),
                                                ("gaussian", 1e37, torch.float32)])
def test_a_scale_the_dtype_cannot_hold_is_refused_not_an_inf_or_zero_table(init, scale, dtype):
    with pytest.raises(ValueError, match=re.escape(f"a table scale of {scale:g} cannot be held in {dtype}")):
        TTNodeEmbedding(10**6, 16, ranks=4, init=init, init_scale=scale, dtype=dtype)


def test_the_refusal_names_the_margin_below_the_dtypes_largest_number():
    # 1e3 lies under float16's largest number, 65504: the message says why it is still refused
    with pytest.raises(ValueError, match=r"normal numbers span 6.1e-05 to 6.55e\+04 \(and entries reach several "
                                         r"times their scale: at most 655 is taken\)"):
        TTNodeEmbedding(1000, 16, ranks=4, init_scale=1e3, dtype=torch.float16)


@pytest.mark.parametrize("init, scale, dtype", [("gaussian", 100.0, torch.float16), ("ortho", 100.0, torch.float16),
                                                ("gaussian", 1e-20, torch.float32)])
def test_scales_the_dtype_holds_give_finite_nonzero_tables(init, scale, dtype):
    emb = TTNodeEmbedding(10**4, 16, ranks=4, init=init, init_scale=scale, dtype=dtype,
                          generator=torch.Generator().manual_seed(0))
    table = emb.full_weight().detach()
    assert table.isfinite().all() and (table != 0).float().mean() > 0.9


def test_gaussian_and_orthogonal_take_numpy_scalars_as_their_scale():
    import numpy as np
    from ttgnn.init import gaussian_

    shape = TTShape.build(8 * 9 * 10, 16, 4, row_shape=[8, 9, 10], col_shape=[2, 4, 2])
    cores = [torch.empty(s, dtype=torch.float64) for s in shape.core_shapes]
    orthogonal_(cores, gain=np.float32(2.0), generator=torch.Generator().manual_seed(0))
    weight = TTNodeEmbedding(8 * 9 * 10, 16, ranks=4, row_shape=[8, 9, 10], col_shape=[2, 4, 2], dtype=torch.float64)
    with torch.no_grad():
        for param, core in zip(weight.cores, cores):
            param.copy_(core)
        table = weight.full_weight()
    torch.testing.assert_close(table.T @ table, 4.0 * torch.eye(16, dtype=torch.float64), rtol=0, atol=1e-10)
    gaussian_(cores, std=np.float64(0.5))
    assert all(core.abs().sum() > 0 for core in cores)


@pytest.mark.parametrize("init", ["gaussian", "ortho"])
@pytest.mark.parametrize("scale", [float("inf"), float("nan"), 0.0, -0.1])
def test_embedding_names_init_scale_when_it_is_not_a_finite_positive_number(init, scale):
    # An infinite scale used to build a table of inf cores whose every lookup was NaN.
    with pytest.raises(ValueError, match=re.escape(f"init_scale must be a finite number > 0, got {scale!r}")):
        TTNodeEmbedding(100, 8, init=init, init_scale=scale)


def test_ortho_float64_is_orthonormal_to_float64_rounding_and_follows_its_generator():
    # The orthonormal factors are computed in float64: a float64 table is exact to ~1e-15,
    # and the values depend on the generator alone, not on the global random stream.
    def build(global_seed):
        torch.manual_seed(global_seed)
        return TTNodeEmbedding(8 * 9 * 10, 16, ranks=6, row_shape=[8, 9, 10], col_shape=[2, 4, 2], init="ortho",
                               dtype=torch.float64, generator=torch.Generator().manual_seed(5))

    first, second = build(1), build(2)
    assert all(torch.equal(a, b) for a, b in zip(first.cores, second.cores))
    with torch.no_grad():
        weight = first.full_weight()
    torch.testing.assert_close(weight.T @ weight, torch.eye(16, dtype=torch.float64), rtol=0, atol=1e-12)


def test_orthogonal_default_gain_is_one_and_impossible_shapes_name_the_rows_needed():
    shape = TTShape.build(8 * 9 * 10, 16, 4, row_shape=[8, 9, 10], col_shape=[2, 4, 2])
    cores = [torch.empty(s, dtype=torch.float64) for s in shape.core_shapes]
    orthogonal_(cores, generator=torch.Generator().manual_seed(0))
    weight = TTNodeEmbedding(8 * 9 * 10, 16, ranks=4, row_shape=[8, 9, 10], col_shape=[2, 4, 2], dtype=torch.float64)
    with torch.no_grad():
        for param, core in zip(weight.cores, cores):
            param.copy_(core)
        table = weight.full_weight()
    torch.testing.assert_close(table.T @ table, torch.eye(16, dtype=torch.float64), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"core 0 of shape \(4, 1, 8, 2\): its unfolding has 4 rows but needs at "
                                         r"least 8 \(m_k \* r_k\)"):
        orthogonal_([torch.empty(4, 1, 8, 2), torch.empty(5, 2, 8, 1)])


def _unfolding(core):
    """Core ``(n, r_in, m, r_out)`` as the ``(r_in * n) x (m * r_out)`` matrix orthogonal_ fills."""
    n, r_in, m, r_out = core.shape
    return core.permute(1, 0, 2, 3).reshape(r_in * n, m * r_out)


@pytest.mark.parametrize("gain", [2.0, 0.5])
def test_ortho_gain_goes_to_the_last_core_and_the_others_stay_orthonormal(gain):
    # Ranks every unfolding allows (no effective rank below the requested one).
    cores = [torch.empty(s, dtype=torch.float64) for s in
             TTShape.build(64, 8, 2, row_shape=[4, 4, 4], col_shape=[2, 2, 2]).core_shapes]
    assert orthogonal_(cores, gain=gain, generator=torch.Generator().manual_seed(0)) == [1, 2, 2, 1]
    for core in cores[:-1]:  # left-orthonormal, as TT's canonical form
        q = _unfolding(core)
        torch.testing.assert_close(q.T @ q, torch.eye(q.shape[1], dtype=torch.float64), rtol=0, atol=1e-12)
    last = _unfolding(cores[-1])
    torch.testing.assert_close(last.T @ last, gain**2 * torch.eye(last.shape[1], dtype=torch.float64),
                               rtol=0, atol=1e-12)
    from ttgnn.ops import tt_dense_table

    table = tt_dense_table(cores)
    torch.testing.assert_close(table.T @ table, gain**2 * torch.eye(8, dtype=torch.float64), rtol=0, atol=1e-12)


def test_ortho_extra_input_channels_are_random_per_slice_at_the_unfoldings_scale(caplog):
    import logging

    # Rank 4 on rows 4 x 4 x 4, columns 2 x 2 x 2: core 0's unfolding has 4 rows, so its effective
    # output rank is 2 and core 1's input channels 2 and 3 start random.
    cores = [torch.empty(s, dtype=torch.float64) for s in
             TTShape.build(64, 8, 4, row_shape=[4, 4, 4], col_shape=[2, 2, 2]).core_shapes]
    with caplog.at_level(logging.INFO, logger="ttgnn.init"):
        effective = orthogonal_(cores, generator=torch.Generator().manual_seed(1))
    assert effective == [1, 2, 4, 1]
    assert logged(caplog, "ttgnn.init") == [
        "orthogonal init: effective ranks [1, 2, 4, 1] (requested [1, 4, 4, 1])"]
    extra = cores[1][:, 2:, :, :]  # (n, 2, m, r_out), drawn with std 1 / sqrt(r'_0 * n_1) = 1 / sqrt(8)
    assert not torch.equal(extra[0], extra[1]) and not torch.equal(extra[1], extra[2])
    assert 0.2 < float(extra.std()) < 0.55
    assert torch.count_nonzero(cores[0][:, :, :, 2:]) == 0  # the excess output channels start at zero
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ttgnn.init"):
        orthogonal_([torch.empty(s) for s in TTShape.build(64, 8, 2, row_shape=[4, 4, 4],
                                                           col_shape=[2, 2, 2]).core_shapes])
    assert not [r for r in caplog.records if r.name == "ttgnn.init"]  # nothing to report at full rank


def test_tt_svd_returns_the_relative_error_and_the_weights_dtype():
    from ttgnn.ops import tt_dense_table

    shape = TTShape.build(60, 8, 2, row_shape=[4, 4, 4], col_shape=[2, 2, 2])
    weight = torch.randn(60, 8, generator=torch.Generator().manual_seed(2))
    cores, error = tt_svd(weight, shape)
    assert all(c.dtype == torch.float32 for c in cores)
    approx = tt_dense_table([c.double() for c in cores])[:60]
    expected = float(torch.linalg.norm(approx - weight.double()) / torch.linalg.norm(weight.double()))
    assert 0.1 < error == pytest.approx(expected, rel=1e-5)
    # relative: the same for a table of norm below 1; zero for a zero table
    assert tt_svd(weight * 1e-3, shape)[1] == pytest.approx(error, rel=1e-5)
    assert tt_svd(torch.zeros(60, 8), shape)[1] == 0.0
    assert all(c.dtype == torch.float64 for c in tt_svd(weight.double(), shape)[0])


def test_gaussian_core_std_keeps_the_closed_form_where_it_holds():
    # seeded float64 runs drew their cores with this formula: the logarithmic one moved the last bit
    for ranks in ([1, 8, 8, 1], [1, 16, 16, 16, 1], [1, 3, 1]):
        for std in (0.1, 1.0, 0.37, 2.5):
            assert gaussian_core_std(ranks, std) == (std**2 / math.prod(ranks)) ** (1.0 / (2 * (len(ranks) - 1)))


def test_a_numpy_array_of_one_number_and_an_int_past_floats_range_as_a_scale():
    import numpy as np
    from ttgnn.init import check_scale

    assert check_scale("std", np.array(0.5)) == 0.5 and check_scale("std", np.array([2])) == 2.0
    with pytest.raises(ValueError, match="std must be a finite number > 0"):
        check_scale("std", 10**400)


@pytest.mark.parametrize("fill", [tt_init.gaussian_, tt_init.orthogonal_])
def test_the_public_initialisers_check_the_cores_they_are_given(fill):
    # an empty list or a lone tensor ended in an IndexError; cores whose ranks do not chain were filled
    with pytest.raises(ValueError, match="cores is empty"):
        fill([])
    with pytest.raises(TypeError, match="cores must be a sequence of tensors"):
        fill(torch.zeros(4, 1, 2, 1))
    with pytest.raises(ValueError, match=r"core 1 has shape \(4, 3, 2, 1\); its rank dimension 1 must be 2"):
        fill([torch.zeros(4, 1, 2, 2), torch.zeros(4, 3, 2, 1)])
    fill([torch.zeros(4, 1, 2, 2), torch.zeros(4, 2, 2, 1)])  # a chain: filled


def test_a_seed_given_for_the_generator_is_refused_by_every_entry():
    # reset_parameters(generator=0) failed in _sample_device: 'int' object has no attribute 'device'
    from ttgnn.init import gaussian_, orthogonal_

    emb = TTNodeEmbedding(100, 16, ranks=2)
    message = r"^generator must be a torch.Generator, got int; for a seed, pass torch.Generator\(\).manual_seed"
    for call in (lambda: emb.reset_parameters(generator=0), lambda: gaussian_(list(emb.cores), generator=0),
                 lambda: orthogonal_(list(emb.cores), generator=0), lambda: TTNodeEmbedding(100, 16, generator=0)):
        with pytest.raises(TypeError, match=message):
            call()
    before = [core.detach().clone() for core in emb.cores]
    emb.reset_parameters(generator=torch.Generator().manual_seed(0))
    assert not torch.equal(before[0], emb.cores[0])


def test_meta_tensors_are_refused_where_values_are_needed():
    # both failed in torch: "Tensor.item() cannot be called on meta tensors"
    with pytest.raises(ValueError, match=r"^weight is on the meta device \(a shape, no values\)"):
        TTNodeEmbedding.from_pretrained(torch.randn(10, 4, device="meta"), 2)
    with pytest.raises(ValueError, match=r"^node_order is on the meta device \(a shape, no values\)"):
        TTNodeEmbedding(100, 16, ranks=2).set_node_order(torch.arange(100, device="meta"))
