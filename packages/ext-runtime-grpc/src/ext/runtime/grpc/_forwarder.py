"""Batching what one gateway replica forwards to another.

A message crossing replicas is one publish on the shared registry's message bus (a Redis `PUBLISH`), which
costs far more than the bytes it carries. Per target gateway, a `Forwarder` keeps an ordered queue: when nothing
is being published to that gateway, a forward goes out at once (no timer, no added latency); while a publish is
in flight, new forwards queue up and go together as one `ForwardBatch` when it completes. A publish that fails
hands its forwards, in order, to the gateway's failure handler, which does for each what it would have done for
one. Each queued forward gets a sequence number: a sender waits (`wait_sent`) until its forwards are published or
handled before it routes its next messages, so the order per sender holds even when a target gateway dies (what
is re-routed then goes out before anything newer). That wait is also the back pressure: the queue holds what the
senders waiting on it have handed over (at most one stream message's worth each: one `Batch`, within the
stream's size limit) plus the re-sends of a failed batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from .protos import agent_worker_pb2 as pb

logger = logging.getLogger(__name__)

T = TypeVar("T")

Publish = Callable[[str, bytes], Awaitable[None]]
"""Sends a payload to a gateway (raises `LookupError` when nobody listens, another error when it cannot)."""

Failed = Callable[[str, list[T], Exception], Awaitable[None]]
"""Told the target gateway, the forwards (in order) of a publish that failed, and its error."""


class Forwarder(Generic[T]):
    """The ordered queue of serialized `Forward`s for one target gateway, each with the caller's `T` (what the
    failure handler needs to retry or report it)."""

    __slots__ = (
        "_busy",
        "_done",
        "_failed",
        "_flusher",
        "_max_bytes",
        "_progress",
        "_publish",
        "_queue",
        "_seq",
        "gateway_id",
    )

    def __init__(self, gateway_id: str, publish: Publish, failed: Failed[T], max_bytes: int) -> None:
        self.gateway_id = gateway_id
        self._publish = publish
        self._failed = failed
        self._max_bytes = max_bytes
        self._queue: deque[tuple[int, bytes, T]] = deque()
        self._busy = False
        self._flusher: asyncio.Task[None] | None = None
        self._seq = 0  # of the last forward queued
        self._done = 0  # forwards up to this sequence number are published, or failed and handled
        self._progress: asyncio.Event | None = None

    @property
    def backlog(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        return not self._busy

    @property
    def flushing(self) -> asyncio.Task[None] | None:
        """The task publishing what is queued, while there is one."""
        task = self._flusher
        return task if task is not None and not task.done() else None

    async def send(self, forward: bytes, item: T) -> None:
        """Publish now when idle; queue behind the publish in flight otherwise. Returns once the forward is
        published, or its failure handled."""
        if self._busy:
            await self.wait_sent(self.post(forward, item))
            return
        self._busy = True
        self._seq += 1
        seq = self._seq
        try:
            await self._publish_run([(seq, forward, item)])
        finally:
            self._after_inline()

    def post(self, forward: bytes, item: T) -> int:
        """Queue without waiting (a flusher task publishes); returns the forward's sequence number for
        `wait_sent`. The failure handler re-sends through this, from inside a flush."""
        self._seq += 1
        self._queue.append((self._seq, forward, item))
        if not self._busy:
            self._busy = True
            self._start_flusher()
        return self._seq

    async def wait_sent(self, seq: int) -> None:
        """Wait until the forwards up to sequence number `seq` are published, or failed and handled."""
        while self._done < seq:
            if self._progress is None:
                self._progress = asyncio.Event()
            await self._progress.wait()

    def _after_inline(self) -> None:
        # What queued during the inline publish goes out from a task of its own: the inline caller (a worker
        # stream's reader) returns to its stream instead of flushing for every other sender.
        if self._queue:
            self._start_flusher()
        else:
            self._busy = False

    def _start_flusher(self) -> None:
        self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._queue:
                await self._publish_run(self._take())
        except BaseException:
            # Cancelled (the loop is closing): whatever is still queued goes out from a new task if it can.
            self._busy = False
            if self._queue:
                self._busy = True
                self._start_flusher()
            raise
        self._busy = False

    def _take(self) -> list[tuple[int, bytes, T]]:
        """The next run of queued forwards, in order: as many as fit `max_bytes` (at least one)."""
        queue = self._queue
        run = [queue.popleft()]
        size = len(run[0][1])
        while queue and size + len(queue[0][1]) <= self._max_bytes:
            entry = queue.popleft()
            size += len(entry[1])
            run.append(entry)
        return run

    async def _publish_run(self, run: list[tuple[int, bytes, T]]) -> None:
        payload = pb.ForwardBatch(forwards=[forward for _, forward, _ in run]).SerializeToString()
        try:
            await self._publish(self.gateway_id, payload)
        except Exception as exc:
            try:
                await self._failed(self.gateway_id, [item for _, _, item in run], exc)
            except Exception:
                logger.exception("handling %d forward(s) to gateway %s that failed", len(run), self.gateway_id)
        finally:
            # Done (or cancelled: nothing more will happen to these): their senders go on.
            self._done = run[-1][0]
            progress = self._progress
            if progress is not None:
                self._progress = None
                progress.set()


def parse_forwards(payload: bytes) -> tuple[list[pb.Forward], list[str]]:
    """A `ForwardBatch` from the bus: its forwards, in order, and a problem for each part that could not be
    decoded (the whole payload, or one item: that item alone is dropped). Never raises."""
    try:
        batch = pb.ForwardBatch.FromString(payload)
    except Exception as exc:  # DecodeError, and whatever else protobuf raises on hostile input
        return [], [f"the batch: {type(exc).__name__}: {exc}"]
    forwards: list[pb.Forward] = []
    problems: list[str] = []
    for index, data in enumerate(batch.forwards):
        try:
            forwards.append(pb.Forward.FromString(data))
        except Exception as exc:
            problems.append(f"forward {index}: {type(exc).__name__}: {exc}")
    return forwards, problems
