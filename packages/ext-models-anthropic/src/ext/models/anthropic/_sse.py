"""Server-sent events of a streamed Messages response, decoded straight to JSON dicts.

The SDK sends the request (auth, headers, timeouts, HTTP errors); ext-core's `sse_events` reads the body. The
SDK's own stream turns every event into a pydantic model before handing it out, which is most of its cost per
token; `StreamState` reads the JSON as it is. As in the SDK's stream, `ping` events and events without a name
are skipped, and an `error` event raises the SDK's `APIStatusError` with the event's body.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anthropic
import httpx2

from ext.core import json_loads, sse_events

__all__ = ["sse_json_events"]

_loads = json_loads


async def sse_json_events(response: httpx2.Response) -> AsyncGenerator[Any, None]:
    """The JSON data of each event of `response`'s body, in order."""
    async for name, data in sse_events(response.aiter_bytes()):
        if name == b"error":
            raise _stream_error(response, data)
        if name is None or name == b"ping":
            continue
        yield _loads(data)


def _stream_error(response: httpx2.Response, data: bytes) -> anthropic.APIStatusError:
    text = data.decode("utf-8", "replace")
    body: object
    try:
        body = _loads(text)
        message = f"{body}"
    except ValueError:
        body = text
        message = text or f"Error code: {response.status_code}"
    # What the SDK raises for an error event: the response is a 200, so no status-specific class applies.
    return anthropic.APIStatusError(message, response=response, body=body)
