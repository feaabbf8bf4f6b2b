import pytest

from ttgnn.cli import _unread_sampling_options, _unread_table_options, build_parser, config_from_args, main


def test_info_prints_arxiv_compression(capsys):
    assert main(["info", "--rows", "169343", "--dim", "128", "--rank", "8", "64"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3
    assert "[55, 55, 56]" in out[1] and "19,392" in out[1] and "1,117.8x" in out[1]
    assert "943,616" in out[2] and "23.0x" in out[2]


def test_info_notes_a_tt_table_larger_than_the_dense_one(capsys):
    assert main(["info", "--rows", "100", "--dim", "16", "--rank", "2", "100000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4  # header, two rows, one note for the second rank only
    assert out[2].endswith("0.8x")
    assert out[3] == ("note: at rank 100000 the TT table (1,956 parameters) is no smaller than the dense 100 x 16 "
                      "table; a lower --rank compresses it")
    # with a budget that allows it, the note names the budget's option
    for budget, remedy in ((["--compression", "0.5"], "--compression above 1"),
                           (["--max-params", "2000"], "--max-params under 1,600")):
        assert main(["info", "--rows", "100", "--dim", "16", *budget]) == 0
        out = capsys.readouterr().out.splitlines()
        assert len(out) == 3 and out[1].endswith("0.8x")
        assert out[2] == ("note: at rank 16 the TT table (1,956 parameters) is no smaller than the dense 100 x 16 "
                          f"table; {remedy} compresses it")


def test_info_says_when_no_rank_compresses_the_table(capsys):
    # It advised "a lower --rank" at rank 1, and "--compression above 1", which then failed
    for options in (["--rank", "1"], ["--compression", "0.4"], ["--max-params", "10"]):
        assert main(["info", "--rows", "2", "--dim", "1", *options]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == (
            "note: at rank 1 the TT table (4 parameters) is no smaller than the dense 2 x 1 table; no rank "
            "compresses it (rank 1 has 4 parameters): keep it dense")


def test_info_notes_a_table_of_exactly_the_dense_size_and_no_smaller_one(capsys):
    # 16 x 4 in cores [4, 4] x [2, 2]: rank 4 has 64 parameters (1.0x), rank 3 has 48 (1.3x)
    assert main(["info", "--rows", "16", "--dim", "4", "--row-shape", "4,4", "--col-shape", "2,2",
                 "--rank", "3", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in out[1:3]] == ["1.3x", "1.0x"]
    assert out[3:] == ["note: at rank 4 the TT table (64 parameters) is no smaller than the dense 16 x 4 table; "
                       "a lower --rank compresses it"]


def test_info_takes_the_shapes_it_is_given_with_a_rank_or_a_budget(capsys):
    assert main(["info", "--rows", "169343"]) == 0  # rank 16 when nothing is given, the shapes automatic
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["16", "[55,", "55,"]
    given = ["--rows", "1000", "--dim", "16", "--row-shape", "10,100", "--col-shape", "8,2"]
    for extra in (["--rank", "2"], ["--max-params", "600"], ["--compression", "30"]):
        assert main(["info", *given, *extra]) == 0
        row = capsys.readouterr().out.splitlines()[1]
        assert "[10, 100]" in row and "[8, 2]" in row, (extra, row)
    assert main(["info", "--rows", "1000", "--dim", "16", "--num-cores", "2", "--rank", "2"]) == 0
    assert "[1, 2, 1]" in capsys.readouterr().out  # two cores, as asked


def test_info_billion_rows(capsys):
    assert main(["info", "--rows", "1000000000", "--rank", "16", "--num-cores", "4"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert "381,632" in line and "1.5 MiB" in line


def test_info_bad_shape_is_a_clear_error(capsys):
    assert main(["info", "--rows", "1000", "--dim", "128", "--row-shape", "10,10"]) == 2
    assert "covers 100 rows, fewer than num_embeddings=1000" in capsys.readouterr().err


def test_info_bad_rank_prints_no_half_table(capsys):
    # the second rank is bad: the error comes before the header and the first rank's row
    assert main(["info", "--rows", "1000", "--dim", "16", "--rank", "8", "-1"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "each rank must be >= 1, got -1" in out.err


def test_info_sizes_a_table_by_budget_as_train_does(capsys):
    # the rank train --compression / --max-params would pick, shown before training
    assert main(["info", "--rows", "169343", "--dim", "128", "--compression", "1000"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split()[0] == "8" and "19,392" in line and "1,117.8x" in line
    assert main(["info", "--rows", "169343", "--dim", "128", "--compression", "1000", "--num-cores", "5"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split()[0] == "15" and "20,820" in line and "1,041.1x" in line
    assert main(["info", "--rows", "169343", "--dim", "128", "--max-params", "19391"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split()[0] == "7" and "15,428" in line  # rank 8 has 19,392


@pytest.mark.parametrize("extra, message", [
    (["--compression", "100", "--rank", "4"],
     "give --rank or a budget (--compression / --max-params), not both: a budget picks the rank"),
    (["--compression", "100", "--max-params", "400"], "give at most one of --compression and --max-params"),
    (["--max-params", "10"],
     "a 169,343 x 128 TT table at rank 1 has 884 parameters, more than the budget of 10 parameters"),
    (["--compression", "0"], "compression must be a finite number > 0, got 0.0"),
])
def test_info_budget_errors_print_no_table(capsys, extra, message):
    assert main(["info", "--rows", "169343", "--dim", "128", *extra]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == f"ttgnn info: error: {message}\n"


@pytest.mark.parametrize("command, option", [(["info"], "--rows"), (["info", "--rows", "169343"], "--max-params"),
                                             (["plan"], "--nodes"), (["train"], "--max-params")])
def test_large_counts_may_be_written_in_exponent_form(capsys, command, option):
    parse = build_parser().parse_args
    for text, value in (("1e8", 10**8), ("1.11059956e8", 111_059_956), ("2E4", 20_000), ("1_000_000", 10**6),
                        ("12", 12), ("1.00000000000000001e17", 10**17 + 1)):
        assert getattr(parse([*command, option, text]), option[2:].replace("-", "_")) == value
    for text in ("2.5", "1.5e0", "1e-3", "nan", "inf", "1e", "0x10", "1e100", "1e1000000000"):
        with pytest.raises(SystemExit) as exit_info:
            parse([*command, option, text])
        assert exit_info.value.code == 2
        assert f"argument {option}: expected a whole number such as 169343 or 1e8, got {text!r}" in \
            capsys.readouterr().err


# ---------------------------------------------------------------------- errors, exit codes, help
import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from raw_layout import write_papers_layout, write_raw_dataset  # noqa: E402


@pytest.fixture
def graph_root(tmp_path):
    write_raw_dataset(tmp_path / "data" / "tiny", num_nodes=300, num_classes=3)
    return tmp_path / "data"


def _train_args(root, out, *extra):
    return ["train", "--dataset", "tiny", "--root", str(root), "--output-dir", str(out), "--no-progress",
            "--num-threads", "1", "--epochs", "2", "--hidden", "16", "--dim", "16", "--rank", "4",
            "--num-layers", "2", "--no-correct-smooth", "--order", "identity", *extra]


@pytest.mark.parametrize("extra,message", [
    (["--num-threads", "-1"], "num_threads must be an integer >= 1, got -1"),
    (["--lr", "-1"], "lr must be a finite number in (0, 1e+06], got -1.0"),
    (["--dropout", "1.5"], "dropout"),
    (["--label-rate", "0"], "label_rate"),
    (["--no-label-input", "--label-reuse", "1"], "it needs label input"),
    (["--dist-timeout", "0"], "--dist-timeout must be a number of minutes in (0, 1e+06], got 0.0"),
    (["--dist-timeout", "nan"], "--dist-timeout must be a number of minutes in (0, 1e+06], got nan"),
    (["--dist-timeout", "inf"], "--dist-timeout must be a number of minutes in (0, 1e+06], got inf"),
    (["--num-cores", "3", "--row-shape", "20,20"], "num_cores=3 but row_shape [20, 20] has 2 factor(s), one per core"),
    (["--row-shape", "300"], "row_shape [300] has 1 factor(s), one per core; a TT table has 2 to 8 cores"),
])
def test_bad_numbers_exit_2_with_one_line(graph_root, tmp_path, capsys, extra, message):
    assert main(_train_args(graph_root, tmp_path / "run", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_diverged_run_exits_2_with_one_line_naming_what_was_kept(graph_root, tmp_path, capsys, monkeypatch):
    # Epoch 1's loss is NaN (the run used to go on and report the NaN epochs' accuracies).
    import ttgnn.train as ttrain

    loss = ttrain.node_loss
    monkeypatch.setattr(ttrain, "node_loss", lambda *a, **k: loss(*a, **k) * float("nan"))
    assert main(_train_args(graph_root, tmp_path / "run", "--init-scale", "0.5")) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"ttgnn train: error: training diverged: the loss is nan in epoch 1; start again with lower "
                   f"learning rates or a smaller init_scale (this run: lr 0.01, emb_lr 0.01, init_scale 0.5); no "
                   f"epoch finished, so {tmp_path / 'run'} holds no checkpoint")


# every option that takes a list of ints, by command
_LIST_OPTIONS = [(["info", "--rows", "300"], option) for option in ("--row-shape", "--col-shape")] + \
    [(["partition", "--dataset", "tiny"], "--row-shape")] + \
    [([command, *where], option) for command, where in (("plan", ["--nodes", "300"]), ("train", ["--dataset", "tiny"]))
     for option in ("--row-shape", "--col-shape", "--fanouts", "--eval-fanouts")]


@pytest.mark.parametrize("command, option", _LIST_OPTIONS)
@pytest.mark.parametrize("value", [",", " , ,", "x", "10,,300", "5,5,"])  # an empty element was dropped
def test_a_list_option_given_no_number_is_refused_not_read_as_automatic(graph_root, tmp_path, capsys, command,
                                                                         option, value):
    where = ["--root", str(graph_root), "--output-dir", str(tmp_path / "run")] if command[0] == "train" else []
    with pytest.raises(SystemExit) as exit_info:  # refused by the parser, before anything runs
        main([*command, *where, option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected comma-separated ints such as 55,55,56, got {value!r}" in err
    assert not (tmp_path / "run").exists()


def test_partition_refuses_a_core_count_the_row_shape_contradicts_before_loading(graph_root, capsys):
    # a dataset that does not exist is not reached: the options are checked first
    for extra, message in ((["--num-cores", "3", "--row-shape", "20,20"],
                            "--num-cores 3 but --row-shape 20,20 has 2 factor(s), one per core; give one of them, "
                            "or make them agree"),
                           (["--num-cores", "0"], "--num-cores must be in [2, 8], got 0"),
                           (["--num-cores", "9"], "--num-cores must be in [2, 8], got 9")):
        assert main(["partition", "--dataset", "no-such-graph", "--root", str(graph_root), *extra]) == 2
        out = capsys.readouterr()
        assert out.out == "" and out.err.strip() == f"ttgnn partition: error: {message}"
    # agreeing, or either one alone: the row shape has that many factors
    for extra, shape in ((["--num-cores", "2", "--row-shape", "20,20"], "[20, 20]"),
                         (["--num-cores", "2"], "[17, 18]"), (["--row-shape", "7,7,7"], "[7, 7, 7]")):
        assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "identity",
                     "--no-cache", *extra]) == 0
        assert capsys.readouterr().out.splitlines()[0].endswith(f"row shape {shape}")


def test_table_options_the_input_does_not_read_are_named_in_a_warning(graph_root, tmp_path, caplog, monkeypatch):
    # _train_args gives --rank 4: a full table has no rank
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        assert main(_train_args(graph_root, tmp_path / "full", "--embedding", "full", "--init", "ortho",
                                "--row-shape", "20,20")) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "ttgnn.cli"] == \
        ["--rank, --row-shape, --init ortho, --order: not read with --embedding full; ignored"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):  # a TT table reads them all
        assert main(_train_args(graph_root, tmp_path / "tt", "--init", "ortho", "--row-shape", "20,20")) == 0
    assert [r for r in caplog.records if r.name == "ttgnn.cli"] == []
    # under torchrun, rank 0 alone says it (the other ranks keep warnings: ttgnn.distributed.configure_logging)
    import ttgnn.cli
    import ttgnn.distributed
    import ttgnn.train

    def as_rank(rank):  # world_size 1 keeps configure_logging from filtering the test's handlers
        @contextlib.contextmanager
        def distributed(**kwargs):
            yield types.SimpleNamespace(rank=rank, world_size=1, is_main=rank == 0, device="cpu")
        return distributed

    for rank, said in ((1, []), (0, ["--rank: not read with --embedding full; ignored"])):
        caplog.clear()
        with monkeypatch.context() as patch, caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
            patch.setattr(ttgnn.distributed, "distributed", as_rank(rank))
            patch.setattr(ttgnn.train, "train", lambda config, **kwargs: {})
            patch.setattr(ttgnn.cli, "format_summary", lambda metrics: "(summary)")
            assert main(["train", "--embedding", "full", "--rank", "4", "--output-dir", str(tmp_path / "stub")]) == 0
        assert [r.getMessage() for r in caplog.records if r.name == "ttgnn.cli"] == said
    parse = build_parser().parse_args
    for args, unread in (
            ([], []), (["--init", "gaussian"], []), (["--init", "spectral", "--spectral-vectors", "4"], []),
            (["--num-cores", "3", "--col-shape", "8,4,4", "--compression", "10"],
             ["--num-cores", "--col-shape", "--compression"]), (["--max-params", "100"], ["--max-params"])):
        assert _unread_table_options(parse(["train", "--embedding", "full", *args])) == unread
        assert _unread_table_options(parse(["train", "--embedding", "tt", *args])) == []
    # no table at all: every init and --spectral-vectors too
    for args, unread in (([], []), (["--init", "gaussian"], ["--init gaussian"]),
                         (["--init", "spectral", "--spectral-vectors", "4", "--rank", "2"],
                          ["--rank", "--init spectral", "--spectral-vectors"])):
        assert _unread_table_options(parse(["train", "--embedding", "features", *args])) == unread


def test_sampling_options_full_graph_training_does_not_read_are_named_in_a_warning(graph_root, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        assert main(_train_args(graph_root, tmp_path / "full", "--fanouts", "5,5", "--batch-size", "64")) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "ttgnn.cli"] == \
        ["--fanouts, --batch-size: not read with --mode full (the whole graph in every step); ignored"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):  # sampling reads them
        assert main(_train_args(graph_root, tmp_path / "sampled", "--mode", "minibatch", "--fanouts", "5,5",
                                "--batch-size", "64")) == 0
    assert [r for r in caplog.records if r.name == "ttgnn.cli"] == []
    parse = build_parser().parse_args
    for args, unread in (([], []), (["--fanouts", "15,10,5", "--batch-size", "1024"], []),  # the defaults
                         (["--eval-batch-size", "100"], ["--eval-batch-size"]),
                         (["--fanouts", "15,10"], ["--fanouts"]),
                         (["--batch-size", "1023", "--eval-batch-size", "8193"],
                          ["--batch-size", "--eval-batch-size"])):
        assert _unread_sampling_options(parse(["train", *args])) == unread
        assert _unread_sampling_options(parse(["train", "--mode", "minibatch", *args])) == []


@pytest.mark.parametrize("value", ["-2", "once", "1.5"])
def test_label_reuse_takes_auto_or_a_count(graph_root, tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_info:  # refused by the parser, before anything runs
        main(_train_args(graph_root, tmp_path / "run", "--label-reuse", value))
    assert exit_info.value.code == 2
    assert f"--label-reuse: expected 'auto' or an integer >= 0, got '{value}'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    parse = build_parser().parse_args
    assert config_from_args(parse(["train", "--label-reuse", "auto"])).label_reuse is None
    assert config_from_args(parse(["train"])).label_reuse is None
    assert config_from_args(parse(["train", "--label-reuse", "0"])).label_reuse == 0
    # spaces around a count or auto, as the other int options take them (' 3' was refused)
    assert config_from_args(parse(["train", "--label-spread", " 3"])).label_spread == 3
    assert config_from_args(parse(["train", "--label-reuse", "2 ", "--label-spread", " auto"])).label_reuse == 2


def test_model_takes_auto_sage_or_gat(graph_root, tmp_path, capsys):
    parse = build_parser().parse_args
    assert config_from_args(parse(["train"])).model == "auto"
    assert [config_from_args(parse(["train", "--model", m])).model for m in ("auto", "sage", "gat")] == \
        ["auto", "sage", "gat"]
    with pytest.raises(SystemExit) as exit_info:
        main(_train_args(graph_root, tmp_path / "run", "--model", "gcn"))
    assert exit_info.value.code == 2 and "invalid choice: 'gcn'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_every_training_setting_has_a_flag_with_its_default():
    """`ttgnn train` with no flag builds TrainConfig() exactly, and every setting is reachable: a
    setting added to TrainConfig without a flag (or with another default) fails here."""
    import dataclasses

    from ttgnn.config import TrainConfig

    args = build_parser().parse_args(["train"])
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    missing = [n for n in names if n not in vars(args)]
    assert missing == []
    built = config_from_args(args).settings()
    expected = TrainConfig().settings()
    differing = {k: (built[k], expected[k]) for k in names if built[k] != expected[k]}
    assert differing == {}
    assert config_from_args(build_parser().parse_args(["train", "--loss", "log-ce"])).loss == "log-ce"


def test_a_spectral_table_larger_than_memory_is_refused_in_one_line(graph_root, tmp_path, capsys, monkeypatch):
    import ttgnn.spectral

    monkeypatch.setattr(ttgnn.spectral, "available_memory", lambda: 1024)
    assert main(_train_args(graph_root, tmp_path / "run", "--init", "spectral", "--spectral-vectors", "4")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("ttgnn train: error: the spectral init builds a dense 300 x 16 table") and "--init gaussian" in err


def test_os_errors_on_paths_exit_2_with_one_line(graph_root, tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(_train_args(graph_root, a_file)) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(_train_args(graph_root, tmp_path / "run", "--cache-dir", str(a_file))) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "random",
                 "--output", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "random", "--output",
                 str(a_file / "sub" / "order.npy"), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ttgnn partition: error: cannot write --output {a_file / 'sub' / 'order.npy'}: {a_file} is a file, not a folder"
    # refused before the graph loads: a dataset that does not exist is not reached
    assert main(["partition", "--dataset", "no-such-graph", "--root", str(graph_root), "--method", "random",
                 "identity", "--output", str(a_file / "order.npy")]) == 2
    assert "cannot write --output" in capsys.readouterr().err


def test_version_names_ttgnn_torch_and_python(capsys):
    import platform

    import torch

    import ttgnn

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == (f"ttgnn {ttgnn.__version__} (torch {torch.__version__}, "
                                               f"Python {platform.python_version()})")


def test_report_errors_turns_user_errors_into_one_line_and_lets_bugs_through(capsys):
    import torch

    from ttgnn.cli import report_errors

    assert report_errors("prog", lambda: None) == 0 and report_errors("prog", lambda: 3) == 3

    def bad_value():
        raise ValueError("lr must be > 0, got -1")

    def missing_file():
        raise FileNotFoundError(2, "No such file or directory", "/x/y")

    assert report_errors("prog", bad_value) == 2 and capsys.readouterr().err == "prog: error: lr must be > 0, got -1\n"
    assert report_errors("prog", missing_file) == 2
    assert capsys.readouterr().err == "prog: error: No such file or directory: /x/y\n"

    def interrupted():
        err = KeyboardInterrupt()
        err.checkpoint, err.epoch = "runs/x/checkpoint.pt", 7
        raise err

    assert report_errors("prog", interrupted) == 130
    assert "last complete checkpoint is runs/x/checkpoint.pt (epoch 7)" in capsys.readouterr().err

    def peer_lost():
        from ttgnn.train import TrainingInterrupted

        raise TrainingInterrupted(Path("runs/x/checkpoint.pt"), 7, "another process of the job stopped: gone")

    assert report_errors("prog", peer_lost) == 130
    assert capsys.readouterr().err == ("prog: stopped, another process of the job stopped: gone; the last complete "
                                       "checkpoint is runs/x/checkpoint.pt (epoch 7); continue with the same command "
                                       "plus --resume\n")

    def ctrl_c():
        raise KeyboardInterrupt

    assert report_errors("prog", ctrl_c) == 130
    assert capsys.readouterr().err == "prog: interrupted before any checkpoint was written\n"
    assert report_errors("prog", ctrl_c, trains=False) == 130 and capsys.readouterr().err == "prog: interrupted\n"

    def terminated():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        pytest.fail("SIGTERM did not stop the body")

    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert report_errors("prog", terminated) == 143
        assert capsys.readouterr().err == "prog: stopped by SIGTERM before any checkpoint was written\n"
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # as it was
    finally:
        signal.signal(signal.SIGTERM, before)

    # an allocation that fails: one line with the size, not a traceback
    def cpu_oom():
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] data. DefaultCPUAllocator: can't allocate memory: you "
                           "tried to allocate 51200000000 bytes. Error code 12 (Cannot allocate memory)")

    def gpu_oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
                                     "79.19 GiB of which 1.2 GiB is free.\nmore lines")

    hint = ("; smaller settings (--hidden, --dim, --batch-size, --eval-batch-size) need less, and `ttgnn plan` "
            "estimates what a run needs (give it the run's --mode, --model, --hidden and --rank: its defaults are "
            "those of large graphs)\n")
    assert report_errors("prog", cpu_oom) == 2
    assert capsys.readouterr().err == "prog: error: out of memory: a tensor of 47.68 GiB could not be allocated" + hint
    assert report_errors("prog", gpu_oom) == 2
    assert capsys.readouterr().err == "prog: error: out of memory: CUDA out of memory. Tried to allocate 20.00 GiB" + hint

    def bug():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):  # not a user's error: its traceback is wanted
        report_errors("prog", bug)


def test_partition_by_default_caches_the_order_train_uses(graph_root, tmp_path, capsys, caplog):
    import logging

    from ttgnn.config import TrainConfig

    cache = tmp_path / "cache"
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--cache-dir", str(cache)]) == 0
    assert TrainConfig.order in capsys.readouterr().out
    with caplog.at_level(logging.INFO, logger="ttgnn.partition"):
        assert main(_train_args(graph_root, tmp_path / "run", "--order", TrainConfig.order, "--cache-dir",
                                str(cache))) == 0
    assert any(r.getMessage().startswith(f"loaded the {TrainConfig.order} order from {cache}") for r in caplog.records)


def test_partition_writes_one_npy_file_per_method(graph_root, tmp_path, capsys):
    import numpy as np

    for output, names in (("order.npy", ["order.identity.npy", "order.random.npy"]),
                          ("order", ["order.identity.npy", "order.random.npy"]),
                          ("run.v2.NPY", ["run.v2.identity.npy", "run.v2.random.npy"])):
        folder = tmp_path / output
        folder.mkdir()
        assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "identity", "random",
                     "--output", str(folder / output), "--no-cache"]) == 0
        assert sorted(p.name for p in folder.iterdir()) == names
        perms = [np.load(folder / name) for name in names]
        assert np.array_equal(np.sort(perms[1]), perms[0])  # identity and a random bijection of the same nodes
    capsys.readouterr()
    # One method: the name as given.
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "identity",
                 "--output", str(tmp_path / "plain"), "--no-cache"]) == 0
    assert np.array_equal(np.load(tmp_path / "plain"), perms[0])


def test_partition_writes_csv_files_and_refuses_other_suffixes(graph_root, tmp_path, capsys):
    import gzip

    import numpy as np

    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "random", "--seed", "3",
                 "--output", str(tmp_path / "order.npy"), "--no-cache"]) == 0
    perm = np.load(tmp_path / "order.npy")
    expected = "node,tt_row\n" + "".join(f"{node},{row}\n" for node, row in enumerate(perm.tolist()))
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "random", "--seed", "3",
                 "--output", str(tmp_path / "order.CSV"), "--no-cache"]) == 0
    assert (tmp_path / "order.CSV").read_text() == expected
    # several methods: the suffix kept after the method's name; gzip for .csv.gz
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--method", "identity", "random",
                 "--seed", "3", "--output", str(tmp_path / "o.csv.gz"), "--no-cache"]) == 0
    assert gzip.decompress((tmp_path / "o.random.csv.gz").read_bytes()).decode() == expected
    identity = gzip.decompress((tmp_path / "o.identity.csv.gz").read_bytes()).decode()
    assert identity == "node,tt_row\n" + "".join(f"{node},{node}\n" for node in range(len(perm)))
    capsys.readouterr()
    # a text suffix would have held .npy bytes: refused before the graph loads, nothing written
    for name in ("order.txt", "order.pt", "order.npz"):
        assert main(["partition", "--dataset", "no-such-graph", "--root", str(graph_root), "--output",
                     str(tmp_path / name)]) == 2
        assert capsys.readouterr().err == (
            f"ttgnn partition: error: --output: node orders go to a .npy, .csv or .csv.gz file (or a name without a "
            f"suffix, written as .npy), got {tmp_path / name}\n")
        assert not (tmp_path / name).exists()


def test_partition_refuses_a_bad_seed_before_loading_the_graph(graph_root, capsys):
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--seed", "-1"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--seed must be in [0, 2**31), got -1" in out.err


def test_partition_bad_row_shape_prints_no_half_table(graph_root, capsys):
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--row-shape", "2,2"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "row_shape [2, 2] covers 4 rows, fewer than the graph's" in out.err


def test_a_second_run_into_a_used_folder_is_refused(graph_root, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_train_args(graph_root, out)) == 0
    before = (out / "checkpoint.pt").read_bytes()
    assert main(_train_args(graph_root, out)) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (out / "checkpoint.pt").read_bytes() == before
    assert main(_train_args(graph_root, out, "--epochs", "3", "--resume")) == 0
    # an --overwrite that fails on its data or settings leaves the old run as it was (it was deleted first)
    kept = {name: (out / name).read_bytes() for name in ("checkpoint.pt", "best_model.pt", "metrics.json")}
    capsys.readouterr()
    for bad in (["--root", str(tmp_path / "nowhere")], ["--row-shape", "2,2"]):
        assert main([*_train_args(graph_root, out, "--overwrite"), *bad]) == 2
        assert "error:" in capsys.readouterr().err
        assert {name: (out / name).read_bytes() for name in kept} == kept
    assert main(_train_args(graph_root, out, "--overwrite")) == 0
    assert json.loads((out / "metrics.json").read_text())["epochs"][-1]["epoch"] == 2  # the new run's


def _wait_for(path: Path, proc, seconds: float = 180) -> None:
    deadline = time.time() + seconds
    while not (path.exists() and path.stat().st_size):
        assert time.time() < deadline and proc.poll() is None, "the run did not get there"
        time.sleep(0.05)


def test_concurrent_runs_into_one_folder(graph_root, tmp_path):
    """The second run fails at once naming the first's pid; the first completes, and resumes later."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "ttgnn", *_train_args(graph_root, out)]
    first = subprocess.Popen(cmd + ["--epochs", "5"], stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / "run.lock", first)
        first.send_signal(signal.SIGSTOP)  # holds the folder while the second run tries it
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2, second.stderr
    assert f"in use by pid {first.pid} on " in second.stderr and "Traceback" not in second.stderr
    # at once: its one line is the refusal, before any log line of loading the data (a time bound here
    # measured the interpreter's start-up on a loaded machine)
    assert len(second.stderr.strip().splitlines()) == 1
    assert first.wait(timeout=300) == 0
    # the run names the lookups' implementation (logged at import before the CLI had set up logging: lost)
    assert "ttgnn._ext: TT lookup: " in first.stderr.read()
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["epoch"] for r in metrics["epochs"]] == [1, 2, 3, 4, 5]
    assert subprocess.run(cmd + ["--epochs", "7", "--resume"], timeout=300).returncode == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["epoch"] for r in metrics["epochs"]] == [1, 2, 3, 4, 5, 6, 7]


# `python -m ttgnn`, with a SIGUSR1 handler that prints every thread's stack (for a child that hangs).
_MAIN_WITH_STACK_DUMPS = ("import faulthandler, runpy, signal; faulthandler.register(signal.SIGUSR1, all_threads=True); "
                          "runpy.run_module('ttgnn', run_name='__main__', alter_sys=True)")


def _default_stop_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.parametrize("signum,code,how", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "stopped by SIGTERM")], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_prints_one_line_naming_the_checkpoint(graph_root, tmp_path, signum, code, how):
    # SIGTERM (a scheduler's stop) ended the run at once without a word, leaving temporaries
    out = tmp_path / "run"
    with open(tmp_path / "stderr.txt", "w+") as err_file:  # a file: a pipe left unread would fill
        # SIGINT as at a terminal: a test run started in the background (`make test &`, nohup)
        # passes SIGINT ignored to its children, and Python then keeps ignoring it.
        proc = subprocess.Popen([sys.executable, "-c", _MAIN_WITH_STACK_DUMPS, *_train_args(graph_root, out),
                                 "--epochs", "100000"], stderr=err_file, text=True, preexec_fn=_default_stop_signals)
        try:
            _wait_for(out / "checkpoint.pt", proc)
            proc.send_signal(signum)
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # where it hangs, into the file
            time.sleep(5)
        finally:
            if proc.poll() is None:  # never leave a 100,000-epoch run behind when the test fails
                proc.kill()
                proc.wait()
        err_file.seek(0)
        err = err_file.read()
    assert proc.returncode == code, f"exit {proc.returncode} after {signum!r}; its stderr ends with:\n{err[-4000:]}"
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"ttgnn train: {how}; the last complete checkpoint is ")
    assert str(out / "checkpoint.pt") in last and "--resume" in last
    assert "Traceback" not in err
    assert not list(out.glob(".*.tmp"))  # every write finished or was cleaned up
    assert main(_train_args(graph_root, out, "--epochs", "1", "--resume", "--overwrite")) == 2  # exclusive flags


def test_python_dash_m_ttgnn_and_help_text():
    proc = subprocess.run([sys.executable, "-m", "ttgnn", "train", "--help"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0
    text = proc.stdout
    assert "(default: None)" not in text and "(default: True)" not in text and "(default: False)" not in text
    for line in text.splitlines():
        assert line.count("default") <= 1, line
    assert "--progress, --no-progress" in text and "--overwrite" in text and "--resume" in text
    assert "(default: hierarchical-kaminpar)" in text
    # every setting with a plain default says it, zeros and off switches included
    for shown in ("--hidden HIDDEN       hidden width of the GNN (default: 128)", "(default: 0.0)",
                  "a linear skip around each GNN layer (default: off)", "order (default: 0)",
                  "training epochs (default: 200)"):
        assert shown in text, shown


def test_script_helpers_take_the_scripts_defaults_and_the_command_line():
    from ttgnn.cli import script_parser, start_script
    from ttgnn.config import TrainConfig

    parser = script_parser("a script", TrainConfig(dataset="ogbn-products", rank=16, epochs=20))
    parser.add_argument("--tiny", action="store_true")
    args, config = start_script(parser, ["--epochs", "3", "--tiny"])
    assert args.tiny and isinstance(config, TrainConfig)
    assert (config.dataset, config.rank, config.epochs, config.model) == ("ogbn-products", 16, 3, "auto")


def test_products_example_runs_on_its_synthetic_stand_in(tmp_path):
    script = Path(__file__).resolve().parents[1] / "examples" / "train_products.py"
    proc = subprocess.run([sys.executable, str(script), "--tiny", "--num-threads", "1", "--output-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "planted-5000 sage+tt" in proc.stdout
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["epochs"]
    logged = [line for line in proc.stderr.splitlines() if " INFO " in line]  # start_script's format
    assert logged and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO \S", line) for line in logged)


def test_papers100m_example_runs_its_pipeline_on_a_synthetic_graph(tmp_path, run_main):
    script = Path(__file__).resolve().parents[1] / "examples" / "train_papers100m.py"
    common = [sys.executable, str(script), "--num-threads", "1", "--no-progress", "--output-dir", str(tmp_path / "run")]
    proc = subprocess.run(common + ["--tiny"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nested-3000 sage+tt" in proc.stdout and "correct and smooth skipped" in proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["eval_fanouts"] == [5, 5, 5] and len(metrics["epochs"]) == 1
    assert metrics["settings"]["fanouts"] == [15, 10, 5] and metrics["settings"]["rank"] == 4
    proc = subprocess.run(common + ["--tiny", "--dataset", "cora", "--output-dir", str(tmp_path / "run2")],
                          capture_output=True, text=True, timeout=600)  # trained the synthetic graph without a word
    assert proc.returncode == 0 and "--dataset cora: not read with --synthetic (the run trains on the synthetic " \
        "graph)" in proc.stderr, proc.stderr[-3000:]
    code, _, err = run_main("examples/train_papers100m.py", *common[2:], "--synthetic", "10")
    assert code == 2 and "--synthetic needs at least 1000 nodes, got 10" in err
    code, _, err = run_main("examples/train_papers100m.py", *common[2:], "--synthetic", "5e2")  # a count, as --nodes
    assert code == 2 and "--synthetic needs at least 1000 nodes, got 500" in err


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_ctrl_c_during_a_checkpoint_write_waits_for_it_unless_sigint_is_ignored(disposition):
    from ttgnn.train import _deferred_interrupt

    before = signal.signal(signal.SIGINT, signal.default_int_handler if disposition == "default" else signal.SIG_IGN)
    finished = []
    try:
        with pytest.raises(KeyboardInterrupt) if disposition == "default" else contextlib.nullcontext():
            with _deferred_interrupt():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler has run by now (main thread, between bytecodes)
                finished.append(True)  # the block is not cut short
        assert finished == [True]
        # The disposition is as before: a background run keeps ignoring Ctrl-C.
        expected = signal.default_int_handler if disposition == "default" else signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is expected
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_embedding_demo_runs_and_refuses_bad_sizes_in_one_line(run_main):
    script = Path(__file__).resolve().parents[1] / "examples" / "tt_embedding_demo.py"
    proc = subprocess.run([sys.executable, str(script), "--rows", "1000", "--dim", "16", "--rank", "4", "--batch", "50"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "forward+backward of 50 rows" in proc.stdout and "output (50, 16)" in proc.stdout
    for args, message in ((["--rows", "0"], "num_embeddings must be >= 1, got 0"),
                          (["--rank", "0"], "each rank must be >= 1, got 0"),
                          (["--batch", "-3"], "--batch must be >= 1, got -3"),
                          # 10^5 rows of 10^8 columns: 36 TiB, more than any machine gives (a traceback before)
                          (["--rows", "10", "--dim", "100000000", "--batch", "100000"],
                           "out of memory: a tensor of 37,252.90 GiB could not be allocated; a smaller --dim or "
                           "--batch needs less")):
        code, out, err = run_main("examples/tt_embedding_demo.py", *args)
        assert code == 2 and err.strip().endswith(f"tt_embedding_demo.py: error: {message}"), err
        assert "Traceback" not in err
    # --rows reads counts as ttgnn info --rows does (1e5 was refused)
    code, out, err = run_main("examples/tt_embedding_demo.py", "--rows", "1e3", "--dim", "16", "--rank", "4",
                              "--batch", "50")
    assert code == 0 and "compression" in out and "vs dense 16,000" in out, err
    code, _, err = run_main("examples/tt_embedding_demo.py", "--rows", "1.25e1")
    assert code == 2 and "expected a whole number such as 169343 or 1e8, got '1.25e1'" in err


# ---------------------------------------------------------------------- every option, and what the commands print
import argparse  # noqa: E402
import datetime  # noqa: E402


def _options():
    """``(command, action)`` of every option of ``ttgnn`` (command ``None``) and of every sub-command."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in [(None, parser), *commands.items()]:
        for action in sub._actions:
            if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                yield name, action


def test_every_option_has_help_and_parses_its_default_back_to_its_type():
    """A flag without help, or whose type was lost (a string reaching TrainConfig or plan), fails here."""
    for command, action in _options():
        assert action.help, (command, action.option_strings)
        if command is None:
            continue
        default = action.default
        if default is None or isinstance(default, bool) or action.nargs == 0:
            continue
        text = ",".join(map(str, default)) if isinstance(default, list) and action.nargs is None else str(default)
        values = [str(v) for v in default] if action.nargs in ("+", "*") else [text]
        required = ["--rows", "1"] if command == "info" and action.dest != "rows" else []
        extra = ["--dataset", "x"] if command == "partition" and action.dest != "dataset" else []
        parsed = build_parser().parse_args([command, *required, *extra, action.option_strings[0], *values])
        value = getattr(parsed, action.dest)
        assert value == default and type(value) is type(default), (command, action.option_strings, value)


def test_help_shows_defaults_in_process():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = sub["plan"].format_help()
    assert "GAT heads (default: 4)" in text and "output classes (default: 172)" in text
    assert "--json" in text and "print JSON instead of tables\n" in text  # a store_true flag: no default shown
    train = sub["train"].format_help()
    assert "(default: off)" in train and "(default: on)" in train and "(default: None)" not in train
    from ttgnn.cli import HelpFormatter

    for command, action in _options():  # a help that names its default itself gets no second one
        shown = HelpFormatter("ttgnn")._expand_help(action)
        assert shown.count("default") <= 1 and "(default: None)" not in shown, (command, shown)
    from ttgnn.cli import script_parser
    from ttgnn.config import TrainConfig

    assert script_parser("Trains X.", TrainConfig()).description == "Trains X."


def test_plan_takes_integer_heads_and_passes_its_shapes_on(capsys):
    import json

    with pytest.raises(SystemExit):  # (the choices: test_the_options_with_choices_...)
        build_parser().parse_args(["plan", "--heads", "two"])
    capsys.readouterr()
    assert main(["plan", "--nodes", "1000", "--dim", "16", "--rank", "4", "--row-shape", "10,10,10",
                 "--col-shape", "4,2,2", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n "1": {\n  "tt": {')  # indented by one space a level
    details = json.loads(out)["1"]["tt"]["details"]
    assert details["row_shape"] == [10, 10, 10] and details["col_shape"] == [4, 2, 2]


@pytest.mark.parametrize("extra,evaluation", [
    ([], "exact"), (["--eval-fanouts", "4,4", "--eval-batch-size", "99"], "sampled (fan-outs [4, 4], batch 99)")])
def test_plan_heads_each_table_with_its_configuration(capsys, extra, evaluation):
    assert main(["plan", "--nodes", "1000", "--dim", "16", "--rank", "4", "--row-shape", "10,10,10",
                 "--col-shape", "4,2,2", "--fanouts", "5,5", "--hidden", "32", "--batch-size", "64",
                 "--world-size", "1", "2", *extra]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " nodes x " in line]
    assert lines == [
        f"1,000 nodes x 16, sage 2 layers x 32, fan-outs [5, 5], batch 64/rank, adam, {world} rank(s); TT [10, 10, 10] "
        f"x [4, 2, 2] ranks [1, 4, 4, 1]: 560 parameters; evaluation {evaluation}" for world in (1, 2)]


@pytest.mark.parametrize("text,size", [("512", 512), ("512B", 512), ("2k", 2048), ("2KB", 2048), ("2KiB", 2048),
                                       ("1.5M", 1.5 * 2**20), ("1.5MB", 1.5 * 2**20), ("1.5MiB", 1.5 * 2**20),
                                       ("3G", 3 * 2**30), ("3GB", 3 * 2**30), ("3gib", 3 * 2**30), ("1T", 2**40),
                                       ("1TB", 2**40), ("1 tib", 2**40)])
def test_device_memory_takes_sizes_with_units(text, size):
    assert build_parser().parse_args(["plan", "--device-memory", text]).device_memory == size


@pytest.mark.parametrize("dtype,tt,dense", [([], "2.2 KiB", "62.5 KiB"), (["--dtype", "float64"], "4.4 KiB", "125.0 KiB")])
def test_info_prints_memory_in_the_tables_number_type(capsys, dtype, tt, dense):
    # 1,000 x 16 at rank 4: 560 parameters (2,240 bytes in float32) against 16,000 values
    assert main(["info", "--rows", "1000", "--dim", "16", "--rank", "4", *dtype]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{'rank':>6} {'row shape':>20} {'col shape':>12} {'ranks':>20} {'params':>12} {'TT memory':>11} "
        f"{'dense memory':>13} {'compression':>12}",
        f"{4:>6} {'[10, 10, 10]':>20} {'[4, 2, 2]':>12} {'[1, 4, 4, 1]':>20} {560:>12,} {tt:>11} {dense:>13} "
        f"{16000 / 560:>11,.1f}x"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["info", "--dim", "16"])  # --rows is required
    assert "the following arguments are required: --rows" in capsys.readouterr().err


def test_partition_heads_its_figures_with_the_shared_digits(graph_root, capsys):
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--row-shape", "7,7,7", "--no-cache",
                 "--method", "random"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"{'method':>20}{'shared 1 digit':>18}{'shared 2 digits':>18}{'seconds':>10}{'total s':>10}"
    assert out[2].split()[0] == "random" and len(out[2].split()) == 5


@pytest.mark.parametrize("shape", ["2708", "2,2,2,2,2,2,2,2,11"])
def test_partition_takes_the_row_shapes_a_tt_table_can_have(shape, capsys):
    # one factor (or nine) made an order no TT table can use, printed with no digit columns
    assert main(["partition", "--dataset", "unused", "--row-shape", shape]) == 2
    assert f"--row-shape [{shape.replace(',', ', ')}] has {shape.count(',') + 1} factor(s), one per core; a TT table " \
           "has 2 to 8 cores" in capsys.readouterr().err


def test_partition_marks_an_order_read_from_the_cache(graph_root, tmp_path, capsys):
    # a cached order's "seconds" are those it took when computed: the row says where it came from
    cmd = ["partition", "--dataset", "tiny", "--root", str(graph_root), "--row-shape", "7,7,7",
           "--cache-dir", str(tmp_path), "--method", "hierarchical-metis"]
    assert main(cmd) == 0
    first = capsys.readouterr().out.splitlines()
    assert "(cached)" not in first[2] and not any(line.startswith("(cached:") for line in first)
    assert main(cmd) == 0
    second = capsys.readouterr().out.splitlines()
    assert second[2].endswith("  (cached)") and second[2].split()[1:4] == first[2].split()[1:4]
    assert second[-1].startswith("(cached: an order read from the cache; its seconds are those it took")


def test_the_run_summary_has_its_optional_lines():
    from ttgnn.cli import format_summary

    metrics = dict(dataset="d", model="sage", embedding="tt", best_valid_acc=0.5, best_epoch=3, test_acc=0.25,
                   compression_ratio=1234.5)
    assert format_summary(metrics) == "d sage+tt: best valid 0.5000 (epoch 3), test 0.2500, compression 1,234.5x"
    metrics.update(epoch_time=1.234, peak_memory_mib=99.6, correct_smooth=dict(valid_acc=0.6, test_acc=0.3))
    assert format_summary(metrics) == (
        "d sage+tt: best valid 0.5000 (epoch 3), test 0.2500, compression 1,234.5x, epoch time 1.23s, peak memory "
        "100 MiB\n  with correct and smooth: valid 0.6000, test 0.3000")


def test_a_bad_loss_is_named_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--loss", "mse"])
    assert "argument --loss: expected 'auto' or one of ce, log-ce, got 'mse'" in capsys.readouterr().err


def test_train_waits_for_other_ranks_as_long_as_asked(graph_root, tmp_path, monkeypatch):
    import ttgnn.distributed as tdist

    asked = []

    def distributed(device, timeout):
        asked.append((device, timeout))
        raise RuntimeError("stop before training")

    monkeypatch.setattr(tdist, "distributed", distributed)
    with pytest.raises(RuntimeError, match="stop before training"):
        main(_train_args(graph_root, tmp_path / "run", "--dist-timeout", "2.5"))
    assert asked == [("cpu", datetime.timedelta(minutes=2.5))]


def test_info_needs_the_row_count(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["info", "--dim", "16"])
    assert "the following arguments are required: --rows" in capsys.readouterr().err


def test_the_options_with_choices_take_those_of_ttgnn_choices_and_refuse_others(capsys):
    from ttgnn import choices
    from ttgnn.plan import OPTIMIZERS

    expected = {("info", "--dtype"): ("float32", "float64"), ("train", "--model"): choices.MODEL_CHOICES,
                ("train", "--embedding"): choices.EMBEDDINGS, ("train", "--order"): choices.ORDERS,
                ("train", "--init"): choices.INITS, ("train", "--norm"): choices.NORMS,
                ("train", "--gnn-backend"): choices.GNN_BACKENDS, ("train", "--mode"): choices.MODES,
                ("train", "--lr-schedule"): choices.LR_SCHEDULES, ("train", "--device"): choices.DEVICES,
                ("partition", "--method"): choices.ORDERS, ("plan", "--model"): choices.MODELS,
                ("plan", "--optimizer"): tuple(OPTIMIZERS), ("plan", "--mode"): choices.MODES}
    found = {(command, action.option_strings[0]): tuple(action.choices) for command, action in _options()
             if action.choices is not None}
    assert found == expected
    for command, option in expected:
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, option, "not-a-choice"])
        assert "invalid choice: 'not-a-choice'" in capsys.readouterr().err, (command, option)


def test_the_parser_names_itself_ttgnn_and_says_what_it_is():
    import ttgnn.cli

    parser = build_parser()
    assert parser.prog == "ttgnn" and parser.format_help().startswith("usage: ttgnn ")
    assert parser.description == ttgnn.cli.__doc__.splitlines()[0] and parser.description in parser.format_help()


def test_a_script_parser_keeps_every_default_the_script_gives():
    from ttgnn.cli import script_parser
    from ttgnn.config import TrainConfig

    # every setting whose own default is None, given a value
    defaults = TrainConfig(root="r", cache_dir="c", rank=3, num_cores=3, compression=10.0, max_params=1000,
                           row_shape=[2, 2, 2], col_shape=[2, 2, 2], spectral_vectors=4, eval_fanouts=[3, 3],
                           loss="ce", label_input=True, label_reuse=1, label_spread=2, from_full=True,
                           num_threads=1, output_dir="o", resume=True, overwrite=True)
    assert config_from_args(script_parser("s", defaults).parse_args([])) == defaults


@pytest.mark.parametrize("argv,handler,message", [
    (["train", "--dataset", "tiny"], "_cmd_train", "ttgnn train: interrupted before any checkpoint was written"),
    (["info", "--rows", "10"], "_cmd_info", "ttgnn info: interrupted"),  # no checkpoint to speak of
])
def test_a_command_interrupted_says_so_in_one_line(monkeypatch, capsys, argv, handler, message):
    import ttgnn.cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(ttgnn.cli, handler, interrupted)
    assert main(argv) == 130
    assert capsys.readouterr().err == message + "\n"


def test_memory_sizes_step_up_a_unit_at_1024():
    from ttgnn.cli import _format_bytes

    assert [_format_bytes(n) for n in (1023, 1024, 2**20 - 1, 2**20, 2**50)] == [
        "1023 B", "1.0 KiB", "1024.0 KiB", "1.0 MiB", "1024.0 TiB"]


def test_partition_takes_seeds_below_2_to_the_31(graph_root, capsys):
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--seed", str(2**31)]) == 2
    assert "--seed must be in [0, 2**31), got 2147483648" in capsys.readouterr().err
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--seed", str(2**31 - 1),
                 "--no-cache", "--method", "random"]) == 0


def test_commands_log_with_the_time_level_and_logger(graph_root):
    proc = subprocess.run([sys.executable, "-m", "ttgnn", "partition", "--dataset", "tiny", "--root", str(graph_root),
                           "--no-cache", "--method", "hierarchical-metis"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if " INFO " in line]
    assert lines and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ttgnn[\w.]*: \S", line) for line in lines)


@pytest.mark.parametrize("command", [["plan", "--dim", "16", "--rank", "4", "--json"],
                                     ["partition", "--method", "identity", "--no-cache"]])
def test_a_command_reads_a_dataset_through_the_cache_it_is_given(tmp_path, capsys, command):
    from raw_layout import write_products_layout

    write_products_layout(tmp_path / "root", num_nodes=40)
    assert main([*command, "--dataset", "ogbn-products", "--root", str(tmp_path / "root"), "--cache-dir",
                 str(tmp_path / "cache")]) == 0
    if command[0] == "plan":
        assert "ogbn-products: 40 nodes, mean degree " in capsys.readouterr().err  # (after ogb's own bar)
    assert (tmp_path / "cache" / "ogb" / "local" / "ogbn_products" / "processed" / "data_processed").is_file()


def test_only_names_and_paths_are_taken_as_strings():
    """An option that lost its ``type=`` hands a string on (e.g. ``--max-params "1000"``, whose default is None,
    so the round trip of defaults above cannot see it)."""
    strings = {(command, action.option_strings[0]) for command, action in _options()
               if action.type is None and action.choices is None and action.nargs != 0
               and isinstance(action, argparse._StoreAction)}
    paths = {"--root", "--cache-dir"}
    assert strings == {("train", "--dataset"), ("train", "--output-dir"), ("partition", "--dataset"),
                       ("partition", "--output"), ("plan", "--dataset"), ("predict", "--output"),
                       ("predict", "--embeddings")} | {(c, o) for c in ("train", "partition", "plan", "predict")
                                                      for o in paths}
    args = build_parser().parse_args(["train", "--max-params", "1000", "--label-spread", "2", "--row-shape", "10x10x10"])
    assert (args.max_params, args.label_spread, args.row_shape) == (1000, 2, [10, 10, 10])


def test_ttgnn_without_a_command_says_one_is_needed(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "the following arguments are required: command" in capsys.readouterr().err
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    described = {choice.dest: choice.help for choice in sub._choices_actions}  # the commands in `ttgnn --help`
    assert sorted(described) == sorted(sub.choices) and all(described.values())


def test_plan_counts_each_world_size_and_needs_a_graph(capsys):
    import json

    assert main(["plan", "--nodes", "1000", "--dim", "16", "--rank", "4", "--world-size", "1", "2", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)
    assert plans["1"]["tt"]["allreduce_bytes"] == 0 < plans["2"]["tt"]["allreduce_bytes"]
    assert main(["plan"]) == 2
    assert capsys.readouterr().err == "ttgnn plan: error: give --nodes N (with --avg-degree and --classes) or --dataset NAME\n"
    # a bad world size after a good one: refused before anything is printed (the first table came out before)
    assert main(["plan", "--nodes", "1000", "--world-size", "2", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "ttgnn plan: error: world_size must be an integer >= 1, got 0\n"
    assert main(["plan", "--nodes", "1000", "--world-size", "2", "2"]) == 0  # each once, as --json has it
    assert capsys.readouterr().out.count("2 rank(s)") == 1


def test_partition_passes_its_seed_and_node_count(tmp_path, capsys):
    import numpy as np

    from ttgnn.data import load_dataset
    from ttgnn.partition import hierarchical_order

    edges = [[i, (i + 1) % 40] for i in range(40)]  # a ring of 40; nodes 40-59 have no edge
    write_raw_dataset(tmp_path / "data" / "g", num_nodes=60, num_classes=3, edges=edges)
    out = tmp_path / "order.npy"
    assert main(["partition", "--dataset", "g", "--root", str(tmp_path / "data"), "--row-shape", "4,4,4",
                 "--no-cache", "--method", "random", "--seed", "5", "--output", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    loaded = re.fullmatch(r"g: 60 nodes, 40 stored edges \(loaded in (\d+\.\d) s\); row shape \[4, 4, 4\]", first)
    assert loaded and float(loaded.group(1)) < 600  # a duration, not a clock reading
    dataset = load_dataset("g", tmp_path / "data")
    expected = hierarchical_order(dataset.edge_index, [4, 4, 4], method="random", seed=5, num_nodes=60).perm
    assert np.array_equal(np.load(out), expected) and len(expected) == 60


def test_the_help_quotes_the_label_input_threshold_it_uses():
    from ttgnn.cli import HelpFormatter
    from ttgnn.config import LABEL_INPUT_MIN_TRAIN_FRACTION

    shown = [HelpFormatter("ttgnn")._expand_help(action) for command, action in _options() if command == "train"]
    shares = re.findall(r"(\d+)% of (?:a|the) graph", " ".join(shown))
    assert len(shares) >= 3 and set(shares) == {f"{100 * LABEL_INPUT_MIN_TRAIN_FRACTION:.0f}"}


def test_a_run_without_an_output_folder_says_it_keeps_nothing(graph_root, tmp_path, caplog, monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    args = [a for a in _train_args(graph_root, "unused", "--epochs", "1") if a not in ("--output-dir", "unused")]
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        assert main(args) == 0
    assert ("no --output-dir: this run keeps no checkpoint, best model or metrics.json (give --output-dir DIR to "
            "resume it and to use it with `ttgnn predict`)") in caplog.messages
    assert list((tmp_path / "here").iterdir()) == []  # as it said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        assert main(_train_args(graph_root, tmp_path / "run", "--epochs", "1")) == 0
    assert not any("--output-dir" in message for message in caplog.messages)


def test_output_into_a_closed_pipe_ends_quietly():
    # `ttgnn plan ... | head -1`: "ttgnn plan: error: Broken pipe" and exit 2 before
    sizes = [str(size) for size in range(1, 200)]  # far more than a pipe holds (64 KiB on Linux)
    proc = subprocess.Popen([sys.executable, "-m", "ttgnn", "plan", "--nodes", "1000", "--world-size", *sizes],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_a_run_that_fails_before_writing_leaves_no_new_folder(graph_root, tmp_path, capsys):
    out = tmp_path / "new" / "run"
    assert main(_train_args(graph_root, out, "--dataset", "Tiny")) == 2  # a name not found
    assert "did you mean 'tiny'?" in capsys.readouterr().err
    assert not out.exists()  # it held run.lock alone
    out.mkdir(parents=True)  # a folder the user made stays, emptied of nothing
    (out / "notes.txt").write_text("mine")
    assert main(_train_args(graph_root, out, "--dataset", "Tiny")) == 2
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "run.lock"]
    assert main(_train_args(graph_root, tmp_path / "ok")) == 0 and (tmp_path / "ok" / "metrics.json").exists()


def test_train_without_a_cache_dir_reads_and_writes_orders_in_the_default_cache(graph_root, tmp_path, monkeypatch,
                                                                                capsys, caplog):
    # `ttgnn train` passed no cache folder to the node order, so it computed it anew on every run and
    # never read what `ttgnn partition` had cached (the README: orders go to ~/.cache/ttgnn).
    from ttgnn.config import TrainConfig

    monkeypatch.setenv("TTGNN_CACHE", str(tmp_path / "default-cache"))
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root)]) == 0
    cached = sorted(p.name for p in (tmp_path / "default-cache").glob("order-*"))
    assert len(cached) == 1
    with caplog.at_level(logging.INFO, logger="ttgnn.partition"):
        assert main(_train_args(graph_root, tmp_path / "run", "--order", TrainConfig.order)) == 0
    assert any(r.getMessage().startswith(f"loaded the {TrainConfig.order} order from {tmp_path / 'default-cache'}")
               for r in caplog.records)
    assert sorted(p.name for p in (tmp_path / "default-cache").glob("order-*")) == cached


def test_partition_refuses_an_empty_cache_dir_and_writes_nothing_here(graph_root, tmp_path, monkeypatch, capsys):
    # "" was the working folder: an unset $CACHE in a script put node orders there.
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--cache-dir", ""]) == 2
    assert "the cache directory is empty" in capsys.readouterr().err
    assert list(here.iterdir()) == []


def test_partition_orders_a_graph_in_papers100ms_binary_layout(tmp_path, capsys):
    # It loaded the graph, then failed: the binary layout keeps only the CSR, and partition asked for edges.
    import numpy as np

    write_papers_layout(tmp_path / "data" / "ogbn_papers100M", num_nodes=64)
    out = tmp_path / "order.npy"
    assert main(["partition", "--dataset", "ogbn-papers100M", "--root", str(tmp_path / "data"), "--row-shape",
                 "4,4,4", "--method", "hierarchical-metis", "--no-cache", "--output", str(out)]) == 0
    assert sorted(np.load(out).tolist()) == list(range(64))


def _typed(argv):
    from ttgnn.cli import explicit_options

    parser = build_parser()
    args = parser.parse_args(argv)
    args.given = explicit_options(parser, argv)
    return args


def test_options_the_runs_other_settings_leave_unread_are_named_when_typed():
    from ttgnn.cli import _unread_model_options

    assert _unread_model_options(_typed(["train", "--model", "sage", "--heads", "8", "--attn-dropout", "0.1"])) == [
        (["--heads", "--attn-dropout"], "with --model sage")]
    assert _unread_model_options(_typed(["train", "--model", "gat", "--heads", "8"])) == []
    assert _unread_model_options(_typed(["train", "--no-label-input", "--label-rate", "0.9"])) == [
        (["--label-rate"], "with --no-label-input")]
    assert _unread_model_options(_typed(["train", "--no-from-full", "--finetune-lr", "0.1", "--finetune-epochs", "3"])) \
        == [(["--finetune-lr", "--finetune-epochs"], "with --no-from-full")]
    assert _unread_model_options(_typed(["train", "--from-full", "--mode", "minibatch", "--finetune-distill", "3"])) \
        == [(["--finetune-distill"], "with --mode minibatch (distillation is a full-graph step's)")]
    assert _unread_model_options(_typed(["train", "--from-full", "--finetune-distill", "3"])) == []
    # defaults typed by nobody are not named; without the typed set nothing is (library callers)
    assert _unread_model_options(_typed(["train", "--model", "sage"])) == []
    assert _unread_model_options(build_parser().parse_args(["train", "--model", "sage", "--heads", "8"])) == []
    # a features input reads no table option, those with defaults included, where typed
    assert _unread_table_options(_typed(["train", "--embedding", "features", "--dim", "64", "--init-scale", "5",
                                         "--emb-lr", "0.5", "--order", "random"])) == \
        ["--dim", "--init-scale", "--emb-lr", "--order"]
    assert _unread_table_options(_typed(["train", "--embedding", "full", "--order", "random", "--dim", "64"])) == \
        ["--order"]


def test_ttgnn_train_warns_of_a_typed_option_its_model_does_not_read(graph_root, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="ttgnn.cli"):
        assert main(_train_args(graph_root, tmp_path / "run", "--model", "sage", "--heads", "8")) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "ttgnn.cli"] == [
        "--heads: not read with --model sage; ignored"]


def test_plan_refuses_a_gat_width_train_refuses_and_names_no_batch_for_full_graph_steps(capsys):
    assert main(["plan", "--nodes", "1e6", "--model", "gat", "--hidden", "5", "--heads", "4"]) == 2
    assert "hidden (5) must be a positive multiple of heads (4) for GAT" in capsys.readouterr().err
    assert main(["plan", "--nodes", "1e6", "--mode", "full", "--batch-size", "7"]) == 0
    header = capsys.readouterr().out.strip().splitlines()[0]
    assert "full graph" in header and "batch" not in header and "fan-outs" not in header


@pytest.mark.parametrize("argv, expected", [
    (["--compression", "100"], dict(rank=None, compression=100.0)),  # the script's rank 16 gives way
    (["--compression", "100", "--rank", "4"], None),                   # typed both: refused as ttgnn train does
    (["--num-layers", "2"], None),                                    # fan-outs 15,10,5: refused, not overwritten
    (["--num-layers", "2", "--fanouts", "5,5"], dict(num_layers=2, fanouts=[5, 5])),
    (["--fanouts", "5,5"], dict(num_layers=2)),                       # one layer per fan-out, as before
])
def test_a_training_script_keeps_what_is_typed_and_its_own_defaults_give_way(argv, expected):
    # The mini-batch examples overwrote --num-layers with the fan-outs' count, and refused --compression
    # because of a rank the user never typed.
    from ttgnn.cli import script_parser, start_script
    from ttgnn.config import TrainConfig

    parser = script_parser("test", TrainConfig(dataset="ogbn-products", rank=16, mode="minibatch",
                                               fanouts=[15, 10, 5]))
    args, config = start_script(parser, argv)
    if expected is None:
        with pytest.raises(ValueError):
            config.validate()
    else:
        config.validate()
        assert {key: getattr(config, key) for key in expected} == expected


@pytest.mark.parametrize("argv, dropped", [
    (["--num-cores", "4"], ("row_shape", "col_shape")),   # both shapes fix the number of cores
    (["--row-shape", "10,10,10,10"], ("col_shape",)),     # a typed shape of another length
    (["--col-shape", "16,8"], ("row_shape",)),
    (["--dim", "64"], ("col_shape",)),
])
def test_a_scripts_shapes_give_way_to_typed_options_that_fix_them(argv, dropped):
    from ttgnn.cli import script_parser, start_script
    from ttgnn.config import TrainConfig

    shapes = dict(row_shape=[55, 55, 56], col_shape=[8, 4, 4])
    args, config = start_script(script_parser("test", TrainConfig(rank=8, **shapes)), argv)
    config.validate()
    assert all(getattr(config, key) is None for key in dropped)
    assert all(getattr(config, key) == value for key, value in shapes.items() if key not in dropped
               and "--" + key.replace("_", "-") not in argv)


def test_gat_options_are_named_unread_where_auto_trains_graphsage():
    from ttgnn.cli import _unread_model_options

    assert _unread_model_options(_typed(["train", "--mode", "minibatch", "--heads", "8"])) == [
        (["--heads"], "by GraphSAGE, which --model auto trains when sampling")]


def test_partition_refuses_an_empty_output_and_upgrade_names_a_device_for_what_it_is(graph_root, capsys):
    # --output "" wrote nothing without a word; upgrade-checkpoint /dev/null said "checkpoint not found"
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--no-cache", "--output", ""]) == 2
    assert "--output is empty: give a file name" in capsys.readouterr().err
    if os.path.exists("/dev/null"):
        assert main(["upgrade-checkpoint", "/dev/null"]) == 2
        assert "/dev/null is not a regular file" in capsys.readouterr().err


def test_a_scripts_help_shows_the_rank_and_shapes_it_trains_with(capsys):
    # the help of a script fixing rank 16 (or arxiv's shapes) still said "default: 8, or 4 ..." and "automatic"
    from ttgnn.cli import script_parser
    from ttgnn.config import TrainConfig

    fixed = script_parser("a script", TrainConfig(rank=16, row_shape=[55, 55, 56], col_shape=[8, 4, 4]))
    text = " ".join(fixed.format_help().split())
    assert "TT rank (default: 16)" in text
    assert "TT row shape, e.g. 55,55,56 (default: 55,55,56)" in text and "(default: 8,4,4)" in text
    auto = " ".join(script_parser("another", TrainConfig()).format_help().split())
    assert "TT rank (default: 8, or 4 where" in auto and "TT column shape, e.g. 8,4,4 (default: automatic)" in auto


def test_partition_lines_up_every_method_under_its_header(graph_root, capsys):
    # hierarchical-kaminpar is 21 characters: its figures sat one column right of their headers
    assert main(["partition", "--dataset", "tiny", "--root", str(graph_root), "--row-shape", "7,7,7", "--no-cache",
                 "--method", "hierarchical-kaminpar", "random"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:4]
    ends = [match.end() for match in re.finditer(r"\S+(?: \S+)*", header)]  # right-aligned columns
    for row in rows:
        assert [match.end() for match in re.finditer(r"\S+", row)] == ends, (header, row)


def test_plan_refuses_a_mean_degree_no_simple_graph_of_that_size_has(capsys):
    assert main(["plan", "--nodes", "1000", "--avg-degree", "5000"]) == 2
    assert capsys.readouterr().err.strip() == ("ttgnn plan: error: avg_degree must be at most 999 (num_nodes - 1: "
                                               "each node has at most every other as a neighbour), got 5000")
    assert main(["plan", "--nodes", "8", "--json"]) == 0  # the default degree (10), not typed: capped at 7


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["plan", "--help"], ["predict", "--help"],
                                  ["train", "--dataset", "cora", "--epochs", "-1"]])
def test_help_and_argument_errors_do_not_wait_for_the_kernels(argv):
    # `ttgnn --help` on a fresh machine compiled the TT-lookup kernels first (1 min 19 s of silence):
    # `import ttgnn` imported ttgnn.ops, which loads them
    import subprocess
    import sys

    probe = ("import sys\nfrom ttgnn.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print('ttgnn.ops' in sys.modules, 'ttgnn._ext' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[-1] == "False False", done.stderr[-2000:]
