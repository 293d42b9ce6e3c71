"""One event loop thread for every search.

graphrag's local search embeds the query with a blocking HTTP call inside its async context builder, and its
pandas work is CPU-bound: searches run on their own loop in one daemon thread so the caller's loop stays free.
Cancelling the caller's await cancels the search task there (its HTTP requests are closed).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ext.core import CancellationToken, run_cancellable

__all__ = ["on_worker"]

T = TypeVar("T")

_worker_lock = threading.Lock()
_worker_loop: asyncio.AbstractEventLoop | None = None


def _loop() -> asyncio.AbstractEventLoop:
    global _worker_loop
    with _worker_lock:
        if _worker_loop is None or _worker_loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="ext-graphrag-search", daemon=True)
            thread.start()
            _worker_loop = loop
        return _worker_loop


async def on_worker(coro: Coroutine[Any, Any, T], token: CancellationToken | None) -> T:
    future = asyncio.run_coroutine_threadsafe(coro, _loop())
    return await run_cancellable(asyncio.wrap_future(future), token)
