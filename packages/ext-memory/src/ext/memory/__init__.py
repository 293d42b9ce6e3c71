"""ext-memory: vector memory. Documents chunked, embedded by any `EmbeddingClient` and kept in any `VectorStore`
(`VectorMemory`); a chat-pipeline middleware that puts the passages closest to each request in front of the model
(`MemoryMiddleware`, also the `memory:` entry of pipeline files), and a search tool (`MemorySearchTool`)."""

from .__about__ import __version__
from ._memory import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    MemoryDocument,
    MemoryHit,
    TextChunk,
    VectorMemory,
    split_text,
)
from ._middleware import (
    CUT_MARK,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_TOP_K,
    MEMORY_CONTEXT_KEY,
    MEMORY_HEADER,
    MemoryMiddleware,
    MemorySearchArgs,
    MemorySearchTool,
    format_memories,
)
from ._pipeline_file import MemoryEntry, memory_entry

__all__ = [
    # application code
    "MemoryDocument",
    "MemoryHit",
    "MemoryMiddleware",
    "MemorySearchTool",
    "VectorMemory",
    # the defaults that work together (chunks of DEFAULT_TOP_K hits fit DEFAULT_TOKEN_BUDGET), for other front ends
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_CHUNK_CHARS",
    "DEFAULT_TOKEN_BUDGET",
    "DEFAULT_TOP_K",
    # building on memory: chunks, the prompt text, the search tool's arguments, the pipeline-file kind
    "CUT_MARK",
    "MEMORY_CONTEXT_KEY",
    "MEMORY_HEADER",
    "MemoryEntry",
    "MemorySearchArgs",
    "TextChunk",
    "format_memories",
    "memory_entry",
    "split_text",
    "__version__",
]
