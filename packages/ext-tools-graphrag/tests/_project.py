"""The small graphrag project the tests index: a handful of documents, the world the loopback model knows, and
how to write a project's settings so graphrag's models point at the loopback server."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import yaml

from ext.testing.graphrag import GraphRagResponder, GraphRagServer, KnownClaim, KnownEntity, KnownRelationship

FIXTURE = Path(__file__).parent / "fixtures" / "riverton"
"""A committed project indexed by graphrag itself with the loopback model (regenerate: `python _project.py`)."""

ENTITIES = [
    KnownEntity("Alice", "person", "Alice is the baker of Riverton."),
    KnownEntity("Bob", "person", "Bob is a fisherman who sells his catch to Alice."),
    KnownEntity("Riverton", "geo", "Riverton is a small town on the river."),
    KnownEntity("Carol", "person", "Carol runs the Riverton library."),
    KnownEntity("Stonehaven", "geo", "Stonehaven is a quarry village in the hills."),
    KnownEntity("Dmitri", "person", "Dmitri is the quarry master of Stonehaven."),
    KnownEntity("Granite Guild", "organization", "The Granite Guild trades Stonehaven's stone."),
]
RELATIONSHIPS = [
    KnownRelationship("Alice", "Bob", "Bob sells fish to Alice", 3),
    KnownRelationship("Alice", "Riverton", "Alice bakes bread in Riverton", 5),
    KnownRelationship("Carol", "Riverton", "Carol runs the library in Riverton", 4),
    KnownRelationship("Carol", "Alice", "Carol borrows recipes from Alice", 2),
    KnownRelationship("Dmitri", "Stonehaven", "Dmitri runs the Stonehaven quarry", 5),
    KnownRelationship("Granite Guild", "Stonehaven", "The Granite Guild buys Stonehaven's stone", 4),
    KnownRelationship("Dmitri", "Granite Guild", "Dmitri sells stone to the Granite Guild", 3),
]
CLAIMS = [
    KnownClaim("Bob", "Alice", "supply", "true", "Bob brings Alice fish from the river every morning."),
    KnownClaim("Carol", "Alice", "borrowing", "true", "Carol borrows bread recipes from Alice."),
    KnownClaim("Dmitri", "Granite Guild", "trade", "true", "Dmitri sells cut stone to the Granite Guild."),
    KnownClaim("Granite Guild", None, "transport", "suspected", "The Granite Guild carries granite to the cities."),
]
DOCUMENTS = {
    "bakery.txt": "Alice is the baker of Riverton. Every morning Bob brings her fish from the river.",
    "library.txt": "Carol runs the library in Riverton and borrows bread recipes from Alice.",
    "quarry.txt": "Dmitri is the quarry master of Stonehaven. He sells cut stone to the Granite Guild.",
    "guild.txt": "The Granite Guild carries Stonehaven's granite down the hills to the cities.",
}
API_BASE_ENV = "EXT_GRAPHRAG_TEST_API_BASE"


def responder() -> GraphRagResponder:
    return GraphRagResponder(ENTITIES, RELATIONSHIPS, CLAIMS)


def offline_env() -> dict[str, str]:
    """Environment graphrag needs to run offline here: litellm's bundled cost map and tokenizer files."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations, "litellm (installed with graphrag) is missing"
    tokenizers = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "TIKTOKEN_CACHE_DIR": str(tokenizers)}


def point_settings_at_loopback(root: Path) -> None:
    """Rewrite `graphrag init`'s settings.yaml: every model's api_base from ${EXT_GRAPHRAG_TEST_API_BASE}, a
    fake key in .env, claims extracted (graphrag's covariates), gleaning off, every component clustered, and two
    retries (graphrag's minimum for exponential backoff)."""
    settings_file = root / "settings.yaml"
    settings = yaml.safe_load(settings_file.read_text(encoding="utf-8"))
    for group in ("completion_models", "embedding_models"):
        for model in settings[group].values():
            model["api_base"] = "${" + API_BASE_ENV + "}"
            model["retry"] = {"type": "exponential_backoff", "max_retries": 2}
    settings["extract_graph"]["max_gleanings"] = 0
    settings["extract_claims"].update(enabled=True, max_gleanings=0)
    # Two separate towns: cluster every connected component, not only the largest one.
    settings["cluster_graph"]["use_lcc"] = False
    settings_file.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    (root / ".env").write_text("GRAPHRAG_API_KEY=sk-loopback-not-a-secret\n", encoding="utf-8")


async def graphrag_cli(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run graphrag's own CLI (`python -m graphrag ...`) in a child process; returns (exit code, output)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "graphrag",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    return process.returncode if process.returncode is not None else -1, output.decode(errors="replace")


async def build_project(root: Path, server: GraphRagServer) -> None:
    """`graphrag init` + `graphrag index` over DOCUMENTS in `root`, models at `server`."""
    env = {**offline_env(), API_BASE_ENV: server.base_url + "/v1"}
    code, output = await graphrag_cli(
        "init", "--root", str(root), "--model", "gpt-4o-mini", "--embedding", "text-embedding-3-small", env=env
    )
    assert code == 0, output
    point_settings_at_loopback(root)
    for name, text in DOCUMENTS.items():
        (root / "input" / name).write_text(text, encoding="utf-8")
    code, output = await graphrag_cli("index", "--root", str(root), env=env)
    assert code == 0, output[-4000:]


async def _regenerate() -> None:  # pragma: no cover - maintenance helper
    import shutil

    shutil.rmtree(FIXTURE, ignore_errors=True)
    async with GraphRagServer(responder()) as server:
        await build_project(FIXTURE, server)
    for name in ("cache", "logs", "input", "prompts", "update_output"):
        shutil.rmtree(FIXTURE / name, ignore_errors=True)
    (FIXTURE / ".env").unlink()
    for name in ("stats.json", "context.json", "documents.parquet"):
        (FIXTURE / "output" / name).unlink(missing_ok=True)


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(_regenerate())
