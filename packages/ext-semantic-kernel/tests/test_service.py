"""An ext client as a kernel chat completion service: the kernel's own function calling invokes its plugins through
ext's OpenAI client on the loopback OpenAI server; execution settings map to ChatOptions or are refused."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.contents import ChatHistory, StreamingChatMessageContent
from semantic_kernel.functions import KernelArguments, kernel_function

from ext.core import ConfigurationError, CreateResult, UnsupportedOptionError
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder, LoggingMiddleware, RetryMiddleware
from ext.semantic_kernel import ExtChatCompletion, ExtPromptExecutionSettings
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import OpenAIServer


class MathPlugin:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    @kernel_function(description="Add two integers.")
    def add(self, a: Annotated[int, "first"], b: Annotated[int, "second"]) -> int:
        self.calls.append((a, b))
        return a + b


class Thing:
    def __init__(self, x: int) -> None:
        self.x = x


class BadPlugin:
    @kernel_function(description="Takes a plain class the kernel cannot describe.")
    def use(self, thing: Thing) -> str:
        return str(thing.x)


def kernel_with(client: OpenAIChatCompletionClient) -> tuple[Kernel, MathPlugin, ExtChatCompletion]:
    kernel = Kernel()
    service = ExtChatCompletion(client)
    kernel.add_service(service)
    plugin = MathPlugin()
    kernel.add_plugin(plugin, "math")
    return kernel, plugin, service


def history(text: str) -> ChatHistory:
    chat = ChatHistory()
    chat.add_user_message(text)
    return chat


async def test_kernel_invokes_its_plugin_through_an_ext_client(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    kernel, plugin, service = kernel_with(ext_client)
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("math-add", {"a": 2, "b": 3}, id="call_1")], prompt_tokens=20),
        Reply(text="2 + 3 = 5", prompt_tokens=30, completion_tokens=6),
    )
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    reply = await service.get_chat_message_content(history("what is 2 + 3?"), settings, kernel=kernel)
    assert reply is not None and reply.content == "2 + 3 = 5"
    assert plugin.calls == [(2, 3)]
    first, second = (server.decode(r) for r in server.requests)
    assert first.tools == ["math-add"] and first.tool_choice == "auto"
    assert set(first.tool_schemas["math-add"]["properties"]) == {"a", "b"}
    results = [r for m in second.messages for r in m.tool_results]
    assert [(r.call_id, r.content) for r in results] == [("call_1", "5")]
    assert reply.metadata["usage"].prompt_tokens == 30 and reply.metadata["usage"].completion_tokens == 6


async def test_invoke_prompt_through_the_kernel(server: OpenAIServer, ext_client: OpenAIChatCompletionClient) -> None:
    kernel, plugin, _ = kernel_with(ext_client)
    server.enqueue(Reply(tool_calls=[ToolCallSpec("math-add", {"a": 40, "b": 2})]), Reply(text="42"))
    settings = PromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto(), temperature=0.2)
    result = await kernel.invoke_prompt("What is 40 + 2?", arguments=KernelArguments(settings=settings))
    assert result is not None and str(result) == "42"
    assert plugin.calls == [(40, 2)]
    assert server.decode(server.requests[0]).options.get("temperature") == 0.2


@pytest.mark.parametrize(
    ("behavior", "wire_choice", "invoked"),
    [(FunctionChoiceBehavior.Required(), "required", [(1, 1)]), (FunctionChoiceBehavior.NoneInvoke(), "none", [])],
)
async def test_required_and_none(
    server: OpenAIServer,
    ext_client: OpenAIChatCompletionClient,
    behavior: FunctionChoiceBehavior,
    wire_choice: str,
    invoked: list[tuple[int, int]],
) -> None:
    kernel, plugin, service = kernel_with(ext_client)
    if invoked:
        server.enqueue(Reply(tool_calls=[ToolCallSpec("math-add", {"a": 1, "b": 1})]), Reply(text="2"))
    else:
        server.enqueue(Reply(text="I would call math-add"))
    settings = ExtPromptExecutionSettings(function_choice_behavior=behavior)
    reply = await service.get_chat_message_content(history("1 + 1?"), settings, kernel=kernel)
    assert reply is not None and reply.content in ("2", "I would call math-add")
    assert server.decode(server.requests[0]).tool_choice == wire_choice
    assert plugin.calls == invoked
    if invoked:  # after its one required round the kernel asks again with no tools (FunctionChoiceBehavior.Required)
        assert server.decode(server.requests[1]).tools == []


async def test_streaming_with_function_calling(server: OpenAIServer, ext_client: OpenAIChatCompletionClient) -> None:
    kernel, plugin, service = kernel_with(ext_client)
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("math-add", {"a": 5, "b": 6})]),
        Reply(text="the sum is 11", prompt_tokens=9, completion_tokens=4),
    )
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    parts: list[StreamingChatMessageContent] = []
    async for messages in service.get_streaming_chat_message_contents(history("5 + 6?"), settings, kernel=kernel):
        parts.extend(messages)
    assert plugin.calls == [(5, 6)]
    text = "".join(str(p) for p in parts if p.role == "assistant")
    assert text == "the sum is 11"
    assert all(server.decode(r).stream for r in server.requests)
    assert parts[-1].metadata["usage"].completion_tokens == 4


async def test_settings_map_to_chat_options(server: OpenAIServer, ext_client: OpenAIChatCompletionClient) -> None:
    _, _, service = kernel_with(ext_client)
    server.enqueue(Reply(text="ok"))
    settings = ExtPromptExecutionSettings(temperature=0.3, max_tokens=12, top_p=0.5, stop="END", seed=7)
    await service.get_chat_message_content(history("hi"), settings)
    wire = server.decode(server.requests[0])
    assert wire.options.get("temperature") == 0.3 and wire.options.get("max_tokens") == 12
    assert wire.options.get("top_p") == 0.5 and wire.options.get("stop") == ["END"]
    assert wire.raw.get("seed") == 7


async def test_structured_output(server: OpenAIServer, ext_client: OpenAIChatCompletionClient) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    _, _, service = kernel_with(ext_client)
    server.enqueue(Reply(text='{"name": "Oslo"}'))
    reply = await service.get_chat_message_content(history("a city"), ExtPromptExecutionSettings(response_format=City))
    assert reply is not None and isinstance(reply.inner_content, CreateResult)
    assert reply.inner_content.parsed == City(name="Oslo")
    schema = server.decode(server.requests[0]).json_schema
    assert schema is not None and set(schema["properties"]) == {"name"}


async def test_a_setting_ext_cannot_honour_fails_before_any_request(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    _, _, service = kernel_with(ext_client)
    with pytest.raises(UnsupportedOptionError, match=r"\['logprobs'\]"):
        await service.get_chat_message_content(history("hi"), PromptExecutionSettings(logprobs=True))
    with pytest.raises(ValueError, match="temperature"):
        await service.get_chat_message_content(history("hi"), PromptExecutionSettings(temperature=7))
    with pytest.raises(UnsupportedOptionError, match="response_format"):
        await service.get_chat_message_content(
            history("hi"), ExtPromptExecutionSettings(response_format={"type": "xml"})
        )
    assert server.requests == []


async def test_a_plugin_whose_schema_cannot_map_fails_before_any_request(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    kernel, _, service = kernel_with(ext_client)
    kernel.add_plugin(BadPlugin(), "bad")
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    with pytest.raises(ConfigurationError, match=r"'bad-use'.*'thing'.*no JSON Schema"):
        await service.get_chat_message_content(history("hi"), settings, kernel=kernel)
    assert server.requests == []


async def test_a_pipeline_as_the_service(server: OpenAIServer, ext_client: OpenAIChatCompletionClient) -> None:
    pipeline = ChatClientBuilder(ext_client).use(LoggingMiddleware()).use(RetryMiddleware()).build()
    kernel = Kernel()
    service = ExtChatCompletion(pipeline, service_id="pipeline")
    kernel.add_service(service)
    plugin = MathPlugin()
    kernel.add_plugin(plugin, "math")
    server.enqueue(Reply(tool_calls=[ToolCallSpec("math-add", {"a": 1, "b": 2})]), Reply(text="3"))
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    reply = await service.get_chat_message_content(history("1 + 2"), settings, kernel=kernel)
    assert reply is not None and reply.content == "3" and plugin.calls == [(1, 2)]
    assert service.ai_model_id == "gpt-4o-mini"


async def test_cancelling_the_kernel_call_closes_the_request(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    _, _, service = kernel_with(ext_client)
    server.enqueue(Fault("hang"))
    task = asyncio.ensure_future(service.get_chat_message_content(history("hi"), ExtPromptExecutionSettings()))
    (request,) = await server.wait_for_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    await asyncio.wait_for(request.disconnected.wait(), 10)
    assert not request.completed


def test_a_non_client_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ChatCompletionClient"):
        ExtChatCompletion(object())  # type: ignore[arg-type]
