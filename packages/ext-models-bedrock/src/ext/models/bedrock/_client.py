"""`AnthropicBedrockChatCompletionClient`: Claude on AWS Bedrock through InvokeModel and
InvokeModelWithResponseStream, on aioboto3.

The request body and the reading of responses and stream events are ext-models-anthropic's mapping (one
mapping, two transports); this module adds the Bedrock framing (`anthropic_version`, the model id in the
URL), AWS credentials and the botocore client. botocore's own retries are off: ext-core retries.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import aioboto3
import aiohttp
import botocore.exceptions
from botocore.config import Config
from pydantic import BaseModel, SecretStr

from ext.core import (
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    EventStream,
    ExtError,
    ModelInfo,
    RetryPolicy,
    StreamChunk,
    json_dumps_compact,
    json_loads,
)
from ext.models.anthropic import (
    AnthropicMessagesClient,
    AnthropicSystemPolicy,
    StreamState,
    map_request,
    map_response,
)

from ._config import BedrockClientConfig
from ._eventstream import OPERATION, anthropic_events
from ._retry import classify_bedrock_error

logger = logging.getLogger(__name__)

__all__ = ["BEDROCK_ANTHROPIC_VERSION", "AnthropicBedrockChatCompletionClient"]

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
"""The `anthropic_version` of every InvokeModel body for Anthropic models."""

_CONTENT_TYPE = "application/json"


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class AnthropicBedrockChatCompletionClient(AnthropicMessagesClient):
    """A chat client for Anthropic models on AWS Bedrock (InvokeModel with the Anthropic Messages body).

    Credentials: `aws_access_key` + `aws_secret_key` (+ `aws_session_token`), or `aws_profile`, or the
    standard AWS chain (environment variables, shared credentials and config files, container and instance
    roles), or a ready `session` (an `aioboto3.Session`, e.g. with an assumed role). Requests are SigV4-signed
    by botocore. See the package README for every option.
    """

    provider_name = "bedrock"
    component_config_schema: ClassVar[type[BaseModel]] = BedrockClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.bedrock.AnthropicBedrockChatCompletionClient"
    _config: BedrockClientConfig
    _count_tokens_api = "CountTokens"
    _count_tokens_errors = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, aiohttp.ClientError)

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int,
        aws_region: str | None = None,
        aws_access_key: str | SecretStr | None = None,
        aws_secret_key: str | SecretStr | None = None,
        aws_session_token: str | SecretStr | None = None,
        aws_profile: str | None = None,
        endpoint_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_pool_connections: int = 10,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        stop_sequences: Sequence[str] | None = None,
        thinking: Mapping[str, Any] | None = None,
        system_policy: AnthropicSystemPolicy = "leading_then_user",
        extra_body: Mapping[str, Any] | None = None,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        session: aioboto3.Session | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = self._config_from(BedrockClientConfig, locals())
        if config.extra_body and "anthropic_version" in config.extra_body:
            raise ConfigurationError(f"{owner}: extra_body must not set anthropic_version")
        session_given = session is not None
        if session is not None:
            if config.aws_access_key is not None or config.aws_profile is not None:
                raise ConfigurationError(
                    f"{owner}: pass either session or aws_access_key/aws_secret_key/aws_profile, not both"
                )
            if not isinstance(session, aioboto3.Session):
                raise ConfigurationError(f"{owner}: session must be an aioboto3.Session, got {type(session).__name__}")
        else:
            try:
                session = aioboto3.Session(
                    aws_access_key_id=_secret(config.aws_access_key),
                    aws_secret_access_key=_secret(config.aws_secret_key),
                    aws_session_token=_secret(config.aws_session_token),
                    region_name=config.aws_region,
                    profile_name=config.aws_profile,
                )
            except botocore.exceptions.ProfileNotFound:
                raise ConfigurationError(
                    f"{owner}: aws_profile {config.aws_profile!r} is not in the AWS config or credentials files"
                ) from None
        # AWS_REGION is what the other AWS SDKs (and Lambda, ECS) set; botocore reads only AWS_DEFAULT_REGION.
        # A session the caller built keeps its own region.
        if session_given:
            region = config.aws_region or session.region_name or os.environ.get("AWS_REGION")
        else:
            region = config.aws_region or os.environ.get("AWS_REGION") or session.region_name
        if not region:
            raise ConfigurationError(
                f"{owner}: no AWS region: pass aws_region=... or set AWS_REGION (or AWS_DEFAULT_REGION), or a "
                "region in the AWS config profile"
            )
        self._setup(config, retry_policy=retry_policy, classifier=classify_bedrock_error)
        self._session = session
        self._session_given = session_given
        self._region = region
        self._botocore_config = Config(
            region_name=region,
            connect_timeout=config.timeout,
            read_timeout=config.timeout,
            retries={"total_max_attempts": 1, "mode": "legacy"},
            max_pool_connections=config.max_pool_connections,
        )
        self._client: Any = None
        self._client_cm: Any = None
        self._client_lock: asyncio.Lock | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        # Each stream's HTTP response, keyed by the event stream botocore returned for it (see _runtime).
        self._stream_responses: weakref.WeakKeyDictionary[Any, aiohttp.ClientResponse] = weakref.WeakKeyDictionary()

    @property
    def region(self) -> str:
        return self._region

    async def _runtime(self) -> Any:
        """The bedrock-runtime client, made on first use (aiobotocore binds it to the running loop)."""
        if self._client is not None:
            if self._client_loop is not asyncio.get_running_loop():
                raise ExtError(
                    f"{type(self).__name__} was first used on another event loop, and aiobotocore binds its "
                    "connections to that loop: make one client per event loop (e.g. per asyncio.run)"
                )
            return self._client
        if self._client_lock is None:
            self._client_lock = asyncio.Lock()
        async with self._client_lock:
            if self._client is None:
                credentials = await self._session.get_credentials()
                if credentials is None:
                    raise ConfigurationError(
                        f"{type(self).__name__}: no AWS credentials: pass aws_access_key and aws_secret_key, "
                        "aws_profile or session, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile "
                        "in the AWS credentials file)"
                    )
                cm = self._session.client(
                    "bedrock-runtime", endpoint_url=self._config.endpoint_url, config=self._botocore_config
                )
                client = await cm.__aenter__()
                # botocore's documented `after-call` event hands over the HTTP response (its public `raw`:
                # aiobotocore's aiohttp response) next to the parsed result, so a stream's body can be decoded
                # here (`_eventstream`) without reaching into the event stream's private attributes.
                service = client.meta.service_model.service_id.hyphenize()
                client.meta.events.register(f"after-call.{service}.{OPERATION}", self._keep_stream_response)
                self._client = client
                self._client_cm = cm
                self._client_loop = asyncio.get_running_loop()
        return self._client

    def _keep_stream_response(self, http_response: Any, parsed: Mapping[str, Any], **_: Any) -> None:
        events, raw = parsed.get("body"), getattr(http_response, "raw", None)
        if events is not None and isinstance(raw, aiohttp.ClientResponse):
            self._stream_responses[events] = raw

    # --- the provider's part ---------------------------------------------------------------------

    def _check_request(self, request: ChatRequest) -> None:
        super()._check_request(request)
        if "anthropic_version" in request.extra:
            raise ConfigurationError("extra_create_args must not set anthropic_version")

    def _body(self, request: ChatRequest) -> bytes:
        body = map_request(request, self.info_for(request.model), self._wire)
        body["anthropic_version"] = BEDROCK_ANTHROPIC_VERSION
        return json_dumps_compact(body)

    async def _create(self, request: ChatRequest) -> CreateResult:
        body = self._body(request)
        runtime = self._client
        if runtime is None or self._client_loop is not asyncio.get_running_loop():
            runtime = await self._runtime()
        response = await runtime.invoke_model(
            modelId=request.model, body=body, contentType=_CONTENT_TYPE, accept=_CONTENT_TYPE
        )
        stream = response["body"]
        try:
            raw = await stream.read()
        except BaseException:
            # A body read in full has already gone back to the pool; one cut short (error, cancel) is closed.
            stream.close()
            raise
        return map_response(json_loads(raw))

    async def _open_events(self, request: ChatRequest) -> EventStream:
        body = self._body(request)
        runtime = await self._runtime()
        response = await runtime.invoke_model_with_response_stream(
            modelId=request.model, body=body, contentType=_CONTENT_TYPE, accept=_CONTENT_TYPE
        )
        events = response["body"]
        endpoint = str(runtime.meta.endpoint_url)
        state = StreamState()

        def translate(exc: Exception) -> BaseException | None:
            # aiohttp's error for a body cut short; botocore's own type for everything else.
            if isinstance(exc, aiohttp.ClientError):
                closed: BaseException = botocore.exceptions.ConnectionClosedError(endpoint_url=endpoint, error=exc)
                return closed
            return None

        # The body's messages decoded here (`_eventstream`) from the aiohttp response botocore's after-call event
        # gave us; with another HTTP backend, through botocore's own (slower) event stream.
        raw = self._stream_responses.pop(events, None)
        if raw is not None:
            decoded = anthropic_events(raw.content, endpoint)

            async def close() -> None:
                # Closing before the end closes the connection, so the server sees the client go away.
                try:
                    await decoded.aclose()
                finally:
                    events.close()

            return EventStream(decoded, state.handle, state.result, close, translate)

        on_payload = state.handle
        loads = json_loads

        def on_event(event: Any) -> StreamChunk | None:
            chunk = event.get("chunk")
            return None if chunk is None else on_payload(loads(chunk["bytes"]))

        async def close_events() -> None:
            events.close()

        return EventStream(events.__aiter__(), on_event, state.result, close_events, translate)

    async def _close(self) -> None:
        cm, self._client_cm, self._client = self._client_cm, None, None
        if cm is not None:
            await cm.__aexit__(None, None, None)

    # --- tokens ----------------------------------------------------------------------------------

    async def _count_tokens(self, request: ChatRequest) -> int:
        # The CountTokens API with the InvokeModel body the request would send.
        body = self._body(request)
        runtime = await self._runtime()
        counted = await runtime.count_tokens(modelId=request.model, input={"invokeModel": {"body": body}})
        return int(counted["inputTokens"])

    # --- components ------------------------------------------------------------------------------

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if self._session_given:
            settings["session"] = "an aioboto3.Session object (a config holds aws_region and aws_profile)"
        return settings

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, region={self._region!r})"
