"""VectorMemory's search switch over the embedded store: hybrid search (the default where the store has keyword
search) finds an exact identifier that the embedding alone misses; the middleware and the tool pass the request's
text through to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ext.core import VECTOR_ONLY, ConfigurationError, CreateResult, UserMessage
from ext.memory import MEMORY_CONTEXT_KEY, MemoryDocument, MemoryMiddleware, MemorySearchTool, VectorMemory
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatCall, ChatClientBuilder, ChatMiddleware, CreateNext
from ext.testing.hashing_embedder import HashingEmbedder
from ext.testing.servers import OpenAIServer, Reply
from ext.vectors.sqlite import SqliteVectorStore

SIZE = 16
IDENTIFIER = "ERR_0x7f3a"
KEY = "sk-hybrid-test"


class VectorOnlySqlite(SqliteVectorStore):
    """The embedded store declaring no keyword search: what a store without full-text search looks like."""

    search_modes = VECTOR_ONLY


def _decoys(embedder: HashingEmbedder, count: int) -> list[str]:
    """Words the hashing embedder maps to the identifier's exact vector (one bucket, one sign): to the embedding,
    each is the identifier, so vector search ranks these one-word notes first."""
    target = embedder.embed_one(IDENTIFIER)
    found: list[str] = []
    n = 0
    while len(found) < count:
        word = f"w{n}"
        if embedder.embed_one(word) == target:
            found.append(word)
        n += 1
    return found


def _notes(embedder: HashingEmbedder) -> list[MemoryDocument]:
    decoys = [MemoryDocument(text=word, source=f"decoy-{word}.md") for word in _decoys(embedder, 5)]
    answer = MemoryDocument(
        text=f"When the uploader fails with {IDENTIFIER} the disk quota of the bucket is exhausted; raise it.",
        source="runbook.md",
    )
    return [*decoys, answer]


@pytest_asyncio.fixture
async def embedder() -> AsyncIterator[HashingEmbedder]:
    embedder = HashingEmbedder(SIZE)
    yield embedder
    await embedder.close()


@pytest_asyncio.fixture
async def store() -> AsyncIterator[SqliteVectorStore]:
    store = SqliteVectorStore(collection_name="hybrid", vector_size=SIZE)
    yield store
    await store.close()


async def test_hybrid_finds_the_identifier_vector_search_misses(
    embedder: HashingEmbedder, store: SqliteVectorStore
) -> None:
    memory = VectorMemory(embedder, store)
    assert memory.search == "hybrid"  # the default on a store with keyword search
    await memory.add(_notes(embedder))
    question = f"what does {IDENTIFIER} mean?"
    vector_only = await memory.query(question, top_k=5, search="vector")
    assert "runbook.md" not in {hit.source for hit in vector_only}
    hits = await memory.query(question, top_k=5)
    assert hits[0].source == "runbook.md"
    # First by words (the only match), and ranked by meaning too: above 0.5, a score one ranking alone gives.
    assert 0.5 < hits[0].score <= 1.0
    assert {hit.source for hit in hits[1:]} <= {f"decoy-{w}.md" for w in _decoys(embedder, 5)}
    keyword = await memory.query(question, top_k=5, search="keyword")
    assert [hit.source for hit in keyword] == ["runbook.md"]


async def test_keyword_search_embeds_nothing(embedder: HashingEmbedder, store: SqliteVectorStore) -> None:
    memory = VectorMemory(embedder, store, search="keyword")
    await memory.add(_notes(embedder))
    embedded = embedder.total_usage().prompt_tokens
    assert [hit.source for hit in await memory.query(IDENTIFIER)] == ["runbook.md"]
    assert embedder.total_usage().prompt_tokens == embedded
    with pytest.raises(ValueError, match="keyword mode has none"):
        await memory.query(IDENTIFIER, min_score=0.5)


async def test_store_without_keyword_search(embedder: HashingEmbedder) -> None:
    store = VectorOnlySqlite(collection_name="vector-only", vector_size=SIZE)
    try:
        memory = VectorMemory(embedder, store)
        assert memory.search == "vector"
        await memory.add(_notes(embedder))
        assert "runbook.md" not in {hit.source for hit in await memory.query(IDENTIFIER, top_k=5)}
        with pytest.raises(ConfigurationError, match="VectorOnlySqlite has no keyword search"):
            VectorMemory(embedder, store, search="hybrid")
        with pytest.raises(ConfigurationError, match="query: search='keyword'"):
            await memory.query(IDENTIFIER, search="keyword")
        with pytest.raises(ConfigurationError, match="must be 'hybrid', 'vector' or 'keyword'"):
            VectorMemory(embedder, store, search="fuzzy")  # type: ignore[arg-type]
    finally:
        await store.close()


class _Recorder(ChatMiddleware):
    def __init__(self, seen: list[ChatCall]) -> None:
        self.seen = seen

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self.seen.append(call)
        return await next(call)


async def test_middleware_and_tool_search_by_the_request_text(
    embedder: HashingEmbedder, store: SqliteVectorStore
) -> None:
    memory = VectorMemory(embedder, store)
    await memory.add(_notes(embedder))
    seen: list[ChatCall] = []
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="The disk quota is exhausted."))
        model = OpenAIChatCompletionClient(
            "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
        )
        client = ChatClientBuilder(model).use(MemoryMiddleware(memory, top_k=1)).use(_Recorder(seen)).build()
        async with client:
            await client.create([UserMessage(content=f"The upload says {IDENTIFIER}. Why?")])
        request = server.decode(server.requests[0])
    assert "runbook.md (chunk 0)" in request.system[0]
    assert [hit.source for hit in seen[0].context[MEMORY_CONTEXT_KEY]] == ["runbook.md"]
    tool = MemorySearchTool(memory, top_k=1)
    answer = await tool.run_json({"query": IDENTIFIER}, None)
    assert "runbook.md (chunk 0)" in str(answer)
