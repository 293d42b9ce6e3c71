"""The shared rules of keyword and hybrid search: how query text becomes words, and reciprocal rank fusion."""

from __future__ import annotations

import pytest

from ext.core import fuse_rankings, keyword_terms


def test_keyword_terms_are_distinct_words_with_a_letter_or_digit() -> None:
    assert keyword_terms('What does ERR_0x7f3a mean? what "AND" * ( -- NEAR(x)') == [
        "What",
        "does",
        "ERR_0x7f3a",
        "mean?",
        '"AND"',
        "NEAR(x)",
    ]
    assert keyword_terms("?! ... *") == []
    assert keyword_terms("ok " + "x" * 257 + " fine") == ["ok", "fine"]  # a 257-character "word" is left out


def test_keyword_terms_are_bounded_and_linear() -> None:
    words = " ".join(f"w{i}" for i in range(1000))
    assert keyword_terms(words) == [f"w{i}" for i in range(64)]
    # A 4 MB single line (no spaces) is read once and dropped as one over-long word.
    assert keyword_terms("a" * 4_000_000) == []


def test_reciprocal_rank_fusion() -> None:
    fused = fuse_rankings([["a", "b", "c"], ["c", "d"]])
    scores = dict(fused)
    assert [id_ for id_, _ in fused] == ["c", "a", "b", "d"]
    assert scores["c"] == pytest.approx(61 / 2 * (1 / 63 + 1 / 61))
    assert scores["a"] == pytest.approx(0.5)
    assert scores["d"] == pytest.approx(61 / 2 / 62)
    [(first, score)] = fuse_rankings([["x"], ["x"]])
    assert first == "x"
    assert score == pytest.approx(1.0)
    # Ties go by id, so the order is the same on every backend.
    assert [id_ for id_, _ in fuse_rankings([["b"], ["a"]])] == ["a", "b"]
