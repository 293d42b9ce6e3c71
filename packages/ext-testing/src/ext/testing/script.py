"""Protocol-neutral script types for the loopback servers in :mod:`ext.testing.servers`.

A test scripts a server with :class:`Reply` and :class:`Fault` items; each protocol server renders them into
its provider's wire format. A protocol server decodes a recorded request into a :class:`NeutralRequest`, so a
provider-neutral test can assert on what the client put on the wire.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "FAULT_KINDS",
    "Fault",
    "FaultKind",
    "NeutralMessage",
    "NeutralRequest",
    "NeutralToolResult",
    "Reply",
    "ToolCallSpec",
    "split_fragments",
    "split_words",
]

FaultKind = Literal[
    "rate_limit",
    "overloaded",
    "server_error",
    "bad_request",
    "auth",
    "not_found",
    "drop",
    "drop_mid_body",
    "hang",
    "context_window",
]
"""What a :class:`Fault` does; see :class:`Fault`."""

_FAULT_KINDS: frozenset[str] = frozenset(
    (
        "rate_limit",
        "overloaded",
        "server_error",
        "bad_request",
        "auth",
        "not_found",
        "drop",
        "drop_mid_body",
        "hang",
        "context_window",
    )
)
FAULT_KINDS = _FAULT_KINDS
"""Every :data:`FaultKind`."""
_FINISH_REASONS: frozenset[str] = frozenset(("stop", "length", "tool_calls", "content_filter"))
_call_ids = itertools.count(1)
_WORDS = re.compile(r"\S*\s*")


def split_words(text: str) -> list[str]:
    """Split ``text`` into ~word pieces (each word with its trailing whitespace); the pieces join to ``text``."""
    return [piece for piece in _WORDS.findall(text) if piece]


def split_fragments(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty consecutive fragments that join to ``text``."""
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class ToolCallSpec:
    """A tool call made by the model (in a :class:`Reply`) or found in a request (in a :class:`NeutralMessage`).

    ``arguments`` is a dict (serialised as compact JSON on the wire) or a raw string sent as is (e.g. to test
    malformed arguments). ``id`` is generated as ``call_<n>`` when None.
    """

    name: str
    arguments: str | dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def __post_init__(self) -> None:
        if self.id is None:
            self.id = f"call_{next(_call_ids)}"

    @property
    def call_id(self) -> str:
        """The call id (always set after construction)."""
        return self.id or ""

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON string to put on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)

    @property
    def arguments_dict(self) -> dict[str, Any]:
        """The arguments as a dict (parsed from the string form; raises ``ValueError`` if that is not an object)."""
        if isinstance(self.arguments, dict):
            return self.arguments
        value = json.loads(self.arguments)
        if not isinstance(value, dict):
            raise ValueError(f"tool call arguments are not a JSON object: {self.arguments!r}")
        return value


@dataclass
class Reply:
    """A successful model response, rendered by the protocol server into its wire format.

    ``finish_reason`` is neutral (``"stop" | "length" | "tool_calls" | "content_filter"``); None means
    ``"tool_calls"`` when there are tool calls, else ``"stop"``. ``chunks`` says how ``text`` is split when
    streamed (None: ~word pieces); when ``text`` is empty it defaults to ``"".join(chunks)``. ``delay`` is waited
    before the response headers, ``chunk_delay`` between streamed frames; ``stall_after_chunks=n`` streams n wire
    frames and then stalls until the client disconnects (for cancellation tests); ``cut_after_chunks=n`` streams n
    wire frames and then closes the connection without ending the body (a stream cut). ``headers`` are added to the
    response.
    """

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    thought: str | None = None
    thought_signature: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    chunks: list[str] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    stall_after_chunks: int | None = None
    cut_after_chunks: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.chunks is not None:
            joined = "".join(self.chunks)
            if not self.text:
                self.text = joined
            elif joined != self.text:
                raise ValueError(f"Reply.chunks join to {joined!r}, not to text {self.text!r}")
        if self.delay < 0 or self.chunk_delay < 0:
            raise ValueError("Reply delays must be >= 0")
        if self.stall_after_chunks is not None and self.stall_after_chunks < 0:
            raise ValueError("Reply.stall_after_chunks must be >= 0")
        if self.cut_after_chunks is not None and self.cut_after_chunks < 0:
            raise ValueError("Reply.cut_after_chunks must be >= 0")

    @property
    def resolved_finish_reason(self) -> str:
        """The neutral finish reason, with the None default applied."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def text_chunks(self) -> list[str]:
        """The pieces ``text`` is streamed in."""
        return list(self.chunks) if self.chunks is not None else split_words(self.text)

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Fault:
    """A failure the server produces instead of a reply.

    Kinds: ``rate_limit`` 429 (``Retry-After`` when ``retry_after`` is set), ``overloaded`` (529 for Anthropic,
    503 elsewhere), ``server_error`` 500, ``bad_request`` 400, ``auth`` 401, ``not_found`` 404,
    ``context_window`` 400 with the provider's own "prompt longer than the context window" body (bodies in the
    provider's error shape); ``drop`` closes the connection after reading the request, without a response;
    ``drop_mid_body`` sends the headers and part of the body, then closes; ``hang`` never answers (until the
    client disconnects). ``status`` overrides the HTTP status; an empty ``message`` gets a realistic default.
    """

    kind: FaultKind
    retry_after: float | None = None
    message: str = ""
    status: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in _FAULT_KINDS:
            raise ValueError(f"unknown Fault kind {self.kind!r}; expected one of {sorted(_FAULT_KINDS)}")


@dataclass
class NeutralToolResult:
    """A tool result sent back to the model. ``is_error`` is None when the wire format has no such field."""

    call_id: str
    content: str
    is_error: bool | None = None


@dataclass
class NeutralMessage:
    """One non-system message of a request.

    ``role`` is ``"user" | "assistant" | "tool"``; ``text`` joins the text parts with newlines; ``images`` counts
    image parts; ``position`` is the message's index in the wire list (system messages included).
    """

    role: str
    text: str = ""
    images: int = 0
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    tool_results: list[NeutralToolResult] = field(default_factory=list)
    thought: str | None = None
    thought_signature: str | None = None
    position: int = 0


@dataclass
class NeutralRequest:
    """A recorded request decoded into a provider-neutral form.

    ``system`` holds system/developer texts in order; ``tool_choice`` is ``"auto" | "none" | "required"``, a tool
    name, or None when absent; ``json_mode`` is plain JSON mode (no schema), ``json_schema`` the structured
    output schema; ``options`` holds only the neutral keys present among temperature, max_tokens, top_p, top_k,
    stop (a list), frequency_penalty, presence_penalty, seed; ``raw`` is the parsed body.
    """

    model: str | None = None
    system: list[str] = field(default_factory=list)
    messages: list[NeutralMessage] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_choice: str | None = None
    json_mode: bool = False
    json_schema: dict[str, Any] | None = None
    stream: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def last_user_text(self) -> str:
        """The text of the last user message ("" if none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""
