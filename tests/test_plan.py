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
    # Exact layer-wise inference holds two (N, width) layers: GAT's hidden layers are heads x hidden wide.
    assert small["tt"].details["evaluation_peak"] >= 2_449_029 * 2 * 256 * 4 * 4
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


def test_cli_plan_bad_memory_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["plan", "--nodes", "1000", "--device-memory", "eighty"])
    assert err.value.code == 2 and "80GB" in capsys.readouterr().err


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
    # GAT: one weight, three vectors of the output width and a bias: (8*8 + 3*8 + 8) + (8*3 + 3*3 + 3)
    assert gat["tt"].details["gnn_parameters"] == 96 + 36


@pytest.mark.parametrize("num, text", [(2**20, "1.0 MiB"), (2**27 - 2**20, "127.0 MiB"), (2**27, "0.12 GiB"),
                                       (3 * 2**30, "3.00 GiB"), (1536 * 2**30, "1,536.00 GiB")])
def test_sizes_print_in_mib_below_an_eighth_of_a_gib(num, text):
    from ttgnn.plan import _gib

    assert _gib(num) == text
