"""A loopback server speaking Ollama's native API (``/api/chat`` JSON and NDJSON streams) over raw HTTP."""

from __future__ import annotations

import json as _json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

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
    ndjson_frame,
)
from ext.testing.servers._embedding_script import EmbeddingScript
from ext.testing.servers._ollama_embeddings import OLLAMA_EMBEDDING_SIZES, ollama_embedding_routes

__all__ = ["OllamaServer", "body_type_error", "format_error", "model_not_found_message", "pair_tool_results"]

# Ollama has no tool-call or content-filter stop: a turn that ends in tool calls says "stop".
_DONE_REASON = {"stop": "stop", "length": "length", "tool_calls": "stop", "content_filter": "stop"}
_FAULT_MESSAGES = {
    "rate_limit": "too many requests",
    "overloaded": "server busy, please try again.  maximum pending requests exceeded",
    "server_error": "llama runner process has terminated: exit status 2",
    "bad_request": "invalid request",
    "auth": "unauthorized",
}
_OPTION_KEYS = ("temperature", "top_p", "top_k", "seed", "frequency_penalty", "presence_penalty")
_NDJSON = "application/x-ndjson"


def _go_json_kind(value: Any) -> str:
    """The JSON kind Go's encoding/json names in an ``UnmarshalTypeError``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_type_error(value: Any, struct: str, path: str, go_type: str) -> str:
    # Go's encoding/json `UnmarshalTypeError.Error()`: the innermost struct, then the field path from the root.
    return f"json: cannot unmarshal {_go_json_kind(value)} into Go struct field {struct}.{path} of type {go_type}"


def body_type_error(body: Mapping[str, Any]) -> str | None:
    """The error ``ollama serve`` answers (400, via gin's ``ShouldBindJSON``) when a chat body does not decode
    into ``api.ChatRequest``, or None. Ollama's api/types.go: ``Message.Content`` is a ``string``,
    ``ToolCallFunction.Arguments`` a ``ToolCallFunctionArguments`` (``map[string]any``: a JSON object; a JSON
    string such as OpenAI's ``"{\"a\": 1}"`` fails), ``messages`` an array of ``Message`` objects. Unknown fields
    (``id``, ``tool_call_id``) are ignored, as Go's decoder does."""
    messages = body.get("messages")
    if messages is None:
        return None
    if not isinstance(messages, list):
        return _go_type_error(messages, "ChatRequest", "messages", "[]api.Message")
    for message in messages:
        if not isinstance(message, dict):
            return _go_type_error(message, "ChatRequest", "messages", "api.Message")
        for key in ("role", "content", "thinking", "tool_name"):
            value = message.get(key)
            if value is not None and not isinstance(value, str):
                return _go_type_error(value, "Message", f"messages.{key}", "string")
        calls = message.get("tool_calls")
        if calls is None:
            continue
        if not isinstance(calls, list):
            return _go_type_error(calls, "Message", "messages.tool_calls", "[]api.ToolCall")
        for call in calls:
            if not isinstance(call, dict):
                return _go_type_error(call, "Message", "messages.tool_calls", "api.ToolCall")
            function = call.get("function")
            if function is not None and not isinstance(function, dict):
                return _go_type_error(function, "ToolCall", "messages.tool_calls.function", "api.ToolCallFunction")
            if function is None:
                continue
            arguments = function.get("arguments")
            if arguments is not None and not isinstance(arguments, dict):
                return _go_type_error(
                    arguments,
                    "ToolCallFunction",
                    "messages.tool_calls.function.arguments",
                    "api.ToolCallFunctionArguments",
                )
    return None


def format_error(fmt: Any) -> str | None:
    """The error ``ollama serve`` gives for a chat's ``format``, or None: absent, null, ``""``, ``"json"`` or a JSON
    object (a JSON schema, turned into a grammar) are taken; anything else is refused (llm/server.go, Completion:
    ``invalid format: %q; expected "json" or a valid JSON Schema object``, %q of the raw JSON)."""
    if fmt is None or fmt == "" or fmt == "json" or isinstance(fmt, dict):
        return None
    raw = _json.dumps(fmt, separators=(",", ":"))
    return f'invalid format: {_json.dumps(raw)}; expected "json" or a valid JSON Schema object'


def pair_tool_results(messages: Sequence[Any]) -> dict[int, int]:
    """Which call of the assistant turn before it each ``tool`` message answers, the way Ollama pairs them:
    by ``tool_name`` (the first call of that name not answered yet) and otherwise by position (the next call not
    answered). Ollama's wire has no call ids. Returns ``{tool message index: call index}``; a tool message with
    no call left to answer is absent."""
    pairs: dict[int, int] = {}
    calls: list[str] = []
    answered: set[int] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            raw = message.get("tool_calls") or []
            calls = [str((c.get("function") or {}).get("name", "")) if isinstance(c, dict) else "" for c in raw]
            answered = set()
        elif role == "tool":
            name = message.get("tool_name")
            open_calls = [i for i in range(len(calls)) if i not in answered]
            named = [i for i in open_calls if calls[i] == name] if isinstance(name, str) and name else []
            chosen = named[0] if named else (open_calls[0] if open_calls else None)
            if chosen is not None:
                answered.add(chosen)
                pairs[index] = chosen
        elif role == "user":
            calls, answered = [], set()
    return pairs


def model_not_found_message(model: str) -> str:
    """Ollama's 404 text for a model that is not pulled."""
    return f'model "{model}" not found, try pulling it first'


def _full_name(model: str) -> str:
    """Ollama names without a tag mean ``:latest``."""
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def _created_at() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond:06d}000Z"


def _wire_arguments(call: ToolCallSpec) -> Any:
    """Ollama sends arguments as a JSON object; a scripted string that is not one goes as is."""
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = _json.loads(call.arguments)
    except ValueError:
        return call.arguments
    return value if isinstance(value, dict) else call.arguments


class OllamaServer(LoopbackServer):
    """Ollama's native API, as a local ``ollama serve`` answers it.

    ``POST /api/chat`` is scripted: a JSON object when the body says ``"stream": false``, else (Ollama's default)
    an ``application/x-ndjson`` stream of parts, each with ``message.content`` and/or ``message.thinking``; tool
    calls come whole (arguments as a JSON object, no call id, an ``index``), one part per call; the last part has
    ``done: true``, ``done_reason`` and the token counts (``prompt_eval_count``, ``eval_count``), which only it
    carries. A turn that ends in tool calls says ``done_reason: "stop"``, as Ollama does. Errors are
    ``{"error": "..."}`` with Ollama's statuses; a chat for a model not in ``models`` (when given) is a 404
    ``model "x" not found, try pulling it first`` before any script item is used, and so is ``Fault("not_found")``.
    Also served: ``GET /api/tags``, ``POST /api/show``, ``GET /api/version`` and ``GET /`` (``Ollama is running``).
    ``Reply.thought_signature`` has no Ollama field and is not sent. Ollama itself has no auth; with
    ``require_headers`` the server acts as the authenticating proxy a remote Ollama sits behind: a request without
    those exact header values gets 401 ``{"error": "unauthorized"}``.

    As strict as ``ollama serve``, and no stricter: a body that does not decode into Ollama's request type (tool
    call ``arguments`` that are not a JSON object, a non-string ``content``) is a 400 with Go's decoding error
    (:func:`body_type_error`); an empty ``messages`` only loads the model (``done_reason: "load"``, no script item
    used). Ollama checks no tool-call pairing, no option ranges and has no ``tool_choice`` (an unknown field, so
    ignored): those requests are answered.
    """

    def __init__(
        self,
        *,
        models: Sequence[str] | None = None,
        capabilities: Mapping[str, Sequence[str]] | None = None,
        context_length: int = 131072,
        require_headers: Mapping[str, str] | None = None,
        default: ScriptItem | None = None,
        record: bool = True,
    ) -> None:
        self.models = [_full_name(m) for m in models] if models is not None else None
        self.capabilities = {_full_name(k): list(v) for k, v in (capabilities or {}).items()}
        self.context_length = context_length
        self.require_headers = dict(require_headers or {})
        self.embeddings = EmbeddingScript(OLLAMA_EMBEDDING_SIZES)
        super().__init__(default=default, record=record)

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/api/chat", "chat"),
            *ollama_embedding_routes(self),
            Route("GET", "/api/tags", "tags", self._tags),
            Route("POST", "/api/show", "show", self._show),
            Route("GET", "/api/version", "version", lambda _r: json_response({"version": "0.12.6"})),
            Route("GET", "/", "root", lambda _r: Response(body=b"Ollama is running", content_type="text/plain")),
        )

    # -- model listing -------------------------------------------------------------------------------------------

    def is_pulled(self, model: str) -> bool:
        """Whether a chat for ``model`` is served (every name when ``models`` was not given)."""
        return self.models is None or _full_name(model) in self.models

    def _tags(self, request: RecordedRequest) -> Response:
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        entries = [
            {
                "name": name,
                "model": name,
                "modified_at": "2026-11-01T10:00:00.000000000Z",
                "size": 2019393189,
                "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
                "details": self._details(name),
            }
            for name in self.models or []
        ]
        return json_response({"models": entries})

    def _details(self, name: str) -> dict[str, Any]:
        family = name.split(":", 1)[0].rsplit("/", 1)[-1]
        return {
            "parent_model": "",
            "format": "gguf",
            "family": family,
            "families": [family],
            "parameter_size": "3.2B",
            "quantization_level": "Q4_K_M",
        }

    def _show(self, request: RecordedRequest) -> Response:
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        body = request.json if isinstance(request.json, dict) else {}
        model = body.get("model") or body.get("name")
        if not isinstance(model, str) or not model:
            return json_response({"error": "model is required"}, 400)
        if not self.is_pulled(model):
            return json_response({"error": f"model '{model}' not found"}, 404)
        name = _full_name(model)
        capabilities = self.capabilities.get(name, ["completion", "tools"])
        return json_response(
            {
                "modelfile": f"FROM {name}\n",
                "parameters": 'stop "<|eot_id|>"',
                "template": "{{ .Prompt }}",
                "details": self._details(name),
                "model_info": {"general.architecture": "llama", "llama.context_length": self.context_length},
                "capabilities": capabilities,
                "modified_at": "2026-11-01T10:00:00.000000000Z",
            }
        )

    # -- protocol hooks ------------------------------------------------------------------------------------------

    def _unauthorized(self, request: RecordedRequest) -> Response | None:
        for name, value in self.require_headers.items():
            if request.headers.get(name) != value:
                return json_response({"error": "unauthorized"}, 401)
        return None

    def check(self, request: RecordedRequest) -> Response | None:
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        body = request.json
        if not isinstance(body, dict):
            return json_response({"error": "invalid character looking for beginning of value"}, 400)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return json_response({"error": "model is required"}, 400)
        problem = body_type_error(body)
        if problem is not None:
            return json_response({"error": problem}, 400)
        if not self.is_pulled(model):
            return json_response({"error": model_not_found_message(model)}, 404)
        if body.get("tools") and "tools" not in self.capabilities.get(_full_name(model), ["tools"]):
            # server/sched.go scheduleRunner -> images.go Model.CheckCapabilities (errCapabilities "does not
            # support" + errCapabilityTools "tools", prefixed with the model's full name); routes.go
            # handleScheduleError answers it with 400.
            return json_response(
                {"error": f"registry.ollama.ai/library/{_full_name(model)} does not support tools"}, 400
            )
        problem = format_error(body.get("format"))
        if problem is not None:
            # llm/server.go Completion: the error of `format` reaches the client through ChatHandler as a 500.
            return json_response({"error": problem}, 500)
        if not body.get("messages"):
            # docs/api.md, "Load a model": an empty `messages` loads the model (`keep_alive: 0` unloads it) and
            # answers one done message; no generation, so no script item is used.
            unload = body.get("keep_alive") in (0, "0", "0s")
            done = {
                "model": model,
                "created_at": _created_at(),
                "message": {"role": "assistant", "content": ""},
                "done_reason": "unload" if unload else "load",
                "done": True,
            }
            return json_response(done)
        return None

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        if status == 404 and message.startswith("Invalid URL"):
            return Response(404, b"404 page not found", "text/plain")  # Go's default mux
        return json_response({"error": message}, status)

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        message = fault.message
        if not message:
            if fault.kind == "not_found":
                body = request.json if isinstance(request.json, dict) else {}
                message = model_not_found_message(str(body.get("model") or "model"))
            else:
                message = _FAULT_MESSAGES.get(fault.kind, "scripted failure")
        return json_response({"error": message}, self.fault_status(fault), self.fault_headers(fault))

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "llama3.2")
        done_reason = _DONE_REASON.get(reply.resolved_finish_reason, reply.resolved_finish_reason)
        calls = [
            {"function": {"index": index, "name": call.name, "arguments": _wire_arguments(call)}}
            for index, call in enumerate(reply.tool_calls)
        ]
        if body.get("stream", True) is False:
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.thought:
                message["thinking"] = reply.thought
            if calls:
                message["tool_calls"] = calls
            return json_response(self._final(model, message, done_reason, reply))
        return StreamResponse(self._frames(model, reply, calls, done_reason), content_type=_NDJSON)

    def _final(self, model: str, message: dict[str, Any], done_reason: str, reply: Reply) -> dict[str, Any]:
        return {
            "model": model,
            "created_at": _created_at(),
            "message": message,
            "done_reason": done_reason,
            "done": True,
            "total_duration": 1_234_567_890,
            "load_duration": 12_345_678,
            "prompt_eval_count": reply.prompt_tokens,
            "prompt_eval_duration": 23_456_789,
            "eval_count": reply.completion_tokens,
            "eval_duration": 987_654_321,
        }

    def _frames(self, model: str, reply: Reply, calls: list[dict[str, Any]], done_reason: str) -> list[bytes]:
        created = _created_at()

        def part(message: dict[str, Any]) -> bytes:
            return ndjson_frame({"model": model, "created_at": created, "message": message, "done": False})

        frames = [
            part({"role": "assistant", "content": "", "thinking": piece}) for piece in split_words(reply.thought or "")
        ]
        frames.extend(part({"role": "assistant", "content": piece}) for piece in reply.text_chunks)
        frames.extend(part({"role": "assistant", "content": "", "tool_calls": [call]}) for call in calls)
        frames.append(ndjson_frame(self._final(model, {"role": "assistant", "content": ""}, done_reason, reply)))
        return frames

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        """Decode an ``/api/chat`` body. Ollama's wire has no call ids (an ``id`` or ``tool_call_id`` a client adds
        is ignored, as Ollama ignores it): each call gets ``call_<n>``, and a tool message's ``call_id`` is the id of
        the call :func:`pair_tool_results` pairs it with (by ``tool_name``, else by position), or ``""``."""
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        model = body.get("model")
        result = NeutralRequest(
            model=model if isinstance(model, str) else None, stream=body.get("stream", True) is not False, raw=body
        )
        messages = body.get("messages") or []
        pairs = pair_tool_results(messages)
        last_calls: list[ToolCallSpec] = []
        for position, message in enumerate(messages):
            if not isinstance(message, dict):
                continue
            role = str(message.get("role"))
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            images = message.get("images")
            image_count = len(images) if isinstance(images, list) else 0
            if role == "system":
                result.system.append(text)
            elif role == "assistant":
                last_calls = [
                    ToolCallSpec(
                        name=str(call.get("function", {}).get("name", "")),
                        arguments=call.get("function", {}).get("arguments", {}),
                    )
                    for call in message.get("tool_calls") or []
                    if isinstance(call, dict)
                ]
                thinking = message.get("thinking")
                result.messages.append(
                    NeutralMessage(
                        "assistant",
                        text,
                        image_count,
                        tool_calls=last_calls,
                        thought=thinking if isinstance(thinking, str) else None,
                        position=position,
                    )
                )
            elif role == "tool":
                paired = pairs.get(position)
                call_id = last_calls[paired].call_id if paired is not None and paired < len(last_calls) else ""
                item = NeutralToolResult(call_id=call_id, content=text)
                result.messages.append(NeutralMessage("tool", tool_results=[item], position=position))
            else:
                result.messages.append(NeutralMessage(role, text, image_count, position=position))
        for tool in body.get("tools") or []:
            spec = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                result.tools.append(spec["name"])
                parameters = spec.get("parameters")
                result.tool_schemas[spec["name"]] = parameters if isinstance(parameters, dict) else {}
        fmt = body.get("format")
        if fmt == "json":
            result.json_mode = True
        elif isinstance(fmt, dict):
            result.json_schema = fmt
        options = body.get("options")
        if isinstance(options, dict):
            for key in _OPTION_KEYS:
                if options.get(key) is not None:
                    result.options[key] = options[key]
            if options.get("num_predict") is not None:
                result.options["max_tokens"] = options["num_predict"]
            stop = options.get("stop")
            if stop is not None:
                result.options["stop"] = [stop] if isinstance(stop, str) else list(stop)
        return result
