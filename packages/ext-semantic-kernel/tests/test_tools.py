"""Tools both ways: ext tools, an HttpTool and a workbench as kernel plugins (the kernel invokes them, through its
own function calling on an ext client); kernel plugins as ext tools (ext's tool loop runs them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Annotated

import pytest
import pytest_asyncio
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.contents import ChatHistory
from semantic_kernel.functions import KernelArguments, kernel_function

from ext.core import ConfigurationError, FunctionTool, StaticWorkbench, UserMessage, parse_tool_arguments
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.semantic_kernel import (
    ExtChatCompletion,
    ExtPromptExecutionSettings,
    KernelFunctionTool,
    kernel_tools,
    tool_function,
    tools_plugin,
    workbench_plugin,
)
from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import LoopbackServer, OpenAIServer, RecordedRequest, Response, Route, json_response
from ext.tools.http import HttpTool


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"failed: {reason}")


class CityServer(LoopbackServer):
    """GET /cities/{name}: a city's population, as a REST API would answer."""

    def routes(self) -> Sequence[Route]:
        return [Route("GET", "/cities/{name}", handler=self.city)]

    @staticmethod
    def city(request: RecordedRequest) -> Response:
        return json_response({"name": request.params["name"], "population": 709000})


@pytest_asyncio.fixture
async def city_server() -> AsyncIterator[CityServer]:
    async with CityServer() as srv:
        yield srv


class MathPlugin:
    @kernel_function(description="Add two integers.")
    def add(self, a: Annotated[int, "first"], b: Annotated[int, "second"]) -> int:
        return a + b


# --- ext -> kernel ---------------------------------------------------------------------------------------------


async def test_ext_tools_as_a_kernel_plugin_invoked_by_the_kernel(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    kernel = Kernel()
    service = ExtChatCompletion(ext_client)
    kernel.add_service(service)
    kernel.add_plugin(tools_plugin("math", [FunctionTool(multiply)]))
    server.enqueue(Reply(tool_calls=[ToolCallSpec("math-multiply", {"a": 6, "b": 7}, id="c1")]), Reply(text="42"))
    chat = ChatHistory()
    chat.add_user_message("6 times 7?")
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    reply = await service.get_chat_message_content(chat, settings, kernel=kernel)
    assert reply is not None and reply.content == "42"
    first, second = (server.decode(r) for r in server.requests)
    assert first.tools == ["math-multiply"]
    assert first.tool_schemas["math-multiply"]["required"] == ["a", "b"]
    assert [(r.call_id, r.content) for m in second.messages for r in m.tool_results] == [("c1", "42")]


async def test_an_http_tool_as_a_kernel_function(city_server: CityServer) -> None:
    tool = HttpTool(
        name="city",
        host="127.0.0.1",
        port=city_server.port,
        path="/cities/{name}",
        method="GET",
        json_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        return_type="json",
        description="A city's population.",
    )
    kernel = Kernel()
    kernel.add_plugin(tools_plugin("web", [tool]))
    result = await kernel.invoke(plugin_name="web", function_name="city", arguments=KernelArguments(name="Oslo"))
    assert result is not None and parse_tool_arguments(str(result)) == {"name": "Oslo", "population": 709000}
    assert [r.path for r in city_server.requests] == ["/cities/Oslo"]


async def test_a_workbench_as_a_kernel_plugin() -> None:
    async with StaticWorkbench([FunctionTool(multiply), FunctionTool(fail)]) as workbench:
        plugin = await workbench_plugin("bench", workbench)
        kernel = Kernel()
        kernel.add_plugin(plugin)
        assert sorted(plugin.functions) == ["fail", "multiply"]
        product = await kernel.invoke(
            plugin_name="bench", function_name="multiply", arguments=KernelArguments(a=3, b=4)
        )
        assert product is not None and str(product) == "12"
        failed = await kernel.invoke(plugin_name="bench", function_name="fail", arguments=KernelArguments(reason="x"))
        assert failed is not None and str(failed).startswith("Error: ") and "failed: x" in str(failed)


def test_bad_names_are_refused_naming_them() -> None:
    with pytest.raises(ConfigurationError, match="plugin name 'my-tools' is invalid"):
        tools_plugin("my-tools", [FunctionTool(multiply)])
    with pytest.raises(ConfigurationError, match="duplicate tool names"):
        tools_plugin("math", [FunctionTool(multiply), FunctionTool(multiply)])
    with pytest.raises(ConfigurationError, match="ext Tools"):
        tool_function("not a tool")  # type: ignore[arg-type]


# --- kernel -> ext ---------------------------------------------------------------------------------------------


async def test_kernel_plugins_as_ext_tools_in_ext_tool_loop(
    server: OpenAIServer, ext_client: OpenAIChatCompletionClient
) -> None:
    kernel = Kernel()
    kernel.add_plugin(MathPlugin(), "math")
    tools = kernel_tools(kernel)
    assert [t.name for t in tools] == ["math-add"]
    assert tools[0].schema["parameters"]["properties"]["a"]["type"] == "integer"
    agent = ChatClientBuilder(ext_client).use_tool_loop(tools).build()
    server.enqueue(Reply(tool_calls=[ToolCallSpec("math-add", {"a": 20, "b": 22}, id="c1")]), Reply(text="42"))
    result = await agent.create([UserMessage(content="20 + 22?")])
    assert result.content == "42"
    results = [r for m in server.decode(server.requests[1]).messages for r in m.tool_results]
    assert [(r.call_id, r.content) for r in results] == [("c1", "42")]


class Thing:
    """A plain class: the kernel infers an empty object schema for it and cannot build one from a model's JSON."""


class Bad:
    @kernel_function(description="x")
    def use(self, thing: Thing) -> str:
        return "x"


def test_a_plugin_whose_schema_cannot_map_is_refused() -> None:
    kernel = Kernel()
    kernel.add_plugin(Bad(), "bad")
    with pytest.raises(ConfigurationError, match=r"'bad-use'.*'thing'"):
        kernel_tools(kernel)
    with pytest.raises(ConfigurationError, match=r"\['nope'\] are not in the kernel"):
        kernel_tools(kernel, plugins=["nope"])
    with pytest.raises(ConfigurationError, match="KernelFunction"):
        KernelFunctionTool("f", kernel)  # type: ignore[arg-type]
