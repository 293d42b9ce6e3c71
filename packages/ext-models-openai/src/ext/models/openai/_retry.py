"""How ext-core's retry policy treats openai SDK errors (registered under the `ext.retry` entry points)."""

from __future__ import annotations

import sys

from ext.core import RetryDecision, should_retry_header


def classify_openai_error(error: BaseException) -> RetryDecision | None:
    """Retry what the openai SDK itself would: an `x-should-retry` header decides when present;
    connection errors and timeouts are transient. Status codes are left to core's generic rule
    (429, 5xx, 408, 409 retried; `Retry-After`/`retry-after-ms` honoured)."""
    openai = sys.modules.get("openai")
    if openai is None:  # no openai error can exist before the SDK was imported
        return None
    if isinstance(error, openai.APIStatusError):
        return should_retry_header(error.response.headers)
    if isinstance(error, openai.APIConnectionError):  # includes APITimeoutError
        return RetryDecision(True)
    return None
