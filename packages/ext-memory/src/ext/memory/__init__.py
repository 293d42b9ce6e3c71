"""ext-memory: vector memory. Documents chunked, embedded by any `EmbeddingClient` and kept in any `VectorStore`
(`VectorMemory`); a chat-pipeline middleware that puts the passages closest to each request in front of the model
(`MemoryMiddleware`, also the `memory:` entry of pipeline files), and a search tool (`MemorySearchTool`)."""

from .__about__ import __version__
from ._memory import MemoryDocument, MemoryHit, TextChunk, VectorMemory, split_text
from ._middleware import (
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
    # building on memory: chunks, the prompt text, the search tool's arguments, the pipeline-file kind
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
