"""Two server processes behind a real HAProxy (round robin, one request per connection) with a real redis-server:
a session initialized through one process continues on the other, and a process killed in the middle of a call
leaves the client a clear error on resumption (no hang, no event twice) while the session goes on elsewhere."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest
from hosting_mcp_support import ACCEPT, INIT, messages

from ext.testing.redis import RedisServer

HERE = Path(__file__).resolve().parent
HAPROXY_HINT = "HAProxy is needed for these tests: apt-get install -y haproxy (Debian)"


def _haproxy() -> str:
    binary = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)
    if binary is None:
        pytest.fail(HAPROXY_HINT)
    return binary


def _start_server(redis_url: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "shared_server.py"), "--redis-url", redis_url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the server printed its port (or died: empty line)
    if not line.startswith("PORT "):
        process.kill()
        pytest.fail(f"the server process did not start (exit status {process.wait()})")
    return process, int(line.split()[1])


@pytest.fixture
def cluster(redis_server: RedisServer) -> Iterator[tuple[str, dict[str, subprocess.Popen[str]]]]:
    """HAProxy on 127.0.0.1 in front of two server processes; yields (the proxy's MCP URL, name -> process)."""
    binary = _haproxy()
    servers = {f"s{i}": _start_server(redis_server.url) for i in (1, 2)}
    # HAProxy inherits a socket that already listens, so clients may connect at once (they wait in the backlog).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    listener.set_inheritable(True)
    port, fd = listener.getsockname()[1], listener.fileno()
    directory = tempfile.mkdtemp(prefix="ext-haproxy-")
    config = Path(directory) / "haproxy.cfg"
    lines = [
        "defaults",
        "  mode http",
        "  timeout connect 5s",  # generous: on a loaded machine a slow connect would be redispatched
        "  timeout client 30s",
        "  timeout server 30s",
        "  option http-server-close",  # one request per server connection: round robin applies per request
        "  retries 2",
        "  option redispatch 1",
        "frontend mcp",
        f"  bind fd@{fd}",
        "  default_backend servers",
        "backend servers",
        "  balance roundrobin",
        "  http-response set-header x-served-by %s",
        *(f"  server {name} 127.0.0.1:{p}" for name, (_, p) in servers.items()),
    ]
    config.write_text("\n".join(lines) + "\n")
    check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, pass_fds=[fd])
    assert check.returncode == 0, check.stdout + check.stderr
    proxy = subprocess.Popen(
        [binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=[fd]
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp", {name: process for name, (process, _) in servers.items()}
    finally:
        proxy.kill()
        proxy.wait(timeout=10)
        for process, _ in servers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


async def _post(
    client: httpx2.AsyncClient, url: str, body: dict[str, object], session: str | None = None
) -> httpx2.Response:
    headers = {**ACCEPT, "mcp-protocol-version": "2025-11-25"}
    if session:
        headers["mcp-session-id"] = session
    return await client.post(url, json=body, headers=headers)


async def _events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, dict[str, object]]]:
    event_id: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:") and line[5:].strip():
            yield event_id, json.loads(line[5:])


async def test_initialize_through_one_process_and_call_through_the_other(
    cluster: tuple[str, dict[str, subprocess.Popen[str]]],
) -> None:
    url, _ = cluster
    async with httpx2.AsyncClient(timeout=30) as client:
        opened = await _post(client, url, INIT)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        served = [opened.headers["x-served-by"]]
        done = await _post(client, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert done.status_code == 202
        served.append(done.headers["x-served-by"])
        for n in range(4):
            response = await _post(
                client,
                url,
                {
                    "jsonrpc": "2.0",
                    "id": n + 1,
                    "method": "tools/call",
                    "params": {"name": "add", "arguments": {"a": n, "b": 1}},
                },
                session,
            )
            assert response.status_code == 200, response.text
            [answer] = messages(response)
            assert answer["result"]["content"][0]["text"] == str(n + 1)
            served.append(response.headers["x-served-by"])
    # The session was opened on one process; the calls were answered by both.
    assert served[0] in {"s1", "s2"} and set(served[2:]) == {"s1", "s2"}


async def test_a_process_killed_mid_call_leaves_a_clear_error_and_the_session_goes_on(
    cluster: tuple[str, dict[str, subprocess.Popen[str]]],
) -> None:
    url, processes = cluster
    async with httpx2.AsyncClient(timeout=30) as client:
        opened = await _post(client, url, INIT)
        session = opened.headers["mcp-session-id"]
        await _post(client, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        headers = {**ACCEPT, "mcp-protocol-version": "2025-11-25", "mcp-session-id": session}
        body = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "hang", "arguments": {}, "_meta": {"progressToken": "p"}},
        }
        seen: list[dict[str, object]] = []
        last_id: str | None = None
        async with client.stream("POST", url, json=body, headers=headers) as call:
            assert call.status_code == 200
            victim = call.headers["x-served-by"]
            async for event_id, message in _events(call):
                last_id = event_id
                seen.append(message)
                if message.get("method") == "notifications/progress":
                    processes[victim].kill()  # SIGKILL in the middle of the call
                    break
        assert last_id is not None
        resumed_headers = {**headers, "last-event-id": last_id}
        rest: list[dict[str, object]] = []
        async with client.stream("GET", url, headers=resumed_headers) as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["x-served-by"] != victim
            async for _, message in _events(resumed):
                rest.append(message)
        assert [m.get("method") for m in seen] == ["notifications/progress"]
        [error] = rest  # nothing replayed twice, then the answer for the lost call
        assert error["id"] == 5
        assert "stopped before answering" in error["error"]["message"]  # type: ignore[index]
        after = await _post(
            client,
            url,
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            },
            session,
        )
        assert after.status_code == 200
        [answer] = messages(after)
        assert answer["result"]["content"][0]["text"] == "3"
