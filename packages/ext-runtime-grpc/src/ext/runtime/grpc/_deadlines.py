"""The RPC deadlines of one worker: one loop timer for the earliest, however many RPCs are in flight."""

from __future__ import annotations

import asyncio
import heapq
import math
from typing import Any

__all__ = ["Deadlines", "Expired"]


class Expired(Exception):
    """Set on an RPC's future when its deadline passes."""


class Deadlines:
    """A heap of `(loop time, request id, future)`; the timer fails each future still pending at its time with
    `Expired`. Answered RPCs' entries are swept as they accumulate, so the heap stays bounded."""

    __slots__ = ("_at", "_heap", "_timer")

    def __init__(self) -> None:
        self._heap: list[tuple[float, str, asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf

    def __len__(self) -> int:
        return len(self._heap)

    def add(
        self, loop: asyncio.AbstractEventLoop, when: float, request_id: str, future: asyncio.Future[Any], pending: int
    ) -> None:
        """Fail `future` with `Expired` at loop time `when` unless it is done by then. `pending` is how many
        RPCs are in flight (for the sweep)."""
        heap = self._heap
        if len(heap) > 256 and len(heap) > 2 * pending:
            # Mostly answered RPCs: sweep them out (amortised over the RPCs since the last sweep).
            heap = self._heap = [entry for entry in heap if not entry[2].done()]
            heapq.heapify(heap)
        heapq.heappush(heap, (when, request_id, future))
        if when < self._at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(when, self._expire_due, loop)
            self._at = when

    def _expire_due(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._at = math.inf
        heap = self._heap
        now = loop.time()
        while heap:
            when, _, future = heap[0]
            if not future.done():
                if when > now:
                    self._timer = loop.call_at(when, self._expire_due, loop)
                    self._at = when
                    return
                future.set_exception(Expired())
            heapq.heappop(heap)

    def clear(self) -> None:
        """Stop the timer and forget every deadline (the worker is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._at = math.inf
        self._heap.clear()
