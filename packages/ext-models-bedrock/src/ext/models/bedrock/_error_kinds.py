"""What kind of failure a botocore error from Bedrock is (registered under ext-core's `ext.errors` entry points).

Bedrock names its errors by code, not status: a prompt longer than the model's window is a 400 `ValidationException`
("Input is too long for requested model.", or "prompt is too long" from the Anthropic models), which the status
alone reads as a bad request; throttling, capacity and model timeouts have codes of their own, inside an event
stream too (named by their member: `throttlingException`, ...). Only errors botocore raised are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import ErrorClass, ErrorKind, kind_of_status, parse_retry_after

_CODES = {
    "ThrottlingException": ErrorKind.RATE_LIMITED,
    "TooManyRequestsException": ErrorKind.RATE_LIMITED,
    "throttlingException": ErrorKind.RATE_LIMITED,
    "ServiceUnavailableException": ErrorKind.OVERLOADED,
    "serviceUnavailableException": ErrorKind.OVERLOADED,
    "ModelNotReadyException": ErrorKind.OVERLOADED,
    "InternalServerException": ErrorKind.SERVER_ERROR,
    "internalServerException": ErrorKind.SERVER_ERROR,
    "modelStreamErrorException": ErrorKind.SERVER_ERROR,
    "ModelTimeoutException": ErrorKind.TIMEOUT,
    "modelTimeoutException": ErrorKind.TIMEOUT,
    "RequestTimeout": ErrorKind.TIMEOUT,
    "RequestTimeoutException": ErrorKind.TIMEOUT,
    "AccessDeniedException": ErrorKind.AUTH,
    "UnrecognizedClientException": ErrorKind.AUTH,
    "ExpiredTokenException": ErrorKind.AUTH,
    "ResourceNotFoundException": ErrorKind.NOT_FOUND,
}
_TOO_LONG = ("too long", "too many input tokens", "maximum context length")


def classify_bedrock_error_kind(error: BaseException) -> ErrorClass | None:
    """A `ValidationException` about the input's length as `CONTEXT_WINDOW`; other codes by `_CODES`, else by the
    status; botocore's timeouts as `TIMEOUT` and its connection errors as `CONNECTION`. None for other errors."""
    if not type(error).__module__.startswith(("botocore", "aiobotocore")):
        return None
    import botocore.exceptions as bx  # already imported: botocore raised this error

    if isinstance(error, bx.ClientError):
        response: Mapping[str, Any] = error.response or {}
        details: Mapping[str, Any] = response.get("Error") or {}
        meta: Mapping[str, Any] = response.get("ResponseMetadata") or {}
        code, message = str(details.get("Code") or ""), str(details.get("Message") or "").lower()
        status = meta.get("HTTPStatusCode") if isinstance(meta.get("HTTPStatusCode"), int) else None
        if code == "ValidationException" and any(words in message for words in _TOO_LONG):
            return ErrorClass(ErrorKind.CONTEXT_WINDOW, status)
        kind = _CODES.get(code) or (kind_of_status(status) if status is not None else None)
        if kind is None:
            return None
        wait = parse_retry_after(meta.get("HTTPHeaders")) if kind is ErrorKind.RATE_LIMITED else None
        return ErrorClass(kind, status, wait)
    if isinstance(error, (bx.ReadTimeoutError, bx.ConnectTimeoutError)):
        return ErrorClass(ErrorKind.TIMEOUT)
    if isinstance(error, (bx.HTTPClientError, bx.ConnectionError)):
        return ErrorClass(ErrorKind.CONNECTION)
    return None
