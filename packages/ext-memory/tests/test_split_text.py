"""`split_text`: chunks of words with overlap, bounded in characters too, each with its position in the text."""

from __future__ import annotations

import itertools

import pytest

from ext.memory import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_CHUNK_CHARS, split_text


def test_split_text_overlaps_and_keeps_positions() -> None:
    text = "a  bb ccc\ndddd e f g"
    chunks = split_text(text, chunk_size=3, chunk_overlap=1)
    assert [c.text for c in chunks] == ["a  bb ccc", "ccc\ndddd e", "e f g"]
    assert [c.index for c in chunks] == [0, 1, 2]
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert split_text("", chunk_size=3, chunk_overlap=1) == []
    assert [c.text for c in split_text("one two", chunk_size=5, chunk_overlap=0)] == ["one two"]
    with pytest.raises(ValueError, match="chunk_overlap"):
        split_text(text, chunk_size=3, chunk_overlap=3)
    with pytest.raises(ValueError, match="chunk_size"):
        split_text(text, chunk_size=0, chunk_overlap=0)


def test_a_long_line_without_whitespace_is_cut_at_the_character_bound() -> None:
    # 3 MB of base64 on one line (as minified code or an embedded image): one 3,000,000-character chunk before.
    line = "QUJDRA==" * 375_000
    chunks = split_text(line)
    assert DEFAULT_MAX_CHUNK_CHARS == 1000 and (DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP) == (100, 20)
    # Counted as words of 1000 // 100 = 10 characters: chunks of 100 such words (1000 characters) sharing 20.
    assert max(len(c.text) for c in chunks) == 1000
    assert len(chunks) == -(-(len(line) - 1000) // 800) + 1 == 3750
    assert all(line[c.start : c.end] == c.text for c in chunks)
    assert all(b.start == a.end - 200 for a, b in itertools.pairwise(chunks))
    assert chunks[-1].end == len(line)
    # Linear: the chunks hold the text once plus the overlap (a fifth), not a quadratic pile of copies.
    assert sum(len(c.text) for c in chunks) <= len(line) * 5 // 4 + 1000


def test_every_chunk_is_bounded_in_characters_whatever_its_words() -> None:
    prose = " ".join(["word"] * 300)
    url = "https://example.org/" + "a" * 2500
    cjk = "漢字かな交じり文。" * 500  # no spaces: 4,500 characters
    text = f"{prose}\n{url} {prose}\n\n{cjk} end"
    chunks = split_text(text, max_chunk_chars=400)
    assert max(len(c.text) for c in chunks) <= 400
    assert all(text[c.start : c.end] == c.text for c in chunks)
    # Every character of the text is in some chunk except whitespace between them.
    covered: set[int] = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered or text[i].isspace() for i in range(len(text)))
    assert any("漢" in c.text for c in chunks) and chunks[-1].text.endswith("end")


def test_a_cut_keeps_each_character_whole() -> None:
    accented = "e\u0301" * 300  # "é" as a letter and a combining accent
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 200  # a joined emoji, 5 code points
    for text in (accented, family):
        chunks = split_text(text, chunk_size=10, chunk_overlap=2, max_chunk_chars=33)
        assert all(text[c.start : c.end] == c.text for c in chunks)
        for c in chunks:
            assert c.text[0] not in "\u0301\u200d" and c.text[-1] != "\u200d", c
        assert max(len(c.text) for c in chunks) <= 33


def test_a_chunk_cut_short_by_characters_shares_its_share_of_words() -> None:
    words = [f"w{i:07d}" for i in range(40)]  # 8 characters each
    text = " ".join(words)
    # 10 words would be 89 characters: the bound of 50 holds 5 (44), and shares 5 * 4 // 10 = 2 with the next.
    chunks = split_text(text, chunk_size=10, chunk_overlap=4, max_chunk_chars=50)
    assert [c.text.split() for c in chunks[:2]] == [words[0:5], words[3:8]]
    assert all(len(c.text.split()) == 5 for c in chunks[:-1])
    assert chunks[-1].text.split()[-1] == words[-1]
    # Full chunks in words keep the overlap in words.
    full = split_text(text, chunk_size=10, chunk_overlap=4, max_chunk_chars=1000)
    assert [c.text.split() for c in full[:2]] == [words[0:10], words[6:16]]


def test_each_chunk_starts_a_word_later_whatever_the_overlap() -> None:
    # The largest overlap (chunk_size - 1) with words cut to 60 // 50 = 1 character: a chunk a character, each of
    # at most 60 characters, so the work stays within chunk_size times the text (linear for given settings).
    text = " ".join(["abcdefghij"] * 200)
    chunks = split_text(text, chunk_size=50, chunk_overlap=49, max_chunk_chars=60)
    assert max(len(c.text) for c in chunks) <= 60
    assert len(chunks) <= len(text.replace(" ", ""))
    assert all(a.start < b.start for a, b in itertools.pairwise(chunks))


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_chunk_chars must be a positive number of characters, got 0"):
        split_text("x", max_chunk_chars=0)
    with pytest.raises(ValueError, match="max_chunk_chars"):
        split_text("x", max_chunk_chars=True)
