"""Retries for rate limits and transient errors of any installed provider.

Classification is layered: classifiers a caller passes, then classifiers that provider packages
register under the `ext.retry` entry-point group (loaded lazily, on the first error), then a
generic rule for anything that carries an HTTP status (`status_code` or `response.status_code`),
plus builtin `TimeoutError` / `ConnectionError`. The last error is re-raised unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class RetryDecision:
    """Whether an error is worth retrying, and how long the server asked us to wait (seconds)."""

    retryable: bool
    retry_after: float | None = None


Classifier = Callable[[BaseException], "RetryDecision | None"]
"""Returns a decision for errors it knows, None for the rest."""

_entry_point_classifiers: tuple[Classifier, ...] | None = None


def _registered_classifiers() -> tuple[Classifier, ...]:
    # Loaded once per process: each provider's classifier module imports only its SDK.
    global _entry_point_classifiers
    if _entry_point_classifiers is None:
        from importlib.metadata import entry_points  # first error only: keeps import fast

        found: list[Classifier] = []
        for ep in entry_points(group="ext.retry"):
            try:
                found.append(ep.load())
            except Exception:  # a broken plugin must not break retries of the others
                logger.warning("could not load retry classifier %s", ep.value, exc_info=True)
        _entry_point_classifiers = tuple(found)
    return _entry_point_classifiers


def parse_retry_after(headers: Mapping[str, str] | Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def should_retry_header(headers: Mapping[str, str] | Any) -> RetryDecision | None:
    """The decision an `x-should-retry` response header states (`true`: retry, honouring `Retry-After`;
    `false`: don't), or None when the header is absent or says neither. The OpenAI and Anthropic APIs send
    it, and their SDKs let it override the status code; provider classifiers call this first."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    should = get("x-should-retry")
    if should == "true":
        return RetryDecision(True, parse_retry_after(headers))
    if should == "false":
        return RetryDecision(False)
    return None


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries, if any."""
    status = getattr(error, "status_code", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    if status is None:
        status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def generic_classifier(error: BaseException) -> RetryDecision | None:
    """Retry any error with a retryable HTTP status, and builtin timeouts and connection errors."""
    status = status_of(error)
    if status is not None:
        headers = getattr(getattr(error, "response", None), "headers", None)
        return RetryDecision(status in RETRYABLE_STATUS, parse_retry_after(headers))
    if isinstance(error, (TimeoutError, ConnectionError)):
        return RetryDecision(True)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: the wait before retry n (0-based) is `multiplier * 2**n` seconds, capped at
    `max_delay`, plus up to `jitter` of that as random extra. A server's Retry-After wins when given
    (capped at `max_retry_after`). `max_retries=3` means up to four attempts.
    """

    max_retries: int = 3
    multiplier: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.25
    honour_retry_after: bool = True
    max_retry_after: float = 120.0
    classifiers: tuple[Classifier, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.multiplier < 0 or self.max_delay < 0 or self.jitter < 0:
            raise ValueError("multiplier, max_delay and jitter must be >= 0")

    def classify(self, error: BaseException) -> RetryDecision:
        """What this policy will do with `error`."""
        for classifier in (*self.classifiers, *_registered_classifiers(), generic_classifier):
            decision = classifier(error)
            if decision is not None:
                return decision
        return RetryDecision(False)

    def delay(self, attempt: int, decision: RetryDecision) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        if self.honour_retry_after and decision.retry_after is not None:
            return min(decision.retry_after, self.max_retry_after)
        base = min(self.max_delay, self.multiplier * (2.0**attempt))
        return base + random.uniform(0.0, base * self.jitter)

    async def run(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
        max_wait: float | None = None,
    ) -> T:
        """Run `operation`, retrying retryable errors; the last error is re-raised unchanged. An error whose
        server asks to wait longer than `max_wait` seconds (`Retry-After`) is re-raised at once: a caller with
        somewhere else to go (a fallback) should not sleep."""
        try:
            return await operation()
        except Exception as exc:
            error = exc
        return await self.retry_after(error, operation, on_retry=on_retry, max_wait=max_wait)

    async def retry_after(
        self,
        error: Exception,
        operation: Callable[[], Awaitable[T]],
        *,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
        max_wait: float | None = None,
    ) -> T:
        """Go on after a first attempt of `operation` failed with `error`: what `run` does from there. A caller
        on a hot path awaits its first attempt itself and calls this only when it fails."""
        attempt = 0
        while True:
            if attempt >= self.max_retries:
                raise error
            decision = self.classify(error)
            if not decision.retryable:
                raise error
            if max_wait is not None and decision.retry_after is not None and decision.retry_after > max_wait:
                raise error
            wait = self.delay(attempt, decision)
            logger.info(
                "retrying after %s (attempt %d of %d, waiting %.2fs)",
                type(error).__name__,
                attempt + 1,
                self.max_retries,
                wait,
            )
            if on_retry is not None:
                on_retry(attempt, error, wait)
            attempt += 1
            await asyncio.sleep(wait)
            try:
                return await operation()
            except Exception as exc:
                error = exc

    def with_classifiers(self, classifiers: Iterable[Classifier]) -> RetryPolicy:
        """A copy that consults `classifiers` first."""
        return RetryPolicy(
            max_retries=self.max_retries,
            multiplier=self.multiplier,
            max_delay=self.max_delay,
            jitter=self.jitter,
            honour_retry_after=self.honour_retry_after,
            max_retry_after=self.max_retry_after,
            classifiers=(*classifiers, *self.classifiers),
        )
