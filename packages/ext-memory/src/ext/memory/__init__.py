"""ext-memory: vector memory. Documents chunked, embedded by any `EmbeddingClient` and kept in any `VectorStore`
(`VectorMemory`); a chat-pipeline middleware that puts the passages closest to each request in front of the model
(`MemoryMiddleware`, also the `memory:` entry of pipeline files), and a search tool (`MemorySearchTool`)."""

from .__about__ import __version__
from ._chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_CHUNK_CHARS, TextChunk, split_text
from ._documents import DEFAULT_MAX_FILE_BYTES, LoadedDocuments, SkippedFile, html_text, load_documents
from ._markdown import split_markdown
from ._memory import DocumentFormat, MemoryDocument, MemoryHit, MemorySource, VectorMemory
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
    # documents as users have them: files and folders read, skipped files with their reasons, sources listed
    "DocumentFormat",
    "LoadedDocuments",
    "MemorySource",
    "SkippedFile",
    "load_documents",
    # the defaults that work together (chunks of DEFAULT_TOP_K hits fit DEFAULT_TOKEN_BUDGET), for other front ends
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_CHUNK_CHARS",
    "DEFAULT_TOKEN_BUDGET",
    "DEFAULT_TOP_K",
    "DEFAULT_MAX_FILE_BYTES",
    # building on memory: chunks, the prompt text, the search tool's arguments, the pipeline-file kind
    "CUT_MARK",
    "MEMORY_CONTEXT_KEY",
    "MEMORY_HEADER",
    "MemoryEntry",
    "MemorySearchArgs",
    "TextChunk",
    "format_memories",
    "html_text",
    "memory_entry",
    "split_markdown",
    "split_text",
    "__version__",
]
