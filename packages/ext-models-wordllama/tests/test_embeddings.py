"""WordLlamaEmbeddingClient: ext-testing's EmbeddingClientConformance in process, the vectors against WordLlama's own
`embed` on the same texts (the same numbers), and what the shipped model is good for."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from ext.core import CancellationToken, ConfigurationError, EmbeddingClient, load_component
from ext.models.wordllama import WordLlamaEmbeddingClient, load_wordllama
from ext.testing.conformance import EmbeddingClientConformance
from ext.testing.readme import python_example
from ext.testing.sample_inputs import TEXTS

README = Path(__file__).resolve().parents[1] / "README.md"


class TestWordLlamaEmbeddingConformance(EmbeddingClientConformance):
    batch_limit = 256

    def make_server(self) -> None:
        return None

    def make_client(self, server: None, **kwargs: Any) -> EmbeddingClient:
        return WordLlamaEmbeddingClient(**kwargs)


def wordllama_itself() -> Any:
    """WordLlama loaded by its own API, independently of the client (its files named the way its loader wants)."""
    import wordllama

    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[WordLlamaEmbeddingClient]:
    async with WordLlamaEmbeddingClient() as c:
        yield c


SAMPLES = [
    "The cat sat on the mat.",
    "Stock markets fell sharply on Monday after the central bank raised interest rates.",
    "def add(a, b):\n    return a + b",
    "Ünïcödé, 東京, emoji 👩‍💻 and a very long line " + "word " * 500,
    "x",
]


@pytest.mark.asyncio(loop_scope="module")
async def test_vectors_are_wordllamas_own(client: WordLlamaEmbeddingClient) -> None:
    reference = wordllama_itself()
    ours = np.array((await client.embed(SAMPLES)).vectors, dtype=np.float32)
    theirs = reference.embed(SAMPLES, norm=True)
    assert ours.shape == theirs.shape == (len(SAMPLES), 256)
    assert np.array_equal(ours, theirs)  # the same numbers, not merely close
    assert client.vector_size == 256 and client.model == "wordllama-l2_supercat-256"


async def test_unnormalised_and_truncated_vectors_are_wordllamas_own() -> None:
    reference = wordllama_itself()
    async with WordLlamaEmbeddingClient(normalize=False) as raw:
        assert np.array_equal(np.array((await raw.embed(SAMPLES)).vectors, dtype=np.float32), reference.embed(SAMPLES))
    async with WordLlamaEmbeddingClient(dimensions=64) as small:
        vectors = np.array((await small.embed(SAMPLES)).vectors, dtype=np.float32)
    assert small.vector_size == 64 and vectors.shape == (len(SAMPLES), 64)
    cut = load_wordllama(64).embed(SAMPLES, norm=True)
    assert np.array_equal(vectors, cut)
    # Truncation keeps the leading components of the full table: the same direction before normalising.
    full = reference.embed(SAMPLES)[:, :64]
    assert np.allclose(vectors, full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-6)


@pytest.mark.asyncio(loop_scope="module")
async def test_usage_counts_the_tokens_read(client: WordLlamaEmbeddingClient) -> None:
    reference = wordllama_itself()
    expected = sum(len(reference.tokenizer.encode(t, add_special_tokens=False).ids) for t in SAMPLES)
    assert (await client.embed(SAMPLES)).usage.prompt_tokens == expected


async def test_text_past_max_chars_is_cut() -> None:
    long = "alpha beta gamma " * 100
    async with WordLlamaEmbeddingClient(max_chars=40) as client:
        whole, prefix = (await client.embed([long, long[:40]])).vectors
    assert whole == prefix


# Three pairs of paraphrases; every sentence's partner must be its nearest neighbour. (A static model knows related
# words, not topics: "markets fell" and "the bank raised rates" share none and score 0.02.)
PAIRS = [
    ("The cat sat on the mat.", "A kitten was sleeping on the rug."),
    ("Stock markets fell sharply on Monday.", "Shares dropped steeply at the start of the week."),
    ("How do I bake bread at home?", "A simple recipe for homemade loaves of bread."),
]


@pytest.mark.asyncio(loop_scope="module")
async def test_related_sentences_are_nearest(client: WordLlamaEmbeddingClient) -> None:
    sentences = [s for pair in PAIRS for s in pair]
    vectors = (await client.embed(sentences)).vectors
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-4) for v in vectors)

    def cosine(i: int, j: int) -> float:
        return math.fsum(a * b for a, b in zip(vectors[i], vectors[j], strict=True))

    for i in range(len(sentences)):
        assert cosine(i, i ^ 1) > 0.3
        nearest = max((j for j in range(len(sentences)) if j != i), key=lambda j: cosine(i, j))
        assert nearest == i ^ 1, f"{sentences[i]!r}: nearest is {sentences[nearest]!r}, not its partner"
        # Unrelated sentences score near 0 (SmolLM2's pooled states put them at 0.63 to 0.82).
        assert all(cosine(i, j) < 0.2 for j in range(len(sentences)) if j // 2 != i // 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dimensions": 512}, r"dimensions.*one of \[64, 128, 256\]"),
        ({"dimensions": 0}, r"dimensions"),
        ({"max_chars": 0}, r"max_chars"),
        ({"batch_size": 4097}, r"batch_size"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        WordLlamaEmbeddingClient(**kwargs)


def test_load_wordllama_refuses_a_size_the_wheel_lacks() -> None:
    with pytest.raises(ConfigurationError, match=r"dimensions must be one of \[64, 128, 256\]"):
        load_wordllama(1024)


async def test_loaded_by_its_registered_name() -> None:
    client: WordLlamaEmbeddingClient = load_component(
        {"provider": "WordLlamaEmbeddingClient", "config": {"dimensions": 128}}, WordLlamaEmbeddingClient
    )
    try:
        assert isinstance(client, WordLlamaEmbeddingClient)
        assert client.dump_component().config["dimensions"] == 128
        assert len((await client.embed(["x"])).vectors[0]) == 128
    finally:
        await client.close()


async def test_cancel_returns_at_once_and_the_client_stays_usable() -> None:
    async with WordLlamaEmbeddingClient(batch_size=1) as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.embed([f"text {i}" for i in range(64)], token))
        asyncio.get_running_loop().call_soon(token.cancel)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert client.total_usage().prompt_tokens == 0
        assert len((await client.embed(["after the cancel"])).vectors) == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_order_is_kept_whatever_the_lengths(client: WordLlamaEmbeddingClient) -> None:
    # Texts are embedded shortest first (less padding): the vectors still come back in input order.
    texts = [TEXTS[0] * 5, TEXTS[1], TEXTS[2] * 3, "a"]
    together = (await client.embed(texts)).vectors
    alone = [(await client.embed([t])).vectors[0] for t in texts]
    assert together == alone


async def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = python_example(README, "WordLlamaEmbeddingClient")
    await asyncio.to_thread(exec, compile(code, "README.md", "exec"), {"__name__": "__main__"})
    size, cosine = capsys.readouterr().out.split()
    assert size == "256" and 0.3 < float(cosine) < 1.0
