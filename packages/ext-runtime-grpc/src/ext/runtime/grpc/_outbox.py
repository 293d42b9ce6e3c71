"""Coalescing writes on one gRPC stream.

A stream write costs far more than the bytes it carries. When nothing is being written, a message goes out
at once (no added latency); while a write is in flight, new messages queue up and the writer sends them
together as one `Batch` when its write completes (several, when one would be larger than the stream's message
size limit). Order is kept. A long queue makes senders wait (back pressure) instead of growing without bound.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

from .protos import agent_worker_pb2 as pb

logger = logging.getLogger(__name__)

HIGH_WATER = 2048

# Encoding overhead, at most: of a message inside a Batch (tag, length), and of the Batch in its Message.
_ITEM_OVERHEAD = 6
_BATCH_OVERHEAD = 6


class Outbox:
    """Writes `pb.Message`s through `write`, coalescing the ones that arrive while a write is in flight."""

    __slots__ = ("_buffer", "_busy", "_drained", "_error", "_flusher", "_max_bytes", "_write")

    def __init__(self, write: Callable[[pb.Message], Awaitable[None]], max_bytes: int) -> None:
        self._write = write
        self._max_bytes = max_bytes
        self._buffer: list[pb.Message] = []
        self._busy = False
        self._error: BaseException | None = None
        self._drained: asyncio.Event | None = None
        self._flusher: asyncio.Task[None] | None = None

    async def send(self, message: pb.Message) -> None:
        """Write now when idle (returns after the write); queue behind the write in flight otherwise (returns
        at once, unless the queue is long). Raises the stream's error once a write has failed."""
        if self._error is not None:
            raise self._error
        if self._busy:
            self._buffer.append(message)
            if len(self._buffer) >= HIGH_WATER:
                await self._wait_drained()
            return
        self._busy = True
        try:
            await self._write(message)
        except BaseException as exc:
            self._fail(exc)
            raise
        if self._buffer:
            await self._flush()
        else:
            self._busy = False

    def post(self, message: pb.Message) -> None:
        """Queue without waiting for the write (one-way traffic). A failed write is logged and kept for the
        next `send`."""
        if self._error is not None:
            raise self._error
        self._buffer.append(message)
        if not self._busy:
            self._busy = True
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    @property
    def backlog(self) -> int:
        return len(self._buffer)

    async def wait_drained(self) -> None:
        """Wait until the queue is short again (for `post` callers that want back pressure)."""
        if len(self._buffer) >= HIGH_WATER:
            await self._wait_drained()

    async def _wait_drained(self) -> None:
        if self._drained is None:
            self._drained = asyncio.Event()
        self._drained.clear()
        await self._drained.wait()
        if self._error is not None:
            raise self._error

    async def _flush(self) -> None:
        try:
            while self._buffer:
                batch, self._buffer = self._buffer, []
                if self._drained is not None:
                    self._drained.set()
                if len(batch) == 1:
                    await self._write(batch[0])
                else:
                    for envelope in _batches(batch, self._max_bytes):
                        await self._write(envelope)
            self._busy = False
        except BaseException as exc:
            dropped = len(self._buffer)
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise
            logger.info("a stream write failed; %d queued message(s) dropped: %s", dropped, exc)

    def _fail(self, exc: BaseException) -> None:
        self._busy = False
        if not isinstance(exc, Exception):
            # The writer was cancelled, not the stream broken: others' queued messages still go out.
            if self._buffer:
                self._busy = True
                self._flusher = asyncio.get_running_loop().create_task(self._flush())
            return
        self._error = exc
        self._buffer.clear()
        if self._drained is not None:
            self._drained.set()


def _batches(messages: list[pb.Message], max_bytes: int) -> list[pb.Message]:
    """`messages` as few writes as fit the size limit, in order (each message alone fits: senders check)."""
    envelope = pb.Message(batch=pb.Batch(messages=messages))
    if envelope.ByteSize() <= max_bytes:
        return [envelope]
    writes: list[pb.Message] = []
    run: list[pb.Message] = []
    size = _BATCH_OVERHEAD
    for message in messages:
        item = message.ByteSize() + _ITEM_OVERHEAD
        if run and size + item > max_bytes:
            writes.append(run[0] if len(run) == 1 else pb.Message(batch=pb.Batch(messages=run)))
            run, size = [], _BATCH_OVERHEAD
        run.append(message)
        size += item
    writes.append(run[0] if len(run) == 1 else pb.Message(batch=pb.Batch(messages=run)))
    return writes


@types.coroutine
def resume(coro: Coroutine[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, None]:
    """`await coro` for a coroutine whose first step was already taken (and yielded `waiting_on`): what it
    waits on goes to this task, and what this task is sent or thrown (a wake-up, a cancellation) goes to it."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting_on = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration:
                return
