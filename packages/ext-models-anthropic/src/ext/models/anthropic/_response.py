"""Anthropic Messages responses and stream events (SDK objects or parsed JSON) to ext results: usage,
`map_response`, and `StreamState`, which folds stream events into chunks and a final result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ext.core import (
    CreateResult,
    FunctionCall,
    ReasoningBlock,
    RequestUsage,
    StreamChunk,
    normalize_finish_reason,
)

from ._settings import PROVIDER

__all__ = [
    "IncompleteStreamError",
    "StreamState",
    "map_response",
    "map_usage",
]

# --- responses ----------------------------------------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object or of the same object as parsed JSON."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def map_usage(usage: Any) -> RequestUsage:
    """`usage` as `RequestUsage`: prompt tokens include tokens read from and written to the prompt cache
    (the API counts them apart from `input_tokens`); `cached_tokens` are those read from it."""
    if usage is None:
        return RequestUsage()
    if type(usage) is dict and "output_tokens_details" not in usage:
        # The JSON reply's usage (a dict): the keys read directly.
        cache_read = usage.get("cache_read_input_tokens")
        prompt = (usage.get("input_tokens") or 0) + (cache_read or 0) + (usage.get("cache_creation_input_tokens") or 0)
        completion = usage.get("output_tokens") or 0
        if type(prompt) is int and type(completion) is int and _int_or_none(cache_read):
            return RequestUsage.of(prompt, completion, cache_read, None)
    cache_read = _get(usage, "cache_read_input_tokens")
    cache_write = _get(usage, "cache_creation_input_tokens") or 0
    details = _get(usage, "output_tokens_details")
    thinking = _get(details, "thinking_tokens") if details is not None else None
    prompt = (_get(usage, "input_tokens") or 0) + (cache_read or 0) + cache_write
    completion = _get(usage, "output_tokens") or 0
    if type(prompt) is int and type(completion) is int and _int_or_none(cache_read) and _int_or_none(thinking):
        return RequestUsage.of(prompt, completion, cache_read, thinking)
    # Not plain ints (a float, a numeric string): validation converts them or names the bad field.
    return RequestUsage(
        prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cache_read, reasoning_tokens=thinking
    )


def _int_or_none(value: Any) -> bool:
    return value is None or type(value) is int


def _join(parts: Sequence[str]) -> str | None:
    text = "\n".join([p for p in parts if p])
    return text or None


def _result(
    texts: list[str],
    calls: list[FunctionCall],
    reasoning: list[ReasoningBlock],
    stop_reason: str | None,
    usage: RequestUsage,
) -> CreateResult:
    # Every value here is built with its type (texts are checked `str`s, calls and reasoning ext models, usage
    # from `map_usage`), so the result is constructed without validating it again.
    thoughts = [block.text for block in reasoning if block.text]
    if calls:
        # The text a model writes before its tool calls has no place in `content`: it joins the thought.
        return CreateResult.of(
            normalize_finish_reason(stop_reason, has_tool_calls=True),
            calls,
            usage,
            _join([*thoughts, *texts]),
            reasoning,
        )
    return CreateResult.of(normalize_finish_reason(stop_reason), "".join(texts), usage, _join(thoughts), reasoning)


def _arguments_text(value: Any) -> str:
    if isinstance(value, str):
        return value or "{}"
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def map_response(message: Any) -> CreateResult:
    """A Messages API response (SDK `Message` or its JSON) as a `CreateResult`.

    Text blocks are joined; `tool_use` blocks become `FunctionCall`s; `thinking` and `redacted_thinking`
    blocks become `ReasoningBlock`s (provider `anthropic`) to send back next turn, and the thinking text the
    `thought`. `stop_reason` maps to `finish_reason` (`refusal` is `content_filter`).
    """
    if type(message) is dict:
        content = message.get("content")
        if type(content) is list and len(content) == 1:
            block = content[0]
            if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
                # The most common reply, as JSON: one text block.
                reason = normalize_finish_reason(message.get("stop_reason"))
                return CreateResult.of(reason, block["text"], map_usage(message.get("usage")), None, [])
    texts: list[str] = []
    calls: list[FunctionCall] = []
    reasoning: list[ReasoningBlock] = []
    for block in _get(message, "content") or ():
        kind = _get(block, "type")
        if kind == "text":
            texts.append(_get(block, "text") or "")
        elif kind == "tool_use":
            calls.append(
                FunctionCall(
                    id=_get(block, "id"), name=_get(block, "name"), arguments=_arguments_text(_get(block, "input"))
                )
            )
        elif kind == "thinking":
            reasoning.append(
                ReasoningBlock(
                    text=_get(block, "thinking") or "", signature=_get(block, "signature"), provider=PROVIDER
                )
            )
        elif kind == "redacted_thinking":
            reasoning.append(ReasoningBlock(redacted_data=_get(block, "data"), provider=PROVIDER))
    return _result(texts, calls, reasoning, _get(message, "stop_reason"), map_usage(_get(message, "usage")))


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    data: str | None = None
    id: str = ""
    name: str = ""
    initial_input: Any = None


_chunk = StreamChunk.of


class StreamState:
    """Accumulates the events of a streamed response; `handle` returns a chunk for text and thinking deltas.

    Events are SDK objects or their JSON (Bedrock). Call `result()` after `message_stop`; a stream that ended
    before it raises `IncompleteStreamError`.
    """

    __slots__ = ("_blocks", "_done", "_input", "_output", "_stop_reason", "_usage")

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: Any = None
        self._input: dict[str, Any] = {}
        self._output: int | None = None
        self._stop_reason: str | None = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether `message_stop` arrived."""
        return self._done

    def handle(self, event: Any) -> StreamChunk | None:
        as_dict = type(event) is dict
        kind = event.get("type") if as_dict else getattr(event, "type", None)
        if kind == "content_block_delta":
            # The hot path (one call per streamed token): plain attribute and key access, no helper calls.
            if as_dict:
                delta, index = event["delta"], event["index"]
                delta_kind = delta.get("type")
            else:
                delta, index = event.delta, event.index
                delta_kind = delta.type
            block = self._blocks.get(index)
            if block is None:
                raise IncompleteStreamError("a content_block_delta arrived for a block that was never started")
            if delta_kind == "text_delta":
                text = delta["text"] if as_dict else delta.text
                block.text.append(text)
                # A checked str needs no validation (the SDK's and the JSON's texts are str; anything else is
                # validated, which names the bad value).
                return _chunk(text) if type(text) is str else StreamChunk(content=text)
            if delta_kind == "input_json_delta":
                block.text.append(_get(delta, "partial_json"))
                return None
            if delta_kind == "thinking_delta":
                thinking = _get(delta, "thinking")
                block.text.append(thinking)
                return _chunk("", thinking) if type(thinking) is str else StreamChunk(thought=thinking)
            if delta_kind == "signature_delta":
                block.signature = _get(delta, "signature")
            return None
        if kind == "content_block_start":
            head = _get(event, "content_block")
            block = _Block(kind=_get(head, "type"))
            if block.kind == "text":
                initial = _get(head, "text")
                if initial:
                    block.text.append(initial)
            elif block.kind == "tool_use":
                block.id = _get(head, "id")
                block.name = _get(head, "name")
                block.initial_input = _get(head, "input")
            elif block.kind == "thinking":
                initial = _get(head, "thinking")
                if initial:
                    block.text.append(initial)
                block.signature = _get(head, "signature") or None
            elif block.kind == "redacted_thinking":
                block.data = _get(head, "data")
            self._blocks[_get(event, "index")] = block
            return None
        if kind == "message_start":
            message = _get(event, "message")
            self._usage = _get(message, "usage")
            return None
        if kind == "message_delta":
            self._stop_reason = _get(_get(event, "delta"), "stop_reason")
            usage = _get(event, "usage")
            if usage is not None:
                self._output = _get(usage, "output_tokens")
                for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                    value = _get(usage, name)
                    if value is not None:
                        self._input[name] = value
                details = _get(usage, "output_tokens_details")
                if details is not None:
                    self._input["output_tokens_details"] = details
            return None
        if kind == "message_stop":
            self._done = True
        return None

    def usage(self) -> RequestUsage:
        """Usage so far: input counts from `message_start` (updated by `message_delta`), output from the last
        `message_delta`."""
        merged: dict[str, Any] = {}
        if self._usage is not None:
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"):
                merged[name] = _get(self._usage, name)
        merged.update(self._input)
        if self._output is not None:
            merged["output_tokens"] = self._output
        return map_usage(merged)

    def result(self) -> CreateResult:
        if not self._done:
            raise IncompleteStreamError("the response stream ended before message_stop")
        texts: list[str] = []
        calls: list[FunctionCall] = []
        reasoning: list[ReasoningBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.kind == "text":
                texts.append("".join(block.text))
            elif block.kind == "tool_use":
                arguments = "".join(block.text) if block.text else _arguments_text(block.initial_input)
                calls.append(FunctionCall(id=block.id, name=block.name, arguments=arguments or "{}"))
            elif block.kind == "thinking":
                reasoning.append(ReasoningBlock(text="".join(block.text), signature=block.signature, provider=PROVIDER))
            elif block.kind == "redacted_thinking":
                reasoning.append(ReasoningBlock(redacted_data=block.data, provider=PROVIDER))
        return _result(texts, calls, reasoning, self._stop_reason, self.usage())


class IncompleteStreamError(ConnectionError):
    """A response stream broke off before its end (`message_stop`). A `ConnectionError`, so core retries it
    when nothing was yielded yet."""
