"""Anthropic (Claude) chat completion client for ext, on the anthropic SDK.

    from ext.models.anthropic import AnthropicChatCompletionClient

    client = AnthropicChatCompletionClient("claude-sonnet-4-5", max_tokens=1024)  # key from ANTHROPIC_API_KEY

The request/response mapping (`map_request`, `map_response`, `StreamState`, ...) is public and free of the
anthropic SDK, so other transports of the same API (ext-models-bedrock) reuse it. The client class (and
with it the anthropic SDK) is imported on first use, which keeps `import ext.models.anthropic` light for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__
from ._base import AnthropicMessagesClient
from ._config import (
    AnthropicClientConfig,
    AnthropicMessagesConfig,
    AnthropicSystemPolicy,
)
from ._mapping import (
    ANTHROPIC_MODELS,
    IMAGE_TYPES,
    JSON_MODE_INSTRUCTION,
    PROVIDER,
    THINKING_TYPES,
    AnthropicWireSettings,
    IncompleteStreamError,
    StreamState,
    check_extra_args,
    check_options,
    check_sampling,
    check_thinking,
    map_messages,
    map_output,
    map_request,
    map_response,
    map_tool_choice,
    map_tools,
    map_usage,
    structured_output_schema,
    thinking_enabled,
)

if TYPE_CHECKING:
    from ._client import AnthropicChatCompletionClient
    from ._retry import classify_anthropic_error

__all__ = [
    # application code
    "ANTHROPIC_MODELS",
    "AnthropicChatCompletionClient",
    "AnthropicClientConfig",
    "IncompleteStreamError",
    # provider authors (ext-models-bedrock reuses the Messages mapping)
    "AnthropicMessagesClient",
    "AnthropicMessagesConfig",
    "AnthropicSystemPolicy",
    "AnthropicWireSettings",
    "check_extra_args",
    "check_options",
    "check_sampling",
    "check_thinking",
    "classify_anthropic_error",
    "IMAGE_TYPES",
    "JSON_MODE_INSTRUCTION",
    "map_messages",
    "map_output",
    "map_request",
    "map_response",
    "map_tool_choice",
    "map_tools",
    "map_usage",
    "PROVIDER",
    "StreamState",
    "structured_output_schema",
    "thinking_enabled",
    "THINKING_TYPES",
    "__version__",
]

_LAZY = {
    "AnthropicChatCompletionClient": "._client",
    "classify_anthropic_error": "._retry",
}


def __getattr__(name: str) -> Any:
    # PEP 562: these names import the anthropic SDK (about a second on a cold start), so only when asked for.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
