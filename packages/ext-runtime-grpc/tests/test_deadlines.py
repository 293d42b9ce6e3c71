"""The worker's RPC deadline heap on its own: due futures fail with `Expired`, answered ones are left alone
and swept, later ones keep waiting."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ext.runtime.grpc._deadlines import Deadlines, Expired


async def test_due_deadlines_fail_and_later_ones_wait() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    late: asyncio.Future[Any] = loop.create_future()
    due: asyncio.Future[Any] = loop.create_future()
    answered: asyncio.Future[Any] = loop.create_future()
    deadlines.add(loop, loop.time() + 3600, "late", late, 3)
    deadlines.add(loop, loop.time(), "due", due, 3)
    deadlines.add(loop, loop.time(), "answered", answered, 3)
    answered.set_result("ok")
    with pytest.raises(Expired):
        await due
    assert answered.result() == "ok"
    assert not late.done()
    assert len(deadlines) == 1
    deadlines.clear()
    assert len(deadlines) == 0
    assert not late.done()


async def test_answered_entries_are_swept() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    for i in range(300):
        future: asyncio.Future[Any] = loop.create_future()
        future.set_result(i)
        deadlines.add(loop, loop.time() + 3600, str(i), future, 0)
    # 257 entries, all answered, sweep on the 258th add: it and the 42 after it are left.
    assert len(deadlines) == 43
    deadlines.clear()
