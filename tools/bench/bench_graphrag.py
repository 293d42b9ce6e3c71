"""GlobalSearchTool / LocalSearchTool vs graphrag's own query API, same index, same loopback model, same run.

Run: ``hatch run ext-tools-graphrag:python tools/bench/bench_graphrag.py [--blocks N] [--block K]``.

The index is the tests' committed fixture (built by ``graphrag index`` over four short documents), copied to a
temporary folder. The loopback OpenAI-protocol server (``ext.testing.graphrag.GraphRagServer``) runs on its own
event loop in a background thread: graphrag's local search embeds the query with a blocking HTTP call, which would
stall a server sharing the caller's loop. Sides, in interleaved blocks (``measure_interleaved``):

- ``api``: ``graphrag.api.global_search`` / ``local_search`` with the index tables already loaded (what graphrag's
  CLI does after reading them), called directly on the caller's loop; it builds its search engine every call;
- ``api (A/A)``: the same call again, the noise control (ratio vs ``api``);
- ``engine``: graphrag's own engine (``graphrag.query.factory.get_*_search_engine``, the one the API builds) built
  once and its ``search(query)`` awaited on the caller's loop (ratio vs ``api``);
- ``ext``: ``tool.run_json({"query": ...})``: argument validation, the hop to the tools' worker loop and back,
  the same engine built once (ratio vs ``engine``: the tool's own overhead).

CPU is this process's CPU time per call, and includes the loopback server's (same process, other thread).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Script-dir import: `python tools/bench/bench_graphrag.py` puts tools/bench on sys.path.
from _harness import Row, measure_interleaved, print_table


def _tests_project() -> Any:
    """The tests' project helpers (packages/ext-tools-graphrag/tests/_project.py): the same world and index."""
    path = Path(__file__).resolve().parents[2] / "packages" / "ext-tools-graphrag" / "tests" / "_project.py"
    spec = importlib.util.spec_from_file_location("ext_tools_graphrag_tests_project", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_project = _tests_project()
API_BASE_ENV: str = _project.API_BASE_ENV
FIXTURE: Path = _project.FIXTURE
responder = _project.responder
os.environ.update(_project.offline_env())  # before graphrag is imported

from ext.testing.graphrag import GraphRagServer  # noqa: E402


@contextmanager
def server_thread() -> Iterator[GraphRagServer]:
    """The loopback server on its own loop in a daemon thread."""
    loop = asyncio.new_event_loop()
    server = GraphRagServer(responder(), record=False)
    thread = threading.Thread(target=loop.run_forever, name="bench-graphrag-server", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def run(blocks: int, block: int) -> list[Row]:
    import graphrag.api as api
    from graphrag.config.load_config import load_config
    from graphrag.data_model.dfs import (
        communities_typed,
        community_reports_typed,
        entities_typed,
        relationships_typed,
        text_units_typed,
    )
    from pandas import read_parquet

    from ext.tools.graphrag import GlobalSearchTool, LocalSearchTool

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, server_thread() as server:
        root = Path(tmp) / "riverton"
        shutil.copytree(FIXTURE, root)
        (root / ".env").write_text("GRAPHRAG_API_KEY=sk-loopback-not-a-secret\n", encoding="utf-8")
        os.environ[API_BASE_ENV] = server.base_url + "/v1"
        cwd = os.getcwd()
        config = load_config(root)  # graphrag's loader changes into the project folder
        os.chdir(cwd)
        out = root / "output"
        entities = entities_typed(read_parquet(out / "entities.parquet"))
        communities = communities_typed(read_parquet(out / "communities.parquet"))
        reports = community_reports_typed(read_parquet(out / "community_reports.parquet"))
        text_units = text_units_typed(read_parquet(out / "text_units.parquet"))
        relationships = relationships_typed(read_parquet(out / "relationships.parquet"))
        global_tool = GlobalSearchTool.from_settings(root)
        local_tool = LocalSearchTool.from_settings(root)

        async def raw_global() -> Any:
            return await api.global_search(
                config=config,
                entities=entities,
                communities=communities,
                community_reports=reports,
                community_level=2,
                dynamic_community_selection=False,
                response_type="multiple paragraphs",
                query="What are the main themes?",
            )

        async def raw_local() -> Any:
            return await api.local_search(
                config=config,
                entities=entities,
                communities=communities,
                community_reports=reports,
                text_units=text_units,
                relationships=relationships,
                covariates=None,
                community_level=2,
                response_type="multiple paragraphs",
                query="Who is Carol?",
            )

        from graphrag.config.embeddings import entity_description_embedding
        from graphrag.query.factory import get_global_search_engine, get_local_search_engine
        from graphrag.query.indexer_adapters import (
            read_indexer_communities,
            read_indexer_entities,
            read_indexer_relationships,
            read_indexer_reports,
            read_indexer_text_units,
        )
        from graphrag.utils.api import get_embedding_store

        global_engine = get_global_search_engine(
            config,
            reports=read_indexer_reports(reports, communities, community_level=2),
            entities=read_indexer_entities(entities, communities, community_level=2),
            communities=read_indexer_communities(communities, reports),
            response_type="multiple paragraphs",
        )
        local_engine = get_local_search_engine(
            config,
            reports=read_indexer_reports(reports, communities, 2),
            text_units=read_indexer_text_units(text_units),
            entities=read_indexer_entities(entities, communities, 2),
            relationships=read_indexer_relationships(relationships),
            covariates={"claims": []},
            response_type="multiple paragraphs",
            description_embedding_store=get_embedding_store(config.vector_store, entity_description_embedding),
        )

        async def engine_global() -> Any:
            return await global_engine.search("What are the main themes?")

        async def engine_local() -> Any:
            return await local_engine.search("Who is Carol?")

        async def ext_global() -> Any:
            return await global_tool.run_json({"query": "What are the main themes?"})

        async def ext_local() -> Any:
            return await local_tool.run_json({"query": "Who is Carol?"})

        Side = Callable[[], Awaitable[Any]]
        cases: list[tuple[str, Side, Side, Side]] = [
            ("global_search", raw_global, engine_global, ext_global),
            ("local_search", raw_local, engine_local, ext_local),
        ]
        for case, raw, engine, ours in cases:
            sides = [("api", raw), ("api (A/A)", raw), ("engine", engine), ("ext", ours)]
            results, cpu = await measure_interleaved(sides, blocks=blocks, block=block, warmup=2)
            api_result, aa, engine_result, ext_result = results
            rows += [
                Row(case, api_result),
                Row(case, aa, baseline=api_result),
                Row(case, engine_result, baseline=api_result),
                Row(case, ext_result, baseline=engine_result),
            ]
            ext_vs_engine = [e / g for e, g in zip(cpu[3], cpu[2], strict=True)]
            print(
                f"{case}: CPU per block, median: A/A {statistics.median(cpu[1]):.2f}x api, "
                f"engine {statistics.median(cpu[2]):.2f}x api, ext {statistics.median(ext_vs_engine):.2f}x engine",
                file=sys.stderr,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--block", type=int, default=5)
    args = parser.parse_args()
    print_table(asyncio.run(run(args.blocks, args.block)))


if __name__ == "__main__":
    main()
