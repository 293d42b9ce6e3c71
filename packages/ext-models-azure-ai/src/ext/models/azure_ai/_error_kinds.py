"""What kind of failure an azure-core error from Azure AI Inference is (registered under ext-core's `ext.errors`
entry points).

A prompt longer than the model's window is a 400 whose error code is `context_length_exceeded` ("This model's
maximum context length is N tokens..."), which the status alone reads as a bad request; a read that timed out or a
dropped connection is an azure-core `ServiceResponseError` / `ServiceRequestError` without a status.
"""

from __future__ import annotations

import sys

from ext.core import ErrorClass, ErrorKind, generic_error_class


def classify_azure_ai_error_kind(error: BaseException) -> ErrorClass | None:
    """`context_length_exceeded` as `CONTEXT_WINDOW`, other statuses by core's generic rule, transport failures as
    `TIMEOUT` or `CONNECTION`; None for errors azure-core did not raise."""
    exceptions = sys.modules.get("azure.core.exceptions")
    if exceptions is None:  # no azure error can exist before azure-core was imported
        return None
    if isinstance(error, exceptions.HttpResponseError):
        odata = getattr(error, "error", None)
        code = str(getattr(odata, "code", "") or "")
        message = str(getattr(odata, "message", "") or error.message or "").lower()
        if error.status_code in (400, 413) and (
            code == "context_length_exceeded" or "maximum context length" in message
        ):
            return ErrorClass(ErrorKind.CONTEXT_WINDOW, error.status_code)
        return generic_error_class(error)
    if isinstance(error, (exceptions.ServiceResponseTimeoutError, exceptions.ServiceRequestTimeoutError)):
        return ErrorClass(ErrorKind.TIMEOUT)
    if isinstance(error, (exceptions.ServiceResponseError, exceptions.ServiceRequestError)):
        return ErrorClass(ErrorKind.CONNECTION)
    return None
