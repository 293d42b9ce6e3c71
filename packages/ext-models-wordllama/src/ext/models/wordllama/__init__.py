"""ext's offline embedder: WordLlama's static embeddings (the model its wheel ships), in process, with no network.

from ext.models.wordllama import WordLlamaEmbeddingClient

async with WordLlamaEmbeddingClient() as client:
    vectors = (await client.embed(["a text", "another"])).vectors  # 256 floats each, unit length
"""

from .__about__ import __version__
from ._embeddings import (
    DEFAULT_DIMENSIONS,
    DIMENSIONS,
    WordLlamaEmbeddingClient,
    WordLlamaEmbeddingConfig,
    load_wordllama,
)

__all__ = [
    # application code
    "WordLlamaEmbeddingClient",
    "WordLlamaEmbeddingConfig",
    "DEFAULT_DIMENSIONS",
    "DIMENSIONS",
    # WordLlama's own model object, loaded offline (benchmarks, comparisons)
    "load_wordllama",
    "__version__",
]
