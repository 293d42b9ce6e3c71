"""The history rule: what of a session's conversation is kept, so that it fits the model's context window.

The conversation is cut into turns, each starting at a user message and running to the next one (the assistant
answers, tool calls and tool results in between belong to it), so a tool call and its result are always in
the same turn. The system text (the agent's instructions) is not part of the stored history: it is rendered
and put first on every call, never dropped. When the instructions, the tools' schemas, the history and
`reserve_tokens` for the answer do not fit `context_window`, whole turns are dropped, oldest first, until they
fit; the turn being run is never dropped (if it alone does not fit, the provider says so). Dropped turns are
removed from the session too, so a stored record stays bounded by the window. Tokens are the client's
`count_tokens` of each turn, counted once per turn (linear in the history).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ext.core import LLMMessage, UserMessage

__all__ = ["turn_starts", "turns_to_drop"]


def turn_starts(messages: Sequence[LLMMessage]) -> list[int]:
    """The index of each user message (each turn's start); 0 first when the history starts otherwise."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return starts


def turns_to_drop(
    messages: Sequence[LLMMessage],
    *,
    keep_from: int,
    budget: int,
    count: Callable[[Sequence[LLMMessage]], int],
) -> int:
    """How many leading messages to drop (a whole number of turns, none at or after `keep_from`) so that the
    rest counts at most `budget` tokens; as many as allowed when no cut fits."""
    if not messages:
        return 0
    starts = turn_starts(messages)
    bounds = [*starts[1:], len(messages)]
    sizes = [count(messages[a:b]) for a, b in zip(starts, bounds, strict=True)]
    total = sum(sizes)
    drop = 0
    for size, end in zip(sizes, bounds, strict=True):
        if total <= budget or end > keep_from:
            break
        total -= size
        drop = end
    return drop
