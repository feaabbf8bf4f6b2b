import io
import math
import numpy as np
import os
import resource

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import logged
from ttgnn import TTNodeEmbedding
from ttgnn.ops import tt_dense_table, tt_lookup_reference
from ttgnn.shapes import index_to_digits


def _dense_from_cores(cores, row_shape):
    """Materialise a TT table by explicit per-entry products (independent of the bmm path)."""
    num_rows, dim = math.prod(row_shape), math.prod(c.shape[2] for c in cores)
    col_shape = [c.shape[2] for c in cores]
    rows = index_to_digits(torch.arange(num_rows), row_shape)
    cols = index_to_digits(torch.arange(dim), col_shape)
    out = torch.empty(num_rows, dim, dtype=cores[0].dtype)
    for i in range(num_rows):
        for j in range(dim):
            vec = torch.ones(1, 1, dtype=cores[0].dtype)
            for k, core in enumerate(cores):
                vec = vec @ core[rows[i, k], :, cols[j, k], :]
            out[i, j] = vec.item()
    return out


def test_reference_matches_explicit_products():
    torch.manual_seed(0)
    emb = TTNodeEmbedding(23, 12, ranks=[3, 2], row_shape=[2, 3, 4], col_shape=[2, 3, 2], dtype=torch.float64)
    dense = _dense_from_cores([c.detach() for c in emb.cores], emb.row_shape)
    torch.testing.assert_close(emb.full_weight().detach(), dense[:23], rtol=1e-12, atol=1e-12)


@given(
    num_rows=st.integers(1, 3000),
    dim=st.sampled_from([1, 2, 6, 12, 16, 30]),
    num_cores=st.integers(2, 8),
    rank=st.integers(1, 6),
    index_shape=st.lists(st.integers(0, 5), min_size=0, max_size=3),
    int32=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_forward_equals_embedding_of_full_weight(num_rows, dim, num_cores, rank, index_shape, int32, seed):
    gen = torch.Generator().manual_seed(seed)
    emb = TTNodeEmbedding(num_rows, dim, ranks=rank, num_cores=num_cores, generator=gen)
    idx = torch.randint(0, num_rows, index_shape, generator=gen)
    if int32:
        idx = idx.int()
    out = emb(idx)
    assert out.shape == (*index_shape, dim)
    expected = F.embedding(idx.long(), emb.full_weight())
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_padded_prime_row_count():
    emb = TTNodeEmbedding(169_343, 128, ranks=8)
    assert emb.row_shape == (55, 55, 56)
    last = torch.tensor([169_342, 0, 169_342])
    out = emb(last)
    torch.testing.assert_close(out[0], out[2])
    assert out.shape == (3, 128)


def test_only_requested_rows_are_computed(monkeypatch):
    """The lookup receives exactly the requested rows, never the whole table."""
    seen = []
    import ttgnn.embedding as embedding_module

    def spy(cores, rows):
        seen.append(rows.clone())
        return tt_lookup_reference(cores, rows)

    monkeypatch.setattr(embedding_module, "lookup_checked_rows", spy)
    emb = TTNodeEmbedding(10_000, 16, ranks=4)
    emb(torch.tensor([[3, 9999], [3, 17]]))
    assert seen[0].tolist() == [3, 9999, 3, 17]


@pytest.mark.parametrize("num_cores", [2, 3, 4, 5, 6, 8])
def test_gradcheck_cores_float64(num_cores):
    torch.manual_seed(num_cores)
    emb = TTNodeEmbedding(50, 8, ranks=3, num_cores=num_cores, dtype=torch.float64)
    idx = torch.tensor([0, 7, 7, 49, 12, 3, 0])
    cores = [c.detach().clone().requires_grad_(True) for c in emb.cores]
    rows = idx.clone()
    assert torch.autograd.gradcheck(lambda *cs: tt_lookup_reference(list(cs), rows), cores)


def test_backward_gives_gradients_to_every_core():
    emb = TTNodeEmbedding(1000, 16, ranks=4)
    emb(torch.randint(0, 1000, (64,))).sum().backward()
    for core in emb.cores:
        assert core.grad is not None and core.grad.abs().sum() > 0


def test_state_dict_roundtrip_with_node_order():
    gen = torch.Generator().manual_seed(1)
    order = torch.randperm(100, generator=gen)
    emb = TTNodeEmbedding(100, 8, ranks=4, node_order=order, generator=gen)
    buffer = io.BytesIO()
    torch.save(emb.state_dict(), buffer)
    buffer.seek(0)
    fresh = TTNodeEmbedding(100, 8, ranks=4)
    fresh.load_state_dict(torch.load(buffer))
    idx = torch.arange(100)
    torch.testing.assert_close(fresh(idx), emb(idx))
    assert torch.equal(fresh.node_order, order)


def test_load_state_dict_refuses_a_table_of_another_row_count():
    # 950 and 1,000 rows share the row shape (10, 10, 10), so the cores' shapes match; the 950-row table's
    # checkpoint loaded into the 1,000-row one served its 50 untrained padding rows as embeddings
    small, large = TTNodeEmbedding(950, 16, ranks=4), TTNodeEmbedding(1000, 16, ranks=4)
    assert small.row_shape == large.row_shape
    for source, target, saved, own in ((small, large, "950", "1,000"), (large, small, "1,000", "950")):
        state = {key: value.clone() for key, value in target.state_dict().items()}
        with pytest.raises(RuntimeError, match=rf"size mismatch for num_embeddings: the checkpoint's table has {saved} "
                                               rf"rows, this TTNodeEmbedding {own}"):
            target.load_state_dict(source.state_dict())
        assert all(torch.equal(value, state[key]) for key, value in target.state_dict().items())  # nothing loaded
    # the row count saved as a tensor (torch.load's weights_only takes it) and checked, with a prefix too
    model = torch.nn.Sequential(TTNodeEmbedding(950, 16, ranks=4))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["0.num_embeddings"].item() == 950
    fresh = torch.nn.Sequential(TTNodeEmbedding(950, 16, ranks=4))
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh(torch.arange(950)), model(torch.arange(950)))
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.num_embeddings"):
        torch.nn.Sequential(TTNodeEmbedding(1000, 16, ranks=4)).load_state_dict(state)
    for bad in (torch.zeros(3, 3), torch.tensor(950.0), 950):  # a damaged entry is named, not read as a number
        with pytest.raises(RuntimeError, match=r"size mismatch for 0.num_embeddings: expected the table's row count, "
                                               r"an integer scalar tensor, got (\(3, 3\)|\(\)|int)$"):
            torch.nn.Sequential(TTNodeEmbedding(950, 16, ranks=4)).load_state_dict({**state, "0.num_embeddings": bad})
    # a state dict saved before the row count was (ttgnn before 2026-12-07) still loads, strictly
    del state["0.num_embeddings"]
    torch.nn.Sequential(TTNodeEmbedding(950, 16, ranks=4)).load_state_dict(state)


def test_node_order_maps_nodes_to_tt_rows():
    emb = TTNodeEmbedding(30, 4, ranks=2, row_shape=[4, 8])
    before = emb(torch.arange(30)).detach()
    order = torch.arange(30).flip(0) + 2  # node v -> TT row 31 - v
    emb.set_node_order(order)
    rows_as_nodes = tt_lookup_reference(list(emb.cores), order).detach()
    torch.testing.assert_close(emb(torch.arange(30)).detach(), rows_as_nodes)
    assert not torch.allclose(emb(torch.arange(30)).detach(), before)


@pytest.mark.parametrize(
    "order, error, message",
    [
        (torch.arange(29), ValueError, r"shape \(30,\)"),
        (torch.full((30,), 3), ValueError, "injective"),
        (torch.arange(30) + 3, ValueError, r"\[0, 32\)"),
        (torch.arange(30).float(), TypeError, "integer tensor"),
    ],
)
def test_bad_node_order(order, error, message):
    with pytest.raises(error, match=message):
        TTNodeEmbedding(30, 4, ranks=2, row_shape=[4, 8], node_order=order)


@pytest.mark.parametrize("bad", [100, 12345, -1, -100])
def test_out_of_range_index_raises_index_error(bad):
    emb = TTNodeEmbedding(100, 8, ranks=4)
    with pytest.raises(IndexError, match=rf"index {bad} is out of range .* 100 rows"):
        emb(torch.tensor([0, bad, 5]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_non_integer_index_raises_type_error(dtype):
    emb = TTNodeEmbedding(100, 8, ranks=4)
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.zeros(3, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.uint16, torch.uint32])
def test_any_integer_index_dtype_gives_the_int64_rows(dtype):
    emb = TTNodeEmbedding(300, 8, ranks=4)
    idx = torch.tensor([[0, 17], [255, 3]])
    torch.testing.assert_close(emb(idx.to(dtype)), emb(idx), rtol=0, atol=0)
    if dtype.is_signed or dtype == torch.uint8:
        return
    with pytest.raises(IndexError, match=r"index 300 is out of range .* 300 rows"):  # checked as for int64
        emb(torch.tensor([1, 300], dtype=dtype))


def test_uint64_indices_are_refused_by_name():
    # values from 2**63 up would have become negative int64 rows
    with pytest.raises(TypeError, match=r"uint64 is not supported; convert with \.long\(\)"):
        TTNodeEmbedding(300, 8, ranks=4)(torch.tensor([1], dtype=torch.uint64))


def test_func_transforms_over_indices_and_parameters_match_the_loop():
    emb = TTNodeEmbedding(100, 8, ranks=3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    idx = torch.tensor([1, 5, 5, 99])
    # per-sample gradients: vmap over the indices (range-checked on every batch's values)
    params = {name: p.detach() for name, p in emb.named_parameters()}
    per_sample = torch.func.vmap(torch.func.grad(
        lambda p, i: torch.func.functional_call(emb, p, (i,)).pow(2).sum()), in_dims=(None, 0))(params, idx.view(4, 1))
    for k, i in enumerate(idx):
        want = torch.autograd.grad(emb(i.view(1)).pow(2).sum(), list(emb.cores))
        for j, core_grad in enumerate(want):
            assert torch.allclose(per_sample[f"cores.{j}"][k], core_grad, rtol=1e-12, atol=1e-12)
    with pytest.raises(IndexError, match=r"index 100 is out of range .* 100 rows"):
        torch.func.vmap(emb)(torch.tensor([[1, 2], [3, 100]]))
    # an ensemble: vmap over stacked parameters
    models = [TTNodeEmbedding(100, 8, ranks=3, dtype=torch.float64) for _ in range(3)]
    stacked, _ = torch.func.stack_module_state(models)
    got = torch.func.vmap(lambda p: torch.func.functional_call(models[0], p, (idx,)))(stacked)
    assert torch.allclose(got, torch.stack([m(idx) for m in models]), rtol=1e-12, atol=1e-12)


def test_the_dense_path_counts_the_padded_rows(monkeypatch):
    # 100 nodes on a 10^7-row shape: 30 lookups are 30% of the nodes but a 10^7 x 8 dense table;
    # without a kernel the rows are gathered one by one
    import ttgnn.embedding as embedding

    emb = TTNodeEmbedding(100, 8, ranks=4, row_shape=(1000, 1000, 10), dtype=torch.bfloat16)
    monkeypatch.setattr(embedding, "tt_dense_table", lambda cores: pytest.fail("contracted the whole table"))
    out = emb(torch.arange(30))
    assert out.shape == (30, 8) and torch.equal(out[:3], emb(torch.arange(3)))
    # a small padding still contracts the table once most rows are wanted
    small = TTNodeEmbedding(100, 8, ranks=4, row_shape=(5, 5, 5), dtype=torch.bfloat16)
    calls = []
    monkeypatch.setattr(embedding, "tt_dense_table", lambda cores: calls.append(1) or tt_dense_table(cores))
    small(torch.arange(40))
    assert calls == [1]


def test_non_tensor_index_raises_type_error():
    with pytest.raises(TypeError, match="torch.Tensor"):
        TTNodeEmbedding(100, 8, ranks=4)([1, 2])


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 2, 5)])
def test_empty_index_returns_empty(shape):
    emb = TTNodeEmbedding(100, 8, ranks=4)
    out = emb(torch.empty(shape, dtype=torch.long))
    assert out.shape == (*shape, 8)
    out.sum().backward()  # an empty batch is a valid training step


def test_bad_init_name():
    with pytest.raises(ValueError, match="init must be one of"):
        TTNodeEmbedding(100, 8, init="xavier")


def test_repr_and_counts():
    emb = TTNodeEmbedding(169_343, 128, ranks=16)
    assert emb.num_parameters == sum(c.numel() for c in emb.cores) == 66_944
    assert emb.compression_ratio == pytest.approx(169_343 * 128 / 66_944)
    text = repr(emb)
    assert "row_shape=[55, 55, 56]" in text and "col_shape=[8, 4, 4]" in text and "323.8x" in text


def test_weight_names_full_weight_and_other_attributes_behave_as_in_a_module():
    emb = TTNodeEmbedding(50, 8, ranks=4)
    with pytest.raises(AttributeError, match=r"no \.weight.*full_weight\(\)"):
        emb.weight
    assert not hasattr(emb, "weight")
    assert len(emb.cores) == 3 and emb.cores[0].shape[0] == emb.row_shape[0]  # submodules still reached
    with pytest.raises(AttributeError, match="no_such_thing"):
        emb.no_such_thing
    assert emb.full_weight().shape == (50, 8)


def test_dtype_and_device_factory_kwargs():
    emb = TTNodeEmbedding(100, 8, ranks=4, dtype=torch.float64, device="cpu")
    assert all(c.dtype == torch.float64 for c in emb.cores)
    assert emb(torch.tensor([1])).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64])
def test_non_floating_dtype_is_refused_by_name(dtype):
    # before: torch's "Only Tensors of floating point ... can require gradients" for integers, and
    # complex cores that from_pretrained's TT-SVD refused
    with pytest.raises(TypeError, match=f"floating-point dtype.*got {dtype}"):
        TTNodeEmbedding(100, 8, ranks=4, dtype=dtype)
    with pytest.raises(TypeError, match=f"floating-point"):
        TTNodeEmbedding.from_pretrained(torch.ones(100, 8).to(dtype), ranks=2)


def test_arguments_of_the_wrong_kind_are_refused_by_name():
    # before: AttributeErrors from inside torch ("'int' object has no attribute 'device'") and
    # "new(): invalid data type 'str'"
    for kw, message in ((dict(dtype="float32"), "dtype must be a torch.dtype such as torch.float32, got 'float32'"),
                        (dict(generator=3), r"generator must be a torch.Generator, got int; for a seed, pass "
                                            r"torch.Generator\(\).manual_seed\(seed\)"),
                        (dict(node_order="abc"), r"node_order must be an integer tensor \(or array\) of shape "
                                                 r"\(100,\), got str"),
                        (dict(node_order=[[1, 2], [3]]), r"of shape \(100,\), got list")):
        with pytest.raises(TypeError, match=message):
            TTNodeEmbedding(100, 8, ranks=4, **kw)
    reversed_order = list(range(99, -1, -1))  # a plain list is an order too
    emb = TTNodeEmbedding(100, 8, ranks=4, node_order=reversed_order)
    assert emb.node_order.tolist() == reversed_order


def test_meta_device_gives_shapes_then_materialises():
    # as nn.Embedding: a module built on "meta" answers shapes (and a backward) without values,
    # then to_empty + reset_parameters (+ set_node_order) gives a working table
    perm = torch.randperm(100, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="node order cannot be kept on the meta device"):
        TTNodeEmbedding(100, 8, ranks=4, device="meta", node_order=perm)
    emb = TTNodeEmbedding(100, 8, ranks=4, device="meta")
    out = emb(torch.zeros(3, 5, dtype=torch.long, device="meta"))
    assert out.shape == (3, 5, 8) and out.device.type == "meta"
    out.sum().backward()
    assert all(c.grad.shape == c.shape for c in emb.cores)
    emb.to_empty(device="cpu")
    emb.reset_parameters(torch.Generator().manual_seed(1))
    emb.set_node_order(perm)
    rows = emb(torch.tensor([0, 99]))
    assert torch.isfinite(rows).all() and rows.abs().sum() > 0
    assert torch.allclose(rows, tt_dense_table(list(emb.cores))[perm[[0, 99]]], atol=1e-6)


def test_billion_rows_without_dense_allocation():
    """A 10^9 x 128 rank-16 table: parameters under 4 MB, 100,000 lookups, no N x D allocation."""
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    emb = TTNodeEmbedding(10**9, 128, ranks=16, num_cores=4)
    param_bytes = sum(c.numel() * c.element_size() for c in emb.cores)
    assert param_bytes < 4 * 2**20
    idx = torch.randint(0, 10**9, (100_000,))
    out = emb(idx)
    out[:10].sum().backward()
    assert out.shape == (100_000, 128) and torch.isfinite(out).all()
    torch.testing.assert_close(out[:3], emb(idx[:3]))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mib < 4096  # the dense table would be 476 GiB


@pytest.mark.parametrize("order,error,message", [
    (torch.zeros(20, dtype=torch.long), ValueError, "injective"),
    (torch.arange(20) + 100, ValueError, r"must lie in \[0, 27\)"),
    (torch.arange(19), ValueError, r"shape \(20,\)"),
    (torch.arange(20).float(), TypeError, "integer tensor"),
])
def test_load_state_dict_checks_the_node_order_like_the_constructor(order, error, message):
    # whether or not the receiving module already has an order
    for receiver_order in (None, torch.randperm(20)):
        emb = TTNodeEmbedding(20, 8, ranks=2, row_shape=[3, 3, 3], node_order=receiver_order)
        state = dict(emb.state_dict(), node_order=order)
        with pytest.raises(error, match=message):
            emb.load_state_dict(state)
    good = TTNodeEmbedding(20, 8, ranks=2, row_shape=[3, 3, 3], node_order=torch.randperm(20))
    emb = TTNodeEmbedding(20, 8, ranks=2, row_shape=[3, 3, 3], node_order=torch.arange(20))
    emb.load_state_dict(good.state_dict())
    assert torch.equal(emb.node_order, good.node_order)
    torch.testing.assert_close(emb(torch.arange(20)), good(torch.arange(20)))


# --- constructor arguments, init, generator, node order, repr, compiled checks, from_pretrained ---------

def _seeded(seed):
    return torch.Generator().manual_seed(seed)


def test_constructor_defaults():
    emb = TTNodeEmbedding(4096, 64, generator=_seeded(1))
    assert emb.ranks == (1, 16, 16, 1)  # ranks=16
    assert emb.init == "gaussian" and emb.init_scale == 1.0
    assert emb.node_order is None
    # TT-Rec's calibration: the materialised table's entries have std init_scale
    assert 0.8 < float(emb.full_weight().detach().std()) < 1.25


def test_num_cores_and_col_shape_are_honoured():
    assert len(TTNodeEmbedding(1000, 16).row_shape) == 3
    emb = TTNodeEmbedding(1000, 16, ranks=4, num_cores=2)
    assert len(emb.row_shape) == 2 and math.prod(emb.row_shape) >= 1000 and emb.ranks == (1, 4, 1)
    emb = TTNodeEmbedding(1000, 16, ranks=4, col_shape=[2, 2, 4])
    assert emb.col_shape == (2, 2, 4)
    emb = TTNodeEmbedding(1000, 16, ranks=4, row_shape=[8, 125])
    assert emb.row_shape == (8, 125)


@pytest.mark.parametrize("init", ["gaussian", "ortho"])
def test_generator_makes_the_init_reproducible(init):
    a = TTNodeEmbedding(300, 16, ranks=4, init=init, generator=_seeded(5))
    b = TTNodeEmbedding(300, 16, ranks=4, init=init, generator=_seeded(5))
    c = TTNodeEmbedding(300, 16, ranks=4, init=init, generator=_seeded(6))
    for x, y, z in zip(a.cores, b.cores, c.cores):
        assert torch.equal(x, y) and not torch.equal(x, z)
    c.reset_parameters(_seeded(5))  # reset_parameters draws from the generator it is given
    for x, z in zip(a.cores, c.cores):
        assert torch.equal(x, z)


def test_init_scale_scales_the_table():
    one = TTNodeEmbedding(60, 8, ranks=4, generator=_seeded(0), dtype=torch.float64)
    two = TTNodeEmbedding(60, 8, ranks=4, init_scale=2.0, generator=_seeded(0), dtype=torch.float64)
    torch.testing.assert_close(two.full_weight(), 2 * one.full_weight(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_ortho_init_gives_orthogonal_columns_of_norm_init_scale(scale):
    from ttgnn.ops import tt_dense_table

    emb = TTNodeEmbedding(60, 8, ranks=4, row_shape=[4, 4, 4], col_shape=[2, 2, 2], init="ortho",
                          init_scale=scale, generator=_seeded(2), dtype=torch.float64)
    table = tt_dense_table(list(emb.cores)).detach()  # all 64 rows, padding included
    torch.testing.assert_close(table.T @ table, scale**2 * torch.eye(8, dtype=torch.float64),
                               rtol=1e-10, atol=1e-10)


def test_set_node_order_none_restores_the_identity():
    emb = TTNodeEmbedding(20, 8, ranks=2, row_shape=[3, 3, 3], generator=_seeded(0))
    plain = emb(torch.arange(20)).detach()
    emb.set_node_order(torch.randperm(20, generator=_seeded(1)))
    assert emb.node_order is not None and not torch.equal(emb(torch.arange(20)).detach(), plain)
    emb.set_node_order(None)
    assert emb.node_order is None
    torch.testing.assert_close(emb(torch.arange(20)).detach(), plain)


def test_repr_names_the_node_order_only_when_there_is_one():
    emb = TTNodeEmbedding(20, 8, ranks=2, row_shape=[3, 3, 3], col_shape=[2, 2, 2])
    assert emb.extra_repr() == ("20, 8, row_shape=[3, 3, 3], col_shape=[2, 2, 2], ranks=[1, 2, 2, 1], "
                                "init='gaussian', params=48, compression=3.3x")
    emb.set_node_order(torch.randperm(20))
    assert emb.extra_repr().endswith("compression=3.3x, node_order")


def test_index_messages_in_full():
    emb = TTNodeEmbedding(100, 8, ranks=4)
    with pytest.raises(IndexError, match=r"^index 100 is out of range for TTNodeEmbedding with 100 rows "
                                         r"\(valid: 0 to 99\)$"):
        emb(torch.tensor([100]))  # a single index is checked too
    with pytest.raises(IndexError, match=r"^index -1 is out of range"):
        emb(torch.tensor(-1))
    with pytest.raises(TypeError, match=r"^indices must be a torch.Tensor, got list$"):
        emb([1, 2])
    with pytest.raises(ValueError, match=r"^node_order must be injective: two nodes map to the same TT row$"):
        emb.set_node_order(torch.zeros(100, dtype=torch.long))


@pytest.mark.parametrize("bad", [[100], [-1], [0, 100], [-5, 3]])
def test_compiled_lookup_checks_indices_on_the_device(bad):
    # Inside a compiled graph the range check runs on the device (no host sync), single indices too.
    torch._dynamo.reset()
    emb = TTNodeEmbedding(100, 8, ranks=4, generator=_seeded(0))
    # fullgraph: no graph break, so no host sync. Under mutation testing (benchmarks/mutation.py)
    # mutmut's trampolines around every method break the graph, so breaks are allowed there.
    fullgraph = "MUTANT_UNDER_TEST" not in os.environ
    compiled = torch.compile(emb, backend="eager", fullgraph=fullgraph)
    torch.testing.assert_close(compiled(torch.tensor([0, 99, 7])), emb(torch.tensor([0, 99, 7])))
    assert compiled(torch.empty(0, dtype=torch.long)).shape == (0, 8)
    with pytest.raises(RuntimeError, match="index out of range for TTNodeEmbedding with 100 rows"):
        compiled(torch.tensor(bad))


# from_pretrained (TT-SVD of an existing table); the decomposition itself is tested in test_init.py

def test_from_pretrained_is_exact_at_full_rank_and_frozen_by_default():
    weight = torch.randn(60, 8, generator=_seeded(3), dtype=torch.float64)
    # shapes other than the automatic ones (4, 4, 4) x (2, 2, 2)
    emb = TTNodeEmbedding.from_pretrained(weight, ranks=64, row_shape=[3, 4, 5], col_shape=[4, 1, 2])
    assert emb.row_shape == (3, 4, 5) and emb.col_shape == (4, 1, 2)
    assert all(c.dtype == torch.float64 and not c.requires_grad for c in emb.cores)
    torch.testing.assert_close(emb.full_weight(), weight, rtol=1e-10, atol=1e-10)
    assert emb.svd_relative_error < 1e-12
    trainable = TTNodeEmbedding.from_pretrained(weight, ranks=64, row_shape=[4, 4, 4], freeze=False)
    assert all(c.requires_grad for c in trainable.cores)


def test_from_pretrained_with_a_node_order_places_rows_and_reports_its_error(caplog):
    import logging

    weight = torch.randn(60, 8, generator=_seeded(4))
    order = torch.randperm(64, generator=_seeded(5))[:60]
    exact = TTNodeEmbedding.from_pretrained(weight, ranks=64, row_shape=[4, 4, 4], node_order=order)
    assert torch.equal(exact.node_order, order)
    torch.testing.assert_close(exact(torch.arange(60)), weight, rtol=1e-5, atol=1e-5)
    caplog.clear()  # the exact table's warning that it does not compress (its own test below)
    with caplog.at_level(logging.INFO, logger="ttgnn.embedding"):
        low = TTNodeEmbedding.from_pretrained(weight, ranks=2, num_cores=2)
    assert len(low.row_shape) == 2 and low.ranks == (1, 2, 1)
    expected = float(torch.linalg.norm(low.full_weight().double() - weight.double())
                     / torch.linalg.norm(weight.double()))
    assert 0.1 < low.svd_relative_error == pytest.approx(expected, rel=1e-9)
    assert logged(caplog, "ttgnn.embedding") == [
        f"TT-SVD of a 60x8 table at ranks [1, 2, 1]: relative error {expected:.3e}"]
    assert TTNodeEmbedding.from_pretrained(torch.zeros(60, 8), ranks=2).svd_relative_error == 0.0
    # a table of norm below 1 still reports its relative error
    small = TTNodeEmbedding.from_pretrained(weight * 1e-3, ranks=2, num_cores=2)
    assert small.svd_relative_error == pytest.approx(low.svd_relative_error, rel=1e-4)
    assert TTNodeEmbedding.from_pretrained(torch.randn(4096, 64)).ranks == (1, 16, 16, 1)  # ranks=16


def test_a_table_that_does_not_compress_is_named_in_a_warning(caplog):
    TTNodeEmbedding(1000, 16, ranks=4)  # 760 parameters for 16,000 values
    TTNodeEmbedding(100, 16, ranks=4, row_shape=[4, 5, 5], col_shape=[4, 2, 2])  # 256 for 1,600
    TTNodeEmbedding(16, 4, ranks=3, row_shape=[4, 4], col_shape=[2, 2])  # 48 for 64
    assert logged(caplog, "ttgnn.embedding") == []
    TTNodeEmbedding(100, 16)  # rank 16 capped to [1, 16, 10, 1]: 1,956 parameters
    TTNodeEmbedding.from_pretrained(torch.randn(16, 4), ranks=4, row_shape=[4, 4], col_shape=[2, 2])
    assert logged(caplog, "ttgnn.embedding") == [
        "this TT table has 1,956 parameters, no fewer than the dense 100 x 16 table it stands for "
        "(compression 0.82x): lower ranks compress it",
        "this TT table has 64 parameters, no fewer than the dense 16 x 4 table it stands for "
        "(compression 1.00x): lower ranks compress it"]
    assert all(r.levelname == "WARNING" for r in caplog.records)


@pytest.mark.parametrize("weight,error,match", [
    (torch.zeros(10), ValueError, r"^weight must be a 2-D tensor, got torch.Size\(\[10\]\)$"),
    (torch.zeros(2, 3, 4), ValueError, r"^weight must be a 2-D tensor, got torch.Size\(\[2, 3, 4\]\)$"),
    # not a tensor: said so by type (an array's message named its 2-D shape as if that were wrong)
    ([[0.0, 1.0]], TypeError, r"^weight must be a torch.Tensor \(torch.as_tensor makes one of an array\), got list$"),
    (np.ones((10, 4)), TypeError, r"^weight must be a torch.Tensor .*, got ndarray$"),
])
def test_from_pretrained_refuses_what_is_not_a_table(weight, error, match):
    with pytest.raises(error, match=match):
        TTNodeEmbedding.from_pretrained(weight)


@pytest.mark.parametrize("dtype", [torch.long, torch.bool, torch.complex64])
def test_from_pretrained_of_a_table_that_is_not_float_names_the_table(dtype):
    # The message named a dtype argument the caller never gave.
    with pytest.raises(TypeError, match=rf"^weight must be a floating-point tensor .*got {dtype}$"):
        TTNodeEmbedding.from_pretrained(torch.ones(10, 4, dtype=dtype), 4)


def test_repr_of_a_compressed_table_says_where_its_cores_came_from():
    table = torch.randn(60, 8, generator=torch.Generator().manual_seed(0))
    emb = TTNodeEmbedding.from_pretrained(table, 2)
    assert "from_pretrained (TT-SVD, relative error" in repr(emb) and "init=" not in repr(emb)
    assert f"{emb.svd_relative_error:.2e}" in repr(emb)
    assert "init='gaussian'" in repr(TTNodeEmbedding(60, 8, ranks=2))


def test_a_weight_registered_on_the_module_is_found():
    # The helpful AttributeError for .weight hid a weight buffer or a subclass's parameter.
    emb = TTNodeEmbedding(100, 8, ranks=2)
    emb.register_buffer("weight", torch.ones(3))
    assert torch.equal(emb.weight, torch.ones(3))

    class WithWeight(TTNodeEmbedding):
        def __init__(self):
            super().__init__(100, 8, ranks=2)
            self.weight = torch.nn.Parameter(torch.zeros(2))

    assert isinstance(WithWeight().weight, torch.nn.Parameter)
    with pytest.raises(AttributeError, match="TTNodeEmbedding has no .weight"):
        TTNodeEmbedding(100, 8, ranks=2).weight


def test_meta_indices_on_a_real_module_are_refused_clearly():
    emb = TTNodeEmbedding(100, 8, ranks=2)
    with pytest.raises(ValueError, match="indices are on the meta device .* the cores are on cpu"):
        emb(torch.zeros(3, dtype=torch.long, device="meta"))


def test_integer_like_sizes_are_taken_as_nn_embedding_takes_them():
    # nn.Embedding(np.int64(100), 8) works, so sizes computed with NumPy or torch
    # (labels.max() + 1, len of an array as np.int64) must too; before, only a Python int was taken
    reference = TTNodeEmbedding(1000, 16, ranks=4)
    for num_rows, dim, ranks in [(np.int64(1000), np.int32(16), np.int64(4)),
                                 (torch.tensor(1000), torch.tensor(16), torch.tensor(4))]:
        emb = TTNodeEmbedding(num_rows, dim, ranks=ranks, row_shape=[np.int64(10)] * 3)
        assert type(emb.num_embeddings) is int and type(emb.embedding_dim) is int
        assert emb.num_embeddings == 1000 and emb.embedding_dim == 16
        assert emb.row_shape == reference.row_shape and emb.ranks == reference.ranks
        assert all(type(v) is int for v in (*emb.row_shape, *emb.col_shape, *emb.ranks))
    assert TTNodeEmbedding(100, 8, ranks=2, num_cores=np.int8(3)).shape.num_cores == 3


@pytest.mark.parametrize("bad", [True, np.bool_(True), torch.tensor(True), 100.0,
                                 torch.tensor(100.0), np.float64(100), "100", torch.tensor([100, 8])])
def test_non_integer_sizes_are_refused_by_name(bad):
    with pytest.raises(TypeError, match=r"^num_embeddings must be an int, got "):
        TTNodeEmbedding(bad, 8)
    with pytest.raises(TypeError, match=r"^embedding_dim must be an int, got "):
        TTNodeEmbedding(100, bad)
    with pytest.raises(TypeError, match=r"^ranks must be an int or a sequence of ints"):
        TTNodeEmbedding(100, 8, ranks=bad)


def test_from_pretrained_of_a_table_that_requires_grad_leaves_its_graph_alone():
    # A table taken from a model being trained: no autograd graph through the SVD, no warning.
    import warnings

    source = torch.nn.Embedding(60, 8)
    scaled = source.weight * 2  # has a grad_fn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emb = TTNodeEmbedding.from_pretrained(scaled, ranks=16, freeze=False)
    assert all(core.grad_fn is None and core.requires_grad and core.is_leaf for core in emb.cores)
    torch.testing.assert_close(emb.full_weight().detach(), scaled.detach(), rtol=1e-4, atol=1e-5)
    emb(torch.arange(5)).sum().backward()
    assert source.weight.grad is None  # nothing flowed back into the source table


def test_repr_of_a_compressed_table_reinitialised_names_its_init_again():
    emb = TTNodeEmbedding.from_pretrained(torch.randn(60, 8, generator=torch.Generator().manual_seed(0)), 2)
    emb.reset_parameters()
    assert "init='gaussian'" in repr(emb) and "from_pretrained" not in repr(emb)


def test_a_float16_table_is_compressed_without_an_inf_core():
    # TT-SVD leaves the table's norm in the last core: entries near 5,000 (float16 holds up to 65,504) made it
    # inf, and the "exact at full rank" table was inf, silently
    torch.manual_seed(0)
    table = (5000 + 100 * torch.randn(1000, 8)).half()
    emb = TTNodeEmbedding.from_pretrained(table, ranks=100)
    assert all(bool(torch.isfinite(core).all()) for core in emb.cores)
    assert emb.svd_relative_error < 1e-3  # float16 rounding of the cores
    torch.testing.assert_close(emb.full_weight().float(), table.float(), rtol=2e-3, atol=0.0)
    same32 = TTNodeEmbedding.from_pretrained(table.float(), ranks=100)  # where it fits, the cores are as before
    assert float(same32.cores[-1].abs().max()) > 1e4


def test_from_pretrained_draws_nothing_from_the_global_generator_and_a_load_forgets_its_error():
    table = torch.randn(100, 8)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    emb = TTNodeEmbedding.from_pretrained(table, ranks=4)
    assert torch.equal(torch.rand(3), expected)  # as after nn.Embedding.from_pretrained
    assert "from_pretrained" in repr(emb)
    emb.load_state_dict(TTNodeEmbedding(100, 8, ranks=4).state_dict())  # other cores: the error is not theirs
    assert not hasattr(emb, "svd_relative_error") and "from_pretrained" not in repr(emb)


def test_a_node_order_is_not_loaded_into_a_meta_module_where_it_would_be_lost():
    # copied into a meta buffer, it was gone; to_empty() then left garbage rows that lookups read
    source = TTNodeEmbedding(1000, 16, ranks=4, node_order=torch.randperm(1000))
    meta = TTNodeEmbedding(1000, 16, ranks=4, device="meta")
    with pytest.raises(ValueError, match="a node order cannot be loaded into a TTNodeEmbedding on the meta device"):
        meta.load_state_dict(source.state_dict())
    meta.load_state_dict(source.state_dict(), assign=True)  # takes the tensors themselves: kept
    assert torch.equal(meta.node_order, source.node_order)


def test_functional_call_takes_the_parameters_and_buffers_as_documented():
    # the state dict's row-count entry is no parameter or buffer: functional_call refuses the state dict
    # (docs/embedding.md), and takes the parameters and buffers
    emb = TTNodeEmbedding(100, 8, ranks=4, node_order=torch.randperm(100))
    rows = torch.tensor([3, 7, 99])
    doubled = {name: 2 * p.detach() if p.is_floating_point() else p
               for name, p in {**dict(emb.named_parameters()), **dict(emb.named_buffers())}.items()}
    out = torch.func.functional_call(emb, doubled, (rows,))
    torch.testing.assert_close(out, emb(rows) * 2 ** len(emb.cores))
    with pytest.raises((TypeError, RuntimeError)):
        torch.func.functional_call(emb, emb.state_dict(), (rows,))
