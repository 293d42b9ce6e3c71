"""An ext `ChatCompletionClient` as a Semantic Kernel chat completion service.

`ExtChatCompletion(client)` is what `kernel.add_service` takes: any ext client (a provider's, the embedded llama.cpp
model, a whole `ChatClientBuilder` pipeline). The kernel's function choice behaviour (auto, required, none) offers the
kernel's plugins as the call's tools, and the kernel's own loop invokes them. Execution settings map to
`ChatOptions`; a setting ext cannot honour is refused, naming it, before any request.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from ext.core import (
    ChatCompletionClient,
    ChatOptions,
    ConfigurationError,
    CreateResult,
    JsonOutput,
    StreamChunk,
    ToolSchema,
    UnsupportedOptionError,
)
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_call_choice_configuration import FunctionCallChoiceConfiguration
from semantic_kernel.connectors.ai.function_choice_type import FunctionChoiceType
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.contents import ChatHistory, ChatMessageContent, StreamingChatMessageContent, TextContent
from semantic_kernel.contents.streaming_text_content import StreamingTextContent
from semantic_kernel.contents.utils.author_role import AuthorRole

from ._messages import from_chat_history, to_chat_message
from ._settings import CHOICE_OF_TYPE, OPTION_OF_SETTING
from ._tools import function_schema

__all__ = ["ExtChatCompletion", "ExtPromptExecutionSettings"]


class ExtPromptExecutionSettings(PromptExecutionSettings):
    """The execution settings an `ExtChatCompletion` honours. Anything else in a kernel's settings is refused."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    ai_model_id: str | None = None
    response_format: dict[str, Any] | type[BaseModel] | None = Field(
        default=None,
        description='`{"type": "json_object"}` for JSON mode, or a pydantic model class for structured output.',
    )
    extra_create_args: dict[str, Any] | None = Field(
        default=None, description="Passed on as the ext client's `extra_create_args`."
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Set by the kernel's function choice behaviour: the plugins as tool schemas."
    )
    tool_choice: Literal["auto", "required", "none"] | None = Field(
        default=None, description="Set by the kernel's function choice behaviour."
    )


class ExtChatCompletion(ChatCompletionClientBase):
    """An ext `ChatCompletionClient` as a kernel chat completion service: `kernel.add_service(ExtChatCompletion(c))`.

    Function calling follows the kernel's `FunctionChoiceBehavior`: with `Auto()` the kernel sends its plugins as
    tools and invokes what the model calls. Usage is in each reply's `metadata["usage"]`; the ext `CreateResult` is
    its `inner_content`. Closing the ext client stays with its owner.
    """

    SUPPORTS_FUNCTION_CALLING: ClassVar[bool] = True
    client: Any = Field(exclude=True)

    def __init__(
        self, client: ChatCompletionClient, *, service_id: str | None = None, ai_model_id: str | None = None
    ) -> None:
        if not isinstance(client, ChatCompletionClient):
            raise ConfigurationError(f"client must be an ext ChatCompletionClient, got {type(client).__name__}")
        model = ai_model_id or getattr(client, "model", None) or type(client).__name__
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"ai_model_id must be a non-empty string, got {model!r}")
        super().__init__(ai_model_id=model, service_id=service_id or model, client=client)  # type: ignore[call-arg]

    def get_prompt_execution_settings_class(self) -> type[PromptExecutionSettings]:
        return ExtPromptExecutionSettings

    def _update_function_choice_settings_callback(
        self,
    ) -> Callable[[FunctionCallChoiceConfiguration, PromptExecutionSettings, FunctionChoiceType], None]:
        return _offer_functions

    def _reset_function_choice_settings(self, settings: PromptExecutionSettings) -> None:
        if isinstance(settings, ExtPromptExecutionSettings):
            settings.tools = None
            settings.tool_choice = None

    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings
    ) -> list[ChatMessageContent]:
        call = _call_arguments(self._ext_settings(settings))
        result = await self.client.create(from_chat_history(chat_history), **call)
        return [to_chat_message(result, model=self.ai_model_id)]

    async def _inner_get_streaming_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings, function_invoke_attempt: int = 0
    ) -> AsyncGenerator[list[StreamingChatMessageContent], Any]:
        call = _call_arguments(self._ext_settings(settings))
        streamed_text = False
        async for item in self.client.create_stream(from_chat_history(chat_history), **call):
            if isinstance(item, StreamChunk):
                if item.content:
                    streamed_text = True
                    yield [self._chunk(item.content, function_invoke_attempt)]
            elif isinstance(item, CreateResult):
                yield [self._last_chunk(item, streamed_text, function_invoke_attempt)]

    def _ext_settings(self, settings: PromptExecutionSettings) -> ExtPromptExecutionSettings:
        if not isinstance(settings, ExtPromptExecutionSettings):
            settings = self.get_prompt_execution_settings_from_settings(settings)
        assert isinstance(settings, ExtPromptExecutionSettings)  # nosec: the settings class above
        unknown = sorted(k for k in settings.extension_data if k not in ExtPromptExecutionSettings.model_fields)
        if unknown:
            raise UnsupportedOptionError(
                f"execution settings {unknown} cannot be honoured by an ext client; it takes "
                f"{sorted(OPTION_OF_SETTING)}, response_format and extra_create_args"
            )
        return settings

    def _chunk(self, text: str, attempt: int) -> StreamingChatMessageContent:
        return StreamingChatMessageContent(
            role=AuthorRole.ASSISTANT,
            choice_index=0,
            items=[StreamingTextContent(choice_index=0, text=text)],
            ai_model_id=self.ai_model_id,
            function_invoke_attempt=attempt,
        )

    def _last_chunk(self, result: CreateResult, streamed_text: bool, attempt: int) -> StreamingChatMessageContent:
        """The stream's last message: the calls (whole: ext streams text, and gives calls complete at the end),
        the text if none was streamed, the finish reason and the usage."""
        message = to_chat_message(result, model=self.ai_model_id, streamed_text=streamed_text)
        items: list[Any] = [
            StreamingTextContent(choice_index=0, text=item.text) if isinstance(item, TextContent) else item
            for item in message.items
        ]
        return StreamingChatMessageContent(
            role=AuthorRole.ASSISTANT,
            choice_index=0,
            items=items,
            finish_reason=message.finish_reason,
            ai_model_id=self.ai_model_id,
            inner_content=result,
            metadata=message.metadata,
            function_invoke_attempt=attempt,
        )


def _offer_functions(
    configuration: FunctionCallChoiceConfiguration, settings: PromptExecutionSettings, choice: FunctionChoiceType
) -> None:
    """The kernel's function choice, as the call's tools (a plugin whose schema cannot map fails here, before
    any request)."""
    if not isinstance(settings, ExtPromptExecutionSettings) or not configuration.available_functions:
        return
    schemas: list[ToolSchema] = [function_schema(f) for f in configuration.available_functions]
    settings.tools = [dict(s) for s in schemas]
    settings.tool_choice = CHOICE_OF_TYPE[choice]


def _call_arguments(settings: ExtPromptExecutionSettings) -> dict[str, Any]:
    """The settings as the keyword arguments of `create` / `create_stream`."""
    values: dict[str, Any] = {}
    for name, field in OPTION_OF_SETTING.items():
        value = getattr(settings, name)
        if value is not None:
            values[field] = [value] if name == "stop" and isinstance(value, str) else value
    call: dict[str, Any] = {"options": ChatOptions.model_validate(values) if values else None}
    if settings.tools:
        call["tools"] = settings.tools
        call["tool_choice"] = settings.tool_choice or "auto"
    call["json_output"] = _json_output(settings.response_format)
    if settings.extra_create_args:
        call["extra_create_args"] = settings.extra_create_args
    return call


def _json_output(response_format: Mapping[str, Any] | type[BaseModel] | None) -> JsonOutput:
    if response_format is None:
        return None
    if isinstance(response_format, type):
        return response_format
    if response_format.get("type") == "json_object":
        return True
    if response_format.get("type") == "text":
        return None
    raise UnsupportedOptionError(
        f"response_format {dict(response_format)!r} cannot be honoured by an ext client; use "
        '{"type": "json_object"} or a pydantic model class'
    )
