"""OpenAI and Azure OpenAI embedding clients: ext-core's `BaseEmbeddingClient` over the SDK's embeddings API.

The base does the batching (2048 inputs per request, the API's limit), retries, cancellation and checks; this
module maps one batch to `embeddings.create` and back. The SDK asks for base64-encoded float32 vectors and decodes
them (`openai.lib._parsing._embeddings`); the values are the same as the float format's, in a quarter of the bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ext.core import (
    BaseEmbeddingClient,
    ConfigurationError,
    EmbeddingResult,
    RequestUsage,
    RetryPolicy,
    config_from_arguments,
)

from ._connection import (
    AzureOpenAIConnection,
    OpenAIConnection,
    SdkOwner,
    TokenProvider,
    azure_config,
    azure_sdk,
    openai_sdk,
)
from ._retry import classify_openai_error

if TYPE_CHECKING:
    import openai

__all__ = [
    "OPENAI_EMBEDDING_SIZES",
    "AzureOpenAIEmbeddingClient",
    "AzureOpenAIEmbeddingConfig",
    "OpenAIEmbeddingClient",
    "OpenAIEmbeddingConfig",
]

OPENAI_EMBEDDING_SIZES = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native vector sizes (OpenAI embeddings guide); other names learn theirs from the first call."""
_NO_DIMENSIONS = frozenset({"text-embedding-ada-002"})  # `dimensions` is for text-embedding-3 and later only


class _EmbeddingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    dimensions: Optional[int] = Field(None, gt=0, description="Vector size to ask for (text-embedding-3 and later).")
    batch_size: Optional[int] = Field(None, gt=0, le=2048, description="Most texts per request (default 2048).")
    user: Optional[str] = Field(None, description="End-user id sent as `user`.")


class OpenAIEmbeddingConfig(_EmbeddingConfig, OpenAIConnection):
    """`OpenAIEmbeddingClient` configuration."""

    model: str = Field(min_length=1, description="e.g. text-embedding-3-small, or any name the server knows.")


class AzureOpenAIEmbeddingConfig(_EmbeddingConfig, AzureOpenAIConnection):
    """`AzureOpenAIEmbeddingClient` configuration."""

    model: Optional[str] = Field(None, min_length=1, description="The deployed model (default: the deployment).")


_AnyEmbeddingConfig = Union[OpenAIEmbeddingConfig, AzureOpenAIEmbeddingConfig]


class _OpenAIEmbeddings(SdkOwner, BaseEmbeddingClient):
    """What both clients share: the request, the response mapping, connections and dumps."""

    provider_name: ClassVar[str] = "openai"
    max_batch_size: ClassVar[int] = 2048  # OpenAI API reference: "any array must be 2048 dimensions or less"

    _config: _AnyEmbeddingConfig

    def _setup(
        self, config: _AnyEmbeddingConfig, model: str, sdk: openai.AsyncOpenAI, retry_policy: RetryPolicy | None
    ) -> None:
        if config.dimensions is not None and model in _NO_DIMENSIONS:
            raise ConfigurationError(
                f"{type(self).__name__}: dimensions: {model} does not take a vector size (text-embedding-3 and "
                "later models do)"
            )
        super().__init__(model=model, retry_policy=retry_policy, config=config, classify_error=classify_openai_error)
        self._sdk = sdk
        args: dict[str, Any] = {}
        if config.dimensions is not None:
            args["dimensions"] = config.dimensions
        if config.user is not None:
            args["user"] = config.user
        self._create_args = args

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        response = await self._sdk.embeddings.create(input=texts, model=self.model, **self._create_args)
        data = response.data
        if any(item.index != i for i, item in enumerate(data)):  # the API numbers them; keep input order
            data = sorted(data, key=lambda item: item.index)
        usage = RequestUsage(prompt_tokens=response.usage.prompt_tokens)
        # The SDK built the floats already: no second validation of a few million of them.
        return EmbeddingResult.model_construct(
            vectors=[item.embedding for item in data], usage=usage, model=response.model
        )

    def _known_vector_size(self) -> int | None:
        return OPENAI_EMBEDDING_SIZES.get(self.model)

    @property
    def base_url(self) -> str:
        """Where requests go (the SDK's base URL)."""
        return str(self._sdk.base_url)


class OpenAIEmbeddingClient(_OpenAIEmbeddings):
    """Embeddings from OpenAI or any OpenAI-compatible server (`base_url`).

    The key comes from `api_key` or the environment variable named by `api_key_env` (OPENAI_API_KEY).
    `dimensions` shortens text-embedding-3 vectors on the server.
    """

    component_config_schema: ClassVar[type[BaseModel]] = OpenAIEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.openai.OpenAIEmbeddingClient"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        organization: str | None = None,
        project: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int | None = None,
        user: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = config_from_arguments(OpenAIEmbeddingConfig, locals(), owner)
        sdk = openai_sdk(config, http_client, owner)
        self._setup(config, config.model, sdk, retry_policy)
        self._owns_http_client = http_client is None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"


class AzureOpenAIEmbeddingClient(_OpenAIEmbeddings):
    """Embeddings from an Azure OpenAI deployment: `{azure_endpoint}/openai/deployments/{azure_deployment}/embeddings`.

    Authenticate with one of `api_key` (the `api-key` header), `azure_ad_token` or `azure_ad_token_provider`
    (`Authorization: Bearer`); without any, the key is read from AZURE_OPENAI_API_KEY, then a token from
    AZURE_OPENAI_AD_TOKEN. `azure_endpoint` and `api_version` default to AZURE_OPENAI_ENDPOINT and
    OPENAI_API_VERSION.
    """

    component_config_schema: ClassVar[type[BaseModel]] = AzureOpenAIEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.openai.AzureOpenAIEmbeddingClient"

    _config: AzureOpenAIEmbeddingConfig

    def __init__(
        self,
        *,
        azure_deployment: str,
        api_version: str | None = None,
        azure_endpoint: str | None = None,
        model: str | None = None,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = "AZURE_OPENAI_API_KEY",
        azure_ad_token: str | SecretStr | None = None,
        azure_ad_token_env: str | None = "AZURE_OPENAI_AD_TOKEN",
        azure_ad_token_provider: TokenProvider | None = None,
        dimensions: int | None = None,
        batch_size: int | None = None,
        user: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = azure_config(AzureOpenAIEmbeddingConfig, locals(), owner)
        sdk, _ = azure_sdk(config, azure_ad_token_provider, http_client, owner)
        self._setup(config, config.model or config.azure_deployment, sdk, retry_policy)
        self._owns_http_client = http_client is None
        self._has_token_provider = azure_ad_token_provider is not None

    @property
    def azure_deployment(self) -> str:
        return self._config.azure_deployment

    def __repr__(self) -> str:
        return f"{type(self).__name__}(azure_deployment={self.azure_deployment!r}, model={self.model!r})"
