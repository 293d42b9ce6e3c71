"""Every wait of the runtime suites is bounded: a broken runtime fails the case, it never hangs the run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

WAIT = 15.0
"""Upper bound on every wait in the runtime suites, in seconds."""


async def within(awaitable: Awaitable[T], seconds: float = WAIT) -> T:
    return await asyncio.wait_for(awaitable, seconds)
