"""The Ollama embedding client: ext-core's `BaseEmbeddingClient` over the ollama SDK's `embed` (`POST /api/embed`).

Ollama documents no limit on the inputs of one request, but it tokenizes and embeds them all before it answers
(`EmbedHandler` in server/routes.go), so one huge request can outlast the timeout and cannot be cancelled part way.
The client therefore sends at most 256 texts per request (`batch_size`, up to 2048).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Optional, Union

import ollama
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ext.core import BaseEmbeddingClient, EmbeddingResult, RequestUsage, RetryPolicy, config_from_arguments

from ._client import OllamaChatCompletionClient, parse_host
from ._config import DEFAULT_TIMEOUT, check_option_names
from ._errors import OllamaModelNotFoundError
from ._retry import classify_ollama_error

__all__ = ["OllamaEmbeddingClient", "OllamaEmbeddingConfig"]


class OllamaEmbeddingConfig(BaseModel):
    """`OllamaEmbeddingClient` configuration."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model: str = Field(min_length=1, description="An embedding model as Ollama lists it, e.g. nomic-embed-text.")
    host: Optional[str] = Field(None, description="Ollama's URL; None reads OLLAMA_HOST, else http://localhost:11434.")
    dimensions: Optional[int] = Field(None, gt=0, description="Vector size to ask for (models that can shorten).")
    truncate: Optional[bool] = Field(
        None, description="Cut inputs longer than the context (Ollama's default: True); False makes them a 400."
    )
    keep_alive: Optional[Union[float, str]] = Field(None, description="How long Ollama keeps the model loaded.")
    options: Optional[dict[str, Any]] = Field(None, description="Ollama options (num_ctx, num_thread, ...).")
    batch_size: Optional[int] = Field(None, gt=0, le=2048, description="Most texts per request (default 256).")
    headers: Optional[dict[str, SecretStr]] = Field(
        None, description="Headers as values (such a client cannot be dumped)."
    )
    headers_env: Optional[dict[str, str]] = Field(None, description="Headers read from environment variables.")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds before one HTTP phase fails.")
    max_retries: int = Field(3, ge=0, description="Retries of 429, 5xx, timeouts and connection errors.")

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            check_option_names(value, "options")
        return value


class OllamaEmbeddingClient(BaseEmbeddingClient):
    """Embeddings from a local or remote Ollama server (`/api/embed`). Ollama returns unit-length vectors."""

    provider_name: ClassVar[str] = "ollama"
    max_batch_size: ClassVar[int] = 2048
    default_batch_size: ClassVar[int | None] = 256
    component_config_schema: ClassVar[type[BaseModel]] = OllamaEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.ollama.OllamaEmbeddingClient"

    _config: OllamaEmbeddingConfig

    def __init__(
        self,
        model: str = "nomic-embed-text",
        *,
        host: str | None = None,
        dimensions: int | None = None,
        truncate: bool | None = None,
        keep_alive: float | str | None = None,
        options: Mapping[str, Any] | None = None,
        batch_size: int | None = None,
        headers: Mapping[str, str | SecretStr] | None = None,
        headers_env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = config_from_arguments(OllamaEmbeddingConfig, locals(), owner)
        environ = os.environ
        self._host = parse_host(config.host if config.host is not None else environ.get("OLLAMA_HOST"))
        # The chat client's header rules (values, environment references, OLLAMA_API_KEY): one place for them.
        wire_headers = OllamaChatCompletionClient._wire_headers(config, environ, owner)  # type: ignore[arg-type]
        super().__init__(
            model=config.model, retry_policy=retry_policy, config=config, classify_error=classify_ollama_error
        )
        self._sdk = ollama.AsyncClient(host=self._host, headers=wire_headers, timeout=config.timeout)

    @property
    def host(self) -> str:
        """The Ollama server's base URL requests go to."""
        return self._host

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        config = self._config
        try:
            response = await self._sdk.embed(
                model=self.model,
                input=texts,
                truncate=config.truncate,
                options=config.options,
                keep_alive=config.keep_alive,
                dimensions=config.dimensions,
            )
        except ollama.ResponseError as exc:
            if exc.status_code == 404 and "not found" in str(exc.error):
                raise OllamaModelNotFoundError(self.model, host=self._host, server_error=str(exc.error)) from exc
            raise
        usage = RequestUsage(prompt_tokens=response.prompt_eval_count or 0)
        vectors = [list(vector) for vector in response.embeddings]
        return EmbeddingResult.model_construct(vectors=vectors, usage=usage, model=response.model or self.model)

    async def _close(self) -> None:
        await self._sdk.close()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, host={self._host!r})"
