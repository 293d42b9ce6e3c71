from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr, ValidationError

from ext.core import ConfigurationError, ToolOverride, load_component
from ext.tools.mcp import (
    McpWorkbench,
    McpWorkbenchConfig,
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
    with pytest.raises(ValidationError, match=r"auth must be an httpx2\.Auth"):
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


def test_dump_leaves_secrets_out_and_loads_back(caplog: pytest.LogCaptureFixture) -> None:
    params = StreamableHttpServerParams(
        url="http://127.0.0.1:9/mcp",
        headers={"Authorization": f"Bearer {SECRET}", "X-Trace": "t"},
        headers_env={"X-Api-Key": "EXT_MCP_KEY"},
        auth=httpx2.BasicAuth("u", SECRET),
    )
    bench = McpWorkbench(params, {"echo": ToolOverride(name="say", description="Say it")}, roots=["file:///tmp/work"])
    with caplog.at_level(logging.WARNING, logger="ext.tools.mcp"):
        dump = bench.dump_component()
    text = json.dumps(dump.model_dump(mode="json"))
    assert SECRET not in text
    assert "server_params.auth" in caplog.text
    assert dump.provider == "ext.tools.mcp.McpWorkbench"
    assert dump.config["server_params"]["headers"] == {}
    assert dump.config["server_params"]["headers_env"] == {"X-Api-Key": "EXT_MCP_KEY"}
    assert dump.config["tool_overrides"] == {"echo": {"name": "say", "description": "Say it"}}
    assert dump.config["roots"] == ["file:///tmp/work"]

    loaded = load_component(json.loads(text), McpWorkbench)
    assert isinstance(loaded, McpWorkbench)
    assert isinstance(loaded.server_params, StreamableHttpServerParams)
    assert loaded.server_params.url == params.url
    assert loaded.server_params.headers_env == {"X-Api-Key": "EXT_MCP_KEY"}
    assert loaded.tool_overrides.items() == [("echo", ToolOverride(name="say", description="Say it"))]


def test_stdio_dump_drops_env_values_keeps_inherit_env() -> None:
    bench = McpWorkbench(StdioServerParams(command="srv", env={"TOKEN": SECRET}, inherit_env=["HOME"]))
    config = bench.dump_component().config
    assert SECRET not in json.dumps(config)
    assert config["server_params"]["env"] == {}
    assert config["server_params"]["inherit_env"] == ["HOME"]
    assert McpWorkbenchConfig.model_validate(config).server_params.type == "StdioServerParams"
