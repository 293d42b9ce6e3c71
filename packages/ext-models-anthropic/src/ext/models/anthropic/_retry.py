"""How ext-core's retry policy treats anthropic SDK errors (also registered under the `ext.retry` entry points)."""

from __future__ import annotations

import anthropic

from ext.core import RetryDecision, should_retry_header

# Error types the API sends in a 200 stream's `error` event: the HTTP status says nothing there.
_RETRYABLE_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})


def classify_anthropic_error(error: BaseException) -> RetryDecision | None:
    """Retry what the anthropic SDK itself would: an `x-should-retry` header decides when present;
    connection errors and timeouts are transient; an `error` event inside a stream is retried by its
    error type (overloaded, rate limit, server error). Status codes are left to core's generic rule
    (429, 529, 5xx, 408, 409 retried; `Retry-After`/`retry-after-ms` honoured)."""
    if isinstance(error, anthropic.APIStatusError):
        decision = should_retry_header(error.response.headers)
        if decision is not None:
            return decision
        if error.status_code < 400:  # an error event in a stream that had started fine
            return RetryDecision(error.type in _RETRYABLE_TYPES)
        return None
    if isinstance(error, anthropic.APIConnectionError):  # includes APITimeoutError
        return RetryDecision(True)
    return None
