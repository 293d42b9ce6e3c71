"""Claude on AWS Bedrock for ext: `AnthropicBedrockChatCompletionClient` (InvokeModel, on aioboto3).

    from ext.models.bedrock import AnthropicBedrockChatCompletionClient

    client = AnthropicBedrockChatCompletionClient(
        "us.anthropic.claude-sonnet-5-5-v1:0", max_tokens=1024, aws_region="us-east-1"
    )  # credentials from the standard AWS chain

The message mapping is ext-models-anthropic's. The client class (and with it aioboto3) is imported on first
access, so loading the retry classifier through the `ext.retry` entry point stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__
from ._config import BedrockClientConfig
from ._retry import RETRYABLE_CODES, classify_bedrock_error

if TYPE_CHECKING:
    from ._client import BEDROCK_ANTHROPIC_VERSION, AnthropicBedrockChatCompletionClient

__all__ = [
    "BEDROCK_ANTHROPIC_VERSION",
    "RETRYABLE_CODES",
    "AnthropicBedrockChatCompletionClient",
    "BedrockClientConfig",
    "__version__",
    "classify_bedrock_error",
]

_LAZY = frozenset({"AnthropicBedrockChatCompletionClient", "BEDROCK_ANTHROPIC_VERSION"})


def __getattr__(name: str) -> Any:
    # PEP 562: the client imports aioboto3/botocore, so only when asked for.
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _client

    value = getattr(_client, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
