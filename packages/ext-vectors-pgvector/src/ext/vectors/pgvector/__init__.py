"""ext-vectors-pgvector: a `VectorStore` on PostgreSQL with pgvector (psycopg 3 async, HNSW, cosine)."""

from ext.vectors.pgvector.__about__ import __version__
from ext.vectors.pgvector._store import PgVectorStore, PgVectorStoreConfig

__all__ = ["PgVectorStore", "PgVectorStoreConfig", "__version__"]
