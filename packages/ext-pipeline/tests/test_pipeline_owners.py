"""One owner per concern in a built pipeline: retries (the pipeline's `RetryMiddleware` or the client, never both
multiplied) and the cache TTL (one default for every built-in store, a bool refused everywhere)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ext.core import (
    BaseChatCompletionClient,
    ChatRequest,
    ComponentError,
    ConfigurationError,
    CreateResult,
    RequestUsage,
    RetryPolicy,
    StreamChunk,
    UserMessage,
    load_component,
)
from ext.pipeline import (
    DEFAULT_CACHE_TTL,
    CacheMiddleware,
    ChatClientBuilder,
    ChatPipeline,
    InMemoryCacheStore,
    RetryMiddleware,
)

HELLO = [UserMessage(content="hello")]
NO_WAIT = RetryPolicy(max_retries=2, multiplier=0.0, jitter=0.0)


class Flaky(BaseChatCompletionClient):
    """Fails with a transient error (a `ConnectionError`, which every policy retries) `failures` times, then
    answers; `attempts` counts what reached the provider, retries of either owner included."""

    provider_name = "flaky"

    def __init__(self, failures: int, **kwargs: Any) -> None:
        # The client's own retries wait nothing, so a multiplied count shows at once rather than after backoff.
        kwargs.setdefault("retry_policy", RetryPolicy(max_retries=3, multiplier=0.0, jitter=0.0))
        super().__init__(model="flaky-model", **kwargs)
        self.failures = failures
        self.attempts = 0

    def _attempt(self) -> CreateResult:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError(f"transient failure {self.attempts}")
        return CreateResult(
            finish_reason="stop", content="ok", usage=RequestUsage(prompt_tokens=1, completion_tokens=1)
        )

    async def _create(self, request: ChatRequest) -> CreateResult:
        return self._attempt()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        yield self._attempt()


# --- retries ---------------------------------------------------------------------------------------------------


async def test_with_use_retry_a_call_makes_at_most_max_retries_plus_one_attempts() -> None:
    client = Flaky(failures=100)
    assert client.retry_policy.max_retries == 3
    pipeline = ChatClientBuilder(client).use_retry(NO_WAIT).build()
    assert client.retry_policy.max_retries == 0  # the pipeline owns the retries now
    with pytest.raises(ConnectionError, match="transient failure 3"):
        await pipeline.create(HELLO)
    assert client.attempts == 3  # 1 + 2 retries; both retrying would make (1 + 2) * (1 + 3) = 12


async def test_streams_have_one_retry_owner_too() -> None:
    client = Flaky(failures=100)
    pipeline = ChatClientBuilder(client).use_retry(NO_WAIT).build()
    with pytest.raises(ConnectionError):
        async for _ in pipeline.create_stream(HELLO):
            pass
    assert client.attempts == 3


async def test_the_pipelines_retries_succeed_within_their_count() -> None:
    client = Flaky(failures=2)
    pipeline = ChatClientBuilder(client).use_retry(NO_WAIT).build()
    assert (await pipeline.create(HELLO)).content == "ok"
    assert client.attempts == 3


async def test_without_use_retry_the_client_retries_as_configured() -> None:
    client = Flaky(failures=100)
    pipeline = ChatClientBuilder(client).use_logging().build()
    with pytest.raises(ConnectionError):
        await pipeline.create(HELLO)
    assert client.attempts == 4  # the client's own 1 + 3
    assert client.retry_policy.max_retries == 3


async def test_a_pipeline_built_without_the_builder_has_one_owner_as_well() -> None:
    # A pipeline loaded from a config is made by ChatPipeline(...) directly, not by the builder.
    client = Flaky(failures=100)
    pipeline = ChatPipeline(client, [RetryMiddleware(NO_WAIT)])
    with pytest.raises(ConnectionError):
        await pipeline.create(HELLO)
    assert client.attempts == 3


async def test_disable_retries_keeps_the_rest_of_the_policy() -> None:
    policy = RetryPolicy(max_retries=5, multiplier=0.5, max_delay=9.0)
    client = Flaky(failures=0, retry_policy=policy)
    client.disable_retries()
    assert client.retry_policy == RetryPolicy(max_retries=0, multiplier=0.5, max_delay=9.0)


# --- the cache TTL ---------------------------------------------------------------------------------------------


def test_one_default_ttl_for_the_built_in_store_and_the_middleware() -> None:
    assert DEFAULT_CACHE_TTL == 3600.0
    assert InMemoryCacheStore().dump_component().config["ttl"] == DEFAULT_CACHE_TTL
    middleware = CacheMiddleware()
    assert middleware.dump_component().config["ttl"] is None  # None: the store's default applies
    assert isinstance(middleware.store, InMemoryCacheStore)
    assert middleware.store.dump_component().config["ttl"] == DEFAULT_CACHE_TTL


@pytest.mark.parametrize(
    "make",
    [
        lambda ttl: CacheMiddleware(ttl=ttl),
        lambda ttl: CacheMiddleware(InMemoryCacheStore(), ttl=ttl),
        lambda ttl: ChatClientBuilder(Flaky(failures=0)).use_cache(ttl=ttl),
        lambda ttl: InMemoryCacheStore(ttl=ttl),
    ],
    ids=["middleware", "middleware over a store", "use_cache", "in-memory store"],
)
@pytest.mark.parametrize("bad", [True, False, 0, -1, float("inf"), "60"])
def test_a_bad_ttl_is_refused_naming_it(make: Callable[[Any], object], bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"ttl must be > 0 seconds or None, got "):
        make(bad)


@pytest.mark.parametrize("component", [CacheMiddleware(ttl=5), InMemoryCacheStore()], ids=["middleware", "store"])
@pytest.mark.parametrize("bad", [True, False])
def test_a_config_with_a_bool_ttl_does_not_load(component: Any, bad: bool) -> None:
    # pydantic alone would read `ttl: true` as 1.0 second.
    dump = component.dump_component().model_dump()
    dump["config"]["ttl"] = bad
    with pytest.raises(ComponentError, match=r"ttl: .*must be a number of seconds > 0 or null"):
        load_component(dump)
