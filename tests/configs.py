"""The small training configuration the training tests start from."""
from ttgnn.config import TrainConfig

# GraphSAGE + TT (rank 4, 16 columns) on the planted graph, one thread, no progress bars: a run of seconds.
SMALL = dict(dataset="planted-400", model="sage", embedding="tt", dim=16, rank=4, order="identity", hidden=16,
             num_layers=2, fanouts=[5, 5], batch_size=64, progress=False, num_threads=1)


def small_config(out, **kw) -> TrainConfig:
    """:data:`SMALL` with ``kw`` on top; ``out`` is the run folder (``None``: the run writes nothing)."""
    return TrainConfig(**{**SMALL, "output_dir": None if out is None else str(out), **kw})


def minibatch_config(out, **kw) -> TrainConfig:
    """:func:`small_config` in mini-batch mode without label input or label reuse, seed 0: where the
    evaluation tests start."""
    return small_config(out, **{"mode": "minibatch", "label_input": False, "label_reuse": 0, "seed": 0, **kw})
