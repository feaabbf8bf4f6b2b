"""ttgnn: tensor-train compressed node embeddings for featureless graph neural networks."""
import os as _os

# DGL (imported by ttgnn's data and model modules, and by ogb) needs its backend chosen before its
# first import; without it DGL guesses and writes ~/.dgl/config.json.
_os.environ.setdefault("DGLBACKEND", "pytorch")

__version__ = "0.1.0"

__all__ = ["TTNodeEmbedding", "TTShape", "__version__"]


def __getattr__(name: str):
    # Imported on first use: the TT-lookup kernels load (and, on a machine's first use, compile) with
    # ttgnn.ops, which `ttgnn --help` and an argument error should not wait for.
    if name == "TTNodeEmbedding":
        from .embedding import TTNodeEmbedding

        return TTNodeEmbedding
    if name == "TTShape":
        from .shapes import TTShape

        return TTShape
    raise AttributeError(f"module 'ttgnn' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
