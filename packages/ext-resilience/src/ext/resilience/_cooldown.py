"""Cooldowns: a client that fails most of its recent calls is skipped for a while, by every process that shares
the backend.

The rule (`CooldownPolicy`): within a window (`window` seconds from the first call counted), once at least
`min_calls` calls were made and the share of failures reaches `failure_rate`, the client cools down for `cooldown`
seconds, and its counts start again. `min_calls` is at least 2, so one failure never cools a client. An error of an
`immediate` kind (by default a refused key, 401/403, or a model that does not exist, 404) cools it at once: calling
again cannot help. Only provider failures count (`ext.core.classify_error`); a refused result (fallback's
`finish_reason == "length"` rule) is a success here.

The counts and cooldowns live in a `CooldownBackend`: `InMemoryCooldowns` for one process, `RedisCooldowns`
(`ext-resilience[redis]`) for several, where each decision is one atomic Lua script.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ext.core import ConfigurationError, ErrorKind

logger = logging.getLogger(__name__)

DEFAULT_IMMEDIATE = frozenset({ErrorKind.AUTH, ErrorKind.NOT_FOUND})


class CooldownPolicy(BaseModel):
    """When a client cools down, and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_rate: float = Field(
        default=0.5, gt=0.0, le=1.0, description="Share of failed calls in the window that cools the client."
    )
    min_calls: int = Field(
        default=5, ge=2, description="Calls in the window before the rate counts (2 or more: one failure never cools)."
    )
    window: float = Field(default=60.0, gt=0.0, description="Seconds the counts cover, from the first call counted.")
    cooldown: float = Field(default=60.0, gt=0.0, description="Seconds a cooled client is skipped.")
    immediate: frozenset[ErrorKind] = Field(
        default=DEFAULT_IMMEDIATE, description="Error kinds that cool at once (default: auth and not_found)."
    )

    @field_validator("immediate", mode="before")
    @classmethod
    def _kinds(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError("immediate must be a list of error kinds")
        return value


@runtime_checkable
class CooldownBackend(Protocol):
    """Where the counts and cooldowns live. Keys are client names; each method is one atomic decision."""

    async def remaining(self, key: str) -> float:
        """Seconds `key` still cools down (0 when it does not)."""
        ...

    async def record(self, key: str, *, failed: bool, immediate: bool, policy: CooldownPolicy) -> float:
        """Count one call of `key` (`failed` or not; `immediate`: cool at once) and apply `policy`: the seconds
        of the cooldown this call started, else 0."""
        ...

    async def close(self) -> None: ...


class InMemoryCooldowns:
    """Counts and cooldowns in this process (monotonic clock)."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[float, int, int]] = {}  # key -> (window end, calls, failures)
        self._until: dict[str, float] = {}

    async def remaining(self, key: str) -> float:
        until = self._until.get(key)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self._until[key]
            return 0.0
        return left

    async def record(self, key: str, *, failed: bool, immediate: bool, policy: CooldownPolicy) -> float:
        now = time.monotonic()
        if immediate:
            return self._cool(key, now, policy)
        ends, calls, failures = self._counts.get(key, (0.0, 0, 0))
        if now >= ends:
            ends, calls, failures = now + policy.window, 0, 0
        calls += 1
        failures += failed
        if failed and calls >= policy.min_calls and failures >= policy.failure_rate * calls:
            return self._cool(key, now, policy)
        self._counts[key] = (ends, calls, failures)
        return 0.0

    def _cool(self, key: str, now: float, policy: CooldownPolicy) -> float:
        self._until[key] = now + policy.cooldown
        self._counts.pop(key, None)
        return policy.cooldown

    async def close(self) -> None:
        self._counts.clear()
        self._until.clear()

    def __repr__(self) -> str:
        return "InMemoryCooldowns()"


class Cooldowns:
    """A `CooldownPolicy` over a `CooldownBackend` (in memory unless given): what `FallbackMiddleware` and
    `CooldownMiddleware` consult before calling a client and tell after.

    A backend that fails (Redis gone) never stops a call: the client counts as not cooling, the outcome is not
    counted, and a warning is logged. A success is counted in the background (the caller does not wait for the
    round trip); `close()` waits for what is still being counted.
    """

    def __init__(self, policy: CooldownPolicy | None = None, backend: CooldownBackend | None = None) -> None:
        if policy is not None and not isinstance(policy, CooldownPolicy):
            raise ConfigurationError(f"policy must be a CooldownPolicy, got {type(policy).__name__}")
        if backend is not None and not isinstance(backend, CooldownBackend):
            raise ConfigurationError(
                f"backend must be a CooldownBackend (remaining, record, close), got {type(backend).__name__}"
            )
        self.policy = policy or CooldownPolicy()
        self.backend: CooldownBackend = backend if backend is not None else InMemoryCooldowns()
        self._local = isinstance(self.backend, InMemoryCooldowns)
        self._pending: set[asyncio.Task[float]] = set()

    async def remaining(self, client: str) -> float:
        """Seconds `client` still cools down (0: call it)."""
        try:
            return await self.backend.remaining(client)
        except Exception as exc:  # the backend's failure must not stop the call it guards
            logger.warning("%r failed (%s): %s counts as not cooling", self.backend, exc, client)
            return 0.0

    async def succeeded(self, client: str) -> None:
        """Count a call of `client` that did not fail."""
        if self._local:
            await self.backend.record(client, failed=False, immediate=False, policy=self.policy)
            return
        task = asyncio.create_task(self._record(client, failed=False, immediate=False))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def failed(self, client: str, kind: ErrorKind) -> float:
        """Count a failed call of `client`; the seconds of the cooldown it started, else 0."""
        return await self._record(client, failed=True, immediate=kind in self.policy.immediate)

    async def _record(self, client: str, *, failed: bool, immediate: bool) -> float:
        try:
            return await self.backend.record(client, failed=failed, immediate=immediate, policy=self.policy)
        except Exception as exc:
            logger.warning("%r failed (%s): a call of %s was not counted", self.backend, exc, client)
            return 0.0

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self.backend.close()

    def __repr__(self) -> str:
        return f"Cooldowns({self.policy!r}, {self.backend!r})"
