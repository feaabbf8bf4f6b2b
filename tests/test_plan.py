"""Tests of ttgnn.plan and the `ttgnn plan` command."""
import json

import pytest

from ttgnn.cli import main
from ttgnn.data import load_dataset
from ttgnn.plan import RUNTIME_BYTES, plan
from ttgnn.shapes import TTShape


def test_full_table_terms_are_exact():
    plans = plan(1_000_000, 64, 8, fanouts=[5, 5], num_layers=2, optimizer="adam", world_size=4)
    full = plans["full"].memory
    assert full["table"] == 1_000_000 * 64 * 4
    assert full["gradients"] == full["table"] and full["optimizer"] == 2 * full["table"]
    assert full["optimizer step"] == 2 * full["table"]  # Adam's sqrt(v) / bias correction
    assert full["total"] == sum(v for k, v in full.items() if k != "total")
    assert plans["full"].allreduce_bytes == (1_000_000 * 64 + plans["full"].details["gnn_parameters"]) * 4
    assert plans["full"].lookup_flops == 0


def test_tt_table_is_the_shape_parameter_count():
    plans = plan(169_343, 128, 16, optimizer="sgd")
    params = TTShape.build(169_343, 128, 16, None, None, None).num_parameters
    assert plans["tt"].memory["table"] == params * 4 and plans["tt"].memory["optimizer"] == 0
    assert plans["tt"].memory["optimizer step"] == plans["full"].memory["optimizer step"] == 0
    assert plans["tt"].lookup_flops > 0
    assert plans["tt"].memory["runtime"] == RUNTIME_BYTES


@pytest.mark.parametrize("optimizer,copies", [("adagrad", 1), ("momentum", 0), ("adamw", 2)])
def test_optimizer_step_scratch_counts_table_copies(optimizer, copies):
    full = plan(100_000, 32, 8, optimizer=optimizer)["full"].memory
    assert full["optimizer step"] == copies * 100_000 * 32 * 4


def test_sampled_nodes_multiply_and_cap_at_n():
    plans = plan(10_000_000, fanouts=[15, 10, 5], num_layers=3, batch_size=1000)
    assert plans["tt"].sampled_nodes == [1000 * 6 * 11 * 16, 1000 * 6 * 11, 1000 * 6, 1000]
    small = plan(5_000, fanouts=[15, 10, 5], num_layers=3, batch_size=1000)
    assert small["tt"].sampled_nodes[0] == 5_000


def test_one_rank_all_reduces_nothing_and_more_ranks_do_not_change_memory():
    one = plan(2_449_029, world_size=1)
    eight = plan(2_449_029, world_size=8)
    assert one["tt"].allreduce_bytes == 0 and eight["tt"].allreduce_bytes > 0
    assert one["full"].memory == eight["full"].memory
    assert eight["full"].allreduce_bytes > 500 * eight["tt"].allreduce_bytes  # GNN weights dominate TT


def test_gat_costs_more_than_sage_and_fits_decides():
    sage = plan(2_449_029, model="sage", device_memory=80 * 2**30)
    gat = plan(2_449_029, model="gat", device_memory=80 * 2**30)
    assert gat["tt"].memory["activations"] > sage["tt"].memory["activations"]
    papers = plan(111_059_956, avg_degree=29, device_memory=80 * 2**30)
    assert papers["tt"].fits and not papers["full"].fits


def test_sampled_evaluation_term_by_hand():
    # One SAGE layer, fan-out 2, evaluation batches of 10 nodes: 30 sampled inputs (10 x (2 + 1)),
    # 30 block edges; training batch 1 so that training's blocks and activations are tiny.
    plans = plan(10**6, 4, 2, num_layers=1, num_classes=3, fanouts=[2], batch_size=1, eval_fanouts=[2],
                 eval_batch_size=10, avg_degree=2.0)
    blocks = 30 * 3 * 8 + (30 + 10) * 2 * 8
    assert plans["full"].details["evaluation_peak"] == blocks + (30 * 4 + 10 * 3) * 4  # both layers' rows
    assert plans["tt"].details["evaluation_peak"] == blocks + 30 * 4 * 4 * 2  # looked-up rows + TT scratch
    for p in plans.values():
        assert p.details["evaluation"] == "sampled" and p.details["eval_fanouts"] == [2]
        m = p.memory
        assert m["evaluation"] == p.details["evaluation_peak"] - m["blocks"] - m["activations"] > 0
        assert m["total"] == sum(v for k, v in m.items() if k != "total")


def test_evaluation_kind_follows_training_rule():
    small = plan(2_449_029, model="gat")
    assert small["tt"].details["evaluation"] == "exact" and small["tt"].details["eval_fanouts"] is None
    # Exact layer-wise inference holds two (N, width) layers: GAT's hidden layers are 256 wide (4 heads of 64).
    assert small["tt"].details["evaluation_peak"] >= 2_449_029 * 2 * 256 * 4
    big = plan(111_059_956, fanouts=[15, 10, 5])
    assert big["tt"].details["evaluation"] == "sampled" and big["tt"].details["eval_fanouts"] == [15, 10, 5]
    assert plan(2_449_029, eval_fanouts=[5, 5, 5])["tt"].details["evaluation"] == "sampled"
    full = plan(169_343, mode="full")
    assert full["tt"].details["evaluation"] == "full graph" and full["tt"].memory["evaluation"] == 0


def test_sampled_evaluation_grows_with_its_batch_not_the_graph():
    peaks = [plan(n, eval_fanouts=[15, 10, 5], eval_batch_size=b)["tt"].details["evaluation_peak"]
             for n, b in ((50_000_000, 8192), (500_000_000, 8192), (50_000_000, 1024))]
    assert peaks[0] == peaks[1] and peaks[2] < peaks[0] / 4
    exact = [plan(n, eval_fanouts=None)["tt"].details["evaluation_peak"] for n in (1_000_000, 2_000_000)]
    assert 1.9 < exact[1] / exact[0] < 2.1


@pytest.mark.parametrize("kwargs,match", [(dict(eval_fanouts=[5, 5]), "eval_fanouts"),
                                          (dict(eval_fanouts=[5, 0, 5]), "eval_fanouts"),
                                          (dict(eval_fanouts=[5, 5, 5], mode="full"), "minibatch"),
                                          (dict(eval_batch_size=0), "eval_batch_size"),
                                          (dict(model="gcn"), "model"), (dict(optimizer="lion"), "optimizer"),
                                          (dict(world_size=0), "world_size"), (dict(fanouts=[5, 5]), "fan-outs"),
                                          (dict(mode="half"), "mode"), (dict(avg_degree=-1.0), "avg_degree"),
                                          (dict(avg_degree=float("inf")), "avg_degree must be a finite number >= 0, got inf"),
                                          (dict(avg_degree=float("nan")), "avg_degree must be a finite number >= 0, got nan"),
                                          (dict(avg_degree="3"), "avg_degree must be a finite number >= 0, got '3'")])
def test_bad_values_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan(1000, **kwargs)


def test_cli_plan_table_and_json(capsys):
    assert main(["plan", "--nodes", "111059956", "--world-size", "1", "8", "--device-memory", "80GB"]) == 0
    text = capsys.readouterr().out
    assert text.count("| table |") == 2 and "| fits | yes | no |" in text
    assert main(["plan", "--nodes", "169343", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["1"]["full"]["memory"]["table"] == 169343 * 128 * 4


def test_cli_plan_eval_fanouts(capsys):
    assert main(["plan", "--nodes", "169343", "--eval-fanouts", "5,5,5", "--eval-batch-size", "512", "--json"]) == 0
    tt = json.loads(capsys.readouterr().out)["1"]["tt"]
    assert tt["details"]["evaluation"] == "sampled" and tt["details"]["eval_fanouts"] == [5, 5, 5]
    assert main(["plan", "--nodes", "169343", "--mode", "full", "--eval-fanouts", "5,5,5"]) == 2
    assert "minibatch" in capsys.readouterr().err


def test_cli_plan_takes_the_graph_from_a_dataset(capsys, tmp_path, data_root):
    root = data_root
    assert main(["plan", "--dataset", "cora", "--root", str(root), "--cache-dir", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    cora = load_dataset("cora", root=root)
    degree = cora.csr().num_entries / cora.num_nodes
    expected = plan(cora.num_nodes, num_layers=3, num_classes=cora.num_classes, fanouts=[15, 10, 5], avg_degree=degree)
    got = json.loads(captured.out)["1"]
    assert got["full"]["memory"] == expected["full"].memory and got["tt"]["memory"] == expected["tt"].memory
    assert f"{cora.num_nodes:,} nodes" in captured.err
    assert main(["plan"]) == 2 and "--dataset" in capsys.readouterr().err


def test_cli_plan_refuses_graph_figures_beside_a_dataset_before_loading_it(capsys):
    # the dataset does not exist: a refusal that waited for the load would report that instead
    for given, named in ((["--nodes", "1e8"], "--nodes 100000000"), (["--classes", "5"], "--classes 5"),
                         (["--avg-degree", "12.5", "--nodes", "300"], "--nodes 300, --avg-degree 12.5")):
        assert main(["plan", "--dataset", "no-such-graph", "--root", "/nonexistent", *given]) == 2
        assert capsys.readouterr().err == (
            f"ttgnn plan: error: --dataset no-such-graph gives the graph's nodes, mean degree and classes; leave out "
            f"{named} (or --dataset, to plan for those figures)\n")
    # without --dataset, the figures given are used and the others take plan()'s defaults
    assert main(["plan", "--nodes", "1000", "--classes", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["1"]["full"]["memory"]
    assert got == plan(1000, num_classes=5, fanouts=[15, 10, 5])["full"].memory
    assert main(["plan", "--nodes", "1000", "--avg-degree", "40", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["1"]["full"]["memory"]
    denser, default = (plan(1000, avg_degree=degree, fanouts=[15, 10, 5])["full"].memory for degree in (40.0, 10.0))
    assert got == denser != default


def test_cli_plan_bad_memory_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["plan", "--nodes", "1000", "--device-memory", "eighty"])
    assert err.value.code == 2 and "80GB" in capsys.readouterr().err
    for text in ("nanGB", "infGB", "1e400GB", "0GB", "-5GB"):  # nan and inf passed and printed "fits"
        with pytest.raises(SystemExit) as err:
            main(["plan", "--nodes", "1000", f"--device-memory={text}"])
        assert err.value.code == 2
        assert f"argument --device-memory: the device memory must be a size > 0, got '{text}'" in capsys.readouterr().err


def test_lookup_flops_gnn_parameters_and_all_reduce_by_hand():
    from ttgnn.plan import _tt_lookup_flops

    shape = TTShape.build(1000, 8, 2, None, [10, 10, 10], [2, 2, 2])
    assert list(shape.ranks) == [1, 2, 2, 1]
    # left to right, per row: 2*1*(1*2*2) + 2*2*(2*2*2) + 2*4*(2*2*1) = 8 + 32 + 32 = 72 multiply-adds x 2;
    # forward + backward (twice the forward) = 3x, for 10 rows
    assert _tt_lookup_flops(shape, 10) == 3 * 72 * 10
    sage = plan(1000, 8, 2, model="sage", num_layers=2, hidden=4, num_classes=3, fanouts=[2, 3], batch_size=10,
                world_size=2, row_shape=[10, 10, 10], col_shape=[2, 2, 2])
    # SAGE: self and neighbour weights plus a bias per layer: (2*8*4 + 4) + (2*4*3 + 3)
    assert sage["tt"].details["gnn_parameters"] == 68 + 27
    assert sage["tt"].sampled_nodes == [10 * 4 * 3, 10 * 4, 10]
    assert sage["tt"].lookup_flops == _tt_lookup_flops(shape, 120)
    assert sage["tt"].allreduce_bytes == (shape.num_parameters + 95) * 4
    assert sage["full"].allreduce_bytes == (1000 * 8 + 95) * 4
    gat = plan(1000, 8, 2, model="gat", num_layers=2, hidden=4, heads=2, num_classes=3, fanouts=[2, 3],
               batch_size=10, row_shape=[10, 10, 10], col_shape=[2, 2, 2])
    # GAT: hidden layers concatenate 2 heads of 2 into 4, the last has 2 heads of 3 classes (averaged);
    # each layer one weight and three vectors of its output width (two attention, a bias): (8*4 + 3*4) +
    # (4*6 + 3*6). It counted the hidden width once per head, and a fourth vector (132).
    assert gat["tt"].details["gnn_parameters"] == 44 + 42


@pytest.mark.parametrize("backend", ["dgl", "torch"])
@pytest.mark.parametrize("model,heads", [("sage", 1), ("gat", 1), ("gat", 2), ("gat", 4)])
def test_gnn_parameters_are_the_models(model, heads, backend):
    from ttgnn.models import GAT, GraphSAGE

    for dim, hidden, classes, layers in ((8, 4, 3, 2), (128, 256, 40, 3), (16, 8, 172, 1)):
        if model == "gat":
            gnn = GAT(dim, hidden, classes, num_layers=layers, heads=heads, norm="none", backend=backend)
        else:
            gnn = GraphSAGE(dim, hidden, classes, num_layers=layers, norm="none", backend=backend)
        planned = plan(1000, dim, 2, model=model, num_layers=layers, hidden=hidden, heads=heads,
                       num_classes=classes)
        assert planned["tt"].details["gnn_parameters"] == sum(p.numel() for p in gnn.parameters())


@pytest.mark.parametrize("num, text", [(2**20, "1.0 MiB"), (2**27 - 2**20, "127.0 MiB"), (2**27, "0.12 GiB"),
                                       (3 * 2**30, "3.00 GiB"), (1536 * 2**30, "1,536.00 GiB")])
def test_sizes_print_in_mib_below_an_eighth_of_a_gib(num, text):
    from ttgnn.plan import _gib

    assert _gib(num) == text


def _terms(tt_or_full, table, state, step, gnn, graph, blocks, activations, evaluation):
    memory = {"table": table, "gradients": table, "optimizer": table * state, "optimizer step": table * step,
              "gnn": gnn, "graph": graph, "blocks": blocks, "activations": activations,
              "evaluation": evaluation, "runtime": RUNTIME_BYTES}
    memory["total"] = sum(memory.values())
    assert tt_or_full.memory == memory


def test_minibatch_memory_terms_by_hand():
    # SAGE, N = 1000 in TT shape 10x10x10 by 2x2x2 at rank 2 (cores of 40, 80 and 40 values), D = 8,
    # hidden 4, 3 classes, fan-outs [2, 3], batches of 10, degree 2, Adam; exact evaluation in batches of 100.
    plans = plan(1000, 8, 2, model="sage", num_layers=2, hidden=4, num_classes=3, fanouts=[2, 3], batch_size=10,
                 avg_degree=2.0, row_shape=[10, 10, 10], col_shape=[2, 2, 2], eval_batch_size=100)
    # Blocks: inputs of 120, 40 and 10 nodes, 120 + 40 edges; 3 ids per edge, 2 per node, 8 bytes each.
    blocks = 160 * 3 * 8 + 170 * 2 * 8
    # Graph: int32 CSR (1001 int64 offsets, 2000 int32 entries) and DGL's int64 copy with 1000 self-loops.
    graph = 1001 * 8 + 2000 * 4 + 1001 * 8 + 3000 * 8
    # Four outputs' worth per layer (40 x 4, 10 x 3 values), three of the 120 x 8 input rows.
    activations = 4 * (40 * 4 + 10 * 3) * 4 + 3 * 120 * 8 * 4
    gnn = (68 + 27) * 4 * (2 + 2)  # weights, gradients, Adam's two moments
    # Exact evaluation: two all-node layers (1000 x (8 + 4) values) plus a batch of 100 nodes with their
    # 300 edges (3 ids each) and 300 gathered input rows of 8; TT: looked-up rows and scratch of 1000 x 8.
    peak = 1000 * 12 * 4 + 300 * 3 * 8 + 300 * 8 * 4
    tt_extra = 120 * 8 * 4  # the TT kernel's scratch, about its output
    assert max(peak, 1000 * 8 * 4 * 2) == peak
    _terms(plans["tt"], 160 * 4, 2, 2, gnn, graph, blocks, activations + tt_extra,
           peak - blocks - activations - tt_extra)
    _terms(plans["full"], 8000 * 4, 2, 2, gnn, graph, blocks, activations, peak - blocks - activations)
    for p in plans.values():
        assert p.details["evaluation"] == "exact" and p.details["evaluation_peak"] == peak
        assert p.details["parameters"] == (160 if p.embedding == "tt" else 8000)
        assert p.details["row_shape"] == [10, 10, 10] and p.details["col_shape"] == [2, 2, 2]
        assert p.details["ranks"] == [1, 2, 2, 1] and p.fits is None


def test_exact_evaluation_peak_can_be_the_lookup():
    # One layer from 64 columns to 2 classes: the all-node lookup (TT: rows and scratch) outweighs
    # both layers plus a batch; the full table's lookup (no scratch) does not.
    plans = plan(1000, 64, 2, model="sage", num_layers=1, num_classes=2, fanouts=[1], batch_size=1,
                 avg_degree=1.0, row_shape=[10, 10, 10], col_shape=[4, 4, 4], eval_batch_size=10)
    layers = 1000 * (64 + 2) * 4
    batch = 20 * 3 * 8 + 20 * 64 * 4  # 10 destinations, 20 edges with their self-loops, 20 sources
    assert plans["tt"].details["evaluation_peak"] == 1000 * 64 * 4 * 2 > layers + batch
    assert plans["full"].details["evaluation_peak"] == layers + batch > 1000 * 64 * 4


def test_gat_memory_terms_by_hand():
    # GAT, 2 heads of 2 (hidden layers 4 wide), the last layer 2 heads of 3 classes (6 values before
    # their mean), sampled evaluation: fan-outs [2, 2] from 5 nodes.
    plans = plan(1000, 8, 2, model="gat", num_layers=2, hidden=4, heads=2, num_classes=3, fanouts=[2, 3],
                 batch_size=10, avg_degree=2.0, row_shape=[10, 10, 10], col_shape=[2, 2, 2],
                 eval_fanouts=[2, 2], eval_batch_size=5)
    blocks = 160 * 3 * 8 + 170 * 2 * 8
    # Four outputs per layer (40 x 4, 10 x 6) and 3 attention values per edge and head (120, 40 edges).
    activations = 4 * (40 * 4 + 10 * 6) * 4 + 3 * (120 + 40) * 2 * 4 + 3 * 120 * 8 * 4
    tt = plans["tt"].memory
    assert tt["activations"] == activations + 120 * 8 * 4
    assert plans["full"].memory["activations"] == activations
    assert tt["gnn"] == (44 + 42) * 4 * 4
    # Evaluation: inputs of 45, 15 and 5 nodes, 45 + 15 edges; the larger layer pair (45 x 8 + 15 x 4
    # values) plus attention on the largest block (45 edges x 2 heads x 3), against the lookup of 45
    # rows of 8 (TT: and the kernel's scratch, which wins here).
    eval_blocks = 60 * 3 * 8 + 65 * 2 * 8
    layers = (45 * 8 + 15 * 4) * 4 + 45 * 2 * 3 * 4
    assert 45 * 8 * 4 < layers < 45 * 8 * 4 * 2
    for p, peak in ((plans["tt"], eval_blocks + 45 * 8 * 4 * 2), (plans["full"], eval_blocks + layers)):
        assert p.details["evaluation"] == "sampled" and p.details["evaluation_peak"] == peak
        assert p.memory["evaluation"] == 0  # below the training step's blocks and activations


def test_full_graph_memory_terms_by_hand():
    # Full-graph GAT on 100 nodes (TT 5x5x4 by 2x2x2, rank 2: 20 + 40 + 16 values), degree 3.
    plans = plan(100, 8, 2, model="gat", num_layers=2, hidden=4, heads=2, num_classes=3, mode="full",
                 avg_degree=3.0, row_shape=[5, 5, 4], col_shape=[2, 2, 2], optimizer="sgd",
                 device_memory=RUNTIME_BYTES + 10**6)
    edges = 300 + 100  # every layer: all edges and the self-loops
    blocks = 2 * edges * 3 * 8 + 3 * 100 * 2 * 8
    activations = 4 * (100 * 4 + 100 * 6) * 4 + 3 * 2 * edges * 2 * 4 + 3 * 100 * 8 * 4
    graph = 101 * 8 + 300 * 4 + 101 * 8 + edges * 8
    gnn = (44 + 42) * 4 * 2  # SGD: weights and gradients
    _terms(plans["tt"], 76 * 4, 0, 0, gnn, graph, blocks, activations + 100 * 8 * 4, 0)
    _terms(plans["full"], 800 * 4, 0, 0, gnn, graph, blocks, activations, 0)
    for p in plans.values():
        assert p.sampled_nodes == [100, 100, 100] and p.details["eval_fanouts"] is None
        # One layer over all nodes (100 x (8 + 4) values) and attention on every edge and self-loop.
        assert p.details["evaluation"] == "full graph"
        assert p.details["evaluation_peak"] == 100 * 12 * 4 + edges * 2 * 3 * 4
        assert p.fits is True
    shape = TTShape.build(100, 8, 2, None, [5, 5, 4], [2, 2, 2])
    assert plans["tt"].lookup_flops == 3 * 72 * 100 and shape.num_parameters == 76
    tight = plan(100, 8, 2, model="gat", num_layers=2, hidden=4, heads=2, num_classes=3, mode="full",
                 avg_degree=3.0, row_shape=[5, 5, 4], col_shape=[2, 2, 2], optimizer="sgd",
                 device_memory=plans["tt"].memory["total"])
    assert tight["tt"].fits is True and tight["full"].fits is False  # the limit itself fits


def test_format_plan_layout():
    from ttgnn.plan import format_plan

    plans = plan(1000, 8, 2, model="sage", num_layers=2, hidden=4, num_classes=3, fanouts=[2, 3], batch_size=10,
                 avg_degree=2.0, row_shape=[10, 10, 10], col_shape=[2, 2, 2], eval_batch_size=100,
                 world_size=2, device_memory=2**30)
    lines = format_plan(plans, world_size=2).split("\n")
    assert lines[:3] == ["| per rank | tt | full |", "|---|---|---|", "| table | 0.0 MiB | 0.0 MiB |"]
    assert [line.split(" | ")[0] for line in lines[2:13]] == [
        "| " + term for term in ("table", "gradients", "optimizer", "optimizer step", "gnn", "graph", "blocks",
                                 "activations", "evaluation", "runtime", "total")]
    assert lines[11] == "| runtime | 0.45 GiB | 0.45 GiB |"
    assert lines[13] == "| all-reduced per step | 0.0 MiB | 0.0 MiB |"
    assert lines[14] == f"| lookup GFLOP per step | {plans['tt'].lookup_flops / 1e9:,.2f} | 0.00 |"
    assert lines[15:] == ["| fits | yes | yes |"]
    one = format_plan(plan(1000, 8, 2, fanouts=[2, 3], num_layers=2, world_size=1), world_size=1).split("\n")
    assert one[-2] != one[-1] and "| all-reduced per step | 0 (one rank) | 0 (one rank) |" in one
    assert not any(line.startswith("| fits") for line in one)
    heavy = plan(10**9, 64, 32, fanouts=[15, 10, 5], batch_size=4096, world_size=1)
    table = format_plan(heavy).split("\n")
    tt_mib = heavy["tt"].memory["table"] / 2**20
    assert table[2] == f"| table | {tt_mib:,.1f} MiB | 238.42 GiB |" and tt_mib < 128  # one column per kind
    assert "| all-reduced per step | 0 (one rank) | 0 (one rank) |" in table  # one rank by default
    gflop = table[-1]
    assert gflop == f"| lookup GFLOP per step | {heavy['tt'].lookup_flops / 1e9:,.2f} | 0.00 |" and "," in gflop


def test_exact_evaluation_of_gat_by_hand():
    # GAT, 4 heads of 1 (hidden layer 4 wide), 40 classes (4 heads of 40 values before their mean, only a
    # batch's at a time), exact evaluation in batches of 100 nodes.
    plans = plan(1000, 8, 2, model="gat", num_layers=2, hidden=4, heads=4, num_classes=40, fanouts=[2, 3],
                 batch_size=10, avg_degree=2.0, row_shape=[10, 10, 10], col_shape=[2, 2, 2], eval_batch_size=100)
    layers = 1000 * (4 + 40) * 4  # the last layer's input and output for every node (the heads' mean)
    # 100 destinations with 300 edges: 3 ids each, 300 gathered rows of the widest input (8), and
    # 3 attention values per edge and head.
    batch = 300 * 3 * 8 + 300 * 8 * 4 + 300 * 4 * 3 * 4
    for p in plans.values():
        assert p.details["evaluation"] == "exact" and p.details["evaluation_peak"] == layers + batch
        # Weights and three vectors of the output width, layers 8 -> 4 and 4 -> 4 x 40.
        assert p.details["gnn_parameters"] == (8 * 4 + 3 * 4) + (4 * 160 + 3 * 160)


def test_full_graph_evaluation_of_sage_keeps_no_attention():
    plans = plan(100, 8, 2, model="sage", num_layers=2, hidden=4, num_classes=30, mode="full", avg_degree=3.0,
                 row_shape=[5, 5, 4], col_shape=[2, 2, 2])
    for p in plans.values():  # the last layer's input and output for every node, above the lookup
        assert p.details["evaluation_peak"] == 100 * (4 + 30) * 4 > 100 * 8 * 4 * 2


def test_tt_shape_overrides_are_passed_on():
    auto = plan(10_000, 16, 4)["tt"].details
    for kwargs, key, value in ((dict(num_cores=2), "row_shape", [100, 100]),
                               (dict(row_shape=[10, 10, 100]), "row_shape", [10, 10, 100]),
                               (dict(col_shape=[2, 2, 4]), "col_shape", [2, 2, 4])):
        details = plan(10_000, 16, 4, **kwargs)["tt"].details
        assert details[key] == value != auto[key]
        shape = TTShape.build(10_000, 16, 4, kwargs.get("num_cores"), kwargs.get("row_shape"),
                              kwargs.get("col_shape"))
        assert details["parameters"] == shape.num_parameters


def test_documented_defaults():
    from ttgnn.plan import as_dict

    explicit = plan(50_000, 128, 16, model="sage", num_layers=3, hidden=256, heads=4, num_classes=172,
                    fanouts=[10, 10, 10], batch_size=1024, optimizer="adam", world_size=1, avg_degree=10.0,
                    mode="minibatch", eval_batch_size=8192)
    assert as_dict(plan(50_000)) == as_dict(explicit)
    gat = plan(50_000, model="gat", hidden=256, heads=4, num_classes=172)
    assert as_dict(plan(50_000, model="gat")) == as_dict(gat)
    assert plan(50_000)["full"].allreduce_bytes == 0


@pytest.mark.parametrize("name", ["num_nodes", "dim", "rank", "num_layers", "hidden", "heads", "num_classes",
                                  "batch_size", "world_size", "eval_batch_size"])
def test_each_count_is_named_when_below_one(name):
    kwargs = {"num_nodes": 1000, "dim": 16, "rank": 4, name: 0}
    with pytest.raises(ValueError, match=rf"^{name} must be an integer >= 1, got 0$"):
        plan(**kwargs)


@pytest.mark.parametrize("degree", [0.0, 0.5, 0])
def test_degree_below_one_is_allowed(degree):
    entries = int(1000 * degree)
    assert plan(1000, avg_degree=degree)["full"].memory["graph"] == 1001 * 8 * 2 + entries * 4 + (entries + 1000) * 8


def test_fanouts_are_whole_numbers():
    # a float fan-out was taken and gave fractional sampled-node counts; eval_fanouts' were refused
    with pytest.raises(ValueError, match=r"^every fan-out must be an integer >= 1, got 2.7$"):
        plan(10**8, 128, 16, fanouts=[2.7, 3, 3])


@pytest.mark.parametrize("memory", [float("nan"), -1, 0, True])
def test_a_device_memory_that_is_no_amount_of_bytes_is_refused(memory):
    # NaN or -1 made every plan "does not fit" without a word
    with pytest.raises(ValueError, match=r"^device_memory must be a finite number of bytes > 0, got "):
        plan(10_000, device_memory=memory)
    assert plan(10_000, device_memory=2**40)["tt"].fits
