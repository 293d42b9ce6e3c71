"""`AzureAIEmbeddingClient`: ext-core's `BaseEmbeddingClient` over azure-ai-inference's async `EmbeddingsClient`
(`POST {endpoint}/embeddings?api-version=...`).

Batch limit: the Model Inference API documents none of its own; each deployed model has one. Cohere Embed v3, the
strictest of the embedding models the catalog serves, takes at most 96 texts per call (Cohere's Embed API
reference, `texts`), so that is the default `batch_size`; a deployment of OpenAI's models may raise it to 2048.
The SDK's own retries are off (`retry_total=0`): core's policy retries, so a retry is never doubled.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import BaseModel, Field, SecretStr

from ext.core import (
    BaseEmbeddingClient,
    EmbeddingResponseError,
    EmbeddingResult,
    RequestUsage,
    RetryPolicy,
    config_from_arguments,
)

from ._config import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT, EndpointConfig
from ._credential import Credential, call_options, sdk_credential, sdk_options, split_credential
from ._retry import classify_azure_error

__all__ = ["AzureAIEmbeddingClient", "AzureAIEmbeddingConfig", "InputType"]

InputType = Literal["text", "query", "document"]
"""What the texts are, for models that embed queries and documents differently."""


class AzureAIEmbeddingConfig(EndpointConfig):
    """`AzureAIEmbeddingClient` configuration."""

    dimensions: Optional[int] = Field(None, gt=0, description="Vector size to ask for (models that can shorten).")
    input_type: Optional[InputType] = Field(None, description="text, query or document; None sends nothing.")
    batch_size: Optional[int] = Field(None, gt=0, le=2048, description="Most texts per request (default 96).")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds to connect, and between reads of a reply.")
    max_retries: int = Field(3, ge=0, description="Retries of rate limits and transient errors.")


class AzureAIEmbeddingClient(BaseEmbeddingClient):
    """Embeddings from an Azure AI Foundry model (Azure AI Model Inference API).

    `credential` is a key (a string, `SecretStr` or `AzureKeyCredential`) or an async token credential; without
    one the key is read from AZURE_AI_API_KEY.
    """

    provider_name: ClassVar[str] = "azure_ai"
    max_batch_size: ClassVar[int] = 2048
    default_batch_size: ClassVar[int | None] = 96
    component_config_schema: ClassVar[type[BaseModel]] = AzureAIEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.azure_ai.AzureAIEmbeddingClient"

    _config: AzureAIEmbeddingConfig

    def __init__(
        self,
        *,
        endpoint: str,
        model: str,
        credential: Credential | None = None,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = DEFAULT_API_KEY_ENV,
        api_version: str | None = None,
        dimensions: int | None = None,
        input_type: InputType | None = None,
        batch_size: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        credential, api_key, is_token = split_credential(credential, api_key, owner)
        config = config_from_arguments(AzureAIEmbeddingConfig, locals(), owner)
        sdk_auth = sdk_credential(credential, config.api_key, config.api_key_env, owner)
        super().__init__(
            model=config.model, retry_policy=retry_policy, config=config, classify_error=classify_azure_error
        )
        self._token_credential = is_token
        from azure.ai.inference.aio import EmbeddingsClient  # deferred: importing ext stays cheap

        self._sdk = EmbeddingsClient(config.endpoint, sdk_auth, **sdk_options(config.timeout, config.api_version))
        self._call_options = call_options(config.endpoint, is_token)

    @property
    def endpoint(self) -> str:
        return self._config.endpoint

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        config = self._config
        result = await self._sdk.embed(
            input=texts,
            model=config.model,
            dimensions=config.dimensions,
            input_type=config.input_type,
            **self._call_options,
        )
        items = sorted(result.data, key=lambda item: item.index)
        vectors = [item.embedding for item in items]
        if any(isinstance(v, str) for v in vectors):
            raise EmbeddingResponseError(f"{type(self).__name__}: the endpoint sent encoded vectors, not floats")
        usage = RequestUsage(prompt_tokens=result.usage.prompt_tokens)
        return EmbeddingResult.model_construct(vectors=vectors, usage=usage, model=result.model or config.model)

    async def _close(self) -> None:
        await self._sdk.close()

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if self._token_credential:
            settings["credential"] = "a token credential object"
        return settings

    def _to_config(self) -> BaseModel:
        return self._config.model_copy(update={"api_key": None})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(endpoint={self.endpoint!r}, model={self.model!r})"
