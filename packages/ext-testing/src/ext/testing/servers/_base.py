"""A scriptable loopback HTTP/1.1 server; protocol subclasses render neutral replies into a provider's wire format.

The request and response types live in `_messages`, the HTTP/1.1 connection in `_http`; both are re-exported
here, so `from ext.testing.servers._base import ...` keeps working."""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections import deque
from collections.abc import Sequence
from typing import ClassVar
from urllib.parse import parse_qs, unquote

from ext.core import AsyncStartStop
from ext.testing._waiting import CountWaiters
from ext.testing.script import FAULT_KINDS, Fault, NeutralRequest, Reply
from ext.testing.servers._http import (
    _BadRequest,
    _Connection,
    _head,
    _parse_json,
    _wants_keep_alive,
)
from ext.testing.servers._messages import (
    _RESULT_TYPES,
    Headers,
    RecordedRequest,
    Response,
    Route,
    ScriptItem,
    ScriptResult,
    StreamResponse,
    _compile_pattern,
    format_seconds,
    json_response,
    ndjson_frame,
    sse_frame,
)

__all__ = [
    "Headers",
    "LoopbackServer",
    "RecordedRequest",
    "Response",
    "Route",
    "ScriptItem",
    "StreamResponse",
    "format_seconds",
    "json_response",
    "ndjson_frame",
    "sse_frame",
]

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
EXHAUSTED_MESSAGE = "ext.testing loopback server: script exhausted"
SERVER_ERROR_MESSAGE = "ext.testing loopback server: error in the server or a script callable"


class LoopbackServer(AsyncStartStop):
    """Base of the scriptable loopback servers: HTTP/1.1 on 127.0.0.1 with an ephemeral port.

    Script it with :meth:`enqueue` (FIFO) and :attr:`default` (used when the queue is empty; None answers 500
    "script exhausted"). Every request is recorded in :attr:`requests` (``record=False`` only counts them in
    :attr:`request_count`, for long benchmarks). An exception raised by a script callable or a hook is kept in
    :attr:`errors` and answered with a 500 naming it. Subclasses implement :meth:`routes`, :meth:`render`,
    :meth:`render_fault` and :meth:`decode`, and may override :meth:`check` and :meth:`render_error`.
    """

    overloaded_status: ClassVar[int] = 503
    """HTTP status of ``Fault("overloaded")`` for this protocol."""
    fault_kinds: ClassVar[frozenset[str]] = FAULT_KINDS
    """The ``Fault`` kinds this peer can produce (a loopback server: all of them)."""
    scripted_usage: ClassVar[bool] = True
    """Usage in responses is the script's ``Reply.prompt_tokens`` / ``completion_tokens``."""

    def __init__(self, *, default: ScriptItem | None = None, record: bool = True) -> None:
        self.default: ScriptItem | None = default
        self.record = record
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self.connections_opened = 0
        self.errors: list[Exception] = []
        self._script: deque[ScriptItem] = deque()
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._closing = False
        self._connections: set[_Connection] = set()
        self._conn_ids = itertools.count(1)
        self._waiters = CountWaiters()
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._static: dict[tuple[str, str], Route] = {}
        self._dynamic: list[tuple[str, re.Pattern[str], Route]] = []
        for route in self.routes():
            method = route.method.upper()
            if "{" in route.pattern:
                self._dynamic.append((method, _compile_pattern(route.pattern), route))
            else:
                self._static[(method, route.pattern)] = route

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind 127.0.0.1 on an ephemeral port and start serving."""
        if self._server is not None:
            return
        self._closing = False
        self._server = await asyncio.start_server(self._handle_client, HOST, 0, backlog=512)
        self._port = int(self._server.sockets[0].getsockname()[1])
        logger.debug("%s listening on %s", type(self).__name__, self.base_url)

    async def stop(self) -> None:
        """Close the listener and every open connection (idempotent)."""
        server = self._server
        if server is None:
            return
        self._server = None
        self._closing = True
        server.close()
        current = asyncio.current_task()
        tasks = []
        for conn in list(self._connections):
            conn.abort()
            if conn.task is not None and conn.task is not current and not conn.task.done():
                conn.task.cancel()
                tasks.append(conn.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("server not started: await server.start() first")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash, no path)."""
        return f"http://{HOST}:{self.port}"

    @property
    def open_connections(self) -> int:
        """How many client connections are open now."""
        return len(self._connections)

    # -- scripting -----------------------------------------------------------------------------------------------

    async def wait_for_no_connections(self, timeout: float = 5) -> None:
        """Wait until every client connection has closed (e.g. a client's ``close()`` released its pool);
        ``TimeoutError`` after ``timeout`` seconds."""
        if not self._connections:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(future)
        await asyncio.wait_for(future, timeout)

    def enqueue(self, *items: ScriptItem) -> None:
        """Append replies, faults or callables ``(RecordedRequest) -> Reply | Fault`` to the script (FIFO)."""
        for item in items:
            if not isinstance(item, _RESULT_TYPES) and not callable(item):
                raise TypeError(
                    f"cannot enqueue {item!r}: expected Reply, Fault, Response, StreamResponse or a callable"
                )
            self._script.append(item)

    @property
    def pending(self) -> int:
        """How many enqueued items have not been consumed yet."""
        return len(self._script)

    def reset(self) -> None:
        """Clear the script, the recorded requests and errors, and the counts (``default`` is kept)."""
        self.errors.clear()
        self._script.clear()
        self.requests.clear()
        self.request_count = 0
        self.connections_opened = 0

    async def wait_for_requests(self, n: int, timeout: float = 5) -> list[RecordedRequest]:
        """Wait until at least ``n`` requests (any route, as soon as they are parsed) were received; returns the
        recorded requests. Raises ``TimeoutError`` after ``timeout`` seconds."""
        await self._waiters.wait(n, lambda: self.request_count, timeout, "request(s)")
        return list(self.requests)

    def _record(self, request: RecordedRequest) -> None:
        self.request_count += 1
        if self.record:
            self.requests.append(request)
        if self._waiters:
            for future in self._waiters.reached(self.request_count):
                future.set_result(None)

    def _next_item(self) -> ScriptItem | None:
        if self._script:
            return self._script.popleft()
        return self.default

    # -- protocol hooks ------------------------------------------------------------------------------------------

    def routes(self) -> Sequence[Route]:
        """The routes this protocol serves (called once, at construction)."""
        return ()

    def check(self, request: RecordedRequest) -> Response | None:
        """Reject a scripted request before it consumes a script item (auth, missing parameters, bad JSON)."""
        return None

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        """Render a reply into this protocol's wire format."""
        raise NotImplementedError

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        """Render an HTTP error fault (not drop/hang/drop_mid_body) into this protocol's error shape."""
        status = self.fault_status(fault)
        return json_response(
            {"error": {"type": fault.kind, "message": fault.message or fault.kind}}, status, self.fault_headers(fault)
        )

    def render_error(self, status: int, message: str, request: RecordedRequest | None) -> Response:
        """A server-side error (unknown route, malformed request, script exhausted) in this protocol's shape."""
        return json_response({"error": {"type": "invalid_request_error", "message": message}}, status)

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        """Decode a recorded request into a :class:`NeutralRequest`."""
        raise NotImplementedError

    _FAULT_STATUS: ClassVar[dict[str, int]] = {
        "rate_limit": 429,
        "server_error": 500,
        "bad_request": 400,
        "auth": 401,
        "not_found": 404,
        "context_window": 400,
        "drop": 500,
        "drop_mid_body": 500,
        "hang": 500,
    }

    def fault_status(self, fault: Fault) -> int:
        """The HTTP status for ``fault`` (its ``status`` if set)."""
        if fault.status is not None:
            return fault.status
        if fault.kind == "overloaded":
            return self.overloaded_status
        return self._FAULT_STATUS[fault.kind]

    def fault_headers(self, fault: Fault) -> dict[str, str]:
        """Headers for ``fault``: ``retry-after`` (seconds) when ``retry_after`` is set."""
        if fault.retry_after is None:
            return {}
        return {"retry-after": format_seconds(fault.retry_after)}

    # -- serving -------------------------------------------------------------------------------------------------

    async def _handle_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(reader, writer, next(self._conn_ids))
        conn.task = asyncio.current_task()
        self._connections.add(conn)
        self.connections_opened += 1
        try:
            while not self._closing:
                try:
                    parsed = await conn.read_request()
                except _BadRequest as exc:
                    logger.debug("bad request on connection %d: %s", conn.id, exc.message)
                    await self._send_fixed(conn, self.render_error(exc.status, exc.message, None), keep_alive=False)
                    break
                if parsed is None:
                    break
                method, target, version, raw_headers, body = parsed
                if target[:7] == "http://" or target[:8] == "https://":  # absolute-form: keep the path
                    target = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
                path, _, query_text = target.partition("?")
                headers = Headers(raw_headers)
                request = RecordedRequest(
                    method=method,
                    path=path,
                    query=parse_qs(query_text, keep_blank_values=True) if query_text else {},
                    headers=headers,
                    body=body,
                    json=_parse_json(body),
                    connection_id=conn.id,
                    http_version=version,
                )
                self._record(request)
                keep_alive = _wants_keep_alive(version, headers.get("connection"))
                if not await self._dispatch(conn, request, keep_alive):
                    break
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("%s: error while serving connection %d", type(self).__name__, conn.id)
        finally:
            conn.close()
            self._connections.discard(conn)
            if not self._connections:
                for future in self._idle_waiters:
                    if not future.done():
                        future.set_result(None)
                self._idle_waiters.clear()

    def _match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        route = self._static.get((method, path))
        if route is not None:
            return route, {}
        for route_method, regex, candidate in self._dynamic:
            if route_method == method:
                m = regex.match(path)
                if m is not None:
                    return candidate, {k: unquote(v) for k, v in m.groupdict().items()}
        return None

    async def _dispatch(self, conn: _Connection, request: RecordedRequest, keep_alive: bool) -> bool:
        """Answer one request; returns whether the connection stays open."""
        conn.head_sent = False
        try:
            return await self._answer(conn, request, keep_alive)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.errors.append(exc)
            logger.exception("%s: error while answering %s %s", type(self).__name__, request.method, request.path)
            if conn.head_sent:
                return False
            response = self.render_error(500, f"{SERVER_ERROR_MESSAGE}: {exc!r}", request)
            response.headers["x-should-retry"] = "false"
            await self._send(conn, request, response, None, keep_alive=False)
            return False

    async def _answer(self, conn: _Connection, request: RecordedRequest, keep_alive: bool) -> bool:
        matched = self._match(request.method, request.path)
        if matched is None:
            response = self.render_error(404, f"Invalid URL ({request.method} {request.path})", request)
            return await self._send(conn, request, response, None, keep_alive)
        route, request.params = matched
        request.route = route.name or route.pattern
        if route.handler is not None:
            result = route.handler(request)
            if not isinstance(result, (Response, StreamResponse)):
                result = await result
            return await self._send(conn, request, result, None, keep_alive)
        rejection = self.check(request)
        if rejection is not None:
            return await self._send(conn, request, rejection, None, keep_alive)
        item = self._next_item()
        outcome: ScriptResult | None
        if item is None or isinstance(item, _RESULT_TYPES):
            outcome = item
        else:
            produced = item(request)
            outcome = produced if isinstance(produced, _RESULT_TYPES) else await produced
        if outcome is None:
            logger.warning("%s: script exhausted (%s %s)", type(self).__name__, request.method, request.path)
            message = f"{EXHAUSTED_MESSAGE}: no reply enqueued for request #{self.request_count} ({request.path})"
            response = self.render_fault(Fault("server_error", message=message), request)
            response.headers["x-should-retry"] = "false"
            return await self._send(conn, request, response, None, keep_alive)
        if isinstance(outcome, Fault):
            return await self._apply_fault(conn, request, outcome, keep_alive)
        if isinstance(outcome, (Response, StreamResponse)):
            return await self._send(conn, request, outcome, None, keep_alive)
        if not isinstance(outcome, Reply):
            raise TypeError(f"script callable returned {outcome!r}, expected Reply, Fault, Response or StreamResponse")
        if outcome.delay > 0 and not await conn.sleep(outcome.delay):
            self._client_gone(request)
            return False
        response_or_stream = self.render(outcome, request)
        if outcome.headers:
            response_or_stream.headers.update(outcome.headers)
        return await self._send(conn, request, response_or_stream, outcome, keep_alive)

    async def _apply_fault(self, conn: _Connection, request: RecordedRequest, fault: Fault, keep_alive: bool) -> bool:
        if fault.kind == "drop":
            conn.close()
            return False
        if fault.kind == "hang":
            await conn.wait_closed()
            self._client_gone(request)
            return False
        if fault.kind == "drop_mid_body":
            rendered = self.render(Reply(text="This response is cut off before it ends."), request)
            await self._send_partial(conn, rendered)
            return False
        return await self._send(conn, request, self.render_fault(fault, request), None, keep_alive)

    def _client_gone(self, request: RecordedRequest) -> None:
        if not self._closing:
            request.disconnected.set()

    async def _send(
        self,
        conn: _Connection,
        request: RecordedRequest,
        response: Response | StreamResponse,
        reply: Reply | None,
        keep_alive: bool,
    ) -> bool:
        if isinstance(response, StreamResponse):
            ok = await self._send_stream(conn, request, response, reply, keep_alive)
            keep_alive = keep_alive and request.http_version == "HTTP/1.1"  # else the body ends with the connection
        else:
            ok = await self._send_fixed(conn, response, keep_alive)
        if ok:
            request.completed = True
        else:
            self._client_gone(request)
        return ok and keep_alive

    async def _send_fixed(self, conn: _Connection, response: Response, keep_alive: bool) -> bool:
        if not conn.writable():
            return False
        headers: list[tuple[str, str]] = []
        if response.content_type:
            headers.append(("content-type", response.content_type))
        headers.append(("content-length", str(len(response.body))))
        if not keep_alive:
            headers.append(("connection", "close"))
        headers.extend(response.headers.items())
        conn.head_sent = True
        conn.writer.write(_head(response.status, headers) + response.body)
        return await conn.drain()

    async def _send_stream(
        self,
        conn: _Connection,
        request: RecordedRequest,
        response: StreamResponse,
        reply: Reply | None,
        keep_alive: bool,
    ) -> bool:
        if not conn.writable():
            return False
        chunked = request.http_version == "HTTP/1.1"
        headers: list[tuple[str, str]] = [("content-type", response.content_type), ("cache-control", "no-cache")]
        if chunked:
            headers.append(("transfer-encoding", "chunked"))
        if not keep_alive or not chunked:
            headers.append(("connection", "close"))
        headers.extend(response.headers.items())
        write = conn.writer.write
        conn.head_sent = True
        write(_head(response.status, headers))
        chunk_delay = reply.chunk_delay if reply is not None else 0.0
        stall_after = reply.stall_after_chunks if reply is not None else None
        cut_after = reply.cut_after_chunks if reply is not None else None
        if cut_after is not None:
            stall_after = cut_after
        paced = chunk_delay > 0 or stall_after is not None
        if paced and not await conn.drain():
            return False
        sent = 0
        for frame in response.frames:
            if not frame:
                continue  # a zero-length chunk would end the body
            if stall_after is not None and sent >= stall_after:
                break
            if sent and chunk_delay > 0 and not await conn.sleep(chunk_delay):
                return False
            if not conn.writable():
                return False
            write(b"%x\r\n%s\r\n" % (len(frame), frame) if chunked else frame)
            sent += 1
            if paced and not await conn.drain():
                return False
        if cut_after is not None:
            await conn.drain()
            conn.close()
            return False
        if stall_after is not None:
            if await conn.drain():
                await conn.wait_closed()
            return False
        if not conn.writable():
            return False
        if chunked:
            write(b"0\r\n\r\n")
        return await conn.drain()

    async def _send_partial(self, conn: _Connection, response: Response | StreamResponse) -> None:
        if not conn.writable():
            return
        conn.head_sent = True
        if isinstance(response, StreamResponse):
            frames = [frame for frame in response.frames if frame]
            head = _head(
                response.status,
                [("content-type", response.content_type), ("transfer-encoding", "chunked"), *response.headers.items()],
            )
            kept = frames[: max(1, len(frames) // 2)]
            conn.writer.write(head + b"".join(b"%x\r\n%s\r\n" % (len(frame), frame) for frame in kept))
        else:
            headers = [("content-length", str(len(response.body))), *response.headers.items()]
            if response.content_type:
                headers.insert(0, ("content-type", response.content_type))
            cut = max(1, len(response.body) // 2)
            conn.writer.write(_head(response.status, headers) + response.body[:cut])
        await conn.drain()
        conn.close()
