"""ttgnn: tensor-train compressed node embeddings for featureless graph neural networks."""
from .embedding import TTNodeEmbedding
from .shapes import TTShape

__version__ = "0.1.0"

__all__ = ["TTNodeEmbedding", "TTShape", "__version__"]
