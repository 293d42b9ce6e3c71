"""BaseEmbeddingClient alone, with a provider part written here: validation before any call, batching and order,
retries through RetryPolicy, cancellation, the checks on returned vectors, usage, close."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ext.core import (
    BaseEmbeddingClient,
    CancellationToken,
    ClientClosedError,
    ComponentError,
    ConfigurationError,
    EmbeddingClient,
    EmbeddingResponseError,
    EmbeddingResult,
    RequestUsage,
    RetryPolicy,
)


class Recorder(BaseEmbeddingClient):
    """Embeds each text as [len(text), index-in-batch + 1]; `script` replaces the next answers."""

    max_batch_size = 4

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("model", "recorder")
        super().__init__(**kwargs)
        self.batches: list[list[str]] = []
        self.script: list[Any] = []
        self.closed_count = 0
        self.entered = asyncio.Event()

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        self.batches.append(texts)
        self.entered.set()
        if self.script:
            item = self.script.pop(0)
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, asyncio.Event):
                await item.wait()
            else:
                return EmbeddingResult(vectors=item, usage=RequestUsage(prompt_tokens=1))
        vectors = [[float(len(t)), float(i + 1)] for i, t in enumerate(texts)]
        return EmbeddingResult(vectors=vectors, usage=RequestUsage(prompt_tokens=len(texts)), model="m-1")

    async def _close(self) -> None:
        self.closed_count += 1


async def test_batches_of_the_limit_in_order_and_usage_summed() -> None:
    client = Recorder()
    texts = [f"t{'x' * i}" for i in range(10)]
    result = await client.embed(texts)
    assert [len(b) for b in client.batches] == [4, 4, 2]
    assert [v[0] for v in result.vectors] == [float(len(t)) for t in texts]
    assert result.usage.prompt_tokens == 10 and result.model == "m-1"
    await client.embed(["again"])
    assert client.total_usage().prompt_tokens == 11 and client.actual_usage().prompt_tokens == 1
    assert client.vector_size == 2 and isinstance(client, EmbeddingClient)


def test_default_batch_size_below_the_limit() -> None:
    class Smaller(Recorder):
        default_batch_size = 2

    assert Recorder().batch_size == 4 and Smaller().batch_size == 2 and Smaller(batch_size=4).batch_size == 4


async def test_batch_size_smaller_than_the_limit() -> None:
    client = Recorder(batch_size=3)
    await client.embed(list("abcdefg"))
    assert client.batches == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 5}, r"batch_size must be an int from 1 to 4"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"dimensions": -1}, "dimensions must be a positive int"),
        ({"model": " "}, "model must be a non-empty string"),
        ({"max_retries": -1}, "max_retries"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Recorder(**kwargs)


@pytest.mark.parametrize(
    ("texts", "match"),
    [
        ("one string", "texts must be a list of strings, got str"),
        (b"bytes", "texts must be a list of strings, got bytes"),
        (["a", ""], r"texts\[1\] is an empty string"),
        (["a", None], r"texts\[1\] must be a string, got NoneType"),
        (42, "texts must be a list of strings, got int"),
    ],
)
async def test_bad_texts_fail_before_any_call(texts: Any, match: str) -> None:
    client = Recorder()
    with pytest.raises(ConfigurationError, match=match):
        await client.embed(texts)
    assert client.batches == []


async def test_empty_list_is_an_empty_result_without_a_call() -> None:
    client = Recorder()
    result = await client.embed([])
    assert result.vectors == [] and client.batches == []


@pytest.mark.parametrize(
    ("vectors", "match"),
    [
        ([[1.0, float("nan")], [1.0, 1.0]], r"texts\[0\] has a non-finite value at \[1\] \(nan\)"),
        ([[1.0, 1.0], [float("-inf"), 1.0]], r"texts\[1\] has a non-finite value at \[0\] \(-inf\)"),
        ([[1.0, 1.0]], "returned 1 vectors for 2 texts"),
        ([[1.0, 1.0], [1.0]], r"texts\[1\] has 1 dimensions, expected 2"),
        ([[], []], r"texts\[0\] has 0 dimensions"),
    ],
)
async def test_unusable_vectors_are_refused_and_nothing_is_accounted(vectors: Any, match: str) -> None:
    client = Recorder()
    client.script.append(vectors)
    with pytest.raises(EmbeddingResponseError, match=match):
        await client.embed(["ab", "cd"])
    assert client.total_usage().prompt_tokens == 0


async def test_a_huge_finite_vector_is_not_taken_for_infinity() -> None:
    client = Recorder()
    client.script.append([[1e308, 1e308], [1.0, 1.0]])  # the sum overflows; every value is finite
    result = await client.embed(["ab", "cd"])
    assert result.vectors[0] == [1e308, 1e308]


async def test_size_mismatch_with_dimensions_and_across_calls() -> None:
    client = Recorder(dimensions=3)
    with pytest.raises(EmbeddingResponseError, match=r"texts\[0\] has 2 dimensions, expected 3"):
        await client.embed(["a"])
    learned = Recorder()
    await learned.embed(["a"])
    learned.script.append([[1.0, 2.0, 3.0]])
    with pytest.raises(EmbeddingResponseError, match="has 3 dimensions, expected 2"):
        await learned.embed(["b"])


async def test_transient_errors_are_retried_by_the_policy() -> None:
    client = Recorder(retry_policy=RetryPolicy(max_retries=2, multiplier=0.0))
    client.script.extend([ConnectionError("reset"), TimeoutError("slow")])
    result = await client.embed(["a", "b"])
    assert len(result.vectors) == 2 and len(client.batches) == 3
    client.script.append(ValueError("not transient"))
    with pytest.raises(ValueError, match="not transient"):
        await client.embed(["a"])


async def test_cancel_aborts_the_call_in_flight() -> None:
    client = Recorder()
    never = asyncio.Event()
    client.script.append(never)
    token = CancellationToken()
    task = asyncio.ensure_future(client.embed(["a", "b", "c", "d", "e"], token))
    await asyncio.wait_for(client.entered.wait(), 5)  # the first batch is in flight
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(client.batches) == 1  # the second batch was never sent
    with pytest.raises(ConfigurationError, match="cancellation_token must be a CancellationToken"):
        await client.embed(["a"], "token")  # type: ignore[arg-type]


async def test_close_is_idempotent_and_final() -> None:
    async with Recorder() as client:
        await client.embed(["a"])
    await client.close()
    assert client.closed_count == 1
    with pytest.raises(ClientClosedError, match="Recorder is closed"):
        await client.embed(["a"])


def test_a_retry_policy_object_is_not_dumped_silently() -> None:
    client = Recorder(retry_policy=RetryPolicy())
    with pytest.raises(ComponentError, match="retry_policy"):
        client.dump_component()
    assert repr(client) == "Recorder(model='recorder')"
