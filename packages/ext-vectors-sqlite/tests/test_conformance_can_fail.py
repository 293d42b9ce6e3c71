"""The vector-store conformance suite fails exactly the cases a broken store breaks: three deliberately broken
variants of the embedded store run the same suite, and each must fail precisely where it is broken."""

from __future__ import annotations

import textwrap

import pytest

BROKEN = textwrap.dedent(
    """
    from ext.testing.conformance import VectorStoreConformance
    from ext.vectors.sqlite import SqliteVectorStore


    class IgnoresMinScore(SqliteVectorStore):
        async def _query(self, query):
            return await super()._query(query.model_copy(update={"min_score": None}))


    class IgnoresFilterInQueries(SqliteVectorStore):
        async def _query(self, query):
            return await super()._query(query.model_copy(update={"filter": {}}))


    class WritesBeforeChecking(SqliteVectorStore):
        # Writes each record as it goes, checking sizes only per record: a bad batch is half written.
        def check_records(self, records):
            return list(records)

        async def _upsert(self, records):
            for record in records:
                self._check_size(record.vector, "record")
                await super()._upsert([record])


    class IgnoresFilterInKeywordSearch(SqliteVectorStore):
        async def _keyword_query(self, query):
            return await super()._keyword_query(query.model_copy(update={"filter": {}}))


    class ReadsQueryTextAsSyntax(SqliteVectorStore):
        # The words go into FTS5's MATCH unquoted: `NEAR(`, `*`, `"`, `AND` are read as its query language.
        _match = staticmethod(lambda terms: " OR ".join(terms))


    class _Base(VectorStoreConformance):
        store_class = SqliteVectorStore

        async def make_store(self, collection_name, vector_size):
            return self.store_class(collection_name=collection_name, vector_size=vector_size)

        def make_unreachable_store(self):
            return self.store_class("/proc/none/v.db", collection_name="c", vector_size=4)


    class TestIgnoresMinScore(_Base):
        store_class = IgnoresMinScore


    class TestIgnoresFilterInQueries(_Base):
        store_class = IgnoresFilterInQueries


    class TestWritesBeforeChecking(_Base):
        store_class = WritesBeforeChecking


    class TestIgnoresFilterInKeywordSearch(_Base):
        store_class = IgnoresFilterInKeywordSearch


    class TestReadsQueryTextAsSyntax(_Base):
        store_class = ReadsQueryTextAsSyntax
    """
)


def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken_stores=BROKEN)
    reprec = pytester.inline_run(
        "-p", "no:randomly", "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    reports = [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    failed = sorted(r.nodeid.split("::", 1)[1] for r in reports if r.failed)
    assert failed == [
        # the keyword side of hybrid search must honour the filter too
        "TestIgnoresFilterInKeywordSearch::test_hybrid_fuses_both_rankings",
        "TestIgnoresFilterInKeywordSearch::test_keyword_search_ranks_by_words",
        "TestIgnoresFilterInQueries::test_filter_equality_and_in",
        "TestIgnoresFilterInQueries::test_filter_json_kinds",
        # hybrid search fuses the vector ranking, which must honour the filter and min_score
        "TestIgnoresFilterInQueries::test_hybrid_fuses_both_rankings",
        # its last part filters on the largest 64-bit integer
        "TestIgnoresFilterInQueries::test_values_no_store_can_keep_are_refused",
        "TestIgnoresMinScore::test_hybrid_fuses_both_rankings",
        "TestIgnoresMinScore::test_min_score",
        # unquoted, `ERR_0x7f3a` is an FTS5 syntax error
        "TestReadsQueryTextAsSyntax::test_keyword_search_ranks_by_words",
        "TestReadsQueryTextAsSyntax::test_keyword_text_is_never_syntax",
        "TestWritesBeforeChecking::test_bad_input_refused_before_any_io",
        "TestWritesBeforeChecking::test_size_mismatch_and_non_finite_write_nothing",
        "TestWritesBeforeChecking::test_values_no_store_can_keep_are_refused",
        "TestWritesBeforeChecking::test_vectors_float32_cannot_hold_are_refused",
    ]
    assert len([r for r in reports if r.passed]) == 5 * 30 - 14
