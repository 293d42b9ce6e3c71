"""What every client of the Anthropic Messages body shares, whatever carries it (the Anthropic API here,
AWS Bedrock in ext-models-bedrock): the model table, the config-driven setup, the wire settings and the
request checks. Free of the anthropic SDK, like the mapping."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ext.core import (
    BaseChatCompletionClient,
    CancellationToken,
    CancelScope,
    ChatOptions,
    ChatRequest,
    ExtError,
    LLMMessage,
    RetryDecision,
    RetryPolicy,
    Tool,
    ToolSchema,
    config_from_arguments,
    estimate_tokens,
)

from ._mapping import ANTHROPIC_MODELS, AnthropicWireSettings, check_extra_args, check_options

if TYPE_CHECKING:
    from ._config import AnthropicMessagesConfig

ConfigT = TypeVar("ConfigT", bound="AnthropicMessagesConfig")


class AnthropicMessagesClient(BaseChatCompletionClient):
    """Base of the Anthropic and Bedrock clients. A subclass validates its config (an
    `AnthropicMessagesConfig`), calls `_setup` in place of `BaseChatCompletionClient.__init__`, and
    implements the transport (`_create`, `_open_events`, `_close`, `_count_tokens`)."""

    model_table = ANTHROPIC_MODELS
    _config: AnthropicMessagesConfig
    _wire: AnthropicWireSettings
    _count_tokens_api: ClassVar[str] = "count_tokens"
    """The counting call's name, for the warning when it fails."""
    _count_tokens_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """The transport's errors on which `count_tokens_async` falls back to the estimate."""

    def _config_from(self, config_cls: type[ConfigT], arguments: Mapping[str, Any]) -> ConfigT:
        """The constructor's arguments (its `locals()`) validated as `config_cls`; a lone string
        `stop_sequences` is one stop sequence."""
        stop_sequences = arguments.get("stop_sequences")
        if isinstance(stop_sequences, str):
            arguments = {**arguments, "stop_sequences": [stop_sequences]}
        return config_from_arguments(config_cls, arguments, type(self).__name__)

    def _setup(
        self,
        config: AnthropicMessagesConfig,
        *,
        retry_policy: RetryPolicy | None,
        classifier: Callable[[BaseException], RetryDecision | None],
    ) -> None:
        if config.extra_body:
            check_extra_args(config.extra_body, config.max_tokens)
        BaseChatCompletionClient.__init__(
            self,
            model=config.model,
            model_info=config.model_info,
            token_limit=config.token_limit,
            default_options=config.default_chat_options(),
            max_retries=config.max_retries,
            retry_policy=retry_policy,
        )
        self._retry = self._retry.with_classifiers([classifier])
        self._config = config
        self._wire = AnthropicWireSettings(
            max_tokens=config.max_tokens,
            thinking=config.thinking,
            system_policy=config.system_policy,
            extra_body=config.extra_body,
        )
        # The options of a call without options: checked here, once; if they do not pass, every call checks
        # them (and raises as before).
        defaults = self._default_options or self._no_options
        self._checked_options: ChatOptions | None = None
        try:
            check_options(ChatRequest(messages=[], model=config.model, options=defaults), self._wire)
        except ExtError:
            pass
        else:
            self._checked_options = defaults

    @property
    def max_tokens(self) -> int:
        return self._config.max_tokens

    def _check_request(self, request: ChatRequest) -> None:
        # A call with no options, tools or extra arguments has the client's defaults, checked once.
        if request.options is self._checked_options and not request.tools and not request.extra:
            return
        check_options(request, self._wire)

    # --- tokens ----------------------------------------------------------------------------------

    async def _count_tokens(self, request: ChatRequest) -> int:
        """The transport's token count for a validated request; raises one of `_count_tokens_errors`."""
        raise NotImplementedError

    async def count_tokens_async(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        cancellation_token: CancellationToken | None = None,
    ) -> int:
        """Prompt tokens as the provider counts them (see the subclass). Arguments are validated first
        (ConfigurationError). If the call fails, returns `ext.core.estimate_tokens` and logs a warning. The
        sync `count_tokens` always returns that estimate: it cannot wait for the network."""
        request = self.build_request(messages, cancellation_token, tools=tools)
        try:
            with CancelScope(cancellation_token):
                return await self._count_tokens(request)
        except self._count_tokens_errors as exc:
            logging.getLogger(type(self).__module__).warning(
                "%s failed (%s); using the estimate", self._count_tokens_api, type(exc).__name__
            )
            return estimate_tokens(request.messages, request.tools)
