"""BedrockServer driven by aioboto3/botocore over real sockets: SigV4, event-stream framing, Bedrock errors."""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

aioboto3 = pytest.importorskip("aioboto3")
botocore_config = pytest.importorskip("botocore.config")
botocore_eventstream = pytest.importorskip("botocore.eventstream")
bx = pytest.importorskip("botocore.exceptions")

from ext.testing.script import Fault, Reply, ToolCallSpec  # noqa: E402
from ext.testing.servers.bedrock import BEDROCK_ANTHROPIC_VERSION, BedrockServer, event_stream_message  # noqa: E402

ACCESS = "AKIDSERVERTEST00001"
SECRET = "server-test-secret"
REGION = "ap-southeast-2"
MODEL = "anthropic.claude-sonnet-5-5-v1:0"
BODY: dict[str, Any] = {
    "anthropic_version": BEDROCK_ANTHROPIC_VERSION,
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Hi"}],
}


@pytest.fixture(autouse=True)
def _no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
async def server() -> AsyncIterator[BedrockServer]:
    async with BedrockServer(access_key=ACCESS, secret_key=SECRET, region=REGION) as srv:
        yield srv


def _client(server: BedrockServer, **credentials: Any) -> Any:
    creds = {"aws_access_key_id": ACCESS, "aws_secret_access_key": SECRET, "region_name": REGION, **credentials}
    session = aioboto3.Session(**creds)
    config = botocore_config.Config(retries={"total_max_attempts": 1}, read_timeout=10, connect_timeout=10)
    return session.client("bedrock-runtime", endpoint_url=server.base_url, config=config)


@pytest.fixture
async def client(server: BedrockServer) -> AsyncIterator[Any]:
    async with _client(server) as c:
        yield c


async def _invoke(client: Any, body: dict[str, Any] = BODY, model: str = MODEL) -> dict[str, Any]:
    response = await client.invoke_model(modelId=model, body=json.dumps(body), contentType="application/json")
    data: dict[str, Any] = json.loads(await response["body"].read())
    return data


async def test_invoke_model(server: BedrockServer, client: Any) -> None:
    server.enqueue(Reply(text="Hello!", prompt_tokens=12, completion_tokens=3))
    response = await client.invoke_model(modelId=MODEL, body=json.dumps(BODY), contentType="application/json")
    message = json.loads(await response["body"].read())
    assert message["content"] == [{"type": "text", "text": "Hello!"}]
    assert message["stop_reason"] == "end_turn" and message["model"] == MODEL
    assert message["usage"]["input_tokens"] == 12 and message["usage"]["output_tokens"] == 3
    assert response["contentType"] == "application/json"
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amzn-bedrock-input-token-count"] == "12"
    (request,) = server.requests
    assert request.path == "/model/anthropic.claude-sonnet-5-5-v1%3A0/invoke"
    assert request.params["model"] == MODEL
    assert server.decode(request).model == MODEL
    assert request.headers["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={ACCESS}/{request.headers['x-amz-date'][:8]}/{REGION}/bedrock/aws4_request,"
    )
    assert server.auth_failures == 0


async def test_session_token_is_checked(server: BedrockServer) -> None:
    server.session_token = "TOKEN-1"
    server.enqueue(Reply(text="ok"))
    async with _client(server, aws_session_token="TOKEN-1") as c:
        assert (await _invoke(c))["content"][0]["text"] == "ok"
    assert server.requests[0].headers["x-amz-security-token"] == "TOKEN-1"
    for token in ("TOKEN-2", None):
        async with _client(server, aws_session_token=token) as c:
            with pytest.raises(bx.ClientError) as info:
                await _invoke(c)
        assert info.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert server.auth_failures == 2


@pytest.mark.parametrize(
    ("credentials", "code"),
    [
        ({"aws_secret_access_key": "wrong-secret"}, "InvalidSignatureException"),
        ({"aws_access_key_id": "AKIDUNKNOWN"}, "UnrecognizedClientException"),
        ({"region_name": "us-west-2"}, "InvalidSignatureException"),
    ],
)
async def test_bad_signatures_are_rejected(server: BedrockServer, credentials: dict[str, str], code: str) -> None:
    async with _client(server, **credentials) as c:
        with pytest.raises(bx.ClientError) as info:
            await _invoke(c)
    error = info.value.response
    assert error["Error"]["Code"] == code
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"].startswith(code + ":")
    assert server.auth_failures == 1 and server.pending == 0


async def test_tampered_body_fails_the_signature(server: BedrockServer, client: Any) -> None:
    def tamper(request: Any, **kwargs: Any) -> None:
        request.body = request.body.replace(b'"Hi"', b'"Ho"')
        request.headers["Content-Length"] = str(len(request.body))

    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", tamper)
    with pytest.raises(bx.ClientError) as info:
        await _invoke(client)
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException"


async def test_unsigned_request_is_rejected(server: BedrockServer) -> None:
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{server.base_url}/model/{MODEL}/invoke", json=BODY) as response,
    ):
        assert response.status == 403
        assert response.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException")
        assert (await response.json())["message"] == "Missing Authentication Token"


async def test_stream_uses_event_stream_framing(server: BedrockServer, client: Any) -> None:
    server.enqueue(
        Reply(
            text="one two",
            thought="hmm",
            thought_signature="sig",
            tool_calls=[ToolCallSpec("add", {"a": 1}, id="toolu_1")],
            prompt_tokens=7,
            completion_tokens=4,
        )
    )
    response = await client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(BODY))
    events = [json.loads(e["chunk"]["bytes"]) async for e in response["body"]]
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert "ping" not in types
    assert [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"] == [
        "thinking",
        "text",
        "tool_use",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(d.get("text", "") for d in deltas) == "one two"
    assert [d["signature"] for d in deltas if d["type"] == "signature_delta"] == ["sig"]
    assert events[-1]["amazon-bedrock-invocationMetrics"]["inputTokenCount"] == 7
    assert server.decode(server.requests[0]).stream is True


async def test_event_stream_bytes_on_the_wire(server: BedrockServer) -> None:
    server.enqueue(Reply(text="hi"))
    response = server.render(Reply(text="hi"), _fake_request(server))
    raw = b"".join(response.frames)  # type: ignore[union-attr]
    assert response.content_type == "application/vnd.amazon.eventstream"
    total, headers_length = struct.unpack(">II", raw[:8])
    assert struct.unpack(">I", raw[8:12])[0] == zlib.crc32(raw[:8])
    assert struct.unpack(">I", raw[total - 4 : total])[0] == zlib.crc32(raw[: total - 4])
    buffer = botocore_eventstream.EventStreamBuffer()
    buffer.add_data(raw)
    messages = list(buffer)
    assert messages[0].headers == {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert headers_length == len(b"".join(_encoded_headers(messages[0].headers)))
    first = json.loads(base64.b64decode(json.loads(messages[0].payload)["bytes"]))
    assert first["type"] == "message_start"


def _encoded_headers(headers: dict[str, str]) -> list[bytes]:
    return [
        struct.pack(">B", len(k)) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in headers.items()
    ]


def _fake_request(server: BedrockServer) -> Any:
    from ext.testing.servers import Headers, RecordedRequest

    request = RecordedRequest("POST", "/model/m/invoke-with-response-stream", {}, Headers(), b"{}", json={})
    request.route = "invoke_stream"
    request.params = {"model": "m"}
    return request


def test_event_stream_message_round_trips_through_botocore() -> None:
    raw = event_stream_message([(":message-type", "event"), ("x", "y")], b"payload")
    buffer = botocore_eventstream.EventStreamBuffer()
    buffer.add_data(raw)
    (message,) = list(buffer)
    assert message.headers == {":message-type": "event", "x": "y"} and message.payload == b"payload"


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault("rate_limit", retry_after=2), 429, "ThrottlingException"),
        (Fault("overloaded"), 503, "ServiceUnavailableException"),
        (Fault("server_error"), 500, "InternalServerException"),
        (Fault("bad_request"), 400, "ValidationException"),
        (Fault("auth"), 403, "AccessDeniedException"),
        (Fault("not_found"), 404, "ResourceNotFoundException"),
    ],
)
async def test_errors_as_bedrock_sends_them(
    server: BedrockServer, client: Any, fault: Fault, status: int, code: str
) -> None:
    server.enqueue(fault)
    with pytest.raises(bx.ClientError) as info:
        await _invoke(client)
    error = info.value.response
    assert error["Error"]["Code"] == code
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert error["Error"]["Message"]
    headers = error["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amzn-errortype"].startswith(f"{code}:")
    assert headers.get("retry-after") == ("2" if fault.retry_after else None)


async def test_exception_mid_stream(server: BedrockServer, client: Any) -> None:
    server.enqueue(server.stream_exception("modelStreamErrorException", "boom", text="partial answer"))
    response = await client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(BODY))
    texts: list[str] = []
    with pytest.raises(bx.EventStreamError) as info:
        async for event in response["body"]:
            payload = json.loads(event["chunk"]["bytes"])
            if payload["type"] == "content_block_delta":
                texts.append(payload["delta"]["text"])
    assert "".join(texts) == "partial answer"
    assert info.value.response["Error"] == {"Code": "modelStreamErrorException", "Message": "boom"}


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({**BODY, "anthropic_version": "2023-06-01"}, "anthropic_version"),
        ({k: v for k, v in BODY.items() if k != "anthropic_version"}, "anthropic_version"),
        ({**BODY, "model": "claude"}, r"extraneous key \[model\]"),
        ({**BODY, "stream": True}, r"extraneous key \[stream\]"),
        ({**BODY, "messages": [{"role": "user", "content": " "}]}, "non-whitespace"),
        ({**BODY, "thinking": {"type": "enabled", "budget_tokens": 100}}, "budget_tokens"),
    ],
)
async def test_validation(server: BedrockServer, client: Any, body: dict[str, Any], match: str) -> None:
    with pytest.raises(bx.ClientError, match=match) as info:
        await _invoke(client, body)
    assert info.value.response["Error"]["Code"] == "ValidationException"


async def test_count_tokens(server: BedrockServer, client: Any) -> None:
    result = await client.count_tokens(modelId=MODEL, input={"invokeModel": {"body": json.dumps(BODY).encode()}})
    assert result["inputTokens"] == BedrockServer.estimate_count(BODY)
    server.enqueue_count(99, Fault("rate_limit"))
    result = await client.count_tokens(modelId=MODEL, input={"invokeModel": {"body": json.dumps(BODY).encode()}})
    assert result["inputTokens"] == 99
    with pytest.raises(bx.ClientError) as info:
        await client.count_tokens(modelId=MODEL, input={"invokeModel": {"body": json.dumps(BODY).encode()}})
    assert info.value.response["Error"]["Code"] == "ThrottlingException"


async def test_decode(server: BedrockServer, client: Any) -> None:
    server.enqueue(Reply(text="ok"))
    body = {
        **BODY,
        "system": [{"type": "text", "text": "Be brief."}],
        "temperature": 0.5,
        "top_k": 3,
        "stop_sequences": ["X"],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
    }
    await _invoke(client, body, model="us.anthropic.claude-x:1")
    wire = server.decode(server.requests[0])
    assert wire.model == "us.anthropic.claude-x:1" and wire.stream is False
    assert wire.system == ["Be brief."] and wire.tools == ["f"] and wire.tool_choice == "required"
    assert wire.options == {"temperature": 0.5, "top_k": 3, "max_tokens": 64, "stop": ["X"]}
