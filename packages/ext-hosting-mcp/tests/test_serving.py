"""ext tools, workbenches and a pipeline served over streamable HTTP and stdio, driven by real clients: ext-tools-mcp's
McpWorkbench and the mcp SDK's ClientSession, over 127.0.0.1."""

from __future__ import annotations

import sys

import mcp_types as types
import pytest
from hosting_mcp_support import CONFORMANCE, serving
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ext.core import FunctionTool
from ext.hosting.mcp import (
    McpServer,
    PipelineTool,
    Prompt,
    Resource,
    current_context,
    memory_resources,
    streamable_http_app,
    tool_loop_progress,
)
from ext.memory import MemoryHit
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatPipeline, ToolLoop
from ext.testing.script import ToolCallSpec
from ext.testing.servers import OpenAIServer, Reply
from ext.tools.mcp import McpWorkbench, StdioServerParams, StreamableHttpServerParams

KEY = "sk-test-serving"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def ask_model(question: str) -> str:
    """Ask the client's model."""
    context = current_context()
    assert context is not None
    result = await context.sample(question, max_tokens=20)
    assert isinstance(result.content, types.TextContent)
    return result.content.text


def inner_server() -> McpServer:
    return McpServer(
        [FunctionTool(add), FunctionTool(ask_model)],
        name="inner",
        resources=[Resource("notes://one", "one", "first note", mime_type="text/plain")],
        prompts=[
            Prompt(
                "greet", lambda a: [f"Hello {a['who']}"], arguments=[types.PromptArgument(name="who", required=True)]
            )
        ],
    )


async def test_tools_keep_names_descriptions_and_schemas_through_an_aggregating_server() -> None:
    async with serving(streamable_http_app(inner_server())) as inner_url:
        outer = McpServer(
            [McpWorkbench(StreamableHttpServerParams(url=inner_url))],
            tool_overrides={"add": {"name": "plus", "description": "Sum of a and b."}},
        )
        async with serving(streamable_http_app(outer)) as url, McpWorkbench(StreamableHttpServerParams(url=url)) as wb:
            tools = {t["name"]: t for t in await wb.list_tools()}
            assert set(tools) == {"plus", "ask_model"}
            assert tools["plus"]["description"] == "Sum of a and b."
            assert tools["plus"]["parameters"]["required"] == ["a", "b"]
            assert tools["ask_model"]["description"] == "Ask the client's model."
            result = await wb.call_tool("plus", {"a": 2, "b": 3})
            assert (result.is_error, result.to_text()) == (False, "5")


async def test_unknown_tool_bad_arguments_and_a_failing_tool_get_the_protocols_answers() -> None:
    def boom() -> str:
        raise RuntimeError("kaput")

    server = McpServer([FunctionTool(add), FunctionTool(boom, description="fails")])
    async with (
        serving(streamable_http_app(server)) as url,
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        with pytest.raises(MCPError) as caught:
            await session.call_tool("nope", {})
        assert caught.value.error.code == types.INVALID_PARAMS
        assert "nope" in caught.value.error.message
        bad = await session.call_tool("add", {"a": "two", "b": 3})
        assert bad.is_error
        text = bad.content[0].text  # type: ignore[union-attr]
        assert "a: 'two' is not of type 'integer'" in text
        failed = await session.call_tool("boom", {})
        assert failed.is_error and failed.content[0].text == "RuntimeError: kaput"  # type: ignore[union-attr]
        ok = await session.call_tool("add", {"a": 1, "b": 1})  # still serving
        assert ok.content[0].text == "2"  # type: ignore[union-attr]


async def test_a_pipeline_with_its_tool_loop_is_one_tool_reporting_progress() -> None:
    async with OpenAIServer(api_key=KEY) as model:
        model.enqueue(
            Reply(tool_calls=[ToolCallSpec(name="add", arguments={"a": 2, "b": 3})], finish_reason="tool_calls"),
            Reply(text="2 and 3 make 5."),
        )
        client = OpenAIChatCompletionClient("gpt-4o-mini", base_url=model.base_url + "/v1", api_key=KEY, max_retries=0)
        pipeline = ChatPipeline(client, [ToolLoop([FunctionTool(add)], on_event=tool_loop_progress)])
        server = McpServer([PipelineTool(pipeline, name="ask")])
        steps: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            assert total is None
            steps.append((progress, message))

        async with (
            serving(streamable_http_app(server)) as url,
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            [tool] = (await session.list_tools()).tools
            assert tool.input_schema["required"] == ["question"]
            result = await session.call_tool("ask", {"question": "2+3?"}, progress_callback=on_progress)
        assert isinstance(result, types.CallToolResult)
        assert result.content[0].text == "2 and 3 make 5."  # type: ignore[union-attr]
        assert steps == [(1, "thinking"), (2, "calling add"), (3, "finished add"), (4, "answered")]
        await pipeline.close()


async def test_sampling_goes_back_to_the_clients_model_and_resources_and_prompts_are_served() -> None:
    async with OpenAIServer(api_key=KEY) as model:
        model.enqueue(Reply(text="Paris."))
        client = OpenAIChatCompletionClient("gpt-4o-mini", base_url=model.base_url + "/v1", api_key=KEY, max_retries=0)
        async with (
            serving(streamable_http_app(inner_server())) as url,
            McpWorkbench(StreamableHttpServerParams(url=url), model_client=client) as wb,
        ):
            result = await wb.call_tool("ask_model", {"question": "Capital of France?"})
            assert (result.is_error, result.to_text()) == (False, "Paris.")
            [sent] = [model.decode(r) for r in model.requests if r.path.endswith("/chat/completions")]
            assert "Capital of France?" in str(sent.messages)
            [resource] = await wb.list_resources()
            assert str(resource.uri) == "notes://one"
            read = await wb.read_resource("notes://one")
            assert "first note" in str(read)
            prompt = await wb.get_prompt("greet", {"who": "Ada"})
            assert "Hello Ada" in str(prompt)


async def test_stdio_serves_the_same_tools() -> None:
    params = StdioServerParams(
        command=sys.executable, args=[str(CONFORMANCE / "everything_server.py"), "--stdio"], env={}
    )
    async with McpWorkbench(params) as wb:
        names = {t["name"] for t in await wb.list_tools()}
        assert {"test_simple_text", "json_schema_2020_12_tool"} <= names
        result = await wb.call_tool("test_simple_text", {})
        assert result.to_text() == "This is a simple text response for testing."


class _Passages:
    """Answers `query` as ext-memory's `VectorMemory` does (hits with a `text`), from a fixed list, best first."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.asked: list[tuple[str, int]] = []

    async def query(self, text: str, *, top_k: int = 5) -> list[MemoryHit]:
        self.asked.append((text, top_k))
        return [
            MemoryHit(id=str(i), text=t, score=1.0, source="s", chunk=i, start=0, end=len(t))
            for i, t in enumerate(self.texts[:top_k])
        ]


async def test_memory_passages_are_a_read_only_resource_template() -> None:
    memory = _Passages(["Rotate keys every ninety days.", "Keys live in the vault.", "Unrelated."])
    server = McpServer(resource_templates=[memory_resources(memory, top_k=2)])
    async with (
        serving(streamable_http_app(server)) as url,
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        [template] = (await session.list_resource_templates()).resource_templates
        assert template.uri_template == "memory://search/{query}"
        result = await session.read_resource("memory://search/key%20rotation")
        [contents] = result.contents
        assert contents.text == "Rotate keys every ninety days.\n\nKeys live in the vault."  # type: ignore[union-attr]
        assert memory.asked == [("key rotation", 2)]
        with pytest.raises(MCPError):
            await session.read_resource("memory://elsewhere")
