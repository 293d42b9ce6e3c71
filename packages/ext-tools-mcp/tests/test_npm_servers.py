"""The workbench against the npm reference servers: server-everything on all three transports, and
server-memory (stateful) over stdio. The packages are installed once by the `npm_servers` fixture."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from ext_mcp_support import PNG, NpmServers, start_npm_http, stop_server
from mcp import types as mt

from ext.core import (
    BaseChatCompletionClient,
    ChatRequest,
    ComponentError,
    CreateResult,
    ImageResultContent,
    RequestUsage,
    ResourceResultContent,
    StreamChunk,
    SystemMessage,
    UserMessage,
)
from ext.tools.mcp import McpWorkbench, ServerParams, SseServerParams, StdioServerParams, StreamableHttpServerParams

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.integration]

EVERYTHING = "@modelcontextprotocol/server-everything"
MEMORY = "@modelcontextprotocol/server-memory"
SECRET = "s3cr3t-env-value"


class TemplateModel(BaseChatCompletionClient):
    provider_name = "template"

    def __init__(self) -> None:
        super().__init__(model="template-1", max_retries=0)
        self.requests: list[ChatRequest] = []

    async def _create(self, request: ChatRequest) -> CreateResult:
        self.requests.append(request)
        return CreateResult(finish_reason="stop", content="sampled answer", usage=RequestUsage())

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        yield await self._create(request)


async def elicit(params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="decline")


def _listening_on(port: int) -> set[str] | None:
    """Local addresses with a listening TCP socket on `port` (Linux /proc; None elsewhere)."""
    if not Path("/proc/net/tcp").exists():
        return None
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                if len(addr) == 8:
                    found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
                else:
                    found.add("v6:" + addr)
    return found


@pytest.fixture(scope="module")
def everything_http(npm_servers: NpmServers) -> Iterator[dict[str, str]]:
    servers = {mode: start_npm_http(npm_servers, EVERYTHING, mode) for mode in ("sse", "streamableHttp")}
    try:
        yield {mode: server.base for mode, server in servers.items()}
    finally:
        for server in servers.values():
            stop_server(server.proc)


@pytest.fixture(scope="module", params=["stdio", "sse", "http"])
def everything_params(request: pytest.FixtureRequest, npm_servers: NpmServers) -> ServerParams:
    if request.param == "stdio":
        return StdioServerParams(
            command=npm_servers.node,
            args=[npm_servers.script(EVERYTHING), "stdio"],
            env={"EXT_TEST_SECRET": SECRET},
        )
    urls: dict[str, str] = request.getfixturevalue("everything_http")
    if request.param == "sse":
        return SseServerParams(url=urls["sse"] + "/sse")
    return StreamableHttpServerParams(url=urls["streamableHttp"] + "/mcp")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> TemplateModel:
    return TemplateModel()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything(everything_params: ServerParams, model: TemplateModel) -> AsyncIterator[McpWorkbench]:
    bench = McpWorkbench(
        everything_params, model_client=model, elicitation_callback=elicit, roots=["file:///tmp/everything-root"]
    )
    async with bench:
        yield bench


async def test_http_servers_listen_on_loopback_only(everything_http: dict[str, str]) -> None:
    for base in everything_http.values():
        found = _listening_on(int(base.rsplit(":", 1)[1]))
        if found is None:
            pytest.skip("no /proc/net/tcp on this platform")
        assert found == {"127.0.0.1"}


async def test_tools_include_the_capability_gated_ones(everything: McpWorkbench) -> None:
    assert everything.server_info is not None and everything.server_info.name == "mcp-servers/everything"
    names = {t["name"] for t in await everything.list_tools()}
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= names
    # Registered only for clients that offer sampling, roots and elicitation.
    assert {"trigger-sampling-request", "get-roots-list", "trigger-elicitation-request"} <= names
    tools = {t.name: t for t in await everything.list_mcp_tools()}
    assert tools["get-structured-content"].output_schema is not None
    assert tools["get-sum"].input_schema["required"] == ["a", "b"]


async def test_calls_and_content_types(everything: McpWorkbench) -> None:
    assert (await everything.call_tool("echo", {"message": "hi there"})).to_text() == "Echo: hi there"
    assert "42" in (await everything.call_tool("get-sum", {"a": 40, "b": 2})).to_text()
    image = await everything.call_tool("get-tiny-image")
    images = [p for p in image.result if isinstance(p, ImageResultContent)]
    assert len(images) == 1 and images[0].content.mime_type == "image/png"
    assert images[0].content.data.startswith(PNG[:8])
    links = await everything.call_tool("get-resource-links", {"count": 2})
    resources = [p for p in links.result if isinstance(p, ResourceResultContent)]
    assert len(resources) == 2 and all(r.uri.startswith("demo://resource/") for r in resources)
    embedded = await everything.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    refs = [p for p in embedded.result if isinstance(p, ResourceResultContent)]
    assert refs and refs[0].text is not None
    weather = await everything.call_tool("get-structured-content", {"location": "Chicago"})
    assert weather.is_error is False and isinstance(weather.structured_content, dict)
    assert "temperature" in weather.structured_content


async def test_invalid_arguments_are_an_error_result(everything: McpWorkbench) -> None:
    result = await everything.call_tool("get-sum", {"a": "not a number"})
    assert result.is_error is True and result.to_text()


async def test_resources_and_prompts(everything: McpWorkbench) -> None:
    resources = await everything.list_resources()
    assert resources and all(r.uri for r in resources)
    templates = {t.uri_template for t in await everything.list_resource_templates()}
    assert "demo://resource/dynamic/text/{resourceId}" in templates
    contents = await everything.read_resource("demo://resource/dynamic/text/1")
    assert contents[0].text
    blob = await everything.read_resource("demo://resource/dynamic/blob/1")
    assert blob[0].data is not None
    prompts = {p.name for p in await everything.list_prompts()}
    assert {"simple-prompt", "args-prompt"} <= prompts
    filled = await everything.get_prompt("args-prompt", {"city": "Lisbon", "state": "PT"})
    assert filled.messages and "Lisbon" in json.dumps([m.model_dump() for m in filled.messages])


async def test_sampling_elicitation_and_roots(everything: McpWorkbench, model: TemplateModel) -> None:
    before = len(model.requests)
    sampled = await everything.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 20})
    assert "sampled answer" in sampled.to_text() and "template-1" in sampled.to_text()
    request = model.requests[before]
    assert request.messages[0] == SystemMessage(content="You are a helpful test server.")
    assert isinstance(request.messages[1], UserMessage) and "hello" in str(request.messages[1].content)
    assert request.options.max_tokens == 20 and request.options.temperature == 0.7
    declined = await everything.call_tool("trigger-elicitation-request")
    assert "decline" in declined.to_text()
    roots = await everything.call_tool("get-roots-list")
    assert "file:///tmp/everything-root" in roots.to_text()


async def test_timeout_cancels_and_session_survives(everything: McpWorkbench) -> None:
    with pytest.raises(TimeoutError):
        await everything.call_tool("trigger-long-running-operation", {"duration": 30, "steps": 3}, timeout=0.3)
    assert (await everything.call_tool("echo", {"message": "after"})).to_text() == "Echo: after"


async def test_stdio_server_gets_a_clean_environment(everything: McpWorkbench) -> None:
    if not isinstance(everything.server_params, StdioServerParams):
        pytest.skip("the environment is only ours to set over stdio")
    env = json.loads((await everything.call_tool("get-env")).to_text())
    assert env["EXT_TEST_SECRET"] == SECRET
    assert set(env) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "EXT_TEST_SECRET"}
    assert SECRET not in repr(everything)
    with pytest.raises(ComponentError, match="inherit_env") as info:  # a dump would lose the variable
        McpWorkbench(everything.server_params).dump_component()
    assert SECRET not in str(info.value)


async def test_memory_server_keeps_state_on_one_session(npm_servers: NpmServers, tmp_path: Path) -> None:
    params = StdioServerParams(
        command=npm_servers.node,
        args=[npm_servers.script(MEMORY)],
        env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    )
    entities: list[dict[str, Any]] = [
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
        {"name": "Engine", "entityType": "machine", "observations": ["analytical"]},
    ]
    async with McpWorkbench(params) as bench:
        created = await bench.call_tool("create_entities", {"entities": entities})
        assert created.is_error is False
        related = await bench.call_tool(
            "create_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}
        )
        assert related.is_error is False
        graph = await bench.call_tool("read_graph")
        data = graph.structured_content or json.loads(graph.to_text())
        assert sorted(e["name"] for e in data["entities"]) == ["Ada", "Engine"]
        assert data["relations"] == [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]
        found = await bench.call_tool("search_nodes", {"query": "program"})
        assert "Ada" in found.to_text()
