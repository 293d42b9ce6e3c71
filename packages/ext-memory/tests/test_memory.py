"""VectorMemory, MemoryMiddleware and MemorySearchTool (ext-core) over the embedded store and the test embedder,
with a real OpenAI client on the loopback server for the pipeline cases."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
    MEMORY_CONTEXT_KEY,
    MEMORY_HEADER,
    MemoryDocument,
    MemoryMiddleware,
    MemorySearchTool,
    VectorMemory,
)
from ext.models.openai import OpenAIChatCompletionClient
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
    assert first_line.startswith("[1] score 0.")
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


class _Recorder(ChatMiddleware):
    """Keeps each call it sees (placed after MemoryMiddleware: sees the call as the middleware passed it on)."""

    def __init__(self, seen: list[ChatCall]) -> None:
        self._seen = seen

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self._seen.append(call)
        return await next(call)
