"""Start, stop, crashes, reconnects, start-up failures and timeouts."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from ext_mcp_support import SDK_SERVER, start_sdk_http, stop_server

from ext.core import ClientClosedError
from ext.tools.mcp import (
    McpConnectionError,
    McpTimeoutError,
    McpWorkbench,
    SseServerParams,
    StdioServerParams,
    StreamableHttpServerParams,
)


def stdio(*extra: str, read_timeout_seconds: float = 30.0) -> StdioServerParams:
    return StdioServerParams(
        command=sys.executable,
        args=[SDK_SERVER, "stdio", *extra],
        startup_timeout_seconds=20,
        read_timeout_seconds=read_timeout_seconds,
    )


async def test_start_stop_are_idempotent_and_restartable() -> None:
    bench = McpWorkbench(stdio())
    await bench.start()
    await bench.start()
    first = (await bench.call_tool("pid")).to_text()
    assert bench.server_info is not None and bench.server_info.name == "sdk-test-server"
    assert bench.session is not None
    await bench.stop()
    await bench.stop()
    with pytest.raises(ClientClosedError, match="stopped; call start"):
        await bench.call_tool("pid")
    with pytest.raises(ClientClosedError):
        _ = bench.session
    await bench.reset()  # stop + start
    second = (await bench.call_tool("pid")).to_text()
    assert first != second
    await bench.stop()


async def test_stderr_is_read_on_a_daemon_thread_that_ends_with_the_server() -> None:
    """The stdio server's stderr reader is a `threading.Thread` (daemon: it never holds up interpreter exit), and
    it ends once the server is gone."""
    before = set(threading.enumerate())
    async with McpWorkbench(stdio()) as bench:
        await bench.call_tool("pid")
        (reader,) = [t for t in threading.enumerate() if t not in before and t.name.startswith("mcp-stderr ")]
        assert reader.daemon and reader.is_alive()
    reader.join(10)
    assert not reader.is_alive()


async def test_first_call_starts_the_session() -> None:
    bench = McpWorkbench(stdio())
    try:
        assert (await bench.call_tool("echo", {"text": "lazy"})).to_text() == "lazy"
    finally:
        await bench.stop()


async def test_stdio_crash_raises_then_next_call_respawns(caplog: pytest.LogCaptureFixture) -> None:
    async with McpWorkbench(stdio()) as bench:
        before = (await bench.call_tool("pid")).to_text()
        with (
            caplog.at_level(logging.WARNING, logger="ext.tools.mcp"),
            pytest.raises(McpConnectionError, match=r"connection lost during tools/call 'crash'.*closed"),
        ):
            await asyncio.wait_for(bench.call_tool("crash"), 10)
        after = (await asyncio.wait_for(bench.call_tool("pid"), 10)).to_text()
        assert after != before
        assert "closed the connection" in caplog.text


async def test_stop_while_a_call_is_in_flight() -> None:
    bench = McpWorkbench(stdio())
    await bench.start()
    call = asyncio.ensure_future(bench.call_tool("block", {"tag": "stop-in-flight"}))
    await bench.call_tool("started", {"tag": "stop-in-flight"})
    await bench.stop()
    with pytest.raises(McpConnectionError, match="stopped"):
        await asyncio.wait_for(call, 10)


async def test_http_server_crash_raises_then_reconnects() -> None:
    server = start_sdk_http("http")
    port = urlsplit(server.base).port
    assert port is not None
    bench = McpWorkbench(StreamableHttpServerParams(url=server.base + "/mcp", timeout=5))
    try:
        assert (await bench.call_tool("echo", {"text": "up"})).to_text() == "up"
        stop_server(server.proc)
        started = time.monotonic()
        with pytest.raises(McpConnectionError, match="ConnectError"):
            await bench.call_tool("echo", {"text": "down"})
        assert time.monotonic() - started < 5
        server = start_sdk_http("http", "--port", str(port))
        assert (await bench.call_tool("echo", {"text": "back"})).to_text() == "back"
    finally:
        await bench.stop()
        stop_server(server.proc)


async def test_missing_command() -> None:
    bench = McpWorkbench(StdioServerParams(command="/nonexistent/mcp-server", args=["--x"]))
    with pytest.raises(
        McpConnectionError, match=r"'mcp-server --x' could not be started: command '/nonexistent/mcp-server'"
    ):
        await bench.start()


async def test_server_that_exits_at_once_names_the_cause() -> None:
    started = time.monotonic()
    with pytest.raises(McpConnectionError, match=r"closed the connection during start-up; stderr: .*refusing to start"):
        async with McpWorkbench(stdio("--exit-at-once", read_timeout_seconds=10)):
            pass
    assert time.monotonic() - started < 10


async def test_server_that_never_answers_times_out() -> None:
    params = StdioServerParams(
        command=sys.executable, args=["-c", "import time; time.sleep(60)"], read_timeout_seconds=1
    )
    started = time.monotonic()
    with pytest.raises(McpTimeoutError, match=r"did not start within 1.0 s") as info:
        await McpWorkbench(params).start()
    elapsed = time.monotonic() - started
    # The bound is the bound: the time past it is what stopping the process took, and the message says so.
    match = re.search(r"stopping it took another (\d+\.\d) s: it did not exit when its stdin closed", str(info.value))
    assert match is not None, str(info.value)
    stopping = float(match.group(1))
    assert 1.0 <= elapsed <= 1.0 + stopping + 0.75, (elapsed, str(info.value))


async def test_a_server_that_exits_on_stdin_close_stops_within_the_start_up_bound() -> None:
    """Never answers `initialize` but exits when its stdin closes: the whole start fits in the bound."""
    script = "import sys\nfor _ in sys.stdin: pass\n"  # reads and never answers; EOF ends it
    params = StdioServerParams(command=sys.executable, args=["-c", script], read_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        await McpWorkbench(params).start()
    elapsed = time.monotonic() - started
    assert str(info.value).startswith(f"MCP server {params.describe()!r} did not start within 1.0 s")
    assert "stopping it took" not in str(info.value)
    assert 1.0 <= elapsed <= 1.0 + 0.75, elapsed  # well under the 2 s the SDK waits for a process to exit


def _processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(entry.name)
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for the server process")
async def test_cancelled_start_stops_the_server_and_the_owner_task() -> None:
    marker = f"ext-mcp-cancelled-start-{time.monotonic_ns()}"
    params = StdioServerParams(
        command=sys.executable, args=["-c", "import time; time.sleep(60)", marker], read_timeout_seconds=30
    )
    bench = McpWorkbench(params)
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(bench.start(), 1.0)
    assert time.monotonic() - started < 10
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp-session")] == []
    assert _processes_with(marker) == []
    with pytest.raises(ClientClosedError):
        bench.session  # noqa: B018 - the property raises when not started


@pytest.mark.parametrize("kind", ["sse", "http"])
async def test_wrong_url(kind: str) -> None:
    url = "http://127.0.0.1:9/" + ("sse" if kind == "sse" else "mcp")
    params = SseServerParams(url=url, timeout=3) if kind == "sse" else StreamableHttpServerParams(url=url, timeout=3)
    started = time.monotonic()
    with pytest.raises(McpConnectionError, match=r"cannot reach MCP server 'http://127.0.0.1:9/.*': ConnectError"):
        await McpWorkbench(params).start()
    assert time.monotonic() - started < 3


async def test_unauthorized(sdk_http_auth: str, sdk_sse_auth: str) -> None:
    with pytest.raises(McpConnectionError, match=r"answered HTTP 401 Unauthorized") as info:
        await McpWorkbench(
            StreamableHttpServerParams(url=sdk_http_auth, headers={"Authorization": "Bearer wrong"})
        ).start()
    assert "wrong" not in str(info.value)
    with pytest.raises(McpConnectionError, match=r"answered HTTP 401 Unauthorized"):
        await McpWorkbench(SseServerParams(url=sdk_sse_auth, api_key="wrong-key")).start()


async def test_read_timeout_applies_to_calls_without_a_timeout() -> None:
    async with McpWorkbench(stdio(read_timeout_seconds=1.0)) as bench:
        with pytest.raises(McpTimeoutError, match=r"tool 'block' on MCP server .* did not answer within 1.0 s"):
            await bench.call_tool("block", {"tag": "read-timeout"})
        assert (await bench.call_tool("cancelled", {"tag": "read-timeout"})).to_text() == "timed out after 1.0s"
        result = await bench.call_tool("block", {"tag": "read-timeout-2"}, timeout_as_error=True)
        assert result.is_error is True and "did not answer within 1.0 s" in result.to_text()
        # An explicit longer timeout wins over the read timeout.
        with pytest.raises(TimeoutError, match=r"did not finish within 1.6 s"):
            await bench.call_tool("block", {"tag": "explicit"}, timeout=1.6)


async def test_workbench_is_bound_to_its_event_loop() -> None:
    bench = McpWorkbench(stdio())
    await bench.start()
    errors: list[BaseException] = []

    def other_loop() -> None:
        try:
            asyncio.run(bench.call_tool("pid"))
        except BaseException as exc:
            errors.append(exc)

    await asyncio.to_thread(other_loop)
    await bench.stop()
    assert len(errors) == 1 and "another event loop" in str(errors[0])
