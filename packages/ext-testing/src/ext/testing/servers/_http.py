"""The HTTP/1.1 side of the loopback servers: one accepted connection (request parsing, chunked bodies, disconnect
detection while a response waits) and response heads."""

from __future__ import annotations

import asyncio
import email.utils
import http
import json as _json
import time
from collections.abc import Iterable
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
_READ_SIZE = 65536
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


_REASONS: dict[int, bytes] = {status.value: status.phrase.encode() for status in http.HTTPStatus}
_REASONS[529] = b"Site Overloaded"
_date_cache: tuple[int, bytes] = (0, b"")


def _date_header() -> bytes:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True).encode())
    return _date_cache[1]


def _head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    out = [b"HTTP/1.1 %d %s\r\ndate: %s\r\n" % (status, _REASONS.get(status, b"Unknown"), _date_header())]
    for name, value in headers:
        out.append(f"{name}: {value}\r\n".encode())
    out.append(b"\r\n")
    return b"".join(out)


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Connection:
    """One accepted connection: a byte buffer over the stream, and disconnect detection while a response waits."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int):
        self.reader = reader
        self.writer = writer
        self.id = cid
        self.buf = bytearray()
        self.eof = False
        self.closed = asyncio.Event()
        self.task: asyncio.Task[Any] | None = None
        self.head_sent = False
        self._watch_task: asyncio.Task[None] | None = None

    # -- reading -------------------------------------------------------------------------------------------------

    async def _more(self) -> bool:
        if self.eof:
            return False
        try:
            data = await self.reader.read(_READ_SIZE)
        except (ConnectionError, OSError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    async def _stop_watching(self) -> None:
        task = self._watch_task
        if task is not None:
            self._watch_task = None
            if not task.done():
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def read_request(self) -> tuple[str, str, str, list[tuple[str, str]], bytes] | None:
        """Parse one request; None on a clean end of stream. Raises _BadRequest on malformed input."""
        await self._stop_watching()
        buf = self.buf
        while True:
            while buf[:2] == b"\r\n":  # tolerate empty lines between requests
                del buf[:2]
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > MAX_HEAD_BYTES:
                raise _BadRequest(431, "request head too large")
            if not await self._more():
                if buf.strip():
                    raise _BadRequest(400, "incomplete request head")
                return None
        head = bytes(buf[:end])
        del buf[: end + 4]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[0].isupper() or not parts[1]:
            raise _BadRequest(400, "malformed request line")
        version = parts[2].decode("latin-1")
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _BadRequest(505 if version.startswith("HTTP/") else 400, f"unsupported protocol {version!r}")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise _BadRequest(400, "malformed header line")
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        lowered = {name.lower(): value for name, value in headers}
        if lowered.get("expect", "").lower() == "100-continue" and version == "HTTP/1.1":
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        te = lowered.get("transfer-encoding")
        if te is not None:
            if te.lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise _BadRequest(400, f"unsupported transfer-encoding {te!r}")
            body = await self._read_chunked()
        else:
            lengths = {value.strip() for name, value in headers if name.lower() == "content-length"}
            if len(lengths) > 1:
                raise _BadRequest(400, "conflicting content-length headers")
            if lengths:
                text = lengths.pop()
                if not text.isdigit():
                    raise _BadRequest(400, "invalid content-length")
                body = await self._read_exact(int(text))
            else:
                body = b""
        return parts[0].decode("ascii"), parts[1].decode("latin-1"), version, headers, body

    async def _read_exact(self, n: int) -> bytes:
        if n > MAX_BODY_BYTES:
            raise _BadRequest(413, "request body too large")
        while len(self.buf) < n:
            if not await self._more():
                raise _BadRequest(400, "incomplete request body")
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    async def _read_line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if len(self.buf) > MAX_HEAD_BYTES:
                raise _BadRequest(400, "chunk line too long")
            if not await self._more():
                raise _BadRequest(400, "incomplete chunked body")

    async def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            line = await self._read_line()
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _BadRequest(400, "malformed chunk size") from None
            if not size_text or not _HEX_DIGITS.issuperset(size_text):
                raise _BadRequest(400, "malformed chunk size")
            if size == 0:
                while await self._read_line():  # trailers, up to the empty line
                    pass
                return bytes(body)
            if len(body) + size > MAX_BODY_BYTES:
                raise _BadRequest(413, "request body too large")
            body += await self._read_exact(size)
            if await self._read_exact(2) != b"\r\n":
                raise _BadRequest(400, "malformed chunk terminator")

    # -- disconnect detection ------------------------------------------------------------------------------------

    async def _watch(self) -> None:
        while await self._more():
            if len(self.buf) > MAX_BODY_BYTES:  # a client flooding a pending response: stop buffering
                return
        self.closed.set()

    def _ensure_watching(self) -> None:
        if self.eof:
            self.closed.set()
        elif self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch())

    async def sleep(self, seconds: float) -> bool:
        """Wait ``seconds``; False if the connection closed meanwhile."""
        if seconds <= 0:
            return not self.closed.is_set()
        self._ensure_watching()
        try:
            await asyncio.wait_for(self.closed.wait(), seconds)
        except asyncio.TimeoutError:
            return True
        return False

    async def wait_closed(self) -> None:
        """Wait until the client (or server shutdown) closes the connection."""
        self._ensure_watching()
        await self.closed.wait()

    # -- writing -------------------------------------------------------------------------------------------------

    def writable(self) -> bool:
        return not self.closed.is_set() and not self.writer.transport.is_closing()

    async def drain(self) -> bool:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            self.closed.set()
            return False
        return True

    def close(self) -> None:
        if self._watch_task is not None and not self._watch_task.done():
            self._watch_task.cancel()
        if not self.writer.transport.is_closing():
            self.writer.close()

    def abort(self) -> None:
        if self._watch_task is not None and not self._watch_task.done():
            self._watch_task.cancel()
        self.writer.transport.abort()
        self.closed.set()


def _wants_keep_alive(version: str, connection: str | None) -> bool:
    tokens = {token.strip().lower() for token in connection.split(",")} if connection else set()
    if version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


def _parse_json(body: bytes) -> Any | None:
    if not body:
        return None
    first = body.lstrip()[:1]
    if first not in (b"{", b"["):
        return None
    try:
        return _json.loads(body)
    except ValueError:
        return None
