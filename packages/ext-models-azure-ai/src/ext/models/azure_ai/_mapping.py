"""ext types to Azure AI Inference's chat completions and back, as plain functions.

Requests are JSON bodies in the OpenAI Chat Completions shapes (built by ext-core's `chat_*` functions), as the
SDK's `ChatCompletionsClient.complete()` builds them: fields the API does not name ("model extras") go at the
body's root, and such a body is sent with `extra-parameters: pass-through`. Responses are read as JSON (dicts;
the SDK's response models are mappings over the same JSON, so both work). Nothing here touches the network.

Reasoning: a `reasoning_content` field (DeepSeek-R1 and others on Azure AI Foundry, message and stream delta)
becomes the thought; so does a `<think>...</think>` block at the start of the content (how DeepSeek-R1 sends it
on serverless endpoints), split off the answer also when the tags arrive cut across stream chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ext.core import (
    ChatOptions,
    ChatRequest,
    ChatToolCallDeltas,
    CreateResult,
    ExtError,
    FunctionCall,
    ModelInfo,
    RequestUsage,
    StreamChunk,
    chat_messages,
    chat_options,
    chat_response_format,
    chat_tool_choice,
    chat_tools,
    normalize_finish_reason,
    split_chat_extra_args,
)

__all__ = [
    "API_FIELDS",
    "StreamState",
    "ThinkTagSplitter",
    "WireSettings",
    "map_options",
    "map_request",
    "map_response",
    "map_stream_update",
    "map_usage",
    "split_extra_args",
    "split_think_tags",
]


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


class WireSettings(NamedTuple):
    """Per-client settings that shape every request (from the client's configuration)."""

    include_usage: bool = True
    think_tags: bool = True
    model_extras: Mapping[str, Any] | None = None


DEFAULT_SETTINGS = WireSettings()

# --- requests -----------------------------------------------------------------------------------------


def map_options(options: ChatOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """Body fields for `ChatOptions`, and the model extras for what the API has no field for (`top_k`)."""
    return chat_options(options), ({"top_k": options.top_k} if options.top_k is not None else {})


API_FIELDS = frozenset(
    {
        "frequency_penalty",
        "presence_penalty",
        "temperature",
        "top_p",
        "max_tokens",
        "response_format",
        "stop",
        "tools",
        "tool_choice",
        "seed",
        "modalities",
    }
)
"""Body fields of the chat completions API besides messages, model and stream (`complete()`'s own arguments)."""


def split_extra_args(extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`extra_create_args` split into API fields (`API_FIELDS`) and model extras (anything else, sent with
    `extra-parameters: pass-through`). A given `model_extras` mapping is merged into the extras."""
    return split_chat_extra_args(extra, known=API_FIELDS, extras_key="model_extras")


def map_request(
    request: ChatRequest, info: ModelInfo, settings: WireSettings = DEFAULT_SETTINGS, *, stream: bool = False
) -> tuple[dict[str, Any], bool]:
    """The JSON body of a chat completions request, and whether it carries model extras (then it is sent with
    `extra-parameters: pass-through`). Extras go at the body's root and win over API fields, as with the SDK's
    `complete(model_extras=...)`."""
    body: dict[str, Any] = {"messages": chat_messages(request.messages), "model": request.model}
    options, extras = map_options(request.options)
    body.update(options)
    if request.tools:
        body["tools"] = chat_tools(request.tools)
        body["tool_choice"] = chat_tool_choice(request.tool_choice)
    if request.json_output is not False:
        response_format = chat_response_format(request.json_output, info)
        if response_format is not None:
            body["response_format"] = response_format
    if settings.model_extras:
        extras = {**settings.model_extras, **extras}
    if stream:
        body["stream"] = True
        if settings.include_usage:
            extras["stream_options"] = {"include_usage": True}
    if request.extra:
        extra_fields, extra_extras = split_extra_args(request.extra)
        body.update(extra_fields)
        extras.update(extra_extras)
    if extras:
        body.update(extras)
    return body, bool(extras)


# --- responses ----------------------------------------------------------------------------------------


def map_usage(usage: Mapping[str, Any] | None) -> RequestUsage:
    """Token usage, with cached prompt tokens and reasoning tokens when the service reports them."""
    if not usage:
        return RequestUsage()
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens")
    reasoning = completion_details.get("reasoning_tokens")
    return RequestUsage.of(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(cached) if cached is not None else None,
        int(reasoning) if reasoning is not None else None,
    )


def split_think_tags(text: str) -> tuple[str | None, str]:
    """`(thought, answer)` of a content that starts with a `<think>...</think>` block; `(None, text)` otherwise.
    An unclosed block is all thought (the model was cut off while thinking)."""
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, text
    body = stripped[len(THINK_OPEN) :]
    thought, closed, answer = body.partition(THINK_CLOSE)
    if not closed:
        return thought.strip() or None, ""
    return thought.strip() or None, answer.lstrip()


def _reasoning(message: Mapping[str, Any]) -> str | None:
    value = message.get("reasoning_content")
    if value is None:
        value = message.get("reasoning")
    return value if isinstance(value, str) and value else None


def _join(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n".join(kept) if kept else None


def _calls(tool_calls: list[Mapping[str, Any]]) -> list[FunctionCall]:
    out = []
    for index, call in enumerate(tool_calls):
        function = call.get("function") or {}
        out.append(
            FunctionCall.of(
                str(call.get("id") or f"call_{index}"),
                str(function.get("name") or ""),
                str(function.get("arguments") or "{}"),
            )
        )
    return out


def map_response(completion: Mapping[str, Any], settings: WireSettings = DEFAULT_SETTINGS) -> CreateResult:
    """A `CreateResult` from the first choice of a `ChatCompletions` (read as the JSON it holds).

    Tool calls become `FunctionCall`s; text that comes with tool calls is kept as the thought, after any
    reasoning text."""
    choices = completion.get("choices")
    if not choices:
        raise ExtError("the service returned a chat completion with no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    thought = _reasoning(message)
    text = message.get("content") or ""
    if settings.think_tags and text:
        tagged, text = split_think_tags(text)
        thought = _join(thought, tagged)
    usage = map_usage(completion.get("usage"))
    tool_calls = message.get("tool_calls")
    if tool_calls:
        return CreateResult.of(
            normalize_finish_reason(choice.get("finish_reason"), has_tool_calls=True),
            _calls(tool_calls),
            usage,
            _join(thought, text),
        )
    return CreateResult.of(normalize_finish_reason(choice.get("finish_reason")), text, usage, thought)


class ThinkTagSplitter:
    """Splits streamed content into thought and answer when it opens with `<think>`, tags cut anywhere.

    `feed(text)` returns `(thought, answer)` pieces safe to hand out now; text that may still turn out to be a
    tag is held until the next piece (or `flush()`).
    """

    __slots__ = ("_held", "_state")

    def __init__(self) -> None:
        self._state = 0  # 0: before any text, 1: inside <think>, 2: after </think> (leading space dropped), 3: answer
        self._held = ""

    def feed(self, text: str) -> tuple[str, str]:
        if self._state == 3:
            return "", text
        held = self._held + text
        self._held = ""
        if self._state == 0:
            stripped = held.lstrip()
            if not stripped:
                self._held = held
                return "", ""
            if stripped.startswith(THINK_OPEN):
                self._state = 1
                held = stripped[len(THINK_OPEN) :]
            elif THINK_OPEN.startswith(stripped):
                self._held = held  # maybe a tag cut short: wait
                return "", ""
            else:
                self._state = 3
                return "", held
        if self._state == 1:
            thought, closed, rest = held.partition(THINK_CLOSE)
            if not closed:
                keep = _partial_suffix(held, THINK_CLOSE)
                if keep:
                    self._held = held[-keep:]
                    held = held[:-keep]
                return held, ""
            self._state = 2
            answer = rest.lstrip()
            if answer:
                self._state = 3
            return thought, answer
        # state 2: the whitespace after </think> is dropped
        answer = held.lstrip()
        if answer:
            self._state = 3
        return "", answer

    def flush(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        if self._state == 1:
            return held, ""
        if self._state == 0 and held.strip():
            return "", held
        return "", ""


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of `text` that is a proper start of `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class StreamState:
    """What a stream has delivered so far; `result()` builds the final `CreateResult`."""

    __slots__ = ("content", "done", "finish_reason", "splitter", "thought", "tool_calls", "usage")

    def __init__(self, settings: WireSettings = DEFAULT_SETTINGS) -> None:
        self.content: list[str] = []
        self.thought: list[str] = []
        self.tool_calls = ChatToolCallDeltas()
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.done = False
        self.splitter = ThinkTagSplitter() if settings.think_tags else None

    def result(self) -> CreateResult:
        if self.splitter is not None:
            thought, text = self.splitter.flush()
            if thought:
                self.thought.append(thought)
            if text:
                self.content.append(text)
        usage = map_usage(self.usage)
        reasoning = "".join(self.thought).strip() or None
        text = "".join(self.content)
        if self.tool_calls:
            return CreateResult.of(
                normalize_finish_reason(self.finish_reason, has_tool_calls=True),
                self.tool_calls.calls(),
                usage,
                _join(reasoning, text),
            )
        return CreateResult.of(normalize_finish_reason(self.finish_reason), text, usage, reasoning)


def map_stream_update(update: Mapping[str, Any], state: StreamState) -> StreamChunk | None:
    """Fold one `StreamingChatCompletionsUpdate` (read as its JSON) into `state`; the `StreamChunk` to hand
    out, or None when the update carried no text or reasoning (tool-call fragments, finish and usage)."""
    usage = update.get("usage")
    if usage:
        state.usage = usage
    choices = update.get("choices")
    if not choices:
        return None
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish is not None:
        state.finish_reason = finish
    delta = choice.get("delta")
    if not delta:
        return None
    tool_calls = delta.get("tool_calls")
    if tool_calls:
        add = state.tool_calls.add
        for position, fragment in enumerate(tool_calls):
            function = fragment.get("function") or {}
            add(fragment.get("index", position), fragment.get("id"), function.get("name"), function.get("arguments"))
    thought = _reasoning(delta) or ""
    text = delta.get("content") or ""
    splitter = state.splitter
    if text and splitter is not None:
        tagged, text = splitter.feed(text)
        if tagged:
            thought += tagged
    if thought:
        state.thought.append(thought)
    if text:
        state.content.append(text)
    if text or thought:
        return StreamChunk.of(text, thought)
    return None
