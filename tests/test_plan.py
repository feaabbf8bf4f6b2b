"""Tests of ttgnn.plan and the `ttgnn plan` command."""
import json

import pytest

from ttgnn.cli import main
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


@pytest.mark.parametrize("kwargs,match", [(dict(model="gcn"), "model"), (dict(optimizer="lion"), "optimizer"),
                                          (dict(world_size=0), "world_size"), (dict(fanouts=[5, 5]), "fan-outs"),
                                          (dict(mode="half"), "mode"), (dict(avg_degree=-1.0), "avg_degree")])
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


def test_cli_plan_bad_memory_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["plan", "--nodes", "1000", "--device-memory", "eighty"])
    assert err.value.code == 2 and "80GB" in capsys.readouterr().err
