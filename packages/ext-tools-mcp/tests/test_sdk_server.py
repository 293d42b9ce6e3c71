"""The workbench against a server written with the mcp SDK, over stdio, SSE and streamable HTTP."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from ext_mcp_support import PNG_B64, SDK_SERVER, TOKEN, WAV
from mcp import types as mt

from ext.core import (
    AudioResultContent,
    BaseChatCompletionClient,
    CancellationToken,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    ImageResultContent,
    RequestUsage,
    ResourceResultContent,
    StreamChunk,
    SystemMessage,
    TextResultContent,
    ToolOverride,
    UserMessage,
)
from ext.tools.mcp import (
    McpError,
    McpWorkbench,
    ServerParams,
    SseServerParams,
    StdioServerParams,
    StreamableHttpServerParams,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

TRANSPORTS = ["stdio", "sse", "http"]


class EchoModel(BaseChatCompletionClient):
    """A model client that answers with what it was asked, and records each request."""

    provider_name = "echo"

    def __init__(self) -> None:
        super().__init__(model="echo-1", max_retries=0)
        self.requests: list[ChatRequest] = []

    async def _create(self, request: ChatRequest) -> CreateResult:
        self.requests.append(request)
        last = request.messages[-1]
        text = last.content if isinstance(last, UserMessage) and isinstance(last.content, str) else "?"
        return CreateResult(finish_reason="stop", content=f"echo: {text}", usage=RequestUsage())

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        yield await self._create(request)


async def answer_elicitation(params: mt.ElicitRequestParams) -> mt.ElicitResult:
    assert isinstance(params, mt.ElicitRequestFormParams)
    assert params.message == "Who are you?"
    return mt.ElicitResult(action="accept", content={"name": "Ada", "age": 36})


async def list_roots() -> Sequence[str]:
    return ["file:///tmp/project"]


def params_for(transport: str, sse: str, http: str, **kwargs: Any) -> ServerParams:
    if transport == "stdio":
        return StdioServerParams(command=sys.executable, args=[SDK_SERVER, "stdio"], **kwargs)
    if transport == "sse":
        return SseServerParams(url=sse, **kwargs)
    return StreamableHttpServerParams(url=http, **kwargs)


@pytest.fixture(scope="module", params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> EchoModel:
    return EchoModel()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bench(transport: str, sdk_sse: str, sdk_http: str, model: EchoModel) -> AsyncIterator[McpWorkbench]:
    workbench = McpWorkbench(
        params_for(transport, sdk_sse, sdk_http),
        model_client=model,
        elicitation_callback=answer_elicitation,
        roots=list_roots,
    )
    async with workbench:
        yield workbench


async def test_lists_every_page_of_tools(bench: McpWorkbench) -> None:
    tools = {t["name"]: t for t in await bench.list_tools()}
    # The server pages by 3: all 15 tools means every cursor was followed.
    assert len(tools) == 16
    assert tools["add"] == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
    raw = {t.name: t for t in await bench.list_mcp_tools()}
    assert raw["add"].output_schema is not None
    assert set(raw["add"].output_schema["properties"]) == {"total", "terms"}
    assert raw["echo"].input_schema["required"] == ["text"]


async def test_call_text_and_structured_content(bench: McpWorkbench) -> None:
    result = await bench.call_tool("add", {"a": 2, "b": 40})
    assert result.is_error is False
    assert result.name == "add"
    assert result.structured_content == {"total": 42, "terms": [2, 40]}
    assert '"total": 42' in result.to_text()
    echoed = await bench.call_tool("echo", {"text": "héllo"})
    assert echoed.result == [TextResultContent(content="héllo")]


async def test_image_audio_resources_and_links(bench: McpWorkbench) -> None:
    image = await bench.call_tool("image")
    assert len(image.result) == 1 and isinstance(image.result[0], ImageResultContent)
    assert image.result[0].content.data == base64.b64decode(PNG_B64)
    assert image.result[0].content.mime_type == "image/png"

    audio = await bench.call_tool("audio")
    assert audio.result == [AudioResultContent(data=WAV, mime_type="audio/wav")]

    mixed = await bench.call_tool("mixed")
    assert mixed.result == [
        TextResultContent(content="hello"),
        ResourceResultContent(uri="test://doc", mime_type="text/plain", text="doc text"),
        ResourceResultContent(uri="test://blob", data=b"\x00\x01"),
        ResourceResultContent(uri="test://linked", name="linked", mime_type="text/markdown"),
    ]
    assert mixed.structured_content == {"kind": "mixed"}


async def test_tool_errors_are_error_results(bench: McpWorkbench) -> None:
    failed = await bench.call_tool("fail")
    assert failed.is_error is True
    assert "broken on purpose" in failed.to_text()
    unknown = await bench.call_tool("no_such_tool")
    assert unknown.is_error is True and "no_such_tool" in unknown.to_text()
    bad_args = await bench.call_tool("add", {"a": "x"})
    assert bad_args.is_error is True and "validation" in bad_args.to_text()


async def test_resources_templates_and_reading(bench: McpWorkbench) -> None:
    resources = await bench.list_resources()
    assert [r.uri for r in resources] == [
        "test://static/hello",
        "test://static/blob",
        "test://static/a",
        "test://static/b",
    ]
    assert resources[0].name == "hello" and resources[0].description == "A greeting."
    templates = await bench.list_resource_templates()
    assert [t.uri_template for t in templates] == ["test://items/{item_id}"]
    assert await bench.read_resource("test://static/hello") == [
        ResourceResultContent(uri="test://static/hello", mime_type="text/plain", text="hello, world")
    ]
    assert await bench.read_resource("test://static/blob") == [
        ResourceResultContent(uri="test://static/blob", mime_type="application/octet-stream", data=b"\x00\x01\x02")
    ]
    assert (await bench.read_resource("test://items/42"))[0].text == "item 42"
    with pytest.raises(McpError, match=r"rejected resources/read 'test://nope'") as info:
        await bench.read_resource("test://nope")
    assert info.value.code == mt.INVALID_PARAMS
    assert info.value.server == bench.server_params.describe()


async def test_prompts(bench: McpWorkbench) -> None:
    prompts = await bench.list_prompts()
    assert [p.name for p in prompts] == ["greet", "dialogue", "p3", "p4"]
    assert [a.name for a in prompts[0].arguments or []] == ["name"]
    greeting = await bench.get_prompt("greet", {"name": "Ada"})
    assert greeting.description == "Greet someone."
    assert greeting.messages == [UserMessage(content="Hello, Ada!")]
    dialogue = await bench.get_prompt("dialogue", {"topic": "owls"})
    assert [m.type for m in dialogue.messages] == ["UserMessage", "AssistantMessage"]
    assert dialogue.messages[1].content == "Gladly."
    with pytest.raises(ConfigurationError, match="arguments must map"):
        await bench.get_prompt("greet", {"name": 3})  # type: ignore[dict-item]


async def test_concurrent_calls_share_one_session(bench: McpWorkbench, transport: str) -> None:
    # The server's barrier returns only once all 32 calls are in flight at the same time.
    results = await asyncio.gather(
        *(bench.call_tool("barrier", {"key": f"{transport}-32", "n": 32, "timeout": 10}) for _ in range(32))
    )
    assert [r.is_error for r in results] == [False] * 32
    pids = {(await bench.call_tool("pid")).to_text() for _ in range(3)}
    assert len(pids) == 1


async def test_timeout_raises_and_cancels_on_the_server(bench: McpWorkbench, transport: str) -> None:
    tag = f"timeout-{transport}"
    with pytest.raises(TimeoutError, match="'block'"):
        await bench.call_tool("block", {"tag": tag}, timeout=0.3)
    reason = await bench.call_tool("cancelled", {"tag": tag})
    assert reason.to_text() == "caller cancelled"
    as_error = await bench.call_tool("block", {"tag": tag + "-e"}, timeout=0.2, timeout_as_error=True)
    assert as_error.is_error is True and "did not finish" in as_error.to_text()


async def test_cancellation_token_aborts_and_notifies_the_server(bench: McpWorkbench, transport: str) -> None:
    tag = f"cancel-{transport}"
    token = CancellationToken()
    call = asyncio.ensure_future(bench.call_tool("block", {"tag": tag}, token))
    # Wait until the server is running the call, so the cancel has something to cancel.
    assert (await bench.call_tool("started", {"tag": tag})).is_error is False
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # The server's middleware saw notifications/cancelled for the blocked request.
    assert (await bench.call_tool("cancelled", {"tag": tag})).to_text() == "caller cancelled"
    assert (await bench.call_tool("echo", {"text": "still alive"})).to_text() == "still alive"


async def test_sampling_is_answered_by_the_model_client(bench: McpWorkbench, model: EchoModel) -> None:
    before = len(model.requests)
    result = await bench.call_tool("sample", {"prompt": "What is MCP?"})
    assert result.to_text() == "echo-1|endTurn|echo: What is MCP?"
    request = model.requests[before]
    assert request.messages == [SystemMessage(content="Be brief."), UserMessage(content="What is MCP?")]
    assert request.options.max_tokens == 50 and request.options.temperature == 0.5


async def test_elicitation_and_roots_callbacks(bench: McpWorkbench) -> None:
    assert (await bench.call_tool("ask_person")).to_text() == "Ada is 36"
    roots = await bench.call_tool("roots")
    assert roots.structured_content == {"result": ["None=file:///tmp/project"]}


async def test_overrides_rename_and_route(transport: str, sdk_sse: str, sdk_http: str) -> None:
    overrides = {"echo": ToolOverride(name="say", description="Say it back"), "add": ToolOverride(description="Sum")}
    async with McpWorkbench(params_for(transport, sdk_sse, sdk_http), overrides) as bench:
        tools = {t["name"]: t for t in await bench.list_tools()}
        assert "echo" not in tools and tools["say"]["description"] == "Say it back"
        assert tools["add"]["description"] == "Sum"
        raw = {t.name: t for t in await bench.list_mcp_tools()}
        assert raw["say"].description == "Say it back" and raw["say"].input_schema["required"] == ["text"]
        result = await bench.call_tool("say", {"text": "renamed"})
        assert result.name == "say" and result.to_text() == "renamed"
        hidden = await bench.call_tool("echo", {"text": "x"})
        assert hidden.is_error is True


async def test_override_clashing_with_a_server_tool_is_an_error(transport: str, sdk_sse: str, sdk_http: str) -> None:
    async with McpWorkbench(params_for(transport, sdk_sse, sdk_http), {"echo": ToolOverride(name="add")}) as bench:
        with pytest.raises(ConfigurationError, match="clashes"):
            await bench.list_tools()


async def test_bearer_token_and_headers_reach_the_server(sdk_http_auth: str, sdk_sse_auth: str) -> None:
    http = StreamableHttpServerParams(url=sdk_http_auth, headers={"Authorization": f"Bearer {TOKEN}", "X-Trace": "t"})
    async with McpWorkbench(http) as bench:
        seen = (await bench.call_tool("seen_headers")).structured_content
        assert seen == {"authorization": f"Bearer {TOKEN}", "x-trace": "t"}
    sse = SseServerParams(url=sdk_sse_auth, api_key=TOKEN)
    async with McpWorkbench(sse) as bench:
        assert (await bench.call_tool("echo", {"text": "authorized"})).to_text() == "authorized"
