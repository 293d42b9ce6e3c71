"""`CancellationToken`: cancel in-flight work from anywhere."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CancellationToken:
    """A token that cancels the work linked to it.

    `cancel()` is safe to call from any thread or task, more than once. Linked futures and tasks
    are cancelled (the in-flight network request is aborted, not merely ignored), and callbacks
    run once. A callback added after cancellation runs at once.
    """

    __slots__ = ("_callbacks", "_cancelled", "_lock")

    def __init__(self) -> None:
        self._cancelled = False
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    def cancel(self) -> None:
        """Cancel: run every callback and cancel every linked future."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("cancellation callback %r failed", callback)

    def is_cancelled(self) -> bool:
        """Whether `cancel()` was called."""
        return self._cancelled

    def add_callback(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` on cancel (at once if already cancelled). Returns a function that removes it."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        callback()
        return lambda: None

    def _remove(self, callback: Callable[[], object]) -> None:
        with self._lock:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

    def link_future(self, future: asyncio.Future[T]) -> asyncio.Future[T]:
        """Cancel `future` (a future or task) when this token is cancelled. Returns the same future."""
        loop = future.get_loop()

        def _cancel() -> None:
            if _in_loop(loop):
                future.cancel()
            else:
                loop.call_soon_threadsafe(future.cancel)

        remove = self.add_callback(_cancel)
        future.add_done_callback(lambda _f: remove())
        return future

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def run_cancellable(awaitable: Awaitable[T], token: CancellationToken | None) -> T:
    """Await `awaitable`, cancelling it if `token` is cancelled first.

    Raises `asyncio.CancelledError` when the token cancels the work. With no token this is a plain
    await with no extra task.
    """
    if token is None:
        return await awaitable
    if token.is_cancelled():
        _close_awaitable(awaitable)
        raise asyncio.CancelledError("cancelled by CancellationToken before start")
    task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
    token.link_future(task)
    return await task


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


class CancelScope:
    """Cancel the current task while a token is cancelled inside a `with` block.

    This is how streams honour a token without a per-chunk cost: the token's callback cancels the
    task that is awaiting the network, so the SDK aborts its read.
    """

    __slots__ = ("_remove", "_task", "_token", "cancelled_by_token")

    def __init__(self, token: CancellationToken | None) -> None:
        self._token = token
        self._remove: Callable[[], None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self.cancelled_by_token = False

    def __enter__(self) -> CancelScope:
        if self._token is None:
            return self
        if self._token.is_cancelled():
            raise asyncio.CancelledError("cancelled by CancellationToken before start")
        self._task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def _cancel() -> None:
            self.cancelled_by_token = True
            task = self._task
            if task is None:
                return
            if _in_loop(loop):
                task.cancel()
            else:
                loop.call_soon_threadsafe(task.cancel)

        self._remove = self._token.add_callback(_cancel)
        return self

    def __exit__(self, *exc: object) -> None:
        task, self._task = self._task, None
        if self.cancelled_by_token and task is not None and hasattr(task, "uncancel"):
            # The CancelledError still propagates; the task is just not left marked as cancelled
            # from outside, which would confuse an enclosing asyncio.timeout().
            task.uncancel()
        if self._remove is not None:
            self._remove()
            self._remove = None
