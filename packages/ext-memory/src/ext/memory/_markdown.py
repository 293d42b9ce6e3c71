"""`split_markdown`: Markdown chunked along its structure. A heading starts a new chunk, and a chunk holds whole
paragraphs (blocks between blank lines; a fenced code block is one block) while they fit the same bounds as
`split_text` (words and characters); a block too large alone is cut by `split_text` with its overlap."""

from __future__ import annotations

import re

from ._chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    TextChunk,
    split_text,
    word_spans,
)

__all__ = ["split_markdown"]

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """The blocks of `text` as (start, end, is_heading): runs of non-blank lines, a heading line alone, a fenced
    code block whole (blank lines included; an unclosed fence runs to the end)."""
    blocks: list[tuple[int, int, bool]] = []
    start: int | None = None
    fence: str | None = None
    end = 0
    for match in _LINE.finditer(text):
        line = match.group().rstrip("\n")
        at, end = match.start(), match.start() + len(line)
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            if start is None:
                start = at
            fence = opening.group(1)
            continue
        if not line.strip():
            if start is not None:
                blocks.append((start, _last_end(text, start, at), False))
                start = None
            continue
        if _HEADING.match(line):
            if start is not None:
                blocks.append((start, _last_end(text, start, at), False))
                start = None
            blocks.append((at, end, True))
            continue
        if start is None:
            start = at
    if start is not None:
        blocks.append((start, len(text.rstrip()), False))
    return blocks


def _last_end(text: str, start: int, before: int) -> int:
    """The end of the block starting at `start` whose next line starts at `before` (trailing whitespace dropped)."""
    return max(start, len(text[:before].rstrip()))


def split_markdown(
    text: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
) -> list[TextChunk]:
    """Markdown `text` in chunks that follow its headings and paragraphs, within `split_text`'s bounds.

    - Every heading (`#` to `######`) starts a chunk: a chunk never holds the end of one section and the start of
      the next.
    - Consecutive blocks of one section (paragraphs, lists, fenced code) share a chunk while it stays within
      `chunk_size` words and `max_chunk_chars` characters (a heading is kept with what follows it). Neighbouring
      whole-block chunks do not overlap: a paragraph boundary is a natural cut.
    - A block too large for a chunk alone is split by `split_text` (words, characters, `chunk_overlap`), with the
      blocks of its section pending before it (so a heading stays with the text under it).

    A chunk's text is the original span (`text[chunk.start:chunk.end]`), as with `split_text`.
    """
    split_text("", chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_chunk_chars=max_chunk_chars)
    piece = max(1, max_chunk_chars // chunk_size)
    spans: list[tuple[int, int]] = []
    current: tuple[int, int, int] | None = None  # start, end, words

    def flush() -> None:
        nonlocal current
        if current is not None:
            spans.append((current[0], current[1]))
            current = None

    for start, end, heading in _blocks(text):
        if heading:
            flush()
        words = len(word_spans(text[start:end], piece))
        if words > chunk_size or end - start > max_chunk_chars:
            # Too large alone: split by words from the start of what is pending (a heading stays with its text).
            base = start if current is None else current[0]
            current = None
            for part in split_text(
                text[base:end], chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_chunk_chars=max_chunk_chars
            ):
                spans.append((base + part.start, base + part.end))
            continue
        if current is not None and (current[2] + words > chunk_size or end - current[0] > max_chunk_chars):
            flush()
        current = (start, end, words) if current is None else (current[0], end, current[2] + words)
    flush()
    return [TextChunk(text=text[s:e], index=i, start=s, end=e) for i, (s, e) in enumerate(spans)]
