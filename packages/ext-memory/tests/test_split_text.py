"""`split_text`: chunks of words with overlap, each with its position in the text."""

from __future__ import annotations

import pytest

from ext.memory import split_text


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
