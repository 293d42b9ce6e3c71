"""A loopback server speaking Anthropic's Messages API (JSON and SSE) over raw HTTP."""

from __future__ import annotations

import itertools
import json as _json
import re
import secrets
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar, Union

from ext.testing.script import (
    Fault,
    NeutralMessage,
    NeutralRequest,
    NeutralToolResult,
    Reply,
    ToolCallSpec,
    split_words,
)
from ext.testing.servers._base import (
    LoopbackServer,
    RecordedRequest,
    Response,
    Route,
    ScriptItem,
    StreamResponse,
    json_response,
    sse_frame,
)

__all__ = [
    "AnthropicServer",
    "CountScript",
    "anthropic_message_json",
    "anthropic_stream_events",
    "decode_messages_body",
]

_DEFAULT_MODEL = "claude-sonnet-5-5"
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
_FAULT_DEFAULTS: dict[str, tuple[str, str]] = {
    # kind: (error.type, message)
    "rate_limit": ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    "overloaded": ("overloaded_error", "Overloaded"),
    "server_error": ("api_error", "Internal server error"),
    "bad_request": ("invalid_request_error", "Invalid request."),
    "auth": ("authentication_error", "invalid x-api-key"),
    "not_found": ("not_found_error", "model: not found"),
    # The Messages API's answer to a prompt longer than the model's window.
    "context_window": ("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"),
}
_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_JSON_MODE = re.compile(r"\bJSON\b")

CountScript = Union[int, Fault]
"""What :meth:`AnthropicServer.enqueue_count` accepts: a token count to answer, or an HTTP fault."""


def _text_of(content: Any) -> tuple[str, int]:
    """Text (text blocks joined with newlines) and image count of a message's ``content``."""
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "image":
                images += 1
    return "\n".join(texts), images


def anthropic_message_json(reply: Reply, model: str, message_id: str) -> dict[str, Any]:
    """The Messages API response object for ``reply`` (content blocks: thinking, text, tool_use)."""
    content: list[dict[str, Any]] = []
    if reply.thought is not None:
        content.append({"type": "thinking", "thinking": reply.thought, "signature": reply.thought_signature or ""})
    if reply.text or not reply.tool_calls:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": _input_of(call)})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _STOP_REASONS.get(reply.resolved_finish_reason, reply.resolved_finish_reason),
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def _input_of(call: ToolCallSpec) -> Any:
    try:
        return call.arguments_dict
    except ValueError:
        return call.arguments  # malformed on purpose: sent as the raw string


def _usage(reply: Reply) -> dict[str, Any]:
    usage: dict[str, Any] = {
        # The API's input_tokens excludes tokens read from (or written to) the prompt cache.
        "input_tokens": max(0, reply.prompt_tokens - reply.cached_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": reply.cached_tokens,
        "output_tokens": reply.completion_tokens,
        "service_tier": "standard",
    }
    if reply.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": reply.reasoning_tokens}
    return usage


def anthropic_stream_events(reply: Reply, model: str, message_id: str) -> list[list[dict[str, Any]]]:
    """The SSE events of a streamed ``reply``, grouped into the frames (HTTP chunks) they are sent in.

    The first frame holds ``message_start``, the first ``content_block_start`` and a ``ping``; each delta is
    a frame of its own; a block's ``content_block_stop`` shares a frame with the next block's start; the last
    frame holds ``message_delta`` (stop reason, usage) and ``message_stop``.
    """
    usage = _usage(reply)
    start_usage = {**usage, "output_tokens": 1}
    start_usage.pop("output_tokens_details", None)
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.thought is not None:
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(reply.thought)]
        deltas.append({"type": "signature_delta", "signature": reply.thought_signature or ""})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if reply.text or not reply.tool_calls:
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in reply.text_chunks]))
    for call in reply.tool_calls:
        head = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        arguments = call.arguments_json
        fragments = [arguments[i : i + 8] for i in range(0, len(arguments), 8)] if arguments != "{}" else []
        blocks.append((head, [{"type": "input_json_delta", "partial_json": f} for f in fragments]))

    frames: list[list[dict[str, Any]]] = []
    pending: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for index, (head, deltas) in enumerate(blocks):
        pending.append({"type": "content_block_start", "index": index, "content_block": head})
        if index == 0:
            pending.append({"type": "ping"})
        frames.append(pending)
        frames.extend([[{"type": "content_block_delta", "index": index, "delta": delta}] for delta in deltas])
        pending = [{"type": "content_block_stop", "index": index}]
    final_usage: dict[str, Any] = {
        "input_tokens": usage["input_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage["cache_read_input_tokens"],
        "output_tokens": usage["output_tokens"],
    }
    if "output_tokens_details" in usage:
        final_usage["output_tokens_details"] = usage["output_tokens_details"]
    stop_reason = _STOP_REASONS.get(reply.resolved_finish_reason, reply.resolved_finish_reason)
    pending.append(
        {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": final_usage}
    )
    pending.append({"type": "message_stop"})
    frames.append(pending)
    return frames


def _pieces(text: str) -> list[str]:
    return split_words(text) or [text]


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(sse_frame(event, event=str(event["type"])) for event in events)


class AnthropicServer(LoopbackServer):
    """Anthropic's Messages API over HTTP, as the real API answers.

    Routes: ``POST /v1/messages`` (JSON, or SSE with ``"stream": true``) and ``POST /v1/messages/count_tokens``
    (``{"input_tokens": n}``; script it with :meth:`enqueue_count`, else ``count_tokens`` estimates from the
    body). With ``api_key`` set, requests must carry it as ``x-api-key`` or ``Authorization: Bearer``. Every
    request must carry an ``anthropic-version`` header, as the real API requires.

    With ``strict=True`` (the default) the server rejects, with the API's 400 ``invalid_request_error``, what
    the real API rejects: a missing ``model``/``max_tokens``/``messages``; empty or whitespace-only text blocks;
    empty message content (except a final assistant message); a final assistant message ending in whitespace;
    ``tool_result`` blocks that do not answer the previous assistant turn's ``tool_use`` ids, or that follow
    other content in their message; ``tool_use`` without results in the next message; a temperature outside
    0 to 1; and with ``thinking`` enabled: a budget below 1024 or not below ``max_tokens``, a temperature
    other than 1, ``top_k``, ``top_p`` below 0.95, or a forced ``tool_choice``.

    ``Reply.thought`` becomes a ``thinking`` block signed with ``Reply.thought_signature``; ``Fault`` kinds
    map to the API's error types (``overloaded`` is 529 ``overloaded_error``).
    """

    overloaded_status: ClassVar[int] = 529

    def __init__(
        self,
        *,
        api_key: str | None = None,
        strict: bool = True,
        default: ScriptItem | None = None,
        record: bool = True,
    ) -> None:
        self.api_key = api_key
        self.strict = strict
        self._count_script: deque[CountScript] = deque()
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(6)
        super().__init__(default=default, record=record)

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/v1/messages", "messages"),
            Route("POST", "/v1/messages/count_tokens", "count_tokens", self._count_tokens),
        )

    # -- helpers -------------------------------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{self._id_prefix}{next(self._ids):012d}"

    def _request_headers(self) -> dict[str, str]:
        return {"request-id": self._next_id("req_"), "anthropic-organization-id": "00000000-loopback"}

    @staticmethod
    def error_body(error_type: str, message: str) -> dict[str, Any]:
        """The API's error object."""
        return {"type": "error", "error": {"type": error_type, "message": message}}

    def _error(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> Response:
        body = self.error_body(error_type, message)
        body["request_id"] = self._next_id("req_")
        return json_response(body, status, {**self._request_headers(), **(headers or {})})

    def _invalid(self, message: str) -> Response:
        return self._error(400, "invalid_request_error", message)

    def _auth_failure(self, request: RecordedRequest) -> Response | None:
        if self.api_key is None:
            return None
        headers = request.headers
        key = headers.get("x-api-key")
        authorization = headers.get("authorization", "")
        bearer = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
        if key == self.api_key or bearer == self.api_key:
            return None
        return self._error(401, "authentication_error", "invalid x-api-key")

    def enqueue_count(self, *items: CountScript) -> None:
        """Script the next ``count_tokens`` answers (FIFO): a count, or an HTTP ``Fault``."""
        for item in items:
            if not isinstance(item, (int, Fault)) or isinstance(item, bool):
                raise TypeError(f"cannot enqueue {item!r} for count_tokens: expected an int or a Fault")
            self._count_script.append(item)

    @staticmethod
    def estimate_count(body: dict[str, Any]) -> int:
        """The count answered when none is scripted: 1 token per 4 characters of the JSON of the system
        prompt, messages and tools, plus 3 per message (deterministic, for tests)."""
        parts = [body.get("system") or "", body.get("messages") or [], body.get("tools") or []]
        chars = sum(len(_json.dumps(part, separators=(",", ":"))) for part in parts)
        messages = body.get("messages")
        return -(-chars // 4) + 3 * (len(messages) if isinstance(messages, list) else 0)

    def _count_tokens(self, request: RecordedRequest) -> Response:
        rejection = self.check(request)
        if rejection is not None:
            return rejection
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        if self._count_script:
            item = self._count_script.popleft()
            if isinstance(item, Fault):
                if item.kind in ("drop", "drop_mid_body", "hang"):
                    raise ValueError("count_tokens scripts take HTTP faults only")
                return self.render_fault(item, request)
            count = item
        else:
            count = self.estimate_count(body)
        return json_response({"input_tokens": count}, headers=self._request_headers())

    # -- protocol hooks ------------------------------------------------------------------------------------------

    def check(self, request: RecordedRequest) -> Response | None:
        denied = self._auth_failure(request)
        if denied is not None:
            return denied
        if not request.headers.get("anthropic-version"):
            return self._invalid("anthropic-version: header is required")
        if not isinstance(request.json, dict):
            return self._invalid("There was an error parsing the body of your request: the body is not a JSON object")
        if self.strict:
            problem = self.validate_body(request.json, count_only=request.route == "count_tokens")
            if problem is not None:
                return self._invalid(problem)
        return None

    def validate_body(
        self, body: dict[str, Any], *, count_only: bool = False, require_model: bool = True
    ) -> str | None:
        """The API's error message for a request body the real API would reject, or None."""
        if require_model and (not isinstance(body.get("model"), str) or not body["model"]):
            return "model: Field required"
        if not count_only and (not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1):
            return "max_tokens: Field required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        problem = self._validate_messages(messages)
        if problem is not None:
            return problem
        temperature = body.get("temperature")
        if temperature is not None and not (0 <= temperature <= 1):
            return "temperature: range: 0..1"
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            if not count_only and budget >= body["max_tokens"]:
                return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
            if temperature is not None and temperature != 1:
                return "`temperature` may only be set to 1 when thinking is enabled"
            if body.get("top_k") is not None:
                return "`top_k` must be unset when thinking is enabled"
            top_p = body.get("top_p")
            if top_p is not None and top_p < 0.95:
                return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled"
            choice = body.get("tool_choice")
            if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
                return "Thinking may not be enabled when tool_choice forces tool use."
        return None

    @staticmethod
    def _validate_messages(messages: list[Any]) -> str | None:
        last = len(messages) - 1
        previous_tool_ids: list[str] = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            role = message["role"]
            content = message.get("content")
            final_assistant = i == last and role == "assistant"
            if isinstance(content, str):
                if not content.strip() and not (final_assistant and not content):
                    if not content:
                        return (
                            f"messages.{i}: all messages must have non-empty content except for the optional final "
                            "assistant message"
                        )
                    return "messages: text content blocks must contain non-whitespace text"
                blocks: list[Any] = [{"type": "text", "text": content}] if content else []
            elif isinstance(content, list):
                blocks = content
                if not blocks and not final_assistant:
                    return (
                        f"messages.{i}: all messages must have non-empty content except for the optional final "
                        "assistant message"
                    )
            else:
                return f"messages.{i}.content: Input should be a valid string or list"
            for j, block in enumerate(blocks):
                if not isinstance(block, dict):
                    return f"messages.{i}.content.{j}: Input should be an object"
                if block.get("type") == "text":
                    text = block.get("text")
                    if not isinstance(text, str):
                        return f"messages.{i}.content.{j}.text: Field required"
                    if not text.strip():
                        return "messages: text content blocks must contain non-whitespace text"
            if final_assistant and blocks:
                tail = blocks[-1]
                if tail.get("type") == "text" and tail["text"] != tail["text"].rstrip():
                    return "messages: final assistant content cannot end with trailing whitespace"
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                if role != "user":
                    return f"messages.{i}: tool_result blocks may only appear in user messages"
                if any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
                    return f"messages.{i}: tool_result blocks must come first in the message content"
                unexpected = [b.get("tool_use_id") for b in results if b.get("tool_use_id") not in previous_tool_ids]
                if unexpected:
                    return (
                        f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{unexpected[0]}. Each `tool_result` block must have a corresponding `tool_use` block in "
                        "the previous message."
                    )
            if previous_tool_ids:
                answered = {b.get("tool_use_id") for b in results}
                missing = [t for t in previous_tool_ids if t not in answered]
                if missing:
                    return (
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        f"{missing[0]}. Each `tool_use` block must have a corresponding `tool_result` block in the "
                        "next message."
                    )
            previous_tool_ids = [
                str(b.get("id")) for b in blocks if role == "assistant" and b.get("type") == "tool_use"
            ]
        return None

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        return self._error(status, _STATUS_TYPES.get(status, "api_error"), message)

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        error_type, message = _FAULT_DEFAULTS.get(fault.kind, ("api_error", "Internal server error"))
        status = self.fault_status(fault)
        if fault.status is not None:
            error_type = _STATUS_TYPES.get(status, error_type)
        headers = self.fault_headers(fault)
        if fault.kind == "rate_limit":
            headers["anthropic-ratelimit-requests-remaining"] = "0"
        return self._error(status, error_type, fault.message or message, headers)

    def _model_of(self, request: RecordedRequest) -> str:
        body = request.json if isinstance(request.json, dict) else {}
        model = body.get("model")
        return model if isinstance(model, str) and model else _DEFAULT_MODEL

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        body = request.json if isinstance(request.json, dict) else {}
        model = self._model_of(request)
        message_id = self._next_id("msg_")
        if body.get("stream"):
            frames = [_sse(events) for events in anthropic_stream_events(reply, model, message_id)]
            return StreamResponse(frames, headers=self._request_headers())
        return json_response(anthropic_message_json(reply, model, message_id), headers=self._request_headers())

    def stream_error(
        self, error_type: str = "overloaded_error", message: str = "Overloaded", *, text: str = ""
    ) -> StreamResponse:
        """A 200 SSE stream that fails midway with an ``error`` event (as the API does when it is overloaded
        after the response started); ``text`` is streamed before the error."""
        model = _DEFAULT_MODEL
        frames = anthropic_stream_events(Reply(text=text), model, self._next_id("msg_"))
        kept = frames[: 1 + len(Reply(text=text).text_chunks)] if text else frames[:1]
        out = [_sse(events) for events in kept]
        out.append(sse_frame(self.error_body(error_type, message), event="error"))
        return StreamResponse(out, headers=self._request_headers())

    # -- decoding ------------------------------------------------------------------------------------------------

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        """Decode a Messages API body. ``json_mode`` is set when a system text asks for JSON (the API has no
        schema-free JSON switch, so clients ask in the system prompt); ``json_schema`` comes from
        ``output_config.format`` (or the older top-level ``output_format``)."""
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        return decode_messages_body(body, model=body.get("model"), stream=bool(body.get("stream")))


def decode_messages_body(body: dict[str, Any], *, model: Any, stream: bool) -> NeutralRequest:
    """A Messages API request body as a :class:`NeutralRequest` (shared by the Anthropic and Bedrock servers)."""
    result = NeutralRequest(model=model if isinstance(model, str) else None, stream=stream, raw=body)
    system = body.get("system")
    if isinstance(system, str):
        result.system.append(system)
    elif isinstance(system, list):
        result.system.extend(str(b.get("text", "")) for b in system if isinstance(b, dict) and b.get("type") == "text")
    for position, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            continue
        role = str(message.get("role"))
        content = message.get("content")
        text, images = _text_of(content)
        neutral = NeutralMessage(role, text, images, position=position)
        if isinstance(content, list):
            thoughts: list[str] = []
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_use":
                    arguments = block.get("input")
                    neutral.tool_calls.append(
                        ToolCallSpec(
                            name=str(block.get("name", "")),
                            arguments=arguments if isinstance(arguments, (dict, str)) else _json.dumps(arguments),
                            id=str(block.get("id", "")),
                        )
                    )
                elif kind == "tool_result":
                    result_text, _ = _text_of(block.get("content", ""))
                    neutral.tool_results.append(
                        NeutralToolResult(
                            call_id=str(block.get("tool_use_id", "")),
                            content=result_text,
                            is_error=bool(block.get("is_error", False)),
                        )
                    )
                elif kind == "thinking":
                    thoughts.append(str(block.get("thinking", "")))
                    if neutral.thought_signature is None and isinstance(block.get("signature"), str):
                        neutral.thought_signature = block["signature"]
            if thoughts:
                neutral.thought = "\n".join(thoughts)
        result.messages.append(neutral)
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            result.tools.append(tool["name"])
            schema = tool.get("input_schema")
            result.tool_schemas[tool["name"]] = schema if isinstance(schema, dict) else {}
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        result.tool_choice = {"auto": "auto", "none": "none", "any": "required"}.get(str(kind))
        if kind == "tool":
            result.tool_choice = str(choice.get("name"))
    output_config = body.get("output_config")
    fmt = output_config.get("format") if isinstance(output_config, dict) else body.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        result.json_schema = schema if isinstance(schema, dict) else {}
    elif any(_JSON_MODE.search(text) for text in result.system):
        result.json_mode = True
    for key in ("temperature", "top_p", "top_k", "max_tokens"):
        if body.get(key) is not None:
            result.options[key] = body[key]
    stop = body.get("stop_sequences")
    if isinstance(stop, list):
        result.options["stop"] = list(stop)
    return result
