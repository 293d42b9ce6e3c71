"""`split_text`: a text in overlapping chunks of at most so many words and characters, cut between whole characters.
`split_markdown` (in `_markdown`) chunks Markdown along its structure within the same bounds."""

from __future__ import annotations

import re
import unicodedata

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_CHUNK_CHARS",
    "TextChunk",
    "check_int",
    "split_text",
    "word_spans",
]

_WORD = re.compile(r"\S+")
DEFAULT_CHUNK_SIZE = 100
"""Words per chunk: about 130 tokens of English prose (about 600 characters), a common retrieval size."""
DEFAULT_CHUNK_OVERLAP = 20
"""Words a chunk shares with the one before (a fifth of it)."""
DEFAULT_MAX_CHUNK_CHARS = 1000
"""Characters per chunk at most, whatever the words. Text of about one token a character (CJK, base64, minified
code) then stays near 1,000 tokens: within every hosted embedder's input (OpenAI's 8,191 tokens) and twice the
512 tokens the smallest embedding models read (they cut the rest); five such chunks fit `MemoryMiddleware`'s
default budget."""

# Characters that continue the one before them: a cut before one would split a letter from its accent or an emoji
# from its modifier. (A cut right after a zero-width joiner would split a joined emoji.)
_JOINERS = frozenset("\u200c\u200d\u034f") | frozenset(map(chr, range(0xFE00, 0xFE10)))
_CUT_BACKTRACK = 8


class TextChunk(BaseModel):
    """One piece of a text: its words, its position among the chunks (`index`) and its character span."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    index: int = Field(ge=0)
    start: int = Field(ge=0, description="Offset of the first character in the whole text.")
    end: int = Field(ge=0, description="Offset just past the last character.")


def check_int(name: str, value: object, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be {what}, got {value!r}")


def _joined(text: str, at: int) -> bool:
    """True when a cut at `at` would separate two code points that make one visible character."""
    here = text[at]
    return (
        here in _JOINERS
        or text[at - 1] == "\u200d"
        or unicodedata.category(here) in ("Mn", "Mc", "Me")  # combining marks
        or "\U0001f3fb" <= here <= "\U0001f3ff"  # emoji skin-tone modifiers
    )


def word_spans(text: str, piece: int) -> list[tuple[int, int]]:
    """The spans of the words of `text`, a run of more than `piece` characters without whitespace counted as one
    word per `piece` characters (cut at most `_CUT_BACKTRACK` characters early to keep a character whole)."""
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        while end - start > piece:
            cut = start + piece
            floor = max(start + 1, cut - _CUT_BACKTRACK)
            while cut > floor and _joined(text, cut):
                cut -= 1
            if _joined(text, cut):  # a sequence longer than the backtrack: cut at the bound after all
                cut = start + piece
            spans.append((start, cut))
            start = cut
        spans.append((start, end))
    return spans


def split_text(
    text: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
) -> list[TextChunk]:
    """`text` in chunks of at most `chunk_size` words and at most `max_chunk_chars` characters; neighbours share
    `chunk_overlap` words. A chunk's text is the original span (`text[chunk.start:chunk.end]`), whitespace kept.

    - A word is a run of non-whitespace. A run longer than `max_chunk_chars // chunk_size` characters (a URL,
      base64, minified code, CJK text without spaces) counts as one word per that many characters, cut between
      code points that do not join (never between a letter and its combining accent, nor inside an emoji
      sequence): so a 3 MB line is chunked like 3 MB of prose.
    - A chunk ends before the word that would make it longer than `max_chunk_chars`. The next chunk starts
      `chunk_overlap` words before the end of this one; after a chunk cut short by characters, the same share of
      its words (`words * chunk_overlap // chunk_size`). It always starts at least one word later, so the work and
      the chunks' total size are linear in the text's length.
    """
    check_int("chunk_size", chunk_size, 1, "a positive number of words")
    check_int("chunk_overlap", chunk_overlap, 0, "a number of words from 0 to chunk_size - 1")
    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap must be a number of words from 0 to chunk_size - 1, got {chunk_overlap!r}")
    check_int("max_chunk_chars", max_chunk_chars, 1, "a positive number of characters")
    words = word_spans(text, max(1, max_chunk_chars // chunk_size))
    chunks: list[TextChunk] = []
    first = 0
    while first < len(words):
        start = words[first][0]
        last = first  # one word always fits: none is longer than max_chunk_chars
        limit = min(len(words), first + chunk_size)
        while last + 1 < limit and words[last + 1][1] - start <= max_chunk_chars:
            last += 1
        end = words[last][1]
        chunks.append(TextChunk(text=text[start:end], index=len(chunks), start=start, end=end))
        if last + 1 == len(words):
            break
        taken = last + 1 - first
        shared = chunk_overlap if taken == chunk_size else taken * chunk_overlap // chunk_size
        first = max(first + 1, last + 1 - shared)
    return chunks
