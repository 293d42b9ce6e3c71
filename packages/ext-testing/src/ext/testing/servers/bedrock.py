"""A loopback server speaking the AWS Bedrock runtime API for Anthropic models (InvokeModel,
InvokeModelWithResponseStream, CountTokens), with SigV4 verification and the AWS event-stream framing."""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import json as _json
import re
import struct
import uuid
import zlib
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import quote

from ext.testing.script import Fault, NeutralRequest, Reply
from ext.testing.servers._base import RecordedRequest, Response, Route, ScriptItem, StreamResponse, json_response
from ext.testing.servers.anthropic import (
    AnthropicServer,
    anthropic_message_json,
    anthropic_stream_events,
    decode_messages_body,
)

__all__ = ["BEDROCK_ANTHROPIC_VERSION", "BedrockServer", "event_stream_message", "sigv4_signature"]

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
EVENT_STREAM = "application/vnd.amazon.eventstream"
_MAX_SKEW = datetime.timedelta(minutes=15)
_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$")

# Fault kind: (HTTP status, error code, message), as Bedrock answers.
_FAULTS: dict[str, tuple[int, str, str]] = {
    "rate_limit": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
    "overloaded": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    "server_error": (500, "InternalServerException", "The server encountered an internal error."),
    "bad_request": (400, "ValidationException", "Malformed input request, please reformat your input and try again."),
    "auth": (403, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
    "not_found": (404, "ResourceNotFoundException", "The requested resource could not be found."),
    "context_window": (400, "ValidationException", "Input is too long for requested model."),
}
_STATUS_CODES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # 7 = string header value type.
    return struct.pack(">B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def event_stream_message(headers: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    """One message of the AWS event-stream binary framing: prelude (total length, headers length, CRC32),
    string headers, payload, and the message CRC32."""
    encoded = b"".join(_header(name, value) for name, value in headers)
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude))
    body = head + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _chunk(event: dict[str, Any]) -> bytes:
    data = _json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    payload = _json.dumps({"bytes": base64.b64encode(data).decode("ascii")}, separators=(",", ":")).encode()
    return event_stream_message(
        [(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")], payload
    )


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_signature(secret_key: str, date: str, region: str, service: str, string_to_sign: str) -> str:
    """The SigV4 signature (hex) of ``string_to_sign``."""
    key = _hmac(f"AWS4{secret_key}".encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


class BedrockServer(AnthropicServer):
    """The Bedrock runtime API for Anthropic models over HTTP, as AWS answers.

    Routes: ``POST /model/{model}/invoke`` (the Messages JSON), ``POST /model/{model}/invoke-with-response-stream``
    (Anthropic's stream events, each base64 in a ``{"bytes": ...}`` payload of an event-stream ``chunk`` message;
    the last carries ``amazon-bedrock-invocationMetrics``), ``POST /model/{model}/count-tokens``
    (``{"inputTokens": n}``; script with :meth:`enqueue_count`). The model id is ``request.params["model"]``.

    Every request must be signed with SigV4 for service ``bedrock`` in ``region`` with ``access_key`` /
    ``secret_key`` (and ``session_token`` when set): the signature is recomputed from the request, so a wrong
    secret fails with 403 ``InvalidSignatureException``, an unknown key or token with ``UnrecognizedClientException``,
    a wrong region or service in the credential scope with ``InvalidSignatureException``. ``auth_failures`` counts
    rejected requests. Bodies need ``anthropic_version: bedrock-2023-05-31`` and must not carry ``model`` or
    ``stream``; with ``strict`` the Messages API rules of :class:`AnthropicServer` apply too.

    Errors are Bedrock's: status, ``x-amzn-ErrorType`` and ``{"message": ...}`` (``rate_limit`` is 429
    ``ThrottlingException``, ``overloaded`` 503 ``ServiceUnavailableException``). ``Fault.retry_after`` adds a
    ``retry-after`` header, which real Bedrock does not send (a test convenience). :meth:`stream_exception`
    builds a stream that fails midway with an event-stream exception (e.g. ``modelStreamErrorException``).
    """

    overloaded_status: ClassVar[int] = 503

    def __init__(
        self,
        *,
        access_key: str = "AKIDEXAMPLELOOPBACK",
        secret_key: str = "loopback-secret-key",
        session_token: str | None = None,
        region: str = "us-east-1",
        strict: bool = True,
        default: ScriptItem | None = None,
        record: bool = True,
    ) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.session_token = session_token
        self.region = region
        self.auth_failures = 0
        super().__init__(strict=strict, default=default, record=record)

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/model/{model}/invoke", "invoke"),
            Route("POST", "/model/{model}/invoke-with-response-stream", "invoke_stream"),
            Route("POST", "/model/{model}/count-tokens", "count_tokens", self._count_tokens),
        )

    # -- errors --------------------------------------------------------------------------------------------------

    def aws_error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
        """An error as Bedrock sends it."""
        out = {
            "x-amzn-RequestId": str(uuid.uuid4()),
            "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            **(headers or {}),
        }
        return json_response({"message": message}, status, out)

    def _denied(self, status: int, code: str, message: str) -> Response:
        self.auth_failures += 1
        return self.aws_error(status, code, message)

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        return self.aws_error(status, _STATUS_CODES.get(status, "InternalServerException"), message)

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        status, code, message = _FAULTS.get(fault.kind, (500, "InternalServerException", "Internal error."))
        if fault.status is not None:
            status = fault.status
            code = _STATUS_CODES.get(status, code)
        return self.aws_error(status, code, fault.message or message, self.fault_headers(fault))

    def _invalid(self, message: str) -> Response:
        return self.aws_error(400, "ValidationException", message)

    # -- SigV4 ---------------------------------------------------------------------------------------------------

    def _auth_failure(self, request: RecordedRequest) -> Response | None:
        headers = request.headers
        authorization = headers.get("authorization")
        if not authorization:
            return self._denied(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
        match = _AUTH.match(authorization)
        if match is None:
            return self._denied(
                400,
                "IncompleteSignatureException",
                "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.",
            )
        credential, signed, signature = match.groups()
        scope = credential.split("/")
        if len(scope) != 5 or scope[4] != "aws4_request":
            return self._denied(400, "IncompleteSignatureException", f"Credential is malformed: {credential!r}")
        access_key, date, region, service, _ = scope
        if access_key != self.access_key:
            return self._denied(
                403, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        if service != "bedrock":
            return self._denied(
                403,
                "InvalidSignatureException",
                f"Credential should be scoped to correct service: 'bedrock'. ({service})",
            )
        if region != self.region:
            return self._denied(
                403, "InvalidSignatureException", f"Credential should be scoped to a valid region, not '{region}'."
            )
        amz_date = headers.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return self._denied(400, "IncompleteSignatureException", "X-Amz-Date is missing or malformed.")
        if not amz_date.startswith(date) or abs(datetime.datetime.now(datetime.timezone.utc) - when) > _MAX_SKEW:
            return self._denied(403, "InvalidSignatureException", "Signature expired or not current.")
        names = signed.split(";")
        if "host" not in names or names != sorted(names):
            return self._denied(403, "InvalidSignatureException", "'Host' must be a signed header.")
        token = headers.get("x-amz-security-token")
        if token != self.session_token or (token is not None and "x-amz-security-token" not in names):
            return self._denied(
                403, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        canonical_headers = "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in names)
        query = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, values in sorted(request.query.items())
            for v in sorted(values)
        )
        payload_hash = headers.get("x-amz-content-sha256") or hashlib.sha256(request.body).hexdigest()
        canonical = "\n".join(
            [request.method, quote(request.path, safe="/~"), query, canonical_headers, signed, payload_hash]
        )
        string_to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256",
                amz_date,
                f"{date}/{region}/{service}/aws4_request",
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        expected = sigv4_signature(self.secret_key, date, region, service, string_to_sign)
        if not hmac.compare_digest(expected, signature):
            return self._denied(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. Check your AWS "
                "Secret Access Key and signing method. Consult the service documentation for details.",
            )
        return None

    # -- protocol hooks ------------------------------------------------------------------------------------------

    def check(self, request: RecordedRequest) -> Response | None:
        denied = self._auth_failure(request)
        if denied is not None:
            return denied
        if not isinstance(request.json, dict):
            return self._invalid("Malformed input request: the body is not a JSON object")
        if request.route == "count_tokens":
            return None
        return self.validate_bedrock_body(request.json)

    def validate_bedrock_body(self, body: dict[str, Any]) -> Response | None:
        """A ValidationException for a body Bedrock rejects, or None."""
        if body.get("anthropic_version") != BEDROCK_ANTHROPIC_VERSION:
            return self._invalid(f"Malformed input request: anthropic_version must be {BEDROCK_ANTHROPIC_VERSION!r}")
        extraneous = [key for key in ("model", "stream") if key in body]
        if extraneous:
            return self._invalid(f"Malformed input request: extraneous key [{extraneous[0]}] is not permitted")
        if self.strict:
            problem = self.validate_body(body, require_model=False)
            if problem is not None:
                return self._invalid(problem)
        return None

    def _count_tokens(self, request: RecordedRequest) -> Response:
        denied = self._auth_failure(request)
        if denied is not None:
            return denied
        outer = request.json if isinstance(request.json, dict) else {}
        invoke = (outer.get("input") or {}).get("invokeModel") if isinstance(outer.get("input"), dict) else None
        try:
            inner = _json.loads(base64.b64decode(invoke["body"], validate=True)) if isinstance(invoke, dict) else None
        except (KeyError, TypeError, ValueError, binascii.Error):
            inner = None
        if not isinstance(inner, dict):
            return self._invalid("Malformed input request: input.invokeModel.body must be a JSON request body")
        if self._count_script:
            item = self._count_script.popleft()
            if isinstance(item, Fault):
                return self.render_fault(item, request)
            count = item
        else:
            count = self.estimate_count(inner)
        return json_response({"inputTokens": count}, headers={"x-amzn-RequestId": str(uuid.uuid4())})

    def _model_of(self, request: RecordedRequest) -> str:
        return request.params.get("model") or "anthropic.claude-sonnet-5-5-v1:0"

    def _metrics_headers(self, reply: Reply) -> dict[str, str]:
        return {
            "x-amzn-RequestId": str(uuid.uuid4()),
            "X-Amzn-Bedrock-Input-Token-Count": str(reply.prompt_tokens),
            "X-Amzn-Bedrock-Output-Token-Count": str(reply.completion_tokens),
            "X-Amzn-Bedrock-Invocation-Latency": "1",
        }

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        model = self._model_of(request)
        message_id = self._next_id("msg_bdrk_")
        if request.route == "invoke_stream":
            groups = anthropic_stream_events(reply, model, message_id)
            last = groups[-1][-1]
            last["amazon-bedrock-invocationMetrics"] = {
                "inputTokenCount": reply.prompt_tokens,
                "outputTokenCount": reply.completion_tokens,
                "invocationLatency": 1,
                "firstByteLatency": 1,
            }
            frames = [b"".join(_chunk(e) for e in group if e["type"] != "ping") for group in groups]
            headers = {"x-amzn-RequestId": str(uuid.uuid4()), "X-Amzn-Bedrock-Content-Type": "application/json"}
            return StreamResponse(frames, content_type=EVENT_STREAM, headers=headers)
        response = json_response(anthropic_message_json(reply, model, message_id), headers=self._metrics_headers(reply))
        return response

    def stream_exception(
        self, exception_type: str = "modelStreamErrorException", message: str = "Model stream error", *, text: str = ""
    ) -> StreamResponse:
        """A 200 event stream that fails midway with an event-stream ``exception`` message (botocore raises
        ``EventStreamError`` with code ``exception_type``); ``text`` is streamed before it."""
        groups = anthropic_stream_events(Reply(text=text), "claude", self._next_id("msg_bdrk_"))
        kept = groups[: 1 + len(Reply(text=text).text_chunks)] if text else groups[:1]
        frames = [b"".join(_chunk(e) for e in group if e["type"] != "ping") for group in kept]
        payload = _json.dumps({"message": message, "originalStatusCode": 500, "originalMessage": message}).encode()
        frames.append(
            event_stream_message(
                [
                    (":exception-type", exception_type),
                    (":content-type", "application/json"),
                    (":message-type", "exception"),
                ],
                payload,
            )
        )
        return StreamResponse(frames, content_type=EVENT_STREAM, headers={"x-amzn-RequestId": str(uuid.uuid4())})

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        """Decode an InvokeModel body; the model comes from the URL path, ``stream`` from the route."""
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        return decode_messages_body(body, model=self._model_of(request), stream=request.route == "invoke_stream")
