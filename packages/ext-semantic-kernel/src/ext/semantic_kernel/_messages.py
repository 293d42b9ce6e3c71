"""Messages and results between ext and Semantic Kernel, both ways, as plain functions.

ext -> kernel: `to_chat_history` (a request's messages), `to_chat_message` (a `CreateResult` as the kernel's reply).
kernel -> ext: `from_chat_history` (what a kernel sends a service), `to_create_result` (a kernel service's reply).
A tool call keeps its id and its name as the model saw it (a kernel function's `plugin-function`).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

from ext.core import (
    CHAT_TOOL_ERROR_PREFIX,
    AssistantMessage,
    ConfigurationError,
    CreateResult,
    FinishReason,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
    arguments_to_json,
)
from semantic_kernel.connectors.ai.completion_usage import CompletionUsage
from semantic_kernel.contents import (
    ChatHistory,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
    ImageContent,
    TextContent,
)
from semantic_kernel.contents.utils.author_role import AuthorRole
from semantic_kernel.contents.utils.finish_reason import FinishReason as KernelFinishReason

__all__ = [
    "call_name",
    "from_chat_history",
    "to_chat_history",
    "to_chat_message",
    "to_create_result",
    "usage_of",
]

_TO_KERNEL_FINISH: dict[str, KernelFinishReason | None] = {
    "stop": KernelFinishReason.STOP,
    "length": KernelFinishReason.LENGTH,
    "function_calls": KernelFinishReason.TOOL_CALLS,
    "content_filter": KernelFinishReason.CONTENT_FILTER,
    "unknown": None,
}
_FROM_KERNEL_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "function_calls",
    "function_call": "function_calls",
    "content_filter": "content_filter",
}


# --- ext -> kernel ---------------------------------------------------------------------------------------------


def to_chat_history(messages: Sequence[LLMMessage]) -> ChatHistory:
    """A request's messages as the kernel's `ChatHistory` (one tool message per result, as its connectors expect)."""
    history = ChatHistory()
    for message in messages:
        if isinstance(message, SystemMessage):
            history.add_message(ChatMessageContent(role=AuthorRole.SYSTEM, content=message.content))
        elif isinstance(message, UserMessage):
            history.add_message(ChatMessageContent(role=AuthorRole.USER, items=_user_items(message)))
        elif isinstance(message, AssistantMessage):
            if isinstance(message.content, str):
                history.add_message(ChatMessageContent(role=AuthorRole.ASSISTANT, content=message.content))
            else:
                calls: list[Any] = [_call_content(call) for call in message.content]
                history.add_message(ChatMessageContent(role=AuthorRole.ASSISTANT, items=calls))
        else:
            for result in message.content:
                # Chat Completions-style tool messages carry no error flag: the text says it, as ext's own clients do.
                text = CHAT_TOOL_ERROR_PREFIX + result.content if result.is_error else result.content
                item = FunctionResultContent(id=result.call_id, name=result.name, result=text)
                history.add_message(ChatMessageContent(role=AuthorRole.TOOL, items=[item]))
    return history


def _user_items(message: UserMessage) -> list[Any]:
    if isinstance(message.content, str):
        return [TextContent(text=message.content)]
    items: list[Any] = []
    for part in message.content:
        if isinstance(part, Image):
            items.append(ImageContent(data_uri=part.data_uri))
        else:
            items.append(TextContent(text=part))
    return items


def _call_content(call: FunctionCall, index: int | None = None) -> FunctionCallContent:
    return FunctionCallContent(id=call.id, index=index, name=call.name, arguments=call.arguments)


def to_chat_message(
    result: CreateResult, *, model: str | None = None, streamed_text: bool = False
) -> ChatMessageContent:
    """A `CreateResult` as the kernel's assistant message: text or function calls, finish reason, usage."""
    items: list[Any]
    if isinstance(result.content, str):
        items = [] if streamed_text else [TextContent(text=result.content)]
    else:
        items = [_call_content(call, index) for index, call in enumerate(result.content)]
    return ChatMessageContent(
        role=AuthorRole.ASSISTANT,
        items=items,
        finish_reason=_TO_KERNEL_FINISH[result.finish_reason],
        ai_model_id=model,
        inner_content=result,
        metadata={"usage": kernel_usage(result.usage)},
    )


def kernel_usage(usage: RequestUsage) -> CompletionUsage:
    """ext's usage as the kernel's `CompletionUsage` (what its telemetry and agents read from `metadata["usage"]`)."""
    return CompletionUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


# --- kernel -> ext ---------------------------------------------------------------------------------------------


def call_name(item: FunctionCallContent | FunctionResultContent) -> str:
    """The name the model used: `plugin-function` for a kernel function, the tool's own name otherwise."""
    if item.name:
        return item.name
    return f"{item.plugin_name}-{item.function_name}" if item.plugin_name else item.function_name


def from_chat_history(history: ChatHistory | Iterable[ChatMessageContent]) -> list[LLMMessage]:
    """What a kernel sends a chat service, as ext messages. Consecutive tool results become one message."""
    messages = history.messages if isinstance(history, ChatHistory) else list(history)
    out: list[LLMMessage] = []
    for index, message in enumerate(messages):
        role = message.role
        if role in (AuthorRole.SYSTEM, AuthorRole.DEVELOPER):
            out.append(SystemMessage(content=message.content))
        elif role == AuthorRole.USER:
            out.append(_user_message(message, index))
        elif role == AuthorRole.ASSISTANT:
            assistant = _assistant_message(message)
            if assistant is not None:
                out.append(assistant)
        elif role == AuthorRole.TOOL:
            results = [_result(item) for item in message.items if isinstance(item, FunctionResultContent)]
            if out and isinstance(out[-1], FunctionExecutionResultMessage):
                out[-1].content.extend(results)
            elif results:
                out.append(FunctionExecutionResultMessage(content=results))
        else:
            raise ConfigurationError(f"chat_history[{index}]: role {role!r} has no ext message")
    return out


def _user_message(message: ChatMessageContent, index: int) -> UserMessage:
    images = [item for item in message.items if isinstance(item, ImageContent)]
    if not images:
        return UserMessage(content=message.content, source=message.name or "user")
    parts: list[str | Image] = []
    for item in message.items:
        if isinstance(item, TextContent):
            parts.append(item.text)
        elif isinstance(item, ImageContent):
            if item.data is None or not item.mime_type:
                raise ConfigurationError(
                    f"chat_history[{index}]: an ImageContent needs its bytes and mime_type (an image by URL only "
                    "cannot be sent through an ext client)"
                )
            data = item.data if isinstance(item.data, bytes) else base64.b64decode(str(item.data))
            parts.append(Image.from_bytes(data, item.mime_type))
    return UserMessage(content=parts, source=message.name or "user")


def _assistant_message(message: ChatMessageContent) -> AssistantMessage | None:
    calls = [item for item in message.items if isinstance(item, FunctionCallContent)]
    if not calls:
        return AssistantMessage(content=message.content, source=message.name or "assistant")
    text = message.content or None
    return AssistantMessage(
        content=[_function_call(item) for item in calls], thought=text, source=message.name or "assistant"
    )


def _function_call(item: FunctionCallContent) -> FunctionCall:
    arguments = item.arguments
    text = arguments if isinstance(arguments, str) else arguments_to_json(dict(arguments or {}))
    return FunctionCall(id=item.id or "", name=call_name(item), arguments=text or "{}")


def _result(item: FunctionResultContent) -> FunctionExecutionResult:
    return FunctionExecutionResult(call_id=item.id or "", name=call_name(item), content=str(item.result))


def usage_of(message: ChatMessageContent) -> RequestUsage | None:
    """The usage a kernel connector put in a reply's metadata, if any."""
    usage = (message.metadata or {}).get("usage")
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None) or 0
    completion = getattr(usage, "completion_tokens", None) or 0
    return RequestUsage(prompt_tokens=prompt, completion_tokens=completion)


def to_create_result(message: ChatMessageContent, usage: RequestUsage | None = None) -> CreateResult:
    """A kernel service's reply as a `CreateResult`: function calls when it made any, else its text."""
    calls = [_function_call(item) for item in message.items if isinstance(item, FunctionCallContent)]
    reason = message.finish_reason
    finish: FinishReason = _FROM_KERNEL_FINISH.get(reason.value if reason is not None else "", "unknown")
    if calls:
        finish = "function_calls"
    elif reason is None:
        finish = "stop"
    return CreateResult(
        finish_reason=finish,
        content=calls if calls else message.content,
        usage=usage or usage_of(message) or RequestUsage(),
        thought=(message.content or None) if calls else None,
    )
