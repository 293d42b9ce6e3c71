"""How ext-core's retry policy treats botocore errors (registered under the `ext.retry` entry points).

botocore's `ClientError` carries its HTTP status in a dict (`response["ResponseMetadata"]`), which ext-core's
generic rule cannot see; this classifier reads it. The module imports nothing heavy: botocore is only
touched for errors that botocore raised (so it is already imported).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import RetryDecision, parse_retry_after

RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "RequestTimeout",
        "RequestTimeoutException",
        # Exceptions inside an event stream are named by their member in the stream's shape.
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
        "modelTimeoutException",
    }
)
"""Error codes worth retrying: throttling, capacity, transient server and model-timeout errors."""

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def classify_bedrock_error(error: BaseException) -> RetryDecision | None:
    """Retry throttling (`ThrottlingException`, 429), unavailable/internal/timeout errors and their event-stream
    forms, and botocore's connection and read-timeout errors; `retry-after` is honoured when sent. Other
    `ClientError`s (validation, access denied, not found, quota) are not retried. None for non-botocore errors."""
    module = type(error).__module__
    if not module.startswith(("botocore", "aiobotocore")):
        return None
    import botocore.exceptions as bx  # already imported: botocore raised this error

    if isinstance(error, bx.ClientError):
        response: Mapping[str, Any] = error.response or {}
        code = (response.get("Error") or {}).get("Code")
        meta = response.get("ResponseMetadata") or {}
        status = meta.get("HTTPStatusCode")
        retryable = code in RETRYABLE_CODES or status in RETRYABLE_STATUS
        return RetryDecision(retryable, parse_retry_after(meta.get("HTTPHeaders")) if retryable else None)
    if isinstance(error, (bx.HTTPClientError, bx.ConnectionError)):
        return RetryDecision(True)
    return None
