from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr, ValidationError

from ext.core import ComponentError, ConfigurationError, ToolOverride
from ext.testing.conformance import assert_dump_round_trip
from ext.tools.mcp import (
    McpWorkbench,
    SseServerParams,
    StdioServerParams,
    StreamableHttpServerParams,
)

SECRET = "sk-very-secret-value"


def test_stdio_defaults_and_label() -> None:
    params = StdioServerParams(command="/usr/bin/node", args=["/opt/servers/everything/index.js", "stdio"])
    assert params.read_timeout_seconds == 30.0
    assert params.env is None and params.inherit_env == [] and params.cwd is None
    assert params.request_timeout == 30.0
    assert params.describe() == "node index.js stdio"


def test_stdio_env_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_MCP_FROM_PARENT", "parent-value")
    params = StdioServerParams(command="srv", env={"TOKEN": SECRET}, inherit_env=["EXT_MCP_FROM_PARENT", "NOT_SET_X"])
    assert SECRET not in repr(params) and SECRET not in str(params)
    assert params.environment() == {"EXT_MCP_FROM_PARENT": "parent-value", "TOKEN": SECRET}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"command": ""}, "command"),
        ({"command": "x", "read_timeout_seconds": 0}, "read_timeout_seconds"),
        ({"command": "x", "args": "not a list"}, "args"),
        ({"command": "x", "bogus": 1}, "bogus"),
    ],
)
def test_stdio_bad_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        StdioServerParams(**kwargs)


def test_sse_api_key_is_a_bearer_token_and_secret() -> None:
    params = SseServerParams(url="http://127.0.0.1:1/sse", api_key=SECRET, headers={"X-Trace": "t1"})
    assert params.timeout == 30.0 and params.sse_read_timeout == 300.0
    assert params.http_headers() == {"X-Trace": "t1", "Authorization": f"Bearer {SECRET}"}
    assert SECRET not in repr(params)
    assert isinstance(params.api_key, SecretStr)


def test_secrets_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_MCP_KEY", SECRET)
    monkeypatch.setenv("EXT_MCP_HEADER", "header-secret")
    sse = SseServerParams(url="https://example.test/sse", api_key_env="EXT_MCP_KEY")
    assert sse.http_headers() == {"Authorization": f"Bearer {SECRET}"}
    http = StreamableHttpServerParams(url="https://example.test/mcp", headers_env={"X-Api-Key": "EXT_MCP_HEADER"})
    assert http.http_headers() == {"X-Api-Key": "header-secret"}
    missing = StreamableHttpServerParams(url="https://example.test/mcp", headers_env={"X-Api-Key": "EXT_MCP_UNSET_9"})
    with pytest.raises(ConfigurationError, match="EXT_MCP_UNSET_9"):
        missing.http_headers()


@pytest.mark.parametrize("url", ["ftp://host/x", "127.0.0.1:8000/mcp", "http:///nohost", ""])
def test_bad_url_is_rejected_without_echoing_it(url: str) -> None:
    with pytest.raises(ValidationError, match=r"StreamableHttpServerParams\.url must be an absolute"):
        StreamableHttpServerParams(url=url)


def test_label_drops_credentials_from_url() -> None:
    params = StreamableHttpServerParams(url="https://user:pw@example.test:8443/mcp?key=abc#frag")
    assert params.describe() == "https://example.test:8443/mcp"


def test_auth_hook_accepts_httpx2_auth_and_callables() -> None:
    basic = httpx2.BasicAuth("u", "p")
    assert StreamableHttpServerParams(url="http://h/mcp", auth=basic).auth is basic
    assert SseServerParams(url="http://h/sse", auth=lambda request: request).auth is not None
    with pytest.raises(ValidationError, match=r"auth must be OAuthSettings, an httpx2\.Auth"):
        StreamableHttpServerParams(url="http://h/mcp", auth="token")


def test_workbench_rejects_bad_arguments_before_any_connection() -> None:
    with pytest.raises(ConfigurationError, match="server_params must be"):
        McpWorkbench("npx server")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"server_params is invalid: .*command"):
        McpWorkbench({"type": "StdioServerParams"})
    with pytest.raises(ConfigurationError, match="model_client"):
        McpWorkbench(StdioServerParams(command="x"), model_client=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="roots"):
        McpWorkbench(StdioServerParams(command="x"), roots="file:///tmp")
    with pytest.raises(ConfigurationError, match="roots"):
        McpWorkbench(StdioServerParams(command="x"), roots=["http://not-a-file"])
    with pytest.raises(ConfigurationError, match="both be presented"):
        McpWorkbench(StdioServerParams(command="x"), {"a": ToolOverride(name="z"), "b": ToolOverride(name="z")})


def test_params_from_a_mapping() -> None:
    bench = McpWorkbench({"type": "SseServerParams", "url": "http://127.0.0.1:9/sse", "api_key": SECRET})
    assert isinstance(bench.server_params, SseServerParams)
    assert SECRET not in repr(bench)


def test_dump_keeps_every_setting_and_loads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_MCP_KEY", SECRET)
    params = StreamableHttpServerParams(
        url="http://127.0.0.1:9/mcp", headers_env={"X-Api-Key": "EXT_MCP_KEY"}, timeout=7, startup_timeout_seconds=3
    )
    bench = McpWorkbench(params, {"echo": ToolOverride(name="say", description="Say it")}, roots=["file:///tmp/work"])
    dump = bench.dump_component()
    text = json.dumps(dump.model_dump(mode="json"))
    assert SECRET not in text
    assert dump.provider == "ext.tools.mcp.McpWorkbench"
    assert dump.config["server_params"]["headers_env"] == {"X-Api-Key": "EXT_MCP_KEY"}
    assert dump.config["tool_overrides"] == {"echo": {"name": "say", "description": "Say it"}}
    assert dump.config["roots"] == ["file:///tmp/work"]
    loaded = assert_dump_round_trip(bench)
    assert isinstance(loaded.server_params, StreamableHttpServerParams)
    assert loaded.server_params.http_headers()["X-Api-Key"] == SECRET
    assert loaded.tool_overrides.items() == [("echo", ToolOverride(name="say", description="Say it"))]


@pytest.mark.parametrize("kind", ["sse", "stdio"])
def test_dump_round_trip_of_each_transport(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("EXT_MCP_KEY", SECRET)
    params: Any = (
        SseServerParams(url="http://127.0.0.1:9/sse", api_key_env="EXT_MCP_KEY", headers_env={"X-K": "EXT_MCP_KEY"})
        if kind == "sse"
        else StdioServerParams(command="srv", args=["-v"], inherit_env=["HOME"], cwd="/tmp", read_timeout_seconds=4)
    )
    assert_dump_round_trip(McpWorkbench(params))


def test_settings_a_dump_cannot_hold_are_refused_with_the_reason() -> None:
    """Header values, env values and objects given in code would be lost by a dump: refused, never dropped."""
    headers = McpWorkbench(StreamableHttpServerParams(url="http://127.0.0.1:9/mcp", headers={"X-Trace": SECRET}))
    with pytest.raises(ComponentError, match=r"\['headers'\]\['X-Trace'\].*headers_env=") as info:
        headers.dump_component()
    assert SECRET not in str(info.value)
    env = McpWorkbench(StdioServerParams(command="srv", env={"TOKEN": SECRET}, inherit_env=["HOME"]))
    with pytest.raises(ComponentError, match=r"server_params.env: values of \['TOKEN'\].*inherit_env") as info:
        env.dump_component()
    assert SECRET not in str(info.value)
    auth = McpWorkbench(StreamableHttpServerParams(url="http://127.0.0.1:9/mcp", auth=httpx2.BasicAuth("u", SECRET)))
    with pytest.raises(ComponentError, match=r"server_params.auth: an httpx2.Auth object") as info:
        auth.dump_component()
    assert SECRET not in str(info.value)
