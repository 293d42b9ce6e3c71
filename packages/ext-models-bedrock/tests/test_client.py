"""AnthropicBedrockChatCompletionClient against the Bedrock loopback server: credentials, wire, retries."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import aioboto3
import botocore.exceptions
import pytest

from ext.core import (
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    LLMMessage,
    ReasoningBlock,
    RetryPolicy,
    StreamChunk,
    SystemMessage,
    UserMessage,
    estimate_tokens,
    load_component,
    tool_schema_of,
)
from ext.models.bedrock import AnthropicBedrockChatCompletionClient, classify_bedrock_error
from ext.testing.conformance import assert_dump_round_trip
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers.bedrock import BEDROCK_ANTHROPIC_VERSION, BedrockServer

ACCESS = "AKIDCLIENTTEST00001"
SECRET = "client-test-secret-key"
REGION = "us-west-2"
MODEL = "us.anthropic.claude-sonnet-5-5-v1:0"
HELLO: list[LLMMessage] = [UserMessage(content="Hi")]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD = FunctionTool(add)


@pytest.fixture
async def server() -> AsyncIterator[BedrockServer]:
    async with BedrockServer(access_key=ACCESS, secret_key=SECRET, region=REGION) as srv:
        yield srv


def make(server: BedrockServer, **kwargs: Any) -> AnthropicBedrockChatCompletionClient:
    kwargs.setdefault("max_tokens", 4096)
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("aws_region", REGION)
    if "aws_profile" not in kwargs and "session" not in kwargs and not kwargs.pop("from_chain", False):
        kwargs.setdefault("aws_access_key", ACCESS)
        kwargs.setdefault("aws_secret_key", SECRET)
    return AnthropicBedrockChatCompletionClient(MODEL, endpoint_url=server.base_url, **kwargs)


@pytest.fixture
async def client(server: BedrockServer) -> AsyncIterator[AnthropicBedrockChatCompletionClient]:
    c = make(server)
    try:
        yield c
    finally:
        await c.close()


def body(server: BedrockServer, index: int = -1) -> dict[str, Any]:
    raw = server.requests[index].json
    assert isinstance(raw, dict)
    return raw


# --- credentials and configuration ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"aws_secret_key": SECRET}, "aws_secret_key was given without aws_access_key"),
        ({"aws_access_key": ACCESS}, "aws_access_key was given without aws_secret_key"),
        ({"aws_session_token": "tok"}, "aws_session_token needs aws_access_key"),
        ({"aws_access_key": ACCESS, "aws_secret_key": SECRET, "aws_profile": "dev"}, "not both"),
        ({"aws_profile": "nope"}, "aws_profile 'nope' is not in the AWS config"),
        ({"aws_region": " "}, "aws_region"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 2}, "temperature"),
        ({"thinking": {"type": "enabled", "budget_tokens": 8000}}, "less than max_tokens"),
        ({"endpoint_url": "localhost:1"}, "endpoint_url"),
        ({"extra_body": {"anthropic_version": "x"}}, "anthropic_version"),
        ({"extra_body": {"model": "x"}}, "must not set"),
        ({"max_pool_connections": 0}, "max_pool_connections"),
    ],
)
def test_bad_configuration(kwargs: dict[str, Any], match: str) -> None:
    kwargs.setdefault("aws_region", REGION)
    kwargs.setdefault("max_tokens", 4096)
    with pytest.raises(ConfigurationError, match=match) as info:
        AnthropicBedrockChatCompletionClient(MODEL, **kwargs)
    assert SECRET not in str(info.value)


def test_missing_region_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=r"aws_region.*AWS_REGION"):
        AnthropicBedrockChatCompletionClient(MODEL, max_tokens=10, aws_access_key=ACCESS, aws_secret_key=SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    client = AnthropicBedrockChatCompletionClient(MODEL, max_tokens=10, aws_access_key=ACCESS, aws_secret_key=SECRET)
    assert client.region == "eu-west-3"


def test_session_and_keys_are_exclusive() -> None:
    import aioboto3

    with pytest.raises(ConfigurationError, match="either session"):
        AnthropicBedrockChatCompletionClient(
            MODEL,
            max_tokens=10,
            aws_region=REGION,
            aws_access_key=ACCESS,
            aws_secret_key=SECRET,
            session=aioboto3.Session(),
        )


async def test_no_credentials_anywhere(server: BedrockServer) -> None:
    client = make(server, from_chain=True)
    with pytest.raises(ConfigurationError, match=r"no AWS credentials.*AWS_ACCESS_KEY_ID"):
        await client.create(HELLO)
    assert server.requests == []
    await client.close()


async def test_credentials_from_environment(server: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.session_token = "ENV-TOKEN"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "ENV-TOKEN")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_REGION", REGION)  # wins over AWS_DEFAULT_REGION, as in the other AWS SDKs
    client = AnthropicBedrockChatCompletionClient(MODEL, max_tokens=100, endpoint_url=server.base_url, max_retries=0)
    assert client.region == REGION
    server.enqueue(Reply(text="signed from the environment"))
    assert (await client.create(HELLO)).content == "signed from the environment"
    assert server.requests[0].headers["x-amz-security-token"] == "ENV-TOKEN"
    assert server.auth_failures == 0
    await client.close()


async def test_explicit_session_token(server: BedrockServer) -> None:
    server.session_token = "ARG-TOKEN"
    client = make(server, aws_session_token="ARG-TOKEN")
    server.enqueue(Reply(text="ok"))
    assert (await client.create(HELLO)).content == "ok"
    await client.close()


async def test_credentials_file_profile(server: BedrockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "credentials").write_text(f"[dev]\naws_access_key_id = {ACCESS}\naws_secret_access_key = {SECRET}\n")
    (tmp_path / "config").write_text(f"[profile dev]\nregion = {REGION}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    client = AnthropicBedrockChatCompletionClient(
        MODEL, max_tokens=100, aws_profile="dev", endpoint_url=server.base_url, max_retries=0
    )
    assert client.region == REGION
    server.enqueue(Reply(text="from the profile"))
    assert (await client.create(HELLO)).content == "from the profile"
    await client.close()


async def test_wrong_secret_is_rejected(server: BedrockServer) -> None:
    client = make(server, aws_secret_key="not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as info:
        await client.create(HELLO)
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert "not-the-secret" not in str(info.value)
    assert server.auth_failures == 1
    await client.close()


async def test_dump_and_load_without_keys(server: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(server, temperature=0.4, aws_session_token="TOKEN-X")
    dump = client.dump_component()
    text = dump.model_dump_json()
    assert SECRET not in text and ACCESS not in text and "TOKEN-X" not in text
    assert SECRET not in repr(client) and ACCESS not in repr(client)
    assert dump.provider == "ext.models.bedrock.AnthropicBedrockChatCompletionClient"
    assert dump.config["aws_region"] == REGION and dump.config["endpoint_url"] == server.base_url
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    await assert_dump_round_trip(client).close()
    loaded = load_component(json.loads(text), AnthropicBedrockChatCompletionClient)
    server.enqueue(Reply(text="loaded"))
    assert (await loaded.create(HELLO)).content == "loaded"
    assert body(server)["temperature"] == 0.4
    await loaded.close()
    await client.close()


async def test_a_session_object_refuses_to_dump(server: BedrockServer) -> None:
    session = aioboto3.Session(aws_access_key_id=ACCESS, aws_secret_access_key=SECRET, region_name=REGION)
    client = AnthropicBedrockChatCompletionClient(MODEL, max_tokens=10, session=session, endpoint_url=server.base_url)
    with pytest.raises(ComponentError, match=r"session: an aioboto3\.Session object") as info:
        client.dump_component()
    assert SECRET not in str(info.value)
    await client.close()


# --- the wire ----------------------------------------------------------------------------------------


async def test_body_and_path(server: BedrockServer) -> None:
    client = make(server, temperature=0.2, top_p=0.8, top_k=9, stop_sequences=["END"])
    server.enqueue(Reply(text="ok"))
    await client.create([SystemMessage(content="sys"), *HELLO], options={"model_id": "anthropic.claude-other-v2:0"})
    request = server.requests[0]
    assert request.path == "/model/anthropic.claude-other-v2%3A0/invoke"
    sent = body(server)
    assert sent["anthropic_version"] == BEDROCK_ANTHROPIC_VERSION
    assert "model" not in sent and "stream" not in sent
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["stop_sequences"]) == (0.2, 0.8, 9, ["END"])
    assert sent["system"] == [{"type": "text", "text": "sys"}]
    assert request.headers["content-type"] == "application/json"
    await client.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_round_trips_unchanged(server: BedrockServer, stream: bool) -> None:
    client = make(server, thinking={"type": "enabled", "budget_tokens": 2048})
    server.enqueue(
        Reply(
            thought="Use add.", thought_signature="bedrock-sig==", tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]
        ),
        Reply(text="3"),
    )
    if stream:
        items = [i async for i in client.create_stream(HELLO, tools=[ADD])]
        assert "".join(i.thought for i in items if isinstance(i, StreamChunk)) == "Use add."
        first = items[-1]
        assert isinstance(first, CreateResult)
    else:
        first = await client.create(HELLO, tools=[ADD])
    assert first.reasoning == [ReasoningBlock(text="Use add.", signature="bedrock-sig==", provider="anthropic")]
    assert isinstance(first.content, list)
    history: list[LLMMessage] = [
        *HELLO,
        first.to_assistant_message(),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id=first.content[0].id, name="add", content="3", is_error=False)]
        ),
    ]
    assert (await client.create(history, tools=[ADD])).content == "3"
    assert body(server)["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Use add.",
        "signature": "bedrock-sig==",
    }
    assert server.decode(server.requests[0]).stream is stream
    await client.close()


async def test_stream_usage(server: BedrockServer, client: AnthropicBedrockChatCompletionClient) -> None:
    server.enqueue(Reply(text="a b c", prompt_tokens=30, cached_tokens=10, completion_tokens=3))
    items = [i async for i in client.create_stream(HELLO)]
    result = items[-1]
    assert isinstance(result, CreateResult)
    assert "".join(i.content for i in items if isinstance(i, StreamChunk)) == "a b c" == result.content
    assert (result.usage.prompt_tokens, result.usage.cached_tokens, result.usage.completion_tokens) == (30, 10, 3)


# --- errors and retries -----------------------------------------------------------------------------


async def test_exception_mid_stream(server: BedrockServer, client: AnthropicBedrockChatCompletionClient) -> None:
    server.enqueue(server.stream_exception("modelStreamErrorException", "model broke", text="partial answer"))
    seen: list[str] = []
    with pytest.raises(botocore.exceptions.EventStreamError) as info:
        async for item in client.create_stream(HELLO):
            if isinstance(item, StreamChunk):
                seen.append(item.content)
    assert "".join(seen) == "partial answer"
    assert info.value.response["Error"]["Code"] == "modelStreamErrorException"


async def test_exception_before_any_text_is_retried(server: BedrockServer) -> None:
    client = make(server, retry_policy=RetryPolicy(max_retries=1, multiplier=0.0))
    server.enqueue(server.stream_exception("throttlingException", "slow down"), Reply(text="second try"))
    items = [i async for i in client.create_stream(HELLO)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "second try"
    assert len(server.requests) == 2
    await client.close()


async def test_throttling_is_retried_validation_is_not(server: BedrockServer) -> None:
    client = make(server, max_retries=2)
    server.enqueue(Fault("rate_limit", retry_after=0.01), Reply(text="after throttling"))
    assert (await client.create(HELLO)).content == "after throttling"
    server.enqueue(Fault("bad_request"))
    with pytest.raises(botocore.exceptions.ClientError) as info:
        await client.create(HELLO)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert len(server.requests) == 3
    await client.close()


async def test_broken_stream_is_a_connection_error(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient
) -> None:
    server.enqueue(Fault("drop_mid_body"))
    with pytest.raises((botocore.exceptions.ConnectionClosedError, ConnectionError)):
        async for _ in client.create_stream(HELLO):
            pass


def test_classifier() -> None:
    def client_error(code: str, status: int, headers: dict[str, str] | None = None) -> BaseException:
        response: Any = {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}},
        }
        error: BaseException = botocore.exceptions.ClientError(response, "InvokeModel")
        return error

    throttled = classify_bedrock_error(client_error("ThrottlingException", 429, {"retry-after": "3"}))
    assert throttled is not None and throttled.retryable and throttled.retry_after == 3.0
    for code, status in (("ServiceUnavailableException", 503), ("ModelNotReadyException", 429), ("X", 500)):
        decision = classify_bedrock_error(client_error(code, status))
        assert decision is not None and decision.retryable
    for code, status in (("ValidationException", 400), ("AccessDeniedException", 403), ("ModelErrorException", 424)):
        decision = classify_bedrock_error(client_error(code, status))
        assert decision is not None and not decision.retryable
    stream_error = botocore.exceptions.EventStreamError(
        {"Error": {"Code": "modelStreamErrorException", "Message": "m"}}, "InvokeModelWithResponseStream"
    )
    decision = classify_bedrock_error(stream_error)
    assert decision is not None and decision.retryable
    timeout = classify_bedrock_error(botocore.exceptions.ReadTimeoutError(endpoint_url="http://x"))
    assert timeout is not None and timeout.retryable
    assert classify_bedrock_error(ValueError("x")) is None


def test_classifier_is_registered() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="ext.retry")}
    assert found["bedrock"] == "ext.models.bedrock:classify_bedrock_error"


def test_package_import_is_light() -> None:
    code = (
        "import sys\n"
        "from ext.models.bedrock import classify_bedrock_error, BedrockClientConfig\n"
        "assert 'aioboto3' not in sys.modules and 'botocore' not in sys.modules and 'anthropic' not in sys.modules\n"
        "from ext.models.bedrock import AnthropicBedrockChatCompletionClient\n"
        "assert 'aioboto3' in sys.modules and 'anthropic' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# --- tokens -----------------------------------------------------------------------------------------


async def test_count_tokens_async(server: BedrockServer, client: AnthropicBedrockChatCompletionClient) -> None:
    counted = await client.count_tokens_async(HELLO, tools=[ADD])
    request = server.requests[0]
    assert request.path == f"/model/{MODEL.replace(':', '%3A')}/count-tokens"
    assert counted > 0
    server.enqueue_count(555)
    assert await client.count_tokens_async(HELLO) == 555
    server.enqueue_count(Fault("rate_limit"))
    fallback = await client.count_tokens_async(HELLO, tools=[ADD])
    assert fallback == estimate_tokens(HELLO, [tool_schema_of(ADD)])


def test_a_second_event_loop_gets_a_clear_error() -> None:
    # aiobotocore binds a client's connections to the loop that opened them; a second asyncio.run must not
    # reach them (an obscure aiohttp failure, or a hang), but say what to do.
    import asyncio
    import threading

    from ext.core import ExtError

    server_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=server_loop.run_forever, daemon=True)
    thread.start()
    server = BedrockServer(access_key=ACCESS, secret_key=SECRET, region=REGION, default=Reply(text="hello"))
    try:
        asyncio.run_coroutine_threadsafe(server.start(), server_loop).result(10)
        client = make(server)
        first_loop = asyncio.new_event_loop()
        try:
            assert first_loop.run_until_complete(client.create(HELLO)).content == "hello"
            with pytest.raises(ExtError, match=r"first used on another event loop.*one client per event loop"):
                asyncio.run(client.create(HELLO))
            assert len(server.requests) == 1
            assert first_loop.run_until_complete(client.create(HELLO)).content == "hello"
            first_loop.run_until_complete(client.close())
        finally:
            first_loop.close()
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), server_loop).result(10)
        server_loop.call_soon_threadsafe(server_loop.stop)
        thread.join(10)
        server_loop.close()
