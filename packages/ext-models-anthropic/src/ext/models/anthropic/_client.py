"""`AnthropicChatCompletionClient` on the anthropic SDK.

ext-core's base does validation, options merging, retries, cancellation and output parsing; this module
builds the SDK client from the configuration and runs one request. The SDK's own retries are off
(`max_retries=0`): core retries with backoff and Retry-After, so a retry is never doubled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import anthropic
import httpx2
from pydantic import BaseModel, SecretStr

from ext.core import (
    ChatOptions,
    ChatRequest,
    CreateResult,
    EventStream,
    ModelInfo,
    RetryPolicy,
    json_loads,
    require_secret,
    resolve_secret_map,
)

from ._base import AnthropicMessagesClient
from ._config import AnthropicClientConfig, AnthropicSystemPolicy
from ._mapping import StreamState, map_request, map_response
from ._retry import classify_anthropic_error
from ._sse import sse_json_events

logger = logging.getLogger(__name__)

__all__ = ["AnthropicChatCompletionClient"]

_COUNT_KEYS = ("system", "tools", "tool_choice", "thinking", "output_config")


class AnthropicChatCompletionClient(AnthropicMessagesClient):
    """A chat client for Anthropic's Messages API (Claude models).

    The key comes from `api_key` or the environment variable named by `api_key_env` (ANTHROPIC_API_KEY);
    a missing key is a `ConfigurationError` here, not a `TypeError` at the first request. `temperature`,
    `top_p` and `top_k` are sent in the request body (the SDK 2.x signature no longer has them). See the
    package README for every option and for the mapping rules.
    """

    provider_name = "anthropic"
    component_config_schema: ClassVar[type[BaseModel]] = AnthropicClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.anthropic.AnthropicChatCompletionClient"
    _config: AnthropicClientConfig
    _count_tokens_api = "count_tokens endpoint"
    _count_tokens_errors = (anthropic.AnthropicError,)

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        stop_sequences: Sequence[str] | None = None,
        thinking: Mapping[str, Any] | None = None,
        system_policy: AnthropicSystemPolicy = "leading_then_user",
        default_headers: Mapping[str, str | SecretStr] | None = None,
        default_headers_env: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = self._config_from(AnthropicClientConfig, locals())
        key = require_secret(
            config.api_key, config.api_key_env, owner, hint=" (a local server that needs no key takes any placeholder)"
        )
        self._setup(config, retry_policy=retry_policy, classifier=classify_anthropic_error)
        headers = resolve_secret_map(config.default_headers, config.default_headers_env, "default_headers") or None
        self._sdk = anthropic.AsyncAnthropic(
            api_key=key.get_secret_value(),
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=0,
            default_headers=headers,
            http_client=http_client,
        )
        self._messages = self._sdk.messages
        self._raw_messages = self._sdk.messages.with_raw_response
        self._owns_http_client = http_client is None

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if not self._owns_http_client:
            settings["http_client"] = "an HTTP client object"
        return settings

    @property
    def base_url(self) -> str:
        """Where requests go (the SDK's base URL)."""
        return str(self._sdk.base_url)

    # --- the provider's part ---------------------------------------------------------------------

    def _body(self, request: ChatRequest) -> tuple[int, Any, dict[str, Any]]:
        body = map_request(request, self.info_for(request.model), self._wire)
        # Only what the SDK requires goes as keywords; the rest (sampling included, which SDK 2.x dropped from
        # its signature) goes as `extra_body`, which the SDK merges into the same JSON body.
        return body.pop("max_tokens"), body.pop("messages"), body

    async def _create(self, request: ChatRequest) -> CreateResult:
        max_tokens, messages, rest = self._body(request)
        # The SDK sends the request and raises for HTTP errors; the reply's JSON is read as it is, without the
        # SDK's response models (the mapping reads dicts and SDK objects alike).
        response = await self._raw_messages.create(
            model=request.model, max_tokens=max_tokens, messages=messages, extra_body=rest
        )
        return map_response(json_loads(response.http_response.content))

    async def _open_events(self, request: ChatRequest) -> EventStream:
        max_tokens, messages, rest = self._body(request)
        stream = await self._messages.create(
            model=request.model, max_tokens=max_tokens, messages=messages, stream=True, extra_body=rest
        )
        state = StreamState()

        def translate(exc: Exception) -> BaseException | None:
            # A connection that breaks mid-body surfaces from the SDK as the transport's error; callers catch
            # the SDK's own connection error everywhere else.
            if isinstance(exc, httpx2.TransportError):
                return anthropic.APIConnectionError(
                    message=f"the response stream broke off: {type(exc).__name__}", request=response.request
                )
            return None

        # The SDK sent the request and checked the status; the body's events are read as JSON (`sse_json_events`),
        # without the SDK's per-event models.
        response = stream.response
        events = sse_json_events(response)

        async def close() -> None:
            # Closing the response before its end closes the connection, so the server sees the client go away
            # (cancellation, or a consumer that stops early).
            try:
                await events.aclose()
            finally:
                await response.aclose()

        return EventStream(events, state.handle, state.result, close, translate)

    async def _close(self) -> None:
        if self._owns_http_client:
            await self._sdk.close()

    # --- tokens ----------------------------------------------------------------------------------

    async def _count_tokens(self, request: ChatRequest) -> int:
        # `POST /v1/messages/count_tokens`: system prompt, messages, images, tools and thinking settings.
        body = map_request(request, self.info_for(request.model), self._wire)
        extra = {key: body[key] for key in _COUNT_KEYS if key in body}
        counted = await self._messages.count_tokens(model=request.model, messages=body["messages"], extra_body=extra)
        return int(counted.input_tokens)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
