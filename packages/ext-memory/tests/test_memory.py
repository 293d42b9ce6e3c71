"""VectorMemory, MemoryMiddleware and MemorySearchTool (ext-core) over the embedded store and the test embedder,
with a real OpenAI client on the loopback server for the pipeline cases."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from ext.core import (
    ChatCompletionClient,
    ComponentError,
    CreateResult,
    StreamChunk,
    SystemMessage,
    ToolArgumentsError,
    UserMessage,
    VectorSizeError,
)
from ext.memory import (
    CUT_MARK,
    DEFAULT_MAX_CHUNK_CHARS,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_TOP_K,
    MEMORY_CONTEXT_KEY,
    MEMORY_HEADER,
    MemoryDocument,
    MemoryHit,
    MemoryMiddleware,
    MemorySearchTool,
    VectorMemory,
    format_memories,
    split_text,
)
from ext.models.openai import OpenAIChatCompletionClient, OpenAIEmbeddingClient
from ext.pipeline import ChatCall, ChatClientBuilder, ChatMiddleware, CreateNext
from ext.testing.hashing_embedder import HashingEmbedder
from ext.testing.script import ToolCallSpec
from ext.testing.servers import OpenAIServer, Reply
from ext.vectors.sqlite import SqliteVectorStore

KEY = "sk-memory-test"
NOTES = [
    MemoryDocument(
        text="The deploy key rotates every ninety days on Monday.", source="ops.md", metadata={"team": "ops"}
    ),
    MemoryDocument(text="Lunch is served in the blue kitchen at noon.", source="office.md", metadata={"team": "hr"}),
    MemoryDocument(
        text="Invoices are paid within thirty days of receipt.", source="finance.md", metadata={"team": "fin"}
    ),
]


@pytest_asyncio.fixture
async def memory() -> AsyncIterator[VectorMemory]:
    embedder = HashingEmbedder(128)
    store = SqliteVectorStore(collection_name="memory", vector_size=128)
    try:
        yield VectorMemory(embedder, store, chunk_size=6, chunk_overlap=2)
    finally:
        await store.close()
        await embedder.close()


def openai_client(server: OpenAIServer) -> ChatCompletionClient:
    return OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
    )


async def test_add_chunks_with_source_and_position(memory: VectorMemory) -> None:
    text = "one two three four five six seven eight nine ten eleven"
    ids = await memory.add([MemoryDocument(text=text, source="numbers.txt")])
    # 6 words a chunk, each starting 4 words after the last: words 0-5, 4-9, 8-10.
    assert ids == ["numbers.txt#0", "numbers.txt#1", "numbers.txt#2"]
    records = await memory.store.get(ids)
    assert [r.text for r in records] == [
        "one two three four five six",
        "five six seven eight nine ten",
        "nine ten eleven",
    ]
    for record in records:
        start, end = record.metadata["start"], record.metadata["end"]
        assert isinstance(start, int) and isinstance(end, int)
        assert text[start:end] == record.text
        assert record.metadata["source"] == "numbers.txt"
    assert [r.metadata["chunk"] for r in records] == [0, 1, 2]


async def test_query_finds_the_note_sharing_words(memory: VectorMemory) -> None:
    await memory.add(NOTES)
    hits = await memory.query("when does the deploy key rotate", top_k=3)
    assert hits[0].source == "ops.md"
    assert hits[0].text.startswith("The deploy key")
    assert hits[0].metadata == {"team": "ops"}
    assert hits[0].score > hits[1].score
    only_hr = await memory.query("when does the deploy key rotate", filter={"team": "hr"})
    assert {h.source for h in only_hr} == {"office.md"}


async def test_adding_a_source_again_replaces_it(memory: VectorMemory) -> None:
    long = " ".join(f"w{i}" for i in range(20))
    await memory.add([MemoryDocument(text=long, source="doc"), "a plain text note"])
    assert await memory.store.count({"source": "doc"}) == 5
    await memory.add([MemoryDocument(text="short now", source="doc")])
    assert await memory.store.count({"source": "doc"}) == 1
    assert [r.text for r in await memory.store.get(["doc#0"])] == ["short now"]
    assert await memory.store.count() == 2
    assert await memory.remove("doc") == 1
    assert await memory.clear() == 1
    assert await memory.store.count() == 0


async def test_bad_input(memory: VectorMemory) -> None:
    with pytest.raises(ValueError, match="source"):
        await memory.add([MemoryDocument(text="x", source="s", metadata={"source": "other"})])
    with pytest.raises(ValueError, match="query text"):
        await memory.query("  ")
    with pytest.raises(ValueError, match="chunk_overlap"):
        VectorMemory(HashingEmbedder(8), SqliteVectorStore(collection_name="c", vector_size=8), chunk_overlap=300)
    with pytest.raises(VectorSizeError, match="size 8"):
        VectorMemory(HashingEmbedder(8), SqliteVectorStore(collection_name="c", vector_size=16))


async def test_middleware_puts_scored_memories_before_the_call(memory: VectorMemory) -> None:
    await memory.add(NOTES)
    middleware = MemoryMiddleware(memory, top_k=2, token_budget=200)
    seen: list[ChatCall] = []
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="Every ninety days."))
        client = ChatClientBuilder(openai_client(server)).use(middleware).use(_Recorder(seen)).build()
        async with client:
            result = await client.create(
                [SystemMessage(content="Be brief."), UserMessage(content="How often does the deploy key rotate?")]
            )
        assert result.content == "Every ninety days."
        request = server.decode(server.requests[0])
    # The server got the caller's system message first, then the memories, scores and sources visible.
    assert request.system[0] == "Be brief."
    memories = request.system[1]
    assert memories.startswith(MEMORY_HEADER)
    assert "| ops.md (chunk 0): The deploy key" in memories
    first_line = memories.splitlines()[1]
    assert first_line.startswith("[1] score 1.000")  # hybrid search: first by meaning and by words
    assert [m.text for m in request.messages] == ["How often does the deploy key rotate?"]
    hits = seen[0].context[MEMORY_CONTEXT_KEY]
    assert hits[0].source == "ops.md" and f"{hits[0].score:.3f}" in first_line


async def test_middleware_token_budget_keeps_the_best_only(memory: VectorMemory) -> None:
    await memory.add(NOTES)
    tight = MemoryMiddleware(memory, top_k=3, token_budget=45)
    seen: list[ChatCall] = []
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="ok"))
        async with ChatClientBuilder(openai_client(server)).use(tight).use(_Recorder(seen)).build() as client:
            await client.create([UserMessage(content="deploy key rotation")])
        memories = server.decode(server.requests[0]).system[0]
    assert len(seen[0].context[MEMORY_CONTEXT_KEY]) == 1
    assert len(memories.splitlines()) == 2
    assert len(memories) / 4 <= 45
    with pytest.raises(ComponentError, match="memory"):
        tight.dump_component()


async def test_middleware_streams_with_memories(memory: VectorMemory) -> None:
    await memory.add(NOTES)
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="noon in the blue kitchen"))
        async with ChatClientBuilder(openai_client(server)).use(MemoryMiddleware(memory, top_k=1)).build() as client:
            items = [item async for item in client.create_stream([UserMessage(content="where is lunch served")])]
        assert isinstance(items[-1], CreateResult) and items[-1].content == "noon in the blue kitchen"
        assert any(isinstance(item, StreamChunk) for item in items)
        assert "office.md" in server.decode(server.requests[0]).system[0]


async def test_search_tool_called_by_the_model(memory: VectorMemory) -> None:
    await memory.add(NOTES)
    tool = MemorySearchTool(memory, top_k=1)
    assert tool.schema["name"] == "search_memory"
    assert set(tool.schema["parameters"]["properties"]) == {"query", "top_k"}
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec(name="search_memory", arguments={"query": "when are invoices paid"})]),
            Reply(text="Within thirty days."),
        )
        async with ChatClientBuilder(openai_client(server)).use_tool_loop([tool]).build() as client:
            result = await client.create([UserMessage(content="When do we pay invoices?")])
        assert result.content == "Within thirty days."
        second = server.decode(server.requests[1])
    [tool_result] = [r for m in second.messages for r in m.tool_results]
    assert tool_result.content.startswith(MEMORY_HEADER)
    assert "finance.md (chunk 0): Invoices are paid" in tool_result.content
    with pytest.raises(ToolArgumentsError, match="query"):
        await tool.run_json({"query": ""})


async def test_a_long_line_reaches_a_strict_embedder_in_bounded_chunks() -> None:
    """A 100 KB line without whitespace was one input of about 25,000 tokens, which OpenAI refuses (8,191 at most;
    the loopback server is as strict). Bounded chunks go through."""
    line = "QUJDRA==" * 12_500
    async with OpenAIServer(api_key=KEY) as server:
        embedder = OpenAIEmbeddingClient(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
        async with embedder, SqliteVectorStore(collection_name="m", vector_size=1536) as store:
            ids = await VectorMemory(embedder, store).add([MemoryDocument(text=line, source="blob.b64")])
            assert len(ids) == 125
            records = await store.get(ids)
        inputs = [text for r in server.embeddings.requests for text in r.json["input"]]  # type: ignore[index]
    assert max(len(text) for text in inputs) == DEFAULT_MAX_CHUNK_CHARS
    assert [r.text for r in records] == inputs
    assert [(r.metadata["start"], r.metadata["end"]) for r in records] == [(c.start, c.end) for c in split_text(line)]


async def test_progress_moves_once_per_embedded_batch() -> None:
    text = " ".join(f"w{i}" for i in range(50))  # 6 words a chunk, 4 new each: 12 chunks
    async with OpenAIServer(api_key=KEY) as server:
        embedder = OpenAIEmbeddingClient(base_url=server.base_url + "/v1", api_key=KEY, batch_size=5, max_retries=0)
        async with embedder, SqliteVectorStore(collection_name="m", vector_size=1536) as store:
            memory = VectorMemory(embedder, store, chunk_size=6, chunk_overlap=2)  # the embedder's batches of 5
            seen: list[tuple[int, int]] = []
            ids = await memory.add([text, MemoryDocument(text="one more note", source="n")], progress=_append(seen))
        sizes = [len(r.json["input"]) for r in server.embeddings.requests]  # type: ignore[index]
    assert len(ids) == 13
    assert seen == [(0, 13), (5, 13), (10, 13), (13, 13)]
    assert sizes == [5, 5, 3]  # one request a batch: the bar moved as each came back

    hashing = HashingEmbedder(16)
    async with SqliteVectorStore(collection_name="m", vector_size=16) as store:
        seen.clear()
        memory = VectorMemory(hashing, store, chunk_size=6, chunk_overlap=2, batch_size=4)
        await memory.add([text], progress=_append(seen))
    assert seen == [(0, 12), (4, 12), (8, 12), (12, 12)]
    assert [len(batch) for batch in hashing.calls] == [4, 4, 4]
    with pytest.raises(ValueError, match="batch_size must be a positive number"):
        VectorMemory(hashing, SqliteVectorStore(collection_name="c", vector_size=16), batch_size=0)


def _append(seen: list[tuple[int, int]]) -> Callable[[int, int], None]:
    return lambda done, total: seen.append((done, total))


async def test_one_source_twice_in_one_call_is_refused(memory: VectorMemory) -> None:
    before = len(await memory.add([NOTES[2]]))
    with pytest.raises(ValueError, match=r"items\[2\]\.source 'ops\.md' is also items\[0\]'s"):
        await memory.add([NOTES[0], NOTES[1], MemoryDocument(text="other", source="ops.md")])
    assert await memory.store.count() == before


def _hit(rank: int, text: str, source: str = "notes/ops.md") -> MemoryHit:
    return MemoryHit(id=f"{source}#{rank}", text=text, score=0.9 - rank / 100, source=source, chunk=rank, start=0,
                     end=len(text))  # fmt: skip


def test_the_best_memory_too_big_for_the_budget_is_cut_not_dropped() -> None:
    words = " ".join(f"word{i:03d}" for i in range(200))  # 1,599 characters, about 400 tokens
    text, used = format_memories([_hit(0, words), _hit(1, "short")], token_budget=200)
    # Before, a best hit over the budget left the prompt with no memory at all.
    assert len(used) == 1 and used[0].text and words.startswith(used[0].text)
    assert used[0].end == len(used[0].text) and not used[0].text.endswith(" ")
    assert text.splitlines()[1].endswith(used[0].text + CUT_MARK)
    assert -(-len(text) // 4) + 1 <= 200  # the estimate format_memories budgets with, newlines counted
    assert 4 * 200 - len(text) < 50  # and the space is used
    # A budget without room for 100 characters of the best memory shows none (rather than a useless stub).
    assert format_memories([_hit(0, words)], token_budget=40) == ("", [])


def test_the_defaults_hold_every_hit_of_full_size_chunks() -> None:
    full = "x" * DEFAULT_MAX_CHUNK_CHARS
    source = "/home/someone/projects/a-rather-long-project-name/docs/" + "s" * 82 + ".md"
    assert len(source) == 140
    hits = [_hit(rank, full, source) for rank in range(DEFAULT_TOP_K)]
    text, used = format_memories(hits, token_budget=DEFAULT_TOKEN_BUDGET)
    assert used == hits and len(text.splitlines()) == DEFAULT_TOP_K + 1


async def test_the_middleware_defaults_put_every_hit_in_the_prompt() -> None:
    """With VectorMemory's and MemoryMiddleware's defaults, all top_k full-size chunks reach the model (before:
    chunks of 200 words and a budget of 512 tokens let 1 of 5 through)."""
    embedder = HashingEmbedder(64)
    # 100 words (the default chunk_size) of about 1,000 characters (DEFAULT_MAX_CHUNK_CHARS): one full chunk each.
    documents = [
        MemoryDocument(text="deploy key " + " ".join(f"d{d}w{i:06d}" for i in range(98)), source=f"doc{d}.md")
        for d in range(DEFAULT_TOP_K)
    ]
    async with SqliteVectorStore(collection_name="m", vector_size=64) as store:
        memory = VectorMemory(embedder, store)
        await memory.add(documents)
        assert await store.count() == DEFAULT_TOP_K
        assert all(len(r.text) == 990 for r in await store.get([f"doc{d}.md#0" for d in range(DEFAULT_TOP_K)]))
        seen: list[ChatCall] = []
        async with OpenAIServer(api_key=KEY) as server:
            server.enqueue(Reply(text="ok"))
            async with (
                ChatClientBuilder(openai_client(server))
                .use(MemoryMiddleware(memory))
                .use(_Recorder(seen))
                .build() as client
            ):
                await client.create([UserMessage(content="where is the deploy key")])
            memories = server.decode(server.requests[0]).system[0]
    used = seen[0].context[MEMORY_CONTEXT_KEY]
    assert len(used) == DEFAULT_TOP_K
    assert all(hit.text in memories for hit in used)
    assert CUT_MARK not in memories


class _Recorder(ChatMiddleware):
    """Keeps each call it sees (placed after MemoryMiddleware: sees the call as the middleware passed it on)."""

    def __init__(self, seen: list[ChatCall]) -> None:
        self._seen = seen

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self._seen.append(call)
        return await next(call)
