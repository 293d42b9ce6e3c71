"""Message and result types shared by every model client.

Every message has a `type` field, so a mixed list round-trips through JSON with
`dump_messages` / `load_messages`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ._image import Image

# Schemas are built on first use, not at import: `import ext.core` stays cheap for every provider package.
_DEFERRED = ConfigDict(defer_build=True)

FinishReason = Literal["stop", "length", "function_calls", "content_filter", "unknown"]


class FunctionCall(BaseModel):
    """A tool call the model asked for. `arguments` is the JSON text the model produced."""

    model_config = _DEFERRED

    id: str
    name: str
    arguments: str


class ReasoningBlock(BaseModel):
    """One piece of a model's reasoning, kept so it can be sent back unchanged.

    `signature` (Anthropic thinking) and `redacted_data` (Anthropic redacted thinking) are opaque
    provider values; `provider` names who produced them, so other providers can drop them.
    """

    model_config = _DEFERRED

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    provider: str | None = None


class SystemMessage(BaseModel):
    """Instructions for the model."""

    model_config = _DEFERRED

    type: Literal["SystemMessage"] = "SystemMessage"
    content: str


class UserMessage(BaseModel):
    """Input from a user: text, or a list of text and images."""

    model_config = _DEFERRED

    type: Literal["UserMessage"] = "UserMessage"
    content: Union[str, list[Union[str, Image]]]
    source: str = "user"


class AssistantMessage(BaseModel):
    """A model's earlier turn: text, or the tool calls it made, plus any reasoning."""

    model_config = _DEFERRED

    type: Literal["AssistantMessage"] = "AssistantMessage"
    content: Union[str, list[FunctionCall]]
    thought: str | None = None
    reasoning: list[ReasoningBlock] = Field(default_factory=list)
    source: str = "assistant"


class FunctionExecutionResult(BaseModel):
    """The outcome of one tool call, sent back to the model."""

    model_config = _DEFERRED

    call_id: str
    name: str
    content: str
    is_error: bool = False


class FunctionExecutionResultMessage(BaseModel):
    """The results of the tool calls of the previous assistant turn."""

    model_config = _DEFERRED

    type: Literal["FunctionExecutionResultMessage"] = "FunctionExecutionResultMessage"
    content: list[FunctionExecutionResult]


LLMMessage = Annotated[
    Union[SystemMessage, UserMessage, AssistantMessage, FunctionExecutionResultMessage],
    Field(discriminator="type"),
]
LLM_MESSAGE_TYPES: tuple[type[BaseModel], ...] = (
    SystemMessage,
    UserMessage,
    AssistantMessage,
    FunctionExecutionResultMessage,
)

_messages_adapter: TypeAdapter[list[LLMMessage]] | None = None


def _adapter() -> TypeAdapter[list[LLMMessage]]:
    # Built on first use: schema building at import would slow every `import ext.core`.
    global _messages_adapter
    if _messages_adapter is None:
        _messages_adapter = TypeAdapter(list[LLMMessage])
    return _messages_adapter


def dump_messages(messages: list[LLMMessage]) -> str:
    """A list of messages as JSON text."""
    return _adapter().dump_json(messages).decode("utf-8")


def load_messages(data: str | bytes | list[Any]) -> list[LLMMessage]:
    """Messages from JSON text (or already-parsed JSON) written by `dump_messages`."""
    if isinstance(data, list):
        return _adapter().validate_python(data)
    return _adapter().validate_json(data)


class RequestUsage(BaseModel):
    """Tokens a request used. Cached and reasoning counts are None when the provider does not report them."""

    model_config = _DEFERRED

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: RequestUsage) -> RequestUsage:
        return RequestUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=_add_optional(self.cached_tokens, other.cached_tokens),
            reasoning_tokens=_add_optional(self.reasoning_tokens, other.reasoning_tokens),
        )


def _add_optional(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


class CreateResult(BaseModel):
    """What a model returned for one request.

    `content` is text, or the tool calls the model made. With structured output, `parsed` holds
    the validated object (an instance of the pydantic model asked for, or the decoded JSON).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)

    type: Literal["CreateResult"] = "CreateResult"
    finish_reason: FinishReason
    content: Union[str, list[FunctionCall]]
    usage: RequestUsage
    cached: bool = False
    thought: str | None = None
    reasoning: list[ReasoningBlock] = Field(default_factory=list)
    parsed: Any = None

    def to_assistant_message(self, source: str = "assistant") -> AssistantMessage:
        """The assistant message to append to the history for the next turn (reasoning included)."""
        return AssistantMessage(content=self.content, thought=self.thought, reasoning=self.reasoning, source=source)


class StreamChunk(BaseModel):
    """A piece of a streamed response. `content` is the new text (possibly empty)."""

    model_config = _DEFERRED

    type: Literal["StreamChunk"] = "StreamChunk"
    content: str = ""
    thought: str = ""
