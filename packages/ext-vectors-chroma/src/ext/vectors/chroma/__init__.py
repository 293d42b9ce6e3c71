"""ext-vectors-chroma: a `VectorStore` on a Chroma server (its HTTP API over httpx, async, HNSW, cosine)."""

from ext.vectors.chroma.__about__ import __version__
from ext.vectors.chroma._store import ChromaVectorStore, ChromaVectorStoreConfig

__all__ = ["ChromaVectorStore", "ChromaVectorStoreConfig", "__version__"]
