"""Benchmarks' own logic: the lookup benchmark runs in every allocation regime and reports sane rows
(in a subprocess, since the regimes change how the process allocates with glibc ``mallopt``), the
results plot groups runs by initialisation and averages over seeds, the small-graph probes'
node order and rotation do what they say, Correct and Smooth on a finished run's best model
gives back what the run reported, and the compression sweep reuses only finished runs of the
settings it asks for."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("regime", ["fresh", "reuse", "default"])
def test_bench_lookup_small_run(regime, tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_lookup.py"), "--shapes", "arxiv",
                           "--ranks", "4", "--batches", "2000", "--methods", "kernel", "reference", "dense",
                           "--budget", "0.05", "--max-repeats", "3", "--malloc", regime, "--threads", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [r["method"] for r in results] == ["kernel", "reference", "dense"]
    assert all(r["batch"] == 2000 and 0 < r["unique"] <= 2000 for r in results)
    assert all(r["forward_ms"] > 0 and r["fwd_bwd_ms"] > 0 for r in results)
    assert f"malloc {regime}" in proc.stdout and "| arxiv | 4 | 2,000 |" in proc.stdout


def test_exit_race_counts_aborted_ranks_per_mode(tmp_path):
    # One run of each mode on an idle machine: the plain mode may or may not abort (it did in
    # 16 of 100 loaded runs), the kept handles never; the script fails if they do.
    # a run took up to 36 s with the machine loaded (the script's default deadline is 60 s)
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "exit_race.py"), "--runs", "1", "--hogs", "0",
                           "--deadline", "200"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    table = proc.stdout[proc.stdout.index("| mode |"):].splitlines()
    assert table[2].startswith("| plain | 1 | ") and table[2].endswith(" | 0 |")
    assert table[3] == "| kept | 1 | 0 | 0 |"


def _run(embedding, rank, test_acc, init="ortho", vectors=None, seed=0):
    return {"dataset": "cora", "model": "sage", "label_input": False, "embedding": embedding, "rank": rank,
            "test_acc": test_acc, "compression_ratio": 100.0 if rank else 1.0, "epoch_time": 0.1,
            "settings": {"dropout": 0.2, "init": init, "spectral_vectors": vectors, "dim": 128, "seed": seed,
                         "epochs": 1}}


def test_results_plot_keeps_initialisations_apart_and_averages_seeds(load_script):
    plot = load_script("benchmarks/plot_results.py")
    runs = [_run("tt", 4, 0.5), _run("tt", 4, 0.7, seed=1), _run("tt", 4, 0.9, "spectral", 8),
            _run("full", None, 0.6), _run("full", None, 0.8, "spectral")]
    (panel,) = plot.aggregate(runs).values()
    assert set(panel) == {("tt", 4, 0.2, "default init"), ("tt", 4, 0.2, "spectral init (8 vectors)"),
                          ("full", None, 0.2, "default init"), ("full", None, 0.2, "spectral init (128 vectors)")}
    two_seeds = panel[("tt", 4, 0.2, "default init")]
    assert two_seeds["seeds"] == 2 and two_seeds["acc_mean"] == pytest.approx(0.6)
    assert two_seeds["acc_std"] == pytest.approx(0.1414, abs=1e-4)
    assert panel[("tt", 4, 0.2, "spectral init (8 vectors)")]["acc_std"] == 0.0
    # runs of other settings in one point, or a seed twice, were averaged together
    other = _run("tt", 4, 0.9, seed=2)
    other["settings"]["lr_schedule"] = "cosine"
    with pytest.raises(ValueError, match=r"runs of other settings would be averaged into one point \(lr_schedule: "
                                         r"None and 'cosine'\)"):
        plot.aggregate(runs + [other])
    with pytest.raises(ValueError, match=r"seed\(s\) \[0\] found more than once"):
        plot.aggregate(runs + [_run("tt", 4, 0.9)])


def test_results_plot_writes_both_figures_under_the_suffix(tmp_path, monkeypatch, capsys, load_script):
    pytest.importorskip("matplotlib")  # the bench extra, not part of `make setup`
    plot = load_script("benchmarks/plot_results.py")
    for i, run in enumerate([_run("tt", 4, 0.5), _run("tt", 4, 0.7, seed=1), _run("full", None, 0.8)]):
        folder = tmp_path / "runs" / str(i)
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(dict(run, epochs=[{"epoch": 1}])))
    (tmp_path / "runs" / "unstarted").mkdir()
    (tmp_path / "runs" / "unstarted" / "metrics.json").write_text(json.dumps(dict(_run("tt", 8, 0.1), epochs=[])))
    stopped = _run("tt", 4, 0.99, seed=5)  # stopped after 1 of its 3 epochs: not averaged in
    stopped["settings"]["epochs"] = 3
    (tmp_path / "runs" / "stopped").mkdir()
    (tmp_path / "runs" / "stopped" / "metrics.json").write_text(json.dumps(dict(stopped, epochs=[{"epoch": 1}])))
    monkeypatch.setattr(sys, "argv", ["plot_results.py", str(tmp_path / "runs"), "--out", str(tmp_path / "png"),
                                      "--suffix", "_defaults"])
    assert plot.main() == 0
    assert sorted(f.name for f in (tmp_path / "png").iterdir()) == ["accuracy_vs_compression_defaults.png",
                                                                     "epoch_time_defaults.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in (tmp_path / "png").iterdir())
    out = capsys.readouterr().out
    assert "test 0.6000 ± 0.1414 (2 seeds)" in out and "test 0.8000 ± 0.0000 (1 seeds)" in out
    assert "tt r8" not in out  # a run with no finished epoch is not drawn


def test_results_plot_without_matplotlib_says_so_in_one_line(tmp_path, monkeypatch, capsys, load_script):
    # the bench extra missing: a ModuleNotFoundError traceback before
    plot = load_script("benchmarks/plot_results.py")
    folder = tmp_path / "runs" / "0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(dict(_run("tt", 4, 0.5), epochs=[{"epoch": 1}])))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setattr(sys, "argv", ["plot_results.py", str(tmp_path / "runs"), "--out", str(tmp_path / "png")])
    assert plot.report_errors("plot_results.py", plot.main, trains=False) == 2  # as its __main__ runs it
    assert capsys.readouterr().err.splitlines()[-1] == (
        "plot_results.py: error: matplotlib is not installed: pip install matplotlib (or the bench extra: "
        "pip install -e '.[bench]')")


def test_bench_coarsen_refuses_a_graph_too_small_for_kaminpar(capsys, load_script):
    # below 50,000 nodes the order splits with METIS only: it compared two identical runs without a word
    bench = load_script("benchmarks/bench_coarsen.py")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--nodes", "49999"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].split(": error: ", 1)[1] == (
        "--nodes 49,999: graphs under 50,000 nodes are split by METIS, not KaMinPar, "
        "so neither variant coarsens and both would be the same run")


def test_small_graph_probes_pca_tree_order_and_rotation(load_script):
    import numpy as np
    import torch

    from ttgnn import TTNodeEmbedding

    probes = load_script("benchmarks/small_graph_probes.py")
    rng = np.random.default_rng(0)
    # 4 clusters of 15 nodes in 2-D, shuffled; rows 4 x 16 (60 nodes, 4 padding rows)
    centres = np.array([[0.0, 10.0], [10.0, 0.0], [0.0, -10.0], [-10.0, 0.0]])
    labels = rng.permutation(np.repeat(np.arange(4), 15))
    vectors = centres[labels] + 0.1 * rng.standard_normal((60, 2))
    order = probes.pca_tree_order(vectors, [4, 16]).numpy()
    assert order.shape == (60,) and len(set(order.tolist())) == 60 and order.min() >= 0 and order.max() < 64
    # each leading digit holds one cluster
    assert sorted(len(set(labels[order // 16 == digit])) for digit in range(4)) == [1, 1, 1, 1]
    # the rotation: W keeps its orthogonal rows at the given scale, and the TT copy of vectors @ W
    # loses no more than the copy of the vectors in the first columns
    basis = np.linalg.qr(rng.standard_normal((64, 3)))[0][:60]
    basis /= np.linalg.norm(basis, axis=0)
    tt = TTNodeEmbedding(60, 16, ranks=2, row_shape=[4, 4, 4], col_shape=[2, 2, 4])
    table = probes.rotated_table(tt, basis, 2.0, seed=0, rounds=10)
    w = np.linalg.lstsq(basis, table.numpy(), rcond=None)[0]
    np.testing.assert_allclose(w @ w.T, 4.0 * np.eye(3), atol=1e-8)
    first = torch.zeros(60, 16, dtype=torch.float64)
    first[:, :3] = torch.from_numpy(2.0 * basis)
    assert probes.tt_copy(tt, table).svd_relative_error <= probes.tt_copy(tt, first).svd_relative_error + 1e-9


@pytest.mark.data
def test_smooth_finished_runs_gives_back_what_the_run_reported(data_root, tmp_path, load_script):
    from ttgnn.cli import main

    out = tmp_path / "run"
    assert main(["train", "--root", str(data_root), "--cache-dir", str(tmp_path / "cache"), "--dataset", "cora",
                 "--rank", "4", "--epochs", "3", "--num-threads", "1", "--no-progress", "--no-from-full",
                 "--output-dir", str(out)]) == 0
    reported = json.loads((out / "metrics.json").read_text())
    row = load_script("benchmarks/smooth_finished_runs.py").smooth_run(out, str(data_root), {})
    assert row["valid"] == pytest.approx(reported["best_valid_acc"], abs=1e-6)
    assert row["test"] == pytest.approx(reported["test_acc"], abs=1e-6)
    assert row["cs_valid"] == pytest.approx(reported["correct_smooth"]["valid_acc"], abs=1e-6)
    assert row["cs_test"] == pytest.approx(reported["correct_smooth"]["test_acc"], abs=1e-6)
    # a run whose recorded accuracy its model does not give is refused
    reported["test_acc"] += 0.01
    (out / "metrics.json").write_text(json.dumps(reported))
    with pytest.raises(ValueError, match="the best model gives test accuracy"):
        load_script("benchmarks/smooth_finished_runs.py").smooth_run(out, str(data_root), {})
    # a run evaluated on sampled neighbourhoods is refused as ttgnn predict refuses it, not as a mismatch
    sampled = tmp_path / "sampled"
    assert main(["train", "--root", str(data_root), "--cache-dir", str(tmp_path / "cache"), "--dataset", "cora",
                 "--rank", "4", "--epochs", "1", "--num-threads", "1", "--no-progress", "--no-from-full", "--model",
                 "sage", "--mode", "minibatch", "--num-layers", "2", "--fanouts", "3,3", "--eval-fanouts", "3,3",
                 "--output-dir", str(sampled)]) == 0
    with pytest.raises(ValueError, match=r"^the run evaluated its split nodes on sampled neighbourhoods \(eval_fanouts"):
        load_script("benchmarks/smooth_finished_runs.py").smooth_run(sampled, str(data_root), {})


def test_train_arxiv_commands_pin_the_defaults_their_tables_were_measured_with(load_script):
    # Every configuration's table in docs/results.md was measured before label spreading (and most
    # before label reuse) became defaults: the script's commands must keep them off unless named.
    from ttgnn.cli import build_parser, config_from_args
    from ttgnn.shapes import shape_for_budget

    arxiv = load_script("benchmarks/train_arxiv.py")
    parser = build_parser()
    for cores, args in arxiv.TT_CORES.items():  # the largest ranks at >= 1,000x, as the budget rule finds them
        shape = shape_for_budget(169_343, 128, compression=1000, num_cores=cores)
        assert args == ["--embedding", "tt", "--rank", str(shape.ranks[1]),
                        "--row-shape", ",".join(map(str, shape.row_shape)),
                        "--col-shape", ",".join(map(str, shape.col_shape))], cores
    for name in arxiv.CONFIGS:
        cmd = arxiv.command(name, Path("out"), 1, 1)
        assert cmd[:2] == ["ttgnn", "train"]
        config = config_from_args(parser.parse_args(cmd[1:]))
        config.validate()
        if name.startswith("now-"):  # today's defaults: every automatic setting left to the run
            model, embedding = name.split("-")[1:3]
            bare = ["train", "--dataset", "ogbn-arxiv", "--model", model,
                    "--embedding", "tt" if embedding.startswith("tt") else embedding]
            if embedding.startswith("tt"):  # the largest rank within 1,000x, three cores or as named
                shape = shape_for_budget(169_343, 128, compression=1000, num_cores=int(embedding[2:] or 3))
                bare += ["--rank", str(shape.ranks[1]), "--row-shape", ",".join(map(str, shape.row_shape)),
                         "--col-shape", ",".join(map(str, shape.col_shape))]
            if name.endswith("-from-full"):
                bare.append("--from-full")
            if name.endswith("-wa10"):
                bare += ["--weight-average", "10"]
            suffixes = name.split("-")[3:]
            if "ce" in suffixes:
                bare += ["--loss", "ce"]
            bare += [arg for s in suffixes if s.startswith("emblr") for arg in ("--emb-lr", s[len("emblr"):])]
            if "ortho" in suffixes:
                bare += ["--init", "ortho"]
            if "spectral8" in suffixes:
                bare += ["--init", "spectral", "--spectral-vectors", "8"]
            if "metis" in suffixes:
                bare += ["--order", "hierarchical-metis"]
            if "cosine" in suffixes:
                bare += ["--lr-schedule", "cosine"]
            bare += [arg for s in suffixes if s.startswith("col") for arg in ("--col-shape", ",".join(s[len("col"):]))]
            bare += [arg for s in suffixes if s.startswith("dropout") for arg in ("--dropout", s[len("dropout"):])]
            bare += [arg for s in suffixes if s.startswith("scale") for arg in ("--init-scale", s[len("scale"):])]
            if "normres" in suffixes:
                bare += ["--norm", "batch", "--residual"]
            expected = config_from_args(parser.parse_args(bare))
            for field in ("label_input", "label_reuse", "label_spread", "loss", "label_smoothing", "init",
                          "spectral_vectors", "dropout", "lr", "emb_lr", "norm", "from_full", "order", "rank",
                          "row_shape", "col_shape", "weight_average", "embedding", "lr_schedule", "init_scale"):
                assert getattr(config, field) == getattr(expected, field), (name, field)
            assert config.label_spread is None and config.label_reuse is None, name
            assert config.loss == ("ce" if "ce" in suffixes else None), name
            continue
        assert config.label_spread == (10 if "-spread10" in name else 0), name
        assert config.label_reuse == (1 if "-reuse1" in name else 0), name
        assert config.loss == ("log-ce" if "logce" in name else "ce"), name  # never left to the rule
        assert config.label_smoothing == (0.1 if name.endswith("-ls0.1") else 0.0), name


def test_train_arxiv_counts_a_from_full_run_only_when_both_stages_finished(tmp_path, load_script):
    arxiv = load_script("benchmarks/train_arxiv.py")
    run = tmp_path / "now-gat-tt-from-full" / "seed0"
    arxiv.full_table_metrics(run).parent.mkdir(parents=True)

    def write(path, epochs, from_full=None):
        metrics = {"epochs": [{}] * epochs, "settings": {"finetune_epochs": 50, "seed": 0}}
        if from_full:
            metrics["from_full"] = from_full
        path.write_text(json.dumps(metrics))

    tt, full = run / "metrics.json", arxiv.full_table_metrics(run)
    write(tt, 50, from_full={"full_table": {}})
    assert not arxiv.finished(tt, 200)  # the full table's run is missing
    write(full, 120)
    assert not arxiv.finished(tt, 200)  # ... or stopped before its last epoch
    write(full, 200)
    assert arxiv.finished(tt, 200)  # the TT stage counts its fine-tuning epochs, not the run's
    write(tt, 49, from_full={"full_table": {}})
    assert not arxiv.finished(tt, 200)
    write(tt, 200)  # a run without --from-full counts its own epochs only
    assert arxiv.finished(tt, 200) and not arxiv.finished(tt, 201)


def test_train_arxiv_reads_a_weight_averaged_run_as_trained_too(load_script):
    arxiv = load_script("benchmarks/train_arxiv.py")
    epochs = [{"epoch": 1, "valid_acc": 0.60, "test_acc": 0.55, "raw_valid_acc": 0.62, "raw_test_acc": 0.58},
              {"epoch": 2, "valid_acc": 0.64, "test_acc": 0.61, "raw_valid_acc": 0.63, "raw_test_acc": 0.57},
              {"epoch": 3, "valid_acc": 0.63, "test_acc": 0.62, "raw_valid_acc": 0.63, "raw_test_acc": 0.60}]
    run = {"epochs": epochs, "best_valid_acc": 0.64, "test_acc": 0.61, "best_epoch": 2,
           "correct_smooth": {"valid_acc": 0.7, "test_acc": 0.7}}
    raw = arxiv.as_trained(run)
    # the trained weights' best epoch is the first of the two at 0.63, with its own test accuracy
    assert (raw["best_epoch"], raw["best_valid_acc"], raw["test_acc"]) == (2, 0.63, 0.57)
    assert raw["correct_smooth"] is None and run["test_acc"] == 0.61  # the averaged figures stay as they were
    assert "--weight-average" in arxiv.command("now-gat-tt-wa10", Path("out"), 1, 1)


def test_train_arxiv_command_names_the_device_only_off_the_cpu(load_script):
    from ttgnn.cli import build_parser

    arxiv = load_script("benchmarks/train_arxiv.py")
    cpu = arxiv.command("defaults-gat-tt", Path("out"), 1, 1)
    cuda = arxiv.command("defaults-gat-tt", Path("out"), 1, 1, device="cuda")
    assert "--device" not in cpu
    assert build_parser().parse_args(cuda[1:]).device == "cuda"
    assert [a for a in cuda if a not in ("--device", "cuda")] == cpu


def test_compression_sweep_reuses_only_a_finished_run_with_the_same_settings(tmp_path, load_script):
    import dataclasses

    from ttgnn.config import TrainConfig

    finished_run = load_script("benchmarks/compression_sweep.py").finished_run
    config = TrainConfig(dataset="cora", embedding="tt", rank=4, epochs=3, label_spread=10, label_reuse=3,
                         num_threads=1, root="/data", output_dir=str(tmp_path))

    def write(settings, epochs):
        (tmp_path / "metrics.json").write_text(json.dumps({"epochs": [{"epoch": e + 1} for e in range(epochs)],
                                                           "settings": settings}))

    assert finished_run(tmp_path, config) is None  # nothing there
    write(config.settings(), 2)
    assert finished_run(tmp_path, config) is None  # interrupted after epoch 2 of 3
    write(config.settings(), 3)
    assert finished_run(tmp_path, config)["epochs"][-1] == {"epoch": 3}
    # where it ran and with how many threads do not matter; what it computes does
    moved = dataclasses.replace(config, num_threads=2, root="/elsewhere", output_dir="/other", overwrite=True)
    assert finished_run(tmp_path, moved) is not None
    for change in ({"label_spread": 0}, {"rank": 5}, {"seed": 1}, {"epochs": 4}, {"lr": 0.02}):
        assert finished_run(tmp_path, dataclasses.replace(config, **change)) is None, change
    # a file written before spreading existed had it off; a setting missing otherwise is a difference
    older = {k: v for k, v in config.settings().items() if k != "label_spread"}
    write(older, 3)
    assert finished_run(tmp_path, dataclasses.replace(config, label_spread=0)) is not None
    assert finished_run(tmp_path, config) is None
    write({k: v for k, v in config.settings().items() if k != "lr"}, 3)
    assert finished_run(tmp_path, config) is None
    # the full table's runs are matched without the TT-only settings (they recorded the default rank)
    full = dataclasses.replace(config, embedding="full", rank=None)
    write(dataclasses.replace(full, rank=8).settings(), 3)
    assert finished_run(tmp_path, full) is not None
    assert finished_run(tmp_path, dataclasses.replace(full, order="random")) is None


def test_compression_sweep_passes_its_settings_to_every_run(load_script):
    import argparse

    from ttgnn.cli import build_parser, config_from_args

    sweep = load_script("benchmarks/compression_sweep.py")
    args = argparse.Namespace(settings="cli", epochs=7, num_threads=1, init=None, label_input=False,
                              spectral_vectors=None, label_spread=0, loss="log-ce", root="/data")
    cmd = sweep.run_args(args, "cora", "gat", "tt", 4, 3, Path("out"))
    config = config_from_args(build_parser().parse_args(cmd))
    assert (config.loss, config.label_spread, config.label_input, config.rank, config.seed, config.epochs) == \
        ("log-ce", 0, False, 4, 3, 7)
    args.loss = args.label_spread = args.label_input = None  # unset: the settings' (the command line's) defaults
    config = config_from_args(build_parser().parse_args(sweep.run_args(args, "cora", "gat", "full", None, 0,
                                                                       Path("out"))))
    assert (config.loss, config.label_spread, config.embedding) == (None, None, "full")


@pytest.mark.data
def test_small_graphs_from_full_pairs_each_tt_run_with_its_full_table_run(data_root, tmp_path, run_main):
    out = tmp_path / "runs"
    cmd = [sys.executable, str(REPO / "benchmarks" / "small_graphs_from_full.py"), "--root", str(data_root),
           "--datasets", "cora", "--seeds", "2", "--jobs", "2", "--out", str(out), "--",
           "--epochs", "3", "--finetune-epochs", "2", "--cache-dir", str(tmp_path / "cache")]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    runs = [json.loads((out / "cora" / f"seed{s}" / name).read_text())
            for s in (0, 1) for name in ("metrics.json", "full-table/metrics.json")]
    assert [r["embedding"] for r in runs] == ["tt", "full", "tt", "full"]
    tt_test = [runs[0]["test_acc"], runs[2]["test_acc"]]
    full_test = [runs[1]["test_acc"], runs[3]["test_acc"]]
    diff = sum(100 * (t - f) for t, f in zip(tt_test, full_test)) / 2
    assert f"TT - full, paired by seed (points, mean ± s.e.): test {diff:+.2f}" in first.stdout
    assert f"cora: 2 seeds (0, 1), TT {runs[0]['compression_ratio']:.0f}x" in first.stdout
    assert runs[0]["compression_ratio"] >= 100.0  # the default rank for a table from a full one: the largest at 100x
    # finished runs are reused: nothing is trained again (this and the next two in this process: the
    # script's own start was checked above)
    script = "benchmarks/small_graphs_from_full.py"
    code, again, _ = run_main(script, *cmd[2:])
    assert code == 0 and "cora: 2 seeds (0, 1)," in again and "ttgnn train" not in again
    code, more, _ = run_main(script, *cmd[2:cmd.index("--seeds")], "--seeds", "3", "--report",
                             *cmd[cmd.index("--jobs"):])
    assert code == 0 and "cora: 2 seeds (0, 1; not finished or refused: seeds 2)," in more  # the missing one named
    assert json.loads((out / "cora" / "seed0" / "metrics.json").read_text()) == runs[0]
    # a finished run made with other settings is refused, naming the stage that differs, not reused or trained
    code, other, _ = run_main(script, *cmd[2:], "--finetune-distill", "1.0")
    assert code == 1 and "ttgnn train" not in other and "TT - full" not in other
    seed0 = out / "cora" / "seed0"
    assert f"cora seed 0: refused, made with other settings than this command gives: {seed0} (" in other
    # ... and trained again from the kept full table's run once that stage's files are gone
    for name in ("metrics.json", "checkpoint.pt", "best_model.pt"):
        (seed0 / name).unlink()
    split = cmd.index("--")
    code, mended, err = run_main(script, *cmd[2:split], "--seeds", "1", *cmd[split:], "--finetune-distill", "1.0")
    assert code == 0 and "ttgnn train" in mended, mended[-2000:] + err[-2000:]  # what "not trained" looks for
    assert json.loads((seed0 / "metrics.json").read_text())["settings"]["finetune_distill"] == 1.0
    kept = json.loads((seed0 / "full-table" / "metrics.json").read_text())
    assert [kept[k] for k in ("epochs", "best_epoch", "test_acc")] == [runs[1][k] for k in ("epochs", "best_epoch",
                                                                                            "test_acc")]  # not retrained


@pytest.mark.data
def test_full_table_tt_svd_at_full_rank_gives_back_the_full_tables_accuracy(data_root, load_script):
    import argparse

    from ttgnn.data import load_dataset

    script = load_script("benchmarks/full_table_tt_svd.py")
    args = argparse.Namespace(dataset="cora", num_threads=1, ranks=[2, 10_000], train_args=["--epochs", "3"])
    result = script.one_seed(args, load_dataset("cora", root=str(data_root)), seed=0)
    trained, exact, lossy = result["full table as trained"], result["TT-SVD at rank 10000"], result["TT-SVD at rank 2"]
    assert exact[1] < 1e-5 and exact[0] == trained[0]  # exact TT-SVD: the same accuracies
    assert lossy[1] > 0.3 and lossy[2] > 100  # rank 2: a lossy copy, over 100x smaller


def _arxiv_run(folder: Path, seed: int, valid: list, test: list, epochs: int = None, raw: list = None) -> None:
    """A metrics.json as ``ttgnn train`` writes it, with the accuracies of each epoch (``raw``: a
    ``--weight-average`` run's trained weights' (valid, test) per epoch)."""
    records = [{"epoch": i + 1, "valid_acc": v, "test_acc": t} for i, (v, t) in enumerate(zip(valid, test))]
    for record, (rv, rt) in zip(records, raw or ()):
        record.update(raw_valid_acc=rv, raw_test_acc=rt)
    best = max(records, key=lambda r: r["valid_acc"])
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({
        "settings": {"seed": seed, "epochs": epochs or len(records), "dropout": 0.5}, "epochs": records,
        "model": "gat", "embedding": "tt", "compression_ratio": 1118.0, "epoch_time": 1.0, "peak_memory_mib": 1024,
        "best_valid_acc": best["valid_acc"], "test_acc": best["test_acc"], "best_epoch": best["epoch"],
        "correct_smooth": {"valid_acc": 0.5, "test_acc": 0.5}}))


def test_train_arxiv_pairs_seeds_and_counts_averaged_runs_as_trained(tmp_path, load_script, run_main):
    arxiv = load_script("benchmarks/train_arxiv.py")
    from summary import paired

    assert paired([0.71, 0.70], [0.70, 0.70]) == "+0.50 ± 0.50 (ahead on 1 of 2)"
    assert paired([0.7], [0.69]) == "+1.00 ± 0.00 (ahead on 1 of 1)"
    with pytest.raises(ValueError, match="equally long"):
        paired([0.7], [])
    out = tmp_path
    _arxiv_run(out / "now-gat-tt" / "seed0", 0, [0.60, 0.72], [0.60, 0.71])
    _arxiv_run(out / "now-gat-tt" / "seed2", 2, [0.60], [0.60], epochs=2)  # stopped after epoch 1: not counted
    # seed 1 with averaging: its best epoch by the averaged weights is 1, by the trained weights 2
    _arxiv_run(out / "now-gat-tt-wa10" / "seed1", 1, [0.73, 0.70], [0.69, 0.68], raw=[(0.60, 0.60), (0.71, 0.72)])
    _arxiv_run(out / "now-gat-tt-wa10" / "seed0", 0, [0.10], [0.10])  # seed 0 is now-gat-tt's: not this one
    for seed, test in enumerate((0.70, 0.71, 0.70)):
        _arxiv_run(out / "now-gat-full" / f"seed{seed}", seed, [0.71], [test])
    pool = arxiv.pooled_runs(out, "now-gat-tt,now-gat-tt-wa10")
    assert sorted(pool) == [0, 1]
    assert (pool[0]["test_acc"], pool[1]["test_acc"], pool[1]["best_epoch"]) == (0.71, 0.72, 2)
    report = arxiv.paired_report(out, "now-gat-tt,now-gat-tt-wa10", "now-gat-full")
    assert "paired by seed (seeds 0, 1;" in report
    assert "difference: test +1.00 ± 0.00 (ahead on 2 of 2), valid +0.50 ± 0.50 (ahead on 1 of 2)" in report
    assert "Correct and Smooth" not in report  # the averaged run's C&S is not the trained weights'
    assert arxiv.paired_report(out, "now-gat-tt", "now-sage-tt") == "now-gat-tt - now-sage-tt: no seed finished in both"
    cmd = ["benchmarks/train_arxiv.py", "--out", str(out), "--table-only", "--only", "now-gat-tt", "--paired",
           "now-gat-tt,no-such-config", "now-gat-full"]
    code, _, err = run_main(*cmd)
    assert code == 2 and "unknown configuration(s) no-such-config" in err
    cmd[-3:] = ["--paired", "now-gat-tt", "now-gat-full"]
    code, table, err = run_main(*cmd)
    assert code == 0, err[-2000:]
    assert "now-gat-tt - now-gat-full, paired by seed (seeds 0;" in table
    # the table counts each run that reached its own last epoch, whatever --epochs (GAT's: 100) says
    assert "| now-gat-tt | tt | - | - | 1,118x | 1 | 0.7200 | 0.7100 |" in table
    assert "| 2 of 2 |" in table and "not counted: now-gat-tt/seed2 (not finished)" in table
    assert "with Correct and Smooth: test +0.00 ± 0.00 (ahead on 0 of 1)" in table
    # the command shown is the one the finished runs ran (2 epochs, 1 thread), not GAT's default 100 epochs
    metrics = json.loads((out / "now-gat-tt" / "seed0" / "metrics.json").read_text())
    metrics["settings"]["num_threads"] = 1
    (out / "now-gat-tt" / "seed0" / "metrics.json").write_text(json.dumps(metrics))
    _, table, _ = run_main(*cmd)
    shown = next(line for line in table.splitlines() if line.startswith("now-gat-tt: ttgnn train"))
    assert "--epochs 2 " in shown and "--num-threads 1 " in shown, shown


def test_train_arxiv_table_counts_the_seeds_asked_for(tmp_path, run_main):
    # --seeds K: the table, --paired and the command shown count seeds 0..K-1 alone (a table of "seeds 0-4"
    # in docs/results.md is regenerated from a folder that has more); without it every finished seed counts
    for seed in range(3):
        _arxiv_run(tmp_path / "now-gat-tt" / f"seed{seed}", seed, [0.70], [0.70 + seed / 100])
        _arxiv_run(tmp_path / "now-gat-full" / f"seed{seed}", seed, [0.70], [0.70])
    cmd = ["benchmarks/train_arxiv.py", "--out", str(tmp_path), "--table-only", "--only", "now-gat-tt",
           "--paired", "now-gat-tt", "now-gat-full"]
    code, table, err = run_main(*cmd)
    assert code == 0, err[-2000:]
    assert "| now-gat-tt | tt | - | - | 1,118x | 3 | 0.7000 ± 0.0000 | 0.7100 ± 0.0100 |" in table
    assert "(seeds 0, 1, 2;" in table
    code, table, err = run_main(*cmd, "--seeds", "2", "--first-seed", "1")  # the table counts seed 0 too
    assert code == 0, err[-2000:]
    assert "| now-gat-tt | tt | - | - | 1,118x | 2 | 0.7000 ± 0.0000 | 0.7050 ± 0.0071 |" in table
    assert "(seeds 0, 1;" in table and "difference: test +0.50 ± 0.50 (ahead on 1 of 2)" in table
    assert "not counted" not in table  # seed 2 was not asked for: no reason to name it
    code, _, err = run_main(*cmd, "--seeds", "0")
    assert code == 2 and "--seeds must be >= 1, got 0" in err
    shutil.rmtree(tmp_path / "now-gat-tt" / "seed0")
    code, _, err = run_main(*cmd, "--seeds", "1")
    assert code == 2 and f"no runs of seed 0 of now-gat-tt under {tmp_path}" in err


def test_train_arxiv_runs_every_seed_when_one_fails_and_names_the_failed(tmp_path):
    # before: the first failed run ended the script with a traceback, and the rest never started (one job at a
    # time: the second run starts after the first has failed)
    out = tmp_path / "runs"
    (tmp_path / "broken" / "ogbn_arxiv").mkdir(parents=True)  # each run fails on it (a missing root is refused first)
    cmd = [sys.executable, str(REPO / "benchmarks" / "train_arxiv.py"), "--out", str(out), "--root",
           str(tmp_path / "broken"), "--only", "now-gat-tt", "now-gat-full", "--seeds", "1", "--jobs", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("ttgnn train: error: dataset file not found") == 2, proc.stderr[-3000:]
    assert "2 run(s) failed (each printed its error above)" in proc.stderr
    failed = [line for line in proc.stderr.splitlines() if line.startswith("  exit code 2: ttgnn train ")]
    assert sorted(line.split("--output-dir ")[1].split()[0] for line in failed) == [
        str(out / name / "seed0") for name in ("now-gat-full", "now-gat-tt")]


def test_train_arxiv_pairs_runs_within_their_first_epochs(tmp_path, load_script, run_main):
    arxiv = load_script("benchmarks/train_arxiv.py")
    out = tmp_path
    # TT peaks late (epoch 3), the full table early (epoch 1): within 2 epochs TT's best is epoch 2
    _arxiv_run(out / "now-gat-tt" / "seed0", 0, [0.60, 0.70, 0.72], [0.60, 0.69, 0.71])
    _arxiv_run(out / "now-gat-tt" / "seed1", 1, [0.70], [0.70])  # one epoch: too short for 2, left out
    for seed in (0, 1):
        _arxiv_run(out / "now-gat-full" / f"seed{seed}", seed, [0.71, 0.70], [0.70, 0.72])
    run = json.loads((out / "now-gat-tt" / "seed0" / "metrics.json").read_text())
    first = arxiv.first_epochs(run, 2)
    assert (first["best_epoch"], first["best_valid_acc"], first["test_acc"], len(first["epochs"])) == (2, 0.70, 0.69, 2)
    assert first["correct_smooth"] is None  # C&S ran on epoch 3's model
    assert run["best_epoch"] == 3 and arxiv.first_epochs(run, 3)["correct_smooth"] == run["correct_smooth"]
    report = arxiv.paired_report(out, "now-gat-tt", "now-gat-full", epochs=2)
    assert "paired by seed within their first 2 epochs (seeds 0;" in report
    assert "difference: test -1.00 ± 0.00 (ahead on 0 of 1), valid -1.00 ± 0.00 (ahead on 0 of 1)" in report
    whole = arxiv.paired_report(out, "now-gat-tt", "now-gat-full")  # without a limit: both seeds, epoch 3's best
    assert "(seeds 0, 1;" in whole and "difference: test +0.50 ± 0.50 (ahead on 1 of 2)" in whole
    with pytest.raises(ValueError, match="cosine learning-rate schedule over 3 epochs; its first 2 are not a run"):
        arxiv.first_epochs(dict(run, settings=dict(run["settings"], lr_schedule="cosine")), 2)
    cmd = ["--out", str(out), "--table-only", "--only", "now-gat-tt", "--paired-epochs", "2"]
    code, _, err = run_main("benchmarks/train_arxiv.py", *cmd)
    assert code == 2 and "--paired-epochs needs --paired" in err
    code, table, err = run_main("benchmarks/train_arxiv.py", *cmd, "--paired", "now-gat-tt", "now-gat-full")
    assert code == 0 and "within their first 2 epochs (seeds 0;" in table, err[-2000:]
    # a count for each side: TT by its first 3 epochs (seed 1 has 1: left out), the full table by its first 1
    both = arxiv.paired_report(out, "now-gat-tt", "now-gat-full", 3, 1)
    assert "within the first 3 epochs (now-gat-tt) and the first 1 epochs (now-gat-full) (seeds 0;" in both
    assert "difference: test +1.00 ± 0.00 (ahead on 1 of 1), valid +1.00 ± 0.00 (ahead on 1 of 1)" in both
    whole_tt = arxiv.paired_report(out, "now-gat-tt", "now-gat-full", None, 2)
    assert "within all epochs (now-gat-tt) and the first 2 epochs (now-gat-full) (seeds 0, 1;" in whole_tt
    code, table, _ = run_main("benchmarks/train_arxiv.py", *cmd[:-1], "3", "1", "--paired", "now-gat-tt",
                              "now-gat-full")
    assert code == 0 and "first 3 epochs (now-gat-tt) and the first 1 epochs (now-gat-full)" in table
    for counts in (["1", "2", "3"], ["0"], ["2", "0"]):
        code, _, err = run_main("benchmarks/train_arxiv.py", *cmd[:-1], *counts, "--paired", "now-gat-tt",
                                "now-gat-full")
        assert code == 2 and "--paired-epochs needs --paired and one or two counts >= 1, got " + \
            " ".join(counts) in err, counts


def test_arxiv_subgraphs_cut_keeps_the_years_edges_and_labels_and_splits_by_time(load_script):
    cut = load_script("benchmarks/arxiv_subgraphs.py").cut_by_year
    import numpy as np
    years = np.array([2010, 2014, 2011, 2012, 2013, 2009, 2012])
    labels = np.array([0, 1, 2, 3, 4, 5, 6])
    edge_index = np.array([[0, 1, 2, 3, 4, 5, 6, 6],
                           [2, 0, 3, 4, 1, 6, 5, 0]])
    edges, kept_labels, split = cut(edge_index, labels, years, 2012)
    # kept: old 0, 2, 3, 5, 6 (years <= 2012) -> new 0, 1, 2, 3, 4
    np.testing.assert_array_equal(kept_labels, [0, 2, 3, 5, 6])
    np.testing.assert_array_equal(edges, [[0, 1], [1, 2], [3, 4], [4, 3], [4, 0]])
    np.testing.assert_array_equal(split["train"], [0, 3])   # 2010, 2009
    np.testing.assert_array_equal(split["valid"], [1])      # 2011
    np.testing.assert_array_equal(split["test"], [2, 4])    # 2012


@pytest.mark.data
def test_arxiv_subgraphs_trains_both_tables_and_reuses_only_runs_with_the_commands_settings(data_root, tmp_path,
                                                                                            run_main):
    out, data_dir = tmp_path / "runs", tmp_path / "graphs"
    # ogbn-arxiv cut at 2001: 924 papers (train <= 1999, valid 2000, test 2001), 2 epochs a run
    cmd = [sys.executable, str(REPO / "benchmarks" / "arxiv_subgraphs.py"), "--root", str(data_root), "--years",
           "2001", "--seeds", "1", "--jobs", "2", "--out", str(out), "--data-dir", str(data_dir), "--",
           "--epochs", "2", "--cache-dir", str(tmp_path / "cache")]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "924 papers of year <= 2001" in (data_dir / "arxiv-to-2001" / "PROVENANCE.txt").read_text()
    tt, full = (json.loads((out / "arxiv-to-2001" / e / "seed0" / "metrics.json").read_text()) for e in ("tt", "full"))
    assert (tt["embedding"], full["embedding"]) == ("tt", "full") and len(tt["epochs"]) == 2
    assert "arxiv-to-2001: 1 seed(s) with both tables finished with this command's settings [0]" in first.stdout
    assert f"TT - full, test: {100 * (tt['test_acc'] - full['test_acc']):+.2f}" in first.stdout
    # finished runs with the command's settings are reused, not trained again (in this process: the
    # script's own start was checked above)
    code, again, _ = run_main("benchmarks/arxiv_subgraphs.py", *cmd[2:])
    assert code == 0 and again.count("finished before, reused") == 2, again[-2000:]
    assert json.loads((out / "arxiv-to-2001" / "tt" / "seed0" / "metrics.json").read_text()) == tt
    # runs made with other settings (here another learning rate) are refused and left out, not reused or trained
    code, other, _ = run_main("benchmarks/arxiv_subgraphs.py", *cmd[2:], "--lr", "0.005")
    assert code == 1, other[-2000:]
    for embedding in ("tt", "full"):
        assert f"{out / 'arxiv-to-2001' / embedding / 'seed0'}: REFUSED, made with other settings" in other
    assert "left out, finished with other settings: tt/seed0, full/seed0" in other
    assert "TT - full" not in other
    assert json.loads((out / "arxiv-to-2001" / "tt" / "seed0" / "metrics.json").read_text()) == tt


@pytest.mark.parametrize("script,args,message", [
    ("bench_ddp.py", ["--dataset", "synthetic", "--configs", "1:1", "--steps", "0"], "--steps must be >= 1, got 0"),
    ("bench_scale.py", ["--nodes", "20000", "--steps", "5"],
     "5,120 training and 20,000 validation nodes do not fit in --nodes 20,000: lower --valid-nodes, --train-nodes "
     "or --steps x --batch-size"),
    ("compression_sweep.py", ["--seeds", "0"], "--seeds must be >= 1, got 0"),
    ("compression_sweep.py", ["--root", "{missing}", "--seeds", "1", "--ranks", "2", "--epochs", "1", "--out", "{out}"],
     "dataset root not found: {missing} (given as --root or root=)"),
    ("full_table_tt_svd.py", ["--root", "{missing}"], "dataset root not found: {missing} (given as --root or root=)"),
    ("smooth_finished_runs.py", ["{out}"], "No such file or directory: {out}/metrics.json"),
    # counts below their bound failed inside the work ("list index out of range"), or did nothing and exited 0
    ("full_table_tt_svd.py", ["--seeds", "0"], "argument --seeds: must be an integer >= 1, got 0"),
    ("full_table_tt_svd.py", ["--", "--embed", "tt"],  # a traceback: a TT table has no .weight
     "--embedding: this script trains the full table itself (and compresses it afterwards); leave it out"),
    ("small_graph_probes.py", ["--seeds", "-1"], "argument --seeds: must be an integer >= 1, got -1"),
    ("small_graphs_from_full.py", ["--seeds", "0", "--out", "{out}"], "argument --seeds: must be an integer >= 1, got 0"),
    ("small_graphs_from_full.py", ["--jobs", "0", "--out", "{out}"], "argument --jobs: must be an integer >= 1, got 0"),
    ("arxiv_subgraphs.py", ["--seeds", "0"], "argument --seeds: must be an integer >= 1, got 0"),
    ("arxiv_subgraphs.py", ["--first-seed", "-2"], "argument --first-seed: must be an integer >= 0, got -2"),
    ("train_arxiv.py", ["--jobs", "0"], "argument --jobs: must be an integer >= 1, got 0"),
    ("train_arxiv.py", ["--only", "now-gat-tt", "--root", "{missing}", "--out", "{out}"],
     "dataset root not found: {missing} (--root)"),
    ("bench_scale.py", ["--nodes", "-5"], "argument --nodes: must be an integer >= 1, got -5"),
    ("bench_coarsen.py", ["--nodes", "-5"], "argument --nodes: must be an integer >= 1, got -5"),
    ("bench_partition.py", ["--nodes", "0"], "argument --nodes: must be an integer >= 1, got 0"),
])
def test_benchmark_scripts_refuse_bad_input_in_one_line(tmp_path, script, args, message, run_main, monkeypatch):
    # each of these ended in a traceback (an UnboundLocalError for bench_ddp's --steps 0)
    where = {"missing": str(tmp_path / "missing"), "out": str(tmp_path / "out")}
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(f"benchmarks/{script}", *(a.format(**where) for a in args))
    assert code == 2, err[-3000:]
    assert err.strip().splitlines()[-1] == f"{script}: error: {message.format(**where)}"
    assert "Traceback" not in err


@pytest.mark.data
def test_propagation_benchmark_prints_both_ways(data_root, run_main, monkeypatch):
    from ttgnn import graph_ops

    calls = []
    original = graph_ops.csr_aggregate
    monkeypatch.setattr(graph_ops, "csr_aggregate", lambda *a: calls.append(1) or original(*a))
    code, out, err = run_main("benchmarks/bench_propagation.py", "--dataset", "cora", "--root", str(data_root),
                              "--rounds", "1", "--products", "2", "--num-threads", "1", "--width", "32")
    assert code == 0, err
    assert len(calls) == 1 + 2  # the check, then the kernel's timed products (torch's ran inside reference_only)
    assert "C&S tuning not timed: 7 classes, under 24 columns" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("one product", "C&S tuning"))]
    assert len(rows) == 1 and float(rows[0][-1]) > 0
    assert re.search(r"CPU .+, CPU path \w+, 1 threads", out)  # the machine each figure was measured on
    # under 24 columns both ways run torch's product: no ratio of two runs of the same code
    code, out, err = run_main("benchmarks/bench_propagation.py", "--dataset", "cora", "--root", str(data_root),
                              "--rounds", "1", "--products", "2", "--num-threads", "1")
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("one product")]
    assert code == 0 and rows[0][-1] == "-", out
    code, _, err = run_main("benchmarks/bench_propagation.py", "--rounds", "0")
    assert code == 2 and "--rounds must be >= 1, got 0" in err


@pytest.mark.data
def test_dropout_benchmark_times_both_dropouts_and_the_epochs(data_root, run_main, monkeypatch):
    from extension import require_kernels
    from ttgnn import dropout as drop

    require_kernels("cpu")
    calls = []
    original = drop.dropout
    monkeypatch.setattr(drop, "dropout", lambda *a, **k: calls.append(drop._applies(a[0])) or original(*a, **k))
    code, out, err = run_main("benchmarks/bench_dropout.py", "--rows", "1000", "--width", "8", "--rounds", "1",
                              "--num-threads", "1", "--epoch", "--dataset", "cora", "--root", str(data_root),
                              "--models", "sage")
    assert code == 0, err
    rows = {line.split("(")[0].strip(): line.split() for line in out.splitlines()
            if not line.startswith(("#", " " * 20))}
    assert set(rows) == {"op fwd+bwd", "sage epoch"}, out
    assert all(float(row[-1]) > 0 for row in rows.values())
    assert True in calls and False in calls  # ours ran, and torch's inside reference_only()
    code, _, err = run_main("benchmarks/bench_dropout.py", "--p", "1")
    assert code == 2 and "--p must lie in (0, 1), got 1.0" in err


def test_train_arxiv_counts_only_runs_of_the_configurations_settings_and_seed(tmp_path, load_script, run_main):
    # a run of other settings (copied or left in the folder) was pooled into the configuration's row, a folder
    # holding another seed's run counted twice, and the best epochs were listed in the folders' name order
    arxiv = load_script("benchmarks/train_arxiv.py")
    out = tmp_path
    _arxiv_run(out / "now-gat-tt" / "seed2", 2, [0.72, 0.71], [0.70, 0.70])  # best epoch 1
    _arxiv_run(out / "now-gat-tt" / "seed10", 10, [0.70, 0.72], [0.70, 0.70])  # best epoch 2
    _arxiv_run(out / "now-gat-tt" / "seed3", 2, [0.70], [0.70])  # seed 2's run again
    _arxiv_run(out / "now-gat-tt" / "seed4", 4, [0.90], [0.90])
    metrics = json.loads((out / "now-gat-tt" / "seed4" / "metrics.json").read_text())
    metrics["settings"]["col_shape"] = [4, 4, 8]  # the command gives 8,4,4
    (out / "now-gat-tt" / "seed4" / "metrics.json").write_text(json.dumps(metrics))
    runs, left_out = arxiv.counted_runs(out, "now-gat-tt")
    assert [r["settings"]["seed"] for r in runs] == [2, 10]
    assert left_out == ["now-gat-tt/seed3 (it ran seed 2)",
                        "now-gat-tt/seed4 (other settings: col_shape=[4, 4, 8] (command: [8, 4, 4]))"]
    code, table, err = run_main("benchmarks/train_arxiv.py", "--out", str(out), "--table-only", "--only", "now-gat-tt")
    assert code == 0 and "| 2 | 0.7200 ± 0.0000 | 0.7000 ± 0.0000 |" in table, err[-2000:]
    assert "| 1/2 of 2 |" in table and "not counted: now-gat-tt/seed3 (it ran seed 2), now-gat-tt/seed4" in table
    code, _, err = run_main("benchmarks/train_arxiv.py", "--out", str(out / "none"), "--table-only")
    assert code == 2 and "no runs of" in err and "(no such folder)" in err
    # --paired-epochs: a from_full run's best may be its start, epoch 0, which no record holds
    from_full = dict(runs[0], from_full={"start_valid_acc": 0.9})
    with pytest.raises(ValueError, match="a --from-full run; its epochs are the TT stage's"):
        arxiv.first_epochs(from_full, 1)
    # C&S that ran on another epoch's model than the best (no best model found) is not that epoch's
    moved = dict(runs[1], correct_smooth={"epoch": 1, "valid_acc": 0.5, "test_acc": 0.5})
    assert moved["best_epoch"] == 2 and arxiv.first_epochs(moved, 2)["correct_smooth"] is None


def test_results_plot_reads_only_runs_that_reached_their_last_epoch(tmp_path, load_script):
    # a run stopped early (and a from_full run's full-table stage) was averaged into the points
    plot = load_script("benchmarks/plot_results.py")
    done, stopped = _run("tt", 4, 0.5), _run("tt", 4, 0.99, seed=5)
    stopped["settings"]["epochs"] = 3
    for name, run in (("done", done), ("stopped", stopped), ("done/full-table", done)):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "metrics.json").write_text(json.dumps(dict(run, epochs=[{"epoch": 1}])))
    assert [m["test_acc"] for m in plot.load_runs([tmp_path])] == [0.5]


def test_smooth_finished_runs_names_and_skips_a_run_stopped_early(tmp_path, run_main):
    # a run stopped at epoch 1 of 3 was smoothed and averaged with finished ones
    stopped = _run("tt", 4, 0.5)
    stopped["settings"]["epochs"] = 3
    (tmp_path / "cfg" / "seed0").mkdir(parents=True)
    (tmp_path / "cfg" / "seed0" / "metrics.json").write_text(json.dumps(dict(stopped, epochs=[{"epoch": 1}])))
    code, out, err = run_main("benchmarks/smooth_finished_runs.py", str(tmp_path / "cfg" / "seed0"))
    assert code == 0 and out.strip() == f"not counted, not finished: {tmp_path / 'cfg' / 'seed0'}", err[-2000:]
