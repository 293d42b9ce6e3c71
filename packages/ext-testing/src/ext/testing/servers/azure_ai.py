"""A loopback server speaking the Azure AI Model Inference API (Azure AI Foundry models) over raw HTTP.

The chat body and the SSE stream are the OpenAI Chat Completions shapes, so rendering and decoding come from
:class:`~ext.testing.servers.openai.OpenAIServer`; this module adds what differs on the wire: the routes and the
required ``api-version`` query parameter, ``api-key`` / ``Authorization: Bearer`` auth, the ``extra-parameters``
header that decides what happens to body fields outside the API, the ``/info`` route, Azure's error shape, and
DeepSeek-R1-style ``<think>`` tags in the content.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from ext.testing.script import Fault, Reply, split_words
from ext.testing.servers._azure_ai_embeddings import azure_ai_embedding_routes
from ext.testing.servers._base import (
    RecordedRequest,
    Response,
    Route,
    ScriptItem,
    StreamResponse,
    format_seconds,
    json_response,
)
from ext.testing.servers._rules import Violation, chat_violation, openai_violation
from ext.testing.servers.openai import OpenAIServer

__all__ = ["AZURE_AI_CHAT_PARAMETERS", "AzureAIServer"]

AZURE_AI_CHAT_PARAMETERS = frozenset(
    {
        "messages",
        "stream",
        "frequency_penalty",
        "presence_penalty",
        "temperature",
        "top_p",
        "max_tokens",
        "response_format",
        "stop",
        "tools",
        "tool_choice",
        "seed",
        "model",
        "modalities",
    }
)
"""The body fields of the chat completions API (2024-05-01-preview); anything else is an extra parameter."""

# azure-ai-inference's `ChatCompletionsClient.complete` docstring: temperature and top_p "Supported range is
# [0, 1]", frequency_penalty and presence_penalty "[-2, 2]" (the REST reference gives the same bounds).
_AZURE_RANGES = (
    ("temperature", 0, 1),
    ("top_p", 0, 1),
    ("frequency_penalty", -2, 2),
    ("presence_penalty", -2, 2),
)
# A body that breaks the schema fails the service's request validation, the same validator that refuses extra
# parameters: 422 "Invalid input" with pydantic-style `details` (`loc`, `msg`, `type`).
_SCHEMA_DETAILS: dict[str, tuple[str, str]] = {
    "missing": ("Field required", "missing"),
    "not_array": ("Input should be a valid list", "list_type"),
    "empty": ("List should have at least 1 item after validation, not 0", "too_short"),
    "above_max": ("Input should be less than or equal to {limit}", "less_than_equal"),
    "below_min": ("Input should be greater than or equal to {limit}", "greater_than_equal"),
}
_DEFAULT_MODEL = "Phi-4"
_FAULT_CODES: dict[str, tuple[str, str]] = {
    "rate_limit": ("429", "Requests to the ChatCompletions_Create Operation have exceeded the rate limit."),
    "overloaded": ("ServiceUnavailable", "The service is temporarily unable to process your request."),
    "server_error": ("InternalServerError", "The server had an error while processing your request."),
    "bad_request": ("BadRequest", "Invalid request."),
    "auth": ("401", "Access denied due to invalid subscription key or wrong API endpoint."),
    "not_found": ("unknown_model", "Unknown model."),
    "context_window": (
        "context_length_exceeded",
        "This model's maximum context length is 16384 tokens. However, your messages resulted in 17001 tokens.",
    ),
}
ReasoningStyle = Literal["reasoning_content", "think_tags"]


def _azure_error(code: str, message: str, status: int, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


class AzureAIServer(OpenAIServer):
    """Azure AI Model Inference chat completions, as the service answers.

    Routes: ``POST /chat/completions`` (serverless and managed-compute endpoints) and
    ``POST /models/chat/completions`` (Azure AI Services endpoints, ``https://<resource>.services.ai.azure.com/models``),
    each needing ``?api-version=`` (400 without it, or for a version outside ``api_versions`` when set), and
    ``GET /info`` / ``GET /models/info`` (model name, type, provider). Use ``base_url`` as the client's endpoint for
    the first form and ``base_url + "/models"`` for the second.

    Auth: with ``api_key`` set a request needs ``api-key: <key>`` or ``Authorization: Bearer <key>``; with
    ``bearer_token`` set, ``Authorization: Bearer <token>`` (what a token credential sends). Wrong or missing: 401.

    Extra parameters: body fields outside :data:`AZURE_AI_CHAT_PARAMETERS` are refused with 422 unless the request
    carries ``extra-parameters: pass-through`` (kept, so ``stream_options.include_usage`` then adds the usage chunk)
    or ``drop`` (removed from ``request.json`` before the reply is rendered; ``request.body`` keeps the bytes
    sent); ``error`` refuses them as the default does.

    ``reasoning`` says how ``Reply.thought`` is sent: ``reasoning_content`` (a message / delta field) or
    ``think_tags`` (``<think>...</think>`` before the answer in the content, as DeepSeek-R1 on Azure does).

    With ``strict`` (the default) the server refuses what the service refuses (:meth:`reject`): a missing,
    non-array or empty ``messages``, ``temperature`` or ``top_p`` outside 0..1 or a penalty outside -2..2 (422
    ``Invalid input``), and ``tool_choice`` without ``tools`` or a broken tool-call/tool-result pairing (400).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        bearer_token: str | None = None,
        model_name: str = _DEFAULT_MODEL,
        model_provider: str = "Microsoft",
        api_versions: Sequence[str] | None = None,
        reasoning: ReasoningStyle = "reasoning_content",
        default: ScriptItem | None = None,
        record: bool = True,
        strict: bool = True,
    ) -> None:
        if reasoning not in ("reasoning_content", "think_tags"):
            raise ValueError(f"reasoning must be 'reasoning_content' or 'think_tags', got {reasoning!r}")
        self.bearer_token = bearer_token
        self.model_name = model_name
        self.model_provider = model_provider
        self.api_versions = None if api_versions is None else frozenset(api_versions)
        self.reasoning = reasoning
        self.max_embedding_inputs = 2048  # the OpenAI models' limit; Cohere Embed v3 deployments take 96
        super().__init__(api_key=api_key, models=(model_name,), default=default, record=record, strict=strict)

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/chat/completions", "chat"),
            Route("POST", "/models/chat/completions", "chat"),
            Route("GET", "/info", "info", self._info),
            Route("GET", "/models/info", "info", self._info),
            *azure_ai_embedding_routes(self),
        )

    # -- checks --------------------------------------------------------------------------------------------------

    def _version_failure(self, request: RecordedRequest) -> Response | None:
        version = request.query_value("api-version")
        if not version:
            return json_response(
                _azure_error("BadRequest", "Missing required query parameter: api-version", 400),
                400,
                self._request_id_headers(),
            )
        if self.api_versions is not None and version not in self.api_versions:
            message = f"Unsupported api-version '{version}'. Supported: {', '.join(sorted(self.api_versions))}."
            return json_response(_azure_error("BadRequest", message, 400), 400, self._request_id_headers())
        return None

    def _auth_failure(self, request: RecordedRequest) -> Response | None:
        if self.api_key is None and self.bearer_token is None:
            return None
        headers = request.headers
        authorization = headers.get("authorization", "")
        bearer = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
        if self.api_key is not None and self.api_key in (headers.get("api-key"), bearer):
            return None
        if self.bearer_token is not None and bearer == self.bearer_token:
            return None
        message = (
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
            "for an active subscription and use a correct regional API endpoint for your resource."
        )
        return json_response(_azure_error("401", message, 401), 401, self._request_id_headers())

    def _extra_failure(self, request: RecordedRequest) -> Response | None:
        body = request.json
        if not isinstance(body, dict):
            return None
        extra = [key for key in body if key not in AZURE_AI_CHAT_PARAMETERS]
        if not extra:
            return None
        mode = request.headers.get("extra-parameters", "error").lower()
        if mode == "pass-through":
            return None
        if mode == "drop":
            for key in extra:
                del body[key]
            return None
        details = [
            {"loc": ["body", key], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"} for key in extra
        ]
        message = (
            f"Extra parameters {extra} are not allowed when extra-parameters is not set or set to be 'error'. "
            "Set extra-parameters to 'pass-through' to pass to the model."
        )
        return json_response(_azure_error("Invalid input", message, 422, details), 422, self._request_id_headers())

    def check(self, request: RecordedRequest) -> Response | None:
        failure = self._version_failure(request) or self._auth_failure(request)
        if failure is not None:
            return failure
        if not isinstance(request.json, dict):
            message = "Invalid JSON body: the request body must be a JSON object."
            return json_response(_azure_error("BadRequest", message, 400), 400, self._request_id_headers())
        failure = self._extra_failure(request)
        if failure is None and self.strict and request.route == "chat":
            violation = chat_violation(request.json, _AZURE_RANGES)
            if violation is not None:
                return self.reject(violation)
        return failure

    def reject(self, violation: Violation) -> Response:
        """A schema violation is the service's 422 ``Invalid input`` with pydantic-style ``details``; a request
        that fits the schema but breaks the tool pairing or sends ``tool_choice`` without ``tools`` is the
        model's 400, worded as the Chat Completions API words it. Both in Azure's ``{"error": {"code",
        "message", "status"}}`` shape, whose ``code`` and ``message`` azure-core's ``HttpResponseError`` reads
        (``azure.core.exceptions.ODataV4Format``)."""
        detail = _SCHEMA_DETAILS.get(violation.kind)
        if detail is None:
            message = openai_violation(violation)["error"]["message"]
            return json_response(_azure_error("Bad Request", message, 400), 400, self._request_id_headers())
        msg, type_ = detail
        limit = violation.limit
        msg = msg.format(limit=int(limit) if limit is not None and float(limit).is_integer() else limit)
        loc = ["body", violation.param]
        details = [{"loc": loc, "msg": msg, "type": type_}]
        message = f"Invalid input: {'.'.join(loc)}: {msg}"
        return json_response(_azure_error("Invalid input", message, 422, details), 422, self._request_id_headers())

    def _info(self, request: RecordedRequest) -> Response:
        failure = self._version_failure(request) or self._auth_failure(request)
        if failure is not None:
            return failure
        info = {
            "model_name": self.model_name,
            "model_type": "chat-completion",
            "model_provider_name": self.model_provider,
        }
        return json_response(info, headers=self._request_id_headers())

    # -- rendering -----------------------------------------------------------------------------------------------

    def _model_of(self, request: RecordedRequest) -> str:
        body = request.json if isinstance(request.json, dict) else {}
        model = body.get("model")
        return model if isinstance(model, str) and model else self.model_name

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        return json_response(_azure_error(str(status), message, status), status, self._request_id_headers())

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        code, message = _FAULT_CODES.get(fault.kind, ("InternalServerError", "Scripted failure."))
        status = self.fault_status(fault)
        headers = self._request_id_headers()
        if fault.retry_after is not None:
            headers["retry-after"] = format_seconds(fault.retry_after)
        return json_response(_azure_error(code, fault.message or message, status), status, headers)

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        if self.reasoning == "think_tags" and reply.thought:
            # The thought goes into the content, tags included, and streams as pieces of it.
            answer = reply.text_chunks
            chunks = ["<think>", *split_words(reply.thought), "</think>\n\n", *answer]
            reply = dataclasses.replace(reply, text="", chunks=chunks, thought=None)
        return super().render(reply, request)
