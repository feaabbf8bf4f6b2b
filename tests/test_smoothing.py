"""Tests of ttgnn.smoothing (Correct and Smooth) against dense closed forms and on planted graphs."""
import numpy as np
import pytest
import torch

from ttgnn.data import planted_partition
from ttgnn.smoothing import correct_and_smooth, normalized_adjacency, propagate, spread_labels, tune_correct_and_smooth


def _dense_normalized(indptr, indices, n):
    a = np.zeros((n, n))
    for row in range(n):
        a[row, indices[indptr[row]:indptr[row + 1]]] = 1.0
    deg = a.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0)
    return inv[:, None] * a * inv[None, :]


@pytest.fixture(scope="module")
def path_graph():
    # 0-1-2-3 path plus an isolated node 4 (symmetric CSR, no self-loops)
    indptr = np.array([0, 1, 3, 5, 6, 6])
    indices = np.array([1, 0, 2, 1, 3, 2])
    return indptr, indices, 5


def test_normalized_adjacency_matches_dense(path_graph):
    indptr, indices, n = path_graph
    adj = normalized_adjacency(indptr, indices, n)
    expected = _dense_normalized(indptr, indices, n)
    np.testing.assert_allclose(adj.to_dense().numpy(), expected, rtol=1e-6, atol=0)
    assert torch.count_nonzero(adj.to_dense()[4]) == 0  # isolated node: zero row, no NaN


def test_normalized_adjacency_rejects_bad_indptr():
    with pytest.raises(ValueError, match="indptr"):
        normalized_adjacency(np.array([0, 1]), np.array([0]), 3)


def test_propagate_converges_to_closed_form(path_graph):
    indptr, indices, n = path_graph
    adj = normalized_adjacency(indptr, indices, n)
    s = torch.from_numpy(_dense_normalized(indptr, indices, n)).double()
    x0 = torch.randn(n, 3, generator=torch.Generator().manual_seed(0)).double()
    alpha = 0.6
    closed = (1 - alpha) * torch.linalg.solve(torch.eye(n, dtype=torch.float64) - alpha * s, x0)
    out = propagate(adj, x0.float(), alpha, num_iterations=200)
    torch.testing.assert_close(out.double(), closed, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(propagate(adj, x0.float(), 0.0, 10), x0.float())


def test_propagate_clamps_and_validates(path_graph):
    indptr, indices, n = path_graph
    adj = normalized_adjacency(indptr, indices, n)
    x0 = torch.zeros(n, 2)
    nodes = torch.tensor([0])
    values = torch.tensor([[1.0, 0.0]])
    out = propagate(adj, x0, 0.9, 30, clamp_nodes=nodes, clamp_values=values)
    torch.testing.assert_close(out[0], values[0])
    assert out[1, 0] > out[2, 0] > out[3, 0] > 0  # decays with distance from the clamped node
    assert out[4].abs().sum() == 0  # unreachable
    with pytest.raises(ValueError, match="alpha"):
        propagate(adj, x0, 1.5, 3)


@pytest.fixture(scope="module")
def planted():
    return planted_partition(600, num_classes=3, avg_degree=10, homophily=0.9, seed=1)


def test_correct_and_smooth_repairs_uninformative_predictions(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx, test_idx = planted.split["train"], planted.split["test"]
    labels = planted.labels
    probs = torch.full((planted.num_nodes, 3), 1.0 / 3)  # a base model that knows nothing
    scores = correct_and_smooth(probs, adj, train_idx, labels[train_idx])
    acc = float((scores.argmax(1)[test_idx] == labels[test_idx]).float().mean())
    assert acc > 0.8  # homophily 0.9: propagating the training labels recovers the blocks (chance 1/3)


@pytest.mark.data
def test_correct_and_smooth_of_a_blank_model_is_label_propagation_on_arxiv(data_root):
    # From uniform predictions C&S spreads the training labels alone (label propagation, 0.68 test on
    # arxiv in the C&S paper with its own settings): on the real graph, with the default strengths,
    # 10 steps and the dataset's own adjacency, measured 0.661 valid and 0.625 test (50 steps: 0.655 and
    # 0.617, five times the time); chance is below 0.07.
    from ttgnn.data import load_dataset

    arxiv = load_dataset("ogbn-arxiv", data_root)
    labels, split = arxiv.labels, arxiv.split
    probs = torch.full((arxiv.num_nodes, arxiv.num_classes), 1.0 / arxiv.num_classes)
    pred = correct_and_smooth(probs, arxiv.normalized_adjacency(), split["train"], labels[split["train"]],
                              num_iterations=10).argmax(1)
    valid, test = (float((pred[split[k]] == labels[split[k]]).float().mean()) for k in ("valid", "test"))
    assert valid > 0.63 and test > 0.59


def test_correct_and_smooth_keeps_a_perfect_model(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx, labels = planted.split["train"], planted.labels
    probs = torch.nn.functional.one_hot(labels, 3).float()
    scores = correct_and_smooth(probs, adj, train_idx, labels[train_idx])
    assert torch.equal(scores.argmax(1), labels)


def test_correct_and_smooth_rejects_bad_labels(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    probs = torch.full((planted.num_nodes, 3), 1.0 / 3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        correct_and_smooth(probs, adj, torch.tensor([0, 1]), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        correct_and_smooth(probs[0], adj, torch.tensor([0]), torch.tensor([0]))


@pytest.mark.parametrize("case, message", [
    ("rows", r"adjacency must be \(300, 300\) for 300 rows of probs, got \(600, 600\)"),
    ("nan", r"probs holds 2 non-finite value\(s\) \(NaN or inf\)"),
    ("index_high", r"train_idx must lie in \[0, 600\), got \[0, 600\]"),
    ("index_negative", r"train_idx must lie in \[0, 600\), got \[-1, 1\]"),
    ("index_float", r"train_idx must be \(L,\) node ids, got shape \(2,\) \(torch.float32\)"),
    ("lengths", r"train_labels must have train_idx's shape \(2,\), got \(3,\)"),
])
def test_correct_and_smooth_names_inputs_that_do_not_fit_together(planted, case, message):
    # Each used to end in an IndexError or RuntimeError from inside, or (NaN) in scores of NaN.
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    probs = torch.full((planted.num_nodes, 3), 1.0 / 3)
    idx, labels = torch.tensor([0, 1]), torch.tensor([0, 2])
    if case == "rows":
        probs = probs[:300]
    elif case == "nan":
        probs[5] = torch.tensor([float("nan"), float("inf"), 0.5])
    elif case == "index_high":
        idx = torch.tensor([0, 600])
    elif case == "index_negative":
        idx = torch.tensor([-1, 1])
    elif case == "index_float":
        idx = idx.float()
    else:
        labels = torch.tensor([0, 2, 1])
    with pytest.raises(ValueError, match=message):
        correct_and_smooth(probs, adj, idx, labels)


def test_tune_correct_and_smooth_refuses_non_finite_logits(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    logits = torch.zeros(planted.num_nodes, 3)
    logits[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"probs holds 3 non-finite value\(s\)"):
        tune_correct_and_smooth(logits, adj, planted.labels, planted.split["train"], planted.split["valid"])


@pytest.mark.parametrize("iterations", [-1, 2.0, True])
def test_propagate_refuses_a_count_of_iterations_that_is_not_a_whole_number(path_graph, iterations):
    adj = normalized_adjacency(*path_graph)
    with pytest.raises(ValueError, match=f"num_iterations must be an integer >= 0, got {iterations!r}"):
        propagate(adj, torch.ones(5, 2), 0.5, iterations)


def test_tune_selects_on_validation_only(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    labels, split = planted.labels, planted.split
    logits = torch.randn(planted.num_nodes, 3, generator=torch.Generator().manual_seed(0))
    grid = dict(correct_alphas=(0.3, 0.9), smooth_alphas=(0.0, 0.8))
    result = tune_correct_and_smooth(logits, adj, labels, split["train"], split["valid"], **grid)
    probs = torch.softmax(logits, 1)
    best = 0.0
    for ca in grid["correct_alphas"]:
        for sa in grid["smooth_alphas"]:
            pred = correct_and_smooth(probs, adj, split["train"], labels[split["train"]], correct_alpha=ca,
                                      smooth_alpha=sa).argmax(1)
            best = max(best, float((pred[split["valid"]] == labels[split["valid"]]).float().mean()))
    assert result.valid_acc == pytest.approx(best)
    assert result.valid_acc > 0.8  # random logits, yet the propagated training labels recover the blocks
    # the test labels never enter: changing them leaves the prediction unchanged
    scrambled = labels.clone()
    scrambled[split["test"]] = (scrambled[split["test"]] + 1) % 3
    again = tune_correct_and_smooth(logits, adj, scrambled, split["train"], split["valid"], **grid)
    assert torch.equal(again.pred, result.pred)


def _dense_correct_and_smooth(probs, adjacency, train_idx, train_labels, correct_alpha, smooth_alpha, iterations):
    """The paper's two steps in float64 with a dense adjacency (the reference of the tests below)."""
    s = adjacency.to_dense().double()
    probs = probs.double()
    truth = torch.nn.functional.one_hot(train_labels, probs.shape[1]).double()

    def spread(x0, alpha):
        x = x0
        for _ in range(iterations):
            x = alpha * s @ x + (1 - alpha) * x0
        return x

    error = torch.zeros_like(probs)
    error[train_idx] = truth - probs[train_idx]
    propagated = spread(error, correct_alpha)
    sigma = error[train_idx].abs().sum(1).mean()
    norm = propagated.abs().sum(1, keepdim=True)
    scaled = torch.where(norm > 0, sigma * propagated / norm.clamp_min(1e-300), torch.zeros_like(propagated))
    corrected = (probs + scaled).clamp(0.0, 1.0)
    start = corrected.clone()
    start[train_idx] = truth  # training nodes are reset to their labels before smoothing
    return spread(start, smooth_alpha)


def _confidently_wrong_on_training(planted):
    """Random probabilities, except the training nodes, which put all mass on a wrong class."""
    probs = torch.softmax(torch.randn(planted.num_nodes, 3, generator=torch.Generator().manual_seed(2)), 1)
    train_idx = planted.split["train"]
    wrong = (planted.labels[train_idx] + 1) % 3
    probs[train_idx] = torch.nn.functional.one_hot(wrong, 3).float()
    return probs


@pytest.mark.parametrize("correct_alpha, smooth_alpha", [(0.9, 0.8), (0.5, 0.3), (0.0, 0.95)])
def test_correct_and_smooth_matches_dense_reference(planted, correct_alpha, smooth_alpha):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx, labels = planted.split["train"], planted.labels
    probs = _confidently_wrong_on_training(planted)
    scores = correct_and_smooth(probs, adj, train_idx, labels[train_idx], correct_alpha=correct_alpha,
                                smooth_alpha=smooth_alpha, num_iterations=20)
    expected = _dense_correct_and_smooth(probs, adj, train_idx, labels[train_idx], correct_alpha, smooth_alpha, 20)
    torch.testing.assert_close(scores.double(), expected, rtol=1e-5, atol=1e-5)


def test_smoothing_starts_from_the_training_labels(planted):
    # Without propagation (smooth_alpha 0) the smoothing step returns its start: the training
    # nodes hold exactly their one-hot labels, whatever the base model said about them.
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx, labels = planted.split["train"], planted.labels
    probs = _confidently_wrong_on_training(planted)
    scores = correct_and_smooth(probs, adj, train_idx, labels[train_idx], correct_alpha=0.2, smooth_alpha=0.0)
    assert torch.equal(scores[train_idx], torch.nn.functional.one_hot(labels[train_idx], 3).float())
    others = torch.ones(planted.num_nodes, dtype=torch.bool)
    others[train_idx] = False
    assert not torch.equal(scores[others].argmax(1), labels[others])  # the rest is only corrected


def test_normalized_adjacency_accepts_any_integer_arrays(path_graph):
    # int32 and int64 index arrays, mixed: the result is the same int64 CSR tensor.
    indptr, indices, n = path_graph
    expected = normalized_adjacency(indptr, indices, n)
    for ptr_dtype, idx_dtype in [(np.int32, np.int64), (np.int64, np.int32), (np.int32, np.int32)]:
        adj = normalized_adjacency(indptr.astype(ptr_dtype), indices.astype(idx_dtype), n)
        assert adj.crow_indices().dtype == adj.col_indices().dtype == torch.int64
        torch.testing.assert_close(adj.to_dense(), expected.to_dense(), rtol=0, atol=0)


def test_normalized_adjacency_isolated_nodes_raise_no_warning(path_graph):
    import warnings

    indptr, indices, n = path_graph
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no division by a zero degree
        adj = normalized_adjacency(indptr, indices, n)
    assert torch.isfinite(adj.values()).all()


def test_normalized_adjacency_error_names_the_expected_shape():
    with pytest.raises(ValueError, match=r"indptr must have shape \(4,\), got \(2,\)"):
        normalized_adjacency(np.array([0, 1]), np.array([0]), 3)


def test_propagate_accepts_the_closed_interval(path_graph):
    indptr, indices, n = path_graph
    adj = normalized_adjacency(indptr, indices, n)
    x0 = torch.randn(n, 2, generator=torch.Generator().manual_seed(4))
    # alpha = 1: pure propagation, S^k X_0
    s = adj.to_dense()
    torch.testing.assert_close(propagate(adj, x0, 1.0, 3), s @ s @ s @ x0, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="alpha"):
        propagate(adj, x0, -0.1, 3)


def test_correct_and_smooth_default_iterations(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx, labels = planted.split["train"], planted.labels
    probs = _confidently_wrong_on_training(planted)
    default = correct_and_smooth(probs, adj, train_idx, labels[train_idx])
    assert torch.equal(default, correct_and_smooth(probs, adj, train_idx, labels[train_idx], num_iterations=50))
    assert not torch.equal(default, correct_and_smooth(probs, adj, train_idx, labels[train_idx], num_iterations=51))


def test_correct_and_smooth_classes_come_from_probs_not_labels(planted):
    # The training labels need not include the last class: the one-hot width is probs' C.
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    train_idx = planted.split["train"]
    train_idx = train_idx[planted.labels[train_idx] < 2]
    probs = torch.full((planted.num_nodes, 3), 1.0 / 3)
    scores = correct_and_smooth(probs, adj, train_idx, planted.labels[train_idx])
    assert scores.shape == (planted.num_nodes, 3)
    logits = torch.zeros(planted.num_nodes, 3)
    result = tune_correct_and_smooth(logits, adj, planted.labels, train_idx, planted.split["valid"],
                                     correct_alphas=(0.5,), smooth_alphas=(0.5,))
    assert torch.equal(result.pred, correct_and_smooth(probs, adj, train_idx, planted.labels[train_idx],
                                                       correct_alpha=0.5, smooth_alpha=0.5).argmax(1))


def test_correct_and_smooth_without_training_nodes_keeps_the_base_model(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    probs = torch.softmax(torch.randn(planted.num_nodes, 3, generator=torch.Generator().manual_seed(5)), 1)
    empty = torch.zeros(0, dtype=torch.long)
    scores = correct_and_smooth(probs, adj, empty, empty, smooth_alpha=0.0)
    torch.testing.assert_close(scores, probs, rtol=0, atol=0)


def test_tune_reports_its_choice_and_keeps_the_first_of_ties(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    labels, split = planted.labels, planted.split
    logits = torch.randn(planted.num_nodes, 3, generator=torch.Generator().manual_seed(0))
    grid = dict(correct_alphas=(0.3, 0.9), smooth_alphas=(0.0, 0.8))
    result = tune_correct_and_smooth(logits, adj, labels, split["train"], split["valid"], **grid)
    pred = correct_and_smooth(torch.softmax(logits, 1), adj, split["train"], labels[split["train"]],
                              correct_alpha=result.correct_alpha, smooth_alpha=result.smooth_alpha).argmax(1)
    assert torch.equal(result.pred, pred)
    assert result.valid_acc == float((pred[split["valid"]] == labels[split["valid"]]).float().mean())
    # Perfect logits: every grid point scores 1.0 on validation; the first one is kept.
    perfect = 10 * torch.nn.functional.one_hot(labels, 3).float()
    tied = tune_correct_and_smooth(perfect, adj, labels, split["train"], split["valid"], **grid)
    assert (tied.correct_alpha, tied.smooth_alpha, tied.valid_acc) == (0.3, 0.0, 1.0)


def test_tune_default_is_50_iterations():
    # Two linked nodes and alpha = 1: every iteration swaps their rows, so an even and an odd
    # number of iterations predict differently for the validation node 1.
    adj = normalized_adjacency(np.array([0, 1, 2]), np.array([1, 0]), 2)
    labels = torch.tensor([0, 1])
    logits = torch.tensor([[0.0, 0.0], [0.0, 5.0]])
    train, valid = torch.tensor([0]), torch.tensor([1])
    grid = dict(correct_alphas=(0.0,), smooth_alphas=(1.0,))
    even = tune_correct_and_smooth(logits, adj, labels, train, valid, num_iterations=50, **grid)
    odd = tune_correct_and_smooth(logits, adj, labels, train, valid, num_iterations=51, **grid)
    assert (even.valid_acc, odd.valid_acc) == (1.0, 0.0)
    assert tune_correct_and_smooth(logits, adj, labels, train, valid, **grid).valid_acc == even.valid_acc


def test_tune_without_validation_nodes_keeps_the_first_strengths(planted):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    logits = torch.randn(planted.num_nodes, 3, generator=torch.Generator().manual_seed(0))
    result = tune_correct_and_smooth(logits, adj, planted.labels, planted.split["train"], torch.zeros(0, dtype=torch.long),
                                     correct_alphas=(0.3, 0.9), smooth_alphas=(0.0, 0.8))
    assert (result.correct_alpha, result.smooth_alpha, result.valid_acc) == (0.3, 0.0, 0.0)


@pytest.mark.parametrize("grid", [dict(correct_alphas=()), dict(smooth_alphas=()),
                                  dict(correct_alphas=(), smooth_alphas=())])
def test_tune_rejects_an_empty_grid(planted, grid):
    adj = normalized_adjacency(*planted.csr(), planted.num_nodes)
    logits = torch.zeros(planted.num_nodes, 3)
    with pytest.raises(ValueError, match="correct_alphas and smooth_alphas must not be empty"):
        tune_correct_and_smooth(logits, adj, planted.labels, planted.split["train"], planted.split["valid"], **grid)


def test_spread_labels_matches_dense_propagation_normalised_per_row(path_graph):
    from ttgnn.smoothing import spread_labels

    indptr, indices, n = path_graph
    adj = normalized_adjacency(indptr, indices, n)
    labels = torch.tensor([0, 2, 2, 1, 2])  # classes 0, 1 known at nodes 0 and 3; 2 = unknown
    got = spread_labels(adj, labels, 2, steps=4, alpha=0.8)
    s = _dense_normalized(indptr, indices, n)
    x0 = np.zeros((n, 2))
    x0[0, 0] = x0[3, 1] = 1.0
    x = x0.copy()
    for _ in range(4):
        x = 0.8 * s @ x + 0.2 * x0
    total = x.sum(1, keepdims=True)
    expected = np.where(total > 0, x / np.where(total > 0, total, 1.0), 0.0)
    expected[0], expected[3] = x0[0], x0[3]  # the known keep their one-hot rows
    assert got.dtype == torch.float32 and got.shape == (n, 2)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(got[4], torch.zeros(2), rtol=0, atol=0)  # isolated: reached by nothing
    torch.testing.assert_close(got[:4].sum(1), torch.ones(4))
    # one step: node 1 hears only node 0 (class 0), node 2 only node 3 (class 1)
    one = spread_labels(adj, labels, 2, steps=1, alpha=0.8)
    torch.testing.assert_close(one[1:3], torch.tensor([[1.0, 0.0], [0.0, 1.0]]), rtol=0, atol=0)


def test_a_hidden_label_never_reaches_its_own_node():
    from ttgnn.smoothing import spread_labels

    graph = planted_partition(num_nodes=120, num_classes=3, avg_degree=8.0, homophily=0.9, seed=1)
    adj = normalized_adjacency(*graph.csr(), graph.num_nodes)
    known = torch.zeros(graph.num_nodes, dtype=torch.bool)
    known[::3] = True
    ids = torch.where(known, graph.labels, torch.full_like(graph.labels, 3))
    base = spread_labels(adj, ids, 3, steps=10)
    # changing the label of a hidden node changes nothing: its row comes from the known alone
    for node in (1, 2, 50):
        assert not known[node]
        changed = graph.labels.clone()
        changed[node] = (changed[node] + 1) % 3
        assert torch.equal(spread_labels(adj, torch.where(known, changed, ids), 3, steps=10), base)
    # the spread agrees with the true class of most hidden nodes (homophilous planted graph)
    hidden = ~known
    assert (base[hidden].argmax(1) == graph.labels[hidden]).float().mean() > 0.8


def test_spread_labels_with_no_steps_is_the_one_hot_of_the_known(path_graph):
    from ttgnn.smoothing import spread_labels

    adj = normalized_adjacency(*path_graph)
    got = spread_labels(adj, torch.tensor([1, 2, 2, 0, 2]), 2, steps=0)
    torch.testing.assert_close(got, torch.tensor([[0.0, 1.0], [0, 0], [0, 0], [1, 0], [0, 0]]), rtol=0, atol=0)


def test_spread_labels_is_float32_with_every_class_a_column_whoever_is_known(path_graph):
    # The known labels hold class 0 only (of 3): each row still has 3 columns; and the rows are
    # float32 whatever torch's default dtype.
    from ttgnn.smoothing import spread_labels

    adj = normalized_adjacency(*path_graph)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = spread_labels(adj, torch.tensor([0, 3, 3, 3, 3]), 3, steps=3)  # 3 hops reach node 3
    finally:
        torch.set_default_dtype(previous)
    assert got.dtype == torch.float32 and got.shape == (5, 3)
    torch.testing.assert_close(got[:4], torch.tensor([[1.0, 0, 0]] * 4), rtol=0, atol=0)  # 4: no path from 0
    assert got[4].sum() == 0


def test_propagate_with_no_iterations_returns_the_signal(path_graph):
    signal = torch.arange(10.0).reshape(5, 2)
    assert torch.equal(propagate(normalized_adjacency(*path_graph), signal, 0.5, 0), signal)


@pytest.mark.parametrize("labels,steps,message", [
    (torch.tensor([0, 3, 2, 2, 2]), 2, r"labels must lie in \[0, 2\]"),
    (torch.tensor([0, -1, 2, 2, 2]), 2, "labels must lie in"),
    (torch.zeros(5, 2), 2, r"labels must be \(N,\) class ids"),
    (torch.zeros(5), 2, r"labels must be \(N,\) class ids, got shape \(5,\) \(torch.float32\)"),
    (torch.zeros(5, 1, dtype=torch.long), 2, r"labels must be \(N,\) class ids, got shape \(5, 1\) \(torch.int64\)"),
    (torch.tensor([0, 1, 2, 2, 2]), -1, "steps must be an integer >= 0, got -1"),
    (torch.tensor([0, 1, 2, 2, 2]), 1.5, "steps must be an integer"),
])
def test_spread_labels_names_bad_input(path_graph, labels, steps, message):
    from ttgnn.smoothing import spread_labels

    with pytest.raises(ValueError, match=message):
        spread_labels(normalized_adjacency(*path_graph), labels, 2, steps=steps)


def test_the_dataset_builds_its_adjacency_once_and_keeps_one_copy_per_device(monkeypatch):
    import ttgnn.smoothing as smoothing

    data = planted_partition(60, num_classes=3, avg_degree=6.0, seed=1)
    calls = []
    build = smoothing.normalized_adjacency
    monkeypatch.setattr(smoothing, "normalized_adjacency", lambda *a: calls.append(1) or build(*a))
    first = data.normalized_adjacency()
    assert data.normalized_adjacency("cpu") is first and data.normalized_adjacency(torch.device("cpu")) is first
    assert len(calls) == 1
    expect = normalized_adjacency(*data.csr(), data.num_nodes)
    torch.testing.assert_close(first.to_dense(), expect.to_dense(), rtol=0, atol=0)
    if torch.cuda.is_available():  # moved once per device, not at every spreading or C&S call
        on_gpu = data.normalized_adjacency("cuda:0")
        assert on_gpu.device.type == "cuda" and data.normalized_adjacency(torch.device("cuda", 0)) is on_gpu
        torch.testing.assert_close(on_gpu.to_dense().cpu(), expect.to_dense(), rtol=0, atol=0)
        assert len(calls) == 1


def test_correct_and_smooth_refuses_scores_that_are_not_probabilities_and_takes_int32_labels():
    # logits were taken as probabilities: Cora's test accuracy 0.19 against 0.70 with their softmax
    ds = planted_partition(200, num_classes=3, seed=0)
    adj, train_idx = ds.normalized_adjacency(), ds.split["train"]
    logits = 3 * torch.randn(ds.num_nodes, 3, generator=torch.Generator().manual_seed(0))
    for scores in (logits, torch.softmax(logits, 1) * 5):
        with pytest.raises(ValueError, match=r"^probs must be class probabilities \(each row in \[0, 1\], summing "
                                             r"to 1; softmax of the logits\), got values in "):
            correct_and_smooth(scores, adj, train_idx, ds.labels[train_idx])
    probs = torch.softmax(logits, 1)
    as_int32 = correct_and_smooth(probs, adj, train_idx, ds.labels[train_idx].int())  # one_hot's LongTensor error
    assert torch.equal(as_int32, correct_and_smooth(probs, adj, train_idx, ds.labels[train_idx]))
    spread = spread_labels(adj, torch.full((ds.num_nodes,), 3, dtype=torch.int32).index_fill_(0, train_idx, 0), 3, 2)
    assert spread.shape == (ds.num_nodes, 3)


def test_tune_correct_and_smooth_refuses_a_validation_set_it_cannot_score():
    ds = planted_partition(200, num_classes=3, seed=0)
    adj, logits = ds.normalized_adjacency(), torch.randn(ds.num_nodes, 3)
    labels = ds.labels.clone()
    labels[ds.split["valid"][0]] = -1  # counted as a wrong prediction before
    args = (logits, adj, labels, ds.split["train"])
    with pytest.raises(ValueError, match=r"^valid_idx includes 1 unlabeled node\(s\) \(label -1\)$"):
        tune_correct_and_smooth(*args, ds.split["valid"])
    with pytest.raises(ValueError, match=r"^valid_idx must lie in \[0, 200\), got \[0, 200\]$"):
        tune_correct_and_smooth(*args, torch.tensor([0, 200]))


def test_normalized_adjacency_refuses_column_ids_outside_the_graph():
    # -2 read another node's degree, and the sparse product read out of bounds
    with pytest.raises(ValueError, match=r"^column indices must lie in \[0, 3\), got \[-2, 2\]$"):
        normalized_adjacency(np.array([0, 1, 3, 4]), np.array([1, 0, 2, -2]), 3)
    with pytest.raises(ValueError, match=r"^indptr must rise from 0 to the 2 column indices"):
        normalized_adjacency(np.array([0, 1, 3]), np.array([1, 0]), 2)
