"""`ext memory add|query|list|remove|clear` and `ext chat --memory`, as real processes: on the embedded defaults
(WordLlama embeddings, the SQLite store; offline), SmolLM2's by name, and with an installed provider's embedder on
the loopback OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ext_cli_support import Ran, run_ext

from ext.memory import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    DEFAULT_TOP_K,
    MEMORY_HEADER,
)
from ext.testing.script import Reply
from ext.testing.servers import OpenAIServer

OPENAI_EMBEDDER = ("--embedder", "openai:text-embedding-3-small")


def notes(tmp_path: Path) -> tuple[Path, Path]:
    """Two notes, named by their resolved paths (the sources `ext memory add` stores them under)."""
    tmp_path = tmp_path.resolve()
    ops = tmp_path / "ops.md"
    ops.write_text("The deploy key rotates every ninety days on Monday.", encoding="utf-8")
    lunch = tmp_path / "office.md"
    lunch.write_text("Lunch is served in the blue kitchen at noon.", encoding="utf-8")
    return ops, lunch


def query_lines(ran: Ran) -> list[str]:
    assert ran.code == 0, ran.err
    return ran.out.splitlines()


@pytest.mark.timeout(300)  # nine `ext` processes, each loading Python and the SDK
async def test_add_query_clear_with_a_provider_embedder(
    tmp_path: Path, server: OpenAIServer, openai_env: dict[str, str]
) -> None:
    ops, lunch = notes(tmp_path)
    db = str(tmp_path / "m.db")
    ran = await run_ext("memory", "add", str(ops), str(lunch), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.code == 0, ran.err
    assert ran.out == f"added 2 chunks from 2 file(s) to {db} (2 chunks in all)\n"
    assert "2/2" in ran.err  # the progress bar, on stderr
    embedded = [r.json["input"] for r in server.requests if r.path.endswith("/embeddings")]  # type: ignore[index]
    assert sorted(t for batch in embedded for t in batch) == sorted([lunch.read_text(), ops.read_text()])

    # Adding an unchanged file again embeds nothing; a changed one replaces its chunks.
    requests = len(server.requests)
    ran = await run_ext("memory", "add", str(ops), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.out == f"added 0 chunks from 0 file(s) to {db} (2 chunks in all)\n", ran.err
    assert "1 file(s) unchanged since they were added" in ran.err
    assert len(server.requests) == requests
    ops.write_text("The deploy key rotates every ninety days on Monday at noon.", encoding="utf-8")
    ran = await run_ext("memory", "add", str(ops), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.out == f"added 1 chunks from 1 file(s) to {db} (2 chunks in all)\n", ran.err

    lines = query_lines(
        await run_ext("memory", "query", "deploy key", "--db", db, "-k", "5", *OPENAI_EMBEDDER, env=openai_env)
    )
    assert len(lines) == 2
    by_source = {line.split("#")[0]: line for line in lines}
    _, rest = by_source[str(ops)].split("#", 1)
    position, bounds, score, text = rest.split(" ", 3)
    assert (position, bounds) == ("0", f"[0:{len(ops.read_text())}]")
    assert -1 <= float(score) <= 1 and text.strip() == ops.read_text()

    ran = await run_ext("memory", "query", "noon", "--db", db, "-k", "1", "--json", *OPENAI_EMBEDDER, env=openai_env)
    [hit] = [json.loads(line) for line in query_lines(ran)]
    assert set(hit) == {"source", "chunk", "start", "end", "score", "text"} and hit["chunk"] == 0

    ran = await run_ext("memory", "clear", str(ops), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.out == f"removed 1 chunks from {db}\n", ran.err
    lines = query_lines(await run_ext("memory", "query", "x", "--db", db, *OPENAI_EMBEDDER, env=openai_env))
    assert [line.split("#")[0] for line in lines] == [str(lunch)]
    ran = await run_ext("memory", "clear", "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.out == f"removed 1 chunks from {db}\n", ran.err


@pytest.mark.timeout(300)  # eight `ext` processes, each loading Python and the SDK
async def test_one_file_is_one_source_whatever_its_path(
    tmp_path: Path, server: OpenAIServer, openai_env: dict[str, str]
) -> None:
    """`notes.md`, its absolute path, `../dir/notes.md` and a link to it are one source (before: each spelling stored
    another copy, and `clear notes.md` forgot one)."""
    folder, other = tmp_path / "dir", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    notes = folder / "notes.md"
    notes.write_text("The deploy key rotates every ninety days on Monday.", encoding="utf-8")
    (other / "link.md").symlink_to(notes)
    stored = str(notes.resolve())
    db = str(tmp_path / "m.db")

    async def add(*names: str, cwd: Path) -> Ran:
        return await run_ext("memory", "add", *names, "--db", db, *OPENAI_EMBEDDER, env=openai_env, cwd=cwd)

    ran = await add("notes.md", cwd=folder)
    assert ran.out == f"added 1 chunks from 1 file(s) to {db} (1 chunks in all)\n", ran.err
    for names, cwd in [([str(notes)], other), (["../dir/notes.md", "link.md"], other)]:
        ran = await add(*names, cwd=cwd)  # the same source, unchanged: nothing added
        assert ran.out == f"added 0 chunks from 0 file(s) to {db} (1 chunks in all)\n", (names, ran.err)

    # Stored under the resolved path (--json), shown relative to the current directory when the file is under it.
    ran = await run_ext("memory", "query", "deploy key", "--db", db, "--json", *OPENAI_EMBEDDER, env=openai_env)
    assert [json.loads(line)["source"] for line in query_lines(ran)] == [stored]
    ran = await run_ext("memory", "query", "deploy key", "--db", db, *OPENAI_EMBEDDER, env=openai_env, cwd=folder)
    assert [line.split(" ")[0] for line in query_lines(ran)] == ["notes.md#0"]

    # Any spelling forgets it: added by relative paths, cleared by the absolute one, and the other way round.
    ran = await run_ext("memory", "clear", str(notes), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.out == f"removed 1 chunks from {db}\n", ran.err
    assert (await add(str(notes), cwd=tmp_path)).code == 0
    ran = await run_ext("memory", "clear", "notes.md", "--db", db, *OPENAI_EMBEDDER, env=openai_env, cwd=folder)
    assert ran.out == f"removed 1 chunks from {db}\n", ran.err


def test_the_add_and_query_defaults_are_ext_memorys() -> None:
    """`ext memory add --help` shows its defaults without importing ext-memory: they must stay the library's."""
    from ext.cli._main import memory_add, memory_query

    defaults = {p.name: p.default for p in [*memory_add.params, *memory_query.params]}
    assert (defaults["chunk_size"], defaults["overlap"], defaults["max_chars"], defaults["top_k"]) == (
        DEFAULT_CHUNK_SIZE,
        DEFAULT_CHUNK_OVERLAP,
        DEFAULT_MAX_CHUNK_CHARS,
        DEFAULT_TOP_K,
    )


async def test_chat_with_memory_sends_the_memories(
    tmp_path: Path, server: OpenAIServer, openai_env: dict[str, str]
) -> None:
    ops, _ = notes(tmp_path)
    db = str(tmp_path / "m.db")
    ran = await run_ext("memory", "add", str(ops), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.code == 0, ran.err
    server.enqueue(Reply(text="Every ninety days."))
    ran = await run_ext(
        "chat", "-m", "openai:gpt-4o-mini", "--memory", db, *OPENAI_EMBEDDER, "How often does the key rotate?",
        env=openai_env,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.out == "Every ninety days.\n"
    [chat] = [r for r in server.requests if r.path.endswith("/chat/completions")]
    memories = server.decode(chat).system[0]
    assert memories.startswith(MEMORY_HEADER)
    assert f"| {ops} (chunk 0): The deploy key rotates every ninety days on Monday." in memories


async def test_the_embedded_defaults_offline(tmp_path: Path) -> None:
    """No --embedder, no --db: WordLlama embeddings into memory.db under the data directory, no network."""
    ops, lunch = notes(tmp_path)
    from ext_cli_support import clean_env

    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"))
    ran = await run_ext("memory", "add", str(ops), str(lunch), env=env, timeout=300)
    assert ran.code == 0, ran.err
    db = tmp_path / "data" / "ext" / "memory.db"
    assert ran.out == f"added 2 chunks from 2 file(s) to {db} (2 chunks in all)\n"
    lines = query_lines(await run_ext("memory", "query", "When is lunch served?", "-k", "1", env=env, timeout=300))
    assert [line.split("#")[0] for line in lines] == [str(lunch)]


async def test_bad_input_fails_before_any_request(
    tmp_path: Path, server: OpenAIServer, openai_env: dict[str, str]
) -> None:
    db = str(tmp_path / "m.db")
    ran = await run_ext("memory", "add", str(tmp_path / "missing.txt"), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.code == 1 and "missing.txt: no such file or folder" in ran.err

    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    ran = await run_ext("memory", "add", str(latin1), "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.code == 1 and "latin1.txt: not UTF-8 text (byte 3 is b'\\xe9')" in ran.err, ran.err
    assert "nothing to add (1 file(s) skipped)" in ran.err and "Traceback" not in ran.err

    ran = await run_ext(
        "memory", "add", str(latin1), "--chunk-size", "10", "--overlap", "10", "--db", db, env=openai_env
    )
    assert ran.code == 1 and "--chunk-size/--overlap/--max-chars: chunk_overlap" in ran.err, ran.err
    ran = await run_ext("memory", "add", str(latin1), "--max-chars", "0", "--db", db, env=openai_env)
    assert ran.code == 1 and "max_chunk_chars must be a positive number of characters, got 0" in ran.err, ran.err

    ran = await run_ext("memory", "query", "x", "--db", db, *OPENAI_EMBEDDER, env=openai_env)
    assert ran.code == 1 and f"no memory at {db}" in ran.err and "ext memory add" in ran.err

    ops, _ = notes(tmp_path)
    ran = await run_ext("memory", "add", str(ops), "--embedder", "anthropic:claude", "--db", db, env=openai_env)
    assert ran.code == 1 and "ext-models-anthropic has no embedding client" in ran.err, ran.err

    ran = await run_ext("memory", "add", str(ops), "--embedder", "nosuch:model", "--db", db, env=openai_env)
    assert ran.code == 1 and "no installed provider 'nosuch'" in ran.err and "pip install -e" in ran.err

    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", *OPENAI_EMBEDDER, "hi", env=openai_env)
    assert ran.code == 1 and "--collection and --embedder choose the memory of --memory" in ran.err

    assert server.requests == []
    assert not (tmp_path / "m.db").exists()


def write_folder(root: Path) -> Path:
    """Notes as users have them: Markdown, HTML and text in nested folders, a binary, an empty file, a draft."""
    root = root.resolve()
    (root / "docs" / "team").mkdir(parents=True)
    (root / "docs" / "ops.md").write_text(
        "# Deploys\n\nThe deploy key rotates every ninety days.\n\n## Rollback\n\nRun the rollback job first.\n",
        encoding="utf-8",
    )
    (root / "docs" / "team" / "office.html").write_text(
        "<html><body><h1>Office</h1><p>Lunch is served in the blue kitchen at noon.</p></body></html>",
        encoding="utf-8",
    )
    (root / "docs" / "team" / "draft.txt").write_text("A draft nobody should read.", encoding="utf-8")
    (root / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (root / "docs" / "empty.txt").write_text("", encoding="utf-8")
    return root / "docs"


async def test_folders_list_and_remove_on_the_default_embedder(tmp_path: Path) -> None:
    from ext_cli_support import clean_env

    docs = write_folder(tmp_path)
    db = str(tmp_path / "m.db")
    env = clean_env()
    ran = await run_ext("memory", "add", str(docs), "--exclude", "draft*", "--db", db, env=env)
    assert ran.code == 0, ran.err
    assert ran.out == f"added 3 chunks from 2 file(s) to {db} (3 chunks in all)\n"  # ops.md: two sections
    assert f"skipped {docs / 'logo.png'}: binary (it holds NUL bytes), not text" in ran.err
    assert f"skipped {docs / 'empty.txt'}: empty (no text)" in ran.err
    assert "draft" not in ran.err and "Traceback" not in ran.err

    ran = await run_ext("memory", "add", str(docs), "--include", "*.md", "--include", "*.html", "--db", db, env=env)
    assert ran.out == f"added 0 chunks from 0 file(s) to {db} (3 chunks in all)\n", ran.err

    ran = await run_ext("memory", "list", "--db", db, env=env, cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert ran.out.splitlines() == ["      2  docs/ops.md", "      1  docs/team/office.html"]
    assert "2 source(s), 3 chunks" in ran.err
    ran = await run_ext("memory", "list", "--json", "--db", db, env=env)
    assert [json.loads(line) for line in ran.out.splitlines()] == [
        {"source": str(docs / "ops.md"), "chunks": 2},
        {"source": str(docs / "team" / "office.html"), "chunks": 1},
    ]

    lines = query_lines(await run_ext("memory", "query", "When is lunch?", "-k", "1", "--db", db, env=env))
    assert lines[0].startswith(f"{docs / 'team' / 'office.html'}#0 ")

    ran = await run_ext("memory", "remove", "nothing.md", "--db", db, env=env)
    assert ran.code == 1 and "nothing.md: no such source" in ran.err and "ext memory list" in ran.err
    ran = await run_ext("memory", "remove", "docs/team", "--db", db, env=env, cwd=tmp_path)  # a folder
    assert ran.out == f"removed 1 chunks of 1 source(s) from {db}\n", ran.err
    ran = await run_ext("memory", "remove", "ops.md", "--db", db, env=env, cwd=docs)
    assert ran.out == f"removed 2 chunks of 1 source(s) from {db}\n", ran.err
    ran = await run_ext("memory", "list", "--db", db, env=env)
    assert ran.out == "" and "the memory is empty" in ran.err


@pytest.mark.timeout(300)  # SmolLM2 through llama.cpp: seconds per chunk
async def test_smollm2_stays_available_by_name(tmp_path: Path) -> None:
    from ext_cli_support import clean_env

    ops, _ = notes(tmp_path)
    db = str(tmp_path / "m.db")
    env = clean_env()
    ran = await run_ext("memory", "add", str(ops), "--embedder", "smollm2", "--db", db, env=env, timeout=300)
    assert ran.code == 0, ran.err
    lines = query_lines(
        await run_ext("memory", "query", "key", "--embedder", "smollm2", "--db", db, env=env, timeout=300)
    )
    assert [line.split("#")[0] for line in lines] == [str(ops)]
    # The collection holds SmolLM2's 576-dimension vectors: the default (WordLlama, 256) says what to do.
    ran = await run_ext("memory", "query", "key", "--db", db, env=env)
    assert ran.code == 1 and "--embedder smollm2" in ran.err, ran.err
