"""Waiting until a count (requests a peer received) reaches a threshold: shared by the loopback servers and the
in-process scripted model, so both wait, time out and clean up the same way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class CountWaiters:
    """The tasks waiting for a count to reach their threshold.

    Thread-safe: the in-process model counts calls on its runtime's worker thread. The count is read and a waiter
    registered under one lock, and the counter's owner asks :meth:`reached` after each increment, so no increment
    falls between the two. :meth:`reached` only names the futures; the owner resolves them on their loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[int, asyncio.Future[None]]] = []

    def __bool__(self) -> bool:
        return bool(self._entries)

    async def wait(self, n: int, count: Callable[[], int], timeout: float, what: str) -> None:
        """Return once ``count() >= n``; ``TimeoutError`` naming ``what`` ("request(s)") after ``timeout`` s."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if count() >= n:
                return
            future: asyncio.Future[None] = loop.create_future()
            entry = (n, future)
            self._entries.append(entry)
        try:
            await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"expected {n} {what} within {timeout}s, got {count()}") from None
        finally:
            with self._lock:
                if entry in self._entries:
                    self._entries.remove(entry)

    def reached(self, count: int) -> list[asyncio.Future[None]]:
        """The pending futures whose threshold ``count`` meets (to be resolved by the caller, on their loop)."""
        with self._lock:
            return [future for n, future in self._entries if n <= count and not future.done()]
