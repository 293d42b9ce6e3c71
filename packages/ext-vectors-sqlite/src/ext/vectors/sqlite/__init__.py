"""ext-vectors-sqlite: the embedded `VectorStore`, SQLite + sqlite-vec in one file or in memory, no server."""

from ext.vectors.sqlite.__about__ import __version__
from ext.vectors.sqlite._store import SqliteVectorStore, SqliteVectorStoreConfig

__all__ = ["SqliteVectorStore", "SqliteVectorStoreConfig", "__version__"]
