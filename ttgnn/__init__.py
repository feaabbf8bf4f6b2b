"""ttgnn: tensor-train compressed node embeddings for featureless graph neural networks."""
import os as _os

# DGL (imported by ttgnn's data and model modules, and by ogb) needs its backend chosen before its
# first import; without it DGL guesses and writes ~/.dgl/config.json.
_os.environ.setdefault("DGLBACKEND", "pytorch")
from .embedding import TTNodeEmbedding
from .shapes import TTShape

__version__ = "0.1.0"

__all__ = ["TTNodeEmbedding", "TTShape", "__version__"]
