"""The conformance suite every `EmbeddingClient` implementation passes.

Subclass it in a provider package's tests (the class name must start with `Test`)::

    class TestMyEmbeddings(EmbeddingClientConformance):
        rate_limit_error = mysdk.RateLimitError
        secret = "sk-conformance-secret"
        batch_limit = 2048

        def make_server(self) -> LoopbackServer | None:
            return OpenAIServer()

        def make_client(self, server: Any, **kwargs: Any) -> EmbeddingClient:
            return MyEmbeddingClient(model="m", base_url=server.base_url, api_key=self.secret, **kwargs)

`make_client` receives `max_retries` and `batch_size` keyword arguments and must pass them on. A loopback server
answers with `embedding_vector(text, size)` for each text (`server.embeddings` scripts faults and odd vectors), so
the cases assert exact values and what reached the wire. An in-process model has no server: `make_server` returns
None, the cases that need a scripted peer are skipped with that reason, and the others check the model's real
vectors for consistency (the same text alone and in a batch gives the same vector) instead of equality.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from ext.core import (
    CancellationToken,
    ClientClosedError,
    Component,
    ComponentError,
    ConfigurationError,
    EmbeddingClient,
    EmbeddingResponseError,
)
from ext.testing.conformance._component import load_dumped_client
from ext.testing.sample_inputs import TEXTS
from ext.testing.script import Fault
from ext.testing.servers import LoopbackServer, embedding_tokens, embedding_vector

__all__ = ["EmbeddingClientConformance"]


class EmbeddingClientConformance:
    """Provider-neutral cases for an `EmbeddingClient`. See the module docstring."""

    rate_limit_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]] = ()
    secret: ClassVar[str] = "sk-conformance-secret-0000"
    batch_limit: ClassVar[int]
    """The provider's most texts per request: the client's default `batch_size`."""
    close_tolerance: ClassVar[float] = 1e-6
    """How close an in-process model's vector for a text alone and in a batch must be."""

    # --- what a subclass provides ---------------------------------------------------------------

    def make_server(self) -> LoopbackServer | None:
        raise NotImplementedError

    def make_client(self, server: Any, **kwargs: Any) -> EmbeddingClient:
        """A client talking to `server` (None for an in-process model)."""
        raise NotImplementedError

    def expected_vector(self, text: str, client: EmbeddingClient) -> list[float]:
        """What the loopback server answers for `text` to this client."""
        assert client.vector_size is not None
        return embedding_vector(text, client.vector_size)

    # --- fixtures ---------------------------------------------------------------------------------

    @pytest_asyncio.fixture
    async def server(self) -> AsyncIterator[LoopbackServer | None]:
        srv = self.make_server()
        if srv is None:
            yield None
            return
        await srv.start()
        try:
            yield srv
        finally:
            await srv.stop()

    @pytest_asyncio.fixture
    async def client(self, server: LoopbackServer | None) -> AsyncIterator[EmbeddingClient]:
        c = self.make_client(server, max_retries=0)
        try:
            yield c
        finally:
            await c.close()

    @staticmethod
    def _scripted(server: LoopbackServer | None) -> LoopbackServer:
        if server is None:
            pytest.skip("an in-process model has no scripted peer")
        return server

    @staticmethod
    def _requests(server: LoopbackServer | None) -> int:
        return 0 if server is None else len(server.embeddings.requests)  # type: ignore[attr-defined]

    # --- order, batches, usage, size ----------------------------------------------------------------

    async def test_is_an_embedding_client(self, client: EmbeddingClient) -> None:
        assert isinstance(client, EmbeddingClient)

    async def test_default_batch_size(self, client: EmbeddingClient) -> None:
        assert client.batch_size == self.batch_limit  # type: ignore[attr-defined]

    async def test_order_is_kept_across_batches(self, server: LoopbackServer | None) -> None:
        client = self.make_client(server, max_retries=0, batch_size=3)
        try:
            result = await client.embed(TEXTS)
            assert len(result.vectors) == len(TEXTS)
            if server is not None:
                assert server.embeddings.inputs == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:]]  # type: ignore[attr-defined]
                assert result.vectors == [self.expected_vector(text, client) for text in TEXTS]
            else:
                alone = (await client.embed([TEXTS[4]])).vectors[0]
                assert max(abs(a - b) for a, b in zip(alone, result.vectors[4], strict=True)) < self.close_tolerance
                assert len({tuple(v) for v in result.vectors}) == len(TEXTS)
        finally:
            await client.close()

    async def test_usage_is_summed_over_batches_and_calls(self, server: LoopbackServer | None) -> None:
        client = self.make_client(server, max_retries=0, batch_size=2)
        try:
            first = await client.embed(TEXTS[:5])
            second = await client.embed(TEXTS[5:])
            if server is not None:
                assert first.usage.prompt_tokens == sum(embedding_tokens(t) for t in TEXTS[:5])
            else:
                assert first.usage.prompt_tokens >= 5
            total = client.total_usage()
            assert total.prompt_tokens == first.usage.prompt_tokens + second.usage.prompt_tokens
        finally:
            await client.close()

    async def test_vector_size(self, client: EmbeddingClient) -> None:
        result = await client.embed(TEXTS[:2])
        size = len(result.vectors[0])
        assert size > 0 and all(len(v) == size for v in result.vectors)
        assert client.vector_size == size
        assert all(math.isfinite(x) for v in result.vectors for x in v)

    async def test_empty_list_gives_an_empty_result_without_a_request(
        self, server: LoopbackServer | None, client: EmbeddingClient
    ) -> None:
        result = await client.embed([])
        assert result.vectors == [] and result.usage.prompt_tokens == 0
        assert self._requests(server) == 0

    @pytest.mark.parametrize(
        ("texts", "match"),
        [
            ("a bare string", r"texts must be a list of strings"),
            (["fine", ""], r"texts\[1\] is an empty string"),
            (["fine", 3], r"texts\[1\] must be a string"),
            (None, r"texts must be a list of strings"),
        ],
    )
    async def test_bad_input_fails_before_any_request(
        self, server: LoopbackServer | None, client: EmbeddingClient, texts: Any, match: str
    ) -> None:
        with pytest.raises(ConfigurationError, match=match):
            await client.embed(texts)
        assert self._requests(server) == 0

    # --- bad vectors from the provider ------------------------------------------------------------

    async def test_non_finite_vector_is_a_clear_error(self, server: LoopbackServer | None) -> None:
        srv = self._scripted(server)
        client = self.make_client(srv, max_retries=0, batch_size=2)
        try:
            size = client.vector_size or 3
            poisoned = [0.5] * size
            poisoned[1] = float("nan")
            srv.embeddings.enqueue(lambda texts: [[0.5] * size, [0.5] * size])  # type: ignore[attr-defined]
            srv.embeddings.enqueue(lambda texts: [poisoned])  # type: ignore[attr-defined]
            with pytest.raises(EmbeddingResponseError, match=r"texts\[2\] has a non-finite value at \[1\]"):
                await client.embed(TEXTS[:3])
            assert client.total_usage().prompt_tokens == 0  # nothing half-done is accounted
        finally:
            await client.close()

    async def test_wrong_vector_count_or_size_is_a_clear_error(self, server: LoopbackServer | None) -> None:
        srv = self._scripted(server)
        client = self.make_client(srv, max_retries=0)
        try:
            size = client.vector_size or 3
            srv.embeddings.enqueue(lambda texts: [[0.5] * size])  # type: ignore[attr-defined]
            with pytest.raises(EmbeddingResponseError, match="returned 1 vectors for 2 texts"):
                await client.embed(TEXTS[:2])
            srv.embeddings.enqueue(lambda texts: [[0.5] * size, [0.5] * (size + 1)])  # type: ignore[attr-defined]
            with pytest.raises(EmbeddingResponseError, match=rf"texts\[1\] has {size + 1} dimensions, expected {size}"):
                await client.embed(TEXTS[:2])
        finally:
            await client.close()

    # --- cancellation, retries, faults ----------------------------------------------------------------

    async def test_cancel_aborts_the_request(self, server: LoopbackServer | None) -> None:
        srv = self._scripted(server)
        client = self.make_client(srv, max_retries=0)
        try:
            srv.embeddings.enqueue(Fault("hang"))  # type: ignore[attr-defined]
            token = CancellationToken()
            task = asyncio.ensure_future(client.embed(TEXTS[:2], token))
            (request,) = await srv.wait_for_requests(1)
            token.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
            await asyncio.wait_for(request.disconnected.wait(), 10)
            assert not request.completed
        finally:
            await client.close()

    async def test_cancelled_token_sends_nothing(self, server: LoopbackServer | None, client: EmbeddingClient) -> None:
        token = CancellationToken()
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await client.embed(TEXTS[:2], token)
        assert self._requests(server) == 0

    async def test_rate_limit_is_retried(self, server: LoopbackServer | None) -> None:
        srv = self._scripted(server)
        client = self.make_client(srv, max_retries=2)
        try:
            srv.embeddings.enqueue(Fault("rate_limit", retry_after=0.01))  # type: ignore[attr-defined]
            result = await client.embed(TEXTS[:2])
            assert len(result.vectors) == 2
            assert len(srv.embeddings.requests) == 2  # type: ignore[attr-defined]
        finally:
            await client.close()

    async def test_rate_limit_without_retries_raises_the_provider_error(
        self, server: LoopbackServer | None, client: EmbeddingClient
    ) -> None:
        srv = self._scripted(server)
        srv.embeddings.enqueue(Fault("rate_limit"))  # type: ignore[attr-defined]
        with pytest.raises(self.rate_limit_error):
            await client.embed(TEXTS[:2])

    # --- secrets, components, lifecycle ------------------------------------------------------------

    async def test_no_secret_in_repr_errors_or_dump(
        self, server: LoopbackServer | None, client: EmbeddingClient
    ) -> None:
        assert self.secret not in repr(client)
        if server is not None:
            server.embeddings.enqueue(Fault("auth"))  # type: ignore[attr-defined]
            with pytest.raises(Exception) as info:
                await client.embed(TEXTS[:1])
            assert self.secret not in str(info.value) and self.secret not in repr(info.value)
        if isinstance(client, Component):
            try:
                text = client.dump_component().model_dump_json()
            except ComponentError as exc:
                text = str(exc)
            assert self.secret not in text

    def dump_environment(self, client: EmbeddingClient) -> dict[str, str]:
        """Environment variables a client loaded from the dump needs (default: its `api_key_env` holding `secret`)."""
        if not isinstance(client, Component):
            return {}
        name = client.dump_component().config.get("api_key_env")
        return {name: self.secret} if isinstance(name, str) else {}

    async def test_dump_round_trip_loses_nothing(
        self, server: LoopbackServer | None, client: EmbeddingClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if not isinstance(client, Component):
            pytest.skip(f"{type(client).__name__} is not a Component")
        loaded = load_dumped_client(client, self.dump_environment, self.secret, monkeypatch)
        if loaded is None:
            return
        try:
            assert isinstance(loaded, EmbeddingClient)
            original = await client.embed(TEXTS[:2])
            again = await loaded.embed(TEXTS[:2])
            assert len(again.vectors) == 2
            assert (
                max(abs(a - b) for a, b in zip(original.vectors[1], again.vectors[1], strict=True))
                < self.close_tolerance
            )
        finally:
            await loaded.close()

    async def test_close_is_idempotent_and_final(self, server: LoopbackServer | None) -> None:
        client = self.make_client(server, max_retries=0)
        async with client as entered:
            assert len((await entered.embed(TEXTS[:1])).vectors) == 1
        await client.close()  # idempotent
        with pytest.raises(ClientClosedError, match="closed"):
            await client.embed(TEXTS[:1])
        assert self._requests(server) <= 1
