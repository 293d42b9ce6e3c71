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
    """The answer of `RateLimitBackend.admit`: `admitted`, with the window's `entry` (for `finish`; None when no
    window is limited); else the seconds to wait, and whether the call waits for a concurrency slot (`slot`: a
    release may come sooner)."""

    admitted: bool
    entry: str | None = None
    retry_after: float = 0.0
    slot: bool = False


@runtime_checkable
class RateLimitBackend(Protocol):
    """The state of rate limits, per key. Each method is one atomic decision."""

    @property
    def shared(self) -> bool:
        """True when processes share the state: a held slot is then a lease the holder renews while its call runs."""
        ...

    async def admit(
        self,
        key: str,
        *,
        window: float,
        requests: int | None,
        tokens: int | None,
        cost: int,
        holder: str | None = None,
        concurrency: int | None = None,
        lease: float = 30.0,
    ) -> RateDecision:
        """Admit a call, or nothing: one of `concurrency` slots for `holder` for `lease` seconds (when both are
        given), and room in the window's log for one more request and `cost` more tokens (a limit of None is not
        checked)."""
        ...

    async def finish(
        self, key: str, *, window: float, entry: str | None = None, tokens: int | None = None, holder: str | None = None
    ) -> None:
        """After the call: set the tokens of `entry` to what the call used (unless None; nothing if it left the
        window) and give `holder`'s slot back."""
        ...

    async def renew(self, key: str, holder: str, *, lease: float) -> bool:
        """Extend `holder`'s lease; False when it had already run out (the slot may be someone else's)."""
        ...

    async def wait(self, key: str, timeout: float, *, slot: bool = False) -> None:
        """Wait until something under `key` may have changed, at most `timeout` seconds (what `admit` said)."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Log:
    entries: deque[list[float]] = field(default_factory=deque)  # [time, tokens, id], oldest first
    by_id: dict[int, list[float]] = field(default_factory=dict)
    tokens: float = 0.0


class InMemoryRateLimitBackend:
    """Rate limits held by this process (one event loop). `clock` (seconds, monotonic) can be injected."""

    shared = False

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
        self,
        key: str,
        *,
        window: float,
        requests: int | None,
        tokens: int | None,
        cost: int,
        holder: str | None = None,
        concurrency: int | None = None,
        lease: float = 30.0,
    ) -> RateDecision:
        now = self._clock()
        held: dict[str, float] | None = None
        if holder is not None and concurrency is not None:
            held = self._slots.get(key)
            if held is None:
                held = self._slots[key] = {}
            for name in [name for name, until in held.items() if until <= now]:
                del held[name]
            if len(held) >= concurrency and holder not in held:
                return RateDecision(False, retry_after=max(min(held.values()) - now, 1e-3), slot=True)
        number: int | None = None
        if requests is not None or tokens is not None:
            log = self._logs.get(key)
            if log is None:
                log = self._logs[key] = _Log()
            self._purge(log, now, window)
            entries = log.entries
            wait = 0.0
            if requests is not None and len(entries) + 1 > requests:
                wait = entries[len(entries) - requests][0] + window - now  # the entry whose leaving makes room
            if tokens is not None and log.tokens + cost > tokens:
                excess = log.tokens + cost - tokens
                for entry in entries:
                    excess -= entry[1]
                    if excess <= 0:
                        wait = max(wait, entry[0] + window - now)
                        break
            if wait > 0:
                return RateDecision(False, retry_after=wait)
            number = next(self._ids)
            entry = [now, float(cost), float(number)]
            entries.append(entry)
            log.by_id[number] = entry
            log.tokens += cost
        if held is not None and holder is not None:
            held[holder] = now + lease
        return RateDecision(True, None if number is None else str(number))

    async def finish(
        self, key: str, *, window: float, entry: str | None = None, tokens: int | None = None, holder: str | None = None
    ) -> None:
        notify = False
        if entry is not None and tokens is not None:
            log = self._logs.get(key)
            found = log.by_id.get(int(entry)) if log is not None else None
            if log is not None and found is not None:
                freed = found[1] - tokens
                log.tokens -= freed
                found[1] = float(tokens)
                notify = freed > 0  # a waiting call may fit now
        if holder is not None and self._slots.get(key, {}).pop(holder, None) is not None:
            notify = True
        if notify:
            event = self._changed.pop(key, None)
            if event is not None:
                event.set()

    async def renew(self, key: str, holder: str, *, lease: float) -> bool:
        held = self._slots.get(key, {})
        now = self._clock()
        if held.get(holder, now) <= now:
            held.pop(holder, None)
            return False
        held[holder] = now + lease
        return True

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
