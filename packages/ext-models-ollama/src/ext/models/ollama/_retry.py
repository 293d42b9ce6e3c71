"""How ext-core's retry policy treats Ollama errors (registered under the `ext.retry` entry points)."""

from __future__ import annotations

import sys

from ext.core import RETRYABLE_STATUS, RetryDecision, parse_retry_after


def classify_ollama_error(error: BaseException) -> RetryDecision | None:
    """`ollama.ResponseError` by its status: 429, 5xx (Ollama's 503 `server busy`), 408 and 409 are retried,
    honouring `Retry-After` when the client's error carries the reply's headers; anything else (a 404 for a
    model that is not pulled, a 400, an error line inside a stream) is not. Connection errors and timeouts are
    builtin types, which core's generic rule retries."""
    ollama = sys.modules.get("ollama")
    if ollama is None:  # no ollama error can exist before the SDK was imported
        return None
    if isinstance(error, ollama.ResponseError):
        status = error.status_code
        if status in RETRYABLE_STATUS:
            return RetryDecision(True, parse_retry_after(getattr(error, "headers", None)))
        return RetryDecision(False)
    return None
