"""`AzureAIChatCompletionClient` on azure-ai-inference's async `ChatCompletionsClient`.

ext-core's base does validation, options merging, retries, cancellation and output parsing; this module builds
the SDK client from the configuration and runs one request through it: the body `complete()` would send, to the
route and `api-version` it uses, through the client's `send_request` (its pipeline: credential policy, timeouts,
logging, transport), raising for an error status what `complete()` raises. Replies are read as JSON, skipping
the SDK's per-reply and per-event model objects. The SDK's own retries are off (`retry_total=0`): core retries
with backoff and Retry-After, so a retry is never doubled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ResourceNotModifiedError,
    map_error,
)
from azure.core.rest import HttpRequest
from pydantic import BaseModel, SecretStr

from ext.core import (
    BaseChatCompletionClient,
    ChatOptions,
    ChatRequest,
    CreateResult,
    EventStream,
    ModelInfo,
    RetryPolicy,
    StreamChunk,
    UnsupportedOptionError,
    config_from_arguments,
    json_dumps_compact,
    json_loads,
    merge_default_options,
    sse_events,
)

from ._config import AzureAIClientConfig
from ._credential import Credential, call_options, sdk_credential, sdk_options, split_credential
from ._mapping import StreamState, WireSettings, map_request, map_response, map_stream_update, split_extra_args
from ._models import AZURE_AI_MODELS
from ._retry import classify_azure_error

logger = logging.getLogger(__name__)

__all__ = ["SDK_DEFAULT_API_VERSION", "AzureAIChatCompletionClient", "Credential"]

# What `complete()` raises for these statuses (azure-ai-inference 1.0.0b9); other errors: HttpResponseError.
_ERROR_MAP: dict[int, type[HttpResponseError]] = {
    401: ClientAuthenticationError,
    404: ResourceNotFoundError,
    409: ResourceExistsError,
    304: ResourceNotModifiedError,
}

SDK_DEFAULT_API_VERSION = "2024-05-01-preview"
"""The `api-version` azure-ai-inference 1.0.0b9's `complete()` sends when none is given (a test checks it)."""
_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
_PASS_THROUGH_HEADERS = {**_JSON_HEADERS, "extra-parameters": "pass-through"}
_DONE = b"[DONE]"


def _default_options(config: AzureAIClientConfig) -> ChatOptions | None:
    return merge_default_options(
        config.default_options,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        frequency_penalty=config.frequency_penalty,
        presence_penalty=config.presence_penalty,
        seed=config.seed,
        stop_sequences=config.stop,
    )


class AzureAIChatCompletionClient(BaseChatCompletionClient):
    """A chat client for models deployed on Azure AI Foundry (the Azure AI Model Inference API).

    `credential` is a key (a string, `SecretStr` or `azure.core.credentials.AzureKeyCredential`; the SDK sends
    it as both `api-key` and `Authorization: Bearer`) or an async token credential (anything with an async
    `get_token`, e.g. `azure.identity.aio.DefaultAzureCredential`). Without one, the key is read from the
    environment variable named by `api_key_env` (AZURE_AI_API_KEY). See the package README for every option.
    """

    provider_name = "azure_ai"
    model_table = AZURE_AI_MODELS
    component_config_schema: ClassVar[type[BaseModel]] = AzureAIClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.azure_ai.AzureAIChatCompletionClient"
    _config: AzureAIClientConfig

    def __init__(
        self,
        *,
        endpoint: str,
        model: str,
        credential: Credential | None = None,
        api_key_env: str | None = "AZURE_AI_API_KEY",
        api_version: str | None = None,
        credential_scopes: Sequence[str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        model_extras: Mapping[str, Any] | None = None,
        include_usage: bool = True,
        think_tags: bool = True,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
        api_key: str | SecretStr | None = None,
    ) -> None:
        owner = type(self).__name__
        credential, api_key, is_token = split_credential(credential, api_key, owner)
        self._auth = "token_credential" if is_token else "api_key"
        config = config_from_arguments(AzureAIClientConfig, locals(), owner)
        sdk_auth = sdk_credential(credential, config.api_key, config.api_key_env, owner)

        super().__init__(
            model=config.model,
            model_info=config.model_info,
            token_limit=config.token_limit,
            default_options=_default_options(config),
            max_retries=config.max_retries,
            retry_policy=retry_policy,
        )
        self._retry = self._retry.with_classifiers([classify_azure_error])
        self._config = config
        self._wire = WireSettings(
            include_usage=config.include_usage, think_tags=config.think_tags, model_extras=config.model_extras
        )

        from azure.ai.inference.aio import ChatCompletionsClient

        options = sdk_options(config.timeout, config.api_version)
        if config.credential_scopes is not None:
            options["credential_scopes"] = list(config.credential_scopes)
        self._sdk = ChatCompletionsClient(config.endpoint, sdk_auth, **options)
        # The SDK's own route and parameters: `complete()` posts to {endpoint}/chat/completions?api-version=...
        self._chat_url = config.endpoint + "/chat/completions"
        self._params = {"api-version": config.api_version or SDK_DEFAULT_API_VERSION}
        self._call_options = call_options(config.endpoint, is_token)

    # --- the provider's part ---------------------------------------------------------------------

    def _check_request(self, request: ChatRequest) -> None:
        temperature = request.options.temperature
        if temperature is not None and temperature > 1:
            # The service's range (azure-ai-inference's `complete` docstring: "Supported range is [0, 1]"); above
            # it the service answers 422 after a round trip.
            raise UnsupportedOptionError(
                f"temperature must be between 0 and 1 for Azure AI Inference, got {temperature}"
            )
        if request.extra:
            split_extra_args(request.extra)

    async def _send(self, body: dict[str, Any], extras: bool, *, stream: bool) -> Any:
        """POST the body through the SDK client's pipeline (auth, headers, timeouts, logging) and raise for an
        error status as `complete()` does; the open response."""
        headers = _PASS_THROUGH_HEADERS if extras else _JSON_HEADERS
        http_request = HttpRequest(
            "POST", self._chat_url, params=self._params, headers=headers, content=json_dumps_compact(body)
        )
        response = await self._sdk.send_request(http_request, stream=stream, **self._call_options)
        if response.status_code != 200:
            if stream:
                await response.read()  # the error body, for the exception's message; closes the connection
            map_error(status_code=response.status_code, response=response, error_map=_ERROR_MAP)
            raise HttpResponseError(response=response)
        return response

    async def _create(self, request: ChatRequest) -> CreateResult:
        body, extras = map_request(request, self.info_for(request.model), self._wire)
        response = await self._send(body, extras, stream=False)
        return map_response(json_loads(response.content), self._wire)

    async def _open_events(self, request: ChatRequest) -> EventStream:
        body, extras = map_request(request, self.info_for(request.model), self._wire, stream=True)
        response = await self._send(body, extras, stream=True)
        state = StreamState(self._wire)
        events = sse_events(response.iter_bytes())

        def handle(event: tuple[bytes | None, bytes]) -> StreamChunk | None:
            data = event[1]
            if data == _DONE:
                state.done = True
                return None
            return map_stream_update(json_loads(data), state)

        def result() -> CreateResult:
            if not state.done and state.finish_reason is None:
                raise ConnectionError(
                    f"the stream from {self._config.endpoint} ended before its last event (no finish_reason, no [DONE])"
                )
            return state.result()

        async def close() -> None:
            # Closing the response before its end closes the connection, so the server sees the client go away.
            await events.aclose()
            await response.close()

        return EventStream(events=events, handle=handle, result=result, close=close)

    async def _close(self) -> None:
        await self._sdk.close()

    # --- public ----------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self._config.endpoint

    @property
    def api_version(self) -> str | None:
        """The API version given; None means the SDK's default (2024-05-01-preview in azure-ai-inference 1.0.0b9)."""
        return self._config.api_version

    @property
    def auth_method(self) -> str:
        """`api_key` (a key or `AzureKeyCredential`) or `token_credential`."""
        return self._auth

    # --- components ------------------------------------------------------------------------------

    def _to_config(self) -> BaseModel:
        # The key never goes into a dump; a loaded client reads it from api_key_env.
        return self._config.model_copy(update={"api_key": None})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(endpoint={self.endpoint!r}, model={self.model!r})"
