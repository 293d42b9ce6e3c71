"""Keyword query text is user or model input: whatever it holds, PostgreSQL reads it as words (each through
`phraseto_tsquery`), never as tsquery syntax or SQL (no error, no operator, nothing but matches), and the words in it
are still found. Also: a table made before keyword search gets its text column indexed when opened."""

from __future__ import annotations

import asyncio

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from ext.core import VectorRecord
from ext.testing.postgres import PostgresServer
from ext.vectors.pgvector import PgVectorStore

TEXTS = {
    "n1": "The deploy key rotates every ninety days.",
    "n2": "Error ERR_0x7f3a: 'quoted' & deploy:* key | ! expired.",
    "n3": "Lunch is served at noon in the blue kitchen.",
}
# Any character PostgreSQL text can hold (no NUL, no lone surrogate), tsquery's and SQL's syntax characters weighted up.
CHARS = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    st.sampled_from("&|!():*<->'\"\\;%_ ANDOR"),
)
WORDS = st.text(CHARS, max_size=40)


def test_any_text_is_searched_as_words(postgres: PostgresServer) -> None:
    loop = asyncio.new_event_loop()
    store = PgVectorStore(postgres.url, collection_name="keyword-property", vector_size=2)
    records = [VectorRecord(id=i, vector=[1.0, float(n)], text=t) for n, (i, t) in enumerate(TEXTS.items())]

    async def setup() -> None:
        await store.delete_collection()
        await store.create_collection()
        await store.upsert(records)

    loop.run_until_complete(setup())

    @given(before=WORDS, after=WORDS)
    @settings(max_examples=150, deadline=None)
    def check(before: str, after: str) -> None:
        found = loop.run_until_complete(store.query(text=before, mode="keyword")) if before.strip() else []
        assert {m.id for m in found} <= set(TEXTS)
        found = loop.run_until_complete(store.query(text=f"{before} deploy {after}", mode="keyword", top_k=3))
        assert {"n1", "n2"} <= {m.id for m in found}
        found = loop.run_until_complete(store.query(text=f"{before} ERR_0x7f3a {after}", mode="keyword", top_k=3))
        assert "n2" in {m.id for m in found}

    try:
        check()
        assert loop.run_until_complete(store.count()) == 3
    finally:
        loop.run_until_complete(store.delete_collection())
        loop.run_until_complete(store.close())
        loop.close()


async def test_table_from_before_keyword_search_is_indexed(postgres: PostgresServer) -> None:
    store = PgVectorStore(postgres.url, collection_name="made-before-keywords", vector_size=2)
    try:
        await store.delete_collection()
        await store.create_collection()
        await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0], text="the deploy key rotates")])
        # What an earlier version made: the same table without the text-search column.
        async with await psycopg.AsyncConnection.connect(postgres.url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT table_name FROM ext_vector_collections WHERE name = %s", (store.collection_name,)
            )
            row = await cur.fetchone()
            assert row is not None
            await conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN tsv").format(sql.Identifier(row[0])))
        await store.create_collection()
        assert [m.id for m in await store.query(text="rotate", mode="keyword")] == ["a"]
    finally:
        await store.delete_collection()
        await store.close()
