"""What the loopback servers exchange with their routes and scripts: the recorded request, the responses, the
routes, and the framing helpers (JSON, server-sent events, NDJSON, Retry-After)."""

from __future__ import annotations

import asyncio
import functools
import json as _json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from ext.testing.script import Fault, Reply

__all__ = [
    "Headers",
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


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only HTTP headers; repeated headers are joined with ``", "``."""

    __slots__ = ("_items", "_map")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: list[tuple[str, str]] = list(items)
        mapping: dict[str, str] = {}
        for name, value in self._items:
            key = name.lower()
            mapping[key] = f"{mapping[key]}, {value}" if key in mapping else value
        self._map = mapping

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def get_all(self, name: str) -> list[str]:
        """Every value sent for ``name``, in order."""
        key = name.lower()
        return [value for item_name, value in self._items if item_name.lower() == key]

    def raw_items(self) -> list[tuple[str, str]]:
        """The headers as received: original case and order."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


@dataclass(eq=False)
class RecordedRequest:
    """One request as received. ``disconnected`` is set when the client closed the connection before the
    response finished; ``completed`` becomes True once the response was fully written. ``params`` holds the
    route's path parameters (e.g. ``deployment``), ``route`` the matched route's name."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Headers
    body: bytes
    json: Any | None = None
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    completed: bool = False
    params: dict[str, str] = field(default_factory=dict)
    route: str | None = None
    connection_id: int = 0
    http_version: str = "HTTP/1.1"
    received_at: float = field(default_factory=time.monotonic)

    def query_value(self, name: str) -> str | None:
        """The first value of query parameter ``name``, or None."""
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class Response:
    """A fixed-length response."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamResponse:
    """A streamed response: each frame is written as one HTTP chunk (``Reply.chunk_delay`` and
    ``Reply.stall_after_chunks`` count frames). Use :func:`sse_frame` / :func:`ndjson_frame` or raw bytes."""

    frames: Iterable[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)


ScriptResult = Union[Reply, Fault, Response, StreamResponse]
"""What a script item resolves to; a Response/StreamResponse is sent verbatim (an escape hatch for wire edge cases)."""
ScriptItem = Union[ScriptResult, Callable[["RecordedRequest"], Union[ScriptResult, Awaitable[ScriptResult]]]]
"""What :meth:`LoopbackServer.enqueue` accepts: a Reply, a Fault, a verbatim Response/StreamResponse (give a
StreamResponse a list of frames, not a generator, if it may be sent twice), or a sync or async callable
``(RecordedRequest) -> one of those``."""
_RESULT_TYPES = (Reply, Fault, Response, StreamResponse)

Handler = Callable[["RecordedRequest"], Union[Response, StreamResponse, Awaitable[Union[Response, StreamResponse]]]]


@dataclass(frozen=True)
class Route:
    """A route: ``pattern`` is a path such as ``/v1/chat/completions`` or ``/openai/deployments/{deployment}/x``
    (``{name}`` matches one path segment). ``handler=None`` means scripted: the request consumes the next script
    item, rendered by :meth:`LoopbackServer.render`; otherwise the handler answers directly."""

    method: str
    pattern: str
    name: str = ""
    handler: Handler | None = None


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A compact JSON response."""
    body = _json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(status=status, body=body, headers=dict(headers) if headers else {})


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is a str."""
    text = data if isinstance(data, str) else _json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    lines = "".join(f"data: {line}\n" for line in text.split("\n"))
    return (f"event: {event}\n{lines}\n" if event else f"{lines}\n").encode()


def ndjson_frame(obj: Any) -> bytes:
    """One newline-delimited JSON line."""
    return _json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


@functools.lru_cache(maxsize=256)
def _compile_pattern(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", pattern)
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(regex + r"\Z")


def format_seconds(seconds: float) -> str:
    """Format a delay for ``Retry-After``: an integer when whole, else a decimal (SDKs accept floats)."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{seconds:.3f}".rstrip("0").rstrip(".")
