"""The compiled CPU graph kernels (ttgnn.graph_ops) against the tensor layers' pure-PyTorch path.

The reference is the layers' own path inside ``graph_ops.reference_only()`` (torch's CSR products
and scatters), itself checked against DGL in test_layers.py. Kernel tests fail (not skip) under
``$CI`` when the extension did not build; each CPU instruction-set path is compared where the CPU
runs it.
"""
import pytest
import torch

from extension import require_kernels
from ttgnn import graph_ops
from ttgnn.layers import SparseGraph, TensorGATConv, TensorSAGEConv, aggregate, gat_attention


@pytest.fixture(autouse=True)
def _kernels():
    require_kernels("cpu")
    assert graph_ops.available(), "ttgnn._C loaded without the graph ops: rebuild it"


def random_structure(num_dst=40, num_src=55, num_edges=260, seed=0, empty=(3, 17)) -> SparseGraph:
    """A CSR graph from ``num_src`` sources to ``num_dst`` destinations (a block when they differ);
    the destinations in ``empty`` have no in-edges, the last source has no out-edge."""
    gen = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    src = torch.randint(0, num_src - 1, (num_edges,), generator=gen)
    keep = ~torch.isin(dst, torch.tensor(list(empty), dtype=torch.long))
    dst, src = dst[keep], src[keep]
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_dst + 1, dtype=torch.long)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=indptr[1:])
    return SparseGraph(indptr, src[order], num_src)


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-6)


def _aggregate_and_grads(graph, weight, x, grad_out):
    weight, x = weight.clone().requires_grad_(), x.clone().requires_grad_()
    out = aggregate(graph, weight, x)
    out.backward(grad_out)
    return out.detach(), weight.grad, x.grad


def _attention_and_grads(graph, score_src, score_dst, grad, slope=0.2):
    score_src, score_dst = score_src.clone().requires_grad_(), score_dst.clone().requires_grad_()
    out = gat_attention(graph, score_src, score_dst, slope)
    out.backward(grad)
    return out.detach(), score_src.grad, score_dst.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads,width", [(1, 1), (1, 37), (4, 8), (3, 40)])
def test_aggregate_equals_the_reference(cpu_path, dtype, heads, width):
    graph = random_structure()
    gen = torch.Generator().manual_seed(1)
    weight = torch.rand(graph.num_edges, heads, generator=gen, dtype=dtype)
    x = torch.randn(graph.num_src, heads, width, generator=gen, dtype=dtype)
    grad_out = torch.randn(graph.num_dst, heads, width, generator=gen, dtype=dtype)
    assert graph_ops.applies(weight, x)
    got = _aggregate_and_grads(graph, weight, x, grad_out)
    with graph_ops.reference_only():
        assert not graph_ops.applies(weight, x)
        want = _aggregate_and_grads(graph, weight, x, grad_out)
    for name, g, w in zip(("out", "grad weight", "grad x"), got, want):
        torch.testing.assert_close(g, w, **_tol(dtype), msg=lambda m: f"{name}: {m}")
    assert not got[0][3].any() and not got[2][-1].any()  # no in-edges / no out-edges: zeros


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads", [1, 4])
def test_attention_equals_the_reference(cpu_path, dtype, heads):
    graph = random_structure(seed=2)
    gen = torch.Generator().manual_seed(3)
    score_src = 3 * torch.randn(graph.num_src, heads, generator=gen, dtype=dtype)
    score_dst = 3 * torch.randn(graph.num_dst, heads, generator=gen, dtype=dtype)
    grad = torch.randn(graph.num_edges, heads, generator=gen, dtype=dtype)
    got = _attention_and_grads(graph, score_src, score_dst, grad)
    with graph_ops.reference_only():
        want = _attention_and_grads(graph, score_src, score_dst, grad)
    for name, g, w in zip(("attention", "grad score_src", "grad score_dst"), got, want):
        torch.testing.assert_close(g, w, **_tol(dtype), msg=lambda m: f"{name}: {m}")
    totals = torch.zeros(graph.num_dst, heads, dtype=dtype).index_add_(0, graph.dst, got[0])
    has_edges = graph.in_degrees() > 0
    torch.testing.assert_close(totals[has_edges], torch.ones(int(has_edges.sum()), heads, dtype=dtype))


def test_attention_of_very_negative_and_large_scores_is_finite():
    graph = random_structure(seed=4)
    score_src = torch.full((graph.num_src, 2), -1000.0)
    score_dst = torch.linspace(-500.0, 500.0, graph.num_dst).unsqueeze(1).repeat(1, 2)
    out = gat_attention(graph, score_src, score_dst)
    assert torch.isfinite(out).all()
    with graph_ops.reference_only():
        torch.testing.assert_close(out, gat_attention(graph, score_src, score_dst))


def test_gradients_pass_gradcheck_in_float64():
    graph = random_structure(num_dst=12, num_src=15, num_edges=50, seed=5, empty=(2,))
    gen = torch.Generator().manual_seed(6)
    weight = torch.rand(graph.num_edges, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    x = torch.randn(graph.num_src, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert graph_ops.applies(weight, x)
    assert torch.autograd.gradcheck(lambda w, v: aggregate(graph, w, v), (weight, x))
    score_src = torch.randn(graph.num_src, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    score_dst = torch.randn(graph.num_dst, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, d: gat_attention(graph, s, d, 0.2), (score_src, score_dst))


def test_second_derivatives_and_forward_mode_equal_the_reference():
    graph = random_structure(num_dst=12, num_src=15, num_edges=50, seed=14, empty=(2,))
    gen = torch.Generator().manual_seed(15)
    score_src = torch.randn(graph.num_src, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    score_dst = torch.randn(graph.num_dst, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda s, d: gat_attention(graph, s, d, 0.2), (score_src, score_dst))

    def second(kernels: bool):
        with graph_ops.reference_only() if not kernels else torch.enable_grad():
            (first,) = torch.autograd.grad(gat_attention(graph, score_src, score_dst).pow(3).sum(), score_src,
                                           create_graph=True)
            return torch.autograd.grad(first.square().sum(), score_dst)[0]

    torch.testing.assert_close(second(True), second(False))

    def through_dependent_scores(kernels: bool):  # score_dst computed from score_src: partials, not totals
        with graph_ops.reference_only() if not kernels else torch.enable_grad():
            scores = gat_attention(graph, score_src, score_src[:graph.num_dst] * 0.5)
            (first,) = torch.autograd.grad(scores.pow(3).sum(), score_src, create_graph=True)
            return first.detach(), torch.autograd.grad(first.square().sum(), score_src)[0]

    for got, want in zip(through_dependent_scores(True), through_dependent_scores(False)):
        torch.testing.assert_close(got, want)
    tangent = torch.randn(graph.num_src, 2, generator=gen, dtype=torch.float64)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(score_src.detach(), tangent)
        assert not graph_ops.applies(dual)
        out = torch.autograd.forward_ad.unpack_dual(gat_attention(graph, dual, score_dst.detach()))
    with graph_ops.reference_only(), torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(score_src.detach(), tangent)
        want = torch.autograd.forward_ad.unpack_dual(gat_attention(graph, dual, score_dst.detach()))
    torch.testing.assert_close(out.tangent, want.tangent)


def test_reference_only_holds_for_its_thread_alone():
    import threading

    inside, seen = threading.Event(), []
    done = threading.Event()

    def hold():
        with graph_ops.reference_only():
            seen.append(graph_ops.applies(torch.zeros(1)))
            inside.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(10)
        assert graph_ops.applies(torch.zeros(1))  # this thread is outside the block
    finally:
        done.set()
        thread.join()
    assert seen == [False]


def test_results_do_not_depend_on_the_thread_count():
    graph = random_structure(num_dst=400, num_src=450, num_edges=6000, seed=7)
    gen = torch.Generator().manual_seed(8)
    weight = torch.rand(graph.num_edges, 4, generator=gen)
    x = torch.randn(graph.num_src, 4, 16, generator=gen)
    grad_out = torch.randn(graph.num_dst, 4, 16, generator=gen)
    score_src, score_dst = torch.randn(graph.num_src, 4, generator=gen), torch.randn(graph.num_dst, 4, generator=gen)
    grad = torch.randn(graph.num_edges, 4, generator=gen)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(_aggregate_and_grads(graph, weight, x, grad_out)
                           + _attention_and_grads(graph, score_src, score_dst, grad))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


def test_a_graph_without_edges_and_one_without_destinations():
    no_edges = SparseGraph(torch.zeros(5, dtype=torch.long), torch.zeros(0, dtype=torch.long), 6)
    x = torch.randn(6, 2, 3)
    out, grad_weight, grad_x = _aggregate_and_grads(no_edges, torch.zeros(0, 2), x, torch.ones(4, 2, 3))
    assert out.shape == (4, 2, 3) and not out.any() and not grad_x.any() and grad_weight.shape == (0, 2)
    attention, grad_src, grad_dst = _attention_and_grads(no_edges, torch.randn(6, 2), torch.randn(4, 2),
                                                         torch.zeros(0, 2))
    assert attention.shape == (0, 2) and not grad_src.any() and not grad_dst.any()
    no_dst = SparseGraph(torch.zeros(1, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3)
    assert aggregate(no_dst, torch.zeros(0, 1), torch.randn(3, 1, 4)).shape == (0, 1, 4)


@pytest.mark.parametrize("residual", [False, True])
def test_layers_run_the_kernels_on_the_cpu_and_match_the_reference(monkeypatch, residual):
    graph = random_structure(seed=9)
    calls = []
    for name in ("csr_aggregate", "csr_edge_dot", "gat_attention", "gat_attention_backward"):
        original = getattr(graph_ops, name)
        monkeypatch.setattr(graph_ops, name,
                            lambda *a, _name=name, _f=original, **k: calls.append(_name) or _f(*a, **k))
    torch.manual_seed(0)
    gat = TensorGATConv(16, 8, 3, residual=residual)
    sage = TensorSAGEConv(16, 8)
    h = torch.randn(graph.num_src, 16, requires_grad=True)

    def run():
        h.grad = None
        out = (gat(graph, h).square().sum() + sage(graph, h).square().sum())
        out.backward()
        return out.detach(), h.grad.clone(), gat.attn_l.grad.clone(), gat.fc.weight.grad.clone()

    got = run()
    assert sorted(set(calls)) == ["csr_aggregate", "csr_edge_dot", "gat_attention", "gat_attention_backward"]
    calls.clear()
    gat.zero_grad()
    with graph_ops.reference_only():
        want = run()
    assert calls == []
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=2e-5, atol=2e-5)


def test_other_dtypes_and_devices_take_the_reference():
    assert graph_ops.applies(torch.zeros(2), torch.zeros(3)) and graph_ops.applies(torch.zeros(2, dtype=torch.float64))
    assert not graph_ops.applies(torch.zeros(2, dtype=torch.bfloat16))
    assert not graph_ops.applies(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    assert not graph_ops.applies(torch.zeros(2, device="meta"))
    assert not graph_ops.applies()


def _ops_args(graph, heads=2, width=3):
    gen = torch.Generator().manual_seed(11)
    return dict(weight=torch.rand(graph.num_edges, heads, generator=gen),
                x=torch.randn(graph.num_src, heads, width, generator=gen),
                a=torch.randn(graph.num_dst, heads, width, generator=gen),
                score_src=torch.randn(graph.num_src, heads, generator=gen),
                score_dst=torch.randn(graph.num_dst, heads, generator=gen))


def test_the_ops_pass_torch_library_opcheck():
    graph = random_structure(num_dst=10, num_src=14, num_edges=40, seed=12, empty=(1,))
    t = _ops_args(graph)
    attention = graph_ops.gat_attention(graph.indptr, graph.indices, t["score_src"], t["score_dst"], 0.2)
    cases = [
        (torch.ops.ttgnn.csr_aggregate.default, (graph.indptr, graph.indices, t["weight"], None, t["x"])),
        (torch.ops.ttgnn.csr_aggregate.default, (graph.t_indptr, graph.t_indices, t["weight"], graph.t_perm, t["a"])),
        (torch.ops.ttgnn.csr_edge_dot.default, (graph.indptr, graph.indices, t["a"], t["x"])),
        (torch.ops.ttgnn.gat_attention.default, (graph.indptr, graph.indices, t["score_src"], t["score_dst"], 0.2)),
        (torch.ops.ttgnn.gat_attention_backward.default,
         (torch.randn_like(attention), attention, graph.indptr, graph.indices, graph.t_indptr, graph.t_perm,
          t["score_src"], t["score_dst"], 0.2)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


def test_bad_inputs_are_refused_by_name():
    graph = random_structure(num_dst=10, num_src=14, num_edges=40, seed=13, empty=())
    t = _ops_args(graph)
    indptr, indices = graph.indptr, graph.indices
    aggregate_op = torch.ops.ttgnn.csr_aggregate

    def refused(pattern, call):
        with pytest.raises(RuntimeError, match=pattern):
            call()

    wrapping = torch.tensor([0, 3 * 2 ** 61, -3 * 2 ** 61] + [graph.num_edges] * (graph.num_dst - 2))
    refused(r"the indptr of the graph must lie in \[0, \d+\)",  # differences that wrap around int64
            lambda: aggregate_op(wrapping, indices, t["weight"], None, t["x"]))
    refused(r"ttgnn::gat_attention: the indptr of the graph must lie in",
            lambda: torch.ops.ttgnn.gat_attention(wrapping, indices, t["score_src"], t["score_dst"], 0.2))
    bad_indices = indices.clone()
    bad_indices[5] = 14
    refused(r"ttgnn::csr_aggregate: the indices of the graph must lie in \[0, 14\), got values in \[0, 14\]",
            lambda: aggregate_op(indptr, bad_indices, t["weight"], None, t["x"]))
    short = indptr.clone()
    short[-1] -= 1
    refused(r"the indptr of the graph must run from 0 to E = \d+, got 0 \.\. \d+",
            lambda: aggregate_op(short, indices, t["weight"], None, t["x"]))
    unsorted = indptr.clone()
    unsorted[4] = unsorted[6] + 1
    refused("the indptr of the graph must be non-decreasing",
            lambda: aggregate_op(unsorted, indices, t["weight"], None, t["x"]))
    refused("the indptr and indices of the graph must be int64, got Int and Long",
            lambda: aggregate_op(indptr.int(), indices, t["weight"], None, t["x"]))
    refused(r"weight has dtype Double but the features have Float",
            lambda: aggregate_op(indptr, indices, t["weight"].double(), None, t["x"]))
    refused(r"weight has shape \[\d+, 3\]; its dimension 1 must be 2",
            lambda: aggregate_op(indptr, indices, torch.rand(graph.num_edges, 3), None, t["x"]))
    refused(r"weight must have one row per edge \(\d+\), got shape \[5, 2\]",
            lambda: aggregate_op(indptr, indices, torch.rand(5, 2), None, t["x"]))
    refused(r"the values of edge_ids must lie in \[0, 5\)",
            lambda: aggregate_op(indptr, indices, torch.rand(5, 2), torch.arange(graph.num_edges), t["x"]))
    refused("x must have 3 dimensions", lambda: aggregate_op(indptr, indices, t["weight"], None, t["x"][:, 0]))
    refused("x must be float32 or float64, got Half",
            lambda: aggregate_op(indptr, indices, t["weight"], None, t["x"].half()))
    refused(r"ttgnn::csr_edge_dot: a has shape \[9, 2, 3\]; its dimension 0 must be 10",
            lambda: torch.ops.ttgnn.csr_edge_dot(indptr, indices, t["a"][:9], t["x"]))
    refused(r"ttgnn::gat_attention: score_dst has shape \[10, 3\]; its dimension 1 must be 2",
            lambda: torch.ops.ttgnn.gat_attention(indptr, indices, t["score_src"], torch.randn(10, 3), 0.2))
    refused(r"ttgnn::gat_attention_backward: the transpose must have 14 sources",
            lambda: torch.ops.ttgnn.gat_attention_backward(
                torch.randn(graph.num_edges, 2), torch.rand(graph.num_edges, 2), indptr, indices, indptr,
                torch.arange(graph.num_edges), t["score_src"], t["score_dst"], 0.2))


def test_a_transpose_that_does_not_fit_the_graph_is_refused():
    # only the transpose's ranges and order were checked: an edge listed twice, or under another source,
    # gave wrong gradients of the source scores silently
    graph = random_structure(num_dst=10, num_src=14, num_edges=40, seed=13, empty=())
    t = _ops_args(graph)
    args = (torch.randn(graph.num_edges, 2), torch.rand(graph.num_edges, 2), graph.indptr, graph.indices,
            graph.t_indptr)
    scores = (t["score_src"], t["score_dst"], 0.2)
    graph_ops.gat_attention_backward(*args, graph.t_perm, *scores)  # the graph's own: accepted
    twice = graph.t_perm.clone()
    twice[1] = twice[0]
    with pytest.raises(RuntimeError, match="t_perm must list every edge once"):
        graph_ops.gat_attention_backward(*args, twice, *scores)
    sources = graph.indices[graph.t_perm]
    first = int(torch.nonzero(sources != sources[0])[0])  # an edge of another source: swapped in
    swapped = graph.t_perm.clone()
    swapped[[0, first]] = swapped[[first, 0]]
    with pytest.raises(RuntimeError, match="t_perm must list under each source the edges from it"):
        graph_ops.gat_attention_backward(*args, swapped, *scores)
    graph_ops.gat_attention_backward(*args, swapped, *scores, check_transpose=False)  # trusted when asked


def test_torch_compile_gives_the_layers_results():
    graph = random_structure(num_dst=12, num_src=15, num_edges=50, seed=16)
    gen = torch.Generator().manual_seed(17)
    score_src = torch.randn(graph.num_src, 2, generator=gen, requires_grad=True)
    score_dst = torch.randn(graph.num_dst, 2, generator=gen, requires_grad=True)
    x = torch.randn(graph.num_src, 2, 5, generator=gen, requires_grad=True)

    def layer(s, d, v):
        return aggregate(graph, gat_attention(graph, s, d), v)

    # traced graphs take the reference path (the kernels cannot be guarded against torch.func there)
    compiled = torch.compile(layer, backend="eager")
    out = compiled(score_src, score_dst, x)
    # under torch.func in a compiled function the kernels (no batching rule) must not run: the reference does
    def attention_loss(s):
        return gat_attention(graph, s, score_dst.detach()).pow(3).sum()

    with graph_ops.reference_only():
        want_grad = torch.func.grad(attention_loss)(score_src.detach())
    got_grad = torch.compile(torch.func.grad(attention_loss), backend="eager")(score_src.detach())
    torch.testing.assert_close(got_grad, want_grad)
    assert got_grad.abs().sum() > 0
    grads = torch.autograd.grad(out.square().sum(), (score_src, score_dst, x))
    want = layer(score_src, score_dst, x)
    torch.testing.assert_close(out, want)
    for got, expected in zip(grads, torch.autograd.grad(want.square().sum(), (score_src, score_dst, x))):
        torch.testing.assert_close(got, expected)


def test_fake_kernels_are_registered_at_import():
    import subprocess
    import sys

    code = """
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from ttgnn import graph_ops
indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1])
with FakeTensorMode() as mode:
    out = graph_ops.csr_aggregate(mode.from_tensor(indptr), mode.from_tensor(indices), torch.empty(3, 2), None,
                                  torch.empty(3, 2, 4))
print(tuple(out.shape))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["(2,", "2,", "4)"]


def _csr_matrix(graph: SparseGraph, dtype=torch.float32) -> torch.Tensor:
    values = torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(18), dtype=dtype)
    return torch.sparse_csr_tensor(graph.indptr, graph.indices, values, (graph.num_dst, graph.num_src))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_csr_matmul_takes_the_kernel_where_it_applies_and_equals_torch(monkeypatch, dtype):
    graph = random_structure(seed=19)
    matrix = _csr_matrix(graph, dtype)
    wide = torch.randn(graph.num_src, graph_ops.CSR_MATMUL_MIN_WIDTH, dtype=dtype)
    calls = []
    original = graph_ops.csr_aggregate
    monkeypatch.setattr(graph_ops, "csr_aggregate", lambda *a: calls.append(1) or original(*a))
    got = graph_ops.csr_matmul(matrix, wide)
    assert calls == [1]
    torch.testing.assert_close(got, torch.sparse.mm(matrix, wide), **_tol(dtype))
    assert not got[3].any()  # a destination without edges
    # torch's product: a narrow signal, a gradient wanted, int32 indices, inside reference_only
    graph_ops.csr_matmul(matrix, wide[:, :graph_ops.CSR_MATMUL_MIN_WIDTH - 1])
    wanting = wide.clone().requires_grad_()
    graph_ops.csr_matmul(matrix, wanting).sum().backward()
    torch.testing.assert_close(wanting.grad, torch.sparse.mm(matrix.t(), torch.ones_like(got)), **_tol(dtype))
    int32 = torch.sparse_csr_tensor(graph.indptr.int(), graph.indices.int(), matrix.values(), matrix.shape)
    graph_ops.csr_matmul(int32, wide)
    with pytest.raises(RuntimeError):  # shapes that do not multiply: torch's product refuses them
        graph_ops.csr_matmul(matrix, torch.randn(graph.num_src + 3, graph_ops.CSR_MATMUL_MIN_WIDTH, dtype=dtype))
    with graph_ops.reference_only():
        graph_ops.csr_matmul(matrix, wide)
    assert calls == [1]


def test_label_propagation_runs_the_kernel_and_equals_torchs_product(monkeypatch):
    from ttgnn.smoothing import propagate

    graph = random_structure(num_dst=55, seed=20)
    matrix = _csr_matrix(graph)
    signal = torch.rand(graph.num_src, 30, generator=torch.Generator().manual_seed(21))
    clamp = torch.tensor([0, 5, 9])
    calls = []
    original = graph_ops.csr_aggregate
    monkeypatch.setattr(graph_ops, "csr_aggregate", lambda *a: calls.append(1) or original(*a))
    got = propagate(matrix, signal, 0.8, 10, clamp, signal[clamp])
    assert len(calls) == 10
    with graph_ops.reference_only():
        want = propagate(matrix, signal, 0.8, 10, clamp, signal[clamp])
    torch.testing.assert_close(got, want)
    assert not torch.equal(got, signal)
