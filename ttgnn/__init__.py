"""ttgnn: tensor-train compressed node embeddings for featureless graph neural networks."""
import os as _os

# DGL (imported by ttgnn's data and model modules, and by ogb) needs its backend chosen before its
# first import; without it DGL guesses and writes ~/.dgl/config.json.
_os.environ.setdefault("DGLBACKEND", "pytorch")


def _check_installed() -> None:
    # `python -m ttgnn` in a clone after a non-editable `pip install .` imports the clone's ttgnn/, which
    # lacks ttgnn.partition (the clone's top-level partition/, mapped by the install): name the cause
    # here instead of a ModuleNotFoundError deep in the command line's imports
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.partition") is None:
        raise ImportError(f"ttgnn was imported from the source folder {_os.path.dirname(__file__)} without its "
                          "ttgnn.partition package (the clone's partition/, which an install maps): run outside the "
                          "clone, or install the clone itself with: pip install --no-build-isolation -e .")


_check_installed()

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
