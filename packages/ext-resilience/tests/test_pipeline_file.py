"""The `fallback:` and `cooldown:` middleware of pipeline files (published under `ext.pipeline.middleware`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ext_resilience_support import KEY

from ext.core import ConfigurationError, UserMessage
from ext.pipeline import ChatPipeline, check_pipeline, load_pipeline
from ext.resilience import CooldownMiddleware, FallbackMiddleware, RedisCooldowns
from ext.testing.redis import RedisServer
from ext.testing.servers import AnthropicServer, Fault, OpenAIServer, Reply

ENV = {"TEST_OPENAI_KEY": KEY, "TEST_ANTHROPIC_KEY": KEY}


def openai_section(server: OpenAIServer, model: str = "gpt-4o-mini") -> dict[str, Any]:
    return {
        "provider": "openai",
        "options": {"endpoint": server.base_url + "/v1", "default_model": model, "api_key_env": "TEST_OPENAI_KEY"},
        "args": {"bundled_encodings": False},
    }


def anthropic_section(server: AnthropicServer) -> dict[str, Any]:
    return {
        "provider": "anthropic",
        "options": {
            "endpoint": server.base_url,
            "default_model": "claude-sonnet-5-5",
            "api_key_env": "TEST_ANTHROPIC_KEY",
        },
        "args": {"max_tokens": 64},
    }


async def test_a_pipeline_file_with_fallback_and_cooldown(
    tmp_path: Path,
    openai_server: OpenAIServer,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    backup = tmp_path / "backup.json"
    backup.write_text(json.dumps({"client": anthropic_section(anthropic_server), "middleware": [{"retry": {}}]}))
    main = tmp_path / "main.json"
    main.write_text(
        json.dumps(
            {
                "client": openai_section(openai_server),
                "middleware": [
                    {
                        "fallback": {
                            "clients": [str(backup), openai_section(openai_server, "gpt-4.1")],
                            "when": ["length"],
                            "stream": "buffer",
                            "names": ["main", "backup", "second"],
                            "cooldown": {"min_calls": 3, "backend": {"redis": redis_server.url, "prefix": "f:t"}},
                        }
                    },
                    {"retry": {"max_retries": 1}},
                ],
            }
        )
    )
    checked = check_pipeline(main)
    assert checked.middleware == ["fallback", "retry"]
    openai_server.enqueue(Fault("server_error"), Fault("server_error"))
    anthropic_server.enqueue(Reply(text="from the backup file"))
    pipeline = load_pipeline(main)
    assert isinstance(pipeline, ChatPipeline)
    fallback = pipeline.middleware[0]
    assert isinstance(fallback, FallbackMiddleware) and fallback.stream_rule == "buffer"
    assert fallback.cooldown is not None and isinstance(fallback.cooldown.backend, RedisCooldowns)
    assert fallback.cooldown.policy.min_calls == 3
    async with pipeline:
        result = await pipeline.create([UserMessage(content="hi")])
    assert result.content == "from the backup file"
    assert len(openai_server.requests) == 2  # the main client, retried once by the retry placed after fallback


def test_a_cooldown_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    config = {
        "client": {
            "provider": "openai",
            "options": {"endpoint": "http://127.0.0.1:9/v1", "default_model": "m", "api_key_env": "TEST_OPENAI_KEY"},
        },
        "middleware": [{"cooldown": {"min_calls": 4, "failure_rate": 0.75, "name": "main"}}],
    }
    pipeline = load_pipeline(config)
    (middleware,) = pipeline.middleware
    assert isinstance(middleware, CooldownMiddleware)
    assert middleware.cooldowns.policy.failure_rate == 0.75


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"clients": []}, r"middleware\[0\]\.fallback\.clients must name at least one client"),
        ({"clients": [{"provider": "openai"}], "stream": "sideways"}, r"fallback\.stream must be one of"),
        ({"clients": "a.yaml"}, r"fallback\.clients must be a list"),
        ({"clients": [42]}, r"fallback\.clients\[0\] must be a pipeline file name"),
        ({"clients": ["/nonexistent/backup.yaml"]}, r"fallback\.clients\[0\]: cannot read config file"),
        ({"clients": [{"provider": "openai"}], "on": ["teapot"]}, r"fallback\.on: unknown error kind 'teapot'"),
        ({"clients": [{"provider": "openai"}], "when": ["short"]}, r"fallback\.when: unknown result rule"),
        ({"clients": [{"provider": "openai"}], "colour": 1}, r"fallback: unknown keys \['colour'\]"),
        (
            {"clients": [{"provider": "openai"}], "cooldown": {"min_calls": 1}},
            r"fallback\.cooldown\.min_calls: Input should be greater than or equal to 2",
        ),
        (
            {"clients": [{"provider": "openai"}], "cooldown": {"backend": "sqlite"}},
            r"fallback\.cooldown\.backend must be 'memory' or",
        ),
        (
            {"clients": [{"provider": "openai"}], "names": ["a"]},
            r"fallback\.names must list 2 names",
        ),
    ],
)
def test_check_names_the_file_and_the_field(tmp_path: Path, settings: dict[str, Any], message: str) -> None:
    path = tmp_path / "pipeline.json"
    config = {
        "client": {"provider": "openai", "options": {"default_model": "m"}},
        "middleware": [{"fallback": settings}],
    }
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigurationError, match=message) as caught:
        check_pipeline(path, environ={"OPENAI_API_KEY": KEY})
    assert str(caught.value).startswith(str(path))
