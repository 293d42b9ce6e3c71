"""Ollama chat completion client for ext, on the ollama SDK.

from ext.models.ollama import OllamaChatCompletionClient

client = OllamaChatCompletionClient("llama3.2")  # host from OLLAMA_HOST, else http://localhost:11434
"""

from __future__ import annotations

from .__about__ import __version__
from ._client import OllamaChatCompletionClient, parse_host
from ._config import DEFAULT_HOST, DEFAULT_TIMEOUT, OllamaClientConfig, ThinkSetting
from ._embeddings import OllamaEmbeddingClient, OllamaEmbeddingConfig
from ._errors import OllamaConnectionError, OllamaModelNotFoundError, OllamaResponseError, OllamaTimeoutError
from ._mapping import (
    OLLAMA_MODELS,
    OllamaWireSettings,
    StreamState,
    map_messages,
    map_options,
    map_request,
    map_response,
    map_tools,
)
from ._retry import classify_ollama_error

__all__ = [
    # application code
    "DEFAULT_HOST",
    "DEFAULT_TIMEOUT",
    "OLLAMA_MODELS",
    "OllamaChatCompletionClient",
    "OllamaClientConfig",
    "OllamaEmbeddingClient",
    "OllamaEmbeddingConfig",
    "ThinkSetting",
    # application code: errors
    "OllamaConnectionError",
    "OllamaModelNotFoundError",
    "OllamaResponseError",
    "OllamaTimeoutError",
    # the mapping (tests, tools)
    "classify_ollama_error",
    "map_messages",
    "map_options",
    "map_request",
    "map_response",
    "map_tools",
    "OllamaWireSettings",
    "parse_host",
    "StreamState",
    "__version__",
]
