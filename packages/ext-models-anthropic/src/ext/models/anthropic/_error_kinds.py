"""What kind of failure an anthropic SDK error is (registered under ext-core's `ext.errors` entry points).

The API answers a prompt longer than the model's window with a 400 `invalid_request_error` whose message starts
"prompt is too long: N tokens > M maximum"; the status alone says only "bad request". An `error` event inside a
stream that began with 200 carries the error type, not a status (`overloaded_error`, `rate_limit_error`, ...).
"""

from __future__ import annotations

import anthropic

from ext.core import ErrorClass, ErrorKind, generic_error_class

_STREAM_TYPES = {
    "overloaded_error": ErrorKind.OVERLOADED,
    "rate_limit_error": ErrorKind.RATE_LIMITED,
    "api_error": ErrorKind.SERVER_ERROR,
    "timeout_error": ErrorKind.TIMEOUT,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.AUTH,
    "not_found_error": ErrorKind.NOT_FOUND,
}


def classify_anthropic_error_kind(error: BaseException) -> ErrorClass | None:
    """A "prompt is too long" 400 as `CONTEXT_WINDOW`; a stream's error event by its type; the SDK's timeout and
    connection errors as `TIMEOUT` and `CONNECTION`; None for the rest (core's generic rule reads the status)."""
    if isinstance(error, anthropic.APIStatusError):
        if error.status_code < 400:  # an error event in a stream that had started fine
            kind = _STREAM_TYPES.get(str(error.type))
            return ErrorClass(kind) if kind is not None else None
        message = str(error.api_message or error.message).lower()
        if error.status_code in (400, 413) and "prompt is too long" in message:
            return ErrorClass(ErrorKind.CONTEXT_WINDOW, error.status_code)
        return generic_error_class(error)
    if isinstance(error, anthropic.APITimeoutError):
        return ErrorClass(ErrorKind.TIMEOUT)
    if isinstance(error, anthropic.APIConnectionError):
        return ErrorClass(ErrorKind.CONNECTION)
    return None
