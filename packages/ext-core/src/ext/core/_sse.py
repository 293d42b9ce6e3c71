"""Server-sent events decoded from a byte stream.

For providers whose SDK turns every streamed event into a model object before handing it out (most of its
cost per token): the SDK still sends the request (auth, headers, timeouts, HTTP errors) and the provider reads
the body's bytes with this decoder. Decoding follows the SSE format: lines end in LF, CRLF or CR (a CRLF cut
between two reads is one line end); a blank line ends an event; a line starting with `:` is a comment; `data`
lines join with LF; one space after a field's colon is dropped; an event without data is skipped.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

__all__ = ["sse_events"]


def _event(block: bytes) -> tuple[bytes | None, list[bytes]]:
    name: bytes | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 58:  # blank, or ":" (a comment)
            continue
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value
    return name, data


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncGenerator[tuple[bytes | None, bytes], None]:
    """`(event name or None, data)` of each event with data in `chunks` (a body read in pieces cut anywhere)."""
    pending = b""
    next_bytes = chunks.__anext__
    last = False
    while not last:
        try:
            received = await next_bytes()
        except StopAsyncIteration:
            # A CR held back below ends a line after all.
            if pending[-1:] != b"\r":
                return
            received, last = b"", True
        pending = pending + received if pending else received
        held = b""
        if b"\r" in pending:
            if pending[-1:] == b"\r" and not last:  # maybe the first half of a CRLF: wait for the next bytes
                held, pending = b"\r", pending[:-1]
            pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        start = 0
        while True:
            end = pending.find(b"\n\n", start)
            if end < 0:
                break
            name, data = _event(pending[start:end])
            start = end + 2
            if data:
                yield name, data[0] if len(data) == 1 else b"\n".join(data)
        if start or held:
            pending = pending[start:] + held
