"""`OpenAIChatCompletionClient` and `AzureOpenAIChatCompletionClient` on the openai SDK.

ext-core's base does validation, options merging, retries, cancellation and output parsing; this
module builds the SDK client from the configuration and runs one request. The SDK's own retries are
off (`max_retries=0`): core retries with backoff and Retry-After, so a retry is never doubled.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError

from ext.core import (
    BaseChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    LLMMessage,
    ModelInfo,
    PromptToolPlan,
    RetryPolicy,
    StreamChunk,
    Tool,
    ToolCalling,
    ToolSchema,
    UnsupportedOptionError,
    config_from_arguments,
    estimate_tokens,
    merge_default_options,
    plan_prompt_tools,
    prompt_tool_stream,
    resolve_tool_calling,
    tool_schema_of,
)

from ._config import AnyConfig, AzureOpenAIClientConfig, OpenAIClientConfig, ReasoningEffort, _CommonConfig
from ._connection import SdkOwner, TokenProvider, azure_config, azure_sdk, openai_sdk
from ._mapping import StreamState, WireSettings, map_request, map_response, map_stream_chunk, split_extra_args
from ._models import OPENAI_MODELS, SystemRole, is_openai_reasoning, system_role_for
from ._retry import classify_openai_error
from ._tokens import Encoder, count_message_tokens, encoding_name_for_model, load_encoding

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

__all__ = ["AzureOpenAIChatCompletionClient", "BaseOpenAIChatCompletionClient", "OpenAIChatCompletionClient"]

_OPENAI_HOST = "api.openai.com"
_NEUTRAL_SAMPLING = (("temperature", 1.0), ("top_p", 1.0), ("frequency_penalty", 0.0), ("presence_penalty", 0.0))
_messages_adapter: TypeAdapter[list[LLMMessage]] | None = None


def _coerce_messages(messages: Sequence[LLMMessage]) -> list[LLMMessage]:
    # Built on first use: a TypeAdapter over the message union costs tens of ms at import.
    global _messages_adapter
    if not isinstance(messages, (list, tuple)):
        raise ConfigurationError(f"messages must be a list of messages, got {type(messages).__name__}")
    if _messages_adapter is None:
        _messages_adapter = TypeAdapter(list[LLMMessage])
    try:
        return _messages_adapter.validate_python(list(messages))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"messages[{loc}] is invalid: {first['msg']}") from None


_UNSET: Any = object()


def _default_options(config: _CommonConfig) -> ChatOptions | None:
    """`default_options` with the client's own option fields laid over them."""
    fields = {
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
        "frequency_penalty": config.frequency_penalty,
        "presence_penalty": config.presence_penalty,
        "seed": config.seed,
        "stop_sequences": config.stop,
    }
    return merge_default_options(config.default_options, **fields)


class BaseOpenAIChatCompletionClient(SdkOwner, BaseChatCompletionClient):
    """What the OpenAI and Azure OpenAI clients share: request mapping, streaming, token counting."""

    provider_name = "openai"
    model_table = OPENAI_MODELS

    _config: AnyConfig

    def _setup(
        self,
        config: AnyConfig,
        model: str,
        sdk: openai.AsyncOpenAI,
        *,
        owns_http_client: bool,
        retry_policy: RetryPolicy | None,
        compatible_server: bool = False,
    ) -> None:
        self._config = config
        self._compatible_server = compatible_server
        model_info = config.model_info
        if config.tool_calling == "native":  # asked for the API's tools: the model is taken to have them
            model_info = {**(model_info or {}), "function_calling": True}
        super().__init__(
            model=model,
            model_info=model_info,
            token_limit=config.token_limit,
            default_options=_default_options(config),
            max_retries=config.max_retries,
            retry_policy=retry_policy,
        )
        self._retry = self._retry.with_classifiers([classify_openai_error])
        self._sdk = sdk
        self._completions = sdk.chat.completions
        self._owns_http_client = owns_http_client
        self._wire = WireSettings(
            system_role=config.system_role,
            include_usage=config.include_usage,
            user=config.user,
            reasoning_effort=config.reasoning_effort,
            parallel_tool_calls=config.parallel_tool_calls,
            extra_body=config.extra_body,
        )
        self._encoder: Encoder | None = _UNSET

    # --- the provider's part ---------------------------------------------------------------------

    def _check_request(self, request: ChatRequest) -> None:
        options = request.options
        if options.top_k is not None:
            raise UnsupportedOptionError(
                "top_k is not supported by the OpenAI Chat Completions API; for an OpenAI-compatible server "
                "that takes it, pass extra_create_args={'top_k': ...} (sent in the request body)"
            )
        info = self.info_for(request.model)
        if is_openai_reasoning(info):
            for name, neutral in _NEUTRAL_SAMPLING:
                value = getattr(options, name)
                if value is not None and value != neutral:
                    raise UnsupportedOptionError(
                        f"{name}={value} is not supported by reasoning model {request.model!r} (o-series and "
                        f"gpt-5 models accept only the default); leave it unset, or pass "
                        f"model_info={{'reasoning': False}} if this model takes it"
                    )
        if request.extra:
            split_extra_args(request.extra)

    def _tool_calling_for(self, model: str, info: ModelInfo) -> ToolCalling:
        return resolve_tool_calling(
            self._config.tool_calling, native_tools=info.function_calling, local=self._compatible_server
        )

    def _plan(self, request: ChatRequest, info: ModelInfo) -> PromptToolPlan | None:
        mode = self._tool_calling_for(request.model, info)
        return None if mode == "native" else plan_prompt_tools(request, mode)

    async def _create(self, request: ChatRequest) -> CreateResult:
        info = self.info_for(request.model)
        plan = self._plan(request, info)
        kwargs = map_request(request, info, self._wire, plan=plan)
        completion = await self._completions.create(**kwargs)
        result = map_response(completion)
        return result if plan is None else plan.read(result)

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        info = self.info_for(request.model)
        plan = self._plan(request, info)
        if plan is not None and plan.tools:
            async for whole in prompt_tool_stream(lambda: self._create(request)):
                yield whole
            return
        kwargs = map_request(request, info, self._wire, stream=True, plan=plan)
        stream = await self._completions.create(**kwargs)
        state = StreamState()
        try:
            # The SDK stream's own __anext__: one generator layer fewer than `async for`.
            next_chunk = stream.__anext__
            while True:
                try:
                    chunk = await next_chunk()
                except StopAsyncIteration:
                    break
                item = map_stream_chunk(chunk, state)
                if item is not None:
                    yield item
            yield state.result()
        finally:
            # Closing the response before its end closes the connection, so the server sees the
            # client go away (cancellation, or a consumer that stops early).
            await stream.close()

    # --- tokens ----------------------------------------------------------------------------------

    def _get_encoder(self) -> Encoder | None:
        if self._encoder is _UNSET:
            config = self._config
            name = encoding_name_for_model(self.model)
            try:
                self._encoder = load_encoding(
                    name,
                    cache_dir=config.tiktoken_cache_dir,
                    bundled=config.bundled_encodings,
                    allow_download=config.allow_encoding_download,
                )
            except Exception:  # a broken file or tiktoken build must not break counting
                logger.warning("could not load the %s encoding", name, exc_info=True)
                self._encoder = None
            if self._encoder is None:
                logger.info(
                    "no %s tiktoken file found (TIKTOKEN_CACHE_DIR, tiktoken_cache_dir or the bpe-openai wheel); "
                    "count_tokens uses ext.core.estimate_tokens",
                    name,
                )
        return self._encoder

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """Prompt tokens with tiktoken as OpenAI counts chat messages and function definitions.

        Never touches the network unless `allow_encoding_download=True`; without an encoding file it
        returns `ext.core.estimate_tokens` (documented in the README)."""
        msgs = _coerce_messages(messages)
        schemas = [tool_schema_of(t) for t in tools]
        encoder = self._get_encoder()
        if encoder is None:
            return estimate_tokens(msgs, schemas)
        role = system_role_for(self.model_info, self._config.system_role)
        return count_message_tokens(encoder, msgs, schemas, system_role=role)


class OpenAIChatCompletionClient(BaseOpenAIChatCompletionClient):
    """A chat client for OpenAI and any OpenAI-compatible server (`base_url`).

    The key comes from `api_key` or the environment variable named by `api_key_env` (OPENAI_API_KEY);
    the organization from `organization` or OPENAI_ORG_ID. See the package README for every option.
    """

    component_config_schema: ClassVar[type[BaseModel]] = OpenAIClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.openai.OpenAIChatCompletionClient"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        organization: str | None = None,
        project: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        user: str | None = None,
        reasoning_effort: ReasoningEffort | None = None,
        parallel_tool_calls: bool | None = None,
        tool_calling: ToolCalling | None = None,
        include_usage: bool = True,
        system_role: SystemRole = "auto",
        default_headers: Mapping[str, str | SecretStr] | None = None,
        default_headers_env: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        tiktoken_cache_dir: str | os.PathLike[str] | None = None,
        bundled_encodings: bool = True,
        allow_encoding_download: bool = False,
        http_client: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        config = config_from_arguments(OpenAIClientConfig, locals(), type(self).__name__)
        sdk = openai_sdk(
            config,
            http_client,
            type(self).__name__,
            default_headers=config.default_headers,
            default_headers_env=config.default_headers_env,
        )
        # Any base URL but OpenAI's own is an OpenAI-compatible server (the tool-calling default depends on it).
        compatible = sdk.base_url.host != _OPENAI_HOST
        self._setup(
            config,
            config.model,
            sdk,
            owns_http_client=http_client is None,
            retry_policy=retry_policy,
            compatible_server=compatible,
        )

    @property
    def base_url(self) -> str:
        """Where requests go (the SDK's base URL)."""
        return str(self._sdk.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"


class AzureOpenAIChatCompletionClient(BaseOpenAIChatCompletionClient):
    """A chat client for an Azure OpenAI deployment.

    Requests go to `{azure_endpoint}/openai/deployments/{azure_deployment}/chat/completions?api-version=...`.
    Authenticate with one of `api_key` (sent as the `api-key` header), `azure_ad_token` or
    `azure_ad_token_provider` (sent as `Authorization: Bearer`); without any, the key is read from
    AZURE_OPENAI_API_KEY, then a token from AZURE_OPENAI_AD_TOKEN.
    """

    component_config_schema: ClassVar[type[BaseModel]] = AzureOpenAIClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.openai.AzureOpenAIChatCompletionClient"

    _config: AzureOpenAIClientConfig

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
        timeout: float = 60.0,
        max_retries: int = 3,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        user: str | None = None,
        reasoning_effort: ReasoningEffort | None = None,
        parallel_tool_calls: bool | None = None,
        tool_calling: ToolCalling | None = None,
        include_usage: bool = True,
        system_role: SystemRole = "auto",
        default_headers: Mapping[str, str | SecretStr] | None = None,
        default_headers_env: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        tiktoken_cache_dir: str | os.PathLike[str] | None = None,
        bundled_encodings: bool = True,
        allow_encoding_download: bool = False,
        http_client: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = azure_config(AzureOpenAIClientConfig, locals(), owner)
        sdk, self._auth = azure_sdk(
            config,
            azure_ad_token_provider,
            http_client,
            owner,
            default_headers=config.default_headers,
            default_headers_env=config.default_headers_env,
        )
        self._setup(
            config,
            config.model or config.azure_deployment,
            sdk,
            owns_http_client=http_client is None,
            retry_policy=retry_policy,
        )
        self._has_token_provider = azure_ad_token_provider is not None

    @property
    def azure_deployment(self) -> str:
        return self._config.azure_deployment

    @property
    def api_version(self) -> str:
        return self._config.api_version

    @property
    def auth_method(self) -> str:
        """How requests authenticate: `api_key`, `azure_ad_token` or `azure_ad_token_provider`."""
        return self._auth

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(azure_deployment={self.azure_deployment!r}, model={self.model!r}, "
            f"api_version={self.api_version!r})"
        )
