"""A GGUF model run in process by llama.cpp (llama-cpp-python), and the embedded default model.

from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

client = LlamaCppChatCompletionClient(default_model_path(), temperature=0.0)
"""

from .__about__ import __version__
from ._client import LlamaCppChatCompletionClient
from ._config import LlamaCppClientConfig
from ._default_model import DEFAULT_MODEL_DISTRIBUTION, DEFAULT_MODEL_FILE, default_model_path
from ._embeddings import LlamaCppEmbeddingClient, LlamaCppEmbeddingConfig, Pooling
from ._mapping import TOOL_PREAMBLE, calls_schema, map_messages, parse_output, tool_system_text

__all__ = [
    # application code
    "DEFAULT_MODEL_DISTRIBUTION",
    "DEFAULT_MODEL_FILE",
    "default_model_path",
    "LlamaCppChatCompletionClient",
    "LlamaCppClientConfig",
    "LlamaCppEmbeddingClient",
    "LlamaCppEmbeddingConfig",
    "Pooling",
    # the mapping (tests, tools)
    "calls_schema",
    "map_messages",
    "parse_output",
    "TOOL_PREAMBLE",
    "tool_system_text",
    "__version__",
]
