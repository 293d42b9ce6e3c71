"""load_documents on a folder as users have one (every supported type, a binary, an empty file, a non-UTF-8 file, a
10 MB single-line file, a hidden file), Markdown and HTML chunked along their structure, real PDFs read by pypdf,
and VectorMemory's content hashes: re-adding an unchanged file writes nothing, a changed one replaces its chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ext.memory import (
    MemoryDocument,
    MemorySource,
    VectorMemory,
    html_text,
    load_documents,
    split_markdown,
    split_text,
)
from ext.testing.hashing_embedder import HashingEmbedder
from ext.vectors.sqlite import SqliteVectorStore


def pdf_bytes(*pages: str) -> bytes:
    """A minimal, valid PDF (hand-written objects, a correct cross-reference table) with one line of text a page."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        content = 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


MARKDOWN = """# Deploys

The deploy key rotates every ninety days.

## Rollback

Run the rollback job, then page the on-call engineer.
"""
HTML = """<!doctype html><html><head><title>Office</title><style>p { color: red }</style>
<script>var secret = "not text";</script></head>
<body><h1>Office</h1><p>Lunch is served in the <b>blue</b>
kitchen at noon.</p><ul><li>Coffee on floor two</li><li>Tea on floor three</li></ul></body></html>"""
BIG = 10 * 1024 * 1024


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "notes.txt").write_text("Invoices are paid within thirty days.\n", encoding="utf-8")
    (root / "ops.md").write_text(MARKDOWN, encoding="utf-8")
    (root / "sub" / "office.html").write_text(HTML, encoding="utf-8")
    (root / "sub" / "deeper" / "guide.pdf").write_bytes(pdf_bytes("Page one talks about printers.", "Page two: toner."))
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_text("  \n\n\t\n", encoding="utf-8")
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf at all")
    (root / "one-line.log").write_bytes(b"x" * (BIG - 1) + b"\n")
    (root / ".hidden.txt").write_text("never read", encoding="utf-8")
    (root / ".git" / "config").write_text("never read", encoding="utf-8")
    return root


def test_a_folder_with_every_kind_of_file(folder: Path) -> None:
    found = load_documents([folder])
    loaded = {Path(d.source).relative_to(folder.resolve()).as_posix(): d for d in found.documents}
    assert sorted(loaded) == ["notes.txt", "one-line.log", "ops.md", "sub/deeper/guide.pdf", "sub/office.html"]
    assert all(Path(d.source).is_absolute() for d in found.documents)

    assert loaded["notes.txt"].text == "Invoices are paid within thirty days.\n"
    assert loaded["notes.txt"].format == "text"
    assert loaded["ops.md"].format == "markdown" and loaded["ops.md"].text == MARKDOWN
    office = loaded["sub/office.html"]
    assert office.format == "markdown"
    assert office.text == (
        "# Office\n\nLunch is served in the blue kitchen at noon.\n\n- Coffee on floor two\n\n- Tea on floor three"
    )
    assert loaded["sub/deeper/guide.pdf"].text.split() == [
        "Page",
        "one",
        "talks",
        "about",
        "printers.",
        "Page",
        "two:",
        "toner.",
    ]
    assert len(loaded["one-line.log"].text) == BIG

    reasons = {Path(s.path).name: s.reason for s in found.skipped}
    assert reasons == {
        "image.png": "binary (it holds NUL bytes), not text",
        "empty.txt": "empty (no text)",
        "blank.md": "empty (no text)",
        "latin1.txt": "not UTF-8 text (byte 3 is b'\\xe9')",
        "broken.pdf": reasons["broken.pdf"],
    }
    assert reasons["broken.pdf"].startswith("not a readable PDF (")
    assert all("\n" not in reason for reason in reasons.values())  # one line each


def test_include_exclude_and_files_named_directly(folder: Path) -> None:
    only_md = load_documents([folder], include=["*.md", "*.html"])
    assert sorted(Path(d.source).name for d in only_md.documents) == ["office.html", "ops.md"]
    assert [Path(s.path).name for s in only_md.skipped] == ["blank.md"]
    no_sub = load_documents([folder], exclude=["sub", "*.log", "*.png", "latin1.txt", "*.pdf", "*.txt", "*.md"])
    assert no_sub.documents == [] and no_sub.skipped == []
    direct = load_documents([folder / ".hidden.txt", folder / "notes.txt", folder / "notes.txt", folder / "nothing"])
    assert [Path(d.source).name for d in direct.documents] == [".hidden.txt", "notes.txt"]  # named twice, read once
    assert [(Path(s.path).name, s.reason) for s in direct.skipped] == [("nothing", "no such file or folder")]


def test_a_pdf_without_pypdf_is_skipped_with_the_install_hint(folder: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['pypdf'] = None\n"
        "from ext.memory import load_documents\n"
        f"print(load_documents([{str(folder / 'sub' / 'deeper' / 'guide.pdf')!r}]).skipped[0].reason)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "a PDF, and pypdf is not installed (pip install 'ext-memory[pdf]')"


def test_markdown_is_chunked_along_headings_and_paragraphs() -> None:
    chunks = split_markdown(MARKDOWN)
    assert [c.text for c in chunks] == [
        "# Deploys\n\nThe deploy key rotates every ninety days.",
        "## Rollback\n\nRun the rollback job, then page the on-call engineer.",
    ]
    assert all(MARKDOWN[c.start : c.end] == c.text for c in chunks)
    # Paragraphs share a chunk while they fit; a fenced block with blank lines is one block; a big one is cut.
    text = "# A\n\none two\n\nthree four\n\n```\ncode\n\nmore\n```\n\n## B\n\n" + "word " * 25
    chunks = split_markdown(text, chunk_size=10, chunk_overlap=2)
    assert chunks[0].text == "# A\n\none two\n\nthree four\n\n```\ncode\n\nmore\n```"
    assert chunks[1].text.startswith("## B\n\nword") and len(chunks[1].text.split()) == 10
    assert [len(c.text.split()) for c in chunks[1:]] == [10, 10, 10, 3]
    assert all(text[c.start : c.end] == c.text for c in chunks)
    # Within the same bounds as split_text: nothing past max_chunk_chars.
    assert all(len(c.text) <= 40 for c in split_markdown("# T\n\n" + "abcdefghij " * 50, max_chunk_chars=40))


def test_html_text_leaves_out_what_a_reader_does_not_see() -> None:
    assert html_text("<p>a<script>x()</script> b</p><pre>  keep\n  this</pre><p>&amp; &lt;tag&gt;</p>") == (
        "a b\n\n  keep\n  this\n\n& <tag>"
    )


@pytest_asyncio.fixture
async def memory() -> AsyncIterator[tuple[VectorMemory, HashingEmbedder]]:
    embedder = HashingEmbedder(64)
    store = SqliteVectorStore(collection_name="docs", vector_size=64)
    try:
        yield VectorMemory(embedder, store, chunk_size=8, chunk_overlap=2), embedder
    finally:
        await store.close()


async def test_readding_an_unchanged_file_writes_nothing(
    folder: Path, memory: tuple[VectorMemory, HashingEmbedder]
) -> None:
    mem, embedder = memory
    (folder / "one-line.log").unlink()  # the 10 MB file has its own test
    documents = load_documents([folder]).documents
    written = await mem.add(documents)
    rows = await mem.store.count()
    assert rows == len(written) > 0
    calls = len(embedder.calls)
    again = await mem.add(load_documents([folder]).documents)
    assert again == [] and await mem.store.count() == rows and len(embedder.calls) == calls  # nothing embedded

    # A changed file replaces its old chunks (a shorter text leaves none of the old ones behind).
    (folder / "notes.txt").write_text("Invoices are now paid within ten days.", encoding="utf-8")
    [notes] = [d for d in load_documents([folder]).documents if d.source.endswith("notes.txt")]
    rewritten = await mem.add(load_documents([folder]).documents)
    assert rewritten == [f"{notes.source}#0"]
    [record] = await mem.store.get([f"{notes.source}#0"])
    assert record.text == "Invoices are now paid within ten days."

    listed = await mem.sources()
    assert listed == sorted(
        (MemorySource(source=d.source, chunks=len(mem.chunks(d))) for d in load_documents([folder]).documents),
        key=lambda s: s.source,
    )
    assert sum(s.chunks for s in listed) == await mem.store.count()
    assert await mem.remove(notes.source) == 1
    assert notes.source not in {s.source for s in await mem.sources()}


async def test_other_chunking_is_a_change(memory: tuple[VectorMemory, HashingEmbedder]) -> None:
    mem, _ = memory
    doc = MemoryDocument(text=MARKDOWN, source="ops.md", format="markdown")
    assert len(await mem.add([doc])) == len(split_markdown(MARKDOWN, chunk_size=8, chunk_overlap=2))
    assert await mem.add([doc]) == []
    assert len(await mem.add([doc.model_copy(update={"format": "text"})])) == len(
        split_text(MARKDOWN, chunk_size=8, chunk_overlap=2)
    )
    assert await mem.unchanged([doc]) == set()
    assert await mem.unchanged([doc.model_copy(update={"format": "text"})]) == {"ops.md"}


async def test_a_10_mb_single_line_file_is_chunked_and_stored(folder: Path) -> None:
    [document] = load_documents([folder / "one-line.log"]).documents
    embedder = HashingEmbedder(16)
    async with SqliteVectorStore(collection_name="big", vector_size=16) as store:
        mem = VectorMemory(embedder, store)  # the defaults: 1,000 characters a chunk, sharing 200
        written = await mem.add([document])
        assert len(written) == await store.count() == len(mem.chunks(document))
        assert len(written) == pytest.approx(BIG / 800, rel=0.01)
        assert max(len(t) for batch in embedder.calls for t in batch) <= 1000
        assert await mem.add([document]) == []
