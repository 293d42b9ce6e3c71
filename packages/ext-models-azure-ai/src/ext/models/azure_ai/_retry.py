"""How ext-core's retry policy treats azure-core errors (registered under the `ext.retry` entry points)."""

from __future__ import annotations

import sys

from ext.core import RETRYABLE_STATUS, RetryDecision, parse_retry_after

_RETRY_AFTER_HEADERS = ("retry-after-ms", "x-ms-retry-after-ms")


def _retry_after(headers: object) -> float | None:
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name in _RETRY_AFTER_HEADERS:  # Azure's millisecond forms first, as azure-core's own retry reads them
        value = get(name)
        if value:
            try:
                return max(0.0, float(value) / 1000.0)
            except ValueError:
                pass
    return parse_retry_after(headers)


def classify_azure_error(error: BaseException) -> RetryDecision | None:
    """`HttpResponseError` with a retryable status (429, 5xx, 408, ...), honouring `retry-after-ms`,
    `x-ms-retry-after-ms` and `Retry-After`; transport failures (`ServiceRequestError` raised by the transport,
    `ServiceResponseError`: a dropped connection or a read timeout; `IncompleteReadError`: a body cut short) are
    transient. A `ServiceRequestError` with
    no transport error inside (e.g. a bearer token refused for a non-https URL) is not retried."""
    exceptions = sys.modules.get("azure.core.exceptions")
    if exceptions is None:  # no azure error can exist before azure-core was imported
        return None
    if isinstance(error, exceptions.IncompleteReadError):  # the body broke off (an HttpResponseError of a 200)
        return RetryDecision(True)
    if isinstance(error, exceptions.HttpResponseError):
        status = error.status_code
        if status is None:
            return None
        response = error.response
        return RetryDecision(status in RETRYABLE_STATUS, _retry_after(getattr(response, "headers", None)))
    if isinstance(error, exceptions.ServiceResponseError):
        return RetryDecision(True)
    if isinstance(error, exceptions.ServiceRequestError):
        return RetryDecision(error.inner_exception is not None)
    return None
