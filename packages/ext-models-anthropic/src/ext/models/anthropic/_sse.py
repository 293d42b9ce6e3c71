"""Server-sent events of a streamed Messages response, decoded straight to JSON dicts.

The SDK sends the request (auth, headers, timeouts, HTTP errors); this module reads the body. The SDK's own
stream turns every event into a pydantic model before handing it out, which is most of its cost per token;
`StreamState` reads the JSON as it is. Decoding follows the SSE format (lines end in LF, CRLF or CR; a blank
line ends an event; `:` starts a comment; `data` lines join with LF; one space after the colon is dropped) and
the SDK's stream: `ping` events and events without a name or data are skipped, and an `error` event raises the
SDK's `APIStatusError` with the event's body, as the SDK does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anthropic
import httpx2

from ext.core import json_loads

__all__ = ["sse_json_events"]

_loads = json_loads


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


async def sse_json_events(response: httpx2.Response) -> AsyncGenerator[Any, None]:
    """The JSON data of each event of `response`'s body, in order."""
    pending = b""
    next_bytes = response.aiter_bytes().__anext__
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
            if name == b"error":
                raise _stream_error(response, data)
            if name is None or name == b"ping" or not data:
                continue
            yield _loads(data[0] if len(data) == 1 else b"\n".join(data))
        if start or held:
            pending = pending[start:] + held


def _stream_error(response: httpx2.Response, data: list[bytes]) -> anthropic.APIStatusError:
    text = b"\n".join(data).decode("utf-8", "replace")
    body: object
    try:
        body = _loads(text)
        message = f"{body}"
    except ValueError:
        body = text
        message = text or f"Error code: {response.status_code}"
    # What the SDK raises for an error event: the response is a 200, so no status-specific class applies.
    return anthropic.APIStatusError(message, response=response, body=body)
