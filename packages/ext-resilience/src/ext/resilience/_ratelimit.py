"""`RateLimitMiddleware`: requests and tokens per window and calls in flight, per key, for every call of a pipeline.

Before a call goes on it takes a concurrency slot (when `concurrency` is set), then room in the window: one request
and its estimated tokens (the client's `count_tokens` of the prompt plus the call's `max_tokens`). After the call
the window's tokens are corrected to the usage the provider reported (a cached answer, or a failed call without
usage, gives its estimate back) and the slot is released. A call that finds no room waits in a queue of at most
`max_queue` calls per key (a call beyond it is refused at once with `RateLimitQueueFullError`) and at most
`max_wait` seconds (`RateLimitWaitError`). A cancelled call (its task, or its `CancellationToken`) leaves the queue
at once and gives back whatever it held. A stream holds its slot until it ends or is closed.

A slot held by a call is renewed every `lease / 3` seconds while the call runs; a process that dies stops renewing,
and its slot comes back after at most `lease` seconds (with `RedisRateLimitBackend`, to every process sharing it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ext.core import CancelScope, ComponentError, ConfigurationError, CreateResult, RequestUsage
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

from ._ratelimit_backend import InMemoryRateLimitBackend, RateDecision, RateLimitBackend
from ._ratelimit_errors import RateLimitQueueFullError, RateLimitTooLargeError, RateLimitWaitError
from ._ratelimit_keys import KeySpec, check_key_spec, estimate_call_tokens, key_function

__all__ = ["RateLimitMiddleware"]

logger = logging.getLogger(__name__)


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1 or None, got {value!r}")
    return value


def _seconds(name: str, value: object, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigurationError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(slots=True)
class _Ticket:
    key: str
    holder: str | None = None
    entry: str | None = None
    charged: int = 0
    renewer: asyncio.Task[None] | None = None


class RateLimitMiddleware(ChatMiddleware):
    """Limits the calls passing through it, per key. See the module docstring for the rules.

    Arguments:
        requests: requests per `window` (None: unlimited).
        tokens: tokens per `window`, prompt and completion (None: unlimited).
        window: the window's length in seconds (60: per minute).
        concurrency: calls in flight at once (None: unlimited).
        lease: seconds a concurrency slot stays held without a renewal (30).
        max_queue: calls that may wait per key at once (100; 0: none wait, a call without room is refused).
        max_wait: seconds a call may wait (None: as long as it takes).
        key: what a call counts under: `global`, `client`, `model` (default), `caller` or a function of the call.
        backend: where the state lives (default: an `InMemoryRateLimitBackend` of this middleware; a
            `RedisRateLimitBackend` shares it between processes). The middleware closes a backend it made and,
            with `close_backend=True`, one it was given.
        name: a prefix of the keys, so two limits on one backend stay apart (default `rl`).
    """

    component_provider_override = "ext.resilience.RateLimitMiddleware"

    def __init__(
        self,
        *,
        requests: int | None = None,
        tokens: int | None = None,
        window: float = 60.0,
        concurrency: int | None = None,
        lease: float = 30.0,
        max_queue: int = 100,
        max_wait: float | None = None,
        key: KeySpec = "model",
        backend: RateLimitBackend | None = None,
        close_backend: bool = False,
        name: str = "rl",
    ) -> None:
        self._requests = _positive_int("requests", requests)
        self._tokens = _positive_int("tokens", tokens)
        self._concurrency = _positive_int("concurrency", concurrency)
        if self._requests is None and self._tokens is None and self._concurrency is None:
            raise ConfigurationError("a rate limit needs at least one of requests, tokens or concurrency")
        self._window = _seconds("window", window) or 60.0
        self._lease = _seconds("lease", lease) or 30.0
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise ConfigurationError(f"max_queue must be an int >= 0, got {max_queue!r}")
        self._max_queue = max_queue
        self._max_wait = _seconds("max_wait", max_wait, optional=True)
        self._key_spec = check_key_spec(key)
        self._key = key_function(self._key_spec)
        if backend is not None and not isinstance(backend, RateLimitBackend):
            raise ConfigurationError(f"backend must be a RateLimitBackend, got {type(backend).__name__}")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"name must be a non-empty str, got {name!r}")
        self._backend: RateLimitBackend = backend if backend is not None else InMemoryRateLimitBackend()
        self._owns_backend = backend is None or close_backend
        self._name = name
        self._waiting: dict[str, int] = {}
        # holders of slots: unique across processes sharing a backend, cheap to make
        self._holder_prefix = f"{os.getpid()}-{secrets.token_hex(4)}-"
        self._holders = itertools.count(1)

    @property
    def backend(self) -> RateLimitBackend:
        return self._backend

    def queued(self, key: str) -> int:
        """Calls of this process waiting under `key` (the limit's `name`, a colon, the call's key: `rl:global`)."""
        return self._waiting.get(key, 0)

    def __repr__(self) -> str:
        return (
            f"RateLimitMiddleware(requests={self._requests}, tokens={self._tokens}, window={self._window}, "
            f"concurrency={self._concurrency}, key={self._key_spec!r}, backend={self._backend!r})"
        )

    def _to_config(self) -> Any:
        raise ComponentError("RateLimitMiddleware is built in code or from a pipeline file's rate_limit: entry")

    # --- the hooks ---------------------------------------------------------------------------------

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        ticket = await self._enter(call)
        try:
            result = await next(call)
        except BaseException:
            await self._leave(ticket, None)
            raise
        await self._leave(ticket, None if result.cached else result.usage)
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        ticket = await self._enter(call)
        usage: RequestUsage | None = None
        stream = next(call)
        try:
            async for item in stream:
                if isinstance(item, CreateResult) and not item.cached:
                    usage = item.usage
                yield item
        finally:
            try:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                await self._leave(ticket, usage)

    async def close(self) -> None:
        if self._owns_backend:
            await self._backend.close()

    # --- entering and leaving ----------------------------------------------------------------------

    async def _enter(self, call: ChatCall) -> _Ticket:
        ticket = _Ticket(f"{self._name}:{self._key(call)}")
        if self._tokens is not None:
            ticket.charged = estimate_call_tokens(call)
            if ticket.charged > self._tokens:
                raise RateLimitTooLargeError(key=ticket.key, tokens=ticket.charged, limit=self._tokens)
        backend = self._backend
        holder = f"{self._holder_prefix}{next(self._holders)}" if self._concurrency is not None else None
        # A backend of this process alone needs no lease: its slots go when the process does.
        lease = self._lease if backend.shared else math.inf
        decision = await backend.admit(
            ticket.key,
            window=self._window,
            requests=self._requests,
            tokens=self._tokens,
            cost=ticket.charged,
            holder=holder,
            concurrency=self._concurrency,
            lease=lease,
        )
        if not decision.admitted:
            decision = await self._queued(call, ticket, holder, lease, decision)
        ticket.entry = decision.entry
        ticket.holder = holder
        if holder is not None and backend.shared:
            ticket.renewer = asyncio.create_task(self._renew(ticket.key, holder))
        return ticket

    async def _queued(
        self, call: ChatCall, ticket: _Ticket, holder: str | None, lease: float, decision: RateDecision
    ) -> RateDecision:
        """Wait in the queue until the backend admits the call (or raise: queue full, `max_wait`, cancelled)."""
        key = ticket.key
        waiting = self._waiting.get(key, 0)
        if waiting >= self._max_queue:
            raise RateLimitQueueFullError(key=key, max_queue=self._max_queue)
        self._waiting[key] = waiting + 1
        try:
            with CancelScope(call.cancellation_token):
                deadline = None if self._max_wait is None else time.monotonic() + self._max_wait
                while not decision.admitted:
                    wait = decision.retry_after
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise RateLimitWaitError(key=key, max_wait=self._max_wait or 0.0)
                        wait = min(wait, left)
                    await self._backend.wait(key, wait, slot=decision.slot)
                    decision = await self._backend.admit(
                        key,
                        window=self._window,
                        requests=self._requests,
                        tokens=self._tokens,
                        cost=ticket.charged,
                        holder=holder,
                        concurrency=self._concurrency,
                        lease=lease,
                    )
        finally:
            self._waiting[key] -= 1
        return decision

    async def _renew(self, key: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                if not await self._backend.renew(key, holder, lease=self._lease):
                    logger.warning("rate limit %r: a concurrency slot's lease ran out before the call ended", key)
                    return
            except Exception as exc:  # the backend is away: the lease may run out, the call goes on
                logger.warning("rate limit %r: renewing a concurrency slot failed: %s", key, type(exc).__name__)

    async def _leave(self, ticket: _Ticket, usage: RequestUsage | None) -> None:
        if ticket.renewer is not None:
            ticket.renewer.cancel()
        used: int | None = None
        if ticket.entry is not None and self._tokens is not None:
            used = 0 if usage is None else usage.prompt_tokens + usage.completion_tokens
            if used == ticket.charged:
                used = None
        if used is not None or ticket.holder is not None:
            await self._backend.finish(
                ticket.key, window=self._window, entry=ticket.entry, tokens=used, holder=ticket.holder
            )
