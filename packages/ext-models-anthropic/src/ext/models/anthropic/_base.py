"""What every client of the Anthropic Messages body shares, whatever carries it (the Anthropic API here,
AWS Bedrock in ext-models-bedrock): the model table, the config-driven setup, the wire settings and the
request checks. Free of the anthropic SDK, like the mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ext.core import BaseChatCompletionClient, ChatOptions, ChatRequest, ExtError, RetryDecision, RetryPolicy

from ._mapping import ANTHROPIC_MODELS, AnthropicWireSettings, check_extra_args, check_options

if TYPE_CHECKING:
    from ._config import AnthropicMessagesConfig


class AnthropicMessagesClient(BaseChatCompletionClient):
    """Base of the Anthropic and Bedrock clients. A subclass validates its config (an
    `AnthropicMessagesConfig`), calls `_setup` in place of `BaseChatCompletionClient.__init__`, and
    implements the transport (`_create`, `_stream`, `_close`, token counting)."""

    model_table = ANTHROPIC_MODELS
    _config: AnthropicMessagesConfig
    _wire: AnthropicWireSettings

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

    def _to_config(self) -> BaseModel:
        return self._config
