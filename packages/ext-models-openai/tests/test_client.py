"""Both clients through the real openai SDK over loopback sockets against ext-testing's OpenAIServer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ChatOptions,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionTool,
    Image,
    LLMMessage,
    RetryPolicy,
    StreamChunk,
    SystemMessage,
    UnsupportedOptionError,
    UserMessage,
    load_component,
)
from ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient
from ext.testing.conformance import assert_dump_round_trip
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import OpenAIServer, RecordedRequest

KEY = "sk-test-key-0123456789"  # the key the conftest server expects
HELLO: list[LLMMessage] = [UserMessage(content="Hi")]
TOKEN = "entra-token-abcdef012345"
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201"
    "8f2b3f5a0000000049454e44ae426082"
)
FAST_RETRIES = RetryPolicy(max_retries=3, multiplier=0.001, jitter=0.0)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class City(BaseModel):
    name: str
    population: int


def make(server: OpenAIServer, model: str = "gpt-4o", **kwargs: Any) -> OpenAIChatCompletionClient:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("bundled_encodings", False)
    return OpenAIChatCompletionClient(model, base_url=server.base_url + "/v1", **kwargs)


def make_azure(server: OpenAIServer, **kwargs: Any) -> AzureOpenAIChatCompletionClient:
    kwargs.setdefault("azure_endpoint", server.base_url)
    kwargs.setdefault("azure_deployment", "my-deployment")
    kwargs.setdefault("api_version", "2024-10-21")
    kwargs.setdefault("bundled_encodings", False)
    return AzureOpenAIChatCompletionClient(**kwargs)


def body(request: RecordedRequest) -> dict[str, Any]:
    assert isinstance(request.json, dict)
    return request.json


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[OpenAIChatCompletionClient]:
    c = make(server)
    yield c
    await c.close()


# --- configuration: defaults and validation ----------------------------------------------------------------


def test_defaults() -> None:
    client = OpenAIChatCompletionClient("gpt-4o", api_key=KEY)
    config = client.dump_component().config
    assert config["model"] == "gpt-4o"
    assert config["timeout"] == 60.0
    assert config["max_retries"] == 3
    assert config["temperature"] is None  # not sent: the API's default (1.0) applies
    assert config["top_p"] is None
    assert config["max_tokens"] is None
    assert config["base_url"] is None
    assert config["include_usage"] is True
    assert config["system_role"] == "auto"
    assert config["api_key_env"] == "OPENAI_API_KEY"
    assert config["allow_encoding_download"] is False
    assert client.base_url == "https://api.openai.com/v1/"
    assert client.capabilities.vision is True and client.capabilities.context_window == 128_000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": 2.5}, "temperature: Input should be less than or equal to 2"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"frequency_penalty": 3}, "frequency_penalty"),
        ({"presence_penalty": -3}, "presence_penalty"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"base_url": "ftp://example.com"}, "base_url must be an http:// or https:// URL"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"stop": [""]}, "stop must not contain empty strings"),
        ({"system_role": "boss"}, "system_role"),
        ({"token_limit": 0}, "token_limit"),
        ({"model_info": {"vision": "maybe"}}, "model_info"),
        ({"model_info": {"no_such_field": True}}, "model_info"),
        ({"default_options": {"temperature": 9}}, "default_options.temperature"),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OpenAIChatCompletionClient("gpt-4o", api_key=KEY, **kwargs)


def test_model_is_required() -> None:
    with pytest.raises(ConfigurationError, match="model"):
        OpenAIChatCompletionClient("", api_key=KEY)


def test_missing_key_names_the_argument_and_variable() -> None:
    with pytest.raises(ConfigurationError, match=r"api_key=.*OPENAI_API_KEY"):
        OpenAIChatCompletionClient("gpt-4o")
    with pytest.raises(ConfigurationError, match="MY_KEY"):
        OpenAIChatCompletionClient("gpt-4o", api_key_env="MY_KEY")


async def test_key_and_organization_from_env(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    client = OpenAIChatCompletionClient("gpt-4o", base_url=server.base_url + "/v1", bundled_encodings=False)
    server.enqueue(Reply(text="ok"))
    assert (await client.create(HELLO)).content == "ok"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["openai-organization"] == "org-123"
    await client.close()


async def test_key_from_a_custom_env_var(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", KEY)
    client = make(server, api_key=None, api_key_env="MY_OPENAI_KEY")
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert client.dump_component().config["api_key_env"] == "MY_OPENAI_KEY"
    await client.close()


async def test_unknown_model_gets_defaults_not_an_error(server: OpenAIServer) -> None:
    client = make(server, model="my-local-llama-7b")
    info = client.capabilities
    assert (info.vision, info.function_calling, info.json_output, info.structured_output) == (False, True, True, True)
    assert info.context_window == 8192
    server.enqueue(Reply(text="hi"))
    assert (await client.create(HELLO)).content == "hi"
    assert body(server.requests[0])["model"] == "my-local-llama-7b"
    await client.close()


async def test_client_level_options_and_call_overrides(server: OpenAIServer) -> None:
    client = make(
        server,
        temperature=0.3,
        top_p=0.9,
        max_tokens=64,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        seed=7,
        stop="END",
        user="user-42",
    )
    server.enqueue(Reply(text="a"), Reply(text="b"))
    await client.create(HELLO)
    assert {k: v for k, v in body(server.requests[0]).items() if k not in ("model", "messages")} == {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 64,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
        "seed": 7,
        "stop": ["END"],
        "user": "user-42",
    }
    await client.create(HELLO, options=ChatOptions(temperature=1.5, stop_sequences=["X", "Y"]))
    sent = body(server.requests[1])
    assert (sent["temperature"], sent["stop"], sent["max_tokens"]) == (1.5, ["X", "Y"], 64)
    await client.close()


async def test_top_k_is_rejected_and_extra_args_reach_the_body(server: OpenAIServer, client: Any) -> None:
    with pytest.raises(UnsupportedOptionError, match="top_k"):
        await client.create(HELLO, options=ChatOptions(top_k=5))
    with pytest.raises(ConfigurationError, match="messages"):
        await client.create(HELLO, extra_create_args={"messages": []})
    assert server.requests == []
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO, extra_create_args={"top_k": 20, "logprobs": True, "extra_body": {"min_p": 0.05}})
    sent = body(server.requests[0])
    assert (sent["top_k"], sent["logprobs"], sent["min_p"]) == (20, True, 0.05)


async def test_custom_http_client_is_used_and_not_closed(server: OpenAIServer) -> None:
    http = httpx2.AsyncClient(headers={"x-via": "custom"})
    client = make(server, http_client=http)
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    assert server.requests[0].headers["x-via"] == "custom"
    await client.close()
    assert not http.is_closed
    await http.aclose()


async def test_default_headers(server: OpenAIServer) -> None:
    client = make(server, default_headers={"x-gateway-key": "gw-secret-999"})
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    assert server.requests[0].headers["x-gateway-key"] == "gw-secret-999"
    # A dump would lose the header (name and value): refused, saying what to do instead.
    with pytest.raises(ComponentError, match=r"default_headers\['x-gateway-key'\].*default_headers_env") as info:
        client.dump_component()
    assert "gw-secret-999" not in str(info.value)
    await client.close()


@pytest.mark.parametrize("azure", [False, True])
async def test_default_headers_from_the_environment_survive_a_dump(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, azure: bool
) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "gw-secret-999")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY" if azure else "OPENAI_API_KEY", KEY)
    kwargs: dict[str, Any] = {"default_headers_env": {"x-gateway-key": "GATEWAY_KEY"}, "api_key": None}
    client = make_azure(server, **kwargs) if azure else make(server, **kwargs)
    dump = client.dump_component()
    assert dump.config["default_headers_env"] == {"x-gateway-key": "GATEWAY_KEY"}
    assert "gw-secret-999" not in dump.model_dump_json()
    loaded = assert_dump_round_trip(client)
    server.enqueue(Reply(text="ok"))
    await loaded.create(HELLO)
    assert server.requests[0].headers["x-gateway-key"] == "gw-secret-999"
    await client.close()
    await loaded.close()


def test_default_headers_env_must_be_set(server: OpenAIServer) -> None:
    with pytest.raises(ConfigurationError, match=r"default_headers_env\['x-k'\]: environment variable 'NOPE_UNSET'"):
        make(server, default_headers_env={"x-k": "NOPE_UNSET"})


async def test_settings_given_as_objects_refuse_to_dump(server: OpenAIServer) -> None:
    """A dump cannot hold an HTTP client, a retry policy or a token provider: refused, not silently dropped."""
    async with httpx2.AsyncClient() as http:
        client = make(server, http_client=http)
        with pytest.raises(ComponentError, match="http_client: an HTTP client object"):
            client.dump_component()
    client = make(server, retry_policy=FAST_RETRIES)
    with pytest.raises(ComponentError, match="retry_policy: a RetryPolicy object"):
        client.dump_component()
    azure = make_azure(server, azure_ad_token_provider=lambda: TOKEN)
    with pytest.raises(ComponentError, match="azure_ad_token_provider: a callable"):
        azure.dump_component()
    await client.close()
    await azure.close()


# --- Azure ----------------------------------------------------------------------------------------------------


async def test_azure_routing_with_api_key(server: OpenAIServer) -> None:
    client = make_azure(server, api_key=KEY, model="gpt-4o")
    assert client.auth_method == "api_key"
    server.enqueue(Reply(text="from azure"))
    assert (await client.create(HELLO)).content == "from azure"
    (request,) = server.requests
    assert request.path == "/openai/deployments/my-deployment/chat/completions"
    assert request.query == {"api-version": ["2024-10-21"]}
    assert request.headers["api-key"] == KEY
    assert "authorization" not in request.headers
    assert body(request)["model"] == "gpt-4o"
    await client.close()


async def test_azure_ad_token_is_a_bearer_header() -> None:
    async with OpenAIServer(azure_ad_token=TOKEN) as server:
        client = make_azure(server, azure_ad_token=TOKEN)
        assert client.auth_method == "azure_ad_token"
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
        (request,) = server.requests
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert "api-key" not in request.headers
        assert TOKEN not in repr(client) and TOKEN not in client.dump_component().model_dump_json()
        await client.close()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_azure_token_provider_is_called_per_request(kind: str) -> None:
    calls: list[int] = []

    def sync_provider() -> str:
        calls.append(1)
        return TOKEN

    async def async_provider() -> str:
        calls.append(1)
        return TOKEN

    async with OpenAIServer(azure_ad_token=TOKEN) as server:
        client = make_azure(server, azure_ad_token_provider=async_provider if kind == "async" else sync_provider)
        assert client.auth_method == "azure_ad_token_provider"
        server.enqueue(Reply(text="1"), Reply(text="2"))
        await client.create(HELLO)
        await client.create(HELLO)
        assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {TOKEN}"] * 2
        assert len(calls) == 2
        await client.close()


async def test_azure_from_env(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.base_url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01-preview")
    client = AzureOpenAIChatCompletionClient(azure_deployment="dep", bundled_encodings=False)
    assert client.model == "dep"  # the deployment name when no model is given
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    (request,) = server.requests
    assert request.path == "/openai/deployments/dep/chat/completions"
    assert request.query_value("api-version") == "2025-01-01-preview"
    assert request.headers["api-key"] == KEY
    await client.close()


async def test_azure_token_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", TOKEN)
    async with OpenAIServer(azure_ad_token=TOKEN) as server:
        client = make_azure(server)
        assert client.auth_method == "azure_ad_token"
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
        assert server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
        await client.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"api_version": "2024-13-01"}, "api_version must be a date like 2024-10-21"),
        ({"api_version": "v1"}, "api_version must be a date"),
        ({"api_version": "2024-10-21-beta"}, "api_version"),
        ({"azure_deployment": ""}, "azure_deployment"),
        ({"azure_endpoint": "not a url"}, "azure_endpoint must be an http"),
        ({"api_key": KEY, "azure_ad_token": TOKEN}, "only one of api_key, azure_ad_token"),
        ({"azure_ad_token_provider": "token"}, "azure_ad_token_provider must be a callable"),
        ({"temperature": 3.0}, "temperature"),
    ],
)
def test_azure_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    values: dict[str, Any] = {
        "azure_endpoint": "https://example.openai.azure.com",
        "azure_deployment": "dep",
        "api_version": "2024-10-21",
        "api_key": None if "azure_ad_token" in kwargs or "azure_ad_token_provider" in kwargs else KEY,
    }
    values.update(kwargs)
    with pytest.raises(ConfigurationError, match=match):
        AzureOpenAIChatCompletionClient(**values)


def test_azure_missing_pieces_name_the_argument_and_variable() -> None:
    with pytest.raises(ConfigurationError, match=r"azure_endpoint.*AZURE_OPENAI_ENDPOINT"):
        AzureOpenAIChatCompletionClient(azure_deployment="d", api_version="2024-10-21", api_key=KEY)
    with pytest.raises(ConfigurationError, match=r"api_version.*OPENAI_API_VERSION"):
        AzureOpenAIChatCompletionClient(azure_deployment="d", azure_endpoint="https://x.openai.azure.com", api_key=KEY)
    with pytest.raises(ConfigurationError, match=r"api_key=.*AZURE_OPENAI_API_KEY"):
        AzureOpenAIChatCompletionClient(
            azure_deployment="d", azure_endpoint="https://x.openai.azure.com", api_version="2024-10-21"
        )


# --- structured output, JSON mode, images, tools -------------------------------------------------------------


async def test_structured_output_wire_request(server: OpenAIServer, client: Any) -> None:
    server.enqueue(
        Reply(text='{"name": "Oslo", "population": 709000}'), Reply(text='{"name": "Rome", "population": 1}')
    )
    result = await client.create(HELLO, json_output=City)
    assert result.parsed == City(name="Oslo", population=709000)
    assert body(server.requests[0])["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "City",
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
                "required": ["name", "population"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    # the cached schema is not changed by the first call
    await client.create(HELLO, json_output=City)
    assert body(server.requests[1])["response_format"] == body(server.requests[0])["response_format"]


async def test_json_mode_wire_request(server: OpenAIServer, client: Any) -> None:
    server.enqueue(Reply(text='{"ok": true}'))
    assert (await client.create(HELLO, json_output=True)).parsed == {"ok": True}
    assert body(server.requests[0])["response_format"] == {"type": "json_object"}


async def test_structured_output_falls_back_to_json_mode(server: OpenAIServer) -> None:
    client = make(server, model="gpt-4-turbo")  # no json_schema support
    server.enqueue(Reply(text='{"name": "Oslo", "population": 5}'))
    assert (await client.create(HELLO, json_output=City)).parsed == City(name="Oslo", population=5)
    assert body(server.requests[0])["response_format"] == {"type": "json_object"}
    await client.close()


async def test_images_are_data_uris_on_the_wire(server: OpenAIServer, client: Any) -> None:
    image = Image.from_bytes(PNG_1PX)
    server.enqueue(Reply(text="a dot"))
    await client.create([UserMessage(content=["what is this?", image])])
    (message,) = body(server.requests[0])["messages"]
    assert message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image.to_base64()}},
        ],
    }


async def test_parallel_tool_calls(server: OpenAIServer) -> None:
    client = make(server, parallel_tool_calls=True)
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("add", {"a": 1, "b": 2}, id="call_1"),
                ToolCallSpec("multiply", {"a": 3, "b": 4}, id="call_2"),
            ]
        )
    )
    result = await client.create(HELLO, tools=[FunctionTool(add), FunctionTool(multiply)])
    assert result.finish_reason == "function_calls"
    assert isinstance(result.content, list)
    assert [(c.id, c.name, c.arguments) for c in result.content] == [
        ("call_1", "add", '{"a":1,"b":2}'),
        ("call_2", "multiply", '{"a":3,"b":4}'),
    ]
    sent = body(server.requests[0])
    assert sent["parallel_tool_calls"] is True
    assert [t["function"]["name"] for t in sent["tools"]] == ["add", "multiply"]
    assert sent["tool_choice"] == "auto"  # sent although it is the API default (see below)
    await client.close()


@pytest.mark.parametrize("azure", [False, True])
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_through_a_server_that_needs_tool_choice(azure: bool, stream: bool) -> None:
    """llama-cpp-python's server (chatml-function-calling) ignores tools unless the request carries tool_choice."""
    async with OpenAIServer(api_key=KEY, tools_need_tool_choice=True) as server:
        client = make_azure(server, api_key=KEY) if azure else make(server)
        server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}, id="call_1")]))
        if stream:
            *_, result = [item async for item in client.create_stream(HELLO, tools=[FunctionTool(add)])]
            assert isinstance(result, CreateResult)
        else:
            result = await client.create(HELLO, tools=[FunctionTool(add)], tool_choice="auto")
        assert server.tools_ignored == 0
        assert result.finish_reason == "function_calls"
        assert isinstance(result.content, list)
        assert [(c.name, c.arguments) for c in result.content] == [("add", '{"a":1,"b":2}')]
        assert body(server.requests[0])["tool_choice"] == "auto"
        await client.close()


async def test_system_messages_stay_in_place(server: OpenAIServer, client: Any) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create(
        [
            SystemMessage(content="one"),
            UserMessage(content="u"),
            AssistantMessage(content="a"),
            SystemMessage(content="two"),
        ]
    )
    assert [(m["role"], m["content"]) for m in body(server.requests[0])["messages"]] == [
        ("system", "one"),
        ("user", "u"),
        ("assistant", "a"),
        ("system", "two"),
    ]


# --- reasoning models ------------------------------------------------------------------------------------------


async def test_reasoning_model_wire_rules(server: OpenAIServer) -> None:
    client = make(server, model="o3-mini", reasoning_effort="high", temperature=1.0, max_tokens=500)
    server.enqueue(Reply(text="4", thought="2 plus 2", reasoning_tokens=12, completion_tokens=20))
    result = await client.create([SystemMessage(content="be exact"), UserMessage(content="2+2?")])
    assert result.content == "4"
    assert result.thought == "2 plus 2"
    assert result.usage.reasoning_tokens == 12
    sent = body(server.requests[0])
    assert sent["messages"][0] == {"role": "developer", "content": "be exact"}
    assert sent["max_completion_tokens"] == 500
    assert sent["reasoning_effort"] == "high"
    assert "max_tokens" not in sent and "temperature" not in sent
    await client.close()


async def test_reasoning_model_rejects_sampling_before_any_request(server: OpenAIServer) -> None:
    client = make(server, model="gpt-5")
    for options in (ChatOptions(temperature=0.2), ChatOptions(top_p=0.5), ChatOptions(presence_penalty=1.0)):
        with pytest.raises(UnsupportedOptionError, match="reasoning model 'gpt-5'"):
            await client.create(HELLO, options=options)
    assert server.requests == []
    # the override for a model the table gets wrong
    relaxed = make(server, model="gpt-5", model_info={"reasoning": False})
    server.enqueue(Reply(text="ok"))
    await relaxed.create([SystemMessage(content="s"), *HELLO], options=ChatOptions(temperature=0.2, max_tokens=5))
    sent = body(server.requests[0])
    assert (sent["temperature"], sent["max_tokens"], sent["messages"][0]["role"]) == (0.2, 5, "system")
    await client.close()
    await relaxed.close()


async def test_reasoning_streams_as_thought_chunks(server: OpenAIServer) -> None:
    client = make(server, model="deepseek-r1")
    server.enqueue(Reply(text="yes", thought="let me think", reasoning_tokens=3))
    items = [item async for item in client.create_stream(HELLO)]
    thoughts = [i.thought for i in items if isinstance(i, StreamChunk) and i.thought]
    assert "".join(thoughts) == "let me think"
    result = items[-1]
    assert isinstance(result, CreateResult)
    assert (result.content, result.thought, result.usage.reasoning_tokens) == ("yes", "let me think", 3)
    await client.close()


# --- streaming --------------------------------------------------------------------------------------------------


async def test_stream_usage_is_on_by_default(server: OpenAIServer, client: Any) -> None:
    server.enqueue(Reply(text="one two three", prompt_tokens=7, completion_tokens=3, cached_tokens=2))
    items = [item async for item in client.create_stream(HELLO)]
    assert body(server.requests[0])["stream_options"] == {"include_usage": True}
    result = items[-1]
    assert isinstance(result, CreateResult)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cached_tokens) == (7, 3, 2)
    assert "".join(i.content for i in items[:-1] if isinstance(i, StreamChunk)) == "one two three"


async def test_stream_usage_can_be_turned_off(server: OpenAIServer) -> None:
    client = make(server, include_usage=False)
    server.enqueue(Reply(text="x y"))
    items = [item async for item in client.create_stream(HELLO)]
    assert "stream_options" not in body(server.requests[0])
    result = items[-1]
    assert isinstance(result, CreateResult) and result.content == "x y"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (0, 0)
    await client.close()


async def test_consumer_stopping_early_closes_the_connection(server: OpenAIServer, client: Any) -> None:
    server.enqueue(Reply(text="alpha beta gamma delta", stall_after_chunks=3))
    stream = client.create_stream(HELLO)
    async for item in stream:
        if isinstance(item, StreamChunk) and item.content:
            break
    await stream.aclose()
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)


# --- retries, timeouts, cancellation -------------------------------------------------------------------------------


async def test_rate_limit_is_retried_then_succeeds(server: OpenAIServer) -> None:
    client = make(server)  # max_retries=3 by default
    server.enqueue(Fault("rate_limit", retry_after=0), Fault("rate_limit", retry_after=0), Reply(text="finally"))
    assert (await client.create(HELLO)).content == "finally"
    assert len(server.requests) == 3
    await client.close()


async def test_rate_limit_forever_raises_rate_limit_error(server: OpenAIServer) -> None:
    client = make(server, max_retries=3)
    for _ in range(5):
        server.enqueue(Fault("rate_limit", retry_after=0))
    with pytest.raises(openai.RateLimitError) as info:
        await client.create(HELLO)
    assert info.value.status_code == 429
    assert len(server.requests) == 4  # the first attempt and three retries, no SDK retries on top
    await client.close()


async def test_retry_after_is_honoured(server: OpenAIServer) -> None:
    client = make(server, max_retries=1)
    server.enqueue(Fault("rate_limit", retry_after=0.3), Reply(text="ok"))
    await client.create(HELLO)
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.25
    await client.close()


async def test_max_retries_zero_means_one_attempt(server: OpenAIServer) -> None:
    client = make(server, max_retries=0)
    server.enqueue(Fault("server_error"), Reply(text="never"))
    with pytest.raises(openai.InternalServerError):
        await client.create(HELLO)
    assert len(server.requests) == 1
    await client.close()


async def test_should_retry_header_false_is_not_retried(server: OpenAIServer) -> None:
    client = make(server, max_retries=3)
    # An empty script answers 500 with x-should-retry: false.
    with pytest.raises(openai.InternalServerError):
        await client.create(HELLO)
    assert len(server.requests) == 1
    await client.close()


async def test_timeout_raises_the_sdk_error_promptly(server: OpenAIServer) -> None:
    client = make(server, timeout=0.3, max_retries=0)
    server.enqueue(Fault("hang"))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        await client.create(HELLO)
    assert time.monotonic() - started < 3
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)
    await client.close()


async def test_timeout_is_per_attempt_and_retried(server: OpenAIServer) -> None:
    client = make(server, timeout=0.2, retry_policy=RetryPolicy(max_retries=1, multiplier=0.001, jitter=0.0))
    server.enqueue(Fault("hang"), Reply(text="second try"))
    assert (await client.create(HELLO)).content == "second try"
    assert len(server.requests) == 2
    await client.close()


async def test_dropped_connection_is_retried(server: OpenAIServer) -> None:
    client = make(server, retry_policy=FAST_RETRIES)
    server.enqueue(Fault("drop"), Reply(text="reconnected"))
    assert (await client.create(HELLO)).content == "reconnected"
    await client.close()


# --- secrets and components ---------------------------------------------------------------------------------------


async def test_no_secret_in_repr_errors_or_dumps(server: OpenAIServer) -> None:
    client = make(server)
    assert KEY not in repr(client) and KEY not in str(client.dump_component())
    server.enqueue(Fault("auth"))
    with pytest.raises(openai.AuthenticationError) as info:
        await client.create(HELLO)
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    with pytest.raises(ConfigurationError) as bad:
        OpenAIChatCompletionClient("gpt-4o", api_key=KEY, temperature=7)
    assert KEY not in str(bad.value)
    await client.close()


async def test_every_option_survives_a_dump(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TEAM", "blue")
    client = make(
        server,
        api_key=None,
        organization="org-1",
        project="proj-1",
        timeout=12.5,
        max_retries=1,
        temperature=0.2,
        top_p=0.9,
        max_tokens=99,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        seed=7,
        stop=["END"],
        user="u-1",
        reasoning_effort="low",
        parallel_tool_calls=False,
        include_usage=False,
        system_role="developer",
        default_headers_env={"x-team": "TEAM"},
        extra_body={"top_k": 3},
        model_info={"vision": False},
        token_limit=5000,
        default_options={"temperature": 0.3},
        tiktoken_cache_dir="/tmp/somewhere",
        bundled_encodings=False,
        allow_encoding_download=True,
    )
    loaded = assert_dump_round_trip(client)
    await client.close()
    await loaded.close()


async def test_dump_and_load_round_trip(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(server, temperature=0.4, model_info={"vision": False}, stop=["END"], token_limit=5000)
    dump = client.dump_component()
    assert dump.provider == "ext.models.openai.OpenAIChatCompletionClient"
    assert dump.config["api_key"] is None
    # No key in the dump: the loaded client reads it from api_key_env.
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        load_component(dump.model_dump_json())
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    loaded = load_component(dump.model_dump_json(), OpenAIChatCompletionClient)
    assert loaded.dump_component() == dump
    assert loaded.capabilities.vision is False and loaded.capabilities.context_window == 5000
    server.enqueue(Reply(text="loaded"))
    assert (await loaded.create(HELLO)).content == "loaded"
    sent = body(server.requests[0])
    assert (sent["temperature"], sent["stop"]) == (0.4, ["END"])
    await client.close()
    await loaded.close()


async def test_azure_dump_and_load_round_trip(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_azure(server, api_key=KEY, model="gpt-4o")
    dump = client.dump_component()
    assert KEY not in dump.model_dump_json()
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    loaded = AzureOpenAIChatCompletionClient.load_component(dump)
    assert isinstance(loaded, AzureOpenAIChatCompletionClient)
    assert (loaded.azure_deployment, loaded.api_version, loaded.model) == ("my-deployment", "2024-10-21", "gpt-4o")
    server.enqueue(Reply(text="ok"))
    await loaded.create(HELLO)
    assert server.requests[0].path == "/openai/deployments/my-deployment/chat/completions"
    await client.close()
    await loaded.close()


def test_components_are_registered() -> None:
    from ext.core import registered_components

    registry = registered_components()
    assert registry["OpenAIChatCompletionClient"] == "ext.models.openai:OpenAIChatCompletionClient"
    assert registry["AzureOpenAIChatCompletionClient"] == "ext.models.openai:AzureOpenAIChatCompletionClient"
