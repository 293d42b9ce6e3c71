"""A kernel service as an ext client, past the conformance suite: ext's tool loop on it, a named tool choice, the
kernel's own plugins invoked by the kernel, and what is refused before any request."""

from __future__ import annotations

from typing import Annotated

import pytest
from openai import AsyncOpenAI
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import kernel_function

from ext.core import ConfigurationError, FunctionTool, UnsupportedOptionError, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder, ToolCallFinished, ToolLoopEvent
from ext.semantic_kernel import ExtChatCompletion, KernelChatCompletionClient
from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import OpenAIServer

HELLO = [UserMessage(content="Hi")]


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class ClockPlugin:
    def __init__(self) -> None:
        self.asked = 0

    @kernel_function(description="The time now.")
    def now(self, zone: Annotated[str, "an IANA time zone"]) -> str:
        self.asked += 1
        return f"12:00 in {zone}"


def kernel_client(sdk: AsyncOpenAI, kernel: Kernel | None = None) -> KernelChatCompletionClient:
    """The kernel's own OpenAI connector on the loopback server, as an ext client."""
    return KernelChatCompletionClient(OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=sdk), kernel=kernel)


async def test_ext_agent_loop_on_a_kernel_service(server: OpenAIServer, sdk: AsyncOpenAI) -> None:
    events: list[ToolLoopEvent] = []
    agent = (
        ChatClientBuilder(kernel_client(sdk)).use_tool_loop([FunctionTool(multiply)], on_event=events.append).build()
    )
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("multiply", {"a": 6, "b": 7}, id="c1")], prompt_tokens=10, completion_tokens=3),
        Reply(text="6 x 7 = 42", prompt_tokens=20, completion_tokens=5),
    )
    result = await agent.create([UserMessage(content="6 times 7?")])
    assert result.content == "6 x 7 = 42"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (30, 8)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.result.name, e.result.content) for e in finished] == [("multiply", "42")]
    results = [r for m in server.decode(server.requests[1]).messages for r in m.tool_results]
    assert [(r.call_id, r.content) for r in results] == [("c1", "42")]


async def test_named_tool_choice_is_sent_as_required_with_that_tool(server: OpenAIServer, sdk: AsyncOpenAI) -> None:
    client = kernel_client(sdk)
    server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]))
    result = await client.create(HELLO, tools=[FunctionTool(add), FunctionTool(multiply)], tool_choice="add")
    assert isinstance(result.content, list) and result.content[0].name == "add"
    wire = server.decode(server.requests[0])
    assert (wire.tools, wire.tool_choice) == (["add"], "required")


async def test_the_kernels_plugins_are_invoked_by_the_kernel(server: OpenAIServer, sdk: AsyncOpenAI) -> None:
    kernel = Kernel()
    clock = ClockPlugin()
    kernel.add_plugin(clock, "clock")
    client = kernel_client(sdk, kernel)
    server.enqueue(Reply(tool_calls=[ToolCallSpec("clock-now", {"zone": "Europe/Oslo"})]), Reply(text="It is noon."))
    result = await client.create([UserMessage(content="What time is it in Oslo?")])
    assert result.content == "It is noon." and clock.asked == 1
    assert server.decode(server.requests[0]).tools == ["clock-now"]
    # tool_choice="none" keeps the kernel's plugins out of the call
    server.enqueue(Reply(text="no tools"))
    await client.create(HELLO, tool_choice="none")
    assert server.decode(server.requests[-1]).tools == [] and clock.asked == 1


async def test_stream_through_the_kernels_plugins(server: OpenAIServer, sdk: AsyncOpenAI) -> None:
    kernel = Kernel()
    clock = ClockPlugin()
    kernel.add_plugin(clock, "clock")
    client = kernel_client(sdk, kernel)
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("clock-now", {"zone": "UTC"})]),
        Reply(text="noon it is", prompt_tokens=8, completion_tokens=3),
    )
    items = [item async for item in client.create_stream([UserMessage(content="time?")])]
    final = items[-1]
    assert clock.asked == 1
    assert getattr(final, "content", None) == "noon it is" and getattr(final, "finish_reason", None) == "stop"


async def test_refused_before_any_request(
    server: OpenAIServer, sdk: AsyncOpenAI, ext_client: OpenAIChatCompletionClient
) -> None:
    client = kernel_client(sdk)
    with pytest.raises(UnsupportedOptionError, match="extra_create_args\\['nonsense'\\]"):
        await client.create(HELLO, extra_create_args={"nonsense": 1})
    # A connector whose settings carry no OpenAI-format tools cannot take ext tools.
    other = KernelChatCompletionClient(ExtChatCompletion(ext_client))
    with pytest.raises(UnsupportedOptionError, match="OpenAI-format tools"):
        await other.create(HELLO, tools=[FunctionTool(add)])
    assert server.requests == []


def test_bad_construction_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ChatCompletionClientBase"):
        KernelChatCompletionClient(object())  # type: ignore[arg-type]
