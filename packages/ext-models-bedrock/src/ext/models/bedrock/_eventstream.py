"""The AWS event-stream body of InvokeModelWithResponseStream, decoded straight to the Anthropic event dicts.

botocore sends the request (SigV4, endpoint, HTTP errors); this module reads the body. botocore's own event
stream parses each message's headers one Python call per byte field and then runs its generic shape parser over
the `{"bytes": "<base64>"}` payload, which is most of its cost per token. The framing (AWS "vnd.amazon.eventstream"):
a 12-byte prelude (total length, headers length, CRC32 of the two), the headers, the payload, and a CRC32 of
everything before it; both CRCs are checked. Headers are `name-length, name, type, value` with the value's
encoding given by its type.

- `:message-type: event` with `:event-type: chunk`: the payload's `bytes` (base64) are the Anthropic event JSON.
  Other event types are skipped.
- `:message-type: exception` (or `error`): raised as botocore's `EventStreamError`, coded like botocore codes it
  (the `:exception-type`, e.g. `throttlingException`, with the payload's message; for `error`, the `:error-code`
  and `:error-message` headers), so retry classification and callers see what the SDK's stream raises.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import AsyncGenerator
from typing import Any

import botocore.exceptions

from ext.core import json_loads

__all__ = ["OPERATION", "anthropic_events"]

OPERATION = "InvokeModelWithResponseStream"

_PRELUDE = struct.Struct(">III")
_U32 = struct.Struct(">I")
_crc32 = binascii.crc32
_loads = json_loads
_b64decode = base64.b64decode

# Header value types: fixed sizes (after the type byte) and the length-prefixed ones.
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_SIGNED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


class EventStreamFramingError(botocore.exceptions.ConnectionClosedError):  # type: ignore[misc]
    """The event-stream body is not well formed (bad length or CRC): the connection is not trusted further.
    A botocore connection error, so a stream that breaks before its first chunk is retried."""

    fmt = "The event stream from {endpoint_url} is corrupt: {error}"


def _headers(data: bytes, start: int, end: int, endpoint: str) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    pos = start
    while pos < end:
        size = data[pos]
        name = data[pos + 1 : pos + 1 + size].decode()
        pos += 1 + size
        kind = data[pos]
        pos += 1
        if kind == 7 or kind == 6:  # string, bytes: a 2-byte length
            (length,) = struct.unpack_from(">H", data, pos)
            raw = data[pos + 2 : pos + 2 + length]
            headers[name] = raw.decode() if kind == 7 else raw
            pos += 2 + length
        elif kind in _FIXED:
            width = _FIXED[kind]
            if kind < 2:
                headers[name] = kind == 0
            elif kind == 9:
                headers[name] = data[pos : pos + 16]
            else:
                (headers[name],) = struct.unpack_from(_SIGNED[kind], data, pos)
            pos += width
        else:
            raise EventStreamFramingError(endpoint_url=endpoint, error=f"unknown header type {kind}")
    if pos != end:
        raise EventStreamFramingError(endpoint_url=endpoint, error="headers overrun their length")
    return headers


def _exception(headers: dict[str, Any], payload: bytes) -> botocore.exceptions.EventStreamError:
    if headers.get(":message-type") == "exception":
        try:
            body = _loads(payload) if payload else {}
        except ValueError:
            body = {}
        message = body.get("Message", body.get("message", "")) if isinstance(body, dict) else ""
        error = {"Code": headers.get(":exception-type", ""), "Message": message}
    else:
        error = {"Code": headers.get(":error-code", ""), "Message": headers.get(":error-message", "")}
    return botocore.exceptions.EventStreamError({"Error": error}, OPERATION)


async def anthropic_events(content: Any, endpoint: str) -> AsyncGenerator[Any, None]:
    """The Anthropic event dicts in the event-stream body `content` (aiohttp's `StreamReader`)."""
    pending = b""
    async for received, _ in content.iter_chunks():
        pending = pending + received if pending else received
        pos = 0
        size = len(pending)
        while size - pos >= 12:
            total, headers_length, prelude_crc = _PRELUDE.unpack_from(pending, pos)
            if total < 16 + headers_length or _crc32(pending[pos : pos + 8]) != prelude_crc:
                raise EventStreamFramingError(endpoint_url=endpoint, error="bad message prelude")
            end = pos + total
            if end > size:
                break
            if _crc32(pending[pos : end - 4]) != _U32.unpack_from(pending, end - 4)[0]:
                raise EventStreamFramingError(endpoint_url=endpoint, error="message CRC mismatch")
            body_start = pos + 12 + headers_length
            headers = _headers(pending, pos + 12, body_start, endpoint)
            payload = pending[body_start : end - 4]
            pos = end
            if headers.get(":message-type", "event") != "event":
                raise _exception(headers, payload)
            if headers.get(":event-type") == "chunk":
                yield _loads(_b64decode(_loads(payload)["bytes"]))
        if pos:
            pending = pending[pos:]
    # A body that ends inside a message: the events so far stand; the stream state says whether it was complete.
