"""Memory in front of a model: `MemoryMiddleware` (the pipeline puts the most relevant memories in each call)
and `MemorySearchTool` (the model searches memory itself). Both show each memory's score and source."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ext.core import BaseTool, CancellationToken, CreateResult, LLMMessage, MetadataFilter, SystemMessage, UserMessage
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

from ._memory import MemoryHit, VectorMemory

MEMORY_HEADER = "Relevant memories (most relevant first; score 1.0 = the closest match to the request):"
MEMORY_CONTEXT_KEY = "memories"
"""Key of `ChatCall.context` under which `MemoryMiddleware` leaves the `MemoryHit`s it used."""

DEFAULT_TOP_K = 5
DEFAULT_TOKEN_BUDGET = 1500
"""Estimated tokens of memories per call: `DEFAULT_TOP_K` chunks of `DEFAULT_MAX_CHUNK_CHARS` (1,000) characters
fit whole, with sources up to 140 characters. A line costs ceil((33 + len(source) + 1000) / 4) + 1 tokens (its
`[5] score 0.812 | ` and ` (chunk 1234): ` are 33 characters, the newline one token) and the header 22:
22 + 5 x (ceil(1173 / 4) + 1) = 1,497."""
CUT_MARK = " …"
"""Ends the text of a memory cut to fit the budget."""
_MIN_CUT_CHARS = 100  # a memory cut shorter than this says too little to be worth its place


def _tokens(text: str) -> int:
    # The same estimate as ext-core's `estimate_tokens`: one token per 4 characters, rounded up.
    return math.ceil(len(text) / 4)


def _cut(hit: MemoryHit, chars: int) -> MemoryHit:
    """`hit` with its text cut to at most `chars` characters, at a space when one is near the end; its `end` moved
    to match, so `text` is still the source's span from `start` to `end`."""
    text = hit.text[:chars]
    space = max(text.rfind(" "), text.rfind("\n"))
    if space >= chars * 4 // 5:
        text = text[:space]
    text = text.rstrip()
    return hit.model_copy(update={"text": text, "end": hit.start + len(text)})


def format_memories(hits: Sequence[MemoryHit], *, token_budget: int | None = None) -> tuple[str, list[MemoryHit]]:
    """The hits as text a model reads (one line each: rank, score, source, chunk, text), best first, and the hits
    shown, within `token_budget` estimated tokens for the whole text (None: no limit).

    Hits are taken best first while they fit whole. The first that does not fit is cut to the space left (its
    text ends with `CUT_MARK`, and the hit returned carries the cut text) when at least 100 characters of it fit,
    and the list ends there: a less relevant memory never displaces a more relevant one, and the best hit is
    shown whenever the budget holds the header, its line's prefix and 100 characters (about 60 tokens with a
    short source)."""
    lines = [MEMORY_HEADER]
    used: list[MemoryHit] = []
    total = _tokens(MEMORY_HEADER)
    for rank, hit in enumerate(hits, 1):
        prefix = f"[{rank}] score {hit.score:.3f} | {hit.source} (chunk {hit.chunk}): "
        line = prefix + hit.text
        cost = _tokens(line) + 1
        if token_budget is not None and total + cost > token_budget:
            room = 4 * (token_budget - total - 1) - len(prefix) - len(CUT_MARK)  # characters of text that fit
            if room >= _MIN_CUT_CHARS:
                cut = _cut(hit, room)
                lines.append(prefix + cut.text + CUT_MARK)
                used.append(cut)
            break
        lines.append(line)
        used.append(hit)
        total += cost
    return ("\n".join(lines) if used else ""), used


def _last_user_text(messages: Sequence[LLMMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return " ".join(part for part in message.content if isinstance(part, str))
    return ""


class MemoryMiddleware(ChatMiddleware):
    """Puts the memories most relevant to the last user message in front of each call, as a system message after
    the call's own leading system messages, within `token_budget` estimated tokens (`format_memories`: the
    defaults hold all `top_k` hits of full-size chunks; one that does not fit is cut), with scores shown. The hits
    used are left in `call.context["memories"]`. Placed after a tool loop, it runs on every model turn.

    Holds a `VectorMemory` object, so it is built in code (a dump is refused rather than losing it).
    """

    def __init__(
        self,
        memory: VectorMemory,
        *,
        top_k: int = DEFAULT_TOP_K,
        min_score: float | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        filter: MetadataFilter | None = None,
    ) -> None:
        if not isinstance(memory, VectorMemory):
            raise TypeError(f"MemoryMiddleware: memory must be a VectorMemory, got {type(memory).__name__}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ValueError(f"MemoryMiddleware: top_k must be a positive integer, got {top_k!r}")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget <= 0:
            raise ValueError(f"MemoryMiddleware: token_budget must be a positive integer, got {token_budget!r}")
        self._memory = memory
        self._top_k = top_k
        self._min_score = min_score
        self._token_budget = token_budget
        self._filter = filter

    def _undumpable_settings(self) -> dict[str, str]:
        return {"memory": "a VectorMemory object (an embedder and a store)"}

    async def _with_memories(self, call: ChatCall) -> ChatCall:
        text = _last_user_text(call.messages)
        if not text.strip():
            return call
        hits = await self._memory.query(
            text,
            top_k=self._top_k,
            filter=self._filter,
            min_score=self._min_score,
            cancellation_token=call.cancellation_token,
        )
        content, used = format_memories(hits, token_budget=self._token_budget)
        call.context[MEMORY_CONTEXT_KEY] = used
        if not used:
            return call
        messages = list(call.messages)
        at = 0
        while at < len(messages) and isinstance(messages[at], SystemMessage):
            at += 1
        messages.insert(at, SystemMessage(content=content))
        return call.replace(messages=messages)

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        return await next(await self._with_memories(call))

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        async for item in next(await self._with_memories(call)):
            yield item

    def __repr__(self) -> str:
        return f"MemoryMiddleware(top_k={self._top_k}, token_budget={self._token_budget})"


class MemorySearchArgs(BaseModel):
    """Arguments of `MemorySearchTool`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    query: str = Field(min_length=1, description="What to look for, in words.")
    top_k: int | None = Field(default=None, ge=1, le=50, description="How many memories at most.")


class MemorySearchTool(BaseTool):
    """A tool a model calls to search a `VectorMemory`: it answers with the closest memories, each with its score
    and source (the same text `MemoryMiddleware` adds). Built in code (it holds the memory)."""

    def __init__(
        self,
        memory: VectorMemory,
        *,
        name: str = "search_memory",
        description: str = "Search long-term memory for passages relevant to a query; returns scored passages.",
        top_k: int = DEFAULT_TOP_K,
        min_score: float | None = None,
        filter: MetadataFilter | None = None,
    ) -> None:
        if not isinstance(memory, VectorMemory):
            raise TypeError(f"MemorySearchTool: memory must be a VectorMemory, got {type(memory).__name__}")
        super().__init__(name=name, description=description, args_type=MemorySearchArgs)
        self._memory = memory
        self._top_k = top_k
        self._min_score = min_score
        self._filter = filter

    def _undumpable_settings(self) -> dict[str, str]:
        return {"memory": "a VectorMemory object (an embedder and a store)"}

    async def run(self, args: Any, cancellation_token: CancellationToken | None) -> str:
        hits = await self._memory.query(
            args.query,
            top_k=args.top_k or self._top_k,
            filter=self._filter,
            min_score=self._min_score,
            cancellation_token=cancellation_token,
        )
        text, _ = format_memories(hits)
        return text or "No relevant memories found."


__all__ = [
    "CUT_MARK",
    "DEFAULT_TOKEN_BUDGET",
    "DEFAULT_TOP_K",
    "MEMORY_CONTEXT_KEY",
    "MEMORY_HEADER",
    "MemoryMiddleware",
    "MemorySearchArgs",
    "MemorySearchTool",
    "format_memories",
]
