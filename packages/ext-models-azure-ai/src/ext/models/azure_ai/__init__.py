"""Azure AI Inference chat completion client for ext, on azure-ai-inference.

from ext.models.azure_ai import AzureAIChatCompletionClient

client = AzureAIChatCompletionClient(endpoint="https://<resource>.services.ai.azure.com/models", model="Phi-4")
"""

from ext.core import check_api_version

from .__about__ import __version__
from ._client import SDK_DEFAULT_API_VERSION, AzureAIChatCompletionClient, Credential
from ._config import AzureAIClientConfig
from ._embeddings import AzureAIEmbeddingClient, AzureAIEmbeddingConfig, InputType
from ._mapping import (
    API_FIELDS,
    StreamState,
    ThinkTagSplitter,
    WireSettings,
    map_request,
    map_response,
    split_think_tags,
)
from ._models import AZURE_AI_MODELS
from ._retry import classify_azure_error

__all__ = [
    # application code
    "AZURE_AI_MODELS",
    "AzureAIChatCompletionClient",
    "AzureAIClientConfig",
    "AzureAIEmbeddingClient",
    "AzureAIEmbeddingConfig",
    "Credential",
    "InputType",
    # the mapping (tests, tools)
    "API_FIELDS",
    "check_api_version",
    "classify_azure_error",
    "map_request",
    "map_response",
    "SDK_DEFAULT_API_VERSION",
    "split_think_tags",
    "StreamState",
    "ThinkTagSplitter",
    "WireSettings",
    "__version__",
]
