from __future__ import annotations

import asyncio
import threading

import pytest

from ext.core import CancellationToken, CancelScope, run_cancellable


async def test_cancel_aborts_linked_task() -> None:
    token = CancellationToken()
    started = asyncio.Event()
    finished = False

    async def work() -> None:
        nonlocal finished
        started.set()
        await asyncio.Event().wait()
        finished = True

    task = token.link_future(asyncio.ensure_future(work()))
    await started.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert not finished
    assert token.is_cancelled()


async def test_callbacks_run_once_and_late_callbacks_run_at_once() -> None:
    token = CancellationToken()
    calls: list[str] = []
    token.add_callback(lambda: calls.append("a"))
    remove = token.add_callback(lambda: calls.append("removed"))
    remove()
    token.cancel()
    token.cancel()
    token.add_callback(lambda: calls.append("late"))
    assert calls == ["a", "late"]


async def test_failing_callback_does_not_stop_others() -> None:
    token = CancellationToken()
    calls: list[int] = []

    def boom() -> None:
        raise RuntimeError("x")

    token.add_callback(boom)
    token.add_callback(lambda: calls.append(1))
    token.cancel()
    assert calls == [1]


async def test_cancel_from_another_thread() -> None:
    token = CancellationToken()
    task = token.link_future(asyncio.ensure_future(asyncio.Event().wait()))
    thread = threading.Thread(target=token.cancel)
    thread.start()
    with pytest.raises(asyncio.CancelledError):
        await task
    thread.join()


async def test_run_cancellable() -> None:
    assert await run_cancellable(asyncio.sleep(0, "v"), None) == "v"
    assert await run_cancellable(asyncio.sleep(0, "v"), CancellationToken()) == "v"
    token = CancellationToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run_cancellable(asyncio.sleep(0), token)

    token = CancellationToken()
    gate = asyncio.Event()

    async def wait() -> None:
        gate.set()
        await asyncio.Event().wait()

    runner = asyncio.ensure_future(run_cancellable(wait(), token))
    await gate.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_cancel_scope_cancels_only_inside_block() -> None:
    token = CancellationToken()
    gate = asyncio.Event()
    after: list[str] = []

    async def body() -> None:
        with CancelScope(token) as scope:
            gate.set()
            try:
                await asyncio.Event().wait()
            finally:
                after.append(f"by_token={scope.cancelled_by_token}")

    task = asyncio.ensure_future(body())
    await gate.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert after == ["by_token=True"]

    # Outside the block a later cancel does nothing to the task.
    token2 = CancellationToken()
    with CancelScope(token2):
        await asyncio.sleep(0)
    token2.cancel()
    await asyncio.sleep(0)
    assert asyncio.current_task() is not None and not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_cancel_scope_refuses_cancelled_token() -> None:
    token = CancellationToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError), CancelScope(token):
        pass


def test_repr() -> None:
    assert repr(CancellationToken()) == "CancellationToken(cancelled=False)"
