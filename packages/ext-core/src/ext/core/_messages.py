"""Message and result types shared by every model client.

Every message has a `type` field, so a mixed list round-trips through JSON with
`dump_messages` / `load_messages`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import SchemaSerializer

from ._image import Image

# Schemas are built on first use, not at import: `import ext.core` stays cheap for every provider package.
_DEFERRED = ConfigDict(defer_build=True)

FinishReason = Literal["stop", "length", "function_calls", "content_filter", "unknown"]

# The `of` constructors below validate: for these small models pydantic-core's validator (Rust) is faster than
# `model_construct` (a Python loop over the fields), and both are public. `trusted_model` stays for callers
# that want `model_construct` by name.
_M = TypeVar("_M", bound=BaseModel)


def trusted_model(cls: type[_M], values: dict[str, Any], fields_set: set[str]) -> _M:
    """An instance of `cls` built from `values` without validating (`BaseModel.model_construct`): `values` must
    hold field values of the right types, and `fields_set` the fields given explicitly. For a provider's hot path
    whose values already have their types."""
    return cls.model_construct(fields_set, **values)


class FunctionCall(BaseModel):
    """A tool call the model asked for. `arguments` is the JSON text the model produced."""

    model_config = _DEFERRED

    id: str
    name: str
    arguments: str

    @classmethod
    def of(cls, id: str, name: str, arguments: str) -> FunctionCall:
        """Construction by position, for provider mappings (validated: pydantic-core's validator is faster than
        `model_construct` for a model this small)."""
        return cls(id=id, name=name, arguments=arguments)


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


def ensure_serializers(models: Iterable[BaseModel]) -> None:
    """Build the serializer of each model's class where it is still deferred, so `pydantic_core.to_json` can
    write the models directly.

    With `defer_build=True` a class's own serializer is a placeholder until the class validates something in
    this process; `to_json` cannot use a placeholder (pydantic 2.9 to 2.13 raise `PydanticSerializationError`).
    Validating through an adapter (`load_messages`, a dict message) does not build it either. `model_rebuild` is
    pydantic's public way to build a deferred class; it runs once per class, later calls cost a type check. The
    bytes are those `dump_messages` writes (a test compares the two)."""
    for cls in {type(model) for model in models}:
        serializer: object = cls.__pydantic_serializer__  # typed SchemaSerializer, but a placeholder until built
        if not isinstance(serializer, SchemaSerializer):
            cls.model_rebuild(force=True)


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

    @classmethod
    def of(
        cls,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> RequestUsage:
        """Construction by position, for provider mappings (validated, like `FunctionCall.of`)."""
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
        )

    def __add__(self, other: RequestUsage) -> RequestUsage:
        return RequestUsage.sum((self, other))

    @classmethod
    def sum(cls, usages: Iterable[RequestUsage]) -> RequestUsage:
        """The usages added up, in plain ints with one RequestUsage at the end. An optional count stays None
        only while every usage has it None."""
        prompt = completion = 0
        cached: int | None = None
        reasoning: int | None = None
        for usage in usages:
            prompt += usage.prompt_tokens
            completion += usage.completion_tokens
            if usage.cached_tokens is not None:
                cached = (cached or 0) + usage.cached_tokens
            if usage.reasoning_tokens is not None:
                reasoning = (reasoning or 0) + usage.reasoning_tokens
        return RequestUsage.of(prompt, completion, cached, reasoning)


class UsageTally:
    """A client's `actual_usage()` / `total_usage()` bookkeeping: the last call's usage, and the sum of every
    usage added. The sum is built when asked (or every 64 adds), so adding is one list append, not a new
    `RequestUsage` per call."""

    __slots__ = ("_total", "_unsummed", "actual")

    def __init__(self) -> None:
        self.actual = RequestUsage()
        self._total = RequestUsage()
        self._unsummed: list[RequestUsage] = []

    def add(self, usage: RequestUsage) -> None:
        """Record a call's usage: it becomes `actual` and counts in `total()`."""
        self.actual = usage
        unsummed = self._unsummed
        unsummed.append(usage)
        if len(unsummed) >= 64:
            self._fold()

    def total(self) -> RequestUsage:
        """The sum of every usage added."""
        if self._unsummed:
            self._fold()
        return self._total

    def _fold(self) -> None:
        self._total = RequestUsage.sum([self._total, *self._unsummed])
        self._unsummed.clear()


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

    @classmethod
    def of(
        cls,
        finish_reason: FinishReason,
        content: str | list[FunctionCall],
        usage: RequestUsage,
        thought: str | None = None,
        reasoning: list[ReasoningBlock] | None = None,
    ) -> CreateResult:
        """Construction by position, for provider mappings (validated, like `FunctionCall.of`; the message and
        usage models given are taken as they are)."""
        return cls(
            finish_reason=finish_reason,
            content=content,
            usage=usage,
            thought=thought,
            reasoning=reasoning if reasoning is not None else [],
        )

    def to_assistant_message(self, source: str = "assistant") -> AssistantMessage:
        """The assistant message to append to the history for the next turn (reasoning included)."""
        return AssistantMessage(content=self.content, thought=self.thought, reasoning=self.reasoning, source=source)


class StreamChunk(BaseModel):
    """A piece of a streamed response. `content` is the new text (possibly empty)."""

    model_config = _DEFERRED

    type: Literal["StreamChunk"] = "StreamChunk"
    content: str = ""
    thought: str = ""

    @classmethod
    def of(cls, content: str = "", thought: str = "") -> StreamChunk:
        """Construction by position, for a provider's stream loop: one chunk per token (validated, like
        `FunctionCall.of`)."""
        return cls(content=content, thought=thought) if thought else cls(content=content)


class FallbackEvent(StreamChunk):
    """A switch to another client in the middle of a streamed call (a fallback), as a stream item.

    It is a `StreamChunk` with no text, so every consumer of a stream (the tool loop, a UI that joins `content`)
    passes it on unchanged; one that wants to show the switch checks `isinstance(item, FallbackEvent)`.
    `from_client` and `to_client` name the clients (`provider/model`), `error_kind` is the `ErrorKind` value of
    the failure (None when a result predicate caused the switch), `reason` a short text, `text_sent` how many
    characters of the answer the caller had already received (the `continue` stream rule carries on from them).
    A middleware that switches on a non-streamed call appends the same event to `ChatCall.context["fallback_events"]`.
    """

    event: Literal["fallback"] = "fallback"
    from_client: str
    to_client: str
    error_kind: str | None = None
    reason: str = ""
    text_sent: int = 0
