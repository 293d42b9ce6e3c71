"""Where spend is kept: the `BudgetStore` protocol and its in-memory implementation (`RedisBudgetStore` shares it).

A store holds integer counters (requests, tokens, cost in nano-units of the currency). `charge` is the one
decision: it checks every counter against its limit and adds to all of them only if none would cross, atomically,
so two processes can never both take the last room. `add` corrects counters after a call (the estimate charged
before becomes the usage reported after).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["BudgetStore", "Charge", "InMemoryBudgetStore"]


class Charge(NamedTuple):
    """`amount` to add to `counter`, refused when the counter would pass `limit` (None: not checked). `ttl`: the
    counter is dropped this many seconds after its last change (None: kept)."""

    counter: str
    amount: int
    limit: int | None = None
    ttl: float | None = None


@runtime_checkable
class BudgetStore(Protocol):
    async def charge(self, charges: Sequence[Charge]) -> tuple[int, int]:
        """Add every charge, or none: `(-1, 0)` when added, else `(index, spent)` of the first charge that would
        pass its limit (an amount of 0 counts as 1, so a counter at its limit refuses every call)."""
        ...

    async def add(self, changes: Sequence[Charge]) -> None:
        """Add each amount (negative ones too) without checking limits."""
        ...

    async def spent(self, counter: str) -> int: ...

    async def close(self) -> None: ...


class InMemoryBudgetStore:
    """Spend held by this process. `clock` (seconds) can be injected for counters with a `ttl`."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._counters: dict[str, list[float]] = {}  # counter -> [value, expires at (inf: never)]

    def __repr__(self) -> str:
        return "InMemoryBudgetStore()"

    def _value(self, counter: str, now: float) -> int:
        found = self._counters.get(counter)
        if found is None:
            return 0
        if found[1] <= now:  # a window that ended
            del self._counters[counter]
            return 0
        return int(found[0])

    async def charge(self, charges: Sequence[Charge]) -> tuple[int, int]:
        now = self._clock()
        for index, charge in enumerate(charges):
            if charge.limit is not None:
                spent = self._value(charge.counter, now)
                if spent + max(charge.amount, 1) > charge.limit:
                    return index, spent
        self._apply(charges, now)
        return -1, 0

    async def add(self, changes: Sequence[Charge]) -> None:
        self._apply(changes, self._clock())

    def _apply(self, changes: Sequence[Charge], now: float) -> None:
        for change in changes:
            value = self._value(change.counter, now) + change.amount
            self._counters[change.counter] = [value, now + change.ttl if change.ttl else float("inf")]

    async def spent(self, counter: str) -> int:
        return self._value(counter, self._clock())

    async def close(self) -> None:
        self._counters.clear()
