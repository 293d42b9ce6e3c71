"""One MCP session, owned by one background task and shared by every caller.

The mcp SDK's transports and `ClientSession` are anyio task groups, which must be entered and left
by the same task. So a single owner task enters them, runs the handshake, and then waits for `close()`
or for the connection to end; callers in any task send their requests through the shared session
(the SDK correlates concurrent requests by id).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import types as mt
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .__about__ import __version__
from ._errors import McpConnectionError, McpError, McpTimeoutError
from ._params import ServerParams, SseServerParams, StdioServerParams

logger = logging.getLogger("ext.tools.mcp")

T = TypeVar("T")

_CLOSE_GRACE = 10.0  # the SDK's stdio shutdown is bounded at about 6 s (close stdin, SIGTERM, SIGKILL)
_NOTICEABLE_STOP = 0.25  # seconds of stopping a failed start that an error message mentions
_SETTLE = 5.0  # how long a caller that saw the connection drop waits to learn why
_STDERR_LINES = 20
_CLIENT_INFO = mt.Implementation(name="ext-tools-mcp", version=__version__)

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class _StderrTail:
    """Reads a stdio server's stderr on a thread: each line is logged at DEBUG, the last few are kept
    for error messages (with secret values masked)."""

    def __init__(self, label: str, secrets: list[str]) -> None:
        read_fd, write_fd = os.pipe()
        self.errlog = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._read_fd = read_fd
        self._label = label
        self._secrets = secrets
        self._lines: deque[str] = deque(maxlen=_STDERR_LINES)
        self._done = threading.Event()
        # A daemon thread: it does not hold up interpreter exit if a server outlives its client.
        self._reader = threading.Thread(target=self._pump, name=f"mcp-stderr {label}", daemon=True)

    async def start(self) -> None:
        """Start the reader. `Thread.start()` waits until the new thread first runs (on a busy 2-core machine:
        median 0.2 ms, p99 6 ms), so it waits on a pool thread and the event loop carries on meanwhile."""
        await asyncio.to_thread(self._reader.start)

    def close_writer(self) -> None:
        """Drop our copy of the pipe's write end once the child has its own (so EOF means it exited)."""
        if not self.errlog.closed:
            self.errlog.close()

    def _pump(self) -> None:
        buffer = b""
        try:
            while True:
                chunk = os.read(self._read_fd, 4096)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._add(line)
            if buffer:
                self._add(buffer)
        except OSError:
            pass
        finally:
            os.close(self._read_fd)
            self._done.set()

    def _add(self, raw: bytes) -> None:
        line = self._mask(raw.decode("utf-8", errors="replace").rstrip("\r"))
        if line:
            self._lines.append(line)
            logger.debug("MCP server %r stderr: %s", self._label, line)

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def tail(self, wait: float = 0.0) -> str:
        """The last stderr lines, after waiting up to `wait` seconds for the pipe to close."""
        if wait:
            self._done.wait(wait)
        return " | ".join(self._lines)


class _WatchedReadStream:
    """The transport's read stream, reporting end of stream (the server went away) to the owner.

    The SDK reads it with `async for` and then looks up `last_context`; `__anext__` receives from the
    inner stream directly, so watching costs no extra frame per message over the bare stream.
    """

    __slots__ = ("_has_context", "_inner", "_on_end", "last_context")

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end
        # Context-aware streams (the HTTP transports) carry the sender's contextvars with each message.
        self._has_context = hasattr(inner, "last_context")
        self.last_context: Any = None

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if self._has_context:
            self.last_context = self._inner.last_context
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            self._on_end()
            raise StopAsyncIteration from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if self._has_context:
            self.last_context = self._inner.last_context
        return item

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _StartTimeout(Exception):
    """The start-up timer fired before the handshake finished (reported by `Connection.open`)."""


def _expire(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_exception(_StartTimeout())


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner:
            return exc
        real = [e for e in inner if not isinstance(e, (asyncio.CancelledError, anyio.get_cancelled_exc_class()))]
        exc = (real or list(inner))[0]


class Handlers:
    """The client-side callbacks a session is built with (None: capability not offered)."""

    def __init__(
        self,
        sampling: Any = None,
        elicitation: Any = None,
        roots: Any = None,
    ) -> None:
        self.sampling = sampling
        self.elicitation = elicitation
        self.roots = roots


class Connection:
    """A started (or starting) session with one server."""

    def __init__(self, params: ServerParams, label: str, handlers: Handlers, auth: Any = None) -> None:
        self.params = params
        self.label = label
        self._handlers = handlers
        # The HTTP transports' auth (the params' own, or the workbench's OAuthFlow); an OAuthFlow keeps its last
        # failure in `failure`, which the transport reports to the session only as a closed connection.
        self._auth = auth if auth is not None else getattr(params, "auth", None)
        self.session: ClientSession | None = None
        # True from the end of the handshake until the connection ends or `close()` starts: a plain
        # attribute, so the per-call check costs one attribute read.
        self.alive = False
        self.init_result: mt.InitializeResult | None = None
        self.failure: str | None = None
        self.closing = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        # Resolved when `close()` starts or the connection ends: what the owner task waits for once up.
        self._wake: asyncio.Future[None] | None = None
        self._stderr: _StderrTail | None = None
        self._http_status: tuple[int, str] | None = None
        self._status_hook: tuple[httpx2.AsyncClient, Callable[[httpx2.Response], Awaitable[None]]] | None = None
        self._tools: list[mt.Tool] | None = None
        # Whether the tool list is cached (a call lists tools first, which fills the SDK's schema cache);
        # a plain attribute kept with `_tools`, read on every call.
        self.tools_listed = False
        self._tools_lock = asyncio.Lock()

    # --- lifetime ---------------------------------------------------------------------------------

    def _mark_ended(self) -> None:
        self.alive = False
        self._ended.set()
        self._signal()

    def _signal(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def open(self) -> None:
        """Start the owner task and wait for the handshake (bounded by the request timeout)."""
        loop = self.loop = asyncio.get_running_loop()
        ready = self._ready = loop.create_future()
        listeners = getattr(self._auth, "failure_listeners", None)
        if isinstance(listeners, list):
            listeners.append(self._on_auth_failure)
        self._wake = loop.create_future()
        self._task = loop.create_task(self._own(), name=f"mcp-session {self.label}")
        timeout = self.params.startup_timeout
        # The caller awaits the start-up future itself (woken as soon as the owner resolves it), with a
        # timer that fails it on expiry; the owner checks `done()` before resolving it.
        timer = loop.call_later(timeout, _expire, ready) if timeout is not None else None
        try:
            await ready
        except (_StartTimeout, asyncio.TimeoutError):
            stopping = loop.time()
            await self.close()
            self._retrieve_ready()
            raise McpTimeoutError(
                self.label,
                f"MCP server {self.label!r} did not start within {timeout} s"
                f"{self._stop_note(loop.time() - stopping)}{self._stderr_note(0.0)}",
            ) from None
        except asyncio.CancelledError:
            await asyncio.shield(self.close())
            self._retrieve_ready()
            raise
        except BaseException:
            await self.close()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _stop_note(self, seconds: float) -> str:
        """What stopping a server that failed to start added to the start-up timeout, when it is noticeable."""
        if seconds < _NOTICEABLE_STOP:
            return ""
        why = (
            ": it did not exit when its stdin closed, so it was terminated"
            if isinstance(self.params, StdioServerParams)
            else ""
        )
        return f"; stopping it took another {seconds:.1f} s{why}"

    def _retrieve_ready(self) -> None:
        # The owner may fail the start-up future after the caller gave up on it; reading the
        # exception keeps asyncio from logging it as never retrieved.
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()

    async def close(self) -> None:
        """End the session and the transport (stdio: the process). Idempotent, bounded."""
        self.closing = True
        self.alive = False
        self._stop.set()
        self._signal()
        task = self._task
        if task is None or task.done():
            return
        if self.session is None:
            # Still starting (spawning, connecting or in the handshake): nothing to finish cleanly.
            # The SDK's transport shutdown is shielded, so cancelling still stops the process.
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_GRACE)
        if not done:
            logger.warning("MCP server %r did not shut down within %s s; cancelling", self.label, _CLOSE_GRACE)
            task.cancel()
            await asyncio.wait({task}, timeout=_CLOSE_GRACE)

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = ClientSession(
                    _WatchedReadStream(read, self._mark_ended),
                    write,
                    # Timeouts are per request: tool calls pass their own, other requests are bounded
                    # in `request()`, and the handshake by the start-up timeout.
                    read_timeout_seconds=None,
                    sampling_callback=self._handlers.sampling,
                    elicitation_callback=self._handlers.elicitation,
                    list_roots_callback=self._handlers.roots,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    client_info=_CLIENT_INFO,
                )
                await stack.enter_async_context(session)
                self.init_result = await session.initialize()
                self.session = session
                self.alive = not self._ended.is_set() and not self.closing
                self._started()
                ready, wake = self._ready, self._wake
                assert ready is not None and wake is not None
                if not ready.done():  # the caller may have given up (timeout, cancellation)
                    ready.set_result(None)
                logger.debug("MCP server %r started (%s)", self.label, self.init_result.server_info.name)
                if not (self._stop.is_set() or self._ended.is_set()):
                    await wake
                if not self._stop.is_set():
                    self.failure = "the server closed the connection" + self._stderr_note(1.0)
                    logger.warning("MCP server %r closed the connection%s", self.label, self._stderr_note(0.0))
        except BaseException as exc:
            error = self._describe(exc)
            if self.failure is None and not self._stop.is_set():
                self.failure = str(error)
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            if not self._stop.is_set() and self.session is not None:
                logger.warning("MCP session %r ended: %s", self.label, error)
        finally:
            listeners = getattr(self._auth, "failure_listeners", None)
            if isinstance(listeners, list) and self._on_auth_failure in listeners:
                listeners.remove(self._on_auth_failure)
            self._mark_ended()
            if self._stderr is not None:
                self._stderr.close_writer()
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(McpConnectionError(self.label, f"MCP server {self.label!r} was stopped"))

    def _on_auth_failure(self, error: McpError) -> None:
        """The OAuth flow failed: end the connection now, so that waiting requests fail with this error."""
        if self.closing:
            return
        if self.failure is None:
            self.failure = str(error)
        ready = self._ready
        if ready is not None and not ready.done():
            ready.set_exception(error)
        self._mark_ended()

    def _started(self) -> None:
        # The recorded HTTP status only explains a failed start-up (`_describe`); once the session is up,
        # responses no longer go through the hook.
        if self._status_hook is not None:
            client, hook = self._status_hook
            self._status_hook = None
            with contextlib.suppress(ValueError):
                client.event_hooks["response"].remove(hook)

    def _transport(self) -> Any:
        params = self.params
        if isinstance(params, StdioServerParams):
            return self._stdio(params)
        headers = params.http_headers()
        auth = self._auth
        timeout = httpx2.Timeout(params.timeout, read=params.sse_read_timeout)
        if isinstance(params, SseServerParams):

            def factory(
                headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None
            ) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth)

            return sse_client(
                params.url,
                headers=headers,
                timeout=params.timeout,
                sse_read_timeout=params.sse_read_timeout,
                httpx_client_factory=factory,
                auth=auth,
            )
        return self._streamable(params.url, headers, timeout, auth, params.terminate_on_close)

    @contextlib.asynccontextmanager
    async def _stdio(self, params: StdioServerParams) -> AsyncIterator[Any]:
        self._stderr = _StderrTail(self.label, params.secret_values())
        server = StdioServerParameters(
            command=params.command, args=list(params.args), env=params.environment() or None, cwd=params.cwd
        )
        try:
            await self._stderr.start()  # in the try: the write end is closed however start-up ends
            async with stdio_client(server, errlog=self._stderr.errlog) as streams:
                self._stderr.close_writer()
                yield streams
        finally:
            self._stderr.close_writer()

    @contextlib.asynccontextmanager
    async def _streamable(
        self, url: str, headers: dict[str, str], timeout: httpx2.Timeout, auth: Any, terminate: bool
    ) -> AsyncIterator[Any]:
        async def record_status(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                self._http_status = (response.status_code, response.reason_phrase)

        client = httpx2.AsyncClient(
            headers=headers, timeout=timeout, auth=auth, event_hooks={"response": [record_status]}
        )
        self._status_hook = (client, record_status)
        async with client, streamable_http_client(url, http_client=client, terminate_on_close=terminate) as streams:
            yield streams

    # --- notifications from the server ------------------------------------------------------------

    async def _on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        level = _LOG_LEVELS.get(params.level, logging.INFO)
        logger.log(
            level, "MCP server %r%s: %s", self.label, f" [{params.logger}]" if params.logger else "", params.data
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools = None
            self.tools_listed = False
        elif isinstance(message, Exception):
            logger.debug("MCP transport %r reported %s: %s", self.label, type(message).__name__, message)

    # --- errors -----------------------------------------------------------------------------------

    def _stderr_note(self, wait: float) -> str:
        if self._stderr is None:
            return ""
        tail = self._stderr.tail(wait)
        return f"; stderr: {tail}" if tail else ""

    def _auth_failure(self) -> McpError | None:
        failure = getattr(self._auth, "failure", None)
        return failure if isinstance(failure, McpError) else None

    def _describe(self, exc: BaseException) -> McpError:
        """A start-up or transport failure as an error naming the server and the cause."""
        leaf = _leaf(exc)
        label = self.label
        if isinstance(leaf, McpError):
            return leaf
        auth_failure = self._auth_failure()
        if auth_failure is not None:
            return auth_failure
        if isinstance(leaf, (asyncio.CancelledError, anyio.get_cancelled_exc_class())):
            return McpConnectionError(label, f"MCP server {label!r}: start-up was cancelled")
        if isinstance(self.params, StdioServerParams) and isinstance(leaf, OSError) and self.session is None:
            if isinstance(leaf, FileNotFoundError):
                cause = f"command {self.params.command!r} not found"
            else:
                cause = f"{type(leaf).__name__}: {leaf.strerror or leaf}"
            return McpConnectionError(label, f"MCP server {label!r} could not be started: {cause}")
        if isinstance(leaf, httpx2.HTTPStatusError):
            response = leaf.response
            return McpConnectionError(
                label, f"MCP server {label!r} answered HTTP {response.status_code} {response.reason_phrase}"
            )
        if isinstance(leaf, httpx2.TimeoutException):
            return McpTimeoutError(label, f"MCP server {label!r} did not answer in time ({type(leaf).__name__})")
        if isinstance(leaf, httpx2.TransportError):
            return McpConnectionError(label, f"cannot reach MCP server {label!r}: {type(leaf).__name__}: {leaf}")
        if isinstance(leaf, MCPError):
            if self.session is not None:
                return self.map_error(leaf, "the session")
            if self._http_status is not None:
                status, reason = self._http_status
                return McpConnectionError(label, f"MCP server {label!r} answered HTTP {status} {reason}")
            if leaf.code == mt.CONNECTION_CLOSED:
                return McpConnectionError(
                    label, f"MCP server {label!r} closed the connection during start-up{self._stderr_note(1.0)}"
                )
            if leaf.code == mt.REQUEST_TIMEOUT:
                return McpTimeoutError(
                    label, f"MCP server {label!r} did not answer the handshake within {self.params.request_timeout} s"
                )
            return McpError(label, f"MCP server {label!r} rejected the handshake: {leaf.message}", code=leaf.code)
        return McpConnectionError(label, f"MCP server {label!r} failed: {type(leaf).__name__}: {leaf}")

    def map_error(self, exc: MCPError, what: str) -> McpError:
        """An SDK error as ours, naming the server and the operation."""
        label = self.label
        auth_failure = self._auth_failure()
        if auth_failure is not None and exc.code in (mt.CONNECTION_CLOSED, mt.INTERNAL_ERROR):
            return auth_failure
        if exc.code == mt.CONNECTION_CLOSED:
            cause = self.failure or "the connection was closed"
            if self.closing and self.failure is None:
                cause = "the workbench was stopped"
            return McpConnectionError(label, f"MCP server {label!r}: connection lost during {what}: {cause}")
        if exc.code == mt.REQUEST_TIMEOUT:
            return McpTimeoutError(
                label, f"MCP server {label!r} did not answer {what} within {self.params.request_timeout} s"
            )
        return McpError(label, f"MCP server {label!r} rejected {what}: {exc.message}", code=exc.code, data=exc.data)

    # --- requests ---------------------------------------------------------------------------------

    async def request(self, what: str, call: Callable[[ClientSession], Awaitable[T]], *, bounded: bool = True) -> T:
        """Run one request on the shared session, with SDK errors mapped to ours.

        `bounded` applies the request timeout here; tool calls pass `False` and their own read timeout
        to the SDK instead, which costs nothing per call.
        """
        session = self.session
        if session is None or self._ended.is_set():
            raise McpConnectionError(
                self.label, f"MCP server {self.label!r} is not connected: {self.failure or 'not started'}"
            )
        timeout = self.params.request_timeout
        try:
            if bounded and timeout is not None:
                return await asyncio.wait_for(call(session), timeout)
            return await call(session)
        except asyncio.TimeoutError:
            if not bounded:
                raise
            raise McpTimeoutError(
                self.label, f"MCP server {self.label!r} did not answer {what} within {timeout} s"
            ) from None
        except MCPError as exc:
            raise await self.failed(exc, what) from exc

    async def failed(self, exc: MCPError, what: str) -> McpError:
        """`map_error`, after letting a lost connection record why it ended."""
        if exc.code == mt.CONNECTION_CLOSED and not self.closing:
            await self._settle()
        return self.map_error(exc, what)

    async def _settle(self) -> None:
        """Let the owner task record why the connection ended before the caller reports it."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ended.wait()), _SETTLE)
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=_SETTLE)

    async def tools(self, refresh: bool = False) -> list[mt.Tool]:
        """Every tool (all pages), cached until the server says the list changed.

        Listing every page also fills the SDK's output-schema cache, so a call to a tool beyond the
        first page does not make the SDK list tools again on every call.
        """
        if self._tools is not None and not refresh:
            return self._tools
        async with self._tools_lock:
            if self._tools is not None and not refresh:
                return self._tools
            listed: list[mt.Tool] = await self.request(
                "tools/list", lambda s: all_pages(s.list_tools, lambda r: r.tools, self.label)
            )
            self._tools = listed
            self.tools_listed = True
            return listed


_MAX_PAGES = 10_000


async def all_pages(fetch: Callable[..., Awaitable[Any]], items: Callable[[Any], list[T]], label: str) -> list[T]:
    """Every item of a paginated list, following `next_cursor` (a repeated cursor is an error)."""
    out: list[T] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        result = await fetch(params=mt.PaginatedRequestParams(cursor=cursor) if cursor else None)
        out.extend(items(result))
        cursor = result.next_cursor
        if not cursor:
            return out
        if cursor in seen:
            raise McpError(label, f"MCP server {label!r} repeated the pagination cursor {cursor!r}", code=-32603)
        seen.add(cursor)
    raise McpError(label, f"MCP server {label!r} returned more than {_MAX_PAGES} pages", code=-32603)
