"""The `rate_limit:` and `budget:` entries of pipeline files: built from a file over the real OpenAI client, and
checked without building, with errors naming the file and the field before any connection is made."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from ext_resilience_limits_support import KEY

from ext.core import ConfigurationError, UserMessage
from ext.pipeline import check_pipeline, load_pipeline
from ext.resilience import BudgetExceededError, BudgetMiddleware, RateLimitMiddleware, RedisRateLimitBackend
from ext.testing.redis import RedisServer
from ext.testing.servers import OpenAIServer, Reply


def write(tmp_path: Path, server_url: str, middleware: list[Any]) -> Path:
    document = {
        "client": {
            "provider": "openai",
            "options": {"endpoint": server_url + "/v1", "default_model": "gpt-4o-mini", "api_key_env": "LIMITS_KEY"},
        },
        "middleware": middleware,
    }
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


async def test_a_file_with_both_entries_builds_and_limits(
    tmp_path: Path, limits_server: OpenAIServer, limits_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIMITS_KEY", KEY)
    monkeypatch.setenv("EXT_REDIS_URL", limits_redis.url)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"gpt-4o-mini": {"input_mtok": 1000, "output_mtok": 1000}}}))
    limits_server.default = Reply(text="ok", prompt_tokens=10, completion_tokens=5)
    path = write(
        tmp_path,
        limits_server.base_url,
        [
            {"rate_limit": {"requests": 100, "concurrency": 2, "backend": "redis", "prefix": "file-test:"}},
            {"budget": {"limits": [{"cost": "0.032"}], "prices_file": str(prices)}},
        ],
    )
    check = check_pipeline(path)
    assert check.middleware == ["rate_limit", "budget"]
    async with load_pipeline(path) as client:
        limit, budget = client.middleware
        assert isinstance(limit, RateLimitMiddleware) and isinstance(limit.backend, RedisRateLimitBackend)
        assert isinstance(budget, BudgetMiddleware)
        await client.create([UserMessage(content="Hi")])
        await client.create([UserMessage(content="Hi")])  # 15 tokens at $1000 per million: 0.015 a call
        with pytest.raises(BudgetExceededError):
            await client.create([UserMessage(content="Hi")])
        assert await budget.budget.spent("global") == Decimal("0.03")
    assert len(limits_server.requests) == 2


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"rate_limit": {"requests": 0}}, r"middleware\[0\]\.rate_limit\.requests must be an int >= 1"),
        ({"rate_limit": {"requests": 5, "burst": 2}}, r"middleware\[0\]\.rate_limit: unknown settings \['burst'\]"),
        ({"rate_limit": {"requests": 5, "backend": "etcd"}}, r"rate_limit\.backend must be 'memory' or 'redis'"),
        (
            {"rate_limit": {"requests": 5, "backend": "redis", "redis_url_env": "NO_SUCH_LIMITS_URL"}},
            r"rate_limit\.redis_url_env: the environment variable NO_SUCH_LIMITS_URL is not set",
        ),
        ({"budget": {}}, r"middleware\[0\]\.budget\.limits is required"),
        ({"budget": {"limits": [{"cost": 0}]}}, r"budget\.limits\[0\]: cost: Input should be greater than 0"),
        ({"budget": {"limits": [{"cost": 1}], "key": "tenant"}}, r"budget\.key must be one of"),
        ({"budget": {"limits": [{"cost": 1}], "prices_file": "missing.yaml"}}, r"budget\.prices_file: cannot read"),
    ],
)
def test_bad_entries_are_named_before_any_connection(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    # the endpoint is a port nothing listens on: a connection attempt would fail differently
    path = write(tmp_path, "http://127.0.0.1:9", [entry])
    with pytest.raises(ConfigurationError, match=message) as caught:
        check_pipeline(path, environ={"LIMITS_KEY": KEY})
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigurationError, match=message):
        load_pipeline(path, environ={"LIMITS_KEY": KEY})


def test_a_redis_url_with_a_password_is_refused_without_repeating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXT_REDIS_URL", "redis://:hunter2@127.0.0.1:6379/0")
    path = write(tmp_path, "http://127.0.0.1:9", [{"rate_limit": {"requests": 5, "backend": "redis"}}])
    with pytest.raises(ConfigurationError, match="EXT_REDIS_URL: url must not carry a password") as caught:
        check_pipeline(path, environ={"LIMITS_KEY": KEY})
    assert "hunter2" not in str(caught.value)
