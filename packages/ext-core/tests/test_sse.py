"""ext.core.sse_events: the SSE format's line ends, comments, multi-line data, and pieces cut anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ext.core import sse_events

BODY = (
    b": a comment\r\n\r\n"
    b'event: message_start\r\ndata: {"a": 1}\r\n\r\n'
    b"data: line one\ndata: line two\n\n"
    b"event: ping\n\n"
    b"data:no-space\rdata:  two spaces\r\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (b"message_start", b'{"a": 1}'),
    (None, b"line one\nline two"),
    (None, b"no-space\n two spaces"),
    (None, b"[DONE]"),
]


async def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(BODY)])
async def test_events_from_pieces_of_every_size(size: int) -> None:
    assert [event async for event in sse_events(_pieces(BODY, size))] == EXPECTED


async def test_a_final_cr_ends_the_last_line() -> None:
    assert [e async for e in sse_events(_pieces(b"data: x\r\r", 8))] == [(None, b"x")]
    assert [e async for e in sse_events(_pieces(b"data: unterminated", 4))] == []
