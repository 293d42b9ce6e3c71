"""`load_documents`: files and folders as users have them, read into `MemoryDocument`s for `VectorMemory.add`.

Plain text, Markdown (chunked along headings and paragraphs), HTML (its text, through the standard library's
`html.parser`, headings kept as Markdown headings so they chunk the same way) and PDF (the text of each page,
through `pypdf`, the `pdf` extra). Anything else (a binary, an empty file, text that is not UTF-8, a PDF without a
text layer, an unreadable file) is skipped with a one-line reason: loading never raises for a file's content.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from ._memory import DocumentFormat, MemoryDocument

__all__ = ["DEFAULT_MAX_FILE_BYTES", "LoadedDocuments", "SkippedFile", "html_text", "load_documents"]

DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
"""Files larger than this are skipped (64 MB)."""
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
_SNIFF = 8192


@dataclass(frozen=True)
class SkippedFile:
    """A file `load_documents` did not load, and why (one line)."""

    path: str
    reason: str


@dataclass
class LoadedDocuments:
    """What `load_documents` found: the documents (one per file, its resolved path as source) and the files skipped."""

    documents: list[MemoryDocument] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)


def load_documents(
    paths: Iterable[str | os.PathLike[str]],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> LoadedDocuments:
    """Read `paths`: each file, and every file under each folder (recursively, in name order; hidden files and
    folders, whose names start with a dot, are left out of folder walks). A file's source is its resolved absolute
    path, and a file reached twice is read once.

    `include` and `exclude` are glob patterns (`*.md`, `drafts/*`) for the files found in folders, matched against
    the path relative to the folder and against the file's name: with `include`, only files matching one are read;
    files and folders matching an `exclude` pattern are left out. Files named directly are always read.

    A missing path and a file that cannot be a document are in `skipped` with the reason; nothing raises.
    """
    found = LoadedDocuments()
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files: Iterable[Path] = _walk(path, include, exclude)
        elif path.exists():
            files = [path]
        else:
            found.skipped.append(SkippedFile(str(path), "no such file or folder"))
            continue
        for file in files:
            resolved = file.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            document = _load(file, resolved, max_bytes)
            if isinstance(document, SkippedFile):
                found.skipped.append(document)
            else:
                found.documents.append(document)
    return found


def _walk(folder: Path, include: Sequence[str], exclude: Sequence[str]) -> Iterable[Path]:
    for root, dirs, names in os.walk(folder):  # links to folders are not followed: no cycles
        here = Path(root)
        relative = here.relative_to(folder)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and not _matches((relative / d).as_posix(), d, exclude)
        )
        for name in sorted(names):
            rel = (relative / name).as_posix()
            if name.startswith(".") or _matches(rel, name, exclude):
                continue
            if include and not _matches(rel, name, include):
                continue
            yield here / name


def _matches(relative: str, name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def _load(file: Path, resolved: Path, max_bytes: int) -> MemoryDocument | SkippedFile:
    shown = str(file)
    if not file.is_file():
        return SkippedFile(shown, "not a regular file")
    try:
        size = file.stat().st_size
        if size > max_bytes:
            return SkippedFile(shown, f"larger than {max_bytes // (1024 * 1024)} MB ({size} bytes)")
        data = file.read_bytes()
    except OSError as exc:
        return SkippedFile(shown, f"cannot read it: {exc.strerror or exc}")
    suffix = file.suffix.lower()
    if suffix == ".pdf" or data.startswith(b"%PDF-"):
        text: str | SkippedFile = _pdf_text(file)
        form: DocumentFormat = "text"
    else:
        if b"\0" in data[:_SNIFF]:
            return SkippedFile(shown, "binary (it holds NUL bytes), not text")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return SkippedFile(shown, f"not UTF-8 text (byte {exc.start} is {data[exc.start : exc.start + 1]!r})")
        form = "markdown" if suffix in MARKDOWN_SUFFIXES else "text"
        if suffix in HTML_SUFFIXES:
            text, form = html_text(text), "markdown"
    if isinstance(text, SkippedFile):
        return SkippedFile(shown, text.reason)
    if not text.strip():
        return SkippedFile(shown, "empty (no text)")
    return MemoryDocument(text=text, source=str(resolved), format=form)


def _pdf_text(file: Path) -> str | SkippedFile:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        return SkippedFile(str(file), "a PDF, and pypdf is not installed (pip install 'ext-memory[pdf]')")
    try:
        reader = PdfReader(file)
        if reader.is_encrypted:
            return SkippedFile(str(file), "an encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        # pypdf reads damaged files leniently and raises these for what it cannot mend.
        return SkippedFile(str(file), f"not a readable PDF ({type(exc).__name__}: {str(exc)[:80]})")
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not text:
        return SkippedFile(str(file), "a PDF without a text layer (scanned pages?)")
    return text


# Elements whose content is not text a reader sees.
_HIDDEN = frozenset({"script", "style", "head", "noscript", "template", "svg", "math"})
# Elements that end a paragraph.
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "aside", "header", "footer", "nav", "ul", "ol", "li", "dl", "dt",
        "dd", "table", "tr", "blockquote", "pre", "figure", "figcaption", "form", "fieldset", "address", "hr", "br",
        "h1", "h2", "h3", "h4", "h5", "h6", "title", "body", "html",
    }
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _TextExtractor(HTMLParser):
    """The visible text of an HTML page: a blank line between blocks, `#` marks before headings, cells and items
    on their own lines; whitespace inside a paragraph collapsed (except in `pre`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._current: list[str] = []
        self._hidden = 0
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag in _BLOCKS or tag in ("td", "th"):
            self._end_paragraph()
            if tag in _HEADINGS:
                self._current.append("#" * _HEADINGS[tag] + " ")
            elif tag == "li":
                self._current.append("- ")
            elif tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BLOCKS or tag in ("td", "th"):
            self._end_paragraph()
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self._end_paragraph()

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._current.append(data)

    def _end_paragraph(self) -> None:
        text = "".join(self._current)
        text = text.strip("\n") if self._pre else " ".join(text.split())
        if text.strip("#- "):
            self.paragraphs.append(text)
        self._current = []

    def text(self) -> str:
        self._end_paragraph()
        return "\n\n".join(self.paragraphs)


def html_text(html: str) -> str:
    """The text a reader sees in `html` (scripts, styles and the head left out), paragraphs separated by a blank
    line and headings marked as in Markdown (`## Title`), so that `split_markdown` chunks it along them."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return parser.text()
