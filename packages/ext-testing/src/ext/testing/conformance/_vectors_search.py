"""The keyword and hybrid cases of the vector-store conformance suite (`VectorStoreConformance` includes them).

A store declares what it can do in `search_modes`. Where it declares `"keyword"` and `"hybrid"` the cases check
ranking, fusion, filters and that query text is never read as syntax; where it does not, that it refuses both
modes clearly, before reaching its backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from ext.core import BaseVectorStore, VectorRecord

QUERY = [1.0, 0.0, 0.0, 0.0]

# Texts a query's words can hit; vectors far from QUERY, so only keyword search finds them first.
NOTES = [
    VectorRecord(
        id="n1", vector=[0.0, 0.0, 0.0, 1.0], text="The deploy key rotates every ninety days.", metadata={"kind": "ops"}
    ),
    VectorRecord(
        id="n2", vector=[0.0, 0.0, 1.0, 1.0], text="Error ERR_0x7f3a: the deploy key expired.", metadata={"kind": "err"}
    ),
    VectorRecord(
        id="n3",
        vector=[0.0, 1.0, 1.0, 1.0],
        text="Lunch is served at noon in the blue kitchen.",
        metadata={"kind": "x"},
    ),
]

# Query texts that are syntax in FTS5 or tsquery (or SQL), or odd Unicode: each must search for its words, never
# raise, never change anything.
ODD_TEXTS = [
    '"',
    '""',
    '"deploy',
    "deploy AND",
    "OR deploy",
    "NOT",
    "NEAR(deploy key)",
    "deploy*",
    "*",
    "^deploy",
    "text:deploy",
    "-deploy",
    "deploy & | ! :* <-> (",
    "'); DROP TABLE ext_records; --",
    "{deploy key}",
    "\u2028\u00a0deploy\u200b",
    "ﬁ ǅ ß İ",
    "😀 deploy",
    "a" * 300,
]


def _has_keyword(store: BaseVectorStore[Any]) -> bool:
    return "keyword" in store.search_modes


class SearchConformance:
    """Keyword and hybrid cases; see the module docstring. Mixed into `VectorStoreConformance`."""

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        raise NotImplementedError

    async def test_search_modes_declared(self, empty: BaseVectorStore[Any]) -> None:
        modes = empty.search_modes
        assert "vector" in modes
        assert modes <= {"vector", "keyword", "hybrid"}
        # Keyword search and hybrid search come together: fusion needs both rankings.
        assert ("keyword" in modes) == ("hybrid" in modes)

    async def test_modes_not_declared_are_refused_before_any_io(self) -> None:
        store = self.make_unreachable_store()
        try:
            with pytest.raises(ValueError, match=r"mode must be one of \['vector', 'keyword', 'hybrid'\]"):
                await store.query(QUERY, mode="fuzzy")  # type: ignore[arg-type]
            if _has_keyword(store):
                return
            name = type(store).__name__
            with pytest.raises(ValueError, match=f"{name} does not support keyword search"):
                await store.query(text="deploy", mode="keyword")
            with pytest.raises(ValueError, match=f"{name} does not support hybrid search"):
                await store.query(QUERY, text="deploy", mode="hybrid")
        finally:
            await store.close()

    async def test_search_arguments_checked(self, store: BaseVectorStore[Any]) -> None:
        with pytest.raises(ValueError, match="text is used in keyword and hybrid mode only"):
            await store.query(QUERY, text="alpha")
        with pytest.raises(ValueError, match="a vector is required in vector mode"):
            await store.query()
        if not _has_keyword(store):
            return
        with pytest.raises(ValueError, match="keyword mode takes no vector"):
            await store.query(QUERY, text="alpha", mode="keyword")
        with pytest.raises(ValueError, match="min_score is a cosine-similarity floor"):
            await store.query(text="alpha", mode="keyword", min_score=0.5)
        with pytest.raises(ValueError, match="text must be a non-empty string in keyword mode"):
            await store.query(text="  ", mode="keyword")
        with pytest.raises(ValueError, match="a vector is required in hybrid mode"):
            await store.query(text="alpha", mode="hybrid")
        with pytest.raises(ValueError, match="text must be a non-empty string in hybrid mode"):
            await store.query(QUERY, mode="hybrid")
        with pytest.raises(ValueError, match="query text must not contain NUL"):
            await store.query(text="a\x00b", mode="keyword")
        with pytest.raises(ValueError, match="top_k"):
            await store.query(text="alpha", mode="keyword", top_k=0)

    async def test_keyword_search_ranks_by_words(self, store: BaseVectorStore[Any]) -> None:
        if not _has_keyword(store):
            return
        await store.upsert(NOTES)
        found = await store.query(text="ERR_0x7f3a", mode="keyword")
        assert [m.id for m in found] == ["n2"]
        assert found[0].score == 1.0
        assert found[0].text == NOTES[1].text
        assert found[0].metadata == {"kind": "err"}
        # Any of the words matches; stemming finds "rotation" in "rotates"; a record with more of them ranks first.
        assert [m.id for m in await store.query(text="deploy key rotation?", mode="keyword")] == ["n1", "n2"]
        assert [m.id for m in await store.query(text="deploy", mode="keyword", top_k=1)] != []
        assert await store.query(text="zebra", mode="keyword") == []
        # The filter applies before the ranking is cut.
        matches = await store.query(text="deploy rotates", mode="keyword", top_k=1, filter={"kind": "err"})
        assert [m.id for m in matches] == ["n2"]
        # An update replaces the text that keyword search sees; a delete removes it.
        await store.upsert([NOTES[1].model_copy(update={"text": "Error ERR_0x1111 is new."})])
        assert await store.query(text="ERR_0x7f3a", mode="keyword") == []
        assert [m.id for m in await store.query(text="ERR_0x1111", mode="keyword")] == ["n2"]
        await store.delete(["n2"])
        assert await store.query(text="ERR_0x1111", mode="keyword") == []

    async def test_keyword_text_is_never_syntax(self, store: BaseVectorStore[Any]) -> None:
        if not _has_keyword(store):
            return
        await store.upsert(NOTES)
        for text in ODD_TEXTS:
            found = await store.query(text=text, mode="keyword")
            assert {m.id for m in found} <= {"n1", "n2", "n3"}, text
        assert await store.count() == 8
        # The words around the syntax are still searched for.
        for text in ("deploy*", "^deploy", "NEAR(deploy key)", "-deploy", "😀 deploy"):
            assert {m.id for m in await store.query(text=text, mode="keyword")} >= {"n1", "n2"}, text

    async def test_hybrid_fuses_both_rankings(self, store: BaseVectorStore[Any]) -> None:
        if not _has_keyword(store):
            return
        # Vector ranking: a, b, c, d, e. Keyword ranking: e. Reciprocal rank fusion (k = 60, scaled so first in
        # both is 1.0): e = 61/2 * (1/65 + 1/61), a = 61/2 * 1/61, b = 61/2 * 1/62.
        found = await store.query(QUERY, text="epsilon", mode="hybrid", top_k=3)
        assert [m.id for m in found] == ["e", "a", "b"]
        expected = [61 / 2 * (1 / 65 + 1 / 61), 0.5, 61 / 2 / 62]
        assert [m.score for m in found] == pytest.approx(expected, rel=1e-9)
        assert found[0].text == "epsilon"
        assert found[0].metadata == {"lang": "en", "flag": False}
        # First in both rankings scores 1.0.
        assert (await store.query(QUERY, text="alpha", mode="hybrid", top_k=1))[0].score == pytest.approx(1.0)
        # Filters apply inside both rankings: e (en) is not a candidate for lang=fr.
        assert [m.id for m in await store.query(QUERY, text="epsilon", mode="hybrid", filter={"lang": "fr"})] == ["b"]
        # min_score cuts the vector ranking only; the keyword match stays.
        found = await store.query(QUERY, text="epsilon", mode="hybrid", min_score=0.8)
        assert [m.id for m in found] == ["a", "e", "b"]
        # Text without a searchable word: the vector ranking alone.
        assert [m.id for m in await store.query(QUERY, text="?!", mode="hybrid", top_k=2)] == ["a", "b"]
