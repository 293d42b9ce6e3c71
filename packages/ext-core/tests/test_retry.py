from __future__ import annotations

import email.utils
import time

import pytest

from ext.core import RetryDecision, RetryPolicy, generic_classifier, parse_retry_after, should_retry_header


class _Response:
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self.headers = headers or {}


class FakeSDKError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        self.response = _Response(status, headers)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    value = parse_retry_after({"retry-after": future})
    assert value is not None and 25 < value <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None
    assert parse_retry_after({}) is None


def test_should_retry_header_decides_when_present() -> None:
    assert should_retry_header({"x-should-retry": "true", "retry-after": "2"}) == RetryDecision(True, 2.0)
    assert should_retry_header({"x-should-retry": "false", "retry-after": "2"}) == RetryDecision(False)
    assert should_retry_header({"x-should-retry": "maybe"}) is None
    assert should_retry_header({}) is None
    assert should_retry_header(None) is None


def test_generic_classifier() -> None:
    assert generic_classifier(FakeSDKError(429, {"retry-after": "2"})) == RetryDecision(True, 2.0)
    assert generic_classifier(FakeSDKError(503)) == RetryDecision(True, None)
    assert generic_classifier(FakeSDKError(400)) == RetryDecision(False, None)
    assert generic_classifier(TimeoutError()) == RetryDecision(True)
    assert generic_classifier(ConnectionResetError()) == RetryDecision(True)
    assert generic_classifier(ValueError()) is None


def test_backoff_is_exponential_with_bounded_jitter() -> None:
    policy = RetryPolicy(jitter=0.25)
    for attempt in range(4):
        for _ in range(50):
            delay = policy.delay(attempt, RetryDecision(True))
            assert 2**attempt <= delay <= 2**attempt * 1.25
    capped = RetryPolicy(max_delay=5, jitter=0)
    assert capped.delay(10, RetryDecision(True)) == 5
    assert policy.delay(0, RetryDecision(True, 7.0)) == 7.0
    assert RetryPolicy(max_retry_after=3).delay(0, RetryDecision(True, 100.0)) == 3.0
    assert RetryPolicy(honour_retry_after=False, jitter=0).delay(1, RetryDecision(True, 100.0)) == 2.0


def test_defaults_and_validation() -> None:
    assert RetryPolicy().max_retries == 3
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


async def test_retries_then_succeeds_and_honours_retry_after() -> None:
    waits: list[float] = []
    calls = 0

    async def op() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise FakeSDKError(429, {"retry-after-ms": "1"})
        return "ok"

    policy = RetryPolicy(max_retries=3)
    assert await policy.run(op, on_retry=lambda a, e, w: waits.append(w)) == "ok"
    assert calls == 3
    assert waits == [0.001, 0.001]


async def test_gives_up_after_max_retries_with_last_error_unchanged() -> None:
    errors: list[FakeSDKError] = []

    async def op() -> None:
        errors.append(FakeSDKError(500))
        raise errors[-1]

    with pytest.raises(FakeSDKError) as info:
        await RetryPolicy(max_retries=2, multiplier=0.001, jitter=0).run(op)
    assert len(errors) == 3
    assert info.value is errors[-1]


async def test_non_retryable_raises_at_once() -> None:
    calls = 0

    async def op() -> None:
        nonlocal calls
        calls += 1
        raise FakeSDKError(401)

    with pytest.raises(FakeSDKError):
        await RetryPolicy(multiplier=0.001).run(op)
    assert calls == 1


async def test_custom_classifier_wins() -> None:
    class Flaky(Exception):
        pass

    calls = 0

    async def op() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Flaky()
        return calls

    policy = RetryPolicy(multiplier=0.001).with_classifiers(
        [lambda e: RetryDecision(True, 0.0) if isinstance(e, Flaky) else None]
    )
    assert await policy.run(op) == 2


def test_retryable_statuses_are_public() -> None:
    from ext.core import RETRYABLE_STATUS

    assert {429, 500, 503, 529} <= RETRYABLE_STATUS and 400 not in RETRYABLE_STATUS


async def test_a_wait_longer_than_max_wait_is_raised_at_once() -> None:
    errors: list[FakeSDKError] = []

    async def op() -> str:
        if not errors:
            errors.append(FakeSDKError(429, {"retry-after": "30"}))
            raise errors[-1]
        return "ok"

    with pytest.raises(FakeSDKError) as info:
        await RetryPolicy(max_retries=3).run(op, max_wait=5)
    assert info.value is errors[0] and len(errors) == 1
    errors.clear()
    short: list[float] = []
    assert (
        await RetryPolicy(max_retries=3, max_retry_after=0.001).run(op, on_retry=lambda a, e, w: short.append(w))
        == "ok"
    )
    assert short == [0.001]  # without max_wait the server's wait is capped, not refused
