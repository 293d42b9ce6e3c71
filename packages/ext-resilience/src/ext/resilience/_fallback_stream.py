"""Fallback for streamed calls: the three stream rules.

- `before_first_chunk` (the default): chunks pass on as they come; a client may be switched only until the first
  chunk with text went out (empty chunks are held back until then). A failure after that is raised unchanged: the
  caller already has part of an answer it cannot take back.
- `buffer`: the whole answer of a client is held until its `CreateResult`; if the client fails at any point, what it
  sent is dropped and the next client answers. The caller sees one clean answer, later (no streaming gain).
- `continue`: chunks pass on as they come; if the client fails mid-answer (or its answer ends at the token limit
  and `when` has `"length"`), the next client is asked to continue the text already sent: the call's messages plus
  an assistant message holding that text and a user message asking to go on from there without repeating it. The
  final `CreateResult` holds the whole text (sent part + continuation); its usage is the continuation's (a broken
  stream reports none).

Each switch yields an `ext.core.FallbackEvent` (a `StreamChunk` with no text) before the next client's chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

from ext.core import AssistantMessage, CreateResult, ErrorKind, FallbackEvent, StreamChunk, UserMessage
from ext.pipeline import ChatCall, ChatItem, StreamNext

from ._errors import AllClientsFailedError, Attempt

StreamRule = Literal["before_first_chunk", "buffer", "continue"]
STREAM_RULES: tuple[str, ...] = ("before_first_chunk", "buffer", "continue")


class Switcher(Protocol):
    """What a stream under fallback needs from the middleware (`FallbackMiddleware` is one)."""

    def candidates(self, call: ChatCall) -> list[Any]: ...

    async def cooling(self, candidate: Any) -> float: ...

    def switch_event(self, call: ChatCall, attempt: Attempt, to: Any, text_sent: int) -> FallbackEvent: ...

    def open_stream(self, candidate: Any, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]: ...

    def classify(self, error: Exception) -> tuple[ErrorKind | None, bool]: ...

    async def count(self, candidate: Any, kind: ErrorKind | None) -> None: ...

    def next_after(self, order: list[Any], index: int, kind: ErrorKind | None) -> None: ...

    def refusal(self, result: CreateResult) -> str | None: ...


CONTINUE_PROMPT = (
    "Your previous answer was cut off. Continue it exactly where it stopped, without repeating any of it and "
    "without any preface."
)
"""The user message that asks the next client to continue the text already sent (`continue` rule)."""


def continuation(call: ChatCall, sent: str) -> ChatCall:
    """The call that asks for the rest of an answer whose first part, `sent`, the caller already has."""
    messages = [*call.messages, AssistantMessage(content=sent, source="fallback"), UserMessage(content=CONTINUE_PROMPT)]
    return call.replace(messages=messages)


def joined(result: CreateResult, sent: str) -> CreateResult:
    """`result` of a continuation, holding the whole text."""
    if not sent or not isinstance(result.content, str):
        return result
    return result.model_copy(update={"content": sent + result.content})


async def fallback_stream(
    middleware: Switcher, call: ChatCall, next: StreamNext, rule: StreamRule
) -> AsyncIterator[ChatItem]:
    order = middleware.candidates(call)
    attempts: list[Attempt] = []
    pending: Attempt | None = None
    last_error: BaseException | None = None
    sent = ""  # text of earlier clients the caller has (continue rule)
    kept: list[ChatItem] | None = None  # a refused answer, given if no later client answers
    index = -1
    while index + 1 < len(order):
        index += 1
        candidate = order[index]
        left = await middleware.cooling(candidate)
        if left > 0:
            attempts.append(Attempt(candidate.name, None, None, f"cooling down, {left:.1f} s left", skipped=True))
            continue
        if pending is not None:
            yield middleware.switch_event(call, pending, candidate, len(sent))
        stream = middleware.open_stream(candidate, continuation(call, sent) if sent else call, next)
        held: list[ChatItem] = []  # items not given to the caller yet
        committed = rule != "buffer" and rule != "before_first_chunk"  # continue: everything goes out at once
        text = ""  # this client's text the caller has
        result: CreateResult | None = None
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    result = item
                    continue
                if not committed:
                    held.append(item)
                    if rule == "before_first_chunk" and _has_text(item):
                        committed = True
                        for chunk in held:
                            yield chunk
                        held.clear()
                    continue
                text += item.content if isinstance(item, StreamChunk) else ""
                yield item
        except Exception as exc:
            kind, switches = middleware.classify(exc)
            if kind is not None:
                await middleware.count(candidate, kind)
            if not switches or (rule == "before_first_chunk" and committed):
                raise
            pending = Attempt(candidate.name, exc, kind)
            attempts.append(pending)
            last_error = exc
            sent += text
            middleware.next_after(order, index, kind)
            continue
        finally:
            await _aclose(stream)
        if result is None:
            raise RuntimeError(f"{candidate.name}: the stream ended without a CreateResult")
        await middleware.count(candidate, None)
        reason = middleware.refusal(result)
        if reason is not None and (rule != "before_first_chunk" or not committed):
            pending = Attempt(candidate.name, None, None, reason)
            attempts.append(pending)
            kept = [*held, joined(result, sent + text)]
            sent += text if rule == "continue" else ""
            continue
        for item in held:
            yield item
        yield joined(result, sent)
        return
    if kept is not None:
        for item in kept:
            yield item
        return
    raise AllClientsFailedError(attempts) from last_error


def _has_text(item: Any) -> bool:
    return isinstance(item, StreamChunk) and bool(item.content or item.thought)


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
