"""AzureAIServer driven by the real azure-ai-inference async SDK over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from azure.ai.inference.aio import ChatCompletionsClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

from ext.testing.credentials import StaticTokenCredential
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import AzureAIServer

KEY = "azure-server-test-key"
MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def server() -> AsyncIterator[AzureAIServer]:
    async with AzureAIServer(api_key=KEY, model_name="Phi-4") as srv:
        yield srv


@pytest.fixture
async def sdk(server: AzureAIServer) -> AsyncIterator[ChatCompletionsClient]:
    async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as client:
        yield client


async def test_plain_reply_with_usage(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    server.enqueue(Reply(text="Hello!", prompt_tokens=11, completion_tokens=2))
    result = await sdk.complete(messages=MESSAGES, temperature=0.1)
    assert result.choices[0].message.content == "Hello!"
    assert result.choices[0].finish_reason == "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (11, 2, 13)
    assert result.model == "Phi-4"
    (request,) = server.requests
    assert request.route == "chat"
    assert request.query_value("api-version") == "2024-05-01-preview"
    decoded = server.decode(request)
    assert decoded.last_user_text == "Hi"
    assert decoded.options == {"temperature": 0.1}


async def test_models_route_and_bearer_key(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="via /models"))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{server.base_url}/models/chat/completions?api-version=2024-05-01-preview",
            json={"messages": MESSAGES},
            headers={"Authorization": f"Bearer {KEY}"},
        ) as response,
    ):
        assert response.status == 200
        body = await response.json()
    assert body["choices"][0]["message"]["content"] == "via /models"
    assert server.requests[0].path == "/models/chat/completions"


async def test_missing_api_version_and_wrong_key() -> None:
    async with AzureAIServer(api_key=KEY) as server, aiohttp.ClientSession() as session:
        async with session.post(
            f"{server.base_url}/chat/completions", json={"messages": MESSAGES}, headers={"api-key": KEY}
        ) as response:
            assert response.status == 400
            assert "api-version" in (await response.json())["error"]["message"]
        async with ChatCompletionsClient(server.base_url, AzureKeyCredential("nope"), retry_total=0) as bad:
            with pytest.raises(ClientAuthenticationError) as info:
                await bad.complete(messages=MESSAGES)
            assert info.value.status_code == 401
        assert server.pending == 0


async def test_token_credential_bearer() -> None:
    async with AzureAIServer(bearer_token="tok") as server:
        server.enqueue(Reply(text="ok"))
        async with ChatCompletionsClient(
            server.base_url,
            StaticTokenCredential("tok"),
            retry_total=0,
        ) as client:
            result = await client.complete(messages=MESSAGES, enforce_https=False)
        assert result.choices[0].message.content == "ok"
        assert server.requests[0].headers["authorization"] == "Bearer tok"


async def test_stream_with_usage_only_when_passed_through(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    server.enqueue(Reply(text="a b c", prompt_tokens=4, completion_tokens=3), Reply(text="x y"))
    stream = await sdk.complete(
        messages=MESSAGES, stream=True, model_extras={"stream_options": {"include_usage": True}}
    )
    updates = [u async for u in stream]
    assert "".join(u.choices[0].delta.content or "" for u in updates if u.choices) == "a b c"
    usage = updates[-1].usage
    assert usage is not None and usage.prompt_tokens == 4
    assert server.requests[0].headers["extra-parameters"] == "pass-through"
    stream = await sdk.complete(messages=MESSAGES, stream=True)
    updates = [u async for u in stream]
    assert all(not u.usage for u in updates)


async def test_extra_parameters_header(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    with pytest.raises(HttpResponseError) as info:
        await sdk.complete(body={"messages": MESSAGES, "top_k": 2})
    assert info.value.status_code == 422
    assert info.value.error is not None and info.value.error.code == "Invalid input"
    with pytest.raises(HttpResponseError):
        await sdk.complete(body={"messages": MESSAGES, "top_k": 2}, headers={"extra-parameters": "error"})
    server.enqueue(Reply(text="dropped"), Reply(text="passed"))
    await sdk.complete(body={"messages": MESSAGES, "top_k": 2}, headers={"extra-parameters": "drop"})
    assert "top_k" not in server.decode(server.requests[-1]).raw
    await sdk.complete(messages=MESSAGES, model_extras={"top_k": 2})
    assert server.decode(server.requests[-1]).raw["top_k"] == 2


async def test_parallel_tool_calls_in_a_stream(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    calls = [ToolCallSpec("f", {"a": 1}, id="c1"), ToolCallSpec("g", {"b": 2}, id="c2")]
    server.enqueue(Reply(tool_calls=calls))
    stream = await sdk.complete(messages=MESSAGES, stream=True)
    by_index: dict[int, str] = {}
    ids = []
    async for update in stream:
        for choice in update.choices:
            for call in choice.delta.tool_calls or []:
                if call.id:
                    ids.append(call.id)
                by_index[call["index"]] = by_index.get(call["index"], "") + (call.function.arguments or "")
    assert ids == ["c1", "c2"]
    assert by_index == {0: '{"a":1}', 1: '{"b":2}'}


async def test_think_tags_rendering() -> None:
    async with AzureAIServer(api_key=KEY, reasoning="think_tags") as server:
        server.enqueue(Reply(text="Answer.", thought="Because."))
        async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as sdk:
            result = await sdk.complete(messages=MESSAGES)
    assert result.choices[0].message.content == "<think>Because.</think>\n\nAnswer."


async def test_info_route(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    info = await sdk.get_model_info()
    assert (info.model_name, info.model_type, info.model_provider_name) == ("Phi-4", "chat-completion", "Microsoft")


async def test_faults_in_azure_error_shape(server: AzureAIServer, sdk: ChatCompletionsClient) -> None:
    server.enqueue(Fault("rate_limit", retry_after=3), Fault("server_error"))
    with pytest.raises(HttpResponseError) as info:
        await sdk.complete(messages=MESSAGES)
    assert info.value.status_code == 429
    assert info.value.response is not None
    assert info.value.response.headers["retry-after"] == "3"  # type: ignore[attr-defined]
    assert "rate limit" in str(info.value)
    with pytest.raises(HttpResponseError) as info:
        await sdk.complete(messages=MESSAGES)
    assert info.value.status_code == 500
    assert info.value.error is not None and info.value.error.code == "InternalServerError"


def test_bad_reasoning_style() -> None:
    with pytest.raises(ValueError, match="reasoning"):
        AzureAIServer(reasoning="tags")  # type: ignore[arg-type]
