"""The cache-store conformance suite fails exactly the cases a broken store breaks.

`InMemoryCacheStore` passes the whole suite in test_pipeline_wire.py and `RedisCacheStore` in ext-redis's
tests; here two deliberately broken stores run the same suite, and each must fail precisely where it is broken.
"""

from __future__ import annotations

import textwrap

import pytest

from ext.testing.can_fail import run_suite_inline

BROKEN = textwrap.dedent(
    """
    from ext.pipeline import InMemoryCacheStore
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.testing.conformance import CacheStoreConformance
    from ext.testing.servers import OpenAIServer


    class ForgetsEverything(InMemoryCacheStore):
        async def get(self, key):
            return None


    class NeverExpires(InMemoryCacheStore):
        async def set(self, key, value, ttl=None):
            await super().set(key, value, None)


    class _Base(CacheStoreConformance):
        store_class = InMemoryCacheStore
        expiry_deadline = 1.0

        async def make_store(self):
            return self.store_class()

        def make_server(self):
            return OpenAIServer(api_key="sk-x")

        def make_client(self, server):
            return OpenAIChatCompletionClient(
                "gpt-4o-mini", base_url=server.base_url + "/v1", api_key="sk-x", bundled_encodings=False, max_retries=0
            )


    class TestForgetsEverything(_Base):
        store_class = ForgetsEverything


    class TestNeverExpires(_Base):
        store_class = NeverExpires
    """
)


def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
    outcome = run_suite_inline(pytester, BROKEN, name="test_broken_stores")
    assert outcome.failed == [
        "TestForgetsEverything::test_identical_request_is_served_from_the_store",
        "TestForgetsEverything::test_set_then_get_round_trips_bytes",
        "TestForgetsEverything::test_stream_is_replayed_chunk_by_chunk",
        "TestForgetsEverything::test_ttl_expires_an_entry",
        "TestForgetsEverything::test_two_clients_share_one_cache",
        "TestNeverExpires::test_ttl_expires_an_entry",
    ]
    assert outcome.passed == 8
