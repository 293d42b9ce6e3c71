"""The error-kind taxonomy: the generic rule on what any error carries (SDK-specific rules are tested with each
provider, against its loopback server)."""

from __future__ import annotations

import asyncio

import pytest

from ext.core import (
    ContextWindowExceededError,
    ErrorKind,
    ProviderTimeoutError,
    RateLimitedError,
    classify_error,
    provider_error,
)


class _Response:
    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = headers


class StatusError(Exception):
    """An SDK-like error: a status on its response, as openai, anthropic and azure errors carry it."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers or {})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, ErrorKind.RATE_LIMITED),
        (529, ErrorKind.OVERLOADED),
        (500, ErrorKind.SERVER_ERROR),
        (503, ErrorKind.SERVER_ERROR),
        (408, ErrorKind.TIMEOUT),
        (401, ErrorKind.AUTH),
        (403, ErrorKind.AUTH),
        (404, ErrorKind.NOT_FOUND),
        (400, ErrorKind.BAD_REQUEST),
    ],
)
def test_status_gives_the_kind(status: int, kind: ErrorKind) -> None:
    found = classify_error(StatusError(status))
    assert found is not None
    assert (found.kind, found.status) == (kind, status)


def test_retry_after_is_read_from_the_response() -> None:
    found = classify_error(StatusError(429, {"retry-after": "30"}))
    assert found is not None and found.retry_after == 30.0


def test_builtin_errors() -> None:
    timeout = classify_error(asyncio.TimeoutError())
    connection = classify_error(ConnectionResetError())
    assert timeout is not None and timeout.kind is ErrorKind.TIMEOUT
    assert connection is not None and connection.kind is ErrorKind.CONNECTION


def test_an_error_that_is_no_provider_failure_has_no_kind() -> None:
    assert classify_error(KeyError("x")) is None
    assert provider_error(KeyError("x")) is None


def test_provider_error_keeps_the_cause() -> None:
    cause = StatusError(429, {"retry-after": "2"})
    typed = provider_error(cause, provider="openai")
    assert isinstance(typed, RateLimitedError)
    assert typed.__cause__ is cause and typed.retry_after == 2.0 and typed.provider == "openai"
    assert provider_error(typed) is typed


def test_a_typed_error_carries_its_own_kind() -> None:
    found = classify_error(ContextWindowExceededError("too long", status=400))
    assert found is not None and (found.kind, found.status) == (ErrorKind.CONTEXT_WINDOW, 400)
    assert isinstance(ProviderTimeoutError("slow"), TimeoutError)  # RetryPolicy's generic rule retries it
