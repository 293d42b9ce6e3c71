"""What kind of failure a provider error is: the typed errors fallback and cooldowns act on.

Providers raise their SDK's own errors (the pipeline passes them on unchanged, so `RetryMiddleware` and callers
that catch SDK errors keep working). Code that must act on *what kind* of failure it was (fallback to another
client, cooling a client down) asks `classify_error(error)`, which answers with an `ErrorKind`, the HTTP status and
the server's `Retry-After`; `provider_error(error)` gives the matching typed ext exception, the SDK error kept as
its `__cause__`.

Classification is layered like retries (`ext.core._retry`): an ext `ProviderError` carries its kind; then
classifiers that provider packages register under the `ext.errors` entry-point group (loaded once, on the first
error), for what only the provider can tell (a context-window error is a plain 400 on the wire); then a generic
rule on the HTTP status (429 rate limited, 529 overloaded, 5xx server error, 408 timeout, 401/403 auth, 404 not
found, other 4xx bad request), builtin `TimeoutError`/`ConnectionError`, and httpx/httpx2 transport errors (a
stream cut mid-body raises one, unwrapped by the SDKs).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ._errors import ExtError
from ._retry import parse_retry_after, status_of

logger = logging.getLogger(__name__)


class ErrorKind(str, enum.Enum):
    """The kinds of provider failure ext tells apart."""

    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    CONTEXT_WINDOW = "context_window"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    BAD_REQUEST = "bad_request"


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """What `classify_error` found: the kind, the HTTP status (if any) and the server's wait in seconds."""

    kind: ErrorKind
    status: int | None = None
    retry_after: float | None = None


ErrorClassifier = Callable[[BaseException], "ErrorClass | None"]
"""Returns the class of errors it knows, None for the rest (registered under the `ext.errors` entry points)."""


class ProviderError(ExtError):
    """A provider call failed; `kind` says how. The SDK's error, when there was one, is the `__cause__`."""

    kind: ClassVar[ErrorKind]

    def __init__(
        self, message: str, *, provider: str | None = None, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retry_after = retry_after


class RateLimitedError(ProviderError):
    """429: too many requests or tokens; `retry_after` is the server's wait, when it sent one."""

    kind = ErrorKind.RATE_LIMITED


class OverloadedError(ProviderError):
    """The service is overloaded (Anthropic's 529 `overloaded_error`)."""

    kind = ErrorKind.OVERLOADED


class ServerError(ProviderError):
    """A 5xx from the provider."""

    kind = ErrorKind.SERVER_ERROR


class ProviderTimeoutError(ProviderError, TimeoutError):
    """The provider did not answer (or stalled) within the timeout."""

    kind = ErrorKind.TIMEOUT


class ConnectionLostError(ProviderError, ConnectionError):
    """The connection could not be made or broke (a stream cut mid-body)."""

    kind = ErrorKind.CONNECTION


class ContextWindowExceededError(ProviderError):
    """The prompt does not fit the model's context window."""

    kind = ErrorKind.CONTEXT_WINDOW


class AuthenticationError(ProviderError):
    """401/403: the key is missing, wrong or not allowed."""

    kind = ErrorKind.AUTH


class NotFoundError(ProviderError):
    """404: the model or endpoint does not exist."""

    kind = ErrorKind.NOT_FOUND


class BadRequestError(ProviderError):
    """Another 4xx: the provider refused the request."""

    kind = ErrorKind.BAD_REQUEST


ERROR_TYPES: dict[ErrorKind, type[ProviderError]] = {
    cls.kind: cls
    for cls in (
        RateLimitedError,
        OverloadedError,
        ServerError,
        ProviderTimeoutError,
        ConnectionLostError,
        ContextWindowExceededError,
        AuthenticationError,
        NotFoundError,
        BadRequestError,
    )
}
"""The ext exception type of each kind."""

_registered: tuple[ErrorClassifier, ...] | None = None


def _registered_classifiers() -> tuple[ErrorClassifier, ...]:
    global _registered
    if _registered is None:
        from importlib.metadata import entry_points  # first error only: keeps import fast

        found: list[ErrorClassifier] = []
        for ep in entry_points(group="ext.errors"):
            try:
                found.append(ep.load())
            except Exception:  # a broken plugin must not hide the other providers' errors
                logger.warning("could not load error classifier %s", ep.value, exc_info=True)
        _registered = tuple(found)
    return _registered


def kind_of_status(status: int) -> ErrorKind | None:
    """The kind an HTTP error status means on its own (None below 400)."""
    if status == 429:
        return ErrorKind.RATE_LIMITED
    if status == 529:
        return ErrorKind.OVERLOADED
    if status == 408:
        return ErrorKind.TIMEOUT
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status >= 500:
        return ErrorKind.SERVER_ERROR
    if status >= 400:
        return ErrorKind.BAD_REQUEST
    return None


def _transport_kind(error: BaseException) -> ErrorKind | None:
    # httpx and httpx2 (the SDKs' transports) are looked up, not imported: an error of theirs means they are loaded.
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is None:
            continue
        if isinstance(error, module.TimeoutException):
            return ErrorKind.TIMEOUT
        if isinstance(error, module.TransportError):
            return ErrorKind.CONNECTION
    return None


def generic_error_class(error: BaseException) -> ErrorClass | None:
    """The class of an error from what any error carries: an HTTP status, or a builtin/transport failure."""
    status = status_of(error)
    if status is not None:
        kind = kind_of_status(status)
        if kind is None:
            return None
        headers = getattr(getattr(error, "response", None), "headers", None)
        return ErrorClass(kind, status, parse_retry_after(headers))
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return ErrorClass(ErrorKind.TIMEOUT)
    if isinstance(error, ConnectionError):
        return ErrorClass(ErrorKind.CONNECTION)
    kind = _transport_kind(error)
    return ErrorClass(kind) if kind is not None else None


def classify_error(error: BaseException) -> ErrorClass | None:
    """The kind of provider failure `error` is, or None for an error that is not one (a bug, a cancellation)."""
    if isinstance(error, ProviderError):
        return ErrorClass(error.kind, error.status, error.retry_after)
    for classifier in _registered_classifiers():
        try:
            found = classifier(error)
        except Exception:  # a classifier's bug must not replace the provider's error
            logger.warning("error classifier %r failed", classifier, exc_info=True)
            continue
        if found is not None:
            return found
    return generic_error_class(error)


def provider_error(error: BaseException, *, provider: str | None = None) -> ProviderError | None:
    """The typed ext exception for `error` (itself if it is one; else a new one whose `__cause__` is `error`), or
    None when `error` is not a provider failure."""
    if isinstance(error, ProviderError):
        return error
    found = classify_error(error)
    if found is None:
        return None
    typed = ERROR_TYPES[found.kind](
        f"{type(error).__name__}: {error}", provider=provider, status=found.status, retry_after=found.retry_after
    )
    typed.__cause__ = error
    return typed
