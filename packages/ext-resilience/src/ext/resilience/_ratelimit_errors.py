"""The errors a rate limit raises on its own behalf (a provider's 429 is the provider's error, not one of these)."""

from __future__ import annotations

from ext.core import ExtError

__all__ = ["RateLimitQueueFullError", "RateLimitRefusedError", "RateLimitTooLargeError", "RateLimitWaitError"]


class RateLimitRefusedError(ExtError):
    """A call the rate limit refused before it reached the provider. `key` is the limit's key."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class RateLimitQueueFullError(RateLimitRefusedError):
    """Every place in the queue of calls waiting for the limit was taken (`max_queue`)."""

    def __init__(self, *, key: str, max_queue: int) -> None:
        super().__init__(
            f"rate limit {key!r}: the queue of waiting calls is full ({max_queue} waiting, max_queue={max_queue})",
            key=key,
        )
        self.max_queue = max_queue


class RateLimitWaitError(RateLimitRefusedError):
    """A call waited `max_wait` seconds for the limit without getting through."""

    def __init__(self, *, key: str, max_wait: float) -> None:
        super().__init__(f"rate limit {key!r}: no room within max_wait={max_wait} s", key=key)
        self.max_wait = max_wait


class RateLimitTooLargeError(RateLimitRefusedError):
    """One call needs more tokens than the limit allows in a whole window: it could never pass."""

    def __init__(self, *, key: str, tokens: int, limit: int) -> None:
        super().__init__(
            f"rate limit {key!r}: the call needs about {tokens} tokens, more than the limit of {limit} tokens per "
            "window",
            key=key,
        )
        self.tokens = tokens
        self.limit = limit
