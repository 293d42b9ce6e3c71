"""Request rules the Chat Completions-shaped servers share (OpenAI, Azure OpenAI, Azure AI Inference).

Each function inspects a parsed JSON body and returns the first :class:`Violation` of its rule, or None. The
rules are the services' published request shape; *which* rules a server applies and how it words the error
(status, body) is the server's business, so the violation carries the facts (where, what was sent, the limit)
and no message. The source of each rule is cited where the server applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Violation", "check_messages", "check_range", "check_tool_choice", "check_tool_order"]

ViolationKind = Literal[
    "missing",
    "empty",
    "not_array",
    "above_max",
    "below_min",
    "tool_choice_without_tools",
    "tool_without_call",
    "unknown_tool_call_id",
    "unanswered_tool_calls",
]


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``param`` is the body path the error names (``messages``, ``temperature``,
    ``messages.[2].role``), ``index`` the message index for message rules, ``value`` what was sent, ``limit``
    the bound a range rule broke, ``call_ids`` the tool-call ids concerned."""

    kind: ViolationKind
    param: str
    index: int | None = None
    value: Any = None
    limit: float | None = None
    call_ids: tuple[str, ...] = ()


def check_messages(body: Mapping[str, Any]) -> Violation | None:
    """``messages`` is present, an array, and not empty."""
    if "messages" not in body:
        return Violation("missing", "messages")
    messages = body["messages"]
    if not isinstance(messages, list):
        return Violation("not_array", "messages", value=messages)
    if not messages:
        return Violation("empty", "messages", value=messages)
    return None


def check_range(body: Mapping[str, Any], key: str, low: float, high: float) -> Violation | None:
    """A numeric ``key``, when sent (and not null), lies in ``[low, high]``."""
    value = body.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value > high:
        return Violation("above_max", key, value=value, limit=high)
    if value < low:
        return Violation("below_min", key, value=value, limit=low)
    return None


def check_tool_choice(body: Mapping[str, Any]) -> Violation | None:
    """``tool_choice`` is only sent together with a non-empty ``tools``."""
    if body.get("tool_choice") is not None and not body.get("tools"):
        return Violation("tool_choice_without_tools", "tool_choice", value=body["tool_choice"])
    return None


def check_tool_order(messages: list[Any]) -> Violation | None:
    """Chat Completions tool pairing: each ``tool`` message follows an assistant message with ``tool_calls``
    (directly, or after other ``tool`` messages answering it) and names one of its call ids; every call of such
    an assistant message is answered by a ``tool`` message before any other message (or the end)."""
    pending: dict[str, None] = {}  # ids of the open assistant turn not answered yet, in call order
    open_calls: set[str] = set()
    open_index: int | None = None  # the assistant message whose calls are open
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            if open_index is None:
                return Violation("tool_without_call", f"messages.[{index}].role", index=index)
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return Violation("unknown_tool_call_id", f"messages.[{index}].tool_call_id", index=index, value=call_id)
            pending.pop(str(call_id), None)
            continue
        if pending and open_index is not None:
            return Violation(
                "unanswered_tool_calls", f"messages.[{open_index}].role", index=open_index, call_ids=tuple(pending)
            )
        calls = message.get("tool_calls") if role == "assistant" else None
        if isinstance(calls, list) and calls:
            ids = [str(call.get("id")) for call in calls if isinstance(call, dict)]
            pending = dict.fromkeys(ids)
            open_calls = set(ids)
            open_index = index
        else:
            pending, open_calls, open_index = {}, set(), None
    if pending and open_index is not None:
        return Violation(
            "unanswered_tool_calls", f"messages.[{open_index}].role", index=open_index, call_ids=tuple(pending)
        )
    return None
