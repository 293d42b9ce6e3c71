"""Construction: every field is checked up front, with an error naming it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from ext.core import ConfigurationError, Tool
from ext.tools.http import HttpTool

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "q": {"type": "string"}},
    "required": ["id"],
}


def make(**overrides: Any) -> HttpTool:
    fields: dict[str, Any] = {"name": "lookup", "host": "127.0.0.1", "port": 8080, "json_schema": SCHEMA}
    fields.update(overrides)
    return HttpTool(**fields)


def test_defaults_follow_the_spec() -> None:
    tool = make()
    assert isinstance(tool, Tool)
    assert tool.method == "POST"
    assert tool.url == "http://127.0.0.1:8080/"
    assert tool.return_type == "text"
    assert tool.timeout == 5.0
    assert tool.schema["name"] == "lookup"
    assert tool.schema["parameters"]["properties"] == SCHEMA["properties"]
    assert tool.schema["parameters"]["required"] == ["id"]
    assert tool.description == "Send an HTTP POST request to /."


def test_description_from_argument_or_schema() -> None:
    assert make(description="Look up an item.").description == "Look up an item."
    assert make(json_schema={**SCHEMA, "description": "From the schema."}).description == "From the schema."


def test_method_and_scheme_are_case_insensitive() -> None:
    tool = make(method="get", scheme="HTTPS", path="/items/{id}")
    assert tool.method == "GET"
    assert tool.url == "https://127.0.0.1:8080/items/{id}"
    assert repr(tool) == "HttpTool(name='lookup', method='GET', url='https://127.0.0.1:8080/items/{id}')"


def test_ipv6_host_is_bracketed() -> None:
    assert make(host="::1").url == "http://[::1]:8080/"
    assert make(host="[::1]").url == "http://[::1]:8080/"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "has space"}, "tool name"),
        ({"name": ""}, "tool name"),
        ({"host": ""}, "host"),
        ({"host": "http://example.com"}, "host"),
        ({"host": "example.com:80"}, "host"),
        ({"host": "example.com/api"}, "host"),
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"port": "8080"}, "port"),
        ({"port": True}, "port"),
        ({"scheme": "ftp"}, "scheme"),
        ({"method": "HEAD"}, "method"),
        ({"method": 1}, "method"),
        ({"return_type": "xml"}, "return_type"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1.5}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"timeout": "5"}, "timeout"),
        ({"description": 3}, "description"),
        ({"json_schema": {"type": "array", "items": {}}}, "json_schema"),
        ({"json_schema": {"properties": {}}}, "json_schema"),
        ({"json_schema": ["not", "a", "dict"]}, "json_schema"),
        ({"json_schema": {"type": "object", "properties": []}}, "json_schema.properties"),
        ({"json_schema": {"type": "object", "properties": {"a": {"type": "nope"}}}}, "json_schema"),
        ({"json_schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}}, "json_schema"),
        ({"json_schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Nope"}}}}, "json_schema"),
        ({"json_schema": {"type": "object", "properties": {"a": {"maxLength": "1 or 2"}}}}, "json_schema"),
        ({"path": "items"}, "path"),
        ({"path": ""}, "path"),
        ({"path": "/items?x=1"}, "path"),
        ({"path": "/items#top"}, "path"),
        ({"path": "/items/ x"}, "path"),
        ({"path": "/items/{missing}"}, "path: placeholder {missing}"),
        ({"path": "/items/{id"}, "path: unbalanced"),
        ({"path": "/items/id}"}, "path: unbalanced"),
        ({"path": "/items/{}"}, "path: placeholder {}"),
        ({"path": "/items/{1a}"}, "path: placeholder {1a}"),
        ({"headers": {"bad name": "x"}}, "headers"),
        ({"headers": {"X-Num": 3}}, "headers['X-Num']"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "headers: 'x-a' is given twice"),
        ({"headers": ["X-A"]}, "headers must be a mapping"),
        ({"headers_env": {"X-A": ""}}, "headers_env['X-A']"),
        ({"headers_env": ["X-A"]}, "headers_env must be a mapping"),
    ],
)
def test_bad_configuration_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        make(**overrides)
    assert field in str(info.value)


def test_host_with_user_info_is_rejected_without_echoing_it() -> None:
    with pytest.raises(ConfigurationError, match="host") as info:
        make(host="user:hunter2@example.com")
    assert "hunter2" not in str(info.value)


def test_header_value_with_newline_is_rejected_without_echoing_it() -> None:
    with pytest.raises(ConfigurationError, match=r"headers\['Authorization'\]") as info:
        make(headers={"Authorization": "Bearer s3cr3t\r\nX-Injected: 1"})
    assert "s3cr3t" not in str(info.value)


def test_headers_env_reads_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXT_HTTP_TEST_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match=r"headers_env\['Authorization'\].*'EXT_HTTP_TEST_TOKEN' is not set"):
        make(headers_env={"Authorization": "EXT_HTTP_TEST_TOKEN"})
    with pytest.raises(ConfigurationError, match="'EXT_HTTP_TEST_TOKEN' is not set"):
        make(headers_env={"Authorization": "Bearer ${EXT_HTTP_TEST_TOKEN}"})
    monkeypatch.setenv("EXT_HTTP_TEST_TOKEN", "")
    with pytest.raises(ConfigurationError, match="is not set or empty"):
        make(headers_env={"Authorization": "Bearer $EXT_HTTP_TEST_TOKEN"})
    with pytest.raises(ConfigurationError, match=r"invalid '\$' placeholder"):
        make(headers_env={"Authorization": "Bearer $"})
    monkeypatch.setenv("EXT_HTTP_TEST_TOKEN", "line\nbreak")
    with pytest.raises(ConfigurationError, match="CR, LF or NUL") as info:
        make(headers_env={"Authorization": "EXT_HTTP_TEST_TOKEN"})
    assert "line" not in str(info.value)


def test_header_set_twice_through_headers_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_HTTP_TEST_TOKEN", "abc")
    with pytest.raises(ConfigurationError, match="'authorization'"):
        make(headers={"Authorization": "x"}, headers_env={"authorization": "EXT_HTTP_TEST_TOKEN"})


def test_remote_refs_are_refused_without_any_network_access() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}}
    with pytest.raises(ConfigurationError, match=r"json_schema: \$ref 'http://127.0.0.1:9/schema.json' points outside"):
        make(json_schema=schema)
    schema = {"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}
    with pytest.raises(ConfigurationError, match="points outside the schema"):
        make(json_schema=schema)


def test_secret_str_header_values_are_accepted() -> None:
    assert make(headers={"X-Key": SecretStr("k")}).name == "lookup"
