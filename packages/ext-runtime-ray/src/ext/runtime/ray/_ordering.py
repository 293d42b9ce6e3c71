"""Per-sender message order in an agent's actor.

Ray runs the calls of an async actor out of order (`allow_out_of_order_execution` cannot be False for one), so
each sender numbers its messages to an agent (`Envelope.stream` and `seq`, from 1 per actor incarnation) and the
actor queues each message into the agent's mailbox in that order: a message that arrives before its predecessor
waits for it, at most `GAP_WAIT` seconds (a predecessor that never comes was lost with a crashed sender or actor).
A restarted actor (`was_current_actor_reconstructed`) takes each stream's first number as its start.
"""

from __future__ import annotations

import asyncio

__all__ = ["GAP_WAIT", "Streams"]

GAP_WAIT = 2.0


class _Stream:
    __slots__ = ("next", "waiting")

    def __init__(self, start: int) -> None:
        self.next = start
        self.waiting: dict[int, asyncio.Future[None]] = {}


class Streams:
    def __init__(self, *, restarted: bool) -> None:
        self._restarted = restarted
        self._streams: dict[str, _Stream] = {}

    async def turn(self, stream: str, seq: int) -> None:
        """Until every earlier message of `stream` was queued (or `GAP_WAIT` passed)."""
        if not stream:
            return
        state = self._streams.get(stream)
        if state is None:
            state = self._streams[stream] = _Stream(seq if self._restarted else 1)
        if seq <= state.next:
            return
        future = state.waiting[seq] = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(future, GAP_WAIT)
        except asyncio.TimeoutError:
            if seq > state.next:
                state.next = seq  # the gap will not fill: go on from here
        finally:
            state.waiting.pop(seq, None)

    def queued(self, stream: str, seq: int) -> None:
        """`stream`'s message `seq` is in the mailbox: let the next one in."""
        state = self._streams.get(stream)
        if state is None or seq < state.next:
            return
        state.next = seq + 1
        future = state.waiting.get(state.next)
        if future is not None and not future.done():
            future.set_result(None)
