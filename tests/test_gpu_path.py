"""Tests of the device-agnostic training path (``--gnn-backend torch``): the tensor layers in full-graph
and mini-batch training, cross-backend resume, the metrics field, and Cora accuracy against DGL.

These run on the CPU (the tensor layers are device-agnostic: what passes here is what runs on a
GPU); the CUDA cases run only where a GPU is present. ``benchmarks/gpu_check.sh`` is the GPU check.
"""
import functools
import json

import pytest
import torch

from ttgnn.cli import main
from ttgnn.layers import SparseGraph
from ttgnn.train import CHECKPOINT_NAME, METRICS_NAME, TrainConfig, load_checkpoint, setup_run, train

from configs import small_config

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


_config = functools.partial(small_config, epochs=3, mode="minibatch", dropout=0.0, correct_smooth=False)


def test_gnn_backend_setting_is_validated():
    with pytest.raises(ValueError, match=r"gnn_backend must be one of \('auto', 'dgl', 'torch'\), got 'pyg'"):
        TrainConfig(gnn_backend="pyg").validate()
    assert TrainConfig().gnn_backend == "auto"


def test_full_graph_mode_keeps_index_tensors(planted, tmp_path):
    run = setup_run(_config(tmp_path, mode="full", gnn_backend="torch"), planted, 0, 1, torch.device("cpu"))
    assert isinstance(run.graph, SparseGraph) and run.graph.num_dst == planted.num_nodes
    assert run.model.gnn.backend == "torch" and run.metrics["gnn_backend"] == "torch"
    run = setup_run(_config(tmp_path, mode="full"), planted, 0, 1, torch.device("cpu"))
    assert not isinstance(run.graph, SparseGraph) and run.metrics["gnn_backend"] == "dgl"  # auto on the CPU
    run = setup_run(_config(tmp_path, mode="full", model="gat", heads=2), planted, 0, 1, torch.device("cpu"))
    assert isinstance(run.graph, SparseGraph) and run.metrics["gnn_backend"] == "torch"  # auto for a full-graph GAT


@pytest.mark.parametrize("model,mode", [("sage", "minibatch"), ("gat", "full"), ("gat", "minibatch")])
def test_both_backends_train_alike(planted, tmp_path, model, mode):
    # Same seed, same initial weights, same sampled batches: the epochs agree up to float rounding,
    # which Adam's steps carry forward (exact equality of one forward/backward: test_models.py).
    runs = {backend: train(_config(tmp_path / backend, model=model, mode=mode, gnn_backend=backend, heads=2),
                           planted) for backend in ("dgl", "torch")}
    assert runs["torch"]["gnn_backend"] == "torch" and runs["dgl"]["gnn_backend"] == "dgl"
    assert json.loads((tmp_path / "torch" / METRICS_NAME).read_text())["gnn_backend"] == "torch"
    for ref, ours in zip(runs["dgl"]["epochs"], runs["torch"]["epochs"]):
        assert ours["loss"] == pytest.approx(ref["loss"], rel=5e-3)
        assert abs(ours["valid_acc"] - ref["valid_acc"]) <= 0.02
    assert runs["torch"]["epochs"][-1]["loss"] < runs["torch"]["epochs"][0]["loss"] - 0.1  # it trains


def test_resume_across_backends(planted, tmp_path):
    # a checkpoint written with DGL's layers continues with the tensor layers (and the other way)
    first = train(_config(tmp_path / "run", epochs=2, mode="full", gnn_backend="dgl"), planted)
    resumed = train(_config(tmp_path / "run", epochs=4, mode="full", gnn_backend="torch", resume=True), planted)
    whole = train(_config(tmp_path / "whole", epochs=4, mode="full", gnn_backend="dgl"), planted)
    assert [r["epoch"] for r in resumed["epochs"]] == [1, 2, 3, 4]
    assert resumed["epochs"][:2] == first["epochs"]
    for ref, ours in zip(whole["epochs"][2:], resumed["epochs"][2:]):
        assert ours["loss"] == pytest.approx(ref["loss"], rel=5e-3)
    state = load_checkpoint(tmp_path / "run" / CHECKPOINT_NAME)["model"]
    assert any(key.startswith("gnn.convs.0.fc_self") for key in state)


@pytest.mark.data
def test_cora_tensor_backend_reaches_dgl_accuracy(data_root, tmp_path):
    """``ttgnn train --dataset cora --gnn-backend torch`` reaches the DGL backend's test accuracy within
    1 point with the same seed (the settings of test_train.py's Cora run)."""
    results = {}
    for backend in ("dgl", "torch"):
        out = tmp_path / backend
        code = main(["train", "--root", str(data_root), "--cache-dir", str(tmp_path / "cache"), "--output-dir",
                     str(out), "--no-progress", "--num-threads", "2", "--dataset", "cora", "--model", "sage",
                     "--embedding", "tt", "--epochs", "30", "--hidden", "64", "--num-layers", "2", "--norm", "none",
                     "--dropout", "0.5", "--weight-decay", "5e-4", "--init-scale", "0.02", "--lr", "0.01",
                     "--emb-lr", "0.01", "--no-correct-smooth", "--no-from-full", "--gnn-backend", backend])
        assert code == 0
        results[backend] = json.loads((out / METRICS_NAME).read_text())
    assert results["torch"]["gnn_backend"] == "torch"
    assert results["dgl"]["test_acc"] > 0.5  # it learned (chance 1/7)
    assert abs(results["torch"]["test_acc"] - results["dgl"]["test_acc"]) <= 0.01


@CUDA
@pytest.mark.parametrize("mode", ["full", "minibatch"])
def test_trains_on_cuda_with_tensor_layers(planted, tmp_path, mode):
    m = train(_config(tmp_path, mode=mode, gnn_backend="auto"), planted, device=torch.device("cuda"))
    assert m["gnn_backend"] in ("torch", "dgl") and len(m["epochs"]) == 3
    assert "peak_gpu_memory_mib" in m["epochs"][-1]


# ---------------------------------------------------------------------- the benchmark and the GPU check
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.mark.data
def test_backend_epoch_benchmark_prints_every_backend(data_root, tmp_path, capsys, load_script, monkeypatch):
    from ttgnn import graph_ops

    bench = load_script("benchmarks/bench_gnn_backend.py")
    kernels_on = []  # whether the graph kernels applied in each torch-backend epoch
    train_epoch = bench.train_epoch
    monkeypatch.setattr(bench, "train_epoch", lambda run, epoch: kernels_on.append(
        (run.config.gnn_backend, graph_ops.applies(torch.zeros(1)))) or train_epoch(run, epoch))
    assert bench.main(["--dataset", "cora", "--root", str(data_root), "--models", "sage", "gat", "--hidden", "16",
                       "--num-layers", "2", "--heads", "2", "--rounds", "1", "--backends", "dgl", "torch",
                       "torch-reference", "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["model"], r["backend"]) for r in rows] == [
        (model, backend) for model in ("sage", "gat") for backend in ("dgl", "torch", "torch-reference")]
    assert all(r["epoch_s"] > 0 and r["eval_s"] > 0 for r in rows)
    assert rows[0]["vs_dgl"] == rows[0]["eval_vs_dgl"] == 1.0
    assert rows[2]["vs_reference"] == rows[2]["eval_vs_reference"] == 1.0
    # per model: warm-up and one round for each backend, in order; the reference backend ran without the kernels
    on = graph_ops.available()
    assert kernels_on == 2 * 2 * [("dgl", on), ("torch", on), ("torch", False)]
    out = capsys.readouterr().out
    assert "vs dgl" in out and "vs ref" in out


@pytest.mark.data
def test_backend_epoch_benchmark_runs_the_torch_backend_on_each_cpu_path(data_root, tmp_path, load_script,
                                                                        monkeypatch):
    from extension import cpu_paths

    runnable = cpu_paths()  # skips (fails under CI) without the CPU kernels
    from ttgnn import _C

    bench = load_script("benchmarks/bench_gnn_backend.py")
    seen = []  # (backend, the CPU path active in its epoch)
    train_epoch = bench.train_epoch
    monkeypatch.setattr(bench, "train_epoch", lambda run, epoch: seen.append(_C.cpu_isa()) or train_epoch(run, epoch))
    before = _C.cpu_isa()
    # the best path (the active one) first, then the baseline: the check of each path ends on another path
    # than the active one, which the benchmark must restore
    paths = [runnable[0], runnable[-1]]
    assert bench.main(["--dataset", "cora", "--root", str(data_root), "--models", "sage", "--hidden", "8",
                       "--num-layers", "2", "--rounds", "1", "--backends", "torch", "torch-reference",
                       "--cpu-paths", *paths, "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    names = [f"torch[{path}]" for path in dict.fromkeys(paths)]
    assert [r["backend"] for r in rows] == names + ["torch-reference"]
    assert seen == 2 * (list(dict.fromkeys(paths)) + [before])  # warm-up and one round; the reference: unchanged
    assert _C.cpu_isa() == before
    with pytest.raises(SystemExit):
        bench.main(["--dataset", "cora", "--backends", "dgl", "--cpu-paths", "baseline"])


def test_gpu_check_dry_run_lists_every_step(tmp_path):
    import subprocess

    out_dir = tmp_path / "gpu_check_out"
    result = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), "--dry-run", "--out", str(out_dir)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not out_dir.exists()  # a dry run writes nothing (it left steps.tsv in the checkout)
    steps = [line.split(":")[0][3:] for line in result.stdout.splitlines() if line.startswith("== ")]
    assert steps == ["setup", "kernels", "tests", "lookup", "train-sage-tt", "train-sage-full", "train-gat-tt",
                     "train-gat-full", "epoch", "torchrun"]
    out = result.stdout
    assert "bench_lookup.py --device cuda" in out
    assert "--nproc-per-node=1" in out and "--mode minibatch --epochs 2" in out
    assert out.count("--gnn-backend torch") == 5 and "--device cuda" in out
    bad = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown argument --bogus" in bad.stderr
