"""What kind of failure each Azure AI Inference error is (the `ext.errors` classifier): the real client
(azure-ai-inference) against the Azure AI loopback server, each fault answered as the service answers it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ext.core import ErrorKind, LLMMessage, UserMessage, classify_error, provider_error
from ext.models.azure_ai import AzureAIChatCompletionClient
from ext.testing.script import Fault
from ext.testing.servers import AzureAIServer

KEY = "azure-kinds-test-key-0123456789"
HELLO: list[LLMMessage] = [UserMessage(content="Hi", source="user")]


@pytest.fixture
async def server() -> AsyncIterator[AzureAIServer]:
    async with AzureAIServer(api_key=KEY) as srv:
        yield srv


async def error_of(server: AzureAIServer, fault: Fault) -> BaseException:
    server.enqueue(fault)
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=KEY, max_retries=0) as c:
        with pytest.raises(Exception) as caught:
            await c.create(HELLO)
    return caught.value


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("context_window"), ErrorKind.CONTEXT_WINDOW),
        (Fault("rate_limit"), ErrorKind.RATE_LIMITED),
        (Fault("server_error"), ErrorKind.SERVER_ERROR),
        (Fault("bad_request"), ErrorKind.BAD_REQUEST),
        (Fault("auth"), ErrorKind.AUTH),
        (Fault("drop"), ErrorKind.CONNECTION),
    ],
)
async def test_each_fault_has_its_kind(server: AzureAIServer, fault: Fault, kind: ErrorKind) -> None:
    error = await error_of(server, fault)
    found = classify_error(error)
    assert found is not None and found.kind is kind, (found, error)
    typed = provider_error(error)
    assert typed is not None and typed.kind is kind and typed.__cause__ is error
