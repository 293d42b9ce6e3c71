"""AzureAIChatCompletionClient over real sockets against ext-testing's AzureAIServer, with the real SDK."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import os
import pathlib
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from pydantic import BaseModel

from ext.core import (
    ChatOptions,
    ConfigurationError,
    CreateResult,
    FunctionTool,
    RetryPolicy,
    StreamChunk,
    UserMessage,
    load_component,
)
from ext.models.azure_ai import AzureAIChatCompletionClient, classify_azure_error
from ext.testing.credentials import StaticTokenCredential
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import AzureAIServer, RecordedRequest, StreamResponse, sse_frame

KEY = "azure-ai-test-key-0123456789"
HELLO = [UserMessage(content="Hi")]
SDK_DEFAULT_API_VERSION = "2024-05-01-preview"


def lookup(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


LOOKUP = FunctionTool(lookup)


@pytest.fixture
async def server() -> AsyncIterator[AzureAIServer]:
    async with AzureAIServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
async def client(server: AzureAIServer) -> AsyncIterator[AzureAIChatCompletionClient]:
    c = AzureAIChatCompletionClient(endpoint=server.base_url, model="Phi-4", credential=KEY)
    try:
        yield c
    finally:
        await c.close()


def wire(request: RecordedRequest) -> dict[str, Any]:
    """The request's JSON body."""
    assert isinstance(request.json, dict)
    return request.json


async def _collect(stream: AsyncIterator[StreamChunk | CreateResult]) -> tuple[list[StreamChunk], CreateResult]:
    items = [item async for item in stream]
    assert isinstance(items[-1], CreateResult)
    chunks = [i for i in items[:-1] if isinstance(i, StreamChunk)]
    assert len(chunks) == len(items) - 1
    return chunks, items[-1]


# --- endpoint, credentials, api version -------------------------------------------------------------------------


async def test_the_default_api_version_is_the_sdks(server: AzureAIServer) -> None:
    from azure.ai.inference.aio import ChatCompletionsClient

    from ext.models.azure_ai import SDK_DEFAULT_API_VERSION

    server.enqueue(Reply(text="raw"))
    async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as raw:
        await raw.complete(body={"messages": [{"role": "user", "content": "Hi"}]})
    assert server.requests[0].query_value("api-version") == SDK_DEFAULT_API_VERSION


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault("auth"), "ClientAuthenticationError"),
        (Fault("not_found"), "ResourceNotFoundError"),
        (Fault("bad_request", status=409), "ResourceExistsError"),
        (Fault("bad_request"), "HttpResponseError"),
        (Fault("rate_limit"), "HttpResponseError"),
    ],
)
async def test_errors_are_the_classes_the_sdks_complete_raises(server: AzureAIServer, fault: Fault, error: str) -> None:
    from azure.ai.inference.aio import ChatCompletionsClient

    server.enqueue(fault, fault)
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, max_retries=0
    ) as client:
        with pytest.raises(HttpResponseError) as ours:
            await client.create(HELLO)
    async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as raw:
        with pytest.raises(HttpResponseError) as theirs:
            await raw.complete(body={"messages": [{"role": "user", "content": "Hi"}]})
    assert type(ours.value) is type(theirs.value)
    assert type(ours.value).__name__ == error
    assert str(ours.value) == str(theirs.value)
    assert ours.value.status_code == theirs.value.status_code


async def test_stream_errors_carry_the_error_body(server: AzureAIServer) -> None:
    server.enqueue(Fault("server_error", message="the model is sad"))
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=KEY, max_retries=0) as c:
        with pytest.raises(HttpResponseError, match="the model is sad") as info:
            async for _ in c.create_stream(HELLO):
                pass
    assert info.value.status_code == 500


async def test_key_string_is_sent_as_api_key_and_bearer(server: AzureAIServer, client: Any) -> None:
    server.enqueue(Reply(text="hello"))
    result = await client.create(HELLO)
    assert result.content == "hello"
    (request,) = server.requests
    assert request.path == "/chat/completions"
    assert request.query_value("api-version") == SDK_DEFAULT_API_VERSION
    assert request.headers["api-key"] == KEY
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert wire(request)["model"] == "Phi-4"
    assert "extra-parameters" not in request.headers  # nothing outside the API was sent
    assert client.auth_method == "api_key"
    assert client.api_version is None


async def test_azure_key_credential_and_models_route(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="ok"))
    credential = AzureKeyCredential(KEY)
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url + "/models/", model="Meta-Llama-3.1-8B-Instruct", credential=credential
    ) as client:
        assert (await client.create(HELLO)).content == "ok"
    (request,) = server.requests
    assert request.path == "/models/chat/completions"
    assert request.headers["api-key"] == KEY


async def test_token_credential_sends_its_token_for_the_scopes() -> None:
    credential = StaticTokenCredential("entra-token-abc")
    async with AzureAIServer(bearer_token="entra-token-abc") as server:
        server.enqueue(Reply(text="a"), Reply(text="b"))
        async with AzureAIChatCompletionClient(
            endpoint=server.base_url,
            model="Phi-4",
            credential=credential,
            credential_scopes=["https://cognitiveservices.azure.com/.default"],
        ) as client:
            assert client.auth_method == "token_credential"
            assert (await client.create(HELLO)).content == "a"
            assert (await client.create(HELLO)).content == "b"
        assert [r.headers["authorization"] for r in server.requests] == ["Bearer entra-token-abc"] * 2
        assert "api-key" not in server.requests[0].headers
    # The token is cached by the SDK's policy until it nears expiry: asked for once.
    assert credential.calls == [("https://cognitiveservices.azure.com/.default",)]


async def test_token_credential_default_scope_is_the_sdks() -> None:
    credential = StaticTokenCredential("t")
    async with AzureAIServer(bearer_token="t") as server:
        server.enqueue(Reply(text="x"))
        async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=credential) as c:
            await c.create(HELLO)
    assert credential.calls == [("https://ml.azure.com/.default",)]


async def test_wrong_key_raises_the_sdks_authentication_error_without_the_key(server: AzureAIServer) -> None:
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential="wrong-key-987654321", max_retries=0
    ) as client:
        with pytest.raises(ClientAuthenticationError) as info:
            await client.create(HELLO)
    assert info.value.status_code == 401
    assert "wrong-key-987654321" not in str(info.value)
    assert isinstance(info.value, HttpResponseError)


async def test_api_version_is_sent(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="x"))
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, api_version="2025-05-01"
    ) as client:
        assert client.api_version == "2025-05-01"
        await client.create(HELLO)
    assert server.requests[0].query_value("api-version") == "2025-05-01"


async def test_api_version_the_service_refuses_is_a_bad_request() -> None:
    async with AzureAIServer(api_key=KEY, api_versions=["2024-05-01-preview"]) as server:
        async with AzureAIChatCompletionClient(
            endpoint=server.base_url, model="m", credential=KEY, api_version="2023-01-01", max_retries=3
        ) as client:
            with pytest.raises(HttpResponseError) as info:
                await client.create(HELLO)
        assert info.value.status_code == 400
        assert "api-version" in str(info.value)
        assert len(server.requests) == 1  # a 400 is not retried


async def test_key_from_the_environment(server: AzureAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_AZURE_AI_KEY", KEY)
    server.enqueue(Reply(text="env"))
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", api_key_env="MY_AZURE_AI_KEY") as c:
        assert (await c.create(HELLO)).content == "env"
    assert server.requests[0].headers["api-key"] == KEY


# --- model info ---------------------------------------------------------------------------------------------------


def test_model_info_defaults_for_an_unknown_name_and_overrides() -> None:
    client = AzureAIChatCompletionClient(
        endpoint="https://x.services.ai.azure.com/models", model="my-ft", credential=KEY
    )
    info = client.capabilities
    assert (info.vision, info.function_calling, info.json_output, info.context_window) == (False, True, True, 8192)
    known = AzureAIChatCompletionClient(endpoint="https://x", model="Phi-4-multimodal-instruct", credential=KEY)
    assert known.capabilities.vision is True
    assert known.capabilities.context_window == 128_000
    custom = AzureAIChatCompletionClient(
        endpoint="https://x", model="my-ft", credential=KEY, model_info={"vision": True}, token_limit=4096
    )
    assert custom.capabilities.vision is True
    assert custom.capabilities.context_window == 4096


async def test_count_and_remaining_tokens_are_real_estimates(client: AzureAIChatCompletionClient) -> None:
    assert client.count_tokens(HELLO) > 0
    assert client.count_tokens([UserMessage(content="")]) > 0
    long = [UserMessage(content="the quick brown fox " * 100)]
    assert client.count_tokens(long) >= 2000 // 4
    assert client.count_tokens(HELLO, tools=[LOOKUP]) > client.count_tokens(HELLO)
    assert client.remaining_tokens(long) == client.capabilities.context_window - client.count_tokens(long)
    assert 0 < client.remaining_tokens(long) < client.capabilities.context_window


# --- streaming, usage, model_extras ---------------------------------------------------------------------------


async def test_stream_with_usage_through_model_extras(server: AzureAIServer, client: Any) -> None:
    server.enqueue(Reply(text="one two three", prompt_tokens=21, completion_tokens=3))
    chunks, result = await _collect(client.create_stream(HELLO))
    assert "".join(c.content for c in chunks) == "one two three"
    assert len(chunks) == 3
    assert result.content == "one two three"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (21, 3)
    request = server.requests[0]
    assert wire(request)["stream"] is True
    assert wire(request)["stream_options"] == {"include_usage": True}
    assert request.headers["extra-parameters"] == "pass-through"


async def test_stream_without_usage_sends_no_extras(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="a b", prompt_tokens=9))
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, include_usage=False
    ) as client:
        _, result = await _collect(client.create_stream(HELLO))
    assert result.content == "a b"
    assert result.usage.prompt_tokens == 0
    assert "stream_options" not in wire(server.requests[0])
    assert "extra-parameters" not in server.requests[0].headers


async def test_model_extras_and_top_k_are_passed_through(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="x"), Reply(text="y"))
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, model_extras={"safe_mode": True}
    ) as client:
        await client.create(HELLO, options=ChatOptions(top_k=7, temperature=0.2))
        await client.create(HELLO, extra_create_args={"seed": 3, "logit_bias": {"1": 2}})
    first, second = server.requests
    assert wire(first)["safe_mode"] is True
    assert wire(first)["top_k"] == 7
    assert wire(first)["temperature"] == 0.2
    assert first.headers["extra-parameters"] == "pass-through"
    assert wire(second)["seed"] == 3  # an API field: a complete() argument
    assert wire(second)["logit_bias"] == {"1": 2}  # not one: a model extra


async def test_extras_without_pass_through_are_refused_by_the_service(server: AzureAIServer) -> None:
    """What the service does with extra fields and no `extra-parameters` header (the SDK's body form)."""
    from azure.ai.inference.aio import ChatCompletionsClient
    from azure.ai.inference.models import ChatCompletions

    async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as raw:
        with pytest.raises(HttpResponseError) as info:
            await raw.complete(body={"messages": [{"role": "user", "content": "Hi"}], "top_k": 3})
        assert info.value.status_code == 422
        assert "top_k" in str(info.value)
        server.enqueue(Reply(text="dropped"))
        result = await raw.complete(
            body={"messages": [{"role": "user", "content": "Hi"}], "top_k": 3}, headers={"extra-parameters": "drop"}
        )
        assert isinstance(result, ChatCompletions)
        assert result.choices[0].message.content == "dropped"
        assert "top_k" not in wire(server.requests[-1])


def test_reserved_extra_args_are_refused_before_any_request() -> None:
    client = AzureAIChatCompletionClient(endpoint="https://x", model="m", credential=KEY)
    with pytest.raises(ConfigurationError, match="'stream'"):
        client.build_request(HELLO, extra_create_args={"stream": True})
    with pytest.raises(ConfigurationError, match="model_extras"):
        AzureAIChatCompletionClient(endpoint="https://x", model="m", credential=KEY, model_extras={"messages": []})


# --- tools, JSON, structured output ---------------------------------------------------------------------------


async def test_parallel_tool_calls_streamed_and_round_tripped(server: AzureAIServer, client: Any) -> None:
    calls = [
        ToolCallSpec("lookup", {"city": "Paris"}, id="call_a"),
        ToolCallSpec("lookup", {"city": "Oslo"}, id="call_b"),
    ]
    server.enqueue(Reply(tool_calls=calls))
    _, result = await _collect(client.create_stream(HELLO, tools=[LOOKUP]))
    assert result.finish_reason == "function_calls"
    assert isinstance(result.content, list)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.content] == [
        ("call_a", "lookup", {"city": "Paris"}),
        ("call_b", "lookup", {"city": "Oslo"}),
    ]
    body = wire(server.requests[0])
    assert body["tools"][0]["function"]["name"] == "lookup"
    assert body["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert body["tool_choice"] == "auto"  # sent with tools: some OpenAI-compatible servers ignore tools without it


class Answer(BaseModel):
    city: str
    temperature_c: float


async def test_structured_output_sends_a_strict_json_schema(server: AzureAIServer) -> None:
    server.enqueue(Reply(text='{"city": "Oslo", "temperature_c": -3.5}'))
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="gpt-4o", credential=KEY) as client:
        result = await client.create(HELLO, json_output=Answer)
    assert result.parsed == Answer(city="Oslo", temperature_c=-3.5)
    response_format = wire(server.requests[0])["response_format"]
    assert response_format["type"] == "json_schema"
    spec = response_format["json_schema"]
    assert spec["name"] == "Answer"
    assert spec["strict"] is True
    assert spec["schema"]["required"] == ["city", "temperature_c"]
    assert spec["schema"]["additionalProperties"] is False


async def test_structured_output_without_schema_support_uses_json_mode(server: AzureAIServer, client: Any) -> None:
    server.enqueue(Reply(text='{"city": "Rome", "temperature_c": 20}'))
    result = await client.create(HELLO, json_output=Answer)  # Phi-4: no structured output in the table
    assert result.parsed == Answer(city="Rome", temperature_c=20)
    assert wire(server.requests[0])["response_format"] == {"type": "json_object"}


# --- reasoning ----------------------------------------------------------------------------------------------------


async def test_reasoning_content_is_the_thought(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="4", thought="2 and 2 make 4"), Reply(text="5", thought="two plus three"))
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="DeepSeek-R1", credential=KEY) as client:
        result = await client.create(HELLO)
        assert (result.content, result.thought) == ("4", "2 and 2 make 4")
        chunks, streamed = await _collect(client.create_stream(HELLO))
    assert "".join(c.thought for c in chunks) == "two plus three"
    assert "".join(c.content for c in chunks) == "5"
    assert (streamed.content, streamed.thought) == ("5", "two plus three")


async def test_think_tags_are_split_off_the_answer() -> None:
    async with AzureAIServer(api_key=KEY, reasoning="think_tags") as server:
        server.enqueue(
            Reply(text="Paris.", thought="The capital of France"), Reply(text="Rome.", thought="Italy's capital")
        )
        async with AzureAIChatCompletionClient(endpoint=server.base_url, model="DeepSeek-R1", credential=KEY) as c:
            result = await c.create(HELLO)
            assert (result.content, result.thought) == ("Paris.", "The capital of France")
            chunks, streamed = await _collect(c.create_stream(HELLO))
        assert all("<think>" not in ch.content and "</think>" not in ch.content for ch in chunks)
        assert "".join(ch.content for ch in chunks) == "Rome."
        assert "".join(ch.thought for ch in chunks).strip() == "Italy's capital"
        assert (streamed.content, streamed.thought) == ("Rome.", "Italy's capital")


async def test_think_tags_kept_when_turned_off() -> None:
    async with AzureAIServer(api_key=KEY, reasoning="think_tags") as server:
        server.enqueue(Reply(text="Paris.", thought="hmm"))
        async with AzureAIChatCompletionClient(
            endpoint=server.base_url, model="m", credential=KEY, think_tags=False
        ) as c:
            result = await c.create(HELLO)
    assert result.content == "<think>hmm</think>\n\nParis."
    assert result.thought is None


# --- errors and retries ---------------------------------------------------------------------------------------


async def test_rate_limit_retried_then_the_sdks_error_is_raised(server: AzureAIServer) -> None:
    policy = RetryPolicy(max_retries=2, multiplier=0.0)
    server.enqueue(Fault("rate_limit", retry_after=0.01), Fault("rate_limit", retry_after=0.01), Fault("rate_limit"))
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, retry_policy=policy
    ) as client:
        with pytest.raises(HttpResponseError) as info:
            await client.create(HELLO)
    assert info.value.status_code == 429
    assert len(server.requests) == 3
    assert policy.classify(info.value).retryable


async def test_429_then_success_uses_retry_after(server: AzureAIServer) -> None:
    server.enqueue(Fault("rate_limit", retry_after=0.01), Reply(text="after"))
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=KEY, max_retries=1) as c:
        assert (await c.create(HELLO)).content == "after"
    assert len(server.requests) == 2


async def test_not_found_is_the_sdks_resource_not_found(server: AzureAIServer, client: Any) -> None:
    server.enqueue(Fault("not_found"))
    with pytest.raises(ResourceNotFoundError) as info:
        await client.create(HELLO)
    assert info.value.status_code == 404
    assert len(server.requests) == 1


async def test_classifier_decisions(server: AzureAIServer) -> None:
    from azure.ai.inference.aio import ChatCompletionsClient

    server.enqueue(Fault("rate_limit", retry_after=2.5), Fault("server_error"), Fault("bad_request"))
    async with ChatCompletionsClient(server.base_url, AzureKeyCredential(KEY), retry_total=0) as raw:
        errors = []
        for _ in range(3):
            with pytest.raises(HttpResponseError) as info:
                await raw.complete(body={"messages": [{"role": "user", "content": "Hi"}]})
            errors.append(info.value)
    decisions = [classify_azure_error(e) for e in errors]
    assert [(d.retryable, d.retry_after) for d in decisions if d is not None] == [
        (True, 2.5),
        (True, None),
        (False, None),
    ]
    assert classify_azure_error(ValueError("x")) is None


async def test_the_retry_classifier_is_registered() -> None:
    names = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="ext.retry")}
    assert names["azure_ai"] == "ext.models.azure_ai._retry:classify_azure_error"


async def test_http_bearer_token_to_a_remote_host_is_refused_by_azure_core() -> None:
    from azure.core.exceptions import ServiceRequestError

    client = AzureAIChatCompletionClient(
        endpoint="http://192.0.2.1:9", model="m", credential=StaticTokenCredential("t"), max_retries=3
    )
    with pytest.raises(ServiceRequestError, match="non-TLS"):
        await client.create(HELLO)
    await client.close()


# --- close, components, bad input, secrets -----------------------------------------------------------------


async def test_close_releases_the_connections(server: AzureAIServer) -> None:
    server.enqueue(Reply(text="x"))
    client = AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=KEY)
    await client.create(HELLO)
    assert server.open_connections == 1  # kept alive by the SDK's aiohttp session
    await client.close()
    await server.wait_for_no_connections()
    assert server.open_connections == 0
    with pytest.raises(RuntimeError, match="closed"):
        await client.create(HELLO)


async def test_dump_and_load_without_the_key(server: AzureAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = AzureAIChatCompletionClient(
        endpoint=server.base_url,
        model="Phi-4",
        credential=KEY,
        api_version="2024-05-01-preview",
        temperature=0.3,
        model_extras={"safe_mode": True},
    )
    dumped = client.dump_component()
    text = dumped.model_dump_json()
    assert KEY not in text
    assert dumped.provider == "ext.models.azure_ai.AzureAIChatCompletionClient"
    assert dumped.config["api_key_env"] == "AZURE_AI_API_KEY"
    assert dumped.config["temperature"] == 0.3
    assert dumped.config.get("api_key") is None
    monkeypatch.delenv("AZURE_AI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="AZURE_AI_API_KEY"):
        load_component(text)
    monkeypatch.setenv("AZURE_AI_API_KEY", KEY)
    loaded = load_component(text, AzureAIChatCompletionClient)
    server.enqueue(Reply(text="loaded"))
    assert (await loaded.create(HELLO)).content == "loaded"
    request = server.requests[0]
    assert request.headers["api-key"] == KEY
    assert wire(request)["temperature"] == 0.3
    assert wire(request)["safe_mode"] is True
    await loaded.close()
    await client.close()


async def test_token_credential_client_dumps_no_credential() -> None:
    client = AzureAIChatCompletionClient(endpoint="https://x", model="m", credential=StaticTokenCredential("tok-xyz"))
    dumped = client.dump_component().model_dump_json()
    assert "tok-xyz" not in dumped
    await client.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint": "not a url"}, "endpoint"),
        ({"model": ""}, "model"),
        ({"credential": 12345}, "credential"),
        ({"credential": None, "api_key_env": None}, "credential"),
        ({"credential": AzureKeyCredential("")}, "empty key"),
        ({"api_version": "May 2024"}, "api_version"),
        ({"temperature": 3.0}, "temperature"),
        ({"temperature": 1.5}, "temperature"),  # OpenAI's range, not the service's
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"stop": [""]}, "stop"),
        ({"credential": "k", "api_key": "k2"}, "credential or api_key"),
    ],
)
async def test_bad_input_fails_at_construction_naming_the_field(
    server: AzureAIServer, kwargs: dict[str, Any], match: str
) -> None:
    args: dict[str, Any] = {"endpoint": server.base_url, "model": "m", "credential": KEY, **kwargs}
    with pytest.raises(ConfigurationError, match=match) as info:
        AzureAIChatCompletionClient(**args)
    assert KEY not in str(info.value)
    assert server.requests == []


async def test_bad_call_arguments_fail_before_any_request(server: AzureAIServer, client: Any) -> None:
    with pytest.raises(ConfigurationError, match="messages"):
        await client.create("Hi")
    with pytest.raises(ValueError, match="temperature"):
        await client.create(HELLO, options={"temperature": 9})
    with pytest.raises(ConfigurationError, match="extra_create_args"):
        await client.create(HELLO, extra_create_args={"model_extras": 3})
    assert server.requests == []


async def test_secrets_stay_out_of_repr_and_logs(server: AzureAIServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(Reply(text="x"), Fault("auth"))
    async with AzureAIChatCompletionClient(
        endpoint=server.base_url, model="m", credential=KEY, max_retries=0
    ) as client:
        assert KEY not in repr(client)
        await client.create(HELLO)
        with pytest.raises(HttpResponseError) as info:
            await client.create(HELLO)
    assert KEY not in str(info.value)
    assert caplog.records  # azure-core logged the requests (headers redacted)
    assert KEY not in caplog.text


def test_aiohttp_is_declared() -> None:
    """azure-ai-inference's async client needs aiohttp and does not declare it: this distribution does, so this
    package's own environment (which installs only what it declares) has it."""
    requires = importlib.metadata.requires("ext-models-azure-ai") or []
    assert any(r.replace(" ", "").startswith("aiohttp") for r in requires)
    sdk_requires = importlib.metadata.requires("azure-ai-inference") or []
    assert not any(r.startswith("aiohttp") and "extra" not in r for r in sdk_requires)
    import aiohttp  # noqa: F401


async def test_a_stream_cut_short_is_a_connection_error(server: AzureAIServer, client: Any) -> None:
    frames = [
        sse_frame(
            {"id": "1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "par"}}]}
        ),
    ]
    server.enqueue(StreamResponse(frames))
    seen: list[str] = []
    with pytest.raises(ConnectionError, match="ended before its last event"):
        async for item in client.create_stream(HELLO):
            if isinstance(item, StreamChunk):
                seen.append(item.content)
    assert seen == ["par"]


async def test_a_stream_dropped_mid_body_raises_the_transport_error(server: AzureAIServer) -> None:
    from azure.core.exceptions import IncompleteReadError

    server.enqueue(Fault("drop_mid_body"))
    seen: list[str] = []
    async with AzureAIChatCompletionClient(endpoint=server.base_url, model="m", credential=KEY) as c:
        with pytest.raises(IncompleteReadError) as info:
            async for item in c.create_stream(HELLO):
                if isinstance(item, StreamChunk):
                    seen.append(item.content)
    assert seen  # some text arrived before the connection dropped: after the first chunk nothing is retried
    assert len(server.requests) == 1
    decision = classify_azure_error(info.value)
    assert decision is not None and decision.retryable  # before the first chunk it would be


async def test_sse_comments_and_crlf_line_ends_are_read(server: AzureAIServer, client: Any) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    frames = [
        b": keep-alive\r\n\r\n",
        sse_frame(chunk({"content": "a"})).replace(b"\n", b"\r\n"),
        sse_frame(chunk({"content": "b"}, "stop")),
        b"data: [DONE]\n\n",
    ]
    server.enqueue(StreamResponse(frames))
    _, result = await _collect(client.create_stream(HELLO))
    assert (result.content, result.finish_reason) == ("ab", "stop")


async def test_the_readme_example_runs_as_written(server: AzureAIServer) -> None:
    readme = pathlib.Path(__file__).parent.parent / "README.md"
    example = re.findall(r"```python\n(.*?)```", readme.read_text(), re.DOTALL)[0]
    server.enqueue(Reply(text="4", prompt_tokens=12, completion_tokens=1), Reply(text="one two three four five"))
    env = {**os.environ, "AZURE_AI_ENDPOINT": server.base_url + "/models", "AZURE_AI_API_KEY": KEY}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", example, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("4 ") and "prompt_tokens=12" in lines[0]
    assert "CreateResult" in lines[-1] and "one two three four five" in lines[-1]
    assert [r.path for r in server.requests] == ["/models/chat/completions"] * 2
