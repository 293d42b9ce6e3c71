"""What kind of failure each Bedrock error is (the `ext.errors` classifier): the real client (aioboto3, SigV4) against
the Bedrock loopback server, each fault answered as Bedrock answers it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ext.core import ErrorKind, LLMMessage, UserMessage, classify_error, provider_error
from ext.models.bedrock import AnthropicBedrockChatCompletionClient
from ext.testing.script import Fault
from ext.testing.servers.bedrock import BedrockServer

ACCESS = "AKIDKINDSTEST000001"
SECRET = "kinds-test-secret-key"
REGION = "us-west-2"
MODEL = "us.anthropic.claude-sonnet-5-5-v1:0"
HELLO: list[LLMMessage] = [UserMessage(content="Hi", source="user")]


@pytest.fixture
async def server() -> AsyncIterator[BedrockServer]:
    async with BedrockServer(access_key=ACCESS, secret_key=SECRET, region=REGION) as srv:
        yield srv


async def error_of(server: BedrockServer, fault: Fault, monkeypatch: pytest.MonkeyPatch) -> BaseException:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    server.enqueue(fault)
    client = AnthropicBedrockChatCompletionClient(
        MODEL, endpoint_url=server.base_url, aws_region=REGION, max_tokens=64, max_retries=0
    )
    try:
        with pytest.raises(Exception) as caught:
            await client.create(HELLO)
    finally:
        await client.close()
    return caught.value


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("context_window"), ErrorKind.CONTEXT_WINDOW),
        (Fault("rate_limit"), ErrorKind.RATE_LIMITED),
        (Fault("server_error"), ErrorKind.SERVER_ERROR),
        (Fault("bad_request"), ErrorKind.BAD_REQUEST),
        (Fault("auth"), ErrorKind.AUTH),
    ],
)
async def test_each_fault_has_its_kind(
    server: BedrockServer, monkeypatch: pytest.MonkeyPatch, fault: Fault, kind: ErrorKind
) -> None:
    error = await error_of(server, fault, monkeypatch)
    found = classify_error(error)
    assert found is not None and found.kind is kind, (found, error)
    typed = provider_error(error)
    assert typed is not None and typed.kind is kind and typed.__cause__ is error
