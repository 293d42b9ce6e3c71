"""A hosted provider's requests are byte for byte what they were before `tool_calling` existed.

The requests go to `https://api.openai.com/v1` and an Azure endpoint (so the client sees a hosted URL, where the
default is the API's own tools); a transport carries each one over a real socket to the strict loopback server on
127.0.0.1, which records the body. `GOLDEN` (data/hosted_requests_before.json) holds the paths and bodies the same
calls sent before this option was added: `requests_of_the_scenarios` run on the commit before it (540846e)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from ext.core import (
    AssistantMessage,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient
from ext.testing.sample_inputs import GET_WEATHER, LOCAL_TIME
from ext.testing.script import Reply
from ext.testing.servers import OpenAIServer

KEY = "sk-test-key-0123456789"

WEATHER = GET_WEATHER
TIME = LOCAL_TIME


class _ToLoopback(httpx2.AsyncBaseTransport):
    """Sends a request meant for a hosted URL to the loopback server instead (same path, query and body)."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def requests_of_the_scenarios() -> list[dict[str, Any]]:
    """The path and body of each request of the scenarios, in order."""
    async with OpenAIServer(api_key=KEY, default=Reply(text='{"ok": true}')) as server:
        await _scenarios(server)
    return [{"path": r.path, "body": r.body.decode("utf-8")} for r in server.requests]


async def _scenarios(server: OpenAIServer) -> None:
    history: list[LLMMessage] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris?", source="user"),
        AssistantMessage(content=[FunctionCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')]),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id="call_1", name="get_weather", content="sunny", is_error=False)]
        ),
    ]
    ask: list[LLMMessage] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather and time in Oslo?", source="user"),
    ]
    openai_client = OpenAIChatCompletionClient(
        "gpt-4o-mini", api_key=KEY, temperature=0.0, http_client=httpx2.AsyncClient(transport=_ToLoopback(server.port))
    )
    azure_client = AzureOpenAIChatCompletionClient(
        azure_endpoint="https://example-resource.openai.azure.com",
        azure_deployment="gpt-4o-mini",
        api_version="2024-10-21",
        api_key=KEY,
        http_client=httpx2.AsyncClient(transport=_ToLoopback(server.port)),
    )
    for client in (openai_client, azure_client):
        async with client:
            for choice in ("auto", "required", "local_time", "none"):
                await client.create(ask, tools=[WEATHER, TIME], tool_choice=choice)
            await client.create(history, tools=[WEATHER, TIME])
            async for _ in client.create_stream(ask, tools=[WEATHER, TIME]):
                pass
            await client.create(ask, json_output=True)


async def test_hosted_requests_are_byte_for_byte_the_same_as_before() -> None:
    sent = await requests_of_the_scenarios()
    assert len(sent) == len(GOLDEN)
    for index, (now, before) in enumerate(zip(sent, GOLDEN, strict=True)):
        assert now == before, f"request {index} differs"


def test_the_golden_requests_offer_native_tools() -> None:
    # Can-fail guard: the comparison above would be empty if the golden bodies carried no tools.
    bodies = [json.loads(item["body"]) for item in GOLDEN]
    assert sum("tools" in body for body in bodies) >= 8
    assert all("schema" not in (body.get("response_format") or {}) for body in bodies)


GOLDEN: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "hosted_requests_before.json").read_text(encoding="utf-8")
)
