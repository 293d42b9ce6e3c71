"""Keyword query text is user or model input: whatever it holds, SQLite's FTS5 reads it as words, never as its query
language (no syntax error, no operator, nothing but matches), and the words in it are still found."""

from __future__ import annotations

import asyncio
from array import array
from pathlib import Path

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from ext.core import VectorRecord
from ext.vectors.sqlite import SqliteVectorStore

TEXTS = {
    "n1": "The deploy key rotates every ninety days.",
    "n2": 'Error ERR_0x7f3a: "quoted" NEAR(the) deploy* key^ expired.',
    "n3": "Lunch is served at noon in the blue kitchen.",
}
# Any character a stored text can hold (no NUL, no lone surrogate), FTS5's and SQL's syntax characters weighted up.
CHARS = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    st.sampled_from("\"*^:()-+{}[],.;'\\ ANDORNEAR"),
)
WORDS = st.text(CHARS, max_size=40)


def test_any_text_is_searched_as_words() -> None:
    loop = asyncio.new_event_loop()
    store = SqliteVectorStore(collection_name="k", vector_size=2)
    records = [VectorRecord(id=i, vector=[1.0, float(n)], text=t) for n, (i, t) in enumerate(TEXTS.items())]

    async def setup() -> None:
        await store.create_collection()
        await store.upsert(records)

    loop.run_until_complete(setup())

    @given(before=WORDS, after=WORDS)
    @settings(max_examples=300, deadline=None)
    def check(before: str, after: str) -> None:
        found = loop.run_until_complete(store.query(text=before, mode="keyword")) if before.strip() else []
        assert {m.id for m in found} <= set(TEXTS)
        # A stored word among any other text is found.
        found = loop.run_until_complete(store.query(text=f"{before} deploy {after}", mode="keyword", top_k=3))
        assert {"n1", "n2"} <= {m.id for m in found}
        found = loop.run_until_complete(store.query(text=f"{before} ERR_0x7f3a {after}", mode="keyword", top_k=3))
        assert "n2" in {m.id for m in found}

    try:
        check()
        assert loop.run_until_complete(store.count()) == 3
    finally:
        loop.run_until_complete(store.close())
        loop.close()


async def test_file_from_before_keyword_search_is_indexed(tmp_path: Path) -> None:
    # What an earlier version wrote: the two tables, no full-text index, no triggers.
    path = str(tmp_path / "old.db")
    conn = apsw.Connection(path)
    conn.execute(
        "CREATE TABLE ext_collections (name TEXT PRIMARY KEY, vector_size INTEGER NOT NULL);"
        "CREATE TABLE ext_records (collection TEXT NOT NULL REFERENCES ext_collections(name) ON DELETE CASCADE, "
        "id TEXT NOT NULL, embedding BLOB NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL, "
        "PRIMARY KEY (collection, id));"
        "INSERT INTO ext_collections VALUES ('old', 2);"
    )
    conn.execute(
        "INSERT INTO ext_records VALUES ('old', 'a', ?, 'the deploy key rotates', '{}')",
        (array("f", [1.0, 0.0]).tobytes(),),
    )
    conn.close()
    async with SqliteVectorStore(path, collection_name="old", vector_size=2) as store:
        assert [m.id for m in await store.query(text="rotate", mode="keyword")] == ["a"]
        await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0], text="lunch at noon")])
        assert await store.query(text="rotate", mode="keyword") == []
        assert [m.id for m in await store.query(text="noon", mode="keyword")] == ["a"]
