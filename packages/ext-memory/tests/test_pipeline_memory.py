"""The `memory:` entry of a pipeline file (ext-core's `load_pipeline`/`check_pipeline`) over this store, with a real
OpenAI chat client and embedding client on ext-testing's loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ext.core import ConfigurationError, UserMessage
from ext.memory import MEMORY_HEADER, MemoryDocument, VectorMemory
from ext.models.openai import OpenAIEmbeddingClient
from ext.pipeline import check_pipeline, load_pipeline
from ext.testing.servers import OpenAIServer, Reply
from ext.vectors.sqlite import SqliteVectorStore

KEY = "sk-pipeline-memory-test"
KEY_ENV = "EXT_TEST_PIPELINE_MEMORY_KEY"
SIZE = 1536  # text-embedding-3-small's, as the loopback server answers it
NOTE = "The deploy key rotates every ninety days on Monday."


def pipeline_document(server: OpenAIServer, db: Path, **memory: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "embedder": {
            "provider": "ext.models.openai.OpenAIEmbeddingClient",
            "config": {"model": "text-embedding-3-small", "base_url": server.base_url + "/v1", "api_key_env": KEY_ENV},
        },
        "store": {
            "provider": "ext.vectors.sqlite.SqliteVectorStore",
            "config": {"path": str(db), "collection_name": "docs", "vector_size": SIZE},
        },
        "top_k": 2,
        "token_budget": 200,
        **memory,
    }
    return {
        "client": {
            "provider": "openai",
            "options": {
                "endpoint": server.base_url + "/v1",
                "default_model": "gpt-4o-mini",
                "api_key_env": KEY_ENV,
                "max_retries": 0,
            },
        },
        "middleware": [{"memory": settings}],
    }


async def remember(server: OpenAIServer, db: Path) -> None:
    embedder = OpenAIEmbeddingClient("text-embedding-3-small", base_url=server.base_url + "/v1", api_key=KEY)
    async with embedder, SqliteVectorStore(str(db), collection_name="docs", vector_size=SIZE) as store:
        await VectorMemory(embedder, store).add([MemoryDocument(text=NOTE, source="ops.md")])


async def test_a_pipeline_file_with_memory_sends_the_memories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)  # the embedding client reads its key from the environment itself
    db = tmp_path / "memory.db"
    file = tmp_path / "pipeline.json"
    async with OpenAIServer(api_key=KEY) as server:
        await remember(server, db)
        file.write_text(json.dumps(pipeline_document(server, db)), encoding="utf-8")
        check = check_pipeline(file, environ={KEY_ENV: KEY})
        assert (check.provider, check.middleware) == ("openai", ["memory"])
        server.enqueue(Reply(text="Every ninety days."))
        async with load_pipeline(file, environ={KEY_ENV: KEY}) as pipeline:
            result = await pipeline.create([UserMessage(content="How often does the deploy key rotate?")])
        assert result.content == "Every ninety days."
        [chat] = [r for r in server.requests if r.path.endswith("/chat/completions")]
        memories = server.decode(chat).system[0]
    assert memories.startswith(MEMORY_HEADER)
    assert f"| ops.md (chunk 0): {NOTE}" in memories


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"store": "memory.db"}, "middleware[0].memory.store must be a component dump"),
        ({"top_k": 0}, "middleware[0].memory: MemoryMiddleware: top_k must be a positive integer"),
        ({"topk": 3}, "middleware[0].memory: unknown settings ['topk']"),
        ({"max_chunk_chars": 0}, "middleware[0].memory: max_chunk_chars must be a positive number of characters"),
    ],
)
async def test_a_bad_memory_entry_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], message: str
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with OpenAIServer(api_key=KEY) as server:
        document = pipeline_document(server, tmp_path / "memory.db", **change)
        with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_pipeline(document, environ={KEY_ENV: KEY})
        assert server.requests == []


async def test_a_key_written_in_the_memory_entry_is_refused(tmp_path: Path) -> None:
    async with OpenAIServer(api_key=KEY) as server:
        document = pipeline_document(server, tmp_path / "memory.db")
        document["middleware"][0]["memory"]["embedder"]["config"]["api_key"] = KEY
        with pytest.raises(ConfigurationError, match=r"middleware\[0\]\.memory\.embedder\.config\.api_key") as info:
            check_pipeline(document, environ={KEY_ENV: KEY})
        assert KEY not in str(info.value)
