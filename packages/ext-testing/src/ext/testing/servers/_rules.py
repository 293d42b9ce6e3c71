"""Request rules the Chat Completions-shaped servers share (OpenAI, Azure OpenAI, Azure AI Inference).

Each ``check_*`` function inspects a parsed JSON body and returns the first :class:`Violation` of its rule, or
None; :func:`chat_violation` applies them in the API's order. The rules are the services' published request
shape; how a server words the error (status, body) is its own business, so a violation carries the facts
(where, what was sent, the limit) and :func:`openai_violation` renders OpenAI's wording, which the Azure server
reuses for the errors the model behind it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "OPENAI_RANGES",
    "Violation",
    "chat_violation",
    "check_messages",
    "check_range",
    "check_tool_choice",
    "check_tool_order",
    "openai_error_body",
    "openai_violation",
]

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


def openai_error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


# Numeric bounds from the openai SDK's `types/chat/completion_create_params.py` docstrings ("between 0 and 2",
# "between -2.0 and 2.0", top_p a probability mass); the API answers a value outside with 400 `decimal_*_value`.
OPENAI_RANGES = (
    ("temperature", 0, 2),
    ("top_p", 0, 1),
    ("frequency_penalty", -2, 2),
    ("presence_penalty", -2, 2),
)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def openai_violation(violation: Violation) -> dict[str, Any]:
    """The 400 body the OpenAI API answers for ``violation`` (message, type, param and code as the service
    sends them; "preceeding" is the API's spelling)."""
    # Each body as the API returns it, seen in public reports of real responses (cited per rule).
    kind, param = violation.kind, violation.param
    # SDK: `messages: Required[Iterable[ChatCompletionMessageParam]]`; the API's missing-parameter error.
    if kind == "missing":
        return openai_error_body(
            f"Missing required parameter: '{param}'.", "invalid_request_error", "missing_required_parameter", param
        )
    # The API validates `messages` as an array with at least one item (API reference: "messages: array, Required").
    if kind == "not_array":
        got = "an object" if isinstance(violation.value, dict) else f"a {type(violation.value).__name__}"
        message = f"Invalid type for '{param}': expected an array, but got {got} instead."
        return openai_error_body(message, "invalid_request_error", "invalid_type", param)
    # As in CopilotKit/CopilotKit issue 529 (param "messages", code "empty_array").
    if kind == "empty":
        message = (
            f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
        )
        return openai_error_body(message, "invalid_request_error", "empty_array", param)
    # The SDK docstrings' ranges (`OPENAI_RANGES`); the API's `decimal_above_max_value` / `_below_min_` errors.
    if kind in ("above_max", "below_min"):
        above = kind == "above_max"
        message = (
            f"Invalid '{param}': decimal {'above maximum' if above else 'below minimum'} value. Expected a value "
            f"{'<=' if above else '>='} {_number(violation.limit)}, but got {_number(violation.value)} instead."
        )
        return openai_error_body(message, "invalid_request_error", f"decimal_{kind}_value", param)
    # API reference, tool_choice: "`none` is the default when no tools are present"; a choice among no tools is
    # refused with this text (param "tool_choice").
    if kind == "tool_choice_without_tools":
        message = "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
        return openai_error_body(message, "invalid_request_error", None, param)
    # SDK: `ChatCompletionToolMessageParam.tool_call_id`, "Tool call that this message is responding to"; the body
    # as in smarter-sh/smarter issue 264 (param "messages.[4].role", code null).
    if kind == "tool_without_call":
        message = (
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
        )
        return openai_error_body(message, "invalid_request_error", None, param)
    # The same rule for an id the assistant message before did not call (param names the tool_call_id).
    if kind == "unknown_tool_call_id":
        message = (
            f"Invalid parameter: 'tool_call_id' of '{violation.value}' not found in 'tool_calls' of previous message."
        )
        return openai_error_body(message, "invalid_request_error", None, param)
    # Every call answered before the next other message (function-calling guide); the text as in
    # microsoft/promptflow pull request 3130's handling of this error; param names the assistant message.
    message = (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
        f"The following tool_call_ids did not have response messages: {', '.join(violation.call_ids)}"
    )
    return openai_error_body(message, "invalid_request_error", None, param)


def chat_violation(body: dict[str, Any], ranges: Sequence[tuple[str, float, float]]) -> Violation | None:
    """The first rule of the Chat Completions request shape ``body`` breaks, or None: ``messages`` required
    and non-empty (SDK: ``messages: Required[Iterable[ChatCompletionMessageParam]]``), each numeric field of
    ``ranges`` within its bounds, ``tool_choice`` only with ``tools`` (API reference: "`none` is the default when
    no tools are present"; the service refuses a choice among no tools), and the tool pairing of
    :func:`~ext.testing.servers._rules.check_tool_order` (SDK: ``ChatCompletionToolMessageParam.tool_call_id``
    is "Tool call that this message is responding to")."""
    violation = check_messages(body)
    if violation is not None:
        return violation
    for key, low, high in ranges:
        violation = check_range(body, key, low, high)
        if violation is not None:
            return violation
    return check_tool_choice(body) or check_tool_order(body["messages"])
