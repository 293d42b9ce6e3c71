"""Bad input over raw HTTP: each gets the protocol's error, the server keeps serving, and nothing leaks (no
traceback, no token, no exception detail beyond what the tool contract shows)."""

from __future__ import annotations

import logging

import httpx2
import pytest
from hosting_mcp_support import ACCEPT, call, messages, open_session, serving

from ext.core import FunctionTool
from ext.hosting.mcp import McpServer, streamable_http_app

TOKEN = "tok-very-secret-0123456789"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def app(**kwargs: object) -> object:
    return streamable_http_app(McpServer([FunctionTool(add)]), max_request_body_size=20_000, **kwargs)  # type: ignore[arg-type]


async def _still_serves(
    client: httpx2.AsyncClient, url: str, session: str, headers: dict[str, str] | None = None
) -> None:
    response = await call(client, url, session, "add", {"a": 20, "b": 22}, id=99, headers=headers)
    assert response.status_code == 200, response.text
    [answer] = messages(response)
    assert answer["result"]["content"][0]["text"] == "42"


async def test_malformed_json_unknown_tool_bad_arguments_and_oversized_requests() -> None:
    async with serving(app()) as url, httpx2.AsyncClient(timeout=30) as client:
        session = await open_session(client, url)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}

        broken = await client.post(url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=headers)
        assert broken.status_code == 400
        assert broken.json()["error"]["code"] == -32700  # parse error

        not_rpc = await client.post(url, json={"hello": "world"}, headers=headers)
        assert not_rpc.status_code == 400
        assert not_rpc.json()["error"]["code"] in (-32600, -32602)

        unknown = messages(await call(client, url, session, "nope", {}))
        assert unknown[0]["error"]["code"] == -32602 and "nope" in unknown[0]["error"]["message"]

        [bad] = messages(await call(client, url, session, "add", {"a": [1], "c": 2}))
        assert bad["result"]["isError"] is True
        text = bad["result"]["content"][0]["text"]
        assert "a: [1] is not of type 'integer'" in text and "'b' is a required property" in text

        huge = await call(client, url, session, "add", {"a": 1, "b": 2, "pad": "x" * 30_000})
        assert huge.status_code == 413

        await _still_serves(client, url, session)
        for response in (broken, not_rpc, huge):
            assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("host", "evil.example:80", 421), ("origin", "http://evil.example", 403)],
)
async def test_wrong_host_or_origin_is_refused_on_loopback_by_default(header: str, value: str, status: int) -> None:
    async with serving(app()) as url, httpx2.AsyncClient(timeout=30) as client:
        session = await open_session(client, url)
        refused = await call(client, url, session, "add", {"a": 1, "b": 2}, headers={header: value})
        assert refused.status_code == status, refused.text
        new = await client.post(
            url, json={"jsonrpc": "2.0", "id": 0, "method": "ping"}, headers={**ACCEPT, header: value}
        )
        assert new.status_code == status
        await _still_serves(client, url, session)


async def test_a_missing_or_wrong_token_is_refused_and_never_echoed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    metadata = "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
    kwargs = {
        "token": TOKEN,
        "resource_server_url": "http://127.0.0.1/mcp",
        "authorization_servers": ["http://127.0.0.1:9/"],
    }
    async with serving(app(**kwargs)) as url, httpx2.AsyncClient(timeout=30) as client:
        missing = await client.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "ping"}, headers=ACCEPT)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert metadata in missing.headers["www-authenticate"]
        wrong = await client.post(
            url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={**ACCEPT, "authorization": "Bearer " + TOKEN[:-1]},
        )
        assert wrong.status_code == 401
        auth = {"authorization": f"Bearer {TOKEN}"}
        session = await open_session(client, url, auth)
        await _still_serves(client, url, session, auth)
        # The session belongs to the credential that opened it: without it, the session does not exist.
        other = await call(client, url, session, "add", {"a": 1, "b": 2})
        assert other.status_code == 401
        meta = await client.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        assert meta.status_code == 200
        assert meta.json()["authorization_servers"] == ["http://127.0.0.1:9/"]
        for response in (missing, wrong, other):
            assert TOKEN not in response.text and TOKEN[:-1] not in response.text
    assert TOKEN[:-1] not in caplog.text


async def test_expired_sessions_leave_the_memory_store() -> None:
    from ext.hosting.mcp import MemorySessionStore, SessionRecord

    store = MemorySessionStore(sweep_every=0.0)
    record = SessionRecord("2025-11-25", None, None)
    await store.save("old", record, -1.0)  # already expired
    assert await store.load("old", 60.0) is None
    for n in range(3):
        await store.save(f"gone-{n}", record, -1.0)
    await store.save("live", record, 60.0)
    assert len(store) == 1 and await store.touch("live", 60.0)


async def test_a_request_naming_no_protocol_version_speaks_the_negotiated_one() -> None:
    # The spec lets the server use the version negotiated at initialize; the SDK's transport alone assumes
    # 2025-03-26 and then sends no priming event (a 2025-11-25 feature) before the answer.
    async with serving(app()) as url, httpx2.AsyncClient(timeout=30) as client:
        session = await open_session(client, url)
        response = await client.post(
            url,
            json={
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            },
            headers={**ACCEPT, "mcp-session-id": session},
        )
        assert response.status_code == 200
        lines = response.text.splitlines()
        first = lines[: lines.index("")]  # the first event: the priming one, an id and empty data
        assert first[0].startswith("id:") and [line.strip() for line in first[1:]] == ["data:"]
        [answer] = messages(response)
        assert answer["result"]["content"][0]["text"] == "3"
