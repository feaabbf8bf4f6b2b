"""Tests of ttgnn.config: every setting validated, with the bad value named."""
import pytest

from ttgnn.choices import ORDERS
from ttgnn.config import TrainConfig
from ttgnn.partition import METHODS


@pytest.mark.parametrize("changes,message", [
    (dict(num_threads=-1), "num_threads must be an integer >= 1, got -1"),
    (dict(num_threads=0), "num_threads"),
    (dict(lr=-1.0), r"lr must be a finite number in \(0, 1e\+06\], got -1.0"),
    (dict(lr=2e6), r"lr must be a finite number in \(0, 1e\+06\], got 2000000.0"),
    (dict(emb_lr=1e38), r"emb_lr must be a finite number in \(0, 1e\+06\], got 1e\+38"),
    (dict(finetune_lr=1.5e6), r"finetune_lr must be a finite number in \(0, 1e\+06\]"),
    (dict(init_scale=float("inf")), "init_scale must be a finite number > 0, got inf"),
    (dict(emb_lr=0.0), "emb_lr"),
    (dict(lr=float("nan")), "lr"),
    (dict(init_scale=0.0), "init_scale"),
    (dict(weight_decay=-0.1), "weight_decay must be a finite number >= 0"),
    (dict(dropout=1.0), r"dropout must be a finite number in \[0, 1\)"),
    (dict(label_smoothing=-0.1), "label_smoothing"),
    (dict(edge_dropout=1.0), r"edge_dropout must be a finite number in \[0, 1\)"),
    (dict(edge_dropout=0.3, mode="minibatch"), "edge_dropout=0.3 is for full-graph training"),
    (dict(label_rate=0.0), "label_rate"),
    (dict(epochs=0), "epochs"),
    (dict(batch_size=0), "batch_size"),
    (dict(seed=-1), "seed must be an integer >= 0"),
    (dict(seed=2**31), r"seed must be below 2\*\*31 \(it seeds the node order's partitioner too\), got 2147483648"),
    (dict(num_cores=0), "num_cores"),
    # a TT table has 2 to 8 cores: refused here, before the data loads (it was refused after)
    (dict(num_cores=1), r"^num_cores must be in \[2, 8\], got 1$"),
    (dict(num_cores=9), r"^num_cores must be in \[2, 8\], got 9$"),
    (dict(fanouts=[5, 0, 5], mode="minibatch"), "every entry of fanouts must be an integer >= 1, got 0"),
    (dict(row_shape=[55, -55, 56]), "every entry of row_shape"),
    (dict(num_cores=3, row_shape=[40, 25]), r"^num_cores=3 but row_shape \[40, 25\] has 2 factor\(s\), one per core"),
    (dict(num_cores=2, col_shape=[8, 4, 4]), r"^num_cores=2 but col_shape \[8, 4, 4\] has 3 factor\(s\)"),
    (dict(row_shape=[1000]), r"^row_shape \[1000\] has 1 factor\(s\), one per core; a TT table has 2 to 8 cores$"),
    (dict(mode="minibatch", num_layers=3, fanouts=[5, 5]),
     r"need one fan-out per layer: 3 layers, fanouts \[5, 5\]; give num_layers=2 \(--num-layers 2\) or 3 fan-outs$"),
    (dict(order="spectral"), "order must be one of"),
    (dict(model="gcn"), "model must be one of"),
    (dict(init="xavier"), "init must be one of"),
    (dict(init="spectral", spectral_vectors=0), "spectral_vectors must be an integer >= 1, got 0"),
    (dict(init="spectral", dim=16, spectral_vectors=17), "spectral_vectors must be at most dim=16, got 17"),
    (dict(init="gaussian", spectral_vectors=8), "spectral_vectors needs init='spectral' \\(or 'auto'\\), got init='gaussian'"),
    (dict(label_reuse=-1), "label_reuse must be an integer >= 0, got -1"),
    (dict(label_reuse=1.0), "label_reuse must be an integer"),
    (dict(label_reuse=1, label_input=False), "label_reuse=1 feeds predictions back as label input: it needs label input"),
    (dict(label_spread=-1), "label_spread must be an integer >= 0, got -1"),
    (dict(label_spread=True), "label_spread must be an integer"),
    (dict(label_spread=10, label_input=False), "label_spread=10 spreads the label input over the graph: it needs"),
    # before: an empty name read the root itself as a dataset folder; truthy strings passed as True
    (dict(dataset=""), "dataset must be a dataset name or a folder path, got ''"),
    (dict(dataset=None), "dataset must be a dataset name or a folder path, got None"),
    (dict(output_dir=5), r"output_dir \(--output-dir\) must be a folder path or None, got 5"),
    (dict(mode="minibatch", fanouts=None), "fanouts must be a list of integers >= 1, one per layer, got None"),
    (dict(root=" "), r"root \(--root\) must be a folder path or None, got ' '"),
    (dict(progress="no"), "progress must be True or False, got 'no'"),
    (dict(correct_smooth=1), "correct_smooth must be True or False, got 1"),
    (dict(label_input="yes"), r"label_input must be True, False or None \(decided by the graph\), got 'yes'"),
])
def test_bad_settings_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes).validate()


def test_paths_given_as_path_objects_are_the_strings_a_run_records(tmp_path):
    # a pathlib.Path for output_dir (or root, cache_dir) passed validation, trained an epoch, then failed
    # writing metrics.json ("Object of type PosixPath is not JSON serializable"); dataset was refused
    import json
    import os

    config = TrainConfig(dataset=tmp_path / "cora", root=tmp_path, cache_dir=tmp_path, output_dir=tmp_path / "run")
    config.validate()
    assert (config.dataset, config.output_dir) == (os.fspath(tmp_path / "cora"), os.fspath(tmp_path / "run"))
    json.dumps(config.settings())


def test_a_relative_root_is_recorded_as_an_absolute_path(tmp_path, monkeypatch):
    # `ttgnn train --root ds2` recorded "ds2": `ttgnn predict RUN` from another directory then failed, saying
    # the root was "given as --root"
    monkeypatch.chdir(tmp_path)
    config = TrainConfig(dataset="cora", root="ds2")
    assert config.root == str(tmp_path / "ds2") and config.settings()["root"] == str(tmp_path / "ds2")
    assert TrainConfig(dataset="cora").root is None  # left to $TTGNN_DATA


def test_a_core_count_with_a_shape_is_checked_for_tt_tables_only():
    TrainConfig(num_cores=3, row_shape=[10, 10, 10], col_shape=[8, 4, 4]).validate()
    # a full table reads neither (ttgnn train warns that they are ignored)
    TrainConfig(embedding="full", num_cores=3, row_shape=[40, 25]).validate()


def test_learning_rates_up_to_the_largest_are_valid():
    from ttgnn.config import MAX_LR

    assert MAX_LR == 1e6
    TrainConfig(lr=MAX_LR, emb_lr=MAX_LR, finetune_lr=MAX_LR, init_scale=1e30).validate()


def test_defaults_are_valid_and_orders_are_the_partitioners():
    TrainConfig().validate()
    assert ORDERS == METHODS
    assert TrainConfig().settings()["fanouts"] == [15, 10, 5]


def test_label_input_by_the_share_of_training_nodes():
    from ttgnn.config import LABEL_INPUT_MIN_TRAIN_FRACTION, label_input_for

    assert TrainConfig().label_input is None  # decided per graph
    assert LABEL_INPUT_MIN_TRAIN_FRACTION == 0.1
    assert label_input_for(None, 1000, 100) is True  # 10%: on
    assert label_input_for(None, 1000, 99) is False
    assert label_input_for(None, 169_343, 90_941) is True  # ogbn-arxiv
    assert label_input_for(None, 2708, 140) is False  # Cora
    assert label_input_for(True, 2708, 140) is True and label_input_for(False, 1000, 900) is False
    assert label_input_for(None, 0, 0) is False
    assert label_input_for(None, 2708, 140, label_reuse=1) is True  # reuse feeds label input
    assert label_input_for(False, 2708, 140, label_reuse=1) is False and label_input_for(None, 2708, 140, 0) is False


def test_few_labels_turn_label_input_on_only_for_the_reuse_of_gat_in_full_graph_training():
    from ttgnn.config import AUTO_LABEL_REUSE_FEW_LABELS, few_labels, label_input_for

    assert few_labels(2708, 140) and few_labels(1000, 99) and not few_labels(1000, 100) and few_labels(0, 0)
    assert AUTO_LABEL_REUSE_FEW_LABELS == {"gat": 3}
    # Cora (5% training nodes): GAT in full-graph training with its reuse left to the rule
    assert label_input_for(None, 2708, 140, None, "gat", "full") is True
    assert label_input_for(None, 2708, 140, None, "gat", "minibatch") is False  # no reuse there by default
    assert label_input_for(None, 2708, 140, None, "sage", "full") is False  # no reuse for GraphSAGE
    assert label_input_for(None, 2708, 140, 0, "gat", "full") is False  # reuse turned off: the share decides
    assert label_input_for(False, 2708, 140, None, "gat", "full") is False  # an explicit choice is kept
    assert label_input_for(None, 1000, 900, 0, "sage", "minibatch") is True  # many labels: on for any model


def test_auto_label_reuse_by_model_label_input_and_mode():
    from ttgnn.config import AUTO_LABEL_REUSE, label_reuse_for

    assert TrainConfig().label_reuse is None and AUTO_LABEL_REUSE == {"gat": 1}
    assert label_reuse_for(None, "gat", True, "full") == 1  # label input on, full-graph training
    assert label_reuse_for(None, "sage", True, "full") == 0  # level on validation for GraphSAGE
    assert label_reuse_for(None, "gat", False, "full") == 0  # nothing to feed back into
    assert label_reuse_for(None, "gat", True, "minibatch") == 0  # a whole-graph inference per epoch: not by default
    # an explicit count is kept as it is (validate and settle_by_graph check it)
    assert label_reuse_for(0, "gat", True, "full") == 0 and label_reuse_for(2, "sage", True, "minibatch") == 2
    assert label_reuse_for(1, "gat", False, "full") == 1
    # few training nodes: more rounds for GAT, still none for GraphSAGE, none without label input
    assert label_reuse_for(None, "gat", True, "full", sparse_labels=True) == 3
    assert label_reuse_for(None, "sage", True, "full", sparse_labels=True) == 0
    assert label_reuse_for(None, "gat", False, "full", sparse_labels=True) == 0
    assert label_reuse_for(2, "gat", True, "full", sparse_labels=True) == 2
    TrainConfig(label_reuse=None).validate()
    with pytest.raises(ValueError, match="label_reuse must be an integer >= 0, got 'auto'"):
        TrainConfig(label_reuse="auto").validate()


def test_auto_label_spread_with_label_input_in_full_graph_training():
    from ttgnn.config import AUTO_LABEL_SPREAD, LABEL_SPREAD_ALPHA, label_input_for, label_spread_for

    assert TrainConfig().label_spread is None and AUTO_LABEL_SPREAD == 10 and LABEL_SPREAD_ALPHA == 0.9
    assert label_spread_for(None, True, "full") == 10  # Cora and ogbn-arxiv alike: on
    assert label_spread_for(None, False, "full") == 0  # nothing to spread
    assert label_spread_for(None, True, "minibatch") == 0  # an (N, C) tensor: not by default
    assert label_spread_for(0, True, "full") == 0 and label_spread_for(3, True, "minibatch") == 3
    # an explicit spread turns label input on where it would be off, unless it is turned off
    assert label_input_for(None, 2708, 140, 0, "sage", "full", label_spread=5) is True
    assert label_input_for(False, 2708, 140, 0, "sage", "full", label_spread=5) is False
    assert label_input_for(None, 2708, 140, 0, "sage", "full", label_spread=0) is False
    assert "label_spread" in TrainConfig.RESUME_KEYS


def test_auto_loss_is_log_ce_for_gat_in_full_graph_training_with_many_labels():
    from ttgnn.config import AUTO_LOSS, loss_for

    assert TrainConfig().loss is None and AUTO_LOSS == {"gat": "log-ce"}
    assert loss_for(None, "gat", "full", sparse_labels=False) == "log-ce"  # ogbn-arxiv
    assert loss_for(None, "gat", "full", sparse_labels=True) == "ce"  # Cora, CiteSeer, PubMed
    assert loss_for(None, "gat", "minibatch", sparse_labels=False) == "ce"  # not measured there
    assert loss_for(None, "sage", "full", sparse_labels=False) == "ce"
    for loss in ("ce", "log-ce"):  # an explicit loss is kept everywhere
        assert loss_for(loss, "gat", "full", False) == loss_for(loss, "sage", "minibatch", True) == loss
    TrainConfig(loss=None).validate()
    with pytest.raises(ValueError, match=r"loss must be one of \('ce', 'log-ce'\), got 'mse'"):
        TrainConfig(loss="mse").validate()
    # a run started before the default changed (its checkpoint says ce, or nothing) is not
    # continued with the other loss
    assert "loss" in TrainConfig.RESUME_KEYS and TrainConfig.RESUME_ABSENT["loss"] == "ce"


def test_auto_model_by_mode():
    from ttgnn.config import AUTO_MODEL, model_for

    assert TrainConfig().model == "auto" and AUTO_MODEL == {"full": "gat", "minibatch": "sage"}
    assert model_for("auto", "full") == "gat" and model_for("auto", "minibatch") == "sage"
    for model in ("sage", "gat"):  # an explicit model is kept in either mode
        assert model_for(model, "full") == model_for(model, "minibatch") == model
    TrainConfig(model="auto").validate()
    with pytest.raises(ValueError, match=r"model must be one of \('sage', 'gat', 'auto'\), got 'gcn'"):
        TrainConfig(model="gcn").validate()


def test_auto_init_by_the_share_of_training_nodes():
    from ttgnn.config import AUTO_SPECTRAL_VECTORS, init_for

    assert TrainConfig().init == "auto" and AUTO_SPECTRAL_VECTORS == 8
    assert init_for("auto", None, 2708, 140) == ("spectral", 8)  # Cora: few labels
    assert init_for("auto", 4, 2708, 140) == ("spectral", 4)  # the vector count given is kept
    assert init_for("auto", None, 2708, 140, dim=6) == ("spectral", 6)  # a narrow table: all its columns
    assert init_for("auto", None, 2708, 140, dim=128) == ("spectral", 8)
    assert init_for("auto", None, 1000, 99) == ("spectral", 8)
    assert init_for("auto", None, 1000, 100) == ("gaussian", None)  # 10%: as label input, on
    assert init_for("auto", 4, 169_343, 90_941) == ("gaussian", None)  # ogbn-arxiv
    for init in ("ortho", "gaussian", "spectral"):  # an explicit init is kept as given
        assert init_for(init, None, 2708, 140) == (init, None)
    assert init_for("spectral", 16, 169_343, 90_941) == ("spectral", 16)
    TrainConfig(init="auto", spectral_vectors=8).validate()


def test_auto_init_never_picks_the_dense_spectral_table_on_large_graphs():
    # ogbn-papers100M has 1.1% training nodes, but its dense spectral table would be 57 GB.
    from ttgnn.config import AUTO_SPECTRAL_MAX_NODES, init_for

    assert AUTO_SPECTRAL_MAX_NODES == 1_000_000
    assert init_for("auto", None, AUTO_SPECTRAL_MAX_NODES, 1000) == ("spectral", 8)
    assert init_for("auto", None, AUTO_SPECTRAL_MAX_NODES + 1, 1000) == ("gaussian", None)
    assert init_for("auto", None, 111_059_956, 1_207_179) == ("gaussian", None)
    assert init_for("spectral", 8, 111_059_956, 1_207_179) == ("spectral", 8)  # as asked


def test_auto_rank_by_the_share_of_labels_and_a_compression_floor():
    from ttgnn.config import AUTO_MIN_COMPRESSION, AUTO_RANK, AUTO_RANK_FEW_LABELS, auto_rank
    from ttgnn.shapes import TTShape

    assert (AUTO_RANK, AUTO_RANK_FEW_LABELS, AUTO_MIN_COMPRESSION) == (8, 4, 100.0)
    assert TrainConfig().rank is None
    # many labels: ogbn-arxiv (1,118x at rank 8), a papers100M-size graph; few: Cora, CiteSeer, PubMed
    assert auto_rank(169_343, 128) == auto_rank(111_059_956, 128) == 8
    assert auto_rank(2708, 128, sparse_labels=True) == auto_rank(19_717, 128, sparse_labels=True) == 4
    assert TTShape.build(2708, 128, 4).compression_ratio >= 100.0  # 221x
    # lowered to the largest rank at >= 100x where the rank would compress less: Cora with many
    # labels (rank 8: 70x; rank 6: 115x, rank 7: 88x), small graphs of either kind
    assert auto_rank(2708, 128) == 6
    for nodes, dim, sparse in ((2708, 128, False), (3327, 128, False), (5000, 16, True), (20_000, 16, False)):
        rank = auto_rank(nodes, dim, sparse_labels=sparse)
        assert TTShape.build(nodes, dim, rank).compression_ratio >= 100.0
        assert TTShape.build(nodes, dim, rank + 1).compression_ratio < 100.0
    # a graph on which no rank reaches the floor gets rank 1; the shape settings are honoured
    assert auto_rank(50, 16) == 1 and TTShape.build(50, 16, 1).compression_ratio < 100.0
    two_cores = auto_rank(2708, 128, num_cores=2)
    assert TTShape.build(2708, 128, two_cores, num_cores=2).compression_ratio >= 100.0
    assert TTShape.build(2708, 128, two_cores + 1, num_cores=2).compression_ratio < 100.0


@pytest.mark.parametrize("shape,message", [
    (dict(row_shape=[5, 5]), "row_shape"), (dict(num_cores=9), "num_cores"), (dict(col_shape=[3, 3, 3]), "col_shape")])
@pytest.mark.parametrize("largest", [False, True])
def test_auto_rank_names_a_bad_shape_whether_or_not_it_picks_the_largest(shape, message, largest):
    # With largest=True the shape's ValueError was taken for "even rank 1 is under the ratio": rank 1
    from ttgnn.config import auto_rank

    with pytest.raises(ValueError, match=message):
        auto_rank(100, 16, largest=largest, **shape)


def test_auto_rank_for_a_table_compressed_from_a_full_one_is_the_largest_at_100x():
    from ttgnn.config import auto_rank
    from ttgnn.shapes import TTShape

    # Cora 115x (rank 6), CiteSeer 101x (rank 7), PubMed 112x (rank 13), whatever the labels
    assert [auto_rank(n, 128, sparse_labels=True, largest=True) for n in (2708, 3327, 19_717)] == [6, 7, 13]
    for nodes, dim, sparse in ((2708, 128, True), (169_343, 128, False), (20_000, 16, True)):
        rank = auto_rank(nodes, dim, sparse_labels=sparse, largest=True)
        assert TTShape.build(nodes, dim, rank).compression_ratio >= 100.0
        assert TTShape.build(nodes, dim, rank + 1).compression_ratio < 100.0
    assert auto_rank(50, 16, largest=True) == 1  # no rank reaches 100x


def _largest_rank_by_scan(num_nodes, dim, num_cores=None, row_shape=None, col_shape=None, sparse_labels=False,
                          largest=False):
    """auto_rank by its definition: the preferred rank when it compresses at least AUTO_MIN_COMPRESSION
    times, else the largest uniform rank that does (capped at the preferred one unless ``largest``),
    else 1; found by trying ranks one by one."""
    from ttgnn.config import AUTO_MIN_COMPRESSION, preferred_rank
    from ttgnn.shapes import TTShape

    preferred = preferred_rank(sparse_labels)
    reach = [r for r in range(1, 129)
             if TTShape.build(num_nodes, dim, r, num_cores, row_shape, col_shape).compression_ratio
             >= AUTO_MIN_COMPRESSION]
    if not largest and preferred in reach:
        return preferred
    if not reach:
        return 1
    return max(reach) if largest else min(max(reach), preferred)


@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("sparse_labels", [False, True])
@pytest.mark.parametrize("num_nodes,dim,shape", [
    (20_000, 16, {}), (20_000, 16, dict(num_cores=2)), (20_000, 16, dict(num_cores=4)),
    (20_000, 16, dict(row_shape=[20, 1000])), (20_000, 16, dict(row_shape=[10, 10, 10, 20])),
    (20_000, 16, dict(col_shape=[8, 2])), (10_000, 64, dict(col_shape=[2, 2, 16])),
    (10_000, 64, dict(row_shape=[10, 1000], col_shape=[8, 8])), (5_000, 32, {}), (169_343, 128, {}),
    (1_000, 8, {}), (30_000, 64, dict(num_cores=2))])
def test_auto_rank_is_its_definition_for_any_shape(num_nodes, dim, shape, sparse_labels, largest):
    from ttgnn.config import auto_rank

    expected = _largest_rank_by_scan(num_nodes, dim, sparse_labels=sparse_labels, largest=largest, **shape)
    assert auto_rank(num_nodes, dim, sparse_labels=sparse_labels, largest=largest, **shape) == expected


def test_the_shape_given_changes_the_rank():
    from ttgnn.config import auto_rank

    assert [auto_rank(20_000, 16), auto_rank(20_000, 16, num_cores=2), auto_rank(20_000, 16, num_cores=4)] == [6, 2, 7]
    assert auto_rank(10_000, 64) == 7 and auto_rank(10_000, 64, col_shape=[2, 2, 16]) == 8


@pytest.mark.parametrize("changes,message", [
    (dict(compression=100.0, max_params=1000), "give at most one of compression and max_params"),
    (dict(rank=4, compression=100.0), "rank=4 and compression both size the TT table: give one (the budget picks the "
                                      "largest rank that fits it)"),
    (dict(rank=4, max_params=1000), "rank=4 and max_params both size the TT table: give one (the budget picks the "
                                    "largest rank that fits it)"),
    (dict(compression=0.0), "compression must be a finite number > 0, got 0.0"),
    (dict(compression=True), "compression must be a finite number > 0, got True"),
    (dict(max_params=0), "max_params must be an integer >= 1, got 0"),
    (dict(lr=True), "lr must be a finite number in (0, 1e+06], got True"),
    (dict(finetune_epochs=0), "finetune_epochs must be an integer >= 1, got 0"),
    (dict(weight_average=-1), "weight_average must be an integer >= 0, got -1"),
    (dict(label_rate=1.0), "label_rate must be a finite number in (0, 1), got 1.0"),
    (dict(label_spread=2, label_input=False), "label_spread=2 spreads the label input over the graph: it needs "
                                              "label input, which is off (label_input=False, --no-label-input)"),
    (dict(label_reuse=2, label_input=False), "label_reuse=2 feeds predictions back as label input: it needs "
                                             "label input, which is off (label_input=False, --no-label-input)"),
    (dict(resume=True), "resume (--resume) needs output_dir (--output-dir), the folder of the run to continue"),
    (dict(resume=True, overwrite=True, output_dir="x"),
     "resume and overwrite exclude each other: continue the run in output_dir, or replace it"),
    (dict(mode="full", eval_fanouts=[5, 5, 5]), "eval_fanouts (sampled evaluation) needs mode='minibatch'; "
                                                "full-graph mode evaluates with the whole graph"),
    (dict(mode="minibatch", fanouts=[5, 5, 5], eval_fanouts=[5, 5, 5], label_reuse=1),
     "label_reuse=1 feeds back every node's prediction, which sampled evaluation (eval_fanouts [5, 5, 5]; the "
     "default in mini-batch mode on graphs of more than 10,000,000 nodes) does not compute"),
])
def test_bad_settings_have_exact_messages(changes, message):
    with pytest.raises(ValueError) as err:
        TrainConfig(**changes).validate()
    assert str(err.value) == message


@pytest.mark.parametrize("changes", [
    dict(epochs=1, dim=1, hidden=1, num_layers=1, heads=1, batch_size=1, eval_batch_size=1, rank=1, num_threads=1,
         finetune_epochs=1, weight_average=0, seed=0),
    dict(compression=100.0), dict(compression=0.5), dict(max_params=1), dict(max_params=1000, rank=None),
    dict(edge_dropout=0.3, mode="full"), dict(init="spectral", dim=16, spectral_vectors=16),
    dict(init="auto", spectral_vectors=8), dict(label_rate=0.5),
])
def test_edge_settings_are_valid(changes):
    TrainConfig(**changes).validate()


def test_resume_keys_follow_the_mode_and_the_schedule():
    base = set(TrainConfig.RESUME_KEYS + TrainConfig.RESUME_TRAINING_KEYS)
    assert set(TrainConfig(mode="full").resume_keys()) == base
    assert set(TrainConfig(mode="minibatch").resume_keys()) == base | {"fanouts", "batch_size"}
    assert set(TrainConfig(mode="full", lr_schedule="cosine").resume_keys()) == base | {"epochs"}
    both = TrainConfig(mode="minibatch", lr_schedule="cosine").resume_keys()
    assert set(both) == base | {"fanouts", "batch_size", "epochs"} and len(both) == len(set(both))
    config = TrainConfig(mode="minibatch", lr_schedule="cosine")
    assert all(hasattr(config, key) for key in both)


def test_rules_at_their_edges():
    from ttgnn.config import AUTO_FROM_FULL_MAX_NODES, few_labels, from_full_for, label_input_for

    assert few_labels(1, 1) is False and few_labels(1, 0) is True and few_labels(0, 0) is True
    assert from_full_for(None, "tt", "full", AUTO_FROM_FULL_MAX_NODES, 1) is True  # one process by default
    assert from_full_for(None, "tt", "full", AUTO_FROM_FULL_MAX_NODES + 1, 1) is False
    assert from_full_for(None, "tt", "full", 1000, 1, world_size=2) is False
    # few labels, reuse left to the rule: GAT in full-graph mode reuses (3 rounds), so label input is on
    assert label_input_for(None, 1000, 10, label_reuse=None, model="gat", mode="full") is True
    assert label_input_for(None, 1000, 10, label_reuse=None, model="sage", mode="full") is False
    assert label_input_for(None, 1000, 10, label_reuse=None, model="gat", mode="minibatch") is False


def test_auto_rank_keeps_a_rank_at_exactly_the_floor_and_sampled_eval_default():
    from ttgnn.config import AUTO_MIN_COMPRESSION, auto_rank, check_label_inputs_with_sampled_eval
    from ttgnn.shapes import TTShape

    # 90,000 x 8 at rank 8 (45 x 45 x 45 by 2 x 2 x 2): 7,200 parameters, exactly 100x
    assert TTShape.build(90_000, 8, 8, None, None, None).compression_ratio == AUTO_MIN_COMPRESSION
    assert auto_rank(90_000, 8) == 8
    check_label_inputs_with_sampled_eval(0, [5, 5])  # no spreading unless asked


@pytest.mark.parametrize("settings, message", [
    (dict(num_layers=65), "num_layers must be at most 64, got 65"),  # 10^5 layers filled the memory
    (dict(num_threads=4097), "num_threads must be at most 4096, got 4097"),  # 2**31 overflowed in torch
    (dict(model="gat", hidden=5, heads=4), r"hidden \(5\) must be a positive multiple of heads \(4\) for GAT"),
])
def test_sizes_past_what_a_run_can_take_are_refused_before_any_data(settings, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**settings).validate()
    TrainConfig(num_layers=64, num_threads=4096, model="sage", hidden=5, heads=4).validate()


def test_the_gat_width_is_checked_where_auto_picks_gat():
    # model "auto" in full-graph mode trains GAT: --hidden 130 with 4 heads failed only after the data loaded.
    with pytest.raises(ValueError, match=r"hidden \(130\) must be a positive multiple of heads \(4\) for GAT"):
        TrainConfig(model="auto", mode="full", hidden=130, heads=4).validate()
    TrainConfig(model="auto", mode="minibatch", hidden=130, heads=4, fanouts=[5, 5, 5]).validate()  # GraphSAGE


def test_a_shape_or_fanouts_given_as_an_array_is_named():
    import numpy as np

    # "The truth value of an array with more than one element is ambiguous" before
    config = TrainConfig(mode="minibatch", fanouts=np.array([15, 10, 5]))
    with pytest.raises(ValueError, match=r"^fanouts must be a list of integers, got ndarray array\(\[15, 10,  5\]\) "
                                         r"\(\.tolist\(\) makes a list of an array\)$"):
        config.validate()
    TrainConfig(mode="minibatch", fanouts=(15, 10, 5), row_shape=[20, 20]).validate()


def test_option_text_names_each_resume_setting_as_ttgnn_train_takes_it():
    # a refused resume said "give hidden=128" to a user who types --hidden 128
    from ttgnn.cli import build_parser
    from ttgnn.config import option_text

    assert option_text("hidden", 128) == "--hidden 128"
    assert option_text("from_full", False) == "--no-from-full" and option_text("label_input", True) == "--label-input"
    assert option_text("fanouts", [15, 10, 5]) == "--fanouts 15,10,5" and option_text("rank", None) == "--rank left out"
    parser = build_parser()
    config = TrainConfig(mode="minibatch")
    for key in config.resume_keys():  # each is an option of ttgnn train, and the text gives back its value
        value = getattr(config, key)
        if value is None:
            continue
        args = parser.parse_args(["train", "--dataset", "cora", *option_text(key, value).split()])
        assert getattr(args, key) == (list(value) if isinstance(value, tuple) else value), key
