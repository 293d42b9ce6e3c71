"""A loopback server speaking OpenAI Chat Completions (and its Azure OpenAI deployment routes) over raw HTTP."""

from __future__ import annotations

import dataclasses
import itertools
import json as _json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from ext.testing.script import (
    Fault,
    NeutralMessage,
    NeutralRequest,
    NeutralToolResult,
    Reply,
    ToolCallSpec,
    split_fragments,
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
from ext.testing.servers._embedding_script import EmbeddingScript
from ext.testing.servers._openai_embeddings import OPENAI_EMBEDDING_SIZES, openai_embedding_routes
from ext.testing.servers._rules import OPENAI_RANGES, Violation, chat_violation, openai_error_body, openai_violation

__all__ = ["OpenAIServer", "chat_violation", "openai_violation"]

_DEFAULT_MODEL = "gpt-4o-mini"
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter"}
_FAULT_DEFAULTS: dict[str, tuple[str, str, str | None]] = {
    # kind: (message, type, code)
    "rate_limit": (
        "Rate limit reached for requests per min (RPM). Please try again later.",
        "requests",
        "rate_limit_exceeded",
    ),
    "overloaded": ("The server is overloaded or not ready yet.", "server_error", None),
    "server_error": (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    "bad_request": ("Invalid request.", "invalid_request_error", None),
    "auth": ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    "not_found": (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    # OpenAI's answer to a prompt longer than the model's window (code `context_length_exceeded`, param messages).
    "context_window": (
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
        "Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
    ),
}
_OPTION_KEYS = ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "seed")
_DONE = b"data: [DONE]\n\n"
_CHAT_ROUTES = frozenset({"chat", "azure_chat"})  # the request rules are the chat body's


def _content_text(content: Any) -> tuple[str, int]:
    """Text (parts joined with newlines) and image count of a message ``content``."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                images += 1
            elif kind == "refusal":
                texts.append(str(part.get("refusal", "")))
    return "\n".join(texts), images


def _parse_arguments(arguments: Any) -> str | dict[str, Any]:
    """Wire arguments as a dict when they are a JSON object, else the raw string."""
    if isinstance(arguments, dict):
        return arguments
    text = arguments if isinstance(arguments, str) else _json.dumps(arguments)
    try:
        value = _json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


class OpenAIServer(LoopbackServer):
    """OpenAI Chat Completions over HTTP, as the real API answers.

    Routes: ``POST /v1/chat/completions`` (also ``/chat/completions``), Azure's
    ``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` (404 without ``api-version``; the
    deployment is in ``request.params["deployment"]``), ``GET /v1/models`` and ``GET /v1/models/{model}``.
    With ``api_key`` set, requests must carry ``Authorization: Bearer <api_key>`` (Azure route: ``api-key``
    header); ``azure_ad_token`` is also accepted as a bearer token. ``Reply.thought`` is sent as
    ``reasoning_content``; ``thought_signature`` has no Chat Completions field and is not sent.

    ``tools_need_tool_choice=True`` behaves like llama-cpp-python's OpenAI-compatible server with the
    ``chatml-function-calling`` chat format: a request whose ``tool_choice`` is absent (or ``"none"``) is answered
    as if it carried no tools, so the model never calls one: a scripted reply's tool calls are dropped and the
    answer is its text with ``finish_reason`` ``"stop"``. :attr:`tools_ignored` counts the requests whose tools
    were ignored.

    With ``strict`` (the default, except in the llama-cpp mode, whose server checks none of this) the server
    answers 400 ``invalid_request_error`` with the API's message, ``param`` and ``code`` to what the API refuses
    (:func:`chat_violation`): a missing, non-array or empty ``messages``; ``temperature`` outside 0..2, ``top_p``
    outside 0..1, a penalty outside -2..2; ``tool_choice`` without ``tools``; a ``tool`` message that answers no
    call of the assistant message before it; an assistant message whose ``tool_calls`` are not all answered by
    ``tool`` messages before the next other message. :meth:`reject` renders the answer.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        azure_ad_token: str | None = None,
        models: Sequence[str] = (_DEFAULT_MODEL,),
        default: ScriptItem | None = None,
        record: bool = True,
        tools_need_tool_choice: bool = False,
        strict: bool | None = None,
    ) -> None:
        self.api_key = api_key
        # llama-cpp-python's server (the tools_need_tool_choice mode) renders whatever it gets: none of the rules.
        self.strict = not tools_need_tool_choice if strict is None else strict
        self.tools_need_tool_choice = tools_need_tool_choice
        self.tools_ignored = 0
        self.azure_ad_token = azure_ad_token
        self.models = list(models)
        self.embeddings = EmbeddingScript(OPENAI_EMBEDDING_SIZES)
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(4)
        super().__init__(default=default, record=record)

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/v1/chat/completions", "chat"),
            Route("POST", "/chat/completions", "chat"),
            Route("POST", "/openai/deployments/{deployment}/chat/completions", "azure_chat"),
            Route("GET", "/v1/models", "models", self._list_models),
            Route("GET", "/models", "models", self._list_models),
            Route("GET", "/v1/models/{model}", "model", self._get_model),
            *openai_embedding_routes(self),
        )

    # -- helpers -------------------------------------------------------------------------------------------------

    def _next_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids):016d}"

    def _request_id_headers(self) -> dict[str, str]:
        return {"x-request-id": f"req_{self._next_id()}"}

    def _model_of(self, request: RecordedRequest) -> str:
        body = request.json if isinstance(request.json, dict) else {}
        model = body.get("model")
        if isinstance(model, str) and model:
            return model
        return request.params.get("deployment") or _DEFAULT_MODEL

    def _model_object(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 1700000000, "owned_by": "system"}

    def _list_models(self, request: RecordedRequest) -> Response:
        data = [self._model_object(model) for model in self.models]
        denied = self._auth_failure(request)
        return denied or json_response({"object": "list", "data": data}, headers=self._request_id_headers())

    def _get_model(self, request: RecordedRequest) -> Response:
        denied = self._auth_failure(request)
        if denied is not None:
            return denied
        model = request.params["model"]
        if model not in self.models:
            body = openai_error_body(
                f"The model '{model}' does not exist", "invalid_request_error", "model_not_found", "model"
            )
            return json_response(body, 404, self._request_id_headers())
        return json_response(self._model_object(model), headers=self._request_id_headers())

    def _auth_failure(self, request: RecordedRequest) -> Response | None:
        if self.api_key is None and self.azure_ad_token is None:
            return None
        headers = request.headers
        authorization = headers.get("authorization", "")
        bearer = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
        if request.route == "azure_chat":
            if (self.api_key is not None and headers.get("api-key") == self.api_key) or (
                self.azure_ad_token is not None and bearer == self.azure_ad_token
            ):
                return None
            message = (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid "
                "key for an active subscription and use a correct regional API endpoint for your resource."
            )
            return json_response({"error": {"code": "401", "message": message}}, 401, self._request_id_headers())
        if bearer is not None and bearer in (self.api_key, self.azure_ad_token):
            return None
        if bearer:
            shown = bearer[:3] + "*" * max(0, len(bearer) - 7) + bearer[-4:] if len(bearer) > 7 else "****"
            body = openai_error_body(
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            )
        else:
            body = openai_error_body(
                "You didn't provide an API key. You need to provide your API key in an Authorization header using "
                "Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                "invalid_request_error",
            )
        return json_response(body, 401, self._request_id_headers())

    # -- protocol hooks ------------------------------------------------------------------------------------------

    def check(self, request: RecordedRequest) -> Response | None:
        if request.route == "azure_chat" and not request.query_value("api-version"):
            return json_response({"error": {"code": "404", "message": "Resource not found"}}, 404)
        denied = self._auth_failure(request)
        if denied is not None:
            return denied
        if not isinstance(request.json, dict):
            body = openai_error_body(
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid "
                "JSON.)",
                "invalid_request_error",
            )
            return json_response(body, 400, self._request_id_headers())
        if self.strict and request.route in _CHAT_ROUTES:
            violation = chat_violation(request.json, OPENAI_RANGES)
            if violation is not None:
                return self.reject(violation)
        return None

    def reject(self, violation: Violation) -> Response:
        """The service's answer to a request that breaks a rule (OpenAI: 400 ``invalid_request_error``)."""
        return json_response(openai_violation(violation), 400, self._request_id_headers())

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        return json_response(openai_error_body(message, "invalid_request_error"), status, self._request_id_headers())

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        message, type_, code = _FAULT_DEFAULTS.get(fault.kind, ("Scripted failure.", "server_error", None))
        headers = self._request_id_headers()
        if fault.retry_after is not None:
            headers.update(self.fault_headers(fault))
            headers["retry-after-ms"] = str(round(fault.retry_after * 1000))
        return json_response(
            openai_error_body(fault.message or message, type_, code), self.fault_status(fault), headers
        )

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        body = request.json if isinstance(request.json, dict) else {}
        if self.tools_need_tool_choice and body.get("tools") and body.get("tool_choice") in (None, "none"):
            # llama-cpp-python renders the prompt without the tools here: the model cannot call one.
            self.tools_ignored += 1
            finish = None if reply.finish_reason == "tool_calls" else reply.finish_reason
            reply = dataclasses.replace(reply, tool_calls=[], finish_reason=finish)
        model = self._model_of(request)
        completion_id = f"chatcmpl-{self._next_id()}"
        created = int(time.time())
        if body.get("stream"):
            stream_options = body.get("stream_options")
            include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
            frames = self._stream_frames(reply, completion_id, created, model, include_usage)
            return StreamResponse(frames, headers=self._request_id_headers())
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if (reply.text or not reply.tool_calls) else None,
            "refusal": None,
            "annotations": [],
        }
        if reply.thought is not None:
            message["reasoning_content"] = reply.thought
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in reply.tool_calls
            ]
        obj = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish(reply)},
            ],
            "usage": self._usage(reply),
            "service_tier": "default",
            "system_fingerprint": "fp_loopback",
        }
        return json_response(obj, headers=self._request_id_headers())

    @staticmethod
    def _finish(reply: Reply) -> str:
        reason = reply.resolved_finish_reason
        return _FINISH.get(reason, reason)

    @staticmethod
    def _usage(reply: Reply) -> dict[str, Any]:
        return {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.total_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reply.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _stream_frames(
        self, reply: Reply, completion_id: str, created: int, model: str, include_usage: bool
    ) -> list[bytes]:
        def frame(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
            obj: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": "fp_loopback",
                "choices": choices,
            }
            if include_usage:  # then every chunk carries `usage`: null but the last, which has it
                obj["usage"] = usage
            return sse_frame(obj)

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return frame([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])

        frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
        if reply.thought:
            frames.extend(chunk({"reasoning_content": piece}) for piece in split_words(reply.thought))
        frames.extend(chunk({"content": piece}) for piece in reply.text_chunks)
        for index, call in enumerate(reply.tool_calls):
            head = {
                "index": index,
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            frames.append(chunk({"tool_calls": [head]}))
            frames.extend(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                for fragment in split_fragments(call.arguments_json, 4)
            )
        frames.append(chunk({}, self._finish(reply)))
        if include_usage:
            frames.append(frame([], self._usage(reply)))
        frames.append(_DONE)
        return frames

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        """Decode a Chat Completions request body (system and developer messages go to ``system``)."""
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        model = body.get("model")
        result = NeutralRequest(
            model=model if isinstance(model, str) else request.params.get("deployment"),
            stream=bool(body.get("stream")),
            raw=body,
        )
        for position, message in enumerate(body.get("messages") or []):
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            text, images = _content_text(message.get("content"))
            if role in ("system", "developer"):
                result.system.append(text)
            elif role == "tool":
                result_item = NeutralToolResult(call_id=str(message.get("tool_call_id", "")), content=text)
                result.messages.append(NeutralMessage("tool", tool_results=[result_item], position=position))
            elif role == "assistant":
                calls = [
                    ToolCallSpec(
                        name=str(call.get("function", {}).get("name", "")),
                        arguments=_parse_arguments(call.get("function", {}).get("arguments", "")),
                        id=str(call.get("id", "")),
                    )
                    for call in message.get("tool_calls") or []
                    if isinstance(call, dict)
                ]
                thought = message.get("reasoning_content")
                result.messages.append(
                    NeutralMessage(
                        "assistant",
                        text,
                        images,
                        tool_calls=calls,
                        thought=thought if isinstance(thought, str) else None,
                        position=position,
                    )
                )
            else:
                result.messages.append(NeutralMessage(str(role), text, images, position=position))
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            spec = tool.get("function") if tool.get("type", "function") == "function" else tool.get(tool.get("type"))
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                result.tools.append(spec["name"])
                parameters = spec.get("parameters")
                result.tool_schemas[spec["name"]] = parameters if isinstance(parameters, dict) else {}
        result.tool_choice = self._decode_tool_choice(body.get("tool_choice"))
        response_format = body.get("response_format")
        if isinstance(response_format, dict):
            if response_format.get("type") == "json_object":
                result.json_mode = True
            elif response_format.get("type") == "json_schema":
                schema = (response_format.get("json_schema") or {}).get("schema")
                result.json_schema = schema if isinstance(schema, dict) else {}
        for key in _OPTION_KEYS:
            if body.get(key) is not None:
                result.options[key] = body[key]
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None:
            result.options["max_tokens"] = max_tokens
        stop = body.get("stop")
        if stop is not None:
            result.options["stop"] = [stop] if isinstance(stop, str) else list(stop)
        return result

    @staticmethod
    def _decode_tool_choice(choice: Any) -> str | None:
        if choice is None or isinstance(choice, str):
            return choice
        if isinstance(choice, dict):
            kind = choice.get("type")
            if kind == "allowed_tools":
                mode = (choice.get("allowed_tools") or {}).get("mode")
                return mode if isinstance(mode, str) else "auto"
            named = choice.get(kind) if isinstance(kind, str) else None
            if isinstance(named, dict) and isinstance(named.get("name"), str):
                return str(named["name"])
        return None
