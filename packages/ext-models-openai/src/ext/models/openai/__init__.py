"""OpenAI and Azure OpenAI chat completion clients for ext, on the openai SDK.

from ext.models.openai import OpenAIChatCompletionClient

client = OpenAIChatCompletionClient("gpt-4o")  # key from OPENAI_API_KEY
"""

from ext.core import check_api_version

from .__about__ import __version__
from ._client import AzureOpenAIChatCompletionClient, BaseOpenAIChatCompletionClient, OpenAIChatCompletionClient
from ._config import AzureOpenAIClientConfig, OpenAIClientConfig
from ._embeddings import (
    OPENAI_EMBEDDING_SIZES,
    AzureOpenAIEmbeddingClient,
    AzureOpenAIEmbeddingConfig,
    OpenAIEmbeddingClient,
    OpenAIEmbeddingConfig,
)
from ._mapping import TOOL_ERROR_PREFIX, WireSettings
from ._models import OPENAI_MODELS, OPENAI_REASONING_FAMILIES
from ._retry import classify_openai_error
from ._tokens import ENCODINGS, encoding_name_for_model, export_encodings, find_encoding_file, load_encoding

__all__ = [
    # application code
    "AzureOpenAIChatCompletionClient",
    "AzureOpenAIClientConfig",
    "AzureOpenAIEmbeddingClient",
    "AzureOpenAIEmbeddingConfig",
    "OPENAI_EMBEDDING_SIZES",
    "OPENAI_MODELS",
    "OpenAIChatCompletionClient",
    "OpenAIClientConfig",
    "OpenAIEmbeddingClient",
    "OpenAIEmbeddingConfig",
    # offline token counting
    "encoding_name_for_model",
    "ENCODINGS",
    "export_encodings",
    "find_encoding_file",
    "load_encoding",
    # the mapping (subclasses, tests, tools)
    "BaseOpenAIChatCompletionClient",
    "check_api_version",
    "classify_openai_error",
    "OPENAI_REASONING_FAMILIES",
    "TOOL_ERROR_PREFIX",
    "WireSettings",
    "__version__",
]
