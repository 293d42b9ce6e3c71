"""A Semantic Kernel chat completion service as an ext `ChatCompletionClient`.

`KernelChatCompletionClient(service)` runs ext calls through any kernel connector (its OpenAI connector, Azure,
...). A call's ext tools reach the model in the connector's OpenAI-format `tools` and come back as `FunctionCall`s for
the caller's tool loop. Given a `kernel`, a call without ext tools offers the kernel's plugins instead, and the
kernel invokes them itself (its `FunctionChoiceBehavior`) before the reply comes back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from ext.core import (
    BaseChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    ModelInfo,
    RequestUsage,
    StreamChunk,
    ToolSchema,
    UnsupportedOptionError,
)
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_call_choice_configuration import FunctionCallChoiceConfiguration
from semantic_kernel.connectors.ai.function_calling_utils import update_settings_from_function_call_configuration
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.contents import ChatMessageContent, StreamingChatMessageContent
from semantic_kernel.contents.streaming_text_content import StreamingTextContent
from semantic_kernel.exceptions import ServiceResponseException
from semantic_kernel.functions import KernelFunctionMetadata
from semantic_kernel.functions.kernel_parameter_metadata import KernelParameterMetadata

from ._messages import to_chat_history, to_create_result, usage_of
from ._settings import SETTING_OF_OPTION, TYPE_OF_CHOICE

__all__ = ["KernelChatCompletionClient"]


class KernelChatCompletionClient(BaseChatCompletionClient):
    """A kernel chat completion service as an ext client.

    - `service`: any `ChatCompletionClientBase` (for example `OpenAIChatCompletion(async_client=AsyncOpenAI(...))`).
    - `kernel`: optional; its plugins are offered (and invoked by the kernel) on calls that pass no ext tools,
      with `function_choice_behavior` (default `FunctionChoiceBehavior.Auto()`).
    - `model`: the model name ext reports and looks up capabilities for (default: the service's `ai_model_id`).

    ext tools need a connector whose settings carry OpenAI-format tools (OpenAI, Azure OpenAI); a named
    `tool_choice` is sent as `required` with only that tool (those settings take no named choice). Errors of the
    connector's SDK propagate unwrapped (the kernel wraps them in `ServiceResponseException`), so ext's retry policy
    and callers see `openai.RateLimitError` and the like. Closing this client does not close the service's SDK client.
    """

    provider_name = "semantic_kernel"

    def __init__(
        self,
        service: ChatCompletionClientBase,
        *,
        kernel: Kernel | None = None,
        function_choice_behavior: FunctionChoiceBehavior | None = None,
        model: str | None = None,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        max_retries: int = 3,
    ) -> None:
        if not isinstance(service, ChatCompletionClientBase):
            raise ConfigurationError(
                f"service must be a Semantic Kernel ChatCompletionClientBase, got {type(service).__name__}"
            )
        if kernel is not None and not isinstance(kernel, Kernel):
            raise ConfigurationError(f"kernel must be a semantic_kernel.Kernel, got {type(kernel).__name__}")
        behavior: object = function_choice_behavior
        if behavior is not None and not isinstance(behavior, FunctionChoiceBehavior):
            kind = type(behavior).__name__
            raise ConfigurationError(f"function_choice_behavior must be a FunctionChoiceBehavior, got {kind}")
        super().__init__(
            model=model or service.ai_model_id,
            model_info=model_info,
            token_limit=token_limit,
            default_options=default_options,
            max_retries=max_retries,
        )
        self._service = service
        self._kernel = kernel
        self._behavior = function_choice_behavior
        self._settings_class = service.get_prompt_execution_settings_class()

    @property
    def service(self) -> ChatCompletionClientBase:
        return self._service

    def __repr__(self) -> str:
        return f"KernelChatCompletionClient(service={type(self._service).__name__}, model={self.model!r})"

    # --- the request, checked and mapped before anything is sent ------------------------------------------------

    def _check_request(self, request: ChatRequest) -> None:
        self._settings(request)

    def _settings(self, request: ChatRequest) -> PromptExecutionSettings:
        settings = self._settings_class()
        for name, value in request.options.set_fields().items():
            target = SETTING_OF_OPTION[name]
            if target not in type(settings).model_fields:
                raise UnsupportedOptionError(
                    f"{name} is not supported by {type(self._service).__name__} (its settings have no {target!r})"
                )
            setattr(settings, target, value)
        if request.json_output:
            if "response_format" not in type(settings).model_fields:
                raise UnsupportedOptionError(f"JSON output is not supported by {type(self._service).__name__}")
            structured = request.structured_model
            settings.response_format = structured if structured is not None else {"type": "json_object"}  # type: ignore[attr-defined]
        if request.tools:
            self._offer_tools(settings, request.tools, request.tool_choice)
        elif self._kernel is not None and request.tool_choice != "none":
            settings.function_choice_behavior = self._behavior or FunctionChoiceBehavior.Auto()
        if request.extra:
            for key, value in request.extra.items():
                if key not in type(settings).model_fields:
                    raise UnsupportedOptionError(
                        f"extra_create_args[{key!r}] is not a setting of {type(settings).__name__}"
                    )
                setattr(settings, key, value)
        return settings

    def _offer_tools(self, settings: PromptExecutionSettings, tools: list[ToolSchema], choice: str) -> None:
        if not isinstance(settings, OpenAIChatPromptExecutionSettings):
            raise UnsupportedOptionError(
                f"ext tools need a connector whose settings carry OpenAI-format tools; {type(self._service).__name__} "
                "has none (give its kernel plugins instead: tools_plugin)"
            )
        if choice not in TYPE_OF_CHOICE:  # a named tool: the only one offered, and required
            tools = [t for t in tools if t["name"] == choice]
            choice = "required"
        metadata = [_metadata(tool) for tool in tools]
        configuration = FunctionCallChoiceConfiguration(available_functions=metadata)
        update_settings_from_function_call_configuration(configuration, settings, TYPE_OF_CHOICE[choice])

    # --- the calls ---------------------------------------------------------------------------------------------

    async def _create(self, request: ChatRequest) -> CreateResult:
        settings = self._settings(request)
        try:
            replies = await self._service.get_chat_message_contents(
                to_chat_history(request.messages), settings, kernel=self._kernel
            )
        except ServiceResponseException as exc:
            raise _unwrapped(exc) from None
        if not replies:
            raise ServiceResponseException(f"{type(self._service).__name__} returned no message")
        return to_create_result(replies[-1])

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        settings = self._settings(request)
        stream = self._service.get_streaming_chat_message_contents(
            to_chat_history(request.messages), settings, kernel=self._kernel
        )
        full: StreamingChatMessageContent | None = None
        usage: RequestUsage | None = None
        try:
            async for messages in stream:
                if not messages:
                    continue
                message = messages[0]
                usage = usage_of(message) or usage
                text = "".join(i.text for i in message.items if isinstance(i, StreamingTextContent) and i.text)
                if message.role != "assistant":
                    continue  # the kernel's own function results (its plugins ran): not the model's reply
                full = message if full is None or _new_turn(full, message) else full + message
                if text:
                    yield StreamChunk(content=text)
        except ServiceResponseException as exc:
            raise _unwrapped(exc) from None
        finally:
            await stream.aclose()
        if full is None:
            raise ServiceResponseException(f"{type(self._service).__name__} streamed no message")
        yield to_create_result(_as_message(full), usage)


def _new_turn(full: StreamingChatMessageContent, message: StreamingChatMessageContent) -> bool:
    """A message of the kernel's next model call (after it invoked plugins) starts the reply afresh."""
    return (message.function_invoke_attempt or 0) != (full.function_invoke_attempt or 0)


def _as_message(streamed: StreamingChatMessageContent) -> ChatMessageContent:
    items: list[Any] = [i for i in streamed.items if not isinstance(i, StreamingTextContent)]
    return ChatMessageContent(
        role=streamed.role,
        items=items,
        content=streamed.content,
        finish_reason=streamed.finish_reason,
        metadata=streamed.metadata,
    )


def _metadata(tool: ToolSchema) -> KernelFunctionMetadata:
    """An ext tool schema as the function metadata the kernel's connectors turn into their wire format."""
    parameters = tool.get("parameters", {})
    required = set(parameters.get("required", []))
    return KernelFunctionMetadata(
        name=tool["name"],
        description=tool.get("description") or None,
        parameters=[
            KernelParameterMetadata(name=name, is_required=name in required, schema_data=dict(schema))
            for name, schema in parameters.get("properties", {}).items()
        ],
        is_prompt=False,
    )


def _unwrapped(exc: ServiceResponseException) -> BaseException:
    """The SDK's own error under the kernel's wrapper (as ext's clients raise them), else the wrapper."""
    cause = exc.__cause__
    return cause if isinstance(cause, Exception) else exc
