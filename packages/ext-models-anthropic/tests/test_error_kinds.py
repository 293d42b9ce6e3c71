"""What kind of failure each anthropic SDK error is (the `ext.errors` classifier), over the real SDK and a loopback
server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from ext.core import ErrorKind, classify_error
from ext.testing.script import Fault
from ext.testing.servers import AnthropicServer

KEY = "sk-ant-test-0123456789"
MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(api_key=KEY) as srv:
        yield srv


async def error_of(server: AnthropicServer, fault: Fault, timeout: float = 10.0) -> BaseException:
    server.enqueue(fault)
    client = anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=timeout)
    async with client:
        with pytest.raises(anthropic.AnthropicError) as caught:
            await client.messages.create(model="claude-sonnet-5-5", max_tokens=8, messages=MESSAGES)
    return caught.value


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("context_window"), ErrorKind.CONTEXT_WINDOW),
        (Fault("bad_request"), ErrorKind.BAD_REQUEST),
        (Fault("overloaded"), ErrorKind.OVERLOADED),
        (Fault("server_error"), ErrorKind.SERVER_ERROR),
        (Fault("auth"), ErrorKind.AUTH),
        (Fault("not_found"), ErrorKind.NOT_FOUND),
        (Fault("drop"), ErrorKind.CONNECTION),
    ],
)
async def test_each_fault_has_its_kind(server: AnthropicServer, fault: Fault, kind: ErrorKind) -> None:
    found = classify_error(await error_of(server, fault))
    assert found is not None and found.kind is kind


async def test_a_rate_limit_carries_the_servers_wait(server: AnthropicServer) -> None:
    found = classify_error(await error_of(server, Fault("rate_limit", retry_after=30)))
    assert found is not None and (found.kind, found.retry_after) == (ErrorKind.RATE_LIMITED, 30.0)


async def test_a_stall_is_a_timeout(server: AnthropicServer) -> None:
    found = classify_error(await error_of(server, Fault("hang"), timeout=0.3))
    assert found is not None and found.kind is ErrorKind.TIMEOUT
