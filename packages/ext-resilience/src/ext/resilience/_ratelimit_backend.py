"""What a rate limit's state lives in: the `RateLimitBackend` protocol and its in-memory implementation.

A rate window is a sliding log: each admitted call is an entry (its time and its tokens) kept for `window` seconds,
so any interval of `window` seconds holds at most `requests` entries and `tokens` tokens (a fixed window would let
twice the limit through around its edge). A decision either admits the call (adding its entry) or says how long
until it could pass. A concurrency slot is a lease: held until released or until `lease` seconds pass without a
renewal, so a process that dies while holding one gives it back when its lease runs out.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["InMemoryRateLimitBackend", "RateDecision", "RateLimitBackend"]


@dataclass(frozen=True, slots=True)
class RateDecision:
    """The answer of `RateLimitBackend.admit`: `entry` (for `correct`) when admitted, else the seconds to wait."""

    entry: str | None
    retry_after: float = 0.0


@runtime_checkable
class RateLimitBackend(Protocol):
    """The state of rate limits, per key. Each method is one atomic decision."""

    async def admit(
        self, key: str, *, window: float, requests: int | None, tokens: int | None, cost: int
    ) -> RateDecision:
        """Admit a call costing `cost` tokens if the window's log leaves room for one more request and `cost`
        more tokens (a limit of None is not checked)."""
        ...

    async def correct(self, key: str, entry: str, tokens: int, *, window: float) -> None:
        """Set the tokens of an admitted entry to what the call really used (nothing if it left the window)."""
        ...

    async def acquire(self, key: str, holder: str, *, limit: int, lease: float) -> float:
        """Take one of `limit` slots for `holder` for `lease` seconds: 0.0 when taken, else the seconds until the
        earliest lease runs out (a release may come sooner)."""
        ...

    async def renew(self, key: str, holder: str, *, lease: float) -> bool:
        """Extend `holder`'s lease; False when it had already run out (the slot may be someone else's)."""
        ...

    async def release(self, key: str, holder: str) -> None:
        """Give the slot back (nothing if it is not held)."""
        ...

    async def wait(self, key: str, timeout: float, *, slot: bool = False) -> None:
        """Wait until something under `key` may have changed, at most `timeout` seconds (the time `admit` or
        `acquire` said). `slot`: the call waits for a concurrency slot, which a release may free sooner."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Log:
    entries: deque[list[float]] = field(default_factory=deque)  # [time, tokens, id], oldest first
    by_id: dict[int, list[float]] = field(default_factory=dict)
    tokens: float = 0.0


class InMemoryRateLimitBackend:
    """Rate limits held by this process (one event loop). `clock` (seconds, monotonic) can be injected."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._logs: dict[str, _Log] = {}
        self._slots: dict[str, dict[str, float]] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return "InMemoryRateLimitBackend()"

    def _purge(self, log: _Log, now: float, window: float) -> None:
        entries = log.entries
        while entries and entries[0][0] <= now - window:
            entry = entries.popleft()
            log.tokens -= entry[1]
            del log.by_id[int(entry[2])]

    async def admit(
        self, key: str, *, window: float, requests: int | None, tokens: int | None, cost: int
    ) -> RateDecision:
        now = self._clock()
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _Log()
        self._purge(log, now, window)
        entries = log.entries
        wait = 0.0
        if requests is not None and len(entries) + 1 > requests:
            # the entry whose leaving makes room for one more
            wait = entries[len(entries) - requests][0] + window - now
        if tokens is not None and log.tokens + cost > tokens:
            excess = log.tokens + cost - tokens
            for entry in entries:
                excess -= entry[1]
                if excess <= 0:
                    wait = max(wait, entry[0] + window - now)
                    break
        if wait > 0:
            return RateDecision(None, wait)
        number = next(self._ids)
        entry = [now, float(cost), float(number)]
        entries.append(entry)
        log.by_id[number] = entry
        log.tokens += cost
        return RateDecision(str(number))

    async def correct(self, key: str, entry: str, tokens: int, *, window: float) -> None:
        log = self._logs.get(key)
        found = log.by_id.get(int(entry)) if log is not None else None
        if log is None or found is None:
            return
        freed = found[1] - tokens
        log.tokens -= freed
        found[1] = float(tokens)
        if freed > 0:  # a waiting call may fit now
            self._notify(key)

    async def acquire(self, key: str, holder: str, *, limit: int, lease: float) -> float:
        now = self._clock()
        held = self._slots.setdefault(key, {})
        for name in [name for name, until in held.items() if until <= now]:
            del held[name]
        if len(held) < limit:
            held[holder] = now + lease
            return 0.0
        return max(min(held.values()) - now, 1e-3)

    async def renew(self, key: str, holder: str, *, lease: float) -> bool:
        held = self._slots.get(key, {})
        now = self._clock()
        if held.get(holder, now) <= now:
            held.pop(holder, None)
            return False
        held[holder] = now + lease
        return True

    async def release(self, key: str, holder: str) -> None:
        if self._slots.get(key, {}).pop(holder, None) is not None:
            self._notify(key)

    def _notify(self, key: str) -> None:
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    async def wait(self, key: str, timeout: float, *, slot: bool = False) -> None:
        event = self._changed.get(key)
        if event is None:
            event = self._changed[key] = asyncio.Event()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass

    async def close(self) -> None:
        self._logs.clear()
        self._slots.clear()
